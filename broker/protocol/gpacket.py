"""Broker-to-broker packets: the GPacket and the legacy link packet.

The layouts are described in docs/developers/protocol.md, "Cluster links".

Sans-IO: :func:`encode` / :func:`decode` turn whole packets into bytes and back, and
:class:`GPacketReader` cuts a byte stream into packets as they arrive.  Every decoding
failure raises :class:`GPacketError` (a :class:`ProtocolError`), so the link can drop the
peer with one logged reason.

GPacket header (36 bytes, big-endian): int16 version (350), int16 type, int32 size (header
included), int32 magic 0x7FFFE3C2, int32 property-section length, int64 timestamp,
int64 sequence, int32 bit flags; then the v301 property table, then the payload.

Link packet header (16 bytes): int16 version (100), int16 type, int32 size (header
included, 16..65536), int32 destId, int32 bitFlags; then the body.  Only LINK_INIT and
BROKER_INFO travel this way; both framings start with an int16 version, which tells
them apart.
"""

from __future__ import annotations

import functools
import itertools
import struct
import time
from dataclasses import dataclass, field

from .errors import ProtocolError
from .properties import (
    PropertyError,
    decode_properties,
    encode_properties,
    read_utf,
    remember,
    write_utf,
)

VERSION = 350
MAGIC = 0x7FFFE3C2
HEADER = struct.Struct(">hhiiiqqi")
HEADER_SIZE = HEADER.size  # 36
# A cluster message carries a whole client packet; OpenMQ's own limit is the client's
# packet limit, so anything larger than this is a corrupt size word, not a message.
MAX_SIZE = 128 * 1024 * 1024

A_BIT = 0x00000001  # receiver must reply

LINK_VERSION = 100
LINK_HEADER = struct.Struct(">hhiii")
LINK_HEADER_SIZE = LINK_HEADER.size  # 16
LINK_MAX_SIZE = 65536
LINK_INIT = 4
LINK_BROKER_INFO = 3
LINK_STOP_FLOW = 5
LINK_RESUME_FLOW = 6
LINK_PING = 7

CLUSTER_VERSION = 500
# What a ConsumerUID's BrokerAddress starts with, and an interest record's version.
BROKER_ADDRESS_VERSION = 100
INTEREST_RECORD_VERSION = 99353142765567461

# Packet types (OpenMQ's code numbers).
G_MESSAGE_DATA = 1
G_MESSAGE_DATA_REPLY = 2
G_MESSAGE_ACK = 3
G_MESSAGE_ACK_REPLY = 4
G_NEW_INTEREST = 5
G_NEW_INTEREST_REPLY = 6
G_REM_DURABLE_INTEREST = 7
G_REM_DURABLE_INTEREST_REPLY = 8
G_INTEREST_UPDATE = 9
G_INTEREST_UPDATE_REPLY = 10
G_LOCK = 11
G_LOCK_REPLY = 12
G_UPDATE_DESTINATION = 13
G_UPDATE_DESTINATION_REPLY = 14
G_REM_DESTINATION = 15
G_REM_DESTINATION_REPLY = 16
G_CONFIG_CHANGE_EVENT = 17
G_CONFIG_CHANGE_EVENT_REPLY = 18
G_GET_CONFIG_CHANGES_REQUEST = 19
G_GET_CONFIG_CHANGES_REPLY = 20
G_CLIENT_CLOSED = 21
G_CLIENT_CLOSED_REPLY = 22
G_STOP_MESSAGE_FLOW = 23
G_STOP_MESSAGE_FLOW_REPLY = 24
G_RESUME_MESSAGE_FLOW = 25
G_RESUME_MESSAGE_FLOW_REPLY = 26
G_RELOAD_CLUSTER = 27
G_RELOAD_CLUSTER_REPLY = 28
G_GET_INTEREST_UPDATE = 29
G_GET_INTEREST_UPDATE_REPLY = 30
G_RESET_PERSISTENCE = 31
G_RESET_PERSISTENCE_REPLY = 32
G_PING = 33
G_PING_REPLY = 34
G_DURABLE_ATTACH = 35
G_DURABLE_ATTACH_REPLY = 36
G_GOODBYE = 37
G_GOODBYE_REPLY = 38
G_TAKEOVER_PENDING = 39
G_TAKEOVER_PENDING_REPLY = 40
G_TAKEOVER_COMPLETE = 41
G_TAKEOVER_ABORT = 43
G_BROKER_INFO_REPLY = 46
G_TRANSACTION_INQUIRY = 47
G_TRANSACTION_INFO = 48
G_FIRST_INFO = 49
G_NEW_MASTER_BROKER_PREPARE = 51
G_NEW_MASTER_BROKER_PREPARE_REPLY = 52
G_NEW_MASTER_BROKER = 53
G_NEW_MASTER_BROKER_REPLY = 54
G_REPLICATION_GROUP_INFO = 55
G_TAKEOVER_ME_PREPARE = 57
G_TAKEOVER_ME_PREPARE_REPLY = 58
G_TAKEOVER_ME = 59
G_TAKEOVER_ME_REPLY = 60
G_TAKEOVER_ME_REPLY_ACK = 61
G_TRANSFER_FILE_REQUEST = 63
G_TRANSFER_FILE_REQUEST_REPLY = 64
G_TRANSFER_FILE_LIST = 65
G_TRANSFER_FILE_START = 67
G_TRANSFER_FILE_END = 69
G_TRANSFER_FILE_END_ACK = 70
G_TRANSFER_FILE_END_ACK_ACK = 71
G_INFO_REQUEST = 73
G_INFO = 74
G_NOTIFY_PARTITION_ARRIVAL = 75
G_NOTIFY_PARTITION_ARRIVAL_REPLY = 76

