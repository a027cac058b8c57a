"""Remote delivery in a cluster: producer on broker A, consumer on broker B, against both
on one broker; 1 KB messages, non-persistent and persistent, with the Python client.

Starts two clustered brokers (imq.cluster.brokerlist naming both) and prints msgs/s
end to end and latency p50/p99 for each case.

    .venv/bin/python bench/cluster.py                          # 30,000 / 5,000 messages
    .venv/bin/python bench/cluster.py --count 100000 --persistent-count 20000
    .venv/bin/python bench/cluster.py --mixed                  # with stock OpenMQ brokers

``--mixed`` (as root) runs in a private network namespace (``unshare -n``; the stock
broker refuses loopback addresses for a cluster, tests/stock_cluster.py) and measures
remote delivery in four two-broker clusters, one after the other, in the same sitting:
stock->stock, stock->ours, ours->stock and ours->ours (the producer on the first broker,
the consumer on the second; the same Python client for all).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from broker.launcher import BrokerProcess, free_port, start_broker  # noqa: E402
from openmq_client import AckMode, BytesMessage, Queue, connect  # noqa: E402

_TS = struct.Struct(">q")


def percentile(sorted_values: list[float], p: float) -> float:
    k = min(len(sorted_values) - 1, int(round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


class Where(NamedTuple):
    """A broker's port mapper (what a client needs; picklable, unlike BrokerProcess)."""

    host: str
    portmapper_port: int


async def run(
    prod: BrokerProcess | Where,
    cons: BrokerProcess | Where,
    count: int,
    size: int,
    persistent: bool,
) -> dict:
    pconn = await connect(prod.host, prod.portmapper_port)
    cconn = await connect(cons.host, cons.portmapper_port)
    psess = await pconn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    csess = await cconn.create_session(AckMode.DUPS_OK_ACKNOWLEDGE)
    dest = Queue(f"bench.cluster.{uuid.uuid4().hex[:8]}")
    producer = await psess.create_producer(dest)
    consumer = await csess.create_consumer(dest)
    await cconn.start()
    # The consumer's interest reaches the producer's broker: one message through first.
    await producer.send(BytesMessage(_TS.pack(0)), persistent=False)
    if await consumer.receive(timeout=30) is None:
        raise RuntimeError("the first message never arrived")
    pad = b"x" * (size - 8)
    latencies: list[float] = []

    async def consume() -> None:
        for n in range(count):
            msg = await consumer.receive(timeout=60)
            if msg is None:
                raise RuntimeError(f"consumer stalled after {n} messages")
            (sent,) = _TS.unpack_from(msg.body, 0)
            latencies.append((time.perf_counter_ns() - sent) / 1e6)

    task = asyncio.create_task(consume())
    start = time.perf_counter()
    for _ in range(count):
        await producer.send(
            BytesMessage(_TS.pack(time.perf_counter_ns()) + pad), persistent=persistent
        )
    await task
    elapsed = time.perf_counter() - start
    await pconn.close()
    await cconn.close()
    latencies.sort()
    return {
        "msgs_per_s": count / elapsed,
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
    }


