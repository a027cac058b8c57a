"""What the raw metrics store costs the broker: the event loop's copy of the counters
(:func:`broker.server.rawstore.collect`) and the writer thread's work (rows, Parquet),
measured in-process on a real Broker object with N destinations, as CPU time per
sample interval (the GIL makes the thread's time the loop's loss at worst).

    .venv/bin/python bench/rawstore_cost.py --destinations 1000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--destinations", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=60, help="sample intervals to simulate")
    ap.add_argument("--interval", type=float, default=10.0, help="imq.metrics.sample.interval")
    ap.add_argument("--flush-every", type=int, default=30, help="samples per flush (300 s / 10 s)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="imq-rawcost-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{work / 'db.sqlite3'}"
    os.environ["IMQ_VARHOME"] = str(work / "var")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from broker.config import BrokerConfig
    from broker.core.destination import DEST_QUEUE, DEST_TOPIC
    from broker.server.broker import Broker
    from broker.server.rawstore import RawStoreWriter, collect

    broker = Broker(BrokerConfig({}), None)
    for i in range(args.destinations):
        broker.router.create_destination(f"q{i}", DEST_TOPIC if i % 4 == 3 else DEST_QUEUE)
    store = str(work / "raw")
    writer = RawStoreWriter("costbroker", store, flush_interval=10**9)
    writer.close()  # drive its methods here, in this thread, to time them
    loop_ms, add_ms, flush_ms = [], [], []
    for n in range(args.samples):
        for i, d in enumerate(list(broker.router.queues.values())[:50]):
            d.msgs_in += i  # some traffic between samples
        t = time.thread_time()
        snap = collect(broker)
        loop_ms.append((time.thread_time() - t) * 1000)
        t = time.thread_time()
        writer._add(snap)
        add_ms.append((time.thread_time() - t) * 1000)
        if (n + 1) % args.flush_every == 0:
            t = time.thread_time()
            writer._flush()
            flush_ms.append((time.thread_time() - t) * 1000)
    rows = writer.written_rows
    per_interval = statistics.median(loop_ms) + statistics.median(add_ms)
    per_interval += statistics.median(flush_ms) / args.flush_every if flush_ms else 0
    print(
        f"{args.destinations:,} destinations, {rows:,} rows written: on the loop (collect) "
        f"{statistics.median(loop_ms):.2f} ms a sample; writer thread {statistics.median(add_ms):.2f} ms "
        f"a sample + {statistics.median(flush_ms) if flush_ms else 0:.1f} ms a flush of "
        f"{args.flush_every} samples"
    )
    print(
        f"CPU per {args.interval:g} s interval: {per_interval:.2f} ms = "
        f"{per_interval / (args.interval * 1000) * 100:.3f}% of one core"
    )


if __name__ == "__main__":
    main()
