"""Offline client tests: what the client writes, compared with the real Java client.

Why one module (about 1,000 lines): every test runs the client against the same stand-in
and compares with the same captures.

The client runs against :class:`openmq_client.testing.StandIn`, which answers exactly
like the recorder that captured ``shared/vectors``; so the packets the client writes
can be compared field by field with the Java client's captures (same packet types,
flags, variable-header fields, properties with the same Java types, bodies, and the
same correlation numbers).  Only timestamps, ports and sequence numbers differ.
"""

from __future__ import annotations

import asyncio
import functools
import struct
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from broker.protocol.jtypes import JByte, JFloat, JInt, JLong, JShort
from broker.protocol.packet import (
    HEADER_SIZE,
    VH_DELIVERY_COUNT,
    VH_REPLYTO,
    Packet,
    decode_fields,
    parse_packet,
)
from broker.protocol.types import (
    FLAG_A,
    FLAG_C,
    FLAG_F,
    FLAG_L,
    FLAG_P,
    FLAG_Q,
    FLAG_R,
    PacketType,
)
from openmq_client import (
    AckMode,
    BytesMessage,
    DeliveryMode,
    InvalidClientIDException,
    InvalidDestinationException,
    InvalidSelectorException,
    JMSException,
    JMSSecurityException,
    MapMessage,
    Message,
    ObjectMessage,
    Queue,
    ResourceAllocationException,
    StreamMessage,
    TemporaryQueue,
    TextMessage,
    Topic,
    connect,
)
from openmq_client.connection import digest_credential
from openmq_client.destination import destination_from_wire
from openmq_client.message import message_from_packet
from openmq_client.testing import StandIn, message_packet

from .vectors import vector as vector_bytes
from .vectors import vector_files

pytestmark = [pytest.mark.fast, pytest.mark.timeout(60)]


def vector(name: str) -> Packet:
    return parse_packet(vector_bytes(name))


