"""STOMP frames <-> JMQ message packets, the way OpenMQ's STOMP bridge maps them.

Checked against the stock bridge (OpenMQ 6.9, ``imq.bridge.activelist=stomp``):

- ``/queue/NAME`` and ``/topic/NAME`` are the queue and topic NAME; ``/temp-queue/X``
  and ``/temp-topic/X`` a temporary destination of the connection (or, when X is a
  ``temporary_destination://`` name, that one);
- a SEND with ``content-length`` is a BytesMessage, without it a TextMessage (but a
  BytesMessage when its body is not UTF-8: ours, the bytes kept);
- ``persistent`` (default true, as a JMS producer's), ``priority`` (default 4),
  ``correlation-id``, ``reply-to``, ``type`` and ``expires`` are the JMS headers; every
  other header a String property;
- a MESSAGE carries subscription, destination, message-id, ack, reply-to,
  correlation-id, expires, redelivered, priority, timestamp, type, JMSXDeliveryCount,
  the properties, and content-length (:class:`FrameParts`).

Where ours differs (docs/reference/stomp.md): ``expires`` is an absolute time in ms
since the epoch both ways (the stock bridge adds it to the time of the send as a time
to live, yet reports the absolute JMSExpiration on MESSAGE); headers that are not Java
identifiers (``content-type``) are kept as properties, not refused; Map, Stream and
Object messages reach a STOMP subscriber as their body bytes with a ``jms-message-type``
header instead of closing the connection; a persistent message's MESSAGE says
``persistent:true`` (a non-persistent one's has no ``persistent``, as ActiveMQ's); a
first delivery's MESSAGE has no ``redelivered:false`` and ``JMSXDeliveryCount:1``, and
none has ``expires:0`` or ``priority:4`` (what a missing header means).
"""

from __future__ import annotations

import functools
import itertools
import struct
import zlib
from collections.abc import Callable
from time import time as _time

from broker.core.message import Message
from broker.core.reports import no_report_info
from broker.protocol.errors import ProtocolError
from broker.protocol.names import JMQ_PREFIX
from broker.protocol.packet import (
    DELIVERY_COUNT_FIELD,
    HEADER_SIZE,
    OFF_PROP_OFFSET,
    VH_CORRELATIONID,
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_REPLYTO,
    VH_REPLYTO_CLASS,
    VH_TRANSACTIONID,
    VH_TYPE,
    Packet,
    encode_fields,
    pack_header,
)
from broker.protocol.properties import encode_properties, remember
from broker.protocol.stomp import VERSIONS, escape
from broker.protocol.sysmsgid import IP_ZERO, sysmsgid_string
from broker.protocol.types import (
    CURRENT_PACKET_VERSION,
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_P,
    FLAG_Q,
    FLAG_Z,
    QUEUE_CLASS,
    TEMP_PREFIX,
    TEMP_QUEUE_CLASS,
    TEMP_QUEUE_PREFIX,
    TEMP_TOPIC_CLASS,
    TEMP_TOPIC_PREFIX,
    TOPIC_CLASS,
    PacketType,
)

# Headers with a meaning of their own on SEND: never properties.
SEND_HEADERS = frozenset(
    {
        "destination",
        "transaction",
        "receipt",
        "content-length",
        "persistent",
        "priority",
        "expires",
        "correlation-id",
        "reply-to",
        "type",
        "message-id",
        "timestamp",
        "redelivered",
        "subscription",
        "ack",
    }
)
DEFAULT_PRIORITY = 4
# Message ids: unique within the process (with the connection's port and the time).
_SEQUENCE = itertools.count(1)
_TEXT_MESSAGE = int(PacketType.TEXT_MESSAGE)
_BYTES_MESSAGE = int(PacketType.BYTES_MESSAGE)
# Where the value of the DELIVERY_COUNT field a SEND's packet starts with is.
_DC_OFFSET = HEADER_SIZE + 4
# A current packet's version (its type skipped), size, property offset and property
# size (packet.HEADER: OFF_PROP_OFFSET), read in one call from byte 4.
_OFFSETS = struct.Struct(f">h2xi{OFF_PROP_OFFSET - 12}xii")
_BODY_TYPES = {
    PacketType.MAP_MESSAGE: "map",
    PacketType.STREAM_MESSAGE: "stream",
    PacketType.OBJECT_MESSAGE: "object",
}


