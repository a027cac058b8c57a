"""Every decoder in broker.protocol raises only ProtocolError (or a subclass) for bad bytes.

The connection handler tells a client's garbage (400, or GOODBYE and close) from a
broker bug (500 with a traceback) by exception type alone, so this is structural: each
decoder below gets arbitrary bytes, and mutations of the packets and bodies the real
OpenMQ Java and C clients wrote (third_party/openmq/vectors), and nothing but ProtocolError may
come out.  A new decoder is one more entry in DECODERS.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import struct
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import broker.protocol
from broker.protocol import jmxser
from broker.protocol.auth import AuthBodyError, decode_auth_body, decode_basic_password
from broker.protocol.errors import ProtocolError
from broker.protocol.http1 import HttpError, RequestReader
from broker.protocol.httptunnel import (
    ConnOption,
    TunnelPacket,
    TunnelType,
    decode_option,
    decode_packets,
    encode_option,
    parse_request,
)
from broker.protocol.javaser import (
    STREAM_MAGIC,
    JavaSerializationError,
    JavaStreamTruncated,
    decode_hashtable,
    decode_map_body,
    decode_modified_utf8,
    decode_object,
    decode_properties_object,
    decode_stream_body,
    decode_vector,
    encode_hashtable,
    encode_properties_object,
    encode_vector,
)
from broker.protocol.jrmp import JrmpDecoder, ObjID, encode_call, encode_handshake
from broker.protocol.packet import (
    HEADER_SIZE,
    BadPacket,
    Packet,
    PacketError,
    PacketReader,
    decode_fields,
    parse_packet,
    with_delivery_count_slot,
)
from broker.protocol.portmapper import PortMapperError, parse_table
from broker.protocol.properties import (
    PropertyError,
    decode_java_utf,
    decode_properties,
    encode_java_utf,
    read_utf,
)
from broker.protocol.stomp import FrameReader as StompReader
from broker.protocol.stomp import StompError, encode_frame, parse_heart_beat
from broker.protocol.sysmsgid import (
    SysMessageID,
    SysMessageIDError,
    ip_to_string,
    sysmsgid_string,
)
from broker.protocol.websocket import WebSocketServer
from broker.protocol.xid import Xid, XidError

from .vectors import NEEDS_VECTORS, read_all, vector_files

# The decoders' samples come from the vectors: without them every test here fails.
pytestmark = [pytest.mark.fast, NEEDS_VECTORS]
PACKET_FILES = vector_files("**/*.hex", where=lambda p: p.name[:4] in ("c2b-", "b2c-"))
PACKETS = read_all(PACKET_FILES)
PARSED = [parse_packet(raw) for raw in PACKETS]


# ---------------------------------------------------------------------------
# The decoders, each with valid samples to mutate


def _whole_packet(data: bytes) -> None:
    """Everything the broker reads from one packet: header, fields, properties, body."""
    pkt = parse_packet(data)
    _ = pkt.fields, pkt.properties, pkt.body, pkt.destination, pkt.transaction_id
    sysmsgid_string(pkt.sysmsgid)
    with_delivery_count_slot(pkt)


def _stream(data: bytes) -> None:
    """A byte stream split at every position, as TCP may deliver it."""
    for cut in (1, 7, 72, len(data) // 2):
        reader = PacketReader(max_packet_size=1 << 20)
        for part in (data[:cut], data[cut:]):
            for pkt in reader.feed(part):
                if isinstance(pkt, Packet):
                    _ = pkt.fields, pkt.properties
                    with_delivery_count_slot(pkt)


def _java_utf_both(data: bytes) -> None:
    decode_java_utf(data)
    decode_modified_utf8(data)


def _auth(data: bytes) -> None:
    _user, credential = decode_auth_body(data)
    decode_basic_password(credential)


@dataclass(frozen=True)
class Decoder:
    name: str
    decode: Callable[[bytes], object]
    samples: tuple[bytes, ...]

    def __str__(self) -> str:
        return self.name


def _parts(select: Callable[[Packet], bytes]) -> tuple[bytes, ...]:
    return tuple(dict.fromkeys(select(p) for p in PARSED if select(p)))


FIELDS = _parts(lambda p: p.raw[HEADER_SIZE : p.prop_offset])
PROPS = _parts(lambda p: p.raw[p.prop_offset : p.prop_offset + p.prop_size])
JAVA_BODIES = _parts(lambda p: p.body if p.body.startswith(STREAM_MAGIC) else b"")
AUTH_BODIES = tuple(
    p.body for p in PARSED if p.type_name == "AUTHENTICATE" and p.body[:2] != b"\x00\x00"
)
UTF = tuple(encode_java_utf(t) for t in ("plain", "h\xe9llo\x00w\u00f6rld", "\U0001f600 \u20ac"))
HASHTABLE = encode_hashtable({"a": 1, "b": "two"})
PROPERTIES_OBJ = encode_properties_object({"imq.x": "1"})
VECTOR = encode_vector(["a", 1, None])
XIDS = Xid(1, b"global", b"branch").encode() + Xid.null().encode()
PORTMAPPER = tuple(read_all(vector_files("**/portmapper-reply.hex")))

TUNNEL_PACKETS = (
    TunnelPacket(TunnelType.CONN_INIT).encode(),
    TunnelPacket(TunnelType.DATA, 7, 3, 0, b"x" * 300).encode()
    + TunnelPacket(TunnelType.ACK, 7, 2, 63).encode(),
    TunnelPacket(
        TunnelType.CONN_OPTION, 7, 0, 0, encode_option(ConnOption.PULL_PERIOD, 5)
    ).encode(),
)
HTTP_REQUESTS = (
    b"GET /imq/tunnel?Type=pull&ConnId=12&ServerName=h:b HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /imq/tunnel?Type=push HTTP/1.1\r\nContent-Length: 24\r\n\r\n" + TUNNEL_PACKETS[0],
)


def _http_stream(data: bytes) -> None:
    for cut in (1, 20, len(data) // 2):
        reader = RequestReader(max_body=1 << 16)
        for part in (data[:cut], data[cut:]):
            for req in reader.feed(part):
                parse_request(req.query)
                if req.body:
                    decode_packets(req.body)


STOMP_FRAMES = (
    b"CONNECT\naccept-version:1.0,1.1,1.2\nlogin:guest\npasscode:guest\n\n\x00\n",
    encode_frame("SEND", [("destination", "/queue/a"), ("k", "a:b\\c")], b"x\x00y", "1.2"),
    b"SEND\r\ndestination:/topic/t\r\n\r\nhello\x00\r\n",
)


def _stomp_stream(data: bytes) -> None:
    for version in ("1.0", "1.1", "1.2"):
        for cut in (1, 9, len(data) // 2):
            reader = StompReader(version, max_frame=1 << 16, max_headers=50)
            for part in (data[:cut], data[cut:]):
                for frame in reader.feed(part):
                    frame.get("content-length")


JRMP_SESSIONS = (
    encode_handshake("127.0.0.1", 0)
    + encode_call(ObjID(5), -1089742558549201240, [jmxser.string_array(["admin", "admin"])]),
    encode_handshake()
    + encode_call(
        ObjID(6),
        -1089783104982388203,
        [
            jmxser.object_name("com.sun.messaging.jms.server:type=Broker,subtype=Config"),
            "Port",
            None,
        ],
    )
    + b"\x52"
    + encode_call(ObjID(6), -5037523307973544478, [1, 2, 3]),
)


def _jrmp_stream(data: bytes) -> None:
    for cut in (1, 13, len(data) // 2):
        decoder = JrmpDecoder()
        for part in (data[:cut], data[cut:]):
            decoder.feed(part)


def _ws_client_bytes() -> tuple[bytes, ...]:
    """A browser's upgrade for /wsjms/mqstomp and two masked text messages after it."""
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, Request, TextMessage

    c = WSConnection(ConnectionType.CLIENT)
    upgrade = c.send(Request(host="h", target="/wsjms/mqstomp", subprotocols=["v12.stomp"]))
    server = WebSocketServer("wsjms", max_message=1 << 16)
    server.receive(upgrade)
    c.receive_data(server.take_outgoing())
    assert any(isinstance(e, AcceptConnection) for e in c.events())
    frames = c.send(TextMessage("CONNECT\n\n\x00")) + c.send(TextMessage("\n"))
    return (upgrade, upgrade + frames)


