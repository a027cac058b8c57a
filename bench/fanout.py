"""Topic fan-out 1 -> 4, non-persistent 1 KB messages, with the Python client.

    .venv/bin/python bench/fanout.py                      # 20,000 messages, 4 subscribers
    .venv/bin/python bench/fanout.py --count 50000 --subscribers 8 --ack auto --repeat 3

One producer (this process) publishes as fast as the client sends; the subscribers are
consumers on the topic, each on its own connection, all on one event loop in a second
process (so they do not share the producer's loop).  Printed per run: the producer's
msgs/s (first send to last), and the subscribers' deliveries per second together (first
delivery to the last one of all, each subscriber counted), and what reached each of
them.  A shortfall is not hidden: the broker's count of messages its limits dropped on
the topic (numRejectedMsgs + numDiscardedMsgs, see broker/core/drops.py) is printed
beside it, and the run fails when deliveries are missing that the broker did not count.
Starts its own broker unless ``--host/--port`` name one.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from openmq_client import AckMode, BytesMessage, Topic, connect  # noqa: E402

IDLE = 10.0  # seconds without a delivery after which a subscriber stops waiting


def _install_uvloop() -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass


async def _subscribe(host: str, port: int, topic: str, n: int, count: int, ack: int, pipe):
    conns = []
    consumers = []
    for _ in range(n):
        conn = await connect(host, port, user="guest", password="guest")
        sess = await conn.create_session(ack)
        consumers.append(await sess.create_consumer(Topic(topic)))
        await conn.start()
        conns.append(conn)
    pipe.send("ready")
    first = [0.0]
    last = [0.0]

    async def drain(consumer) -> int:
        got = 0
        while got < count:
            msg = await consumer.receive(timeout=IDLE)
            if msg is None:
                break
            if not first[0]:
                first[0] = time.perf_counter()
            got += 1
        last[0] = max(last[0], time.perf_counter())
        return got

    got = await asyncio.gather(*(drain(c) for c in consumers))
    for conn in conns:
        await conn.close()
    pipe.send((list(got), first[0], last[0]))


def _subscriber_process(host, port, topic, n, count, ack, pipe) -> None:
    _install_uvloop()
    asyncio.run(_subscribe(host, port, topic, n, count, ack, pipe))


async def _publish(host: str, port: int, topic: str, count: int, size: int) -> float:
    conn = await connect(host, port, user="guest", password="guest")
    sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    producer = await sess.create_producer(Topic(topic))
    body = b"x" * size
    start = time.perf_counter()
    for _ in range(count):
        await producer.send(BytesMessage(body), persistent=False)
    elapsed = time.perf_counter() - start
    await conn.close()
    return elapsed


def dropped(host: str, port: int, topic: str) -> int:
    from broker.admintools.broker_handle import BrokerAdmin

    admin = BrokerAdmin(host, port)
    try:
        m = admin.metrics(destination=topic, dest_type=2)  # DEST_TOPIC
    finally:
        admin.close()
    return int(m.get("numRejectedMsgs", 0)) + int(m.get("numDiscardedMsgs", 0))


def one_run(host: str, port: int, args) -> dict:
    topic = f"fanout.{uuid.uuid4().hex[:8]}"
    ack = AckMode.DUPS_OK_ACKNOWLEDGE if args.ack == "dups_ok" else AckMode.AUTO_ACKNOWLEDGE
    parent, child = mp.Pipe()
    proc = mp.Process(
        target=_subscriber_process,
        args=(host, port, topic, args.subscribers, args.count, int(ack), child),
    )
    proc.start()
    if not parent.poll(60) or parent.recv() != "ready":
        proc.kill()
        raise SystemExit("subscribers did not start")
    p_seconds = asyncio.run(_publish(host, port, topic, args.count, args.size))
    got, first, last = parent.recv()
    proc.join(30)
    return {
        "producer": args.count / p_seconds,
        "consumers": sum(got) / max(last - first, 1e-9),
        "got": got,
        "dropped": dropped(host, port, topic),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--host", default=None, help="use a running broker (port mapper host)")
    ap.add_argument("--port", type=int, default=7676, help="its port mapper port")
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--subscribers", type=int, default=4)
    ap.add_argument("--ack", choices=["auto", "dups_ok"], default="dups_ok")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("-D", dest="props", action="append", default=[], help="broker property")
    args = ap.parse_args()
    _install_uvloop()
    broker = None
    host, port = args.host, args.port
    if host is None:
        from broker.launcher import start_broker

        tmp = Path(tempfile.mkdtemp(prefix="imq-fanout-"))
        broker = start_broker(tmp, "imq.log.level=WARNING", *args.props)
        host, port = broker.host, broker.portmapper_port
    print(
        f"topic 1 -> {args.subscribers}, {args.count:,} x {args.size} B non-persistent, "
        f"Python client, ack={args.ack}:"
    )
    short = False
    try:
        for i in range(args.repeat):
            r = one_run(host, port, args)
            expected = args.count * args.subscribers
            missing = expected - sum(r["got"])
            print(
                f"  run {i + 1}: producer {r['producer']:,.0f} msgs/s, all subscribers "
                f"{r['consumers']:,.0f} deliveries/s; received {r['got']} of {args.count:,} "
                f"each; dropped by the broker's limits: {r['dropped']:,}"
            )
            if missing > r["dropped"]:
                short = True
                print(f"  SHORTFALL: {missing - r['dropped']:,} deliveries missing, not counted")
    finally:
        if broker is not None:
            broker.stop()
    if short:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