class MappingError(ProtocolError):
    """A frame that names no destination we can map, or a header of a bad value."""


class StompDest:
    """A destination as STOMP names it and as the broker does."""

    __slots__ = ("stomp", "name", "dtype", "_fields")

    def __init__(self, stomp: str, name: str, dtype: int) -> None:
        self.stomp = stomp
        self.name = name
        self.dtype = dtype
        self._fields: bytes | None = None

    def fields(self) -> bytes:
        """A message's variable header naming only this destination (most SENDs')."""
        vh = self._fields
        if vh is None:
            vh = self._fields = encode_fields(
                {VH_DESTINATION: self.name, VH_DESTINATION_CLASS: self.java_class}
            )
        return vh

    @property
    def java_class(self) -> str:
        if self.dtype & DEST_TEMP:
            return TEMP_TOPIC_CLASS if self.dtype & DEST_TOPIC else TEMP_QUEUE_CLASS
        return TOPIC_CLASS if self.dtype & DEST_TOPIC else QUEUE_CLASS


def parse_destination(text: str | None, conn_id: int) -> StompDest:
    """``/queue/x``, ``/topic/x``, ``/temp-queue/x``, ``/temp-topic/x``."""
    if not text:
        raise MappingError("the frame has no destination header")
    for prefix, dtype in (("/queue/", DEST_QUEUE), ("/topic/", DEST_TOPIC)):
        if text.startswith(prefix) and len(text) > len(prefix):
            return StompDest(text, text[len(prefix) :], dtype)
    for prefix, dtype, temp_prefix in (
        ("/temp-queue/", DEST_QUEUE | DEST_TEMP, TEMP_QUEUE_PREFIX),
        ("/temp-topic/", DEST_TOPIC | DEST_TEMP, TEMP_TOPIC_PREFIX),
    ):
        if text.startswith(prefix) and len(text) > len(prefix):
            rest = text[len(prefix) :]
            if rest.startswith(TEMP_PREFIX):
                return StompDest(text, rest, dtype)
            # The connection's own: named after it, so two connections' /temp-queue/a differ.
            return StompDest(text, f"{temp_prefix}stomp/{conn_id}/{rest}", dtype)
    raise MappingError(
        f"destination {text!r} is not /queue/NAME, /topic/NAME, /temp-queue/NAME or "
        "/temp-topic/NAME"
    )


def stomp_name(name: str, java_class: str | None, is_queue: bool, conn_id: int) -> str:
    """The STOMP name of a broker destination (a reply-to, a delivery's destination)."""
    if name.startswith(TEMP_PREFIX):
        topic = name.startswith(TEMP_TOPIC_PREFIX)
        kind = "/temp-topic/" if topic else "/temp-queue/"
        own = f"{TEMP_TOPIC_PREFIX if topic else TEMP_QUEUE_PREFIX}stomp/{conn_id}/"
        return kind + (name[len(own) :] if name.startswith(own) else name)
    if java_class is not None:
        is_queue = "Queue" in java_class
    return ("/queue/" if is_queue else "/topic/") + name


def _int_header(value: str, name: str, lo: int, hi: int) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise MappingError(f"header {name}:{value!r} is not a number") from None
    if not lo <= n <= hi:
        raise MappingError(f"header {name}:{n} is out of range {lo}..{hi}")
    return n


