"""The report generator (broker/core/reports.py) on an in-process router: reports are
queued while the router works and sent by flush, never from inside an event."""

from __future__ import annotations

import time

import pytest

from broker.core.errors import RouterError
from broker.core.reports import ReportGenerator, reply_to_type
from broker.core.router import MessageRouter
from broker.core.session import Session
from broker.protocol import mqreports as mq
from broker.protocol.jtypes import JInt
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import DEST_QUEUE, DEST_TEMP, DEST_TOPIC, FLAG_Q, PacketType, Status

from .test_router_plugins import Link

pytestmark = pytest.mark.fast


def request(n: int, options: dict[str, int], reply_to: str = "replies") -> object:
    from broker.core.message import Message

    props = {k: JInt(v) for k, v in options.items()}
    raw = build_packet(
        PacketType.BYTES_MESSAGE,
        props=props,
        body=bytes([n]) * 10,
        flags=FLAG_Q,
        fields={1: "q", 4: reply_to, 7: "com.sun.messaging.BasicQueue"},
        sequence=n,
        timestamp=int(time.time() * 1000),
    )
    return Message(parse_packet(raw), "q", 0)


def test_reports_wait_for_flush_and_land_on_the_reply_to() -> None:
    r = MessageRouter()
    scheduled: list = []
    gen = ReportGenerator(r, schedule=scheduled.append)
    r.events.add(gen)
    link = Link(3)
    sess: Session = r.create_session(link, 2)  # type: ignore[arg-type]
    msg = request(1, {mq.REPORT_COA: mq.MQRO_COA, mq.REPORT_COD: mq.MQRO_COD})
    r.route(msg, link, DEST_QUEUE)  # type: ignore[arg-type]
    assert "replies" not in r.queues  # nothing sent from inside the router
    assert scheduled == [gen.flush] and len(gen.pending) == 1
    cons = r.add_consumer(sess, "q", DEST_QUEUE)
    r.redispatch([sess])
    r.acks.acknowledge(sess, [(cons.id, k[1]) for k in list(sess.unacked)])
    assert len(gen.pending) == 2 and len(scheduled) == 1  # one flush for the batch
    assert gen.flush() == 2
    replies = r.queues["replies"]
    feedbacks = [parse_packet(e.msg.raw).properties[mq.FEEDBACK] for e in replies.dq]
    assert feedbacks == [mq.MQFB_COA, mq.MQFB_COD]
    for e in replies.dq:
        pkt = parse_packet(e.msg.raw)
        assert pkt.fields[3] == msg.message_id  # type: ignore[attr-defined]
        assert pkt.body == b""


def test_a_failed_scheduling_is_tried_again() -> None:
    r = MessageRouter()
    calls: list = []

    def schedule(fn) -> None:
        calls.append(fn)
        if len(calls) == 1:
            raise RuntimeError("no event loop")

    gen = ReportGenerator(r, schedule=schedule)
    r.events.add(gen)
    link = Link(4)
    r.route(request(1, {mq.REPORT_COA: mq.MQRO_COA}), link, DEST_QUEUE)  # type: ignore[arg-type]
    r.route(request(2, {mq.REPORT_COA: mq.MQRO_COA}), link, DEST_QUEUE)  # type: ignore[arg-type]
    assert len(calls) == 2 and len(gen.pending) == 2
    assert gen.flush() == 2


@pytest.mark.parametrize(
    ("name", "cls", "expected"),
    [
        ("q", "com.sun.messaging.BasicQueue", DEST_QUEUE),
        ("t", "com.sun.messaging.BasicTopic", DEST_TOPIC),
        ("x", "com.sun.messaging.jmq.jmsclient.TemporaryQueueImpl", DEST_QUEUE | DEST_TEMP),
        ("temporary_destination://topic/h/1/1", "", DEST_TOPIC | DEST_TEMP),
        ("temporary_destination://queue/h/1/1", "", DEST_QUEUE | DEST_TEMP),
        ("y", "com.sun.messaging.jmq.jmsclient.TemporaryTopicImpl", DEST_TOPIC | DEST_TEMP),
    ],
)
def test_reply_to_types(name, cls, expected) -> None:
    assert reply_to_type(name, cls) == expected


def test_put_check_refuses_what_needs_a_reply_to_and_has_none() -> None:
    """MQRC_MISSING_REPLY_TO_Q: reports (broker's or PAN/NAN) or a request without a
    JMSReplyTo fail the send (400) before anything is queued or auto-created; Pass_Msg_ID
    alone, a datagram and a plain message pass; the broker's own messages (no link) are
    not checked."""
    r = MessageRouter()
    gen = ReportGenerator(r, schedule=lambda fn: None)
    r.events.add(gen)
    r.observers.put_check = gen
    link = Link(3)
    for options in (
        {mq.REPORT_COA: mq.MQRO_COA},
        {mq.REPORT_NAN: mq.MQRO_NAN},
        {mq.MSG_TYPE: mq.MQMT_REQUEST},
    ):
        with pytest.raises(RouterError) as exc:
            r.route(request(1, options, reply_to=""), link, DEST_QUEUE)  # type: ignore[arg-type]
        assert exc.value.status == Status.BAD_REQUEST
        assert exc.value.reason.startswith("MQRC_MISSING_REPLY_TO_Q (2027): the message ")
    assert "q" not in r.queues
    with pytest.raises(RouterError, match=r"asks for reports \(COD, PAN\)"):
        opts = {mq.REPORT_COD: mq.MQRO_COD, mq.REPORT_PAN: mq.MQRO_PAN}
        r.route(request(2, opts, reply_to=""), link, DEST_QUEUE)  # type: ignore[arg-type]
    for n, options in enumerate(
        (
            {mq.REPORT_PASS_MSG_ID: mq.MQRO_PASS_MSG_ID},
            {mq.MSG_TYPE: mq.MQMT_DATAGRAM},
            {},
        )
    ):
        r.route(request(10 + n, options, reply_to=""), link, DEST_QUEUE)  # type: ignore[arg-type]
    r.route(request(20, {mq.REPORT_COA: mq.MQRO_COA}), link, DEST_QUEUE)  # type: ignore[arg-type]
    r.route(request(21, {mq.REPORT_COA: mq.MQRO_COA}, reply_to=""), None, DEST_QUEUE)  # type: ignore[arg-type]
    assert len(list(r.queues["q"].dq)) == 5