# Ack types of G_MESSAGE_ACK as they travel (OpenMQ's ClusterGlobals.MB_MSG_*; its
# brokers map their own local numbering onto these before sending).
ACK_SENT = 0
ACK_IGNORED = 1
ACK_DELIVERED = 2
ACK_ACKNOWLEDGED = 3  # consumed
ACK_UNDELIVERABLE = 4
ACK_DEAD = 5
ACK_TXN_ACK_RN = 6
ACK_TXN_PREPARE_RN = 7
ACK_TXN_ROLLEDBACK_RN = 8
ACK_TXN_PREPARE = 9
ACK_TXN_ROLLEDBACK = 10

# Interest update subtypes.
INTEREST_REM = 2
INTEREST_DURABLE_DETACH = 3
INTEREST_NEW_PRIMARY = 4

# Lock reply statuses (docs/developers/protocol.md, "Cluster links").
LOCK_SUCCESS = 0
LOCK_FAILURE = 1
LOCK_BACKOFF = 2

TYPE_NAMES = {v: k for k, v in globals().items() if k.startswith("G_") and isinstance(v, int)}
# Every type OpenMQ 6.9's brokers define: anything else on a link is not its protocol.
KNOWN_TYPES = frozenset(TYPE_NAMES)

# G_CONFIG_CHANGE_EVENT_REPLY statuses (OpenMQ's G_EVENT_LOG_*): not HTTP-style codes.
EVENT_LOG_SUCCESS = 1
EVENT_LOG_FAILURE = 2


class GPacketError(ProtocolError):
    """Bytes on a cluster link that are not a GPacket or link packet OpenMQ allows."""


_seq = itertools.count(1)


@dataclass
class GPacket:
    """One broker-to-broker packet.  A decoded packet's ``props`` may be shared with
    other packets of the same bytes: read them, never modify them."""

    type: int
    props: dict[str, object] = field(default_factory=dict)
    payload: bytes = b""
    flags: int = 0
    timestamp: int = 0
    sequence: int = 0

    @property
    def wants_reply(self) -> bool:
        return bool(self.flags & A_BIT)

    @property
    def name(self) -> str:
        return TYPE_NAMES.get(self.type, f"G_{self.type}")


def encode(packet: GPacket, *, stamp: bool = True) -> bytes:
    """The packet's bytes; ``stamp`` fills timestamp and sequence as OpenMQ does at write."""
    props = encode_properties(packet.props) if packet.props else b""
    if stamp:
        return encode_parts(packet.type, props, packet.payload, packet.flags)
    size = HEADER_SIZE + len(props) + len(packet.payload)
    head = HEADER.pack(
        VERSION,
        packet.type,
        size,
        MAGIC,
        len(props),
        packet.timestamp,
        packet.sequence,
        packet.flags,
    )
    return head + props + packet.payload


def encode_parts(ptype: int, props: bytes, payload: bytes, flags: int = 0) -> bytes:
    """A stamped packet from an already encoded property table (``encode_properties``):
    for packets that share one table, encoded once."""
    size = HEADER_SIZE + len(props) + len(payload)
    head = HEADER.pack(
        VERSION, ptype, size, MAGIC, len(props), int(time.time() * 1000), next(_seq), flags
    )
    return head + props + payload


