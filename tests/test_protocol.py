"""The sans-IO codec against the real clients' captures, plus generated round trips."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.jtypes import JByte, JFloat, JInt, JLong, JShort
from broker.protocol.packet import (
    HEADER_SIZE,
    VH_CORRELATIONID,
    VH_DELIVERY_COUNT,
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_PRODUCERID,
    VH_REPLYTO,
    VH_REPLYTO_CLASS,
    VH_TRANSACTIONID,
    VH_TYPE,
    BadPacket,
    PacketError,
    PacketReader,
    build_packet,
    decode_fields,
    encode_fields,
    parse_packet,
    with_delivery_count_slot,
)
from broker.protocol.portmapper import parse_table
from broker.protocol.properties import decode_properties, encode_java_utf, encode_properties
from broker.protocol.sysmsgid import SysMessageID
from broker.protocol.types import MAGIC, PacketType, Status, packet_type_name
from broker.stock_paths import PROTOCOL_SEED as SEED
from broker.stock_paths import SPEC

from .vectors import vector, vector_names

pytestmark = pytest.mark.fast


def load(rel: str) -> bytes:
    return vector(rel)


ALL_PACKET_FILES = vector_names("**/*.hex", where=lambda p: "portmapper" not in p.name)


@pytest.mark.parametrize("rel", ALL_PACKET_FILES)
def test_every_vector_decodes(rel: str) -> None:
    raw = load(rel)
    pkt = parse_packet(raw)
    assert struct.unpack_from(">i", raw)[0] == MAGIC
    assert pkt.version == 301
    assert pkt.size == len(raw)
    name = Path(rel).name
    m = re.match(r"[cb]2[bc]-\d+-(\w+)\.hex", name)
    if m:
        assert pkt.type_name == m.group(1)
    # Lazily decoded parts decode without error and stay within the packet.
    assert isinstance(pkt.fields, dict)
    assert isinstance(pkt.properties, dict)
    assert pkt.prop_offset + pkt.prop_size + len(pkt.body) == pkt.size


def test_java_hello_fields() -> None:
    pkt = parse_packet(load("hello.hex"))
    assert pkt.type == PacketType.HELLO
    assert pkt.size == 256
    assert pkt.prop_offset == HEADER_SIZE  # Java writes no variable header
    assert pkt.flags == 0x0010
    assert pkt.consumer_id == 1
    assert pkt.priority == 5
    props = pkt.properties
    assert props["JMQProtocolLevel"] == 500 and type(props["JMQProtocolLevel"]) is JInt
    assert props["JMQVersion"] == "6.9.0"
    assert props["JMQRBufferSize"] == 100
    assert props["JMQReconnectable"] is False
    assert props["JMQHAClient"] is True
    assert props["JMQUserAgent"].startswith("Message Queue/6.9.0 (JMS;")
    sid = SysMessageID.from_bytes(pkt.sysmsgid)
    assert sid.sequence == 1
    assert sid.ip[0] == 0xFF and sid.ip[10:12] == b"\xff\xff"  # IPv4 + pseudo MAC
    assert str(sid).startswith("1-127.0.0.1(")


def test_c_client_hello_fields() -> None:
    pkt = parse_packet(load("cclient/hello.hex"))
    assert pkt.size == 220
    assert pkt.prop_offset == 76  # the C client always writes a variable header
    assert pkt.fields == {}
    assert pkt.consumer_id == -9223372036854775807  # 0x8000000000000001
    assert pkt.properties["JMQSize"] == 100
    assert "JMQReconnectable" not in pkt.properties
    sid = SysMessageID.from_bytes(pkt.sysmsgid)
    assert sid.sequence == 0 and str(sid).split("-")[1] == "127.0.0.1"


def test_java_text_message_with_every_property_type() -> None:
    pkt = parse_packet(load("send-messages/c2b-12-TEXT_MESSAGE.hex"))
    assert pkt.type == PacketType.TEXT_MESSAGE
    assert pkt.flags == 0x0001  # Q, non-persistent
    assert pkt.priority == 4
    f = pkt.fields
    assert f[VH_PRODUCERID] == 1002
    assert f[VH_DESTINATION] == "vectors_q"
    assert f[VH_CORRELATIONID] == "corr-1"
    assert f[VH_REPLYTO] == "vectors_reply"
    assert f[VH_TYPE] == "vector-type"
    assert f[VH_DESTINATION_CLASS] == f[VH_REPLYTO_CLASS] == "com.sun.messaging.BasicQueue"
    p = pkt.properties
    expected = {
        "pObject": (77, JInt),
        "pInt": (-2000000000, JInt),
        "pShort": (31000, JShort),
        "pFloat": (1.5, JFloat),
        "pString": ("red", str),
        "pByte": (-7, JByte),
        "pLong": (9000000000000, JLong),
        "pDouble": (-2.25, float),
        "pBool": (True, bool),
    }
    for name, (value, typ) in expected.items():
        assert p[name] == value and type(p[name]) is typ, name
    assert pkt.body == b"hello vectors"


def test_persistent_message_flags_and_expiration() -> None:
    pkt = parse_packet(load("send-messages/c2b-17-TEXT_MESSAGE.hex"))
    assert pkt.flags == 0x0015  # Q|P|A
    assert pkt.priority == 7
    assert pkt.expiration - pkt.timestamp == 60000
    assert pkt.consumer_id == 6
    assert pkt.body == b"persistent"


def test_c_client_bytes_message_unpadded_varheader() -> None:
    pkt = parse_packet(load("cclient/bytes-properties/c2b-12-BYTES_MESSAGE.hex"))
    assert pkt.prop_offset == 152  # 80 bytes, no padding after the terminator
    assert pkt.fields[VH_CORRELATIONID] == "corr-42"
    assert pkt.fields[VH_TYPE] == "ctype"
    assert VH_PRODUCERID not in pkt.fields
    p = pkt.properties
    assert p["pBool"] is True and p["pByte"] == -5 and p["pShort"] == -1234
    assert p["pInt"] == 123456789 and p["pLong"] == 1234567890123
    assert p["pFloat"] == 1.5 and p["pDouble"] == -2.25 and p["pString"] == "café"
    assert pkt.body == bytes((i * 7 + 3) & 0xFF for i in range(300))
    assert pkt.flags == 0x0015 and pkt.priority == 6


def test_c_client_text_utf8_body() -> None:
    pkt = parse_packet(load("cclient/queue-text/c2b-12-TEXT_MESSAGE.hex"))
    text = pkt.body.decode("utf-8")
    assert "é" in text and "€" in text


def test_authenticate_bodies() -> None:
    from broker.protocol.auth import decode_auth_body, decode_basic_password

    for rel in ("authenticate-basic.hex", "cclient/authenticate-basic.hex"):
        user, cred = decode_auth_body(parse_packet(load(rel)).body)
        assert (user, decode_basic_password(cred)) == ("guest", "guest")
    for rel in ("authenticate-digest.hex", "cclient/authenticate-digest.hex"):
        user, cred = decode_auth_body(parse_packet(load(rel)).body)
        assert (user, cred) == ("guest", "-7c5a4b2b3707e4c30a19db1faa43b5de")


def test_portmapper_vectors() -> None:
    assert load("portmapper-request.hex") == b"101\n"
    assert load("cclient/portmapper-request.hex") == b"101\n"
    table = parse_table(load("portmapper-reply.hex"))
    assert table.instance == "imqbroker" and table.packet_version == "301"
    jms = table.find("NORMAL")
    assert jms is not None and jms.name == "jms" and jms.port > 0
    assert table.find("ADMIN").name == "admin"
    assert table.services[0].properties == {"imqbroker": "imqbroker"}
    assert parse_table(table.encode()) == table


def test_spec_hello_example_bytes() -> None:
    # packet.md §10: the real ReadWritePacket's HELLO, byte for byte.
    spec = (SPEC / "packet.md").read_text()
    dump = spec[spec.index("## 10. Worked example") :]
    rows = re.findall(r"^[0-9a-f]{4}: ((?:[0-9a-f]{2} ?)+)$", dump, re.M)[:8]
    expected = bytes.fromhex("".join(rows))
    assert len(expected) == 126
    ip = bytes.fromhex("ff000000821122334455ffffc0a8010a")
    built = build_packet(
        PacketType.HELLO,
        props={"JMQProtocolLevel": JInt(500), "JMQVersion": "6.10.0"},
        flags=0x10,
        consumer_id=1,
        timestamp=1700000000000,
        ip=ip,
        port=51000,
        sequence=1,
    )
    assert built == expected
    assert (
        str(SysMessageID.from_bytes(built, 20))
        == "1-192.168.1.10(82:11:22:33:44:55)-51000-1700000000000"
    )


def test_spec_variable_header_examples() -> None:
    assert encode_fields({VH_DESTINATION: "ab"}) == bytes.fromhex("00010002616200000000000000")[:12]
    vh = encode_fields(
        {VH_PRODUCERID: 7, VH_DESTINATION: "q1", VH_DESTINATION_CLASS: "com.sun.messaging.Queue"}
    )
    assert len(vh) == 48
    assert vh.startswith(bytes.fromhex("000900080000000000000007000100027131"))
    assert encode_properties({"b": True}) == bytes.fromhex("0000000100000001000162000101")
    # The C client's rule pads 0-3 bytes.
    assert len(encode_fields({VH_DESTINATION: "ab"}, java_padding=False)) == 8


def test_every_seed_packet_type_has_a_constant() -> None:
    text = SEED.read_text()
    names = set(re.findall(r"^(?:C|S) -> (?:C|S)\t\d+\t([A-Z_]+)", text, re.M))
    assert len(names) > 50
    # The seed's RECREATE_CONSUMER has no number in the code; its INFO numbers moved.
    for name in names - {"RECREATE_CONSUMER"}:
        assert hasattr(PacketType, name), name
        assert packet_type_name(PacketType[name]) in (name, "BROWSE_REPLY")
    for t in PacketType:
        assert packet_type_name(int(t)) in (t.name, "BROWSE_REPLY")
    assert PacketType.INFO_REQUEST == 72 and PacketType.VERIFY_TRANSACTION == 78
    assert Status.BAD_VERSION == 505 and Status.ENTITY_TOO_LARGE == 423


def test_delivery_count_slot_added_once() -> None:
    pkt = parse_packet(load("send-messages/c2b-12-TEXT_MESSAGE.hex"))
    raw, off = with_delivery_count_slot(pkt)
    again = parse_packet(raw)
    assert again.fields[VH_DELIVERY_COUNT] == 1
    assert again.properties == pkt.properties and again.body == pkt.body
    assert struct.unpack_from(">i", raw, off)[0] == 1
    assert raw[20:52] == pkt.raw[20:52]  # the message id survives
    raw2, off2 = with_delivery_count_slot(again)
    assert raw2 is again.raw and off2 == off


def test_reader_splits_arbitrary_chunks() -> None:
    stream = b"".join(load(f) for f in ALL_PACKET_FILES[:20])
    for chunk in (1, 7, 72, 1000):
        reader = PacketReader()
        out = []
        for i in range(0, len(stream), chunk):
            out += reader.feed(stream[i : i + chunk])
        assert [p.raw for p in out] == [load(f) for f in ALL_PACKET_FILES[:20]]


def test_reader_rejects_bad_framing() -> None:
    good = load("hello.hex")
    with pytest.raises(PacketError):
        PacketReader().feed(b"\x00" * 72)  # wrong magic
    bad_version = bytearray(good)
    bad_version[4:6] = b"\x00\x07"
    with pytest.raises(PacketError):
        PacketReader().feed(bytes(bad_version))
    huge = bytearray(good)
    struct.pack_into(">i", huge, 8, 2**31 - 1)
    with pytest.raises(PacketError):
        PacketReader(max_packet_size=1 << 20).feed(bytes(huge))
    inconsistent = bytearray(good)
    struct.pack_into(">i", inconsistent, 52, 9999)  # property offset beyond the packet
    out = PacketReader().feed(bytes(inconsistent))
    assert isinstance(out[0], BadPacket)


def test_unknown_property_type_is_an_error() -> None:
    section = bytes.fromhex("00000001000000010001620063") + b"\x00"
    with pytest.raises(ValueError):
        decode_properties(section)


# -- generated round trips ------------------------------------------------------

prop_values = st.one_of(
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1).map(JInt),
    st.integers(-(2**63), 2**63 - 1).map(JLong),
    st.integers(-128, 127).map(JByte),
    st.integers(-32768, 32767).map(JShort),
    st.floats(allow_nan=False, width=32).map(JFloat),
    st.floats(allow_nan=False),
    st.text(max_size=40),
)
names = st.text(min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    ptype=st.sampled_from(list(PacketType)),
    props=st.dictionaries(names, prop_values, max_size=8),
    body=st.binary(max_size=200),
    flags=st.integers(0, 0x1FFF),
    cid=st.integers(-(2**63), 2**63 - 1),
    priority=st.integers(0, 9),
    dest=st.none() | st.text(max_size=30),
    txn=st.integers(0, 2**63 - 1),
    java=st.booleans(),
)
def test_generated_packets_round_trip(ptype, props, body, flags, cid, priority, dest, txn, java):
    fields = {}
    if dest is not None:
        fields[VH_DESTINATION] = dest
    if txn:
        fields[VH_TRANSACTIONID] = txn
    raw = build_packet(
        ptype,
        props=props,
        body=body,
        flags=flags,
        consumer_id=cid,
        priority=priority,
        fields=fields,
        java_padding=java,
        timestamp=123,
    )
    pkt = parse_packet(raw)
    assert pkt.type == ptype and pkt.flags == flags and pkt.consumer_id == cid
    assert pkt.priority == priority and pkt.body == body
    assert pkt.fields == fields
    decoded = pkt.properties
    assert decoded == props
    assert {k: type(v) for k, v in decoded.items()} == {
        k: (JInt if type(v) is int else type(v)) for k, v in props.items()
    }


@given(st.text())
def test_modified_utf8_round_trip(text):
    from broker.protocol.properties import decode_java_utf

    assert decode_java_utf(encode_java_utf(text)) == text
    assert b"\x00" not in encode_java_utf(text)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_fields_decoder_only_raises_packet_error(data):
    try:
        decode_fields(data, 0, len(data))
    except PacketError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_properties_decoder_only_raises_value_error(data):
    try:
        decode_properties(data, 0, len(data))
    except ValueError:
        pass


def test_portmapper_line_with_brackets_in_its_words() -> None:
    # OpenMQ's broker lists its STOMP bridge so; the stock Java client reads it.
    table = parse_table(
        b"101 imqbroker 301\nportmapper tcp PORTMAPPER 7676 [sessionid=42]\n"
        b"jms tcp NORMAL 40001\nstomp[bridge] stomp[TCP] stomp[bridge] 7672\n.\n"
    )
    stomp = table.services[2]
    assert (stomp.name, stomp.protocol, stomp.type, stomp.port) == (
        "stomp[bridge]",
        "stomp[TCP]",
        "stomp[bridge]",
        7672,
    )
    assert table.services[0].properties == {"sessionid": "42"}
    assert table.find("NORMAL").name == "jms"


def test_java_typed_numbers_read_as_numbers_in_text() -> None:
    # Logs and refusal reasons format them with %s and f-strings: the number, not the
    # repr (a HELLO's old connection id was logged as "JLong(...)").
    values = (JByte(-5), JShort(300), JInt(70000), JLong(2**40), JFloat(1.5))
    assert [str(v) for v in values] == ["-5", "300", "70000", "1099511627776", "1.5"]
    assert f"{JLong(7)} {JInt(8):>3}" == "7   8"
    assert repr(JLong(7)) == "JLong(7)"
