"""Persistent throughput: 1 KB persistent messages, producers waiting for each SEND_REPLY.

For each combination of store (file, jdbc), sync (on, off) and producer count (1, 8) a
fresh broker is started; the producers send to one queue while a consumer drains it.
Before the table it prints how many fsyncs per second this disk does, so the sync
figures can be read against the disk's limit.

    .venv/bin/python bench/persistent.py                       # file store only
    .venv/bin/python bench/persistent.py --stores file,jdbc    # jdbc on SQLite by default
    .venv/bin/python bench/persistent.py --stores jdbc --database-url postgres://...
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from broker.client import AckMode, BytesMessage, Queue, connect  # noqa: E402


def _producer_process(host: str, port: int, seconds: float, out) -> None:
    """One producer in its own process (``--processes``): like separate JMS applications."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def go() -> int:
        conn = await connect(host, port, user="guest", password="guest")
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue("bench.persistent"))
        body, n, stop = b"x" * 1024, 0, time.perf_counter() + seconds
        while time.perf_counter() < stop:
            await prod.send(BytesMessage(body), persistent=True)
            n += 1
        await conn.close()
        return n

    out.put(asyncio.run(go()))


def run_processes(host: str, port: int, producers: int, seconds: float) -> tuple[int, float]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_producer_process, args=(host, port, seconds, out))
        for _ in range(producers)
    ]
    for p in procs:
        p.start()
    sent = sum(out.get() for _ in procs)
    for p in procs:
        p.join()
    return sent, seconds


async def run(host: str, port: int, producers: int, seconds: float) -> tuple[int, float]:
    q = Queue("bench.persistent")
    body = b"x" * 1024
    sent = 0
    stop = time.perf_counter() + seconds

    async def produce() -> None:
        nonlocal sent
        conn = await connect(host, port, user="guest", password="guest")
        sess = await conn.create_session()
        prod = await sess.create_producer(q)
        while time.perf_counter() < stop:
            await prod.send(BytesMessage(body), persistent=True)
            sent += 1
        await conn.close()

    async def drain(done: asyncio.Event) -> None:
        conn = await connect(host, port, user="guest", password="guest")
        sess = await conn.create_session(AckMode.DUPS_OK_ACKNOWLEDGE)
        cons = await sess.create_consumer(q)
        await conn.start()
        while not done.is_set():
            await cons.receive(0.2)
        await conn.close()

    done = asyncio.Event()
    drainer = asyncio.create_task(drain(done))
    t0 = time.perf_counter()
    await asyncio.gather(*(produce() for _ in range(producers)))
    elapsed = time.perf_counter() - t0
    done.set()
    await drainer
    return sent, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--stores", default="file")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--database-url", default=None, help="for the jdbc store (default SQLite)")
    ap.add_argument(
        "--processes",
        action="store_true",
        help="run each producer in a process of its own (no consumer)",
    )
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    from broker.launcher import start_broker
    from broker.store.filestore import measure_fsync_rate

    tmp = Path(tempfile.mkdtemp(prefix="imq-pbench-"))
    print(f"this disk: {measure_fsync_rate(tmp, 2.0):,.0f} fsyncs/s (4 KB write + fsync)")
    print(f"{'store':6} {'sync':5} {'producers':>9} {'msgs/s':>10}")
    for store in args.stores.split(","):
        for sync in ("true", "false"):
            for producers in (1, 8):
                where = Path(tempfile.mkdtemp(prefix="imq-pbench-", dir=tmp))
                props = [
                    f"imq.persist.store={store}",
                    f"imq.persist.file.sync.enabled={sync}",
                    "imq.log.level=WARNING",
                ]
                url = args.database_url if store == "jdbc" else None
                b = start_broker(where, *props, database_url=url)
                try:
                    sent, elapsed = asyncio.run(
                        run(b.host, b.portmapper_port, producers, args.seconds)
                    )
                finally:
                    b.stop()
                print(f"{store:6} {sync:5} {producers:9d} {sent / elapsed:10,.0f}")


if __name__ == "__main__":
    main()