def peek_size(head: bytes | bytearray | memoryview) -> int:
    """The total size a GPacket header announces; checks version, magic and bounds."""
    if len(head) < HEADER_SIZE:
        raise GPacketError(f"truncated GPacket header ({len(head)} of {HEADER_SIZE} bytes)")
    version, _type, size, magic, plen, _ts, _seq, _flags = HEADER.unpack_from(head, 0)
    if version != VERSION:
        raise GPacketError(f"GPacket version {version}, only {VERSION} is accepted")
    if magic != MAGIC:
        raise GPacketError(f"bad GPacket magic {magic:#x}: stream corrupt")
    if size < HEADER_SIZE or size > MAX_SIZE:
        raise GPacketError(f"GPacket size {size} out of bounds")
    if plen < 0 or HEADER_SIZE + plen > size:
        raise GPacketError(f"GPacket property length {plen} does not fit size {size}")
    return size


def decode(data: bytes | memoryview) -> GPacket:
    """Decode exactly one whole GPacket."""
    size = peek_size(data)
    if len(data) != size:
        raise GPacketError(f"GPacket announces {size} bytes but {len(data)} were given")
    _v, ptype, _size, _m, plen, ts, seq, flags = HEADER.unpack_from(data, 0)
    if not plen:
        props: dict[str, object] = {}
    elif ptype in _RECURRING_PROPS:
        raw = bytes(data[HEADER_SIZE : HEADER_SIZE + plen])
        cached = _PROPS.get(raw)
        if cached is None:
            cached = _decode_props(raw, 0, plen)
            remember(_PROPS, raw, cached)
        props = cached
    else:
        props = _decode_props(data, HEADER_SIZE, plen)
    payload = bytes(data[HEADER_SIZE + plen : size])
    return GPacket(ptype, props, payload, flags, ts, seq)


def _decode_props(data: bytes | memoryview, start: int, plen: int) -> dict[str, object]:
    try:
        return decode_properties(data, start, plen)
    except PropertyError as exc:
        raise GPacketError(f"GPacket properties: {exc}") from None


# A message's properties repeat from one G_MESSAGE_DATA to the next (the sender's address,
# D, C, the consumer's delivery count), and an ack's too: their tables are decoded once
# and shared, by their bytes (a decoded packet's props are never modified).
_PROPS: dict[bytes, dict[str, object]] = {}
_RECURRING_PROPS = frozenset({G_MESSAGE_DATA, G_MESSAGE_ACK})


def split_concatenated(data: bytes) -> list[GPacket]:
    """GPackets written back to back (a change-record reply's payload)."""
    out = []
    pos = 0
    while pos < len(data):
        size = peek_size(data[pos : pos + HEADER_SIZE])
        if pos + size > len(data):
            raise GPacketError("truncated GPacket in a concatenated list")
        out.append(decode(data[pos : pos + size]))
        pos += size
    return out


@dataclass
class LinkPacket:
    """A legacy link packet (LINK_INIT, BROKER_INFO, ...)."""

    type: int
    body: bytes = b""
    dest_id: int = 0
    flags: int = 0


def encode_link(packet: LinkPacket) -> bytes:
    size = LINK_HEADER_SIZE + len(packet.body)
    if size > LINK_MAX_SIZE:
        raise GPacketError(f"link packet of {size} bytes exceeds {LINK_MAX_SIZE}")
    return (
        LINK_HEADER.pack(LINK_VERSION, packet.type, size, packet.dest_id, packet.flags)
        + packet.body
    )


def peek_link_size(head: bytes | bytearray | memoryview) -> int:
    if len(head) < LINK_HEADER_SIZE:
        raise GPacketError("truncated link packet header")
    version, _t, size, _d, _f = LINK_HEADER.unpack_from(head, 0)
    if version != LINK_VERSION:
        raise GPacketError(f"link packet version {version}, expected {LINK_VERSION}")
    if not LINK_HEADER_SIZE <= size <= LINK_MAX_SIZE:
        raise GPacketError(f"link packet size {size} outside 16..65536")
    return size


def decode_link(data: bytes | memoryview) -> LinkPacket:
    size = peek_link_size(data)
    if len(data) != size:
        raise GPacketError(f"link packet announces {size} bytes but {len(data)} were given")
    _v, ptype, _s, dest, flags = LINK_HEADER.unpack_from(data, 0)
    return LinkPacket(ptype, bytes(data[LINK_HEADER_SIZE:size]), dest, flags)


