"""Our broker beside ActiveMQ and RabbitMQ, each driven by a Python client, in one sitting.

    .venv/bin/python bench/compare.py                       # all three brokers, 3 rounds
    .venv/bin/python bench/compare.py --brokers ours,activemq --rounds 1 --count 5000

``ours-sync`` is a second broker of ours with ``imq.persist.file.sync.enabled=true``
(OpenMQ's default, and ours, is false: a persistent send is answered once written, not
synced); ActiveMQ's KahaDB syncs by default, RabbitMQ confirms after its (batched) sync.

Needs, for the other two (measuring only; not dependencies of the project):
``.venv/bin/pip install pika stomp-py``, Debian's ``activemq`` running with a STOMP
connector on 127.0.0.1:61613 and ``rabbitmq-server`` on 127.0.0.1:5672 (see the figures'
note for how they were started on loopback).  Our broker is started here (file store,
``imq.log.level=WARNING``) unless ``--host/--port`` name one.

The clients, each broker's natural one from Python:

* ours: this project's asyncio client (openmq_client), consumers DUPS_OK_ACKNOWLEDGE
  (acknowledgements batched, no reply awaited);
* ActiveMQ: stomp.py over STOMP 1.2, subscriptions ``ack:auto`` (no acknowledgements);
* RabbitMQ: pika's BlockingConnection over AMQP 0-9-1, ``auto_ack`` (no
  acknowledgements).

Workloads, 1 KB messages, the consumers started first, each in a process of its own
(topic: all four on one connection each, in one process), the producer in this one:

* ``queue``: 1 producer -> 1 queue -> 1 consumer, non-persistent, the producer unpaced;
* ``persistent``: the same with persistent messages, each send waiting until the broker
  says it is stored (ours: the SEND_REPLY; ActiveMQ: a STOMP receipt, KahaDB syncing;
  RabbitMQ: a publisher confirm on a durable queue);
* ``topic``: 1 producer -> topic -> 4 subscribers, non-persistent (RabbitMQ: a fanout
  exchange with four exclusive queues).

Printed per run: producer msgs/s (first send to last) and consumers' deliveries/s
(first delivery to the last of all, every subscriber counted).  Missing deliveries are
printed loudly; persistent ones fail the run.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

IDLE = 15.0  # seconds without a delivery after which a consumer gives up
BROKERS = ("ours", "ours-sync", "activemq", "rabbitmq")
WORKLOADS = ("queue", "persistent", "topic")
AMQ = ("127.0.0.1", 61613)
SYNC = "imq.persist.file.sync.enabled"
RMQ = ("127.0.0.1", 5672)


# -- ours ------------------------------------------------------------------------------


def ours_consume(target, names: list[str], topic: bool, count: int, pipe) -> None:
    import uvloop

    from openmq_client import AckMode, Queue, Topic, connect

    host, port = target

    async def main() -> None:
        conns, consumers = [], []
        for name in names:
            conn = await connect(host, port, user="guest", password="guest")
            sess = await conn.create_session(AckMode.DUPS_OK_ACKNOWLEDGE)
            consumers.append(await sess.create_consumer(Topic(name) if topic else Queue(name)))
            await conn.start()
            conns.append(conn)
        pipe.send("ready")
        first, last = [0.0], [0.0]

        async def drain(consumer) -> int:
            got = 0
            while got < count:
                if await consumer.receive(timeout=IDLE) is None:
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

    uvloop.install()
    asyncio.run(main())


def ours_produce(target, name: str, topic: bool, count: int, size: int, persistent: bool) -> float:
    import uvloop

    from openmq_client import AckMode, BytesMessage, Queue, Topic, connect

    host, port = target

    async def main() -> float:
        conn = await connect(host, port, user="guest", password="guest")
        sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
        producer = await sess.create_producer(Topic(name) if topic else Queue(name))
        body = b"x" * size
        start = time.perf_counter()
        for _ in range(count):
            await producer.send(BytesMessage(body), persistent=persistent)
        elapsed = time.perf_counter() - start
        await conn.close()
        return elapsed

    uvloop.install()
    return asyncio.run(main())


# -- ActiveMQ over STOMP ----------------------------------------------------------------


def _stomp_connection(listener):
    import stomp

    conn = stomp.Connection([AMQ], heartbeats=(0, 0))
    conn.set_listener("bench", listener)
    conn.connect("admin", "admin", wait=True)
    return conn


def amq_consume(target, names: list[str], topic: bool, count: int, pipe) -> None:
    import stomp

    class Counter(stomp.ConnectionListener):
        def __init__(self) -> None:
            self.got = 0
            self.first = 0.0
            self.last = 0.0
            self.done = threading.Event()
            self.lock = threading.Lock()

        def on_message(self, frame) -> None:
            now = time.perf_counter()
            self.got += 1
            if not self.first:
                self.first = now
            self.last = now
            if self.got >= count:
                self.done.set()

    counters, conns = [], []
    for i, name in enumerate(names):
        c = Counter()
        conn = _stomp_connection(c)
        conn.subscribe(
            destination=("/topic/" if topic else "/queue/") + name, id=str(i), ack="auto"
        )
        counters.append(c)
        conns.append(conn)
    time.sleep(0.5)  # SUBSCRIBE has no reply: let the broker register them
    pipe.send("ready")
    for c in counters:
        seen = -1
        while not c.done.wait(IDLE):
            if c.got == seen:
                break
            seen = c.got
    for conn in conns:
        conn.disconnect()
    first = min((c.first for c in counters if c.first), default=0.0)
    last = max((c.last for c in counters), default=0.0)
    pipe.send(([c.got for c in counters], first, last))


def amq_produce(target, name: str, topic: bool, count: int, size: int, persistent: bool) -> float:
    import stomp

    class Receipts(stomp.ConnectionListener):
        def __init__(self) -> None:
            self.event = threading.Event()

        def on_receipt(self, frame) -> None:
            self.event.set()

    r = Receipts()
    conn = _stomp_connection(r)
    dest = ("/topic/" if topic else "/queue/") + name
    body = b"x" * size
    headers = {"persistent": "true" if persistent else "false"}
    start = time.perf_counter()
    for i in range(count):
        if persistent:
            r.event.clear()
            conn.send(dest, body, headers={**headers, "receipt": str(i)})
            if not r.event.wait(30):
                raise RuntimeError("ActiveMQ: no receipt for a persistent send")
        else:
            conn.send(dest, body, headers=headers)
    elapsed = time.perf_counter() - start
    conn.disconnect()
    return elapsed


# -- RabbitMQ over AMQP -----------------------------------------------------------------


def _pika():
    import pika

    return pika.BlockingConnection(pika.ConnectionParameters(host=RMQ[0], port=RMQ[1], heartbeat=0))


def rmq_consume(target, names: list[str], topic: bool, count: int, pipe) -> None:
    conn = _pika()
    ch = conn.channel()
    queues = []
    if topic:
        ch.exchange_declare(names[0], "fanout", auto_delete=True)
        for _ in names:
            q = ch.queue_declare("", exclusive=True).method.queue
            ch.queue_bind(q, names[0])
            queues.append(q)
    else:
        persistent = names[0].startswith("p.")
        ch.queue_declare(names[0], durable=persistent)
        queues.append(names[0])
    got = [0] * len(queues)
    first, last = [0.0], [0.0]
    left = [len(queues)]

    def handler(i: int):
        def on_message(channel, method, props, body) -> None:
            now = time.perf_counter()
            got[i] += 1
            if not first[0]:
                first[0] = now
            last[0] = now
            if got[i] == count:
                left[0] -= 1
                if left[0] == 0:
                    channel.stop_consuming()

        return on_message

    for i, q in enumerate(queues):
        ch.basic_consume(q, handler(i), auto_ack=True)
    pipe.send("ready")
    idle = [0]

    def watchdog(seen=[-1]) -> None:  # noqa: B006 - the last total, kept between calls
        total = sum(got)
        if total == seen[0]:
            ch.stop_consuming()
            return
        seen[0] = total
        conn.call_later(IDLE, watchdog)

    conn.call_later(IDLE, watchdog)
    ch.start_consuming()
    del idle
    if not topic:
        ch.queue_delete(names[0])
    conn.close()
    pipe.send((got, first[0], last[0]))


def rmq_produce(target, name: str, topic: bool, count: int, size: int, persistent: bool) -> float:
    import pika

    conn = _pika()
    ch = conn.channel()
    if persistent:
        ch.confirm_delivery()  # basic_publish now waits for the broker's confirm
    props = pika.BasicProperties(delivery_mode=2 if persistent else 1)
    exchange, key = (name, "") if topic else ("", name)
    body = b"x" * size
    start = time.perf_counter()
    for _ in range(count):
        ch.basic_publish(exchange, key, body, properties=props)
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


CLIENTS = {
    "ours": (ours_consume, ours_produce, "our Python client"),
    "ours-sync": (ours_consume, ours_produce, "our Python client, sync on"),
    "activemq": (amq_consume, amq_produce, "stomp.py (STOMP)"),
    "rabbitmq": (rmq_consume, rmq_produce, "pika (AMQP 0-9-1)"),
}


def one_run(kind: str, workload: str, target, args) -> tuple[float, float, int, int]:
    consume, produce, _ = CLIENTS[kind]
    topic = workload == "topic"
    persistent = workload == "persistent"
    count = args.persistent_count if persistent else args.count
    base = ("p." if persistent else "b.") + uuid.uuid4().hex[:8]
    names = [base] * (4 if topic else 1)
    parent, child = mp.Pipe()
    proc = mp.Process(target=consume, args=(target, names, topic, count, child))
    proc.start()
    if not parent.poll(60) or parent.recv() != "ready":
        proc.kill()
        raise RuntimeError(f"{kind}: consumers did not start")
    elapsed = produce(target, base, topic, count, args.size, persistent)
    got, first, last = parent.recv()
    proc.join(30)
    total = sum(got)
    return count / elapsed, total / max(last - first, 1e-9), total, count * len(names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--brokers", default=",".join(BROKERS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--persistent-count", type=int, default=5_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the brokers interleaved")
    ap.add_argument("--host", default=None, help="our broker's port mapper host (else started)")
    ap.add_argument("--port", type=int, default=7676)
    args = ap.parse_args()
    kinds = [k for k in args.brokers.split(",") if k]
    workloads = [w for w in args.workloads.split(",") if w]
    started = []
    targets = {"activemq": AMQ, "rabbitmq": RMQ, "ours": (args.host, args.port)}
    for kind, extra in (("ours", ()), ("ours-sync", (f"{SYNC}=true",))):
        if kind in kinds and (args.host is None or kind == "ours-sync"):
            from broker.launcher import start_broker

            tmp = Path(tempfile.mkdtemp(prefix="imq-compare-"))
            b = start_broker(tmp, "imq.log.level=WARNING", *extra)
            started.append(b)
            targets[kind] = (b.host, b.portmapper_port)
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    failed = False
    try:
        for r in range(args.rounds):
            for workload in workloads:
                for kind in kinds:
                    if kind == "ours-sync" and workload != "persistent":
                        continue  # the same broker as ours without the store
                    p, c, got, want = one_run(kind, workload, targets[kind], args)
                    results.setdefault((workload, kind), []).append((p, c))
                    note = "" if got == want else f"  MISSING {want - got:,} of {want:,}"
                    if got != want and workload == "persistent":
                        failed = True
                    print(
                        f"round {r + 1} {workload:10} {kind:8} producer {p:9,.0f} msgs/s  "
                        f"consumers {c:9,.0f} msgs/s{note}",
                        flush=True,
                    )
    finally:
        for b in started:
            b.stop()
    print()
    print("| workload | broker (client) | producer msgs/s | consumers msgs/s |")
    print("|---|---|---|---|")
    for workload in workloads:
        for kind in kinds:
            rows = results.get((workload, kind), [])
            if not rows:
                continue
            ps, cs = [x[0] for x in rows], [x[1] for x in rows]
            print(f"| {workload} | {kind} ({CLIENTS[kind][2]}) | {_span(ps)} | {_span(cs)} |")
    if "ours" in kinds:
        print()
        for workload in workloads:
            mine = results.get((workload, "ours"))
            for kind in kinds:
                theirs = results.get((workload, kind))
                if kind.startswith("ours") or not mine or not theirs:
                    continue
                pr = statistics.median(x[0] for x in mine) / statistics.median(x[0] for x in theirs)
                cr = statistics.median(x[1] for x in mine) / statistics.median(x[1] for x in theirs)
                print(
                    f"{workload}: ours / {kind} (medians): producer {pr:.2f}x, consumers {cr:.2f}x"
                )
    if failed:
        raise SystemExit("persistent messages went missing")


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:,.0f}" if round(lo, -2) == round(hi, -2) else f"{lo:,.0f}–{hi:,.0f}"


if __name__ == "__main__":
    main()
