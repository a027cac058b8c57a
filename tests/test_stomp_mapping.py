"""The STOMP <-> JMQ message mapping (broker/engine/stomp_mapping.py), packet by packet."""

from __future__ import annotations

import zlib

import pytest

from broker.core.message import Message
from broker.core.reports import no_report_info
from broker.engine.stomp_mapping import (
    FrameParts,
    MappingError,
    frame_parts,
    parse_destination,
    send_message,
    stomp_name,
    subscription_head,
)
from broker.protocol.jtypes import JInt
from broker.protocol.packet import (
    VH_CORRELATIONID,
    VH_DELIVERY_COUNT,
    VH_DESTINATION,
    VH_REPLYTO,
    VH_REPLYTO_CLASS,
    VH_TYPE,
    Packet,
    build_packet,
)
from broker.protocol.stomp import VERSIONS, FrameReader
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_P,
    FLAG_Q,
    FLAG_Z,
    PacketType,
)

pytestmark = pytest.mark.fast


def test_destinations():
    assert (parse_destination("/queue/a.b", 1).name, parse_destination("/queue/a.b", 1).dtype) == (
        "a.b",
        DEST_QUEUE,
    )
    assert parse_destination("/topic/t", 1).dtype == DEST_TOPIC
    tmp = parse_destination("/temp-queue/r", 7)
    assert tmp.dtype == DEST_QUEUE | DEST_TEMP and tmp.name.startswith("temporary_destination://")
    # Our own temporary queue keeps its short name; another connection's, its full one.
    assert stomp_name(tmp.name, None, True, 7) == "/temp-queue/r"
    assert stomp_name(tmp.name, None, True, 8) == "/temp-queue/" + tmp.name
    assert parse_destination(stomp_name(tmp.name, None, True, 8), 8).name == tmp.name
    for bad in (None, "", "/queue/", "queue/a", "/exchange/x"):
        with pytest.raises(MappingError):
            parse_destination(bad, 1)


def test_content_length_makes_a_bytes_message():
    d = parse_destination("/queue/a", 1)
    text = Packet(send_message([("destination", "/queue/a")], b"hi", d, None, 0, 1, 1).raw)
    assert text.type == PacketType.TEXT_MESSAGE
    assert text.flags & FLAG_P and text.flags & FLAG_Q and text.priority == 4
    data = Packet(
        send_message(
            [("content-length", "2"), ("persistent", "false"), ("x-y", "z")],
            b"hi",
            d,
            None,
            0,
            1,
            1,
        ).raw
    )
    assert data.type == PacketType.BYTES_MESSAGE and not data.flags & FLAG_P
    assert data.properties == {"x-y": "z"}
    # A body without content-length that is not UTF-8: a BytesMessage, its bytes kept
    # (STOMP's body is bytes; a TextMessage cannot hold them).
    raw = send_message([("destination", "/queue/a")], b"\xff\xfe\x80", d, None, 0, 1, 1).raw
    binary = Packet(raw)
    assert binary.type == PacketType.BYTES_MESSAGE and binary.body == b"\xff\xfe\x80"


