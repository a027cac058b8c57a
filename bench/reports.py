"""The cost of IBM MQ reports: 1 KB non-persistent messages, 1 producer -> 1 queue -> 1
consumer, with COA + COD requested (two reports per message, drained from the reply-to
queue by a third connection) against none, and a request (JMS_IBM_MsgType, JMSReplyTo)
asking for no report between them.  Prints msgs/s of each and the ratio.

A run with reports ends when every message was consumed and every report received, so
the figure is what an application asking for both sees end to end.  Target: asking for
both reports costs less than 40% of the plain rate (ratio >= 0.60).  Starts its own
broker unless ``--host/--port`` name one; then it also prints the broker process's CPU
time per message sent (from /proc), which a loaded machine disturbs less than rates.

    .venv/bin/python bench/reports.py                 # 20,000 messages each way
    .venv/bin/python bench/reports.py --count 50000 --rounds 3
    .venv/bin/python bench/reports.py --in-process    # the router's part alone

``--in-process`` drives the broker's router and report generator directly (no sockets,
no clients): each message is parsed from its bytes, routed to a queue, delivered to a
consumer and acknowledged in DUPS_OK batches of 50, and its reports are built, routed to
the reply-to queue, delivered and acknowledged the same way.  It prints microseconds per
message plain and with COA+COD, and what one report costs against one plain message: the
floor under the end-to-end ratio while every report is a real message.
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

from broker.protocol import mqreports as mq  # noqa: E402
from openmq_client import AckMode, BytesMessage, JInt, Queue, connect  # noqa: E402

REPORTS = {
    mq.MSG_TYPE: JInt(mq.MQMT_REQUEST),
    mq.REPORT_COA: JInt(mq.MQRO_COA),
    mq.REPORT_COD: JInt(mq.MQRO_COD),
}
# A request that asks for no report: what the properties and JMSReplyTo alone cost.
TYPED = {mq.MSG_TYPE: JInt(mq.MQMT_REQUEST)}
MODES = ("none", "typed", "reports")


async def run(host: str, port: int, count: int, size: int, queue: str, mode: str) -> float:
    """msgs/s of ``count`` messages, end to end (and all their reports received)."""
    reports = mode == "reports"
    conns = [await connect(host, port, user="guest", password="guest") for _ in range(3)]
    pconn, cconn, rconn = conns
    psess = await pconn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    csess = await cconn.create_session(AckMode.DUPS_OK_ACKNOWLEDGE)
    rsess = await rconn.create_session(AckMode.DUPS_OK_ACKNOWLEDGE)
    dest, reply_to = Queue(queue), Queue(queue + ".reports")
    producer = await psess.create_producer(dest)
    consumer = await csess.create_consumer(dest)
    rconsumer = await rsess.create_consumer(reply_to)
    await cconn.start()
    await rconn.start()
    body = b"x" * size

    async def drain(cons, n: int, what: str) -> None:
        for i in range(n):
            if await cons.receive(timeout=60) is None:
                raise RuntimeError(f"{what} stalled after {i} of {n}")

    start = time.perf_counter()
    tasks = [asyncio.create_task(drain(consumer, count, "consumer"))]
    if reports:
        tasks.append(asyncio.create_task(drain(rconsumer, 2 * count, "reports")))
    for _ in range(count):
        if mode == "none":
            msg = BytesMessage(body)
        else:
            msg = BytesMessage(body, properties=REPORTS if reports else TYPED, reply_to=reply_to)
        await producer.send(msg, persistent=False)
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    for c in conns:
        await c.close()
    return count / elapsed


def in_process(count: int, size: int, reports: bool) -> float:
    """Microseconds per message through the router alone (see the docstring)."""
    from broker.core.message import Message
    from broker.core.reports import ReportGenerator
    from broker.core.router import MessageRouter
    from broker.protocol.packet import build_packet, parse_packet
    from broker.protocol.types import DEST_QUEUE, FLAG_Q, PacketType

    class Link:
        """A connection that always takes deliveries and only counts them."""

        render_delivery = None  # JMQ deliveries

        def __init__(self, lid: int) -> None:
            self.id, self.client_id, self.delivered = lid, None, 0

        def can_deliver(self) -> bool:
            return True

        def send_delivery(self, buf: bytearray) -> None:
            self.delivered += 1

    router = MessageRouter()
    gen = ReportGenerator(router)
    router.events.add(gen)
    clink, rlink, plink = Link(1), Link(2), Link(3)
    csess = router.create_session(clink, AckMode.DUPS_OK_ACKNOWLEDGE)  # type: ignore[arg-type]
    rsess = router.create_session(rlink, AckMode.DUPS_OK_ACKNOWLEDGE)  # type: ignore[arg-type]
    router.add_consumer(csess, "q", DEST_QUEUE).credit = -1
    if reports:
        router.add_consumer(rsess, "q.reports", DEST_QUEUE).credit = -1
    props = {k: v for k, v in REPORTS.items()} if reports else None
    fields = {1: "q", 4: "q.reports", 7: "com.sun.messaging.BasicQueue"} if reports else {1: "q"}
    body = b"x" * size
    raws = [
        build_packet(
            PacketType.BYTES_MESSAGE,
            props=props,
            body=body,
            flags=FLAG_Q,
            fields=fields,
            sequence=i + 1,
            timestamp=int(time.time() * 1000),
        )
        for i in range(count)
    ]

    def settle() -> None:
        router.acks.acknowledge(csess, list(csess.unacked))
        gen.flush()
        if rsess.unacked:
            router.acks.acknowledge(rsess, list(rsess.unacked))

    start = time.perf_counter()
    for i, raw in enumerate(raws):
        pkt = parse_packet(raw)
        if pkt.prop_size:
            pkt.properties  # noqa: B018 - checked on arrival, as the engine does
        router.route(Message(pkt, pkt.fields[1], plink.id), plink, DEST_QUEUE)  # type: ignore[arg-type]
        if i % 50 == 49:
            settle()
    settle()
    elapsed = time.perf_counter() - start
    want = 2 * count if reports else 0
    if clink.delivered != count or rlink.delivered != want:
        raise RuntimeError(f"delivered {clink.delivered}/{count}, reports {rlink.delivered}/{want}")
    return elapsed / count * 1e6


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--host", default=None, help="use a running broker (port mapper host)")
    ap.add_argument("--port", type=int, default=7676, help="its port mapper port")
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2, help="alternating runs of each; best kept")
    ap.add_argument("--in-process", action="store_true", help="the router's part alone")
    args = ap.parse_args()
    if args.in_process:
        plain, both = [], []
        for _ in range(max(args.rounds, 3)):
            plain.append(in_process(args.count, args.size, False))
            both.append(in_process(args.count, args.size, True))
        p, r = min(plain), min(both)
        report = (r - p) / 2
        print(
            f"in process, {args.count} x {args.size} B, least of {len(plain)}: plain {p:.1f} us "
            f"a message, COA+COD {r:.1f} us; one report {report:.1f} us = {report / p:.2f} of a "
            f"plain message; router-bound ratio {p / r:.2f}"
        )
        return
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
    try:
        asyncio.run(run(host, port, 2000, args.size, "bench.warmup", "reports"))
        rates: dict[str, list[float]] = {m: [] for m in MODES}
        cpu: dict[str, list[float]] = {m: [] for m in MODES}
        for i in range(args.rounds):
            for mode in MODES:
                before = cpu_seconds(broker.proc.pid) if broker is not None else 0.0
                queue = f"bench.{mode}{i}"
                rates[mode].append(asyncio.run(run(host, port, args.count, args.size, queue, mode)))
                if broker is not None:
                    used = cpu_seconds(broker.proc.pid) - before
                    cpu[mode].append(used / args.count * 1e6)
        p, t, r = (max(rates[m]) for m in MODES)
        print(
            f"reports: {args.count} x {args.size} B non-persistent, best of {args.rounds}: "
            f"none {p:,.0f} msgs/s, request without reports {t:,.0f} msgs/s, COA+COD "
            f"{r:,.0f} msgs/s (+{2 * r:,.0f} reports/s); ratio {r / p:.2f} (cost {1 - r / p:.0%} "
            "of the plain rate; target < 40%)"
        )
        if broker is not None:
            p, t, r = (min(cpu[m]) for m in MODES)
            print(
                f"broker CPU per message sent (least of {args.rounds}): none {p:.0f} us, "
                f"request without reports {t:.0f} us, COA+COD {r:.0f} us"
            )
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
