"""The client's IBM MQ helpers (openmq_client/mqtypes.py): request/datagram marking,
make_reply and make_report honouring the request's options, and against a broker."""

from __future__ import annotations

import pytest

from broker.protocol import mqreports as mq
from broker.protocol.packet import VH_CORRELATIONID, VH_DESTINATION, Packet, build_packet
from broker.protocol.types import PacketType
from openmq_client import BytesMessage, MessageFormatException, Queue, TextMessage, mqtypes
from openmq_client.errors import InvalidDestinationException
from openmq_client.message import Message

from .test_client_live import name, open_conn, run


def received(props: dict, correlation_id: str | None = None) -> Message:
    """A message as a consumer gets it (with a JMSMessageID)."""
    fields: dict[int, object] = {VH_DESTINATION: "q"}
    if correlation_id is not None:
        fields[VH_CORRELATIONID] = correlation_id
    raw = build_packet(
        PacketType.TEXT_MESSAGE, props=props, fields=fields, sequence=5, timestamp=1_700_000_000_000
    )
    return Message._received(Packet(raw), None, 0)


def test_request_sets_type_options_and_reply_to():
    replies = Queue("replies")
    m = mqtypes.request(
        TextMessage("x", properties={mq.REPORT_NAN: 2}),
        replies,
        coa=mq.Data.FIRST_100,
        pan=True,
        pass_correl_id=True,
    )
    assert m.properties == {
        mq.MSG_TYPE: mq.MQMT_REQUEST,
        mq.REPORT_COA: mq.MQRO_COA_WITH_DATA,
        mq.REPORT_PAN: mq.MQRO_PAN,
        mq.REPORT_PASS_CORREL_ID: mq.MQRO_PASS_CORREL_ID,
    }
    assert m.reply_to == replies
    assert mqtypes.message_type(m) == mq.MQMT_REQUEST
    with pytest.raises(InvalidDestinationException):
        mqtypes.request(TextMessage("x"), None)  # type: ignore[arg-type]


def test_datagram_and_message_types():
    assert mqtypes.message_type(mqtypes.datagram(TextMessage("x"))) == mq.MQMT_DATAGRAM
    assert mqtypes.message_type(mqtypes.set_message_type(TextMessage(), 70000)) == 70000
    for bad in (3, 0, 1_000_000_000, True, "1"):
        with pytest.raises(MessageFormatException):
            mqtypes.set_message_type(TextMessage(), bad)  # type: ignore[arg-type]


def test_reply_copies_the_message_id_by_default():
    req = received({mq.MSG_TYPE: 1}, correlation_id="c-1")
    reply = req.make_reply(TextMessage("answer"))
    assert reply.correlation_id == req.message_id
    assert mqtypes.message_type(reply) == mq.MQMT_REPLY
    assert reply.text == "answer"


def test_reply_passes_the_correlation_id_when_asked():
    req = received({mq.REPORT_PASS_CORREL_ID: mq.MQRO_PASS_CORREL_ID}, correlation_id="c-1")
    assert mqtypes.make_reply(req).correlation_id == "c-1"


def test_reports_only_when_asked():
    req = received({mq.REPORT_PAN: mq.MQRO_PAN})
    pan = req.make_report()
    assert pan is not None and mqtypes.feedback_of(pan) == mq.MQFB_PAN
    assert mqtypes.message_type(pan) == mq.MQMT_REPORT
    assert pan.correlation_id == req.message_id
    assert req.make_report(mq.MQFB_NAN) is None  # NAN was not asked for
    app = mqtypes.make_report(req, 70000, BytesMessage(b"why"))
    assert app is not None and mqtypes.feedback_of(app) == 70000 and app.data == b"why"
    for bad in (mq.MQFB_COA, 5, True):
        with pytest.raises(MessageFormatException):
            req.make_report(bad)  # type: ignore[arg-type]


def test_a_message_never_sent_cannot_be_answered():
    with pytest.raises(MessageFormatException):
        TextMessage("x").make_reply()


@run
async def test_request_reply_and_pan_through_the_broker(broker) -> None:
    q = Queue(name("mqreq"))
    conn = await open_conn(broker)
    sess = await conn.create_session()
    replies = await sess.create_temporary_queue()
    rcons = await sess.create_consumer(replies)
    prod = await sess.create_producer(None)
    server = await sess.create_consumer(q)
    await conn.start()
    req = mqtypes.request(
        TextMessage("balance 42", correlation_id="acct-42"),
        replies,
        pan=True,
        nan=True,
        pass_correl_id=True,
    )
    await prod.send(req, destination=q)
    got = await server.receive(10)
    assert got is not None and got.reply_to == replies
    assert mqtypes.report_options(got).pan and mqtypes.report_options(got).nan
    await prod.send(got.make_reply(TextMessage("10.00")), destination=got.reply_to)
    report = got.make_report(mq.MQFB_PAN)
    assert report is not None
    await prod.send(report, destination=got.reply_to)
    answers = [await rcons.receive(10) for _ in range(2)]
    await conn.close()
    reply, pan = answers
    assert reply is not None and pan is not None
    assert reply.text == "10.00" and mqtypes.message_type(reply) == mq.MQMT_REPLY
    assert reply.correlation_id == "acct-42"  # MQRO_PASS_CORREL_ID
    assert mqtypes.message_type(pan) == mq.MQMT_REPORT
    assert mqtypes.feedback_of(pan) == mq.MQFB_PAN and pan.correlation_id == "acct-42"
