"""The metrics rollup job (portal/pipeline/rollup.py) on generated raw samples.

Writes ``--samples`` destination samples (``--destinations`` destinations of one broker
over ``--days`` days, evenly spaced, one Parquet file per hour partition) into a raw store
directory, then runs the rollup job over the whole week in Spark local mode against a
fresh SQLite database, and prints rows/s, wall time (and where it went: Spark start,
computing, writing the rollups) and the raw store's size per million samples.

    .venv/bin/python bench/rollup.py                      # 10 million samples, 1,000 dests, 1 week
    .venv/bin/python bench/rollup.py --samples 1000000    # a quicker run
    SPARK_MASTER=spark://host:7077 .venv/bin/python bench/rollup.py --store /shared/raw
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.parquet"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--destinations", type=int, default=1000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--store", default=None, help="raw store directory (default: a temp dir)")
    ap.add_argument("--master", default=None, help="Spark master (default SPARK_MASTER/local[*])")
    ap.add_argument("--keep", action="store_true", help="keep the store and database")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="imq-rollup-bench-"))
    store = Path(args.store) if args.store else work / "raw"
    os.environ["DATABASE_URL"] = f"sqlite:///{work / 'db.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from broker.launcher import migrate

    migrate(dict(os.environ))
    import django

    django.setup()
    from portal.pipeline.rollup import run_rollup
    from portal.pipeline.synthetic import write_bench_store

    hours = args.days * 24
    per_hour = max(1, math.ceil(args.samples / args.destinations / hours))
    since = datetime(2026, 1, 5, tzinfo=UTC)
    until = since + timedelta(hours=hours)
    t0 = time.perf_counter()
    written = write_bench_store(str(store), args.destinations, since, hours, per_hour)
    gen = time.perf_counter() - t0
    size = store_bytes(store)
    print(
        f"raw store: {written:,} samples ({args.destinations:,} destinations x {per_hour} an "
        f"hour x {hours} h) in {gen:.1f} s; {size / 2**20:,.1f} MiB, "
        f"{size / 2**20 / (written / 1e6):,.1f} MiB per million samples"
    )

    stages: dict[str, float] = {}
    start = time.perf_counter()

    def progress(stage: str, done: int, total: int) -> None:
        stages.setdefault(stage, time.perf_counter() - start)

    t0 = time.perf_counter()
    run = run_rollup(
        since, until, raw_url=str(store), master=args.master, progress=progress, now=until
    )
    wall = time.perf_counter() - t0
    if run.status != "ok":
        print(run.error)
        raise SystemExit("rollup failed")
    spark_up = stages.get("partitions", 0.0)
    computed = stages.get("replace", wall)
    print(
        f"rollup: {run.rows_in:,} samples -> {run.rows_out:,} rollups in {wall:.1f} s wall: "
        f"{run.rows_in / wall:,.0f} samples/s"
    )
    print(
        f"  Spark start {spark_up:.1f} s, compute {computed - spark_up:.1f} s "
        f"({run.rows_in / max(computed - spark_up, 1e-9):,.0f} samples/s), "
        f"rollups written to the database {wall - computed:.1f} s"
    )
    if args.keep:
        print(f"kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)  # a --store given is the caller's to remove


if __name__ == "__main__":
    main()
