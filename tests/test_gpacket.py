"""GPacket and link-packet codec: the spec's verified bytes, round trips, and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import gpacket as gp
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JLong

pytestmark = pytest.mark.fast

PING_VECTOR = bytes.fromhex(
    "015e0021000000397fffe3c200000015"
    "00000000000000000000000000000000"
    "000000010000000100000001000158 00"
    "050000000000000001".replace(" ", "")
)


def test_ping_vector_bytes() -> None:
    pkt = gp.GPacket(gp.G_PING, {"X": JLong(1)}, flags=gp.A_BIT)
    assert gp.encode(pkt, stamp=False) == PING_VECTOR
    back = gp.decode(PING_VECTOR)
    assert back.type == gp.G_PING and back.props == {"X": 1} and back.wants_reply


def test_round_trip_with_payload_and_stream_reader() -> None:
    a = gp.GPacket(gp.G_MESSAGE_DATA, {"D": True, "C": 1}, b"payload" * 10)
    link = gp.LinkPacket(gp.LINK_INIT, gp.LinkInit(500, "127.0.0.1", "b1", 7676).encode())
    data = gp.encode_link(link) + gp.encode(a) + gp.encode(gp.GPacket(gp.G_GOODBYE))
    reader = gp.GPacketReader()
    got = []
    for i in range(len(data)):  # one byte at a time: partial headers and bodies
        got += reader.feed(data[i : i + 1])
    assert [type(p).__name__ for p in got] == ["LinkPacket", "GPacket", "GPacket"]
    assert gp.LinkInit.decode(got[0].body).instance == "b1"
    assert got[1].payload == a.payload and got[1].props == {"D": True, "C": 1}
    assert got[2].type == gp.G_GOODBYE and reader.pending == 0


def test_link_init_full_fields() -> None:
    li = gp.LinkInit(
        500,
        "h",
        "inst",
        1,
        gp.BrokerAddress("m", "mi", 2),
        {"imq.autocreate.queue": "true"},
        ha=False,
        broker_id="B1",
        session_uid=99,
        store_session=7,
    )
    assert gp.LinkInit.decode(li.encode()) == li
    ha = gp.LinkInit(500, "h", "i", 1, ha=True, session_uid=3, store_session=4)
    assert gp.LinkInit.decode(ha.encode()) == ha


def test_consumer_uid_round_trip() -> None:
    cuid = gp.ConsumerUID(5, 6, gp.BrokerAddress("127.0.0.1", "x", 7676))
    w = gp.BodyWriter()
    cuid.write(w)
    assert gp.ConsumerUID.read(gp.BodyReader(w.bytes())) == cuid


@pytest.mark.parametrize(
    "data,reason",
    [
        (PING_VECTOR[:20], "truncated"),
        (b"\x01\x5f" + PING_VECTOR[2:], "version 351"),
        (PING_VECTOR[:8] + b"\0\0\0\0" + PING_VECTOR[12:], "magic"),
        (PING_VECTOR[:4] + b"\x00\x00\x00\x10" + PING_VECTOR[8:], "size"),
        (PING_VECTOR[:12] + b"\x00\x00\x10\x00" + PING_VECTOR[16:], "property length"),
        (PING_VECTOR + b"x", "announces"),
    ],
)
def test_bad_gpackets(data: bytes, reason: str) -> None:
    with pytest.raises(gp.GPacketError, match=reason):
        gp.decode(data)


def test_reader_rejects_unknown_version_and_bad_link_size() -> None:
    with pytest.raises(gp.GPacketError, match="unknown packet version"):
        gp.GPacketReader().feed(b"\x12\x34" + b"\0" * 40)
    with pytest.raises(gp.GPacketError, match="16..65536"):
        gp.GPacketReader().feed(b"\x00\x64\x00\x04\x00\x02\x00\x00" + b"\0" * 8)
    with pytest.raises(gp.GPacketError, match="truncated"):
        gp.LinkInit.decode(gp.LinkInit(500, "h", "i", 1).encode()[:9])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_protocol_errors(data: bytes) -> None:
    for fn in (gp.decode, gp.decode_link, gp.LinkInit.decode, gp.split_concatenated):
        try:
            fn(data)
        except ProtocolError:
            pass
    try:
        gp.GPacketReader().feed(data)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 80),
    st.dictionaries(st.text(min_size=1, max_size=5), st.integers(-(2**31), 2**31 - 1), max_size=4),
    st.binary(max_size=100),
    st.data(),
)
def test_round_trip_and_truncation(ptype: int, props: dict, payload: bytes, data) -> None:
    raw = gp.encode(gp.GPacket(ptype, props, payload))
    back = gp.decode(raw)
    assert (back.type, back.props, back.payload) == (ptype, props, payload)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(gp.GPacketError):
        gp.decode(raw[:cut])
    assert gp.GPacketReader().feed(raw[:cut]) == []


def test_message_data_properties_are_decoded_once_per_table() -> None:
    """A G_MESSAGE_DATA's property table recurs (the sender's address, D, C, the delivery
    count): the same bytes give the same decoded dict; another table its own."""
    props = {"instanceName": "A", "port": 7676, "brokerSession": JLong(5), "D": False, "C": 1}
    first = gp.decode(gp.encode(gp.GPacket(gp.G_MESSAGE_DATA, props, b"one")))
    second = gp.decode(gp.encode(gp.GPacket(gp.G_MESSAGE_DATA, props, b"two")))
    assert first.props == props and second.props is first.props
    assert (first.payload, second.payload) == (b"one", b"two")
    other = gp.decode(gp.encode(gp.GPacket(gp.G_MESSAGE_DATA, {**props, "C": 2}, b"")))
    assert other.props["C"] == 2 and first.props["C"] == 1
    # A bad table is still refused, cached type or not, and nothing is kept of it.
    data = bytearray(gp.encode(gp.GPacket(gp.G_MESSAGE_DATA, {"k": "v"}, b"")))
    data[gp.HEADER_SIZE + 4 : gp.HEADER_SIZE + 8] = b"\x7f\xff\xff\xff"
    with pytest.raises(gp.GPacketError, match="GPacket properties"):
        gp.decode(bytes(data))
