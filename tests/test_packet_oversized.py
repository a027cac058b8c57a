"""PacketReader(skip_oversized=True): a packet over the limit is read past, not fatal.

OpenMQ's broker discards a packet larger than its limit and answers it ENTITY_TOO_LARGE
(the stock Java client reports C4095) while the connection goes on; the engine does the
same with what the reader returns (tests/interop/test_java_restart.py runs the client).
"""

from __future__ import annotations

import struct

import pytest

from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt
from broker.protocol.packet import (
    HEADER_SIZE,
    MAX_KEPT_HEAD,
    OFF_PROP_OFFSET,
    OversizedPacket,
    Packet,
    PacketReader,
    build_packet,
)
from broker.protocol.types import FLAG_A, PacketType

pytestmark = pytest.mark.fast

LIMIT = 4096


def packets() -> tuple[bytes, bytes, bytes]:
    small = build_packet(PacketType.TEXT_MESSAGE, body=b"before", consumer_id=1)
    big = build_packet(
        PacketType.BYTES_MESSAGE, body=bytes(3 * LIMIT), flags=FLAG_A, consumer_id=77
    )
    after = build_packet(PacketType.PING, props={"n": JInt(1)}, consumer_id=2)
    return small, big, after


@pytest.mark.parametrize("chunk", [1, 7, HEADER_SIZE, 1000, 1 << 20])
def test_oversized_packet_is_skipped_in_any_chunking(chunk: int) -> None:
    small, big, after = packets()
    stream = small + big + after
    r = PacketReader(LIMIT, skip_oversized=True)
    got = []
    for i in range(0, len(stream), chunk):
        got += r.feed(stream[i : i + chunk])
    assert [type(p) for p in got] == [Packet, OversizedPacket, Packet]
    over = got[1]
    assert isinstance(over, OversizedPacket)
    assert (over.type, over.consumer_id, over.size) == (
        PacketType.BYTES_MESSAGE,
        77,
        len(big),
    )
    assert over.flags & FLAG_A
    assert over.reason == f"bad packet size {len(big)} (limit {LIMIT})"
    assert got[0].body == b"before" and got[2].type == PacketType.PING  # type: ignore[union-attr]
    assert r.buffered == 0


def test_without_skip_an_oversized_packet_still_ends_the_stream() -> None:
    _, big, _ = packets()
    with pytest.raises(ProtocolError, match="bad packet size"):
        PacketReader(LIMIT).feed(big)
    # A broken header is fatal either way.
    with pytest.raises(ProtocolError, match="bad magic"):
        PacketReader(LIMIT, skip_oversized=True).feed(b"\x00" * HEADER_SIZE)


def test_the_variable_header_is_kept_so_the_producer_is_known() -> None:
    big = build_packet(
        PacketType.BYTES_MESSAGE,
        fields={1: "q", 9: 4242},
        body=bytes(3 * LIMIT),
        consumer_id=5,
    )
    for chunk in (1, HEADER_SIZE + 3, 1 << 20):
        r = PacketReader(LIMIT, skip_oversized=True)
        got = [p for i in range(0, len(big), chunk) for p in r.feed(big[i : i + chunk])]
        (over,) = got
        assert isinstance(over, OversizedPacket)
        assert over.producer_id == 4242 and over.size == len(big)
        assert r.buffered == 0


def test_an_unreadable_or_huge_variable_header_is_not_kept() -> None:
    big = bytearray(
        build_packet(PacketType.BYTES_MESSAGE, fields={9: 7}, body=bytes(MAX_KEPT_HEAD + 100))
    )
    # A property offset beyond what the reader keeps: only the fixed header.
    struct.pack_into(">i", big, OFF_PROP_OFFSET, len(big) - 10)
    (over,) = PacketReader(LIMIT, skip_oversized=True).feed(bytes(big))
    assert isinstance(over, OversizedPacket) and len(over.raw) == HEADER_SIZE
    assert over.producer_id == 0
    # A variable header that does not decode: no producer, no error.
    big = bytearray(build_packet(PacketType.BYTES_MESSAGE, fields={9: 7}, body=bytes(3 * LIMIT)))
    big[HEADER_SIZE : HEADER_SIZE + 4] = b"\x00\x01\x7f\xff"  # a name of 32767 bytes
    (over,) = PacketReader(LIMIT, skip_oversized=True).feed(bytes(big))
    assert isinstance(over, OversizedPacket) and over.producer_id == 0
