"""IBM MQ reports across a conventional cluster (issue 17 with issue 16): a request
produced on broker A and consumed on broker B gets its COA and COD on the reply-to the
producer reads on A; the COD only once B's consumer acknowledges (or commits)."""

from __future__ import annotations

import struct
import time
import uuid

import pytest

from broker.protocol import mqreports as mq
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import build_packet
from broker.protocol.types import PacketType
from openmq_client import AckMode, BytesMessage, Queue, Topic
from openmq_client.mqtypes import feedback_of, message_type, request
from openmq_client.sync import connect
from tests.cluster_procs import start_cluster
from tests.wire import control, login

pytestmark = pytest.mark.timeout(300)

BODY = bytes(range(200))


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    brokers = start_cluster(
        tmp_path_factory.mktemp("rcluster"),
        2,
        "imq.autocreate.destination.maxDeliveryCount=3",
        names=("RA", "RB"),
    )
    yield brokers
    for b in brokers:
        b.stop()


def conn(b, **kw):
    return connect(b.host, b.portmapper_port, request_timeout=20, **kw)


def reports_of(cons, n: int, first_wait: float = 15.0) -> list:
    """Up to ``n`` reports, then a short look for any extra one."""
    got = []
    while len(got) < n and (m := cons.receive(first_wait)) is not None:
        got.append(m)
    while (m := cons.receive(0.5)) is not None:
        got.append(m)
    return got


def check_report(rep, original, feedback: int, body: bytes) -> None:
    assert message_type(rep) == mq.MQMT_REPORT
    assert feedback_of(rep) == feedback
    assert rep.correlation_id == original.message_id
    assert rep.message_id != original.message_id
    assert bytes(getattr(rep, "body", b"") or b"") == body


def test_coa_on_arrival_and_cod_when_bs_consumer_acknowledges(cluster):
    a, b = cluster
    q, replies = Queue(name("rq")), Queue(name("replies"))
    with conn(a) as ca, conn(b) as cb:
        sb = cb.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        consumer = sb.create_consumer(q)
        cb.start()
        sa = ca.create_session()
        reply_cons = sa.create_consumer(replies)
        ca.start()
        msg = request(BytesMessage(BODY), replies, coa=mq.Data.NONE, cod=mq.Data.FIRST_100)
        sa.create_producer(q).send(msg)
        got = consumer.receive(15)
        assert got is not None and bytes(got.body) == BODY
        coa = reports_of(reply_cons, 1)
        # Delivered to B but not acknowledged: the COA only.
        assert [feedback_of(r) for r in coa] == [mq.MQFB_COA]
        check_report(coa[0], msg, mq.MQFB_COA, b"")
        sb.acknowledge()
        cod = reports_of(reply_cons, 1)
        assert [feedback_of(r) for r in cod] == [mq.MQFB_COD]
        check_report(cod[0], msg, mq.MQFB_COD, BODY[:100])


def test_reports_to_a_temporary_queue_and_cod_on_commit_not_rollback(cluster):
    a, b = cluster
    q = Queue(name("rt"))
    with conn(a) as ca, conn(b) as cb:
        sb = cb.create_session(transacted=True)
        consumer = sb.create_consumer(q)
        cb.start()
        sa = ca.create_session()
        tmp = sa.create_temporary_queue()
        reply_cons = sa.create_consumer(tmp)
        ca.start()
        msg = request(BytesMessage(BODY), tmp, coa=mq.Data.FULL, cod=mq.Data.NONE)
        sa.create_producer(q).send(msg)
        first = consumer.receive(15)
        assert first is not None
        sb.rollback()  # no COD for a rolled back receive
        again = consumer.receive(15)
        assert again is not None and again.redelivered
        sb.commit()
        got = reports_of(reply_cons, 2)
        assert sorted(feedback_of(r) for r in got) == [mq.MQFB_COA, mq.MQFB_COD]
        by = {feedback_of(r): r for r in got}
        check_report(by[mq.MQFB_COA], msg, mq.MQFB_COA, BODY)
        check_report(by[mq.MQFB_COD], msg, mq.MQFB_COD, b"")


