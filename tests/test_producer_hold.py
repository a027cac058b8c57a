"""Producers are held, not dropped: a producer that outruns its consumers gets credit
(RESUME_FLOW JMQSize) only while its destination has room below its high-water mark, so
a REJECT_NEWEST destination that consumers drain never reaches its limit; where nobody
drains it, REJECT_NEWEST still rejects at the limit (broker/core/limits.py).

The rule is driven in-process through the sans-IO engine (as tests/test_engine.py); the
last test runs the stock OpenMQ Java client (bench/java/JmsBench.java, compiled here)
against a real broker: unpaced messages ten times a destination's limit through a queue
and a topic arrive exactly once.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from broker.core import limits
from broker.engine import ConnectionEngine
from broker.launcher import ROOT
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import Packet, build_packet
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TOPIC,
    FLAG_A,
    FLAG_C,
    FLAG_Q,
    AckMode,
    PacketType,
)
from broker.server.broker import Broker
from tests.jvmflags import JAVA, JAVAC

from .interop.jvm import classpath, require_java
from .test_engine import _login, _request, _sent, _status
from .test_engine import broker as broker  # noqa: F401  (the fixture)

BATCH = 20
# The Java test's destination limit (messages).
LIMIT = 500
_seq = iter(range(1, 1 << 30))


def _session(e: ConnectionEngine, mode: int = AckMode.CLIENT_ACKNOWLEDGE) -> int:
    e.receive_data(_request(PacketType.CREATE_SESSION, JMQAckMode=JInt(mode)))
    (reply,) = _sent(e)
    return int(reply.properties["JMQSessionID"])  # type: ignore[arg-type]


def _producer(broker: Broker, name: str, dtype: int) -> tuple[ConnectionEngine, int, int]:
    e = _login(broker)
    sid = _session(e)
    e.receive_data(
        _request(
            PacketType.ADD_PRODUCER,
            JMQDestination=name,
            JMQDestType=JInt(dtype),
            JMQSessionID=JLong(sid),
        )
    )
    (reply,) = _sent(e)
    assert _status(reply) == 200
    return e, int(reply.properties["JMQProducerID"]), int(reply.properties["JMQSize"])  # type: ignore[arg-type]


def _consumer(broker: Broker, name: str, dtype: int) -> tuple[ConnectionEngine, int]:
    e = _login(broker)
    sid = _session(e)
    e.receive_data(
        _request(
            PacketType.ADD_CONSUMER,
            JMQDestination=name,
            JMQDestType=JInt(dtype),
            JMQSessionID=JLong(sid),
        )
    )
    (reply,) = _sent(e)
    cid = int(reply.properties["JMQConsumerID"])  # type: ignore[arg-type]
    e.receive_data(_request(PacketType.START))
    _sent(e)
    return e, cid


def _send(e: ConnectionEngine, name: str, pid: int, n: int, dtype: int) -> list[Packet]:
    """The client's window of ``n`` messages, the last one marked C; what came back."""
    q = FLAG_Q if dtype == DEST_QUEUE else 0
    for i in range(n):
        e.receive_data(
            build_packet(
                PacketType.BYTES_MESSAGE,
                flags=q | (FLAG_C if i == n - 1 else 0),
                fields={1: name, 9: pid},
                sequence=next(_seq),  # the message id the acknowledgements name
                body=bytes(100),
            )
        )
    return _sent(e)


def _credit(packets: list[Packet], pid: int) -> int | None:
    resumes = [p for p in packets if p.type == PacketType.RESUME_FLOW]
    if not resumes:
        return None
    (r,) = resumes
    assert r.properties["JMQProducerID"] == pid
    return int(r.properties["JMQSize"])  # type: ignore[arg-type]


