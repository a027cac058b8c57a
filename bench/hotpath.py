"""The broker's own CPU per message, in process: no sockets, no client, no event loop.

    .venv/bin/python bench/hotpath.py                    # every case, 5 repeats each
    .venv/bin/python bench/hotpath.py --cases queue-dups --count 50000 --repeat 9
    .venv/bin/python bench/hotpath.py --profile /tmp/hot.prof   # cProfile of one repeat

A real :class:`~broker.server.broker.Broker` (never started: no listener, no store
writer) with two or more :class:`~broker.engine.ConnectionEngine` objects driven the
way ``server/connection.py`` drives them: the producer's bytes are fed in 32 KB reads
(``READ_SLICE``), the deliveries each consumer engine queued are decoded as a client
would and answered as the stock Java client answers them (``queue-dups``: one
ACKNOWLEDGE of 10 blocks per 10 messages; ``queue-auto``: one ACKNOWLEDGE with the A
flag per message, as ``SessionImpl`` does for AUTO_ACKNOWLEDGE; ``topic``: four AUTO
subscribers, each acknowledging every message without asking for a reply, as the client
does for non-persistent topic messages), with a
consumer RESUME_FLOW whenever a delivery carries the C flag (prefetch 1,000).  The
messages are 1 KB BYTES messages shaped like the captured Java client's
(third_party/openmq/vectors/send-messages: producer id, destination and class in the variable
header, no properties).

What it prints is the process CPU time per message sent (``time.process_time``),
median and range over the repeats: the broker's per-message work in Python, which on a
2-core machine shared with the client decides its throughput (bench/jms.py).  The
client's decoding of what the broker wrote is timed apart and left out.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os  # noqa: E402

import django  # noqa: E402

# No database is touched: a Broker that is never started writes no rows.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from broker.config import BrokerConfig  # noqa: E402
from broker.engine import ConnectionEngine  # noqa: E402
from broker.protocol.jtypes import JInt, JLong  # noqa: E402
from broker.protocol.packet import build_packet  # noqa: E402
from broker.protocol.types import (  # noqa: E402
    DEST_QUEUE,
    DEST_TOPIC,
    FLAG_A,
    FLAG_C,
    FLAG_Q,
    AckMode,
    PacketType,
)
from broker.security.digest import md5str  # noqa: E402
from broker.security.filerepo import FileUserRepository  # noqa: E402
from broker.server.broker import Broker  # noqa: E402
from broker.server.connection import READ_SLICE  # noqa: E402
from tests.test_engine import _login, _request, _sent  # noqa: E402  (the engine tests' driver)

CLASSES = {DEST_QUEUE: "com.sun.messaging.BasicQueue", DEST_TOPIC: "com.sun.messaging.BasicTopic"}


def ask(e: ConnectionEngine, ptype: int, **props) -> dict:
    e.receive_data(_request(ptype, **props))
    (reply,) = _sent(e)
    return reply.properties


def setup(tmp: Path, dest_type: int, consumers: int, ack_mode: int):
    """A broker as tests/test_engine.py's fixture makes it, logged-in consumers (started)
    and a producer, each an engine logged in as test_engine does it."""
    passwd = tmp / "passwd"
    passwd.write_text(f"guest:{md5str('guest:guest')}:anonymous:1\n")
    config = BrokerConfig({"imq.varhome": str(tmp / "var"), "imq.accesscontrol.enabled": "false"})
    broker = Broker(config, FileUserRepository(passwd))
    broker.router.observers.remove_transaction_observer(broker.txn_records)
    name = "hot"
    subs = []
    for _ in range(consumers):
        c = _login(broker)
        sid = ask(c, PacketType.CREATE_SESSION, JMQAckMode=JInt(ack_mode))["JMQSessionID"]
        cid = ask(
            c,
            PacketType.ADD_CONSUMER,
            JMQDestination=name,
            JMQDestType=JInt(dest_type),
            JMQSessionID=JLong(int(sid)),
            JMQSize=JInt(1000),
        )["JMQConsumerID"]
        c.receive_data(_request(PacketType.START))
        _sent(c)
        subs.append((c, int(cid)))
    p = _login(broker)
    sid = ask(p, PacketType.CREATE_SESSION, JMQAckMode=JInt(AckMode.AUTO_ACKNOWLEDGE))
    pid = ask(
        p,
        PacketType.ADD_PRODUCER,
        JMQDestination=name,
        JMQDestType=JInt(dest_type),
        JMQSessionID=sid["JMQSessionID"],
    )["JMQProducerID"]
    return broker, p, int(pid), subs, name


def messages(name: str, dest_type: int, pid: int, count: int, size: int) -> list[bytes]:
    """``count`` packets as the Java client sends them, in READ_SLICE reads."""
    flags = FLAG_Q if dest_type == DEST_QUEUE else 0
    fields = {9: pid, 1: name, 6: CLASSES[dest_type]}
    one = [
        build_packet(
            PacketType.BYTES_MESSAGE,
            flags=flags,
            fields=fields,
            body=bytes(size),
            ip=bytes(10) + b"\xff\xff\x7f\x00\x00\x01",
            port=54088,
            sequence=i + 1,
        )
        for i in range(count)
    ]
    stream = b"".join(one)
    return [stream[i : i + READ_SLICE] for i in range(0, len(stream), READ_SLICE)]


def ack(cid: int, keys: list[bytes], flags: int) -> bytes:
    import struct

    body = b"".join(struct.pack(">q", cid) + k for k in keys)
    return build_packet(PacketType.ACKNOWLEDGE, flags=flags, body=body)


def run_case(case: str, count: int, size: int, profile: cProfile.Profile | None) -> float:
    dest_type = DEST_TOPIC if case == "topic" else DEST_QUEUE
    consumers = 4 if case == "topic" else 1
    ack_mode = AckMode.DUPS_OK_ACKNOWLEDGE if case == "queue-dups" else AckMode.AUTO_ACKNOWLEDGE
    with tempfile.TemporaryDirectory(prefix="hotpath-") as tmp:
        broker, prod, pid, subs, name = setup(Path(tmp), dest_type, consumers, ack_mode)
        reads = messages(name, dest_type, pid, count, size)
        pending: dict[int, list[bytes]] = {cid: [] for _c, cid in subs}
        resume = {
            cid: build_packet(
                PacketType.RESUME_FLOW, props={"JMQConsumerID": JLong(cid), "JMQSize": JInt(1000)}
            )
            for _c, cid in subs
        }
        client_time = 0.0
        delivered = 0
        gc.collect()
        if profile:
            profile.enable()
        t0 = time.process_time()

        def serve() -> bool:
            # Play each consumer's client: decode what it got, answer as the Java client.
            nonlocal client_time, delivered
            busy = False
            for c, cid in subs:
                if not c.flush_pending:
                    continue
                busy = True
                c0 = time.process_time()
                pkts = _sent(c)
                replies = []
                for pkt in pkts:
                    if pkt.type != PacketType.BYTES_MESSAGE:
                        continue
                    delivered += 1
                    key = pkt.sysmsgid
                    if case == "queue-auto":
                        replies.append(ack(cid, [key], FLAG_A))
                    elif case == "topic":
                        # Acknowledged one by one, but without waiting for a reply.
                        replies.append(ack(cid, [key], 0))
                    elif case == "queue-dups":
                        keys = pending[cid]
                        keys.append(key)
                        if len(keys) == 10:
                            replies.append(ack(cid, keys, 0))
                            keys.clear()
                    if pkt.flags & FLAG_C:
                        replies.append(resume[cid])
                client_time += time.process_time() - c0
                for r in replies:
                    c.receive_data(r)
            return busy

        for data in reads:
            prod.receive_data(data)
            prod.data_to_send()
            serve()
        while serve():
            pass
        used = time.process_time() - t0 - client_time
        if profile:
            profile.disable()
        if delivered != count * consumers:
            sys.exit(f"{case}: {delivered} deliveries of {count * consumers}")
        broker.executor.shutdown(wait=False)
    return 1e6 * used / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", default="queue-dups,queue-auto,topic")
    ap.add_argument("--count", type=int, default=30_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", type=Path, help="write a cProfile of the last repeat here")
    args = ap.parse_args()
    report_cases(run_case, args)


def report_cases(
    run: Callable[[str, int, int, cProfile.Profile | None], float],
    args: argparse.Namespace,
    widths: tuple[int, int] = (11, 6),
) -> None:
    """Run each of ``args.cases`` ``args.repeat`` times with ``run(case, count, size,
    profile)`` (µs per message) and print the median and range; the last repeat is
    profiled into ``<args.profile>.<case>`` when asked (bench/stomp_hotpath.py too)."""
    name_w, value_w = widths
    for case in args.cases.split(","):
        results = []
        for i in range(args.repeat):
            prof = cProfile.Profile() if args.profile and i == args.repeat - 1 else None
            results.append(run(case, args.count, args.size, prof))
            if prof:
                prof.dump_stats(f"{args.profile}.{case}")
        print(
            f"{case:{name_w}s} {statistics.median(results):{value_w}.2f} us/msg sent "
            f"(range {min(results):.2f}-{max(results):.2f}, {args.repeat} x {args.count:,})",
            flush=True,
        )


if __name__ == "__main__":
    main()