class SendShape:
    """What a SEND's headers make of its message, but for what each SEND has of its own
    (body, transaction id, time, sequence): a producer sends the same headers again and
    again, so the engine keeps this per connection and header list (on_send) and the
    loop over the headers, the property and variable header encoding run once."""

    __slots__ = (
        "dest",
        "reply_to",
        "transaction",
        "ptype",
        "text",
        "flags",
        "priority",
        "expiration",
        "fields",
        "vh",
        "props",
        "report_info",
    )

    def __init__(
        self, headers: list[tuple[str, str]], dest: StompDest, reply_to: StompDest | None
    ) -> None:
        self.dest = dest
        self.reply_to = reply_to
        self.transaction: str | None = None
        fields: dict[int, object] = {
            VH_DESTINATION: dest.name,
            VH_DESTINATION_CLASS: dest.java_class,
        }
        props: dict[str, object] = {}
        persistent = True
        priority = DEFAULT_PRIORITY
        expiration = 0
        text = True
        seen: set[str] = set()
        for k, v in headers:
            if k in seen:
                continue  # the first occurrence counts
            seen.add(k)
            if k not in SEND_HEADERS:
                props[k] = v
            elif k == "content-length":
                text = False
            elif k == "persistent":
                persistent = v.strip().lower() != "false"
            elif k == "priority":
                priority = _int_header(v, k, 0, 9)
            elif k == "expires":
                expiration = _int_header(v, k, 0, 2**63 - 1)
            elif k == "correlation-id":
                fields[VH_CORRELATIONID] = v
            elif k == "type":
                fields[VH_TYPE] = v
            elif k == "transaction":
                self.transaction = v
        if reply_to is not None:
            fields[VH_REPLYTO] = reply_to.name
            fields[VH_REPLYTO_CLASS] = reply_to.java_class
        self.ptype = _TEXT_MESSAGE if text else _BYTES_MESSAGE
        self.text = text
        self.flags = (FLAG_P if persistent else 0) | (0 if dest.dtype & DEST_TOPIC else FLAG_Q)
        self.priority = priority
        self.expiration = expiration
        self.fields = fields
        # The 8-byte DELIVERY_COUNT field in front of the variable header, as the JMQ
        # engine splices it into an arriving message (packet.with_delivery_count_slot).
        self.vh = DELIVERY_COUNT_FIELD + (
            dest.fields() if len(fields) == 2 else encode_fields(fields)
        )
        self.props = pr = encode_properties(props)
        # Report options are properties (JMS_IBM_*): without them in its property bytes
        # the message asks for none, said now so no report check searches its body.
        self.report_info = no_report_info(pr)

    def message(
        self,
        body: bytes,
        txn_id: int,
        conn_id: int,
        port: int,
        ip: bytes,
        want_reply: int,
        flags: int,
    ) -> Message:
        """The message of a SEND with these headers (send_message says the rest)."""
        ptype = self.ptype
        if self.text:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                # STOMP's body is bytes whether or not content-length is given: one
                # that is not text is a BytesMessage, its bytes kept (the stock bridge
                # makes U+FFFD of them, a loss; ActiveMQ a TextMessage no JMS client reads).
                ptype = _BYTES_MESSAGE
        flags |= self.flags
        if txn_id:
            fields = self.fields.copy()
            fields[VH_TRANSACTIONID] = txn_id
            vh = DELIVERY_COUNT_FIELD + encode_fields(fields)
        else:
            vh = self.vh
        pr = self.props
        priority, expiration = self.priority, self.expiration
        timestamp = int(_time() * 1000)  # packet.now_ms, without the call
        prop_offset = HEADER_SIZE + len(vh)
        head = pack_header(
            ptype,
            prop_offset + len(pr) + len(body),
            expiration,
            timestamp,
            ip,
            port & 0xFFFF,
            next(_SEQUENCE) & 0x7FFFFFFF,
            prop_offset,
            len(pr),
            priority,
            flags,
            want_reply,
        )
        return Message.sent(
            b"".join((head, vh, pr, body)),
            _DC_OFFSET,
            ptype,
            flags,
            priority,
            expiration,
            timestamp,
            self.dest.name,
            conn_id,
            self.report_info,
        )


