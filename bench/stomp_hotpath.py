"""The STOMP engine's own CPU per message, in process: no sockets, no client, no loop.

    .venv/bin/python bench/stomp_hotpath.py                  # every case, 5 repeats each
    .venv/bin/python bench/stomp_hotpath.py --cases topic --count 20000 --repeat 9
    .venv/bin/python bench/stomp_hotpath.py --profile /tmp/st.prof   # cProfile of one repeat
    .venv/bin/python bench/stomp_hotpath.py --no-decode   # the client's decoding left out
    .venv/bin/python bench/stomp_hotpath.py --cases queue-client --ack-reads each

A real :class:`~broker.server.broker.Broker` (never started) with
:class:`~broker.engine.stomp.StompEngine` objects driven the way broker/server/stomp.py
drives them: the producer's SEND frames, written as stomp.py writes them on a STOMP 1.0
connection (``destination``, ``persistent:false``, ``content-length``, 1 KB body), are
fed in 32 KB reads (``READ_SLICE``); after each read every consumer's frames are taken
(``data_to_send``, then ``after_write`` as the driver does after a write), decoded as a
client would and, for ``queue-client``, each MESSAGE acknowledged with its own ACK
(``message-id`` and ``subscription``, as bench/stomp.py's client does).  Cases are
bench/stomp.py's: ``queue-auto``, ``queue-client``, ``topic`` (one producer, four
``ack:auto`` subscribers) and ``receipts`` (persistent sends, each with a receipt, one
per read: the store is not started, so this is the engine's part only).

What it prints is the process CPU time per message sent (``time.process_time``), median
and range over the repeats, with the client's decoding timed apart and left out: the
broker's per-message work in Python, which on a 2-core machine shared with the client
decides its throughput (bench/stomp.py).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

# No database is touched: a Broker that is never started writes no rows.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from bench.hotpath import report_cases  # noqa: E402
from broker.config import BrokerConfig  # noqa: E402
from broker.engine import RunBlocking  # noqa: E402
from broker.engine.stomp import StompEngine  # noqa: E402
from broker.protocol.stomp import FrameReader, encode_frame  # noqa: E402
from broker.security.digest import md5str  # noqa: E402
from broker.security.filerepo import FileUserRepository  # noqa: E402
from broker.server.broker import Broker  # noqa: E402
from broker.server.connection import READ_SLICE  # noqa: E402
from broker.server.services import Service  # noqa: E402

CASES = ("queue-auto", "queue-client", "topic", "receipts")


class Conn:
    """One STOMP 1.0 connection's engine, played as the driver plays it."""

    def __init__(self, broker: Broker, svc: Service) -> None:
        self.e = StompEngine(broker, svc, wake=lambda: None, flush=lambda: None)
        self.e.peer = "127.0.0.1:40000"
        self.reader = FrameReader("1.0")
        self.run(self.e.start())
        self.run(
            self.e.receive_data(
                encode_frame("CONNECT", [("login", "guest"), ("passcode", "guest")])
            )
        )
        assert [f.command for f in self.take()] == ["CONNECTED"]

    def run(self, effects) -> None:
        # The user repository look-up runs inline (the driver runs it on a thread).
        for eff in effects:
            if type(eff) is RunBlocking:
                try:
                    result, error = eff.fn(*eff.args), None
                except Exception as exc:
                    result, error = None, exc
                self.run(eff.done(result, error))

    def written(self) -> bytes:
        """What the driver's flush writes (pump, write, after_write)."""
        self.e.pump()
        self.run(self.e.take_effects())
        data = b"".join(self.e.data_to_send())
        self.e.after_write()
        return data

    def take(self) -> list:
        data = self.written()
        return self.reader.feed(data) if data else []


def setup(tmp: Path) -> tuple[Broker, Service]:
    passwd = tmp / "passwd"
    passwd.write_text(f"guest:{md5str('guest:guest')}:anonymous:1\n")
    config = BrokerConfig({"imq.varhome": str(tmp / "var"), "imq.accesscontrol.enabled": "false"})
    broker = Broker(config, FileUserRepository(passwd))
    broker.router.observers.remove_transaction_observer(broker.txn_records)
    svc = Service("stomp", "NORMAL", "stomp", None, 0, "digest", -1)
    broker.service_repositories[svc.name] = broker.user_repository
    return broker, svc