def test_queue_producer_is_held_below_the_limit_while_consumed(broker: Broker) -> None:
    broker.router.settings.producer_batch = BATCH
    broker.router.create_destination(
        "hq", DEST_QUEUE, None, auto=False, attributes={"maxNumMsgs": 100}
    )
    dest = broker.router.lookup("hq", DEST_QUEUE)
    assert dest is not None
    cons, cid = _consumer(broker, "hq", DEST_QUEUE)
    prod, pid, credit = _producer(broker, "hq", DEST_QUEUE)
    assert credit == BATCH
    # Full credits while there is room below the high-water mark (90: 10% headroom),
    # then what is left of it, then nothing: the producer waits, nothing is refused.
    credits = []
    while credit:
        credit = _credit(_send(prod, "hq", pid, credit, DEST_QUEUE), pid) or 0
        credits.append(credit)
    assert credits == [BATCH, BATCH, BATCH, 10, 0]
    assert dest.msg_count == 90 and dest.stats.rejected == 0
    assert dest.waiting_producers == [(prod, pid)]
    delivered = [p for p in _sent(cons) if p.type == PacketType.BYTES_MESSAGE]
    assert len(delivered) == 90

    # The consumer acknowledges 9: not yet room for a useful credit (10).
    def ack(msgs: list[Packet]) -> None:
        body = b"".join(struct.pack(">q", cid) + m.sysmsgid for m in msgs)
        cons.receive_data(build_packet(PacketType.ACKNOWLEDGE, body=body, flags=FLAG_A))
        assert _status(_sent(cons)[0]) == 200

    ack(delivered[:9])
    assert _credit(_sent(prod), pid) is None
    ack(delivered[9:10])
    assert _credit(_sent(prod), pid) == 10  # released at 80 with the room there is
    assert _credit(_send(prod, "hq", pid, 10, DEST_QUEUE), pid) is None
    assert dest.msg_count == 90

    # The consumer goes: nobody drains the queue, so the producer is no longer held, and
    # at the limit itself REJECT_NEWEST refuses, as OpenMQ does.
    cons.receive_data(_request(PacketType.DELETE_CONSUMER, JMQConsumerID=JLong(cid)))
    assert _credit(_sent(prod), pid) == BATCH
    assert _credit(_send(prod, "hq", pid, BATCH, DEST_QUEUE), pid) == BATCH
    assert dest.msg_count == 100 and dest.stats.rejected == 10


def test_topic_credit_counts_every_subscriber_and_a_closed_producer_frees_its_credit(
    broker: Broker,
) -> None:
    broker.router.settings.producer_batch = BATCH
    broker.router.create_destination(
        "ht", DEST_TOPIC, None, auto=False, attributes={"maxNumMsgs": 100}
    )
    dest = broker.router.lookup("ht", DEST_TOPIC)
    assert dest is not None
    subs = [_consumer(broker, "ht", DEST_TOPIC) for _ in range(2)]
    prod, pid, credit = _producer(broker, "ht", DEST_TOPIC)
    # A second producer that sends nothing holds its credit: the first gets less room.
    idle, idle_pid, idle_credit = _producer(broker, "ht", DEST_TOPIC)
    assert (credit, idle_credit) == (BATCH, BATCH)
    # Each message is two entries (90 / 2 = 45 messages of room, 20 held by the idle one).
    assert _credit(_send(prod, "ht", pid, credit, DEST_TOPIC), pid) is None
    assert dest.msg_count == 40 and dest.waiting_producers == [(prod, pid)]
    # The idle producer closes: its credit is room again.
    idle.receive_data(_request(PacketType.DELETE_PRODUCER, JMQProducerID=JLong(idle_pid)))
    assert _credit(_sent(prod), pid) == BATCH
    # 80 entries: room for 5 more messages, less than a useful credit (10): it waits.
    assert _credit(_send(prod, "ht", pid, BATCH, DEST_TOPIC), pid) is None
    assert dest.msg_count == 80 and dest.stats.rejected == 0
    for e, _cid in subs:
        assert len([p for p in _sent(e) if p.type == PacketType.BYTES_MESSAGE]) == 40


