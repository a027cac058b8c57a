"""What one MESSAGE frame of each broker costs stomp.py's own reader (issue 38).

A topic subscriber's stream is captured from each broker (bench/stomp.py's private
instances: STOMP 1.0, ``ack:auto``, 1 KB non-persistent bodies as stomp.py sends them),
then replayed through stomp.py's reader (``BaseTransport.__read_frames`` over 16 KB
reads, as its socket reads them) with a listener that counts the frames: the client's CPU
a delivery, which in bench/stomp.py's topic 1→4 is most of the CPU spent.

    .venv/bin/python bench/stomp_client_cost.py --brokers ours,stock,activemq --save /tmp/f
    .venv/bin/python bench/stomp_client_cost.py --replay /tmp/f/ours.bin --repeat 3

Under callgrind, the difference between ``--repeat 3`` and ``--repeat 1`` of a replay,
over twice the frames, is the instructions a frame (load does not move it).
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# This file is in bench/, whose stomp.py must not hide the stomp.py package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import stomp  # noqa: E402
from stomp.transport import BaseTransport  # noqa: E402

READ = 16384  # stomp.py's recv size


def capture(port: int, count: int) -> bytes:
    """What a raw STOMP 1.0 topic subscriber reads while stomp.py sends ``count``."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(60)

    def until(token: bytes) -> None:
        got = b""
        while token not in got:
            got += s.recv(65536)

    s.sendall(b"CONNECT\nlogin:guest\npasscode:guest\n\n\x00")
    until(b"\x00")
    s.sendall(b"SUBSCRIBE\ndestination:/topic/capture\nid:s0\nack:auto\nreceipt:r\n\n\x00")
    until(b"RECEIPT")
    prod = stomp.Connection10([("127.0.0.1", port)])
    prod.connect("guest", "guest", wait=True)
    for _ in range(count):
        prod.send("/topic/capture", "x" * 1024, headers={"persistent": "false"})
    got = b""
    # (ActiveMQ ends a frame with NUL and a newline.)
    while got.count(b"MESSAGE\n") < count or not got.rstrip(b"\n").endswith(b"\x00"):
        got += s.recv(65536)
    prod.disconnect()
    s.close()
    return got


class _Count(stomp.ConnectionListener):
    frames = 0

    def on_message(self, frame: Any) -> None:
        _Count.frames += 1


class _Replay(BaseTransport):
    """stomp.py's transport reading from a list of chunks instead of a socket."""

    def __init__(self) -> None:
        super().__init__()
        self.running = True
        self.blocking = False  # an empty read ends __read, as a TLS socket's does
        self.chunks: list[bytes] = []
        self.at = 0

    def receive(self) -> bytes:
        if self.at == len(self.chunks):
            return b""
        self.at += 1
        return self.chunks[self.at - 1]


def replay(data: bytes, repeat: int) -> tuple[int, float]:
    """Frames read and CPU seconds for ``repeat`` passes over ``data``."""
    t = _Replay()
    t.set_listener("count", _Count())
    t.chunks = [data[i : i + READ] for i in range(0, len(data), READ)]
    read = t._BaseTransport__read_frames  # type: ignore[attr-defined]
    _Count.frames = 0
    t0 = time.process_time()
    for _ in range(repeat):
        t.at = 0
        while t.at < len(t.chunks):
            read()
    return _Count.frames, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="ours,stock,activemq")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--save", type=Path, help="keep the captured streams here (NAME.bin)")
    ap.add_argument("--replay", type=Path, help="only replay this captured stream")
    args = ap.parse_args()
    if args.replay:
        frames, cpu = replay(args.replay.read_bytes(), args.repeat)
        print(f"{frames} frames, {1e6 * cpu / frames:.1f} µs a frame")
        return
    from bench.stomp import serving  # the brokers as bench/stomp.py runs them

    for name in [n for n in args.brokers.split(",") if n]:
        with tempfile.TemporaryDirectory(prefix="stomp-client-cost-") as tmp:
            with serving(name, Path(tmp)) as (_, port):
                data = capture(port, args.count)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"{name}.bin").write_bytes(data)
        head = data[: data.index(b"\n\n")].decode().split("\n")
        frames, cpu = replay(data, args.repeat)
        print(
            f"{name}: {len(head) - 1} header lines ({', '.join(h.split(':')[0] for h in head[1:])}); "
            f"{1e6 * cpu / frames:.1f} µs a frame"
        )


if __name__ == "__main__":
    main()