def send_message(
    headers: list[tuple[str, str]],
    body: bytes,
    dest: StompDest,
    reply_to: StompDest | None,
    txn_id: int,
    conn_id: int,
    port: int,
    *,
    ip: bytes = IP_ZERO,
    want_reply: int = 0,
    flags: int = 0,
) -> Message:
    """The message a SEND means, as the router holds it: a JMQ message packet
    (``want_reply``: its correlation id, with A; ``ip`` and ``port``: its message ID's
    origin, as a JMQ client writes its own) with the DELIVERY_COUNT slot the broker adds
    to every message (packet.with_delivery_count_slot) already in front of its variable
    header, so the bytes are those the JMQ engine would make of the same packet, and
    nothing is decoded back (``Message.sent``).  The engine keeps the :class:`SendShape`
    instead (on_send)."""
    shape = SendShape(headers, dest, reply_to)
    return shape.message(body, txn_id, conn_id, port, ip, want_reply, flags)


class FrameParts:
    """A message's MESSAGE frame, as bytes ready to join, but for what each subscription
    and delivery says itself (subscription, destination, ack, redelivered,
    JMSXDeliveryCount).  Headers: content-length (when there is a body, or the message
    is a BytesMessage), then in the
    stock bridge's order subscription, destination, message-id, ack, reply-to,
    correlation-id, expires (unless 0: never), redelivered, priority (unless the default,
    4), timestamp, type, persistent (``true``, on a persistent message's only),
    JMSXDeliveryCount, the properties (as Java's String.valueOf writes them, the broker's
    own JMQ* left out) and ``jms-message-type`` for a Map, Stream or Object message.

    content-length comes first (the stock bridge writes it last, ActiveMQ first): stomp.py
    looks for it with a pattern tried at every character of the head until it matches,
    ~11,700 instructions a frame when it is the last of seven lines (bench/README.md)."""

    __slots__ = (
        "msg",
        "version",
        "conn_id",
        "msg_id",
        "lead",
        "mid_line",
        "_ack_rest",
        "before",
        "middle",
        "props",
        "body",
    )

    def __init__(self, msg: Message, version: str, conn_id: int) -> None:
        self.msg = msg
        self.version = version
        raw = msg._raw  # resident: a delivery's message is (else .raw reads it back)
        if raw is None:
            raw = msg.raw
        # A current packet's offsets are read where they are, without a Packet (made only
        # for what needs decoding: an unknown variable header, properties).
        pkt: Packet | None = None
        pversion, size, prop_offset, prop_size = _OFFSETS.unpack_from(raw, 4)
        if pversion != CURRENT_PACKET_VERSION:
            pkt = Packet(raw)
            prop_offset, prop_size, size = pkt.prop_offset, pkt.prop_size, pkt.size
        self.msg_id = msg_id = "ID:" + sysmsgid_string(msg.key)  # msg.message_id
        self._ack_rest: bytes | None = None
        # What the variable header says (reply-to, correlation-id, type), by its bytes:
        # a producer's messages carry the same one (no correlation id), so it is read
        # and written once.
        vh = raw[HEADER_SIZE:prop_offset]
        known = _HEAD_LINES.get((vh, version))
        if known is None or (known[2] and known[2] != conn_id):
            pkt = pkt or Packet(raw)
            known = _head_lines(pkt.fields, _ESCAPERS[version], conn_id)
            if known[3]:
                remember(_HEAD_LINES, (vh, version), known)
        reply_corr, type_line, own_conn, _ = known
        # A reply-to among a connection's own temporary destinations is named for that
        # connection only; any other frame is the same for every connection.
        self.conn_id: int | None = own_conn or None
        exp, pri = msg.expiration, msg.priority
        self.before = reply_corr + b"expires:%d\n" % exp if exp else reply_corr
        self.middle = b"%stimestamp:%d\n%s%s" % (
            b"priority:%d\n" % pri if pri != DEFAULT_PRIORITY else b"",
            msg.timestamp,
            type_line,
            _PERSISTENT if msg.persistent else b"",
        )
        props, have_length = _NO_PROPS
        if prop_size:
            # A producer's messages mostly carry the same properties: their lines are
            # kept by the bytes (small tables only: the cache is counted in entries).
            pbytes = raw[prop_offset : prop_offset + prop_size]
            known_props = _PROP_LINES.get((pbytes, version))
            if known_props is None:
                pkt = pkt or Packet(raw)
                known_props = _prop_lines(pkt.properties, _ESCAPERS[version])
                if prop_size <= 1024:
                    remember(_PROP_LINES, (pbytes, version), known_props)
            props, have_length = known_props
        kind = _BODY_TYPES.get(msg.type)
        if kind is not None:
            props += b"jms-message-type:%s\n" % kind.encode()
        self.props = props + b"\n"  # and the empty line that ends the head
        body = raw[prop_offset + prop_size : size]
        if msg.base_flags & FLAG_Z and body:
            try:
                body = zlib.decompress(body)
            except zlib.error:
                pass
        self.body = body
        # (A property named content-length, which only a JMS client can set, is the one.)
        # An empty BytesMessage says content-length:0 too (as the stock bridge and
        # ActiveMQ do): a reader that sends it on keeps it a BytesMessage.
        self.lead = (
            b"MESSAGE\ncontent-length:%d\n" % len(body)
            if (body or msg.type == _BYTES_MESSAGE) and not have_length
            else b"MESSAGE\n"
        )
        # A message id is "ID:" and digits, dashes, dots and an IP's colons: escaped in 1.1
        # and 1.2 by its colons alone (escape(), without the call).
        self.mid_line = (
            b"message-id:%s\n"
            % (msg_id if version == "1.0" else msg_id.replace(":", "\\c")).encode()
        )

    @property
    def ack_rest(self) -> bytes:
        """What follows the JMQ consumer id in the ack header (client acks only)."""
        rest = self._ack_rest
        if rest is None:
            rest = self._ack_rest = f"{_ESCAPERS[self.version](':' + self.msg_id)}\n".encode()
        return rest

    def frame(self, head: bytes, ack: int, redelivered: bool, count: int) -> bytes:
        """The MESSAGE frame for a subscription (``head``: subscription_head) whose JMQ
        consumer is ``ack`` (0: an ``ack:auto`` one, so no ack header)."""
        if not ack and count == 1 and not redelivered:
            # A topic's subscribers (and most queue deliveries): the body copied once.
            return b"".join(
                (
                    self.lead,
                    head,
                    self.mid_line,
                    self.before,
                    self.middle,
                    self.props,
                    self.body,
                    b"\x00",
                )
            )
        again = redelivered or count != 1
        return b"".join(
            (
                self.lead,
                head,
                self.mid_line,
                b"ack:%d%s" % (ack, self.ack_rest) if ack else b"",
                self.before,
                (_REDELIVERED if redelivered else _NOT_REDELIVERED) if again else b"",
                self.middle,
                b"JMSXDeliveryCount:%d\n" % count if again else b"",
                self.props,
                self.body,
                b"\x00",
            )
        )


