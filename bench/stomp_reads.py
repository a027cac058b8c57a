"""How full a stomp.py topic subscriber's reads are, per broker (issue 38's topic 1→4).

bench/stomp.py's topic workload (four ``ack:auto`` subscribers, one producer, STOMP 1.0,
1 KB non-persistent bodies), with every subscriber's socket reads counted: MESSAGE frames
a read, and the subscribers' CPU a delivery.  A subscriber whose 16 KB reads are full
(about 13 of our frames) never waits for the broker: the broker's output waits for it,
and the rate is the clients' to set.  The subscribers are threads of this process (the
count lives in one place), so the rates are lower than bench/stomp.py's.

    .venv/bin/python bench/stomp_reads.py                      # ours, then ActiveMQ
    .venv/bin/python bench/stomp_reads.py --brokers ours --count 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# This file is in bench/, whose stomp.py must not hide the stomp.py package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import stomp  # noqa: E402
from stomp.transport import Transport  # noqa: E402

from bench.stomp import BODY, activemq_installed, serving  # noqa: E402

READS = {"calls": 0}
_receive = Transport.receive


def _counted(self: Any) -> bytes:
    READS["calls"] += 1
    return _receive(self)


Transport.receive = _counted  # type: ignore[method-assign]


class _Count(stomp.ConnectionListener):
    def __init__(self, want: int) -> None:
        self.want, self.got = want, 0
        self.done, self.receipt = threading.Event(), threading.Event()

    def on_message(self, frame: Any) -> None:
        self.got += 1
        if self.got == self.want:
            self.done.set()

    def on_receipt(self, frame: Any) -> None:
        self.receipt.set()


def _connect(port: int, want: int) -> tuple[Any, _Count]:
    c = stomp.Connection10([("127.0.0.1", port)])
    lst = _Count(want)
    c.set_listener("n", lst)
    c.connect("guest", "guest", wait=True)
    return c, lst


def topic_round(port: int, count: int, subscribers: int) -> tuple[float, float, float]:
    """Deliveries/s, frames a subscriber read, and the clients' CPU µs a delivery."""
    dest = f"/topic/reads.{os.getpid()}.{time.monotonic_ns()}"
    subs = [_connect(port, count) for _ in range(subscribers)]
    for i, (c, lst) in enumerate(subs):
        c.subscribe(dest, id=f"s{i}", ack="auto", headers={"receipt": f"r{i}"})
        if not lst.receipt.wait(30):
            raise RuntimeError("no RECEIPT for SUBSCRIBE")
    prod, _ = _connect(port, 0)
    READS["calls"] = 0
    cpu0, start = os.times(), time.perf_counter()
    for _ in range(count):
        prod.send(dest, BODY, headers={"persistent": "false"})
    for _, lst in subs:
        if not lst.done.wait(300):
            raise RuntimeError(f"{lst.got} of {count} arrived")
    elapsed, cpu1 = time.perf_counter() - start, os.times()
    reads = READS["calls"]
    for c, _ in [*subs, (prod, None)]:
        c.disconnect()
    deliveries = count * subscribers
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return deliveries / elapsed, deliveries / max(reads, 1), cpu / deliveries * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="ours,activemq")
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--subscribers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    names = [n for n in args.brokers.split(",") if n]
    if "activemq" in names and not activemq_installed():
        print("ActiveMQ (Debian's activemq) not installed: left out", file=sys.stderr)
        names.remove("activemq")
    with tempfile.TemporaryDirectory(prefix="bench-reads-") as tmp:
        for name in names:
            with serving(name, Path(tmp) / name) as (_pid, port):
                for r in range(args.rounds):
                    rate, per_read, cpu = topic_round(port, args.count, args.subscribers)
                    print(
                        f"{name} round {r + 1}: {rate:,.0f} deliveries/s, "
                        f"{per_read:.1f} frames a read, clients {cpu:.1f} µs a delivery",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
