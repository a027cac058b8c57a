"""The JMQ protocol's packets: the 72-byte fixed header, the variable header, properties and body.

Sans-IO in the manner of h11: :class:`PacketReader` takes bytes and returns
:class:`Packet` objects; :func:`build_packet` returns the bytes of a new packet.
A decoded packet keeps the bytes it came from, so the broker can forward a message
by patching a few header bytes instead of encoding it again.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping

from .errors import ProtocolError
from .properties import (
    TEXTS,
    PropertyError,
    decode_java_utf,
    decode_properties,
    encode_properties,
    remember,
)
from .sysmsgid import IP_ZERO, SysMessageID
from .types import (
    CURRENT_PACKET_VERSION,
    HEADER_SIZE,
    KNOWN_PACKET_VERSIONS,
    MAGIC,
    PACKET_VERSION_103,
    packet_type_name,
)


class PacketError(ProtocolError):
    """A packet that cannot be decoded; ``fatal`` means the stream cannot be resynchronised."""

    def __init__(self, reason: str, *, fatal: bool = True) -> None:
        super().__init__(reason)
        self.fatal = fatal


# magic, version, type, size, expiration, timestamp, ip, port, sequence,
# propOffset, propSize, priority, encryption, flags, consumerID
HEADER = struct.Struct(">ihhiqq16siiiibbHq")
assert HEADER.size == HEADER_SIZE
# The 2.0 (v103) layout: transaction id in the header, int consumer id.
HEADER_103 = struct.Struct(">ihhiiq32siibbHi")
assert HEADER_103.size == HEADER_SIZE

OFF_SIZE = 8
OFF_SYSMSGID = 20
OFF_PROP_OFFSET = 52
OFF_FLAGS = 62
OFF_CONSUMER_ID = 64

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_FLAGS = struct.Struct(">H")
_TAG_LEN = struct.Struct(">hH")
_PROP_RANGE = struct.Struct(">ii")  # propOffset, propSize

# Variable-header field tags.
VH_NULL = 0
VH_DESTINATION = 1
VH_MESSAGEID = 2
VH_CORRELATIONID = 3
VH_REPLYTO = 4
VH_TYPE = 5
VH_DESTINATION_CLASS = 6
VH_REPLYTO_CLASS = 7
VH_TRANSACTIONID = 8
VH_PRODUCERID = 9
VH_DELIVERY_TIME = 10
VH_DELIVERY_COUNT = 11

_LONG_FIELDS = (VH_TRANSACTIONID, VH_PRODUCERID, VH_DELIVERY_TIME)
_FIELD_NAMES = {
    VH_DESTINATION: "destination",
    VH_MESSAGEID: "message id",
    VH_CORRELATIONID: "correlation id",
    VH_REPLYTO: "reply-to",
    VH_TYPE: "type",
    VH_DESTINATION_CLASS: "destination class",
    VH_REPLYTO_CLASS: "reply-to class",
}
_STRING_FIELDS = (1, 2, 3, 4, 5, 6, 7)
# Destination and reply-to names (and their classes) recur on every message of a
# producer: decoded once, by their bytes (properties.TEXTS).  Message and correlation ids
# do not.
_NAME_FIELDS = frozenset((VH_DESTINATION, VH_REPLYTO, VH_DESTINATION_CLASS, VH_REPLYTO_CLASS))
# A producer's messages usually carry the very same variable header (its producer id,
# the destination and its class): decoded once, by its bytes.  Only headers made of
# these fields are kept, so per-message ids do not churn the cache.  The dict is shared
# by every packet with those bytes: Packet.fields is read-only.
_RECURRING_FIELDS = _NAME_FIELDS | {VH_PRODUCERID}
_HEADERS: dict[bytes, dict[int, object]] = {}

DEFAULT_MAX_PACKET = 70 * 1024 * 1024


def decode_fields(buf: bytes | memoryview, start: int, end: int) -> dict[int, object]:
    """Decode a variable header occupying ``buf[start:end]`` into ``{tag: value}``."""
    if start < 0 or end > len(buf):
        raise PacketError(f"variable header {start}..{end} outside {len(buf)} bytes", fatal=False)
    fields: dict[int, object] = {}
    pos = start
    while pos + 2 <= end:
        tag = (buf[pos] << 8) | buf[pos + 1]
        if tag & 0x8000:
            tag -= 0x10000
        if tag == VH_NULL:
            return fields
        if pos + 4 > end:
            raise PacketError("truncated variable header", fatal=False)
        length = (buf[pos + 2] << 8) | buf[pos + 3]
        vstart = pos + 4
        if tag in (VH_TRANSACTIONID, VH_PRODUCERID, VH_DELIVERY_TIME):
            if vstart + 8 > end:
                raise PacketError("truncated variable header field", fatal=False)
            fields[tag] = _I64.unpack_from(buf, vstart)[0]
            # Java reads a fixed 8 bytes whatever the length word says.
            pos = vstart + 8
        elif tag == VH_DELIVERY_COUNT:
            if vstart + 4 > end:
                raise PacketError("truncated variable header field", fatal=False)
            fields[tag] = _I32.unpack_from(buf, vstart)[0]
            pos = vstart + 4
        else:
            vend = vstart + length
            if vend > end:
                raise PacketError("truncated variable header field", fatal=False)
            if 1 <= tag <= 7:
                raw = buf[vstart:vend]
                # Only bytes keys: a memoryview of a bytearray cannot be hashed.
                key = raw if tag in _NAME_FIELDS and type(raw) is bytes else None
                text = TEXTS.get(key) if key is not None else None
                if text is None:
                    try:
                        text = decode_java_utf(bytes(raw))
                    except PropertyError as exc:
                        raise PacketError(
                            f"variable header field {_FIELD_NAMES[tag]}: {exc}", fatal=False
                        ) from None
                    if key is not None:
                        remember(TEXTS, key, text)
                fields[tag] = text
            pos = vend
    if start == end:
        return fields
    raise PacketError("variable header has no terminator", fatal=False)


def encode_fields(fields: Mapping[int, object] | None, *, java_padding: bool = True) -> bytes:
    """Encode a variable header the way the Java writer does.

    Longs (8, 9, 10) come first, written only when non-zero; then DELIVERY_COUNT when
    positive; then strings in tag order; then the terminator and padding (Java pads
    1-4 bytes, the C client 0-3; ``java_padding`` picks the Java rule).
    """
    if not fields:
        return b""
    parts = []
    for tag in _LONG_FIELDS:
        v = fields.get(tag)
        if v:
            parts.append(struct.pack(">hhq", tag, 8, v))
    dc = fields.get(VH_DELIVERY_COUNT)
    if isinstance(dc, int) and dc > 0:
        parts.append(struct.pack(">hhi", VH_DELIVERY_COUNT, 4, dc))
    for tag in _STRING_FIELDS:
        s = fields.get(tag)
        if s is not None:
            data = str(s).encode("utf-8")
            if len(data) > 0xFFFF:
                raise PacketError(f"variable header string too long ({len(data)} bytes)")
            parts.append(struct.pack(">hH", tag, len(data)) + data)
    parts.append(b"\x00\x00")
    body = b"".join(parts)
    pad = 4 - len(body) % 4 if java_padding else (4 - len(body) % 4) % 4
    return body + b"\x00" * pad


class Packet:
    """One decoded packet. Header fields are attributes; the rest is decoded on demand."""

    __slots__ = (
        "raw",
        "version",
        "type",
        "size",
        "expiration",
        "timestamp",
        "ip",
        "port",
        "sequence",
        "prop_offset",
        "prop_size",
        "priority",
        "encryption",
        "flags",
        "consumer_id",
        "legacy_transaction_id",
        "_fields",
        "_props",
    )

    def __init__(self, raw: bytes) -> None:
        if len(raw) < HEADER_SIZE:
            raise PacketError(f"packet of {len(raw)} bytes is shorter than its header")
        self.raw = raw
        self._fields: dict[int, object] | None = None
        self._props: dict[str, object] | None = None
        self.legacy_transaction_id = 0
        (
            magic,
            self.version,
            self.type,
            self.size,
            self.expiration,
            self.timestamp,
            self.ip,
            self.port,
            self.sequence,
            self.prop_offset,
            self.prop_size,
            self.priority,
            self.encryption,
            self.flags,
            self.consumer_id,
        ) = HEADER.unpack_from(raw, 0)
        if self.version == PACKET_VERSION_103:
            (
                _m,
                _v,
                _t,
                _s,
                self.legacy_transaction_id,
                self.expiration,
                sysmsgid,
                self.prop_offset,
                self.prop_size,
                self.priority,
                self.encryption,
                flags,
                self.consumer_id,
            ) = HEADER_103.unpack_from(raw, 0)
            # 2.0 clients left garbage in the high byte of the flags.
            self.flags = flags & 0x00FF
            self.timestamp, self.ip, self.port, self.sequence = SysMessageID.from_bytes(sysmsgid)
        if magic != MAGIC:
            raise PacketError(f"bad magic number {magic:#x}")
        if self.size > len(raw):
            raise PacketError(f"packet size {self.size} exceeds its {len(raw)} bytes")
        if self.prop_offset < HEADER_SIZE or self.prop_offset > self.size:
            raise PacketError(f"bad property offset {self.prop_offset}", fatal=False)
        if self.prop_size < 0 or self.prop_offset + self.prop_size > self.size:
            raise PacketError(f"bad property size {self.prop_size}", fatal=False)

    # -- lazily decoded parts ------------------------------------------------

    @property
    def fields(self) -> dict[int, object]:
        """The variable-header fields, ``{tag: value}`` (shared: never modify it)."""
        fields = self._fields
        if fields is None:
            raw = self.raw
            if type(raw) is bytes:
                vh = raw[HEADER_SIZE : self.prop_offset]
                fields = _HEADERS.get(vh)
                if fields is None:
                    fields = decode_fields(raw, HEADER_SIZE, self.prop_offset)
                    if fields.keys() <= _RECURRING_FIELDS:
                        remember(_HEADERS, vh, fields)
            else:
                fields = decode_fields(raw, HEADER_SIZE, self.prop_offset)
            self._fields = fields
        return fields

    @property
    def properties(self) -> dict[str, object]:
        """The property table (raises :class:`PacketError` if it is malformed)."""
        if self._props is None:
            if self.version != CURRENT_PACKET_VERSION and self.prop_size:
                raise PacketError(
                    f"properties of packet version {self.version} are not supported",
                    fatal=False,
                )
            try:
                self._props = decode_properties(self.raw, self.prop_offset, self.prop_size)
            except PropertyError as exc:
                raise PacketError(str(exc), fatal=False) from exc
        return self._props

    @property
    def body(self) -> bytes:
        """The body bytes."""
        return self.raw[self.prop_offset + self.prop_size : self.size]

    @property
    def body_size(self) -> int:
        return self.size - self.prop_offset - self.prop_size

    @property
    def sysmsgid(self) -> bytes:
        """The marshalled SysMessageID (header bytes 20..51)."""
        return self.raw[OFF_SYSMSGID : OFF_SYSMSGID + 32]

    @property
    def type_name(self) -> str:
        return packet_type_name(self.type)

    def prop(self, name: str, default: object = None) -> object:
        return self.properties.get(name, default)

    # Common variable-header fields.
    @property
    def destination(self) -> str | None:
        return self.fields.get(VH_DESTINATION)  # type: ignore[return-value]

    @property
    def transaction_id(self) -> int:
        return self.fields.get(VH_TRANSACTIONID, 0) or self.legacy_transaction_id  # type: ignore[return-value]

    @property
    def producer_id(self) -> int:
        return self.fields.get(VH_PRODUCERID, 0)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return (
            f"<Packet {self.type_name} size={self.size} flags={self.flags:#06x} "
            f"cid={self.consumer_id}>"
        )


def parse_packet(raw: bytes) -> Packet:
    """Decode one whole packet from exactly its bytes."""
    if len(raw) < HEADER_SIZE:
        raise PacketError("packet shorter than its header")
    pkt = Packet(raw)
    if pkt.size != len(raw):
        raise PacketError(f"packet size {pkt.size} does not match {len(raw)} bytes")
    return pkt


class BadPacket:
    """A framed packet whose inside could not be decoded."""

    __slots__ = ("raw", "reason", "type", "flags", "consumer_id")

    def __init__(self, raw: bytes, reason: str) -> None:
        if len(raw) < HEADER_SIZE:
            raise PacketError(f"packet of {len(raw)} bytes is shorter than its header")
        self.raw = raw
        self.reason = reason
        _m, _v, self.type, _s = struct.unpack_from(">ihhi", raw, 0)
        self.flags = _FLAGS.unpack_from(raw, OFF_FLAGS)[0]
        self.consumer_id = _I64.unpack_from(raw, OFF_CONSUMER_ID)[0]


class OversizedPacket(BadPacket):
    """A sound packet header announcing more than the reader's limit; its bytes were skipped.

    ``raw`` holds the fixed header and, when it is no larger than :data:`MAX_KEPT_HEAD`,
    the variable header (a refused message's producer must still get its flow-control
    answer); ``size`` is the size it announced.
    """

    __slots__ = ("size",)

    def __init__(self, head: bytes, size: int, limit: int) -> None:
        super().__init__(head, f"bad packet size {size} (limit {limit})")
        self.size = size

    @property
    def producer_id(self) -> int:
        """The producer named in the kept variable header (0: none, or not kept)."""
        if len(self.raw) <= HEADER_SIZE:
            return 0
        try:
            pid = decode_fields(self.raw, HEADER_SIZE, len(self.raw)).get(VH_PRODUCERID, 0)
        except ProtocolError:
            return 0
        return pid if isinstance(pid, int) else 0


# The most of an oversized packet's variable header the reader keeps (destination, class,
# producer and transaction: a few hundred bytes in practice).
MAX_KEPT_HEAD = 64 * 1024


def _kept_head(view: bytes | bytearray, pos: int, size: int) -> int:
    """How many bytes of the oversized packet at ``pos`` to keep: the fixed header, and the
    variable header when its offset is sound and it is small."""
    prop_offset = _I32.unpack_from(view, pos + OFF_PROP_OFFSET)[0]
    if HEADER_SIZE <= prop_offset <= min(size, HEADER_SIZE + MAX_KEPT_HEAD):
        return prop_offset
    return HEADER_SIZE


class PacketReader:
    """Splits a byte stream into packets.

    ``feed`` returns the complete packets found so far.  A malformed header raises
    :class:`PacketError` (the stream cannot be trusted any more); a packet whose
    framing is sound but whose header fields are inconsistent comes back as a
    :class:`BadPacket`, so the caller can answer it before closing.  With
    ``skip_oversized`` a packet over ``max_packet_size`` whose header is otherwise sound
    is read past without being kept and comes back as an :class:`OversizedPacket` (as
    OpenMQ's broker discards such a packet and answers it); without, it raises.
    """

    def __init__(
        self, max_packet_size: int = DEFAULT_MAX_PACKET, *, skip_oversized: bool = False
    ) -> None:
        self.max_packet_size = max_packet_size
        self.skip_oversized = skip_oversized
        self._buf = bytearray()
        # Bytes of an oversized packet still to be read past.
        self._skip = 0

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[Packet | BadPacket]:
        if self._skip:
            n = min(self._skip, len(data))
            self._skip -= n
            data = data[n:]
            if not data:
                return []
        buf = self._buf
        if buf:
            buf += data
            view: bytes | bytearray = buf
        else:
            view = data
        out: list[Packet | BadPacket] = []
        pos = 0
        n = len(view)
        while n - pos >= HEADER_SIZE:
            magic, version, _t, size = struct.unpack_from(">ihhi", view, pos)
            if magic != MAGIC:
                self._buf = bytearray()
                raise PacketError(f"bad magic number {magic & 0xFFFFFFFF:#010x}")
            if version not in KNOWN_PACKET_VERSIONS:
                self._buf = bytearray()
                raise PacketError(f"unsupported packet version {version}")
            if size > self.max_packet_size and self.skip_oversized:
                head = _kept_head(view, pos, size)
                if n - pos < head:
                    break  # the variable header is still to come
                out.append(
                    OversizedPacket(bytes(view[pos : pos + head]), size, self.max_packet_size)
                )
                have = min(n - pos, size)
                pos += have
                if have < size:
                    self._skip = size - have
                    break
                continue
            if size < HEADER_SIZE or size > self.max_packet_size:
                self._buf = bytearray()
                raise PacketError(f"bad packet size {size} (limit {self.max_packet_size})")
            if n - pos < size:
                break
            raw = bytes(view[pos : pos + size])
            pos += size
            try:
                out.append(Packet(raw))
            except PacketError as exc:
                # Framing was sound, so the stream goes on; the caller decides.
                out.append(BadPacket(raw, str(exc)))
        if pos:
            self._buf = bytearray(view[pos:])
        elif view is data:
            self._buf = bytearray(data)
        return out


def now_ms() -> int:
    """Current time in ms since the epoch."""
    return int(time.time() * 1000)


def build_packet(
    ptype: int,
    *,
    props: Mapping[str, object] | None = None,
    body: bytes = b"",
    flags: int = 0,
    consumer_id: int = 0,
    fields: Mapping[int, object] | None = None,
    priority: int = 5,
    expiration: int = 0,
    timestamp: int | None = None,
    ip: bytes = IP_ZERO,
    port: int = 0,
    sequence: int = 0,
    java_padding: bool = True,
    raw_props: bytes | None = None,
    raw_fields: bytes | None = None,
) -> bytes:
    """Encode a version-301 packet.

    ``raw_props`` passes an already encoded property section (used when forwarding),
    ``raw_fields`` an already encoded variable header (``encode_fields``' bytes).
    """
    vh = raw_fields if raw_fields is not None else encode_fields(fields, java_padding=java_padding)
    pr = raw_props if raw_props is not None else encode_properties(props)
    prop_offset = HEADER_SIZE + len(vh)
    header = pack_header(
        ptype,
        prop_offset + len(pr) + len(body),
        expiration,
        now_ms() if timestamp is None else timestamp,
        ip,
        port,
        sequence,
        prop_offset,
        len(pr),
        priority,
        flags,
        consumer_id,
    )
    return b"".join((header, vh, pr, body))


def pack_header(
    ptype: int,
    size: int,
    expiration: int,
    timestamp: int,
    ip: bytes,
    port: int,
    sequence: int,
    prop_offset: int,
    prop_size: int,
    priority: int,
    flags: int,
    consumer_id: int,
) -> bytes:
    """A version-301 packet's fixed header, its fields positional (build_packet's, and a
    STOMP SEND's message's, where keyword arguments would cost more than the packing)."""
    return HEADER.pack(
        MAGIC,
        CURRENT_PACKET_VERSION,
        ptype,
        size,
        expiration,
        timestamp,
        ip,
        port,
        sequence,
        prop_offset,
        prop_size,
        priority,
        0,
        flags,
        consumer_id,
    )


# The DELIVERY_COUNT field (value 1) the broker puts in front of a message's variable
# header (with_delivery_count_slot; reports and STOMP SENDs are made with it).
DELIVERY_COUNT_FIELD = struct.pack(">hhi", VH_DELIVERY_COUNT, 4, 1)


def stored_head(head: bytes) -> tuple[tuple, int, int] | None:
    """A stored message's first bytes read without building a Packet (recovering many):
    (the header's fields as ``HEADER`` unpacks them, the DELIVERY_COUNT value's offset,
    the DELIVERY_TIME or 0); None when it is not a current-version packet with a
    DELIVERY_COUNT field (then ``head_packet`` reads it)."""
    if len(head) < HEADER_SIZE:
        return None
    h = HEADER.unpack_from(head, 0)
    if h[0] != MAGIC or h[1] != CURRENT_PACKET_VERSION:
        return None
    end = min(h[9], len(head))
    pos = HEADER_SIZE
    dc = -1
    delivery_time = 0
    unpack = _TAG_LEN.unpack_from
    while pos + 4 <= end:
        tag, length = unpack(head, pos)
        if tag == VH_NULL:
            break
        if tag in _LONG_FIELDS:
            if tag == VH_DELIVERY_TIME and pos + 12 <= end:
                delivery_time = _I64.unpack_from(head, pos + 4)[0]
            pos += 12
        elif tag == VH_DELIVERY_COUNT:
            dc = pos + 4
            pos += 8
        else:
            pos += 4 + length
    return (h, dc, delivery_time) if dc > 0 and dc + 4 <= end else None


def body_offset(raw: bytes | memoryview) -> int:
    """Where a packet's body starts (its header, variable header and properties end);
    ``len(raw)`` when its header does not say so sensibly."""
    if len(raw) < HEADER_SIZE:
        return len(raw)
    offset, size = _PROP_RANGE.unpack_from(raw, OFF_PROP_OFFSET)
    end = offset + size
    return end if 0 < offset <= end <= len(raw) else len(raw)


def head_packet(head: bytes) -> Packet:
    """A packet read from its first bytes (at least up to its propOffset; the body left
    elsewhere): header fields and ``fields`` only, no properties.  PacketError when they
    do not make one."""
    if len(head) < HEADER_SIZE:
        raise PacketError(f"packet head of {len(head)} bytes is shorter than its header")
    buf = bytearray(head)
    _I32.pack_into(buf, OFF_SIZE, len(buf))
    _I32.pack_into(buf, OFF_PROP_OFFSET + 4, 0)  # propSize
    return Packet(bytes(buf))


def with_delivery_count_slot(pkt: Packet) -> tuple[bytes, int]:
    """Return the packet's bytes with a DELIVERY_COUNT field, and that field's value offset.

    Done once when a message arrives, so each delivery only patches four bytes.  Readers
    take variable-header fields in any order, so the 8-byte field is spliced in front of
    the existing ones (keeping their 4-byte alignment) instead of re-encoding the list.
    """
    raw = pkt.raw
    if VH_DELIVERY_COUNT in pkt.fields:
        pos = HEADER_SIZE
        while True:
            tag, length = struct.unpack_from(">hH", raw, pos)
            if tag == VH_DELIVERY_COUNT:
                return raw, pos + 4
            pos += 12 if tag in _LONG_FIELDS else 4 + length
    if pkt.prop_offset == HEADER_SIZE:
        insert = DELIVERY_COUNT_FIELD + b"\x00\x00\x00\x00"  # plus terminator and padding
    else:
        insert = DELIVERY_COUNT_FIELD
    head = bytearray(raw[:HEADER_SIZE])
    _I32.pack_into(head, OFF_SIZE, pkt.size + len(insert))
    _I32.pack_into(head, OFF_PROP_OFFSET, pkt.prop_offset + len(insert))
    # One copy of the message: the rest is joined straight from the received bytes.
    return b"".join((head, insert, memoryview(raw)[HEADER_SIZE : pkt.size])), HEADER_SIZE + 4