def sends(dest: str, count: int, size: int, receipts: bool) -> list[bytes]:
    """``count`` SEND frames as stomp.py writes them, in READ_SLICE reads (one a read
    for receipts: the client waits for each)."""
    body = b"x" * size
    frames = []
    for i in range(count):
        h = [("content-length", str(size)), ("destination", dest)]
        h.append(("persistent", "true" if receipts else "false"))
        if receipts:
            h.append(("receipt", str(i)))
        frames.append(encode_frame("SEND", h, body, "1.0", content_length=False))
    if receipts:
        return frames
    stream = b"".join(frames)
    return [stream[i : i + READ_SLICE] for i in range(0, len(stream), READ_SLICE)]


# --no-decode: a consumer's frames are counted, and a client ack's message ids found,
# with one C call each instead of a FrameReader, so a callgrind count is the broker's.
_MESSAGE_ID = re.compile(rb"\nmessage-id:([^\n]*)\n")
NO_DECODE = False
# --ack-reads each: every ACK fed with a receive_data of its own, as the live broker reads
# stomp.py's (one sendall an ACK from its receiver thread), not a read's worth at once.
ACK_EACH = False


def acknowledge(c: Conn, acks: list[bytes]) -> None:
    if ACK_EACH:
        for a in acks:
            c.e.receive_data(a)
    else:
        c.e.receive_data(b"".join(acks))


def run_case(case: str, count: int, size: int, profile: cProfile.Profile | None) -> float:
    subscribers = 4 if case == "topic" else 0 if case == "receipts" else 1
    dest = "/topic/hot" if case == "topic" else "/queue/hot"
    ack = "client" if case == "queue-client" else "auto"
    with tempfile.TemporaryDirectory(prefix="stomp-hotpath-") as tmp:
        broker, svc = setup(Path(tmp))
        subs = [Conn(broker, svc) for _ in range(subscribers)]
        for i, c in enumerate(subs):
            c.e.receive_data(
                encode_frame(
                    "SUBSCRIBE",
                    [("destination", dest), ("id", f"s{i}"), ("ack", ack), ("receipt", "r")],
                    b"",
                    "1.0",
                )
            )
            assert [f.command for f in c.take()] == ["RECEIPT"]
        prod = Conn(broker, svc)
        reads = sends(dest, count, size, case == "receipts")
        client_time = 0.0
        delivered = receipted = 0
        gc.collect()
        if profile:
            profile.enable()
        t0 = time.process_time()

        def serve() -> bool:
            nonlocal client_time, delivered
            busy = False
            for c in subs:
                if not c.e.flush_pending:
                    continue
                busy = True
                data = c.written()
                c0 = time.process_time()
                acks = []
                if NO_DECODE:
                    if ack == "client":
                        ids = _MESSAGE_ID.findall(data)
                        delivered += len(ids)
                        acks = [b"ACK\nmessage-id:%s\nsubscription:s0\n\n\x00" % i for i in ids]
                    else:
                        delivered += data.count(b"MESSAGE\n")
                    client_time += time.process_time() - c0
                    if acks:
                        acknowledge(c, acks)
                    continue
                for f in c.reader.feed(data):
                    if f.command != "MESSAGE":
                        continue
                    delivered += 1
                    if ack == "client":
                        h = [("message-id", f.get("message-id")), ("subscription", "s0")]
                        acks.append(encode_frame("ACK", h, b"", "1.0"))
                client_time += time.process_time() - c0
                if acks:
                    acknowledge(c, acks)
            return busy

        for data in reads:
            prod.e.receive_data(data)
            for f in prod.take():
                receipted += f.command == "RECEIPT"
            serve()
        while serve():
            pass
        used = time.process_time() - t0 - client_time
        if profile:
            profile.disable()
        want = count * subscribers
        if delivered != want or (case == "receipts" and receipted != count):
            sys.exit(f"{case}: {delivered} deliveries of {want}, {receipted} receipts")
        broker.executor.shutdown(wait=False)
    return 1e6 * used / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", type=Path, help="write a cProfile of the last repeat here")
    ap.add_argument(
        "--no-decode",
        action="store_true",
        help="count the consumers' frames without decoding them (callgrind: the broker's "
        "instructions alone)",
    )
    ap.add_argument(
        "--ack-reads",
        choices=("joined", "each"),
        default="joined",
        help="queue-client's ACKs: a read's worth in one receive_data (joined), or one a "
        "call (each, as stomp.py's reach the live broker)",
    )
    args = ap.parse_args()
    global NO_DECODE, ACK_EACH
    NO_DECODE = args.no_decode
    ACK_EACH = args.ack_reads == "each"
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report_cases(run_case, args, widths=(12, 7))


if __name__ == "__main__":
    main()