def _prop_lines(props: dict[str, object], esc: Callable[[str], str]) -> tuple[bytes, bool]:
    """A message's property header lines (but the broker's own) and whether one is
    content-length."""
    lines = []
    have_length = False
    for k, v in props.items():
        if k.startswith(JMQ_PREFIX) or k == "JMSXDeliveryCount":
            continue  # the broker's own
        have_length = have_length or k == "content-length"
        lines.append(f"{esc(k)}:{esc(_text(v))}\n")
    return "".join(lines).encode("utf-8"), have_length


def _head_lines(
    f: dict[int, object], esc: Callable[[str], str], conn_id: int
) -> tuple[bytes, bytes, int, bool]:
    """The reply-to and correlation-id lines, the type line, the connection the reply-to
    is named for (0: none) and whether these hold for every message with this variable
    header (no correlation id: that differs per message)."""
    lines = []
    own = 0
    rt = f.get(VH_REPLYTO)
    if isinstance(rt, str) and rt:
        if rt.startswith(TEMP_PREFIX):
            own = conn_id
        rc = f.get(VH_REPLYTO_CLASS)
        name = stomp_name(rt, rc if isinstance(rc, str) else None, True, conn_id)
        lines.append(f"reply-to:{esc(name)}\n")
    corr = f.get(VH_CORRELATIONID)
    if isinstance(corr, str):
        lines.append(f"correlation-id:{esc(corr)}\n")
    jtype = f.get(VH_TYPE)
    type_line = f"type:{esc(jtype)}\n".encode() if isinstance(jtype, str) else b""
    return "".join(lines).encode(), type_line, own, VH_CORRELATIONID not in f