def test_an_idle_producers_credit_stops_counting_after_a_while(broker: Broker) -> None:
    """Credit a producer does not come back for (it sends nothing) counts against the
    others' room for CREDIT_AGE seconds only; after that the headroom covers it."""
    now = [1000.0]
    broker.router.limits.clock = lambda: now[0]
    broker.router.settings.producer_batch = BATCH
    broker.router.create_destination(
        "aq", DEST_QUEUE, None, auto=False, attributes={"maxNumMsgs": 100}
    )
    _consumer(broker, "aq", DEST_QUEUE)
    _idle, _idle_pid, idle_credit = _producer(broker, "aq", DEST_QUEUE)
    prod, pid, credit = _producer(broker, "aq", DEST_QUEUE)
    assert (idle_credit, credit) == (BATCH, BATCH)
    credits = []
    while credit:
        credit = _credit(_send(prod, "aq", pid, credit, DEST_QUEUE), pid) or 0
        credits.append(credit)
    # 90 below the high-water mark, less the idle producer's 20: held at 70.
    assert credits == [BATCH, BATCH, 10, 0]
    assert broker.router.lookup("aq", DEST_QUEUE).msg_count == 70  # type: ignore[union-attr]
    assert _producer(broker, "aq", DEST_QUEUE)[2] == 0  # a newcomer waits too
    now[0] += limits.CREDIT_AGE + 1
    assert _producer(broker, "aq", DEST_QUEUE)[2] == BATCH  # the idle credit no longer counts


# -- the stock Java client ------------------------------------------------------------


def _java_bench(tmp_path: Path) -> str:
    require_java()
    out = tmp_path / "classes"
    p = subprocess.run(
        [
            *JAVAC,
            "-cp",
            classpath(),
            "-d",
            str(out),
            str(ROOT / "bench/java/JmsBench.java"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if p.returncode != 0:
        pytest.fail(f"compiling bench/java/JmsBench.java failed:\n{p.stderr}", pytrace=False)
    return classpath(out)


@pytest.mark.timeout(300)
def test_java_producer_outrunning_its_consumers_loses_nothing(tmp_path: Path, own_broker) -> None:
    """Unpaced non-persistent messages, ten times the limit, through destinations of
    500 messages (REJECT_NEWEST, the default) with consumers slower than the producer:
    every message arrives exactly once, AUTO and DUPS_OK, queue and 1 -> 4 topic; nothing
    is dropped.  A producer's credit (imq.producer.maxBatch) is half the limit, as the
    defaults' 1,000 of a 2,000-message destination: each producer is held ~ten times over,
    as with 20,000 through 2,000, with a quarter of the messages."""
    cp = _java_bench(tmp_path)
    b = own_broker(
        f"imq.autocreate.destination.maxNumMsgs={LIMIT}",
        f"imq.producer.maxBatch={LIMIT // 2}",
        "imq.log.level=INFO",
    )
    url = f"url=mq://{b.host}:{b.portmapper_port}/jms"
    many, topic = f"count={LIMIT * 10}", f"count={LIMIT * 10 // 4}"  # a topic's 4 copies count
    runs = [
        ("queue AUTO", ["dest=queue", "ack=auto", many, "pause_us=50"]),
        ("queue DUPS_OK", ["dest=queue", "ack=dups_ok", many, "pause_us=50"]),
        ("topic 1->4 AUTO", ["dest=topic", "consumers=4", "ack=auto", topic, "pause_us=50"]),
    ]
    for label, args in runs:
        p = subprocess.run(
            [*JAVA, "-cp", cp, "JmsBench", url, *args],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        result = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), "")
        assert p.returncode == 0 and result, f"{label}:\n{p.stdout}\n{p.stderr}"
        fields = dict(kv.split("=") for kv in result.split()[1:])
        assert fields["missing"] == "0" and fields["duplicates"] == "0", f"{label}: {result}"
        assert fields["received"] == fields["expected"], f"{label}: {result}"
    log = b.log_text()
    assert "dropped" not in log and "refused" not in log, log[-3000:]