class GPacketReader:
    """Cuts a stream into packets: link packets or GPackets, told apart by the version word."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[GPacket | LinkPacket]:
        self._buf += data
        out: list[GPacket | LinkPacket] = []
        while len(self._buf) >= 2:
            (version,) = struct.unpack_from(">h", self._buf, 0)
            if version == LINK_VERSION:
                if len(self._buf) < LINK_HEADER_SIZE:
                    break
                size = peek_link_size(self._buf)
                if len(self._buf) < size:
                    break
                out.append(decode_link(bytes(self._buf[:size])))
            elif version == VERSION:
                if len(self._buf) < HEADER_SIZE:
                    break
                size = peek_size(self._buf)
                if len(self._buf) < size:
                    break
                out.append(decode(bytes(self._buf[:size])))
            else:
                raise GPacketError(f"unknown packet version {version} on a cluster link")
            del self._buf[:size]
        return out

    @property
    def pending(self) -> int:
        """Bytes of a packet not yet complete (a peer that stops mid-packet)."""
        return len(self._buf)


# ---------------------------------------------------------------------------
# Body fields


class BodyReader:
    """DataInput over a body; every short read is a :class:`GPacketError`."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, st: struct.Struct) -> tuple:
        if self.pos + st.size > len(self.data):
            raise GPacketError("truncated packet body")
        v = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v

    def int32(self) -> int:
        return self._take(_I32)[0]

    def int64(self) -> int:
        return self._take(_I64)[0]

    def boolean(self) -> bool:
        return self._take(_BOOL)[0] != 0

    def utf(self) -> str:
        try:
            text, self.pos = read_utf(self.data, self.pos)
        except (PropertyError, struct.error, IndexError) as exc:
            raise GPacketError(f"bad string in packet body: {exc}") from None
        return text

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise GPacketError("truncated packet body")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def rest(self) -> bytes:
        out = self.data[self.pos :]
        self.pos = len(self.data)
        return out

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BOOL = struct.Struct(">B")
_U16 = struct.Struct(">H")
_ADDRESSES: dict[bytes, BrokerAddress] = {}


class BodyWriter:
    """DataOutput into a body."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int32(self, v: int) -> BodyWriter:
        self.parts.append(_I32.pack(v))
        return self

    def int64(self, v: int) -> BodyWriter:
        self.parts.append(_I64.pack(v))
        return self

    def boolean(self, v: bool) -> BodyWriter:
        self.parts.append(b"\x01" if v else b"\x00")
        return self

    def utf(self, v: str) -> BodyWriter:
        self.parts.append(write_utf(v))
        return self

    def raw(self, v: bytes) -> BodyWriter:
        self.parts.append(v)
        return self

    def bytes(self) -> bytes:
        return b"".join(self.parts)


@dataclass(frozen=True)
class BrokerAddress:
    """A broker as ConsumerUIDs name it: host, instance name, port-mapper port."""

    host: str
    instance: str
    port: int

    def write(self, w: BodyWriter) -> None:
        w.int32(BROKER_ADDRESS_VERSION).utf(self.host).utf(self.instance).int32(self.port)

    @classmethod
    def read(cls, r: BodyReader) -> BrokerAddress:
        # A link carries the same few addresses in every ConsumerUID: decoded once each.
        data, pos = r.data, r.pos
        try:
            (n1,) = _U16.unpack_from(data, pos + 4)
            (n2,) = _U16.unpack_from(data, pos + 6 + n1)
        except struct.error:
            raise GPacketError("truncated BrokerAddress") from None
        end = pos + 12 + n1 + n2
        raw = data[pos:end]
        cached = _ADDRESSES.get(raw)
        if cached is not None and len(raw) == end - pos:
            r.pos = end
            return cached
        version = r.int32()
        if version != BROKER_ADDRESS_VERSION:
            raise GPacketError(
                f"BrokerAddress version {version}, expected {BROKER_ADDRESS_VERSION}"
            )
        addr = cls(r.utf(), r.utf(), r.int32())
        if len(_ADDRESSES) < 1024:
            _ADDRESSES[bytes(raw)] = addr
        return addr

    def __str__(self) -> str:
        return f"{self.instance}@{self.host}:{self.port}"


@dataclass(frozen=True)
class ConsumerUID:
    """A consumer cluster-wide: its id, its connection's id and its broker."""

    consumer_id: int
    connection_id: int
    broker: BrokerAddress

    def write(self, w: BodyWriter) -> None:
        w.raw(self.encoded)

    @functools.cached_property
    def encoded(self) -> bytes:
        """The ConsumerUID's bytes (made once: a consumer's UID goes in every packet)."""
        w = BodyWriter().int64(self.consumer_id).int64(self.connection_id)
        self.broker.write(w)
        return w.bytes()

    @classmethod
    def read(cls, r: BodyReader) -> ConsumerUID:
        return cls(r.int64(), r.int64(), BrokerAddress.read(r))