def run(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """Run an async test on a fresh event loop (no pytest-asyncio here)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


@pytest.fixture
def standin():
    s = StandIn()
    yield s
    s.close()


def client_packets(s: StandIn) -> list[Packet]:
    return list(s.received)


def vh_fields(p: Packet) -> dict[int, object]:
    return decode_fields(p.raw, HEADER_SIZE, p.prop_offset)


def assert_same_props(ours: dict, theirs: dict, ignore_values: tuple[str, ...] = ()) -> None:
    """Same names, same Java types, same values (except the names listed)."""
    assert sorted(ours) == sorted(theirs)
    for name, want in theirs.items():
        got = ours[name]
        assert type(got) is type(want), f"{name}: {type(got).__name__} != {type(want).__name__}"
        if name not in ignore_values:
            assert got == want, name


def assert_like_java(ours: Packet, java: Packet, ignore_values: tuple[str, ...] = ()) -> None:
    """Compare one packet with a Java capture, except time, address and sequence."""
    assert ours.type_name == java.type_name
    assert ours.version == java.version == 301
    assert ours.flags == java.flags, f"{ours.type_name}: flags {ours.flags:#x} != {java.flags:#x}"
    assert ours.priority == java.priority
    assert ours.consumer_id == java.consumer_id, ours.type_name
    assert ours.raw[HEADER_SIZE : ours.prop_offset] == java.raw[HEADER_SIZE : java.prop_offset]
    assert_same_props(ours.properties, java.properties, ignore_values)
    assert ours.body == java.body
    if java.expiration:
        assert ours.expiration - ours.timestamp == java.expiration - java.timestamp
    else:
        assert ours.expiration == 0


# --------------------------------------------------------------------------
# Handshake and connection life cycle


@run
async def test_connect_close_like_java(standin: StandIn) -> None:
    conn = await connect("127.0.0.1", standin.portmapper_port)
    await conn.start()
    sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    await sess.close()
    await conn.close()

    assert standin.portmapper_requests == [vector_bytes("portmapper-request.hex")]
    files = vector_files("c2b-*.hex", under="connect-close-basic")
    java = [parse_packet(bytes.fromhex(f.read_text().strip())) for f in files]
    ours = client_packets(standin)
    assert [p.type_name for p in ours] == [p.type_name for p in java]
    for o, j in zip(ours, java, strict=True):
        # JMQHAClient: this client does not fail over, so it says false (imqcmd does too).
        assert_like_java(o, j, ignore_values=("JMQUserAgent", "JMQHAClient"))
    assert ours[0].properties["JMQHAClient"] is False
    # The process-wide sequence counter goes up by one per packet, as in Java.
    seqs = [p.sequence for p in ours]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # SysMessageID fields: IPv4-mapped local address and the local port.
    assert ours[0].ip == b"\x00" * 10 + b"\xff\xff" + bytes([127, 0, 0, 1])
    assert ours[0].port == conn.local_port
    assert conn.connection_id == StandIn.CONNECTION_ID
    assert conn.is_closed


def test_authenticate_bodies_match_java() -> None:
    from broker.protocol.auth import encode_auth_body, encode_basic_password

    basic = vector("authenticate-basic.hex")
    assert basic.body == encode_auth_body("guest", encode_basic_password("guest"))
    digest = vector("authenticate-digest.hex")
    cred = digest_credential("guest", "guest", b"1234567890")
    assert cred == "-7c5a4b2b3707e4c30a19db1faa43b5de"
    assert digest.body == encode_auth_body("guest", cred)


@run
async def test_digest_handshake_like_java() -> None:
    s = StandIn(auth="digest")
    try:
        conn = await connect("127.0.0.1", s.jms_port, direct=True)
        assert conn.auth_type == "digest"
        await conn.start()
        sess = await conn.create_session()
        await sess.close()
        await conn.close()
        java = vector("connect-close-digest/c2b-04-AUTHENTICATE.hex")
        auth = s.wait_for(PacketType.AUTHENTICATE)[0]
        assert_like_java(auth, java)
        assert s.portmapper_requests == []
    finally:
        s.close()


@run
async def test_login_refused_raises_security_exception() -> None:
    s = StandIn()
    s.on[PacketType.AUTHENTICATE] = lambda p: [s.reply(p, status=403)]
    try:
        with pytest.raises(JMSSecurityException) as ei:
            await connect("127.0.0.1", s.jms_port, direct=True, password="wrong")
        assert ei.value.status == 403
    finally:
        s.close()


@run
async def test_portmapper_without_service() -> None:
    import openmq_client.connection as c

    s = StandIn()
    try:
        with pytest.raises(JMSException, match="no nosuch service"):
            await c.lookup_service("127.0.0.1", s.portmapper_port, service_name="nosuch")
        assert await c.lookup_service("127.0.0.1", s.portmapper_port) == s.jms_port
        assert (
            await c.lookup_service("127.0.0.1", s.portmapper_port, service_type="ADMIN")
            == s.jms_port
        )
    finally:
        s.close()


# --------------------------------------------------------------------------
# Sending messages: compare with send-messages/


@run
async def test_send_messages_like_java(standin: StandIn) -> None:
    conn = await connect("127.0.0.1", standin.portmapper_port)
    sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    prod = await sess.create_producer(Queue("vectors_q"))
    props = {
        "pObject": 77,
        "pInt": -2000000000,
        "pShort": JShort(31000),
        "pFloat": JFloat(1.5),
        "pString": "red",
        "pByte": JByte(-7),
        "pLong": 9000000000000,
        "pDouble": -2.25,
        "pBool": True,
    }
    text = TextMessage(
        "hello vectors",
        properties=props,
        correlation_id="corr-1",
        reply_to=Queue("vectors_reply"),
        jms_type="vector-type",
    )
    await prod.send(text, persistent=False)
    await prod.send(BytesMessage(bytes.fromhex("0000000100056279746573010203")), persistent=False)
    java_map = vector("send-messages/c2b-14-MAP_MESSAGE.hex")
    java_stream = vector("send-messages/c2b-15-STREAM_MESSAGE.hex")
    # Rebuild the Java programs' bodies from their decoded values: the encoder must
    # reproduce Java 17's bytes.
    await prod.send(MapMessage(message_from_packet(java_map).map), persistent=False)  # type: ignore[attr-defined]
    await prod.send(
        StreamMessage(message_from_packet(java_stream).values),  # type: ignore[attr-defined]
        persistent=False,
    )
    await prod.send(ObjectMessage.from_value("object body"), persistent=False)
    persistent = TextMessage("persistent")
    await prod.send(persistent, priority=7, ttl_ms=60_000)
    await prod.close()
    await sess.close()
    await conn.close()

    files = vector_files("c2b-*.hex", under="send-messages")
    java = [parse_packet(bytes.fromhex(f.read_text().strip())) for f in files]
    ours = client_packets(standin)
    assert [p.type_name for p in ours] == [p.type_name for p in java]
    for o, j in zip(ours, java, strict=True):
        assert_like_java(o, j, ignore_values=("JMQUserAgent", "JMQHAClient"))

    # Headers the producer fills in on the message objects.
    sent = ours[5]
    assert text.message_id == f"ID:{sent.sequence}-127.0.0.1-{conn.local_port}-{sent.timestamp}"
    assert text.timestamp == sent.timestamp
    assert text.destination == Queue("vectors_q")
    assert text.delivery_mode == DeliveryMode.NON_PERSISTENT
    assert persistent.priority == 7
    assert persistent.expiration == persistent.timestamp + 60_000
    assert persistent.delivery_mode == DeliveryMode.PERSISTENT


@run
async def test_temporary_queue_and_reply_to_like_imqcmd(standin: StandIn) -> None:
    """imqcmd's admin request: temp queue, producer, consumer, OBJECT_MESSAGE with JMSReplyTo."""
    conn = await connect("127.0.0.1", standin.portmapper_port)
    await conn.start()
    sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    tq = await sess.create_temporary_queue()
    prod = await sess.create_producer(Queue("__JMQAdmin"))
    await sess.create_consumer(tq)
    msg = ObjectMessage(
        bytes.fromhex(
            vector("imqcmd/query-bkr/c2b-19-OBJECT_MESSAGE.hex").body.hex()  # opaque bytes
        ),
        properties={"JMQMessageType": 28},
        reply_to=tq,
    )
    await prod.send(msg, persistent=False)
    await standin.await_for(PacketType.OBJECT_MESSAGE)

    assert isinstance(tq, TemporaryQueue)
    assert tq.name == f"temporary_destination://queue/127.0.0.1/{conn.local_port}/1"
    files = vector_files("c2b-*.hex", under="imqcmd/query-bkr")
    java = [parse_packet(bytes.fromhex(f.read_text().strip())) for f in files]
    ours = client_packets(standin)
    assert [p.type_name for p in ours] == [p.type_name for p in java]
    java_port = java[0].port
    for o, j in zip(ours, java, strict=True):
        if o.type == PacketType.HELLO:
            assert_same_props(o.properties, j.properties, ("JMQUserAgent", "JMQHAClient"))
            continue
        if o.type == PacketType.AUTHENTICATE:
            continue  # imqcmd logs in as admin
        if o.type == PacketType.OBJECT_MESSAGE:
            assert o.flags == j.flags and o.priority == j.priority
            f = vh_fields(o)
            jf = vh_fields(j)
            jf[VH_REPLYTO] = str(jf[VH_REPLYTO]).replace(f"/{java_port}/", f"/{conn.local_port}/")
            assert f == jf
            assert_same_props(o.properties, j.properties)
            continue
        theirs = dict(j.properties)
        if "JMQDestination" in theirs:
            theirs["JMQDestination"] = theirs["JMQDestination"].replace(  # type: ignore[attr-defined]
                f"/{java_port}/", f"/{conn.local_port}/"
            )
        assert_same_props(o.properties, theirs)
        assert o.flags == j.flags and o.consumer_id == j.consumer_id
    await conn.close()


# --------------------------------------------------------------------------
# Received message header accessors (from captured packets)


def test_received_text_message_headers() -> None:
    m = message_from_packet(vector("send-messages/c2b-12-TEXT_MESSAGE.hex"))
    assert isinstance(m, TextMessage)
    assert m.message_id == "ID:6-127.0.0.1(97:a0:19:2e:7:4a)-54088-1795345392811"
    assert m.text == "hello vectors"
    assert m.correlation_id == "corr-1"
    assert m.reply_to == Queue("vectors_reply")
    assert m.jms_type == "vector-type"
    assert m.destination == Queue("vectors_q")
    assert m.delivery_mode == DeliveryMode.NON_PERSISTENT
    assert m.priority == 4 and m.expiration == 0 and not m.redelivered
    assert m.timestamp == 1795345392811
    props = m.properties
    assert props["pShort"] == 31000 and type(props["pShort"]) is JShort
    assert props["pByte"] == -7 and type(props["pByte"]) is JByte
    assert props["pLong"] == 9000000000000 and type(props["pLong"]) is JLong
    assert props["pInt"] == -2000000000 and type(props["pInt"]) is JInt
    assert props["pFloat"] == 1.5 and type(props["pFloat"]) is JFloat
    assert props["pDouble"] == -2.25 and type(props["pDouble"]) is float
    assert props["pBool"] is True and props["pString"] == "red"


def test_received_other_bodies() -> None:
    p = message_from_packet(vector("send-messages/c2b-17-TEXT_MESSAGE.hex"))
    assert p.delivery_mode == DeliveryMode.PERSISTENT and p.priority == 7
    assert p.expiration == p.timestamp + 60_000
    b = message_from_packet(vector("send-messages/c2b-13-BYTES_MESSAGE.hex"))
    assert isinstance(b, BytesMessage) and b.data == bytes.fromhex("0000000100056279746573010203")
    mm = message_from_packet(vector("send-messages/c2b-14-MAP_MESSAGE.hex"))
    assert isinstance(mm, MapMessage)
    assert mm.map["i"] == 7 and type(mm.map["i"]) is JInt
    assert mm.map["s"] == "map" and mm.map["b"] is True and mm.map["d"] == 0.5
    assert mm.map["y"] == b"\x09\x08"
    sm = message_from_packet(vector("send-messages/c2b-15-STREAM_MESSAGE.hex"))
    assert isinstance(sm, StreamMessage)
    assert sm.values == [7, "stream", True, 0.5]
    om = message_from_packet(vector("send-messages/c2b-16-OBJECT_MESSAGE.hex"))
    assert isinstance(om, ObjectMessage) and om.get_object() == "object body"


def test_destination_from_wire() -> None:
    tq = "com.sun.messaging.jmq.jmsclient.TemporaryQueueImpl"
    assert isinstance(destination_from_wire("x", tq, False), TemporaryQueue)
    assert destination_from_wire("x", "com.sun.messaging.Topic", True) == Topic("x")
    assert destination_from_wire("x", "com.sun.messaging.BasicQueue", False) == Queue("x")
    assert isinstance(
        destination_from_wire("temporary_destination://queue/h/1/1", None, False), TemporaryQueue
    )
    assert destination_from_wire("x", None, False) == Topic("x")


def test_bad_property_values_rejected() -> None:
    from openmq_client import MessageFormatException

    with pytest.raises(MessageFormatException):
        TextMessage("x", properties={"a": None})
    m = TextMessage("x")
    with pytest.raises(MessageFormatException):
        m.set_property("a", [1])


# --------------------------------------------------------------------------
# Error mapping


@pytest.mark.parametrize(
    ("ptype", "status", "exc"),
    [
        (PacketType.SET_CLIENTID, 409, InvalidClientIDException),
        (PacketType.CREATE_DESTINATION, 404, InvalidDestinationException),
        (PacketType.CREATE_DESTINATION, 403, JMSSecurityException),
        (PacketType.ADD_PRODUCER, 403, JMSSecurityException),
        (PacketType.ADD_CONSUMER, 400, InvalidSelectorException),
        (PacketType.TEXT_MESSAGE, 423, ResourceAllocationException),
        (PacketType.TEXT_MESSAGE, 414, ResourceAllocationException),
    ],
)
@run
async def test_error_statuses(ptype: int, status: int, exc: type[Exception]) -> None:
    s = StandIn()
    s.on[ptype] = lambda p: [s.reply(p, status=status, JMQReason="nope")]
    try:
        conn = await connect("127.0.0.1", s.jms_port, direct=True)
        with pytest.raises(exc) as ei:
            await conn.set_client_id("c1")
            sess = await conn.create_session()
            prod = await sess.create_producer(Queue("q"))
            await sess.create_consumer(Queue("q"), "a = 1")
            await prod.send(TextMessage("x"))  # persistent: waits for SEND_REPLY
        assert ei.value.status == status  # type: ignore[attr-defined]
        assert ei.value.reason == "nope"  # type: ignore[attr-defined]
        await conn.close()
    finally:
        s.close()


# --------------------------------------------------------------------------
# Flow control


@run
async def test_producer_flow_control() -> None:
    s = StandIn(producer_size=3)
    try:
        conn = await connect("127.0.0.1", s.jms_port, direct=True)
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue("q"))
        for _ in range(3):
            await prod.send(TextMessage("x"), persistent=False)
        sent = await s.await_for(PacketType.TEXT_MESSAGE, 3)
        assert [bool(p.flags & FLAG_C) for p in sent] == [False, False, True]
        assert all(p.producer_id == StandIn.PRODUCER_ID for p in sent)
        fourth = asyncio.ensure_future(prod.send(TextMessage("x"), persistent=False))
        await asyncio.sleep(0.2)
        assert not fourth.done()  # waits for RESUME_FLOW
        s.push(
            s.packet(
                PacketType.RESUME_FLOW,
                {"JMQProducerID": JLong(StandIn.PRODUCER_ID), "JMQSize": JInt(2)},
            )
        )
        await asyncio.wait_for(fourth, 5)
        await prod.send(TextMessage("x"), persistent=False)
        sent = await s.await_for(PacketType.TEXT_MESSAGE, 5)
        assert [bool(p.flags & FLAG_C) for p in sent] == [False, False, True, False, True]
        await conn.close()
    finally:
        s.close()