# Variable header bytes and version -> _head_lines' answer (bounded: properties.remember).
_HEAD_LINES: dict[tuple[bytes, str], tuple[bytes, bytes, int, bool]] = {}
# Property table bytes and version -> _prop_lines' answer (bounded the same way).
_PROP_LINES: dict[tuple[bytes, str], tuple[bytes, bool]] = {}
_NO_PROPS = (b"", False)
# A persistent message's frame says so; a non-persistent one's has no line (ActiveMQ's and
# RabbitMQ's frames are the same; the stock bridge never writes one): a subscriber that
# reads ``persistent == "true"`` is right either way, and stomp.py pays for every line.
_PERSISTENT = b"persistent:true\n"
# A first delivery's frame has neither ``redelivered:false`` nor ``JMSXDeliveryCount:1``
# (ActiveMQ leaves out the first too): they are what a missing header means, most frames
# are first deliveries, and stomp.py spends ~19k instructions a header line (bench/README).
# For the same reason no ``expires:0`` (never) and no ``priority:4`` (the default), as
# RabbitMQ's frames: a subscriber reads a missing one as that.
_REDELIVERED = b"redelivered:true\n"
_NOT_REDELIVERED = b"redelivered:false\n"
_ESCAPERS: dict[str, Callable[[str], str]] = {
    v: functools.partial(escape, version=v) for v in VERSIONS
}
# The last message's parts: the subscribers of a topic get the same message one after
# another, so one entry saves all but the first the decoding and encoding.
_last: FrameParts | None = None


def frame_parts(msg: Message, version: str, conn_id: int) -> FrameParts:
    """``msg``'s parts for a connection of ``version`` (kept for the next subscriber)."""
    global _last
    p = _last
    if (
        p is None
        or p.msg is not msg
        or p.version != version
        or (p.conn_id is not None and p.conn_id != conn_id)
    ):
        p = _last = FrameParts(msg, version, conn_id)
    return p


def subscription_head(subscription: str, dest_stomp: str, version: str) -> bytes:
    """A MESSAGE frame's subscription and destination lines, the same for all of a
    subscription's (after the command and content-length: FrameParts)."""
    esc = _ESCAPERS[version]
    return f"subscription:{esc(subscription)}\ndestination:{esc(dest_stomp)}\n".encode()


def _text(v: object) -> str:
    """A property value as Java's String.valueOf writes it (the stock bridge's header)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return repr(float(v))
    return str(v)


__all__ = [
    "DEFAULT_PRIORITY",
    "FrameParts",
    "MappingError",
    "SendShape",
    "StompDest",
    "frame_parts",
    "parse_destination",
    "send_message",
    "stomp_name",
    "subscription_head",
]