@pytest.mark.parametrize(
    "headers, body, reply, txn",
    [
        (
            [("destination", "/topic/t"), ("persistent", "false"), ("content-length", "3")],
            b"abc",
            None,
            0,
        ),
        ([("destination", "/queue/q")], "héllo".encode(), None, 0),
        (
            [
                ("destination", "/queue/q"),
                ("priority", "7"),
                ("expires", "4102444800000"),
                ("correlation-id", "c-1"),
                ("type", "t"),
                ("x", "1"),
                ("x", "2"),
                ("content-type", "text/plain"),
                ("JMS_IBM_Report_COA", "0"),
            ],
            b"",
            "/temp-queue/r",
            42,
        ),
    ],
)
def test_send_message_is_what_the_jmq_engine_makes_of_the_packet(headers, body, reply, txn):
    # The SEND's message is made without a packet fed to the JMQ engine (on_send): its
    # bytes and what the router reads of it are those Message() makes of the packet
    # build_packet encodes, its DELIVERY_COUNT slot spliced in (with_delivery_count_slot).
    dest = parse_destination(dict(headers)["destination"], 9)
    reply_to = parse_destination(reply, 9) if reply else None
    msg = send_message(
        headers, body, dest, reply_to, txn, 9, 70000, ip=b"\x01" * 16, want_reply=5, flags=0x10
    )
    sent = Packet(msg.raw)  # the slot in place: its header says where
    fields = {k: v for k, v in sent.fields.items() if k != VH_DELIVERY_COUNT}
    packet = build_packet(
        sent.type,
        props=sent.properties or None,
        body=sent.body,
        flags=sent.flags,
        consumer_id=5,
        fields=fields,
        priority=sent.priority,
        expiration=sent.expiration,
        timestamp=sent.timestamp,
        ip=b"\x01" * 16,
        port=70000 & 0xFFFF,
        sequence=sent.sequence,
    )
    ref = Message(Packet(packet), dest.name, 9)
    assert msg.raw == ref.raw and msg.dc_offset == ref.dc_offset
    for name in Message.__slots__:
        if name not in ("_raw", "report_info"):
            assert getattr(msg, name) == getattr(ref, name), name
    assert sent.body == body and msg.persistent == (dict(headers).get("persistent") != "false")
    if txn:
        assert sent.transaction_id == txn and msg.priority == 7 and msg.expiration > 0
        assert sent.properties == {
            "x": "1",
            "content-type": "text/plain",
            "JMS_IBM_Report_COA": "0",
        }
    # Report options are JMS_IBM_* properties: a message without one asks for none, said
    # at once (no_report_info), where Message() leaves it to the first report check.
    asks = any(k.startswith("JMS_IBM_") for k in sent.properties)
    assert (msg.report_info is None) == asks
    assert msg.report_info is no_report_info(b"JMS_IBM_" if asks else b"")


def _message(ptype=PacketType.TEXT_MESSAGE, **kw) -> Message:
    kw.setdefault("fields", {VH_DESTINATION: "q"})
    return Message(Packet(build_packet(ptype, **kw)), "q", 1)


def _read(msg: Message, version: str, *, ack: int = 0, redelivered=False, count=1, conn=1):
    head = subscription_head("s:1", "/queue/q", version)
    raw = frame_parts(msg, version, conn).frame(head, ack, redelivered, count)
    (f,) = FrameReader(version).feed(raw)
    assert f.command == "MESSAGE"
    return f


def test_typed_properties_as_java_writes_them():
    msg = _message(props={"n": JInt(5), "b": True, "f": 1.5, "JMQInternal": 1}, body=b"x")
    f = _read(msg, "1.2")
    assert (f.get("n"), f.get("b"), f.get("f")) == ("5", "true", "1.5")
    assert "JMQInternal" not in f and f.body == b"x"


@pytest.mark.parametrize("version", VERSIONS)
def test_message_frame_headers_in_the_stock_bridges_order(version):
    # But content-length, which comes first (stomp.py finds it sooner: FrameParts).
    tmp = parse_destination("/temp-queue/r", 7)
    msg = _message(
        props={"colon:and\nline": "a:b\\c", "content-type": "text/plain"},
        body=b"hello",
        fields={
            VH_DESTINATION: "q",
            VH_REPLYTO: tmp.name,
            VH_REPLYTO_CLASS: tmp.java_class,
            VH_CORRELATIONID: "corr:1",
            VH_TYPE: "kind",
        },
        flags=FLAG_P,
        priority=7,
        expiration=123,
        timestamp=456,
    )
    f = _read(msg, version, ack=42, redelivered=True, count=3, conn=7)
    names = [k for k, _ in f.headers]
    assert names[:14] == [
        "content-length",
        "subscription",
        "destination",
        "message-id",
        "ack",
        "reply-to",
        "correlation-id",
        "expires",
        "redelivered",
        "priority",
        "timestamp",
        "type",
        "persistent",
        "JMSXDeliveryCount",
    ]
    assert f.get("content-length") == "5" and names.count("content-length") == 1
    mid = msg.message_id
    assert f.get("subscription") == "s:1"
    assert (f.get("message-id"), f.get("ack")) == (mid, f"42:{mid}")
    assert f.get("reply-to") == "/temp-queue/r"  # the connection's own: its short name
    assert (f.get("correlation-id"), f.get("type")) == ("corr:1", "kind")
    assert (f.get("expires"), f.get("priority"), f.get("timestamp")) == ("123", "7", "456")
    assert (f.get("redelivered"), f.get("persistent"), f.get("JMSXDeliveryCount")) == (
        "true",
        "true",
        "3",
    )
    if version != "1.0":
        # Escaped on the wire, read back as they were.
        assert f.get("colon:and\nline") == "a:b\\c"
    assert f.body == b"hello"
    # Another connection gets the full name of the temporary queue (not the cached frame).
    assert _read(msg, version, conn=8).get("reply-to") == "/temp-queue/" + tmp.name