@run
async def test_connection_flow_control() -> None:
    s = StandIn(hello_size=2)
    try:
        conn = await connect("127.0.0.1", s.jms_port, direct=True)
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue("q"))
        await prod.send(TextMessage("x"), persistent=False)
        await prod.send(TextMessage("x"), persistent=False)
        third = asyncio.ensure_future(prod.send(TextMessage("x"), persistent=False))
        sent = await s.await_for(PacketType.TEXT_MESSAGE, 2)
        assert [bool(p.flags & FLAG_F) for p in sent] == [False, True]
        await asyncio.sleep(0.2)
        assert not third.done()
        s.push(s.packet(PacketType.RESUME_FLOW, {"JMQSize": JInt(5)}))
        await asyncio.wait_for(third, 5)
        await conn.close()
    finally:
        s.close()


@run
async def test_consumer_flow_and_connection_resume() -> None:
    s = StandIn()
    try:
        conn = await connect("127.0.0.1", s.jms_port, direct=True, flow_count=7)
        sess = await conn.create_session(AckMode.NO_ACKNOWLEDGE)
        cons = await sess.create_consumer(Queue("q"), prefetch=4)
        add = (await s.await_for(PacketType.ADD_CONSUMER))[0]
        assert add.properties["JMQSize"] == 4 and type(add.properties["JMQSize"]) is JInt
        await conn.start()
        cid = cons.consumer_id
        msgs = [
            message_packet(consumer_id=cid, sequence=i, flags=FLAG_C if i == 4 else 0)
            for i in range(1, 5)
        ]
        # The broker also hit the connection's flow count on the last one.
        msgs[-1] = message_packet(consumer_id=cid, sequence=4, flags=FLAG_C | FLAG_F)
        s.push(*msgs)
        # F: resume the connection at once with JMQSize = flow count.
        rf = (await s.await_for(PacketType.RESUME_FLOW))[0]
        assert rf.properties == {"JMQSize": 7}
        got = [await cons.receive(5) for _ in range(2)]
        assert all(m is not None for m in got)
        # Two left of four: at the 50% threshold the consumer asks for two more.
        rfs = await s.await_for(PacketType.RESUME_FLOW, 2)
        assert_same_props(rfs[1].properties, {"JMQConsumerID": JLong(cid), "JMQSize": JInt(2)})
        assert not rfs[1].flags & FLAG_A
        await conn.close()
    finally:
        s.close()