def _median(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda r: r["msgs_per_s"])[len(runs) // 2]


def _pair_worker(args: tuple) -> float:
    """One producer/consumer pair in its own process (the client is CPU-bound): msgs/s."""
    prod, cons, count, size = args
    return asyncio.run(run(prod, cons, count, size, False))["msgs_per_s"]


def scale(a: BrokerProcess, b: BrokerProcess, count: int, size: int) -> tuple[float, float]:
    """Total msgs/s of two local pairs (producer and consumer on the same broker, each
    pair its own queue) both on A, then one on A and one on B."""
    import multiprocessing

    pa, pb = Where(a.host, a.portmapper_port), Where(b.host, b.portmapper_port)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        one = sum(pool.map(_pair_worker, [(pa, pa, count, size), (pa, pa, count, size)]))
        two = sum(pool.map(_pair_worker, [(pa, pa, count, size), (pb, pb, count, size)]))
    return one, two


def start_pair(tmp: Path) -> tuple[BrokerProcess, BrokerProcess]:
    pms = [free_port(), free_port()]
    brokerlist = ",".join(f"127.0.0.1:{p}" for p in pms)
    out = []
    for name, pm in zip(("A", "B"), pms, strict=True):
        (tmp / name).mkdir(parents=True)
        out.append(
            start_broker(
                tmp / name,
                f"imq.cluster.brokerlist={brokerlist}",
                "imq.log.level=WARNING",
                instance=name,
                portmapper_port=pm,
            )
        )
    return out[0], out[1]


def mixed(args: argparse.Namespace) -> None:
    """Inside a fresh network namespace: the four two-broker clusters, one at a time."""
    from tests.stock_cluster import Scenario, _setup_namespace, address, wait_for

    _setup_namespace(2)
    tmp = Path(tempfile.mkdtemp(prefix="imq-bench-mixed-"))
    rows = []
    for first, second in (
        ("stock", "stock"),
        ("stock", "ours"),
        ("ours", "stock"),
        ("ours", "ours"),
    ):
        sc = Scenario(tmp / f"{first}-{second}")
        pms = [free_port(), free_port()]
        brokerlist = ",".join(f"{address(i + 1)}:{pm}" for i, pm in enumerate(pms))
        try:
            brokers = []
            for i, (kind, pm) in enumerate(zip((first, second), pms, strict=True)):
                start = sc.stock if kind == "stock" else sc.ours
                extra = ("imq.log.level=WARNING",) if kind == "ours" else ()
                brokers.append(start(i + 1, pm, brokerlist, f"{kind}{i + 1}", *extra))
            a, b = brokers
            # The link is up once a message crosses: the warm-up retries until it does.
            wait_for(lambda a=a, b=b: _crosses(a, b), 120, f"a message {first} -> {second}")
            print(f"{first}->{second}: linked, measuring", flush=True)
            for persistent, count in ((False, args.count), (True, args.persistent_count)):
                runs = [
                    asyncio.run(run(a, b, count, args.size, persistent)) for _ in range(args.repeat)
                ]
                rows.append((f"{first}->{second}", persistent, count, _median(runs)))
        finally:
            sc.stop_all()
    for pair, persistent, count, r in rows:
        kind = "persistent" if persistent else "non-persistent"
        print(
            f"{pair:14} {kind:14} {count} x {args.size} B: {r['msgs_per_s']:,.0f} msgs/s "
            f"(p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms)",
            flush=True,
        )


def _crosses(a: BrokerProcess, b: BrokerProcess) -> bool:
    try:
        asyncio.run(run(a, b, 200, 64, False))
    except Exception:  # noqa: BLE001 - not linked yet: the first message times out
        return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=30_000, help="non-persistent messages")
    ap.add_argument("--persistent-count", type=int, default=5_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each case (median kept)")
    ap.add_argument("--mixed", action="store_true", help="with stock brokers (see above)")
    ap.add_argument("--inside-namespace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.mixed and not args.inside_namespace:
        import subprocess

        from tests.stock_cluster import missing_tools

        missing = missing_tools()
        if missing:
            sys.exit("--mixed cannot run; missing: " + ", ".join(missing))
        cmd = ["unshare", "-n", sys.executable, *sys.argv, "--inside-namespace"]
        sys.exit(subprocess.call(cmd))
    if args.mixed:
        mixed(args)
        return
    a, b = start_pair(Path(tempfile.mkdtemp(prefix="imq-bench-cluster-")))
    try:
        asyncio.run(run(a, b, 2000, args.size, False))  # warm-up (links, first connections)
        rows = []
        for persistent, count in ((False, args.count), (True, args.persistent_count)):
            kind = "persistent" if persistent else "non-persistent"
            # Alternated and the median run kept: on a shared machine the load moves.
            ones, remotes = [], []
            for _ in range(args.repeat):
                ones.append(asyncio.run(run(a, a, count, args.size, persistent)))
                remotes.append(asyncio.run(run(a, b, count, args.size, persistent)))
            rows.append((kind, count, _median(ones), _median(remotes)))
        one_broker, two_brokers = scale(a, b, args.count // 2, args.size)
        for kind, count, one, remote in rows:
            ratio = remote["msgs_per_s"] / one["msgs_per_s"]
            print(
                f"{kind} {count} x {args.size} B: one broker {one['msgs_per_s']:,.0f} msgs/s "
                f"(p50 {one['p50_ms']:.2f} ms, p99 {one['p99_ms']:.2f} ms); "
                f"A->B {remote['msgs_per_s']:,.0f} msgs/s (p50 {remote['p50_ms']:.2f} ms, "
                f"p99 {remote['p99_ms']:.2f} ms); remote/one = {ratio:.0%}"
            )
        print(
            f"two local pairs, non-persistent: both on A {one_broker:,.0f} msgs/s in total, "
            f"one on A and one on B {two_brokers:,.0f} msgs/s ({two_brokers / one_broker:.0%})"
        )
    finally:
        a.stop()
        b.stop()


if __name__ == "__main__":
    main()