def test_message_frame_without_body_ack_or_reply_to():
    msg = _message(PacketType.MAP_MESSAGE, body=b"")
    f = _read(msg, "1.1")
    assert "ack" not in f and "reply-to" not in f and "content-length" not in f
    # Not persistent: no persistent header (as ActiveMQ's frames; the stock bridge has none).
    # A first delivery: no redelivered:false, no JMSXDeliveryCount:1 (what their absence means).
    assert "redelivered" not in f and "persistent" not in f and "JMSXDeliveryCount" not in f
    assert f.get("jms-message-type") == "map" and f.body == b""


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_bytes_message_says_content_length_0(version):
    """An empty BytesMessage (a SEND with content-length:0) says content-length:0, as the
    stock bridge and ActiveMQ write it: a client that sends the frame on keeps it bytes.
    An empty TextMessage says none (nor do they: a SEND without one)."""
    f = _read(_message(PacketType.BYTES_MESSAGE, body=b""), version)
    assert f.get("content-length") == "0" and f.body == b""
    f = _read(_message(PacketType.TEXT_MESSAGE, body=b""), version)
    assert "content-length" not in f and f.body == b""


@pytest.mark.parametrize("version", VERSIONS)
def test_first_delivery_leaves_out_what_a_missing_header_means(version):
    # The JMS defaults (never expires, priority 4, not persistent, not redelivered, first
    # delivery) are what a missing header means: a topic frame is five lines, not nine.
    msg = _message(PacketType.BYTES_MESSAGE, body=b"x" * 10, priority=4, timestamp=456)
    f = _read(msg, version)
    names = [k for k, _ in f.headers]
    assert names == ["content-length", "subscription", "destination", "message-id", "timestamp"]
    assert f.get("timestamp") == "456" and f.body == b"x" * 10
    # Any other value is said, on a redelivery too.
    msg = _message(PacketType.BYTES_MESSAGE, body=b"x", priority=5, expiration=789)
    f = _read(msg, version, redelivered=True, count=2)
    assert (f.get("priority"), f.get("expires")) == ("5", "789")
    assert (f.get("redelivered"), f.get("JMSXDeliveryCount")) == ("true", "2")


def test_compressed_body_is_inflated():
    msg = _message(PacketType.BYTES_MESSAGE, body=zlib.compress(b"z" * 100), flags=FLAG_Z)
    f = _read(msg, "1.2")
    assert f.body == b"z" * 100 and f.get("content-length") == "100"


def test_frame_parts_are_kept_for_the_next_subscriber():
    msg = _message(body=b"x")
    p = frame_parts(msg, "1.2", 1)
    assert frame_parts(msg, "1.2", 2) is p  # no own temporary reply-to: any connection
    assert frame_parts(msg, "1.0", 1) is not p
    assert isinstance(p, FrameParts)


def test_kept_property_and_header_lines_are_per_version():
    # FrameParts keeps a table's property lines (and a variable header's) by their bytes
    # and version: each version's frame is the one made with nothing kept, and a message
    # id with an IPv6 address's colons is escaped as escape() escapes it.
    from broker.engine import stomp_mapping
    from broker.protocol.stomp import escape

    def message(value: str) -> Message:
        return _message(
            props={"colon:and\nline": value, "n": JInt(1)},
            body=b"b",
            fields={VH_DESTINATION: "q", VH_CORRELATIONID: "c:1", VH_TYPE: "t\\y"},
            ip=bytes(range(16)),
        )

    head = {v: subscription_head("s", "/queue/q", v) for v in VERSIONS}
    for value in ("a:b\\c", "a:b\\c", "other"):
        msg = message(value)
        for version in (*VERSIONS, "1.0", "1.2"):
            kept = FrameParts(msg, version, 1).frame(head[version], 3, False, 1)
            stomp_mapping._PROP_LINES.clear()
            stomp_mapping._HEAD_LINES.clear()
            fresh = FrameParts(msg, version, 1).frame(head[version], 3, False, 1)
            assert kept == fresh, version
            assert b"\nmessage-id:%s\n" % escape(msg.message_id, version).encode() in kept
            (f,) = FrameReader(version).feed(kept)
            if version != "1.0":
                assert f.get("colon:and\nline") == value and f.get("type") == "t\\y"
            assert (f.get("message-id"), f.get("n")) == (msg.message_id, "1")
