"""The HTTP tunnel's request reader in process: broker/protocol/http1.py against h11.

    .venv/bin/python bench/http1_reader.py                 # 10,000 requests, best of 5
    .venv/bin/python bench/http1_reader.py --count 50000

What the httpjms service does per request, without sockets: cut the stream into
requests (GET pulls and POSTs of one 1 KB JMQ packet, headers as the stock client's
``HttpURLConnection`` writes them, kept alive) and write an empty 200 answer, once with
the hand-written :class:`~broker.protocol.http1.RequestReader` and ``response``, once
with an ``h11.Connection`` (h11 is installed as uvicorn's dependency).  Prints
CPU microseconds per request (``time.process_time``), the best of the repeats.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import h11

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.protocol.http1 import RequestReader, response  # noqa: E402

ACCEPT = b"Accept: text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2\r\n"
POST = (
    b"POST /imqTunnel?Type=push&ConnId=1234 HTTP/1.1\r\n"
    b"Content-Type: application/octet-stream\r\nUser-Agent: Java/17.0.9\r\n"
    b"Host: 127.0.0.1:7675\r\n" + ACCEPT + b"Connection: keep-alive\r\n"
    b"Content-Length: 1100\r\n\r\n" + bytes(1100)
)
GET = (
    b"GET /imqTunnel?Type=pull&ConnId=1234 HTTP/1.1\r\nUser-Agent: Java/17.0.9\r\n"
    b"Host: 127.0.0.1:7675\r\n" + ACCEPT + b"Connection: keep-alive\r\n\r\n"
)


def hand_written(reads: list[bytes]) -> int:
    reader = RequestReader(1 << 20)
    n = 0
    for data in reads:
        for req in reader.feed(data):
            response(200, b"", keep_alive=req.keep_alive)
            n += 1
    return n


def with_h11(reads: list[bytes]) -> int:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=16 * 1024)
    answer = h11.Response(status_code=200, headers=[("Content-Length", "0")])
    n = 0
    body: list[bytes] = []
    for data in reads:
        conn.receive_data(data)
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA or ev is h11.PAUSED:
                break
            if isinstance(ev, h11.Request):
                body = []
            elif isinstance(ev, h11.Data):
                body.append(ev.data)
            elif isinstance(ev, h11.EndOfMessage):
                b"".join(body)
                conn.send(answer)
                conn.send(h11.EndOfMessage())
                conn.start_next_cycle()
                n += 1
    return n


def best(fn: Callable[[list[bytes]], int], reads: list[bytes], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        if fn(reads) != len(reads):
            sys.exit(f"{fn.__name__}: lost requests")
        times.append(time.process_time() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    reads = [POST if i % 2 else GET for i in range(args.count)]
    for fn in (hand_written, with_h11):
        t = best(fn, reads, args.repeat)
        print(f"{fn.__name__:12s} {1e6 * t / args.count:7.2f} us/request ({args.count:,} requests)")


if __name__ == "__main__":
    main()
