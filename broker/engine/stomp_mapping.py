"""STOMP frames <-> JMQ message packets, the way OpenMQ's STOMP bridge maps them.

Checked against the stock bridge (OpenMQ 6.9, ``imq.bridge.activelist=stomp``):

- ``/queue/NAME`` and ``/topic/NAME`` are the queue and topic NAME; ``/temp-queue/X``
  and ``/temp-topic/X`` a temporary destination of the connection (or, when X is a
  ``temporary_destination://`` name, that one);
- a SEND with ``content-length`` is a BytesMessage, without it a TextMessage;
- ``persistent`` (default true, as a JMS producer's), ``priority`` (default 4),
  ``correlation-id``, ``reply-to``, ``type`` and ``expires`` are the JMS headers; every
  other header a String property;
- a MESSAGE carries subscription, destination, message-id, ack, reply-to,
  correlation-id, expires, redelivered, priority, timestamp, type, JMSXDeliveryCount,
  the properties, and always content-length.

Where ours differs (docs/reference/stomp.md): ``expires`` is an absolute time in ms
since the epoch both ways (the stock bridge adds it to the time of the send as a time
to live, yet reports the absolute JMSExpiration on MESSAGE); headers that are not Java
identifiers (``content-type``) are kept as properties, not refused; Map, Stream and
Object messages reach a STOMP subscriber as their body bytes with a ``jms-message-type``
header instead of closing the connection.
"""

from __future__ import annotations

import itertools
import time
import zlib

from broker.protocol.errors import ProtocolError
from broker.protocol.names import JMQ_PREFIX
from broker.protocol.packet import (
    VH_CORRELATIONID,
    VH_DELIVERY_COUNT,
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_REPLYTO,
    VH_REPLYTO_CLASS,
    VH_TRANSACTIONID,
    VH_TYPE,
    Packet,
    build_packet,
)
from broker.protocol.sysmsgid import sysmsgid_string
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_P,
    FLAG_Q,
    FLAG_R,
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
_BODY_TYPES = {
    PacketType.MAP_MESSAGE: "map",
    PacketType.STREAM_MESSAGE: "stream",
    PacketType.OBJECT_MESSAGE: "object",
}


class MappingError(ProtocolError):
    """A frame that names no destination we can map, or a header of a bad value."""


class StompDest:
    """A destination as STOMP names it and as the broker does."""

    __slots__ = ("stomp", "name", "dtype")

    def __init__(self, stomp: str, name: str, dtype: int) -> None:
        self.stomp = stomp
        self.name = name
        self.dtype = dtype

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


def message_packet(
    headers: list[tuple[str, str]],
    body: bytes,
    dest: StompDest,
    reply_to: StompDest | None,
    txn_id: int,
    conn_id: int,
    port: int,
    *,
    want_reply: int = 0,
    flags: int = 0,
) -> bytes:
    """The JMQ message packet a SEND means (``want_reply``: its correlation id, with A)."""
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
    if reply_to is not None:
        fields[VH_REPLYTO] = reply_to.name
        fields[VH_REPLYTO_CLASS] = reply_to.java_class
    if txn_id:
        fields[VH_TRANSACTIONID] = txn_id
    if text:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise MappingError(
                "a body without content-length is a text message and must be UTF-8"
            ) from None
    if persistent:
        flags |= FLAG_P
    if not dest.dtype & DEST_TOPIC:
        flags |= FLAG_Q
    return build_packet(
        PacketType.TEXT_MESSAGE if text else PacketType.BYTES_MESSAGE,
        props=props or None,
        body=body,
        flags=flags,
        consumer_id=want_reply,
        fields=fields,
        priority=priority,
        expiration=expiration,
        port=port & 0xFFFF,
        sequence=next(_SEQUENCE) & 0x7FFFFFFF,
    )


def message_frame_headers(
    pkt: Packet, subscription: str, dest_stomp: str, ack: str | None, conn_id: int
) -> tuple[list[tuple[str, str]], bytes]:
    """A delivery's MESSAGE headers (in the stock bridge's order) and body."""
    f = pkt.fields
    msg_id = "ID:" + sysmsgid_string(pkt.sysmsgid)
    h: list[tuple[str, str]] = [
        ("subscription", subscription),
        ("destination", dest_stomp),
        ("message-id", msg_id),
    ]
    if ack is not None:
        h.append(("ack", ack))
    rt = f.get(VH_REPLYTO)
    if isinstance(rt, str) and rt:
        rc = f.get(VH_REPLYTO_CLASS)
        h.append(("reply-to", stomp_name(rt, rc if isinstance(rc, str) else None, True, conn_id)))
    corr = f.get(VH_CORRELATIONID)
    if isinstance(corr, str):
        h.append(("correlation-id", corr))
    h.append(("expires", str(pkt.expiration)))
    h.append(("redelivered", "true" if pkt.flags & FLAG_R else "false"))
    h.append(("priority", str(pkt.priority)))
    h.append(("timestamp", str(pkt.timestamp)))
    jtype = f.get(VH_TYPE)
    if isinstance(jtype, str):
        h.append(("type", jtype))
    h.append(("persistent", "true" if pkt.flags & FLAG_P else "false"))
    count = f.get(VH_DELIVERY_COUNT)
    h.append(
        (
            "JMSXDeliveryCount",
            str(count if isinstance(count, int) else 2 if pkt.flags & FLAG_R else 1),
        )
    )
    if pkt.prop_size:
        for k, v in pkt.properties.items():
            if k.startswith(JMQ_PREFIX) or k == "JMSXDeliveryCount":
                continue  # the broker's own
            h.append((k, _text(v)))
    kind = _BODY_TYPES.get(pkt.type)
    if kind is not None:
        h.append(("jms-message-type", kind))
    body = pkt.body
    if pkt.flags & FLAG_Z and body:
        try:
            body = zlib.decompress(body)
        except zlib.error:
            pass
    return h, body


def _text(v: object) -> str:
    """A property value as Java's String.valueOf writes it (the stock bridge's header)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return repr(float(v))
    return str(v)


def now_ms() -> int:
    return int(time.time() * 1000)


__all__ = [
    "DEFAULT_PRIORITY",
    "MappingError",
    "StompDest",
    "message_frame_headers",
    "message_packet",
    "parse_destination",
    "stomp_name",
]