@dataclass
class LinkInit:
    """The LINK_INIT body: who the peer is and what it must agree on."""

    version: int
    host: str
    instance: str
    port: int
    master: BrokerAddress | None = None
    match: dict[str, str] = field(default_factory=dict)
    ha: bool = False
    broker_id: str | None = None
    session_uid: int = 0
    store_session: int | None = None

    def encode(self) -> bytes:
        w = BodyWriter().int32(self.version).utf(self.host).utf(self.instance).int32(self.port)
        w.boolean(self.master is not None)
        if self.master is not None:
            w.utf(self.master.host).utf(self.master.instance).int32(self.master.port)
        w.int32(len(self.match))
        for k, v in self.match.items():
            w.utf(k).utf(v)
        w.boolean(self.ha)
        w.boolean(self.broker_id is not None)
        if self.broker_id is not None:
            w.utf(self.broker_id)
        w.int64(self.session_uid)
        if self.ha:
            w.int64(self.store_session or 0)
        else:
            w.boolean(self.store_session is not None)
            if self.store_session is not None:
                w.int64(self.store_session)
        return w.bytes()

    @classmethod
    def decode(cls, body: bytes) -> LinkInit:
        r = BodyReader(body)
        version = r.int32()
        host, instance, port = r.utf(), r.utf(), r.int32()
        master = None
        if r.boolean():
            mh, mi, mp = r.utf(), r.utf(), r.int32()
            master = BrokerAddress(mh, mi, mp)
        count = r.int32()
        if count < 0 or count > 1000:
            raise GPacketError(f"LINK_INIT match-property count {count}")
        match = {}
        for _ in range(count):
            k = r.utf()
            match[k] = r.utf()
        link = cls(version, host, instance, port, master, match)
        if version >= 400 and not r.at_end:
            link.ha = r.boolean()
            if r.boolean():
                link.broker_id = r.utf()
            link.session_uid = r.int64()
            if link.ha:
                link.store_session = r.int64()
            elif r.boolean():
                link.store_session = r.int64()
        return link

    @property
    def address(self) -> BrokerAddress:
        return BrokerAddress(self.host, self.instance, self.port)


def read_interest(r: BodyReader) -> dict:
    """One consumer's interest record (G_NEW_INTEREST, G_INTEREST_UPDATE, the change
    record's durables), as a dict; GPacketError for a record of another version."""
    version = r.int64()
    if version != INTEREST_RECORD_VERSION:
        raise GPacketError(f"interest record version {version}")
    rec: dict = {"dest": r.utf()}
    rec["uid"] = ConsumerUID.read(r) if r.boolean() else None
    rec["client_id"] = r.utf() if r.boolean() else None
    rec["durable"] = r.utf() if r.boolean() else None
    rec["selector"] = r.utf() if r.boolean() else None
    rec["queue"] = r.boolean()
    rec["no_local"] = r.boolean()
    rec["ready"] = r.boolean()
    rec["jms_shared"] = False
    rec["shared_name"] = None
    # A subscription's record (durable or shared) has a maximum of active consumers:
    # OpenMQ takes one other than 1 as "shared".
    rec["max_active"] = None
    # A queue consumer's position (-1: none given, core/positions.py).
    rec["position"] = -1
    # Older brokers end a record after "ready" (read here when it is the last one).
    if not r.at_end and r.boolean():
        rec["max_active"] = r.int32()
    if not r.at_end:
        rec["position"] = r.int32()
        rec["jms_shared"] = r.boolean()
        if r.boolean():
            rec["shared_name"] = r.utf()
    return rec


def read_durable_names(payload: bytes, count: object) -> list[tuple[str, str]]:
    """G_REM_DURABLE_INTEREST's body: ``count`` x (durable name, client ID or "")."""
    if not isinstance(count, int) or not 0 < count <= 10000:
        raise GPacketError(f"G_REM_DURABLE_INTEREST count {count!r}")
    r = BodyReader(payload)
    return [(r.utf(), r.utf()) for _ in range(count)]


__all__ = [
    "A_BIT",
    "BodyReader",
    "BodyWriter",
    "BrokerAddress",
    "ConsumerUID",
    "GPacket",
    "GPacketError",
    "GPacketReader",
    "LinkInit",
    "LinkPacket",
    "decode",
    "decode_link",
    "encode",
    "encode_link",
    "read_durable_names",
    "read_interest",
    "split_concatenated",
]
