"""What a full garbage collection costs the broker with a backlog of queued messages.

    .venv/bin/python bench/gc_backlog.py                 # 0, 10,000, 50,000, 100,000 queued
    .venv/bin/python bench/gc_backlog.py --counts 200000

Routes 1 KB messages into one queue of an in-process router with no consumer (the start-up
heap frozen, as the broker does) and times ``gc.collect()`` at each count: each queued message
is two objects the cyclic collector tracks (its Message and its queue Entry), and a
generation-2 collection walks them all, on the event loop's thread.  Python starts one
whenever the long-lived objects have grown by a quarter, so a growing backlog pays this again
and again (issue 23's steady-rate tail: the broker's loop-lag WARNING names such collections).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from broker.core.message import Message  # noqa: E402
from broker.core.router import MessageRouter  # noqa: E402
from broker.protocol.packet import build_packet, parse_packet  # noqa: E402
from broker.protocol.types import DEST_QUEUE, FLAG_Q, PacketType  # noqa: E402


class Link:
    """A producer's connection, as much of one as routing needs."""

    render_delivery = None  # JMQ deliveries

    def __init__(self, lid: int) -> None:
        self.id, self.client_id = lid, None

    def can_deliver(self) -> bool:
        return True

    def send_delivery(self, buf: bytearray) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--counts", type=int, nargs="+", default=[0, 10_000, 50_000, 100_000])
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    router = MessageRouter()
    link = Link(1)
    gc.collect()
    gc.freeze()
    raw = build_packet(
        PacketType.BYTES_MESSAGE,
        body=bytes(args.size),
        flags=FLAG_Q,
        fields={1: "q"},
        timestamp=int(time.time() * 1000),
    )
    for n in sorted(args.counts):
        while (q := router.queues.get("q")) is None or q.msg_count < n:
            pkt = parse_packet(raw)
            router.route(Message(pkt, "q", link.id), link, DEST_QUEUE)  # type: ignore[arg-type]
        t = time.perf_counter()
        gc.collect()
        took = time.perf_counter() - t
        print(
            f"{n:>9,} queued: full collection {took * 1000:.1f} ms, "
            f"{len(gc.get_objects()):,} tracked objects",
            flush=True,
        )


if __name__ == "__main__":
    main()