def _ws_stream(data: bytes) -> None:
    for cut in (1, 9, len(data) // 2):
        server = WebSocketServer("wsjms", max_message=1 << 16)
        for part in (data[:cut], data[cut:]):
            server.receive(part)


DECODERS = [
    Decoder("jrmp.JrmpDecoder.feed", _jrmp_stream, JRMP_SESSIONS),
    Decoder("stomp.FrameReader.feed", _stomp_stream, STOMP_FRAMES),
    Decoder(
        "stomp.parse_heart_beat",
        lambda d: parse_heart_beat(d.decode("utf-8", "replace")),
        (b"10000,0", b"0,0", b" 500 , 250 "),
    ),
    Decoder("websocket.WebSocketServer.receive", _ws_stream, _ws_client_bytes()),
    Decoder("httptunnel.decode_packets", decode_packets, TUNNEL_PACKETS),
    Decoder("httptunnel.decode_option", decode_option, (TUNNEL_PACKETS[2][24:],)),
    Decoder(
        "httptunnel.parse_request",
        lambda d: parse_request(d.decode("latin-1")),
        (b"Type=pull&ConnId=12&ServerName=h:b", b"Type=connect", b""),
    ),
    Decoder("http1.RequestReader.feed (+ tunnel)", _http_stream, HTTP_REQUESTS),
    Decoder("PacketReader.feed", _stream, tuple(PACKETS)),
    Decoder("parse_packet (all parts)", _whole_packet, tuple(PACKETS)),
    Decoder("Packet", Packet, tuple(PACKETS)),
    Decoder("BadPacket", lambda d: BadPacket(d, "test"), tuple(PACKETS)),
    Decoder("decode_fields", lambda d: decode_fields(d, 0, len(d)), FIELDS),
    Decoder("decode_properties", lambda d: decode_properties(d, 0, len(d)), PROPS),
    Decoder("decode_java_utf / decode_modified_utf8", _java_utf_both, UTF),
    Decoder(
        "read_utf", lambda d: read_utf(d, 0), tuple(struct.pack(">H", len(u)) + u for u in UTF)
    ),
    Decoder("decode_map_body", decode_map_body, JAVA_BODIES),
    Decoder("decode_stream_body", decode_stream_body, JAVA_BODIES),
    Decoder("decode_hashtable", decode_hashtable, (HASHTABLE, *JAVA_BODIES)),
    Decoder("decode_properties_object", decode_properties_object, (PROPERTIES_OBJ,)),
    Decoder("decode_vector", decode_vector, (VECTOR, *JAVA_BODIES)),
    Decoder("decode_object", decode_object, (HASHTABLE, *JAVA_BODIES)),
    Decoder(
        "decode_object(generic)", lambda d: decode_object(d, generic=True), (VECTOR, *JAVA_BODIES)
    ),
    Decoder("decode_auth_body + decode_basic_password", _auth, AUTH_BODIES),
    Decoder("Xid.decode", Xid.decode, (XIDS,)),
    Decoder("Xid.decode_list", Xid.decode_list, (XIDS,)),
    Decoder("portmapper.parse_table", parse_table, PORTMAPPER),
    Decoder("SysMessageID.from_bytes", SysMessageID.from_bytes, _parts(lambda p: p.sysmsgid)),
    Decoder("sysmsgid_string", sysmsgid_string, _parts(lambda p: p.sysmsgid)),
    Decoder("ip_to_string", ip_to_string, _parts(lambda p: p.raw[28:44])),
]

# The codec's error classes: all one family.
ERROR_TYPES = [
    HttpError,
    PacketError,
    PropertyError,
    JavaSerializationError,
    JavaStreamTruncated,
    AuthBodyError,
    XidError,
    PortMapperError,
    SysMessageIDError,
    StompError,
]


def only_protocol_error(decoder: Decoder, data: bytes) -> None:
    try:
        decoder.decode(data)
    except ProtocolError:
        pass
    except Exception as exc:  # the point of the test: name the decoder and the bytes
        pytest.fail(f"{decoder} raised {type(exc).__name__}: {exc} for {data[:200]!r}")


# ---------------------------------------------------------------------------
# Structure


@pytest.mark.parametrize("cls", ERROR_TYPES, ids=lambda c: c.__name__)
def test_every_codec_error_is_a_protocol_error(cls):
    assert issubclass(cls, ProtocolError)
    assert issubclass(cls, ValueError)  # callers that catch ValueError keep working


def test_no_other_exception_class_in_broker_protocol():
    # A decoder module that grows its own error class must make it a ProtocolError.
    found = []
    for info in pkgutil.iter_modules(broker.protocol.__path__):
        module = importlib.import_module(f"broker.protocol.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found.append(obj)
                assert issubclass(obj, ProtocolError), f"{obj.__qualname__} is not a ProtocolError"
    assert set(ERROR_TYPES) <= set(found)


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
def test_samples_decode(decoder):
    # The mutations below start from input each decoder takes; an empty or unreadable
    # sample list would make them prove nothing.
    assert decoder.samples, f"no samples for {decoder}"
    accepted = 0
    for sample in decoder.samples:
        try:
            decoder.decode(sample)
            accepted += 1
        except ProtocolError:
            # The map/vector/hashtable decoders are given each other's bodies too.
            pass
    assert accepted, f"{decoder} accepted none of its samples"


# ---------------------------------------------------------------------------
# Fuzzing


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes(decoder, data):
    only_protocol_error(decoder, data)


# Bytes that are not modified UTF-8, and ones that break lengths and counts.
NASTY = st.sampled_from(
    [b"\xff\xfe", b"\x80", b"\xe2\x82", b"\xed\xa0", b"\xc0", b"\xf8\x88\x80\x80\x80", b"\x00"]
)


@st.composite
def mutated(draw, samples: tuple[bytes, ...]) -> bytes:
    data = bytearray(draw(st.sampled_from(samples)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["byte", "splice", "truncate", "int32"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "byte" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "splice":
            bad = draw(NASTY)
            data[at : at + len(bad)] = bad
        elif kind == "truncate":
            del data[at:]
        elif len(data) >= at + 4:
            value = draw(st.sampled_from([-1, 0, 1, 72, 2**31 - 1, -(2**31), 0xFFFF]))
            struct.pack_into(">i", data, at, value)
    return bytes(data)


@pytest.mark.parametrize("decoder", DECODERS, ids=str)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_samples(decoder, data):
    only_protocol_error(decoder, data.draw(mutated(decoder.samples)))


# ---------------------------------------------------------------------------
# The strings of issue 11: exactly the codec's error, with the reason


BAD_STRINGS = [b"\xff\xfe", b"ab\x80", b"x\xe2\x82", b"\xe2\x28\xa1"]


@pytest.mark.parametrize("bad", BAD_STRINGS, ids=repr)
def test_bad_string_in_properties_is_a_property_error(bad):
    table = struct.pack(">iiH", 1, 1, len(bad)) + bad + b"\x00\x08\x00\x01x"
    with pytest.raises(PropertyError, match="property name .* is not valid modified UTF-8"):
        decode_properties(table)
    table = struct.pack(">iiH", 1, 1, 1) + b"k\x00\x08" + struct.pack(">H", len(bad)) + bad
    with pytest.raises(PropertyError, match="value of k: .* is not valid modified UTF-8"):
        decode_properties(table)


@pytest.mark.parametrize("bad", BAD_STRINGS, ids=repr)
def test_bad_string_in_variable_header_is_a_packet_error(bad):
    vh = struct.pack(">hH", 1, len(bad)) + bad + b"\x00\x00"
    with pytest.raises(PacketError, match="destination: .* is not valid modified UTF-8"):
        decode_fields(vh, 0, len(vh))


@pytest.mark.parametrize("bad", BAD_STRINGS, ids=repr)
def test_bad_string_in_auth_body_is_an_auth_body_error(bad):
    body = struct.pack(">H", len(bad)) + bad + b"\x00\x00"
    with pytest.raises(AuthBodyError, match="not valid modified UTF-8"):
        decode_auth_body(body)


def test_java_forms_still_decode():
    # What Java's writeUTF produces: C0 80 for NUL, a surrogate pair as two 3-byte
    # sequences, and a lone surrogate (taken as readUTF takes it; U+FFFD here).
    assert decode_java_utf(b"a\xc0\x80b") == "a\x00b"
    assert decode_java_utf(b"\xed\xa0\xbd\xed\xb8\x80") == "\U0001f600"
    assert decode_java_utf(b"x\xed\xa0\x80") == "x\ufffd"
    assert decode_modified_utf8(b"x\xed\xa0\x80") == "x\ud800"


def test_stored_message_with_unreadable_properties_is_not_bad_input(caplog):
    # Messages are checked on arrival now; one stored before that must not make a
    # dispatch (run for whichever client triggered it) raise the codec's error.
    from broker.core.message import Message
    from broker.protocol.packet import build_packet
    from broker.protocol.types import PacketType

    table = struct.pack(">iiH", 1, 1, 2) + b"\xff\xfe\x00\x08\x00\x01x"
    raw = build_packet(PacketType.TEXT_MESSAGE, fields={1: "q", 5: "kind"}, raw_props=table)
    msg = Message(parse_packet(raw), "q", 1)
    values = msg.selector_values()
    assert "JMSPriority" in values and values["JMSType"] == "kind"
    assert "unreadable properties" in caplog.text


def test_dead_copy_of_message_with_unreadable_properties():
    from broker.core.dmq import dead_message
    from broker.core.message import Message
    from broker.protocol.packet import build_packet
    from broker.protocol.types import PacketType

    table = struct.pack(">iiH", 1, 1, 2) + b"\xff\xfe\x00\x08\x00\x01x"
    raw = build_packet(PacketType.TEXT_MESSAGE, fields={1: "q"}, raw_props=table, body=b"b")
    dead = dead_message(
        Message(parse_packet(raw), "q", 1), "EXPIRED", now_ms=1, broker="b", delivery_count=0
    )
    props = parse_packet(dead.raw).properties
    assert props["JMS_SUN_DMQ_UNDELIVERED_REASON"] == "EXPIRED"
    assert parse_packet(dead.raw).body == b"b"