# --------------------------------------------------------------------------
# Acknowledgement


def ack_blocks(p: Packet) -> list[tuple[int, bytes]]:
    body = p.body
    assert len(body) % 40 == 0
    return [
        (struct.unpack(">q", body[i : i + 8])[0], body[i + 8 : i + 40])
        for i in range(0, len(body), 40)
    ]


@run
async def test_auto_ack_and_delete_consumer(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    cons = await sess.create_consumer(Queue("q"))
    await conn.start()
    cid = cons.consumer_id
    pkt = message_packet(consumer_id=cid, sequence=11, flags=FLAG_Q | FLAG_P)
    s.push(pkt, message_packet(consumer_id=cid, sequence=12, flags=FLAG_Q))
    m = await cons.receive(5)
    assert isinstance(m, TextMessage) and m.text == "x" and m.delivery_count == 1
    ack = (await s.await_for(PacketType.ACKNOWLEDGE))[0]
    assert ack.flags & FLAG_A
    assert ack.properties == {}
    assert ack_blocks(ack) == [(cid, pkt[20:52])]
    await cons.close()
    dc = (await s.await_for(PacketType.DELETE_CONSUMER))[0]
    assert_same_props(
        dc.properties,
        {"JMQConsumerID": JLong(cid), "JMQBlock": True, "JMQBodyType": JInt(3)},
    )
    assert dc.body == pkt[20:52]
    # The second message was only buffered: it is not acknowledged.
    assert len(s.wait_for(PacketType.ACKNOWLEDGE)) == 1
    await conn.close()


@run
async def test_auto_ack_nonpersistent_topic_without_reply(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session()
    cons = await sess.create_consumer(Topic("t"))
    unused = await sess.create_consumer(Queue("q2"))
    await conn.start()
    s.push(
        message_packet(
            consumer_id=cons.consumer_id,
            sequence=1,
            dest="t",
            dest_class="com.sun.messaging.BasicTopic",
        )
    )
    assert await cons.receive(5) is not None
    ack = (await s.await_for(PacketType.ACKNOWLEDGE))[0]
    assert not ack.flags & FLAG_A
    await unused.close()
    dc = (await s.await_for(PacketType.DELETE_CONSUMER))[0]
    assert_same_props(
        dc.properties,
        {
            "JMQConsumerID": JLong(unused.consumer_id),
            "JMQBlock": True,
            "JMQBodyType": JInt(0),
            "JMQRedeliverAll": True,
        },
    )
    await conn.close()


@run
async def test_dups_ok_batches(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session(AckMode.DUPS_OK_ACKNOWLEDGE, dups_ok_limit=3)
    cons = await sess.create_consumer(Queue("q"))
    await conn.start()
    cid = cons.consumer_id
    pkts = [message_packet(consumer_id=cid, sequence=i) for i in range(1, 6)]
    s.push(*pkts)
    while len(cons._queue) < 5:  # all buffered: batching is then deterministic
        await asyncio.sleep(0.01)
    for _ in range(5):
        assert await cons.receive(5) is not None
    acks = await s.await_for(PacketType.ACKNOWLEDGE, 2)
    assert all(not a.flags & FLAG_A for a in acks)
    assert [len(ack_blocks(a)) for a in acks] == [3, 2]
    assert [b for a in acks for b in ack_blocks(a)] == [(cid, p[20:52]) for p in pkts]
    await conn.close()


@run
async def test_client_ack_and_recover(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    cons = await sess.create_consumer(Queue("q"))
    await conn.start()
    cid = cons.consumer_id
    pkts = [message_packet(consumer_id=cid, sequence=i) for i in range(1, 6)]
    s.push(*pkts)
    a = await cons.receive(5)
    b = await cons.receive(5)
    assert a is not None and b is not None
    await b.acknowledge()
    ack = (await s.await_for(PacketType.ACKNOWLEDGE))[0]
    assert ack.flags & FLAG_A
    assert ack_blocks(ack) == [(cid, pkts[0][20:52]), (cid, pkts[1][20:52])]
    c = await cons.receive(5)
    assert c is not None
    while len(cons._queue) < 2:  # the rest are buffered
        await asyncio.sleep(0.01)
    await sess.recover()
    stop = (await s.await_for(PacketType.STOP))[0]
    assert_same_props(stop.properties, {"JMQSessionID": JLong(StandIn.SESSION_ID)})
    red = await s.await_for(PacketType.REDELIVER, 2)
    assert red[0].properties == {"JMQSetRedelivered": False}
    assert ack_blocks(red[0]) == [(cid, p[20:52]) for p in pkts[3:]]
    assert red[1].properties == {"JMQSetRedelivered": True}
    assert ack_blocks(red[1]) == [(cid, pkts[2][20:52])]
    assert all(not r.flags & FLAG_A for r in red)
    start = (await s.await_for(PacketType.START, 2))[1]
    assert_same_props(start.properties, {"JMQSessionID": JLong(StandIn.SESSION_ID)})
    # Redelivered copy: R flag and delivery count 2.
    s.push(message_packet(consumer_id=cid, sequence=3, flags=FLAG_R, delivery_count=2))
    again = await cons.receive(5)
    assert again is not None and again.redelivered and again.delivery_count == 2
    assert again.get_property("JMSXDeliveryCount") == 2
    assert again.message_id == c.message_id
    await conn.close()


@run
async def test_transacted_session(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session(transacted=True)
    cs = (await s.await_for(PacketType.CREATE_SESSION))[0]
    assert cs.properties == {}
    st = (await s.await_for(PacketType.START_TRANSACTION))[0]
    assert_same_props(st.properties, {"JMQSessionID": JLong(StandIn.SESSION_ID)})
    prod = await sess.create_producer(Queue("q"))
    await prod.send(TextMessage("x"))
    msg = (await s.await_for(PacketType.TEXT_MESSAGE))[0]
    assert msg.transaction_id == StandIn.TRANSACTION_ID and msg.flags & FLAG_A
    await sess.commit()
    commit = (await s.await_for(PacketType.COMMIT_TRANSACTION))[0]
    assert_same_props(commit.properties, {"JMQTransactionID": JLong(StandIn.TRANSACTION_ID)})
    await s.await_for(PacketType.START_TRANSACTION, 2)
    await conn.close()


# --------------------------------------------------------------------------
# Browser, ping, broker goodbye, listener, sync wrapper


@run
async def test_browser(standin: StandIn) -> None:
    s = standin
    bid = 777
    msgs = [message_packet(consumer_id=bid, sequence=i) for i in range(1, 4)]
    msgs[-1] = message_packet(consumer_id=bid, sequence=3, flags=FLAG_L)
    ids = b"".join(m[20:52] for m in msgs)
    s.on[PacketType.BROWSE] = lambda p: [s.reply(p, body=ids, JMQConsumerID=JLong(bid))]
    s.on[PacketType.DELIVER] = lambda p: [*msgs, s.reply(p)]
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session()
    browser = await sess.create_browser(Queue("q"), "n > 1")
    vd = (await s.await_for(PacketType.VERIFY_DESTINATION))[0]
    assert_same_props(
        vd.properties,
        {"JMQDestination": "q", "JMQDestType": JInt(1), "JMQSelector": "n > 1"},
    )
    got = await browser.messages()
    assert [m.sys_message_id.sequence for m in got] == [1, 2, 3]  # type: ignore[union-attr]
    br = (await s.await_for(PacketType.BROWSE))[0]
    assert_same_props(
        br.properties, {"JMQDestination": "q", "JMQDestType": JInt(1), "JMQSelector": "n > 1"}
    )
    dl = (await s.await_for(PacketType.DELIVER))[0]
    assert_same_props(dl.properties, {"JMQConsumerID": JLong(bid)})
    assert dl.body == ids and dl.flags & FLAG_A
    assert s.types().count("ACKNOWLEDGE") == 0
    await conn.close()


@run
async def test_ping_and_broker_goodbye(standin: StandIn) -> None:
    s = standin
    errors: list[JMSException] = []
    conn = await connect("127.0.0.1", s.jms_port, direct=True, exception_listener=errors.append)
    sess = await conn.create_session()
    cons = await sess.create_consumer(Queue("q"))
    s.push(s.packet(PacketType.PING, flags=FLAG_A, consumer_id=0))
    reply_wait = asyncio.ensure_future(s.await_for(PacketType.PING_REPLY))
    pr = (await reply_wait)[0]
    assert pr.consumer_id == 0 and pr.properties == {"JMQStatus": 200}
    waiting = asyncio.ensure_future(cons.receive())
    await asyncio.sleep(0.05)
    s.push(
        s.packet(
            PacketType.GOODBYE,
            {"JMQExit": True, "JMQGoodbyeReason": JInt(1), "JMQGoodbyeReasonString": "shutdown"},
        )
    )
    assert await asyncio.wait_for(waiting, 5) is None
    for _ in range(100):
        if conn.is_closed:
            break
        await asyncio.sleep(0.02)
    assert conn.is_closed
    assert errors and "shutdown" in str(errors[0])
    await conn.close()


@run
async def test_listener(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session()
    cons = await sess.create_consumer(Queue("q"))
    got: list[Message] = []
    done = asyncio.Event()

    async def on_message(m: Message) -> None:
        got.append(m)
        if len(got) == 3:
            done.set()

    cons.set_listener(on_message)
    await conn.start()
    s.push(*(message_packet(consumer_id=cons.consumer_id, sequence=i) for i in range(3)))
    await asyncio.wait_for(done.wait(), 5)
    acks = await s.await_for(PacketType.ACKNOWLEDGE, 3)
    assert all(a.flags & FLAG_A for a in acks)
    await conn.close()


@run
async def test_receive_timeout(standin: StandIn) -> None:
    conn = await connect("127.0.0.1", standin.jms_port, direct=True)
    sess = await conn.create_session()
    cons = await sess.create_consumer(Queue("q"))
    await conn.start()
    t0 = time.monotonic()
    assert await cons.receive(0.2) is None
    assert 0.15 < time.monotonic() - t0 < 2
    assert await cons.receive_no_wait() is None
    await conn.close()


def test_sync_wrapper(standin: StandIn) -> None:
    from openmq_client.sync import connect as sync_connect

    s = standin
    with sync_connect("127.0.0.1", s.portmapper_port) as conn:
        sess = conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        prod = sess.create_producer(Queue("q"))
        prod.send(TextMessage("x"), persistent=False)
        cons = sess.create_consumer(Queue("q"))
        conn.start()
        s.push(message_packet(consumer_id=cons.consumer_id, sequence=5))
        m = cons.receive(5)
        assert isinstance(m, TextMessage) and m.text == "x"
        m.acknowledge()  # blocking under the sync API
        assert ack_blocks(s.wait_for(PacketType.ACKNOWLEDGE)[0])[0][0] == cons.consumer_id
        got: list[Message] = []
        import threading

        ev = threading.Event()

        def listener(msg: Message) -> None:
            got.append(msg)
            msg.acknowledge()  # the blocking API works inside a sync listener
            ev.set()

        cons.set_listener(listener)
        s.push(message_packet(consumer_id=cons.consumer_id, sequence=6))
        assert ev.wait(5)
        assert len(s.wait_for(PacketType.ACKNOWLEDGE, 2)) == 2
        tq = sess.create_temporary_queue()
        tq.delete()
        s.wait_for(PacketType.DESTROY_DESTINATION)
    assert s.types()[-1] == "GOODBYE"


@run
async def test_connection_lost_fails_requests(standin: StandIn) -> None:
    s = standin
    s.on[PacketType.CREATE_SESSION] = lambda p: []  # never answered
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    pending = asyncio.ensure_future(conn.create_session())
    await s.await_for(PacketType.CREATE_SESSION)
    s.drop()
    with pytest.raises(JMSException, match="lost"):
        await asyncio.wait_for(pending, 5)
    assert conn.is_closed


def test_plain_message_has_no_body() -> None:
    m = Message(properties={"a": 1})
    assert m._encode_body() == b"" and m.message_id is None
    assert StreamMessage()._encode_body() == b""
    assert MapMessage()._encode_body().startswith(b"\xac\xed\x00\x05")
    assert TextMessage(None)._encode_body() == b""
    assert vh_fields(vector("send-messages/c2b-12-TEXT_MESSAGE.hex")).get(VH_DELIVERY_COUNT) is None


@run
async def test_close_order(standin: StandIn) -> None:
    """connection.close(): STOP, then per session DELETE_CONSUMER, DELETE_PRODUCER,
    DESTROY_SESSION, then GOODBYE with JMQBlock (client id set) and JMQConnectionID."""
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True, client_id="c1")
    sess = await conn.create_session()
    await sess.create_producer(Queue("q"))
    cons = await sess.create_consumer(Queue("q"))
    await conn.start()
    await conn.close()
    tail = s.types()[-6:]
    assert tail == [
        "START",
        "STOP",
        "DELETE_CONSUMER",
        "DELETE_PRODUCER",
        "DESTROY_SESSION",
        "GOODBYE",
    ]
    sc = s.wait_for(PacketType.SET_CLIENTID)[0]
    assert_same_props(sc.properties, {"JMQClientID": "c1", "JMQShare": False})
    bye = s.wait_for(PacketType.GOODBYE)[0]
    assert_same_props(
        bye.properties, {"JMQBlock": True, "JMQConnectionID": JLong(StandIn.CONNECTION_ID)}
    )
    assert bye.flags & FLAG_A
    dp = s.wait_for(PacketType.DELETE_PRODUCER)[0]
    assert_same_props(dp.properties, {"JMQProducerID": JLong(StandIn.PRODUCER_ID)})
    assert cons.is_closed and sess.is_closed


@run
async def test_request_reply_skips_stale_replies(standin: StandIn) -> None:
    from broker.protocol.sysmsgid import SysMessageID

    s = standin

    def serve(p: Packet) -> list[bytes]:
        if p.destination != "svc":
            return []
        rid = "ID:" + str(SysMessageID(p.timestamp, p.ip, p.port, p.sequence))
        reply_consumer = 2001  # the stand-in's first consumer id: the reply queue's
        return [
            message_packet(
                consumer_id=reply_consumer, sequence=90, correlation_id="ID:old", body=b"stale"
            ),
            message_packet(
                consumer_id=reply_consumer, sequence=91, correlation_id=rid, body=b"fresh"
            ),
        ]

    s.on[PacketType.TEXT_MESSAGE] = serve
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session()
    await conn.start()
    reply = await sess.request(Queue("svc"), TextMessage("ping"), timeout=5)
    assert isinstance(reply, TextMessage) and reply.text == "fresh"
    req = next(p for p in s.received if p.type == PacketType.TEXT_MESSAGE)
    f = vh_fields(req)
    assert f[VH_REPLYTO] == sess._reply_queue.name  # type: ignore[union-attr]
    assert f[7] == "com.sun.messaging.jmq.jmsclient.TemporaryQueueImpl"
    cd = s.wait_for(PacketType.CREATE_DESTINATION)[0]
    assert_same_props(
        cd.properties,
        {"JMQDestination": sess._reply_queue.name, "JMQDestType": JInt(17)},  # type: ignore[union-attr]
    )
    await conn.close()


def test_compressed_body_is_inflated() -> None:
    import zlib

    from broker.protocol.types import FLAG_Z

    text = "squeeze me " * 50
    raw = message_packet(
        body=zlib.compress(text.encode()),
        consumer_id=1,
        sequence=1,
        flags=FLAG_Z,
        props={"JMS_SUN_UNCOMPRESSED_SIZE": JInt(len(text)), "JMS_SUN_COMPRESSED": True},
    )
    m = message_from_packet(parse_packet(raw))
    assert isinstance(m, TextMessage) and m.text == text


@run
async def test_forward_a_received_message(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session()
    cons = await sess.create_consumer(Queue("in"))
    prod = await sess.create_producer(Queue("out"))
    await conn.start()
    s.push(
        message_packet(consumer_id=cons.consumer_id, sequence=3, body=b"fwd", props={"k": JLong(5)})
    )
    m = await cons.receive(5)
    assert m is not None
    old_id = m.message_id
    m.set_property("extra", "yes")
    await prod.send(m, persistent=False)
    out = (await s.await_for(PacketType.TEXT_MESSAGE))[0]
    assert out.destination == "out" and out.body == b"fwd"
    assert_same_props(out.properties, {"k": JLong(5), "extra": "yes"})
    assert m.message_id != old_id and m.destination == Queue("out")
    await conn.close()


@run
async def test_listener_can_be_removed_and_replaced(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session(AckMode.NO_ACKNOWLEDGE)
    cons = await sess.create_consumer(Queue("q"))
    await conn.start()
    first: list[Message] = []
    cons.set_listener(first.append)
    await asyncio.sleep(0.05)
    cons.set_listener(None)
    s.push(message_packet(consumer_id=cons.consumer_id, sequence=1))
    m = await cons.receive(5)  # back to synchronous receive
    assert m is not None and not first
    second: list[Message] = []
    cons.set_listener(second.append)
    s.push(message_packet(consumer_id=cons.consumer_id, sequence=2))
    for _ in range(100):
        if second:
            break
        await asyncio.sleep(0.02)
    assert len(second) == 1 and not first
    await conn.close()


@run
async def test_stopped_connection_hands_out_nothing(standin: StandIn) -> None:
    s = standin
    conn = await connect("127.0.0.1", s.jms_port, direct=True)
    sess = await conn.create_session(AckMode.NO_ACKNOWLEDGE)
    cons = await sess.create_consumer(Queue("q"))
    await conn.start()
    s.push(*(message_packet(consumer_id=cons.consumer_id, sequence=i) for i in range(2)))
    while len(cons._queue) < 2:
        await asyncio.sleep(0.01)
    await conn.stop()
    assert await cons.receive(0.2) is None
    assert await cons.receive_no_wait() is None
    waiting = asyncio.ensure_future(cons.receive(5))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await conn.start()
    assert await asyncio.wait_for(waiting, 5) is not None
    assert await cons.receive(1) is not None
    await conn.close()