def test_topic_cod_for_each_subscriber_copy_in_the_cluster(cluster):
    a, b = cluster
    t, replies = Topic(name("rtop")), Queue(name("treplies"))
    with conn(a) as ca, conn(b) as cb:
        sub_a = ca.create_session().create_consumer(t)
        sub_b = cb.create_session().create_consumer(t)
        ca.start()
        cb.start()
        sa = ca.create_session()
        reply_cons = sa.create_consumer(replies)
        producer = sa.create_producer(t)
        # B's subscription must have reached A before the request is published: a topic
        # keeps nothing for subscribers it does not know.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            producer.send(BytesMessage(b"probe"))
            if sub_b.receive(0.3) is not None:
                break
        else:
            raise AssertionError("B's subscription never reached A")
        while sub_a.receive(0.3) is not None or sub_b.receive(0.3) is not None:
            pass
        msg = request(BytesMessage(BODY), replies, coa=mq.Data.NONE, cod=mq.Data.NONE)
        producer.send(msg)
        for sub in (sub_a, sub_b):
            m = sub.receive(15)
            assert m is not None and bytes(m.body) == BODY
        got = reports_of(reply_cons, 3)
        # One COA for the destination, one COD per subscriber's copy (A's and B's).
        assert sorted(feedback_of(r) for r in got) == [mq.MQFB_COA, mq.MQFB_COD, mq.MQFB_COD]
        for r in got:
            assert r.correlation_id == msg.message_id


def test_expiry_report_for_a_message_waiting_for_bs_consumer(cluster):
    a, b = cluster
    q, replies = Queue(name("rx")), Queue(name("xreplies"))
    with conn(a) as ca, conn(b) as cb:
        sa = ca.create_session()
        reply_cons = sa.create_consumer(replies)
        ca.start()
        msg = request(BytesMessage(BODY), replies, expiration=mq.Data.FIRST_100)
        sa.create_producer(q).send(msg, ttl_ms=300)
        time.sleep(0.6)
        # The message expired while waiting: B's consumer gets nothing, A sends the report.
        consumer = cb.create_session().create_consumer(q)
        cb.start()
        assert consumer.receive(2) is None
        got = reports_of(reply_cons, 1)
        assert [feedback_of(r) for r in got] == [mq.MQFB_EXPIRATION]
        check_report(got[0], msg, mq.MQFB_EXPIRATION, BODY[:100])


def test_exception_report_when_bs_consumer_backs_out_over_max_delivery_count(cluster):
    a, b = cluster
    q, replies = Queue(name("rmdc")), Queue(name("mreplies"))
    with conn(a) as ca, conn(b) as cb:
        sa = ca.create_session()
        reply_cons = sa.create_consumer(replies)
        ca.start()
        msg = request(BytesMessage(BODY), replies, cod=mq.Data.NONE, exception=mq.Data.FULL)
        sa.create_producer(q).send(msg)
        sb = cb.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        consumer = sb.create_consumer(q)
        cb.start()
        for _ in range(3):  # maxDeliveryCount: each recover sends it back to A
            assert consumer.receive(15) is not None
            sb.recover()
        got = reports_of(reply_cons, 1)
        # Backed out, never consumed: the exception report only, from A.
        assert [feedback_of(r) for r in got] == [mq.MQRC_BACKED_OUT]
        check_report(got[0], msg, mq.MQRC_BACKED_OUT, BODY)
        assert consumer.receive(1) is None


@pytest.mark.parametrize(
    ("dead_reason", "feedback"),
    [(0, mq.MQRC_BACKED_OUT), (1, mq.MQFB_EXPIRATION)],
    ids=["given-up", "expired-at-client"],
)
def test_client_on_b_marks_the_message_dead(cluster, dead_reason: int, feedback: int):
    """A client on B acknowledges the message as DEAD (JMQAckType 2: given up, or found
    expired): A, its home, sends the exception or expiry report, not a COD."""
    a, b = cluster
    q, replies = name("rdead"), Queue(name("dreplies"))
    peer = login(b.host, b.jms_port)
    sid = peer.request(
        control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(2)), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    cid = peer.request(
        control(
            PacketType.ADD_CONSUMER,
            5,
            JMQDestination=q,
            JMQDestType=JInt(1),
            JMQSessionID=JLong(sid),
            JMQSize=JInt(10),
        ),
        PacketType.ADD_CONSUMER_REPLY,
    ).properties["JMQConsumerID"]
    peer.send(build_packet(PacketType.START))
    with conn(a) as ca:
        sa = ca.create_session()
        reply_cons = sa.create_consumer(replies)
        ca.start()
        msg = request(
            BytesMessage(BODY),
            replies,
            cod=mq.Data.NONE,
            exception=mq.Data.NONE,
            expiration=mq.Data.NONE,
        )
        sa.create_producer(Queue(q)).send(msg)
        got = peer.expect(PacketType.BYTES_MESSAGE)
        ack = build_packet(
            PacketType.ACKNOWLEDGE,
            flags=0x10,
            consumer_id=6,
            props={"JMQAckType": JInt(2), "JMQDeadReason": JInt(dead_reason)},
            body=struct.pack(">q", cid) + got.raw[20:52],
        )
        peer.request(ack, PacketType.ACKNOWLEDGE_REPLY)
        reports = reports_of(reply_cons, 1)
        assert [feedback_of(r) for r in reports] == [feedback]
        check_report(reports[0], msg, feedback, b"")
    peer.close()
