"""1 producer -> 1 queue -> 1 consumer, non-persistent 1 KB messages, with the Python client.

Prints msgs/s end to end and the latency distribution, then (``--rate``) latency at a
steady send rate.  Starts its own broker unless ``--host/--port`` name one.

    .venv/bin/python bench/throughput.py                 # 100,000 messages, as fast as possible
    .venv/bin/python bench/throughput.py --rate 5000     # + latency at a steady 5,000 msgs/s
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from openmq_client import AckMode, BytesMessage, Queue, connect  # noqa: E402

_TS = struct.Struct(">q")


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, int(round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


async def run(
    host: str, port: int, count: int, size: int, rate: float | None, queue: str, ack_mode: int
) -> dict:
    pconn = await connect(host, port, user="guest", password="guest")
    cconn = await connect(host, port, user="guest", password="guest")
    psess = await pconn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    csess = await cconn.create_session(ack_mode)
    dest = Queue(queue)
    producer = await psess.create_producer(dest)
    consumer = await csess.create_consumer(dest)
    await cconn.start()
    pad = b"x" * (size - 8)
    latencies: list[float] = []
    done = asyncio.get_running_loop().create_future()

    async def consume() -> None:
        n = 0
        while n < count:
            msg = await consumer.receive(timeout=30)
            if msg is None:
                raise RuntimeError(f"consumer stalled after {n} messages")
            (sent,) = _TS.unpack_from(msg.body, 0)
            latencies.append((time.perf_counter_ns() - sent) / 1e6)
            n += 1
        done.set_result(None)

    task = asyncio.create_task(consume())
    start = time.perf_counter()
    interval = 1.0 / rate if rate else 0.0
    next_at = start
    for _ in range(count):
        if rate:
            next_at += interval
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        await producer.send(BytesMessage(_TS.pack(time.perf_counter_ns()) + pad), persistent=False)
    await done
    elapsed = time.perf_counter() - start
    await task
    await pconn.close()
    await cconn.close()
    latencies.sort()
    return {
        "messages": count,
        "seconds": elapsed,
        "msgs_per_s": count / elapsed,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "max_ms": latencies[-1],
        "mean_ms": statistics.fmean(latencies),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--host", default=None, help="use a running broker (port mapper host)")
    ap.add_argument("--port", type=int, default=7676, help="its port mapper port")
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument(
        "--rate", type=float, default=None, help="also run at this steady rate and report latency"
    )
    ap.add_argument("--rate-count", type=int, default=50_000)
    ap.add_argument("--ack", choices=["auto", "dups_ok"], default="dups_ok")
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    broker = None
    host, port = args.host, args.port
    if host is None:
        from broker.launcher import start_broker

        broker = start_broker(Path(tempfile.mkdtemp(prefix="imq-bench-")), "imq.log.level=WARNING")
        host, port = broker.host, broker.portmapper_port
    ack = AckMode.DUPS_OK_ACKNOWLEDGE if args.ack == "dups_ok" else AckMode.AUTO_ACKNOWLEDGE
    try:
        # A short warm-up so first-connection costs are not in the figures.
        asyncio.run(run(host, port, 2000, args.size, None, "bench.warmup", ack))
        r = asyncio.run(run(host, port, args.count, args.size, None, "bench.q", ack))
        print(
            f"throughput: {r['messages']} x {args.size} B non-persistent, ack={args.ack}: "
            f"{r['msgs_per_s']:,.0f} msgs/s ({r['seconds']:.2f} s); latency under full load "
            f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms"
        )
        if args.rate:
            r = asyncio.run(
                run(host, port, args.rate_count, args.size, args.rate, "bench.rate", ack)
            )
            print(
                f"steady {args.rate:,.0f} msgs/s: achieved {r['msgs_per_s']:,.0f} msgs/s, "
                f"latency p50 {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms, "
                f"max {r['max_ms']:.2f} ms"
            )
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
