"""Messages as the router holds them.

A :class:`Message` is what a producer sent, kept as the received bytes (with a
DELIVERY_COUNT slot added once) so each delivery is a copy plus a few patched bytes.
An :class:`Entry` is one message's place in one delivery queue: a queue has one entry
per message, a topic one per subscription, each with its own redelivery state.

A message's bytes may be paged out (broker/core/paging.py): then ``_raw`` is None and
``src`` can read them back; ``raw`` reads them for the caller without keeping them.
:data:`BODIES` counts the bytes of message bodies held in memory, process-wide: the
memory states and the pager measure that, not the backlog.

The roles an entry meets are protocols declared here: its :class:`EntryOwner` (a
destination, or a copy's home elsewhere), its :class:`EntryQueue`, the
:class:`DeliveryTarget` it is delivered to and the :class:`Link` that target came
through.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Protocol

from broker.protocol.errors import ProtocolError
from broker.protocol.packet import (
    OFF_FLAGS,
    OFF_SYSMSGID,
    VH_CORRELATIONID,
    VH_DELIVERY_TIME,
    VH_TYPE,
    Packet,
    head_packet,
    stored_head,
    with_delivery_count_slot,
)
from broker.protocol.sysmsgid import sysmsgid_string
from broker.protocol.types import FLAG_A, FLAG_C, FLAG_F, FLAG_L, FLAG_P, FLAG_Q, FLAG_R

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from broker.store.base import Store

    from .selector import Selector

log = logging.getLogger("broker.router")

_I32 = struct.Struct(">i")
_FLAGS_CID = struct.Struct(">Hq")
# Flags a producer may have set that mean nothing on a delivery.  R stays: the client
# overrides JMSRedelivered to true (a send repeated after a failover, protocol §R bit).
_STRIP = ~(FLAG_F | FLAG_C | FLAG_L | FLAG_A) & 0xFFFF
# The DELIVERY_COUNT field with_delivery_count_slot adds (clients never send one): a
# message's size is the packet as sent, as OpenMQ counts it (limits, imqcmd's bytes).
_DC_SLOT = 8


class BodyMemory:
    """The bytes of message bodies held in memory, process-wide; and how many messages
    have theirs out of memory (paged out: ``out`` 0 tells an administrator's count of
    paged-out messages that it need not look at any, broker/core/dispatch.py)."""

    __slots__ = ("bytes", "out")

    def __init__(self) -> None:
        self.bytes = 0
        self.out = 0


BODIES = BodyMemory()


class BodySource(Protocol):
    """Where a paged-out message's bytes are (the pager, broker/core/paging.py)."""

    def read_back(self, msg: Message) -> bytes | None:
        """The message's bytes, read now (None: they cannot be read back)."""
        ...

    def retain(self, pos: int) -> None:
        """One more holder of the bytes paged out at ``pos`` (a packed record): each
        holder calls ``released`` once."""
        ...

    def released(self, pos: int, size: int) -> None:
        """A holder of the bytes paged out at ``pos`` (``size`` bytes) is gone: once the
        last is, they are no longer needed."""
        ...


class Message:
    """A message held by the broker."""

    __slots__ = (
        "_raw",
        "stored",
        "src",
        "pos",
        "dc_offset",
        "type",
        "base_flags",
        "priority",
        "expiration",
        "timestamp",
        "key",
        "destination",
        "is_queue",
        "persistent",
        "size",
        "origin_connection",
        "delivery_time",
        "store_key",
        "_selector_values",
        "report_info",
    )

    def __init__(self, pkt: Packet, destination: str, origin_connection: int) -> None:
        raw, self.dc_offset = with_delivery_count_slot(pkt)
        self._raw: bytes | None = raw
        # True once every copy of it is in the message store (see Destination.publish):
        # then the store can give its bytes back.
        self.stored = False
        self.src: BodySource | None = None
        self.pos = -1
        self.type = pkt.type
        self.base_flags = pkt.flags & _STRIP
        self.priority = pkt.priority
        self.expiration = pkt.expiration
        self.timestamp = pkt.timestamp
        self.key = pkt.sysmsgid
        self.destination = destination
        self.is_queue = bool(pkt.flags & FLAG_Q)
        self.persistent = bool(pkt.flags & FLAG_P)
        self.size = len(raw) - _DC_SLOT
        BODIES.bytes += self.size
        self.origin_connection = origin_connection
        # JMS 2.0 delivery delay: not deliverable before this absolute time (ms).
        delivery_time = pkt.fields.get(VH_DELIVERY_TIME)
        self.delivery_time = delivery_time if isinstance(delivery_time, int) else 0
        # The message store's key: the SysMessageID, except for DMQ copies (which keep
        # the original's id but must not collide with it in the store).
        self.store_key = self.key
        self._selector_values: dict | None = None
        # What the report generator (reports.py) read from it, once; until then the
        # arrival packet when its properties were decoded (checked on arrival), so its
        # property table and header fields are not decoded twice.
        self.report_info: object = pkt if pkt._props is not None else None

    @classmethod
    def made(
        cls,
        raw: bytes,
        dc_offset: int,
        ptype: int,
        flags: int,
        priority: int,
        timestamp: int,
        destination: str,
    ) -> Message:
        """A message the broker made itself (a report): ``raw`` is a whole packet with
        no expiration, delivery time or properties worth reading here, and its
        DELIVERY_COUNT value at ``dc_offset``; nothing is parsed back."""
        return cls.sent(raw, dc_offset, ptype, flags, priority, 0, timestamp, destination, 0)

    @classmethod
    def sent(
        cls,
        raw: bytes,
        dc_offset: int,
        ptype: int,
        flags: int,
        priority: int,
        expiration: int,
        timestamp: int,
        destination: str,
        origin_connection: int,
        report_info: object = None,
    ) -> Message:
        """A producer's message whose packet the broker encoded itself, with its
        DELIVERY_COUNT slot (at ``dc_offset``) already in place and no delivery time: a
        STOMP SEND (broker/engine/stomp_mapping.py).  What ``__init__`` would read back
        from the packet is passed in, so nothing is decoded or copied again
        (``report_info``: what reports.no_report_info says of its properties)."""
        m = cls.__new__(cls)
        m._raw = raw
        m.stored = False
        m.src = None
        m.pos = -1
        m.dc_offset = dc_offset
        m.type = ptype
        m.base_flags = flags & _STRIP
        m.priority = priority
        m.expiration = expiration
        m.timestamp = timestamp
        m.key = m.store_key = raw[OFF_SYSMSGID : OFF_SYSMSGID + 32]
        m.destination = destination
        m.is_queue = bool(flags & FLAG_Q)
        m.persistent = bool(flags & FLAG_P)
        m.size = len(raw) - _DC_SLOT
        BODIES.bytes += m.size
        m.origin_connection = origin_connection
        m.delivery_time = 0
        m._selector_values = None
        m.report_info = report_info
        return m

    @classmethod
    def paged(
        cls, head: bytes, size: int, destination: str, src: BodySource, store_key: bytes
    ) -> Message:
        """A stored message recovered without its body: ``head`` is its packet (with
        its DELIVERY_COUNT field) up to the properties, ``size`` the whole's length;
        ``src`` reads the rest back from the store by ``store_key``."""
        m = cls.__new__(cls)
        m._raw = None
        BODIES.out += 1
        m.stored = True
        m.src = src
        m.pos = -1
        fast = stored_head(head)  # no Packet: a restart may recover millions
        if fast is not None:
            h, m.dc_offset, m.delivery_time = fast
            m.type, m.expiration, m.timestamp, m.priority, flags = h[2], h[4], h[5], h[11], h[13]
        else:
            pkt = head_packet(head)
            _, m.dc_offset = with_delivery_count_slot(pkt)
            m.type, m.expiration, m.timestamp, m.priority = (
                pkt.type,
                pkt.expiration,
                pkt.timestamp,
                pkt.priority,
            )
            flags = pkt.flags
            delivery_time = pkt.fields.get(VH_DELIVERY_TIME)
            m.delivery_time = delivery_time if isinstance(delivery_time, int) else 0
        m.base_flags = flags & _STRIP
        key = head[OFF_SYSMSGID : OFF_SYSMSGID + 32]
        # One bytes object for both when they are equal (not for a DMQ copy): 65 B each.
        m.key = store_key if key == store_key else key
        m.store_key = store_key
        m.destination = destination
        m.is_queue = bool(flags & FLAG_Q)
        m.persistent = bool(flags & FLAG_P)
        m.size = size - _DC_SLOT
        m.origin_connection = 0
        m._selector_values = None
        m.report_info = None
        return m

    def __del__(self, b: BodyMemory = BODIES) -> None:  # bound now: no global at exit
        if self._raw is not None:
            b.bytes -= self.size
        else:
            b.out -= 1
        if self.src is not None and self.pos >= 0:
            self.src.released(self.pos, self.size)

    @property
    def raw(self) -> bytes:
        """The message's bytes; read back for this caller only when paged out."""
        raw = self._raw
        if raw is None:
            src = self.src
            raw = src.read_back(self) if src is not None else None
            if raw is None:
                raise MessageLost(self)
        return raw

    @property
    def resident(self) -> bool:
        """Are its bytes in memory?"""
        return self._raw is not None

    def page_out(self, src: BodySource, pos: int = -1) -> None:
        """Its bytes can be read back from ``src`` (at ``pos``): let them go."""
        if self._raw is not None:
            self._raw = None
            BODIES.bytes -= self.size
            BODIES.out += 1
        if isinstance(self.report_info, Packet):  # it holds the arrival bytes
            self.report_info = None
        self.src = src
        self.pos = pos

    def drop_body(self) -> None:
        """Let the bytes go again (they were read back and can be again)."""
        if self._raw is not None and self.src is not None:
            self._raw = None
            BODIES.bytes -= self.size
            BODIES.out += 1

    def page_in(self, raw: bytes) -> None:
        """Its bytes, read back ahead of delivery: kept until delivered."""
        if self._raw is None:
            self._raw = raw
            BODIES.bytes += self.size
            BODIES.out -= 1

    def is_expired(self, now_ms: int) -> bool:
        return 0 < self.expiration <= now_ms

    @property
    def message_id(self) -> str:
        return "ID:" + sysmsgid_string(self.key)

    def encode_delivery(
        self, consumer_id: int, redelivered: bool, count: int, extra_flags: int = 0
    ) -> bytearray:
        """The bytes to send to a consumer: the producer's packet with our header bits."""
        raw = self._raw
        buf = bytearray(raw if raw is not None else self.raw)
        flags = self.base_flags | extra_flags
        if redelivered:
            flags |= FLAG_R
        _FLAGS_CID.pack_into(buf, OFF_FLAGS, flags, consumer_id)
        _I32.pack_into(buf, self.dc_offset, count)
        return buf

    def selector_values(self) -> dict:
        """Properties plus selectable JMS headers, decoded once per message."""
        vals = self._selector_values
        if vals is None:
            # Parsed again from the stored bytes: keeping the received packet as well
            # would hold every message twice.
            pkt = Packet(self.raw)
            try:
                vals = dict(pkt.properties)
            except ProtocolError as exc:
                # Only a message stored before properties were checked on arrival can
                # get here; it must not pass for bad input from whoever triggered the
                # dispatch, so it is selected as if it had no properties.
                log.warning("message %s: unreadable properties: %s", self.message_id, exc)
                vals = {}
            # Read when the message arrived (delivery time), so known to decode.
            fields = pkt.fields
            vals["JMSDeliveryMode"] = "PERSISTENT" if self.persistent else "NON_PERSISTENT"
            vals["JMSPriority"] = self.priority
            vals["JMSMessageID"] = self.message_id
            vals["JMSTimestamp"] = self.timestamp
            vals["JMSCorrelationID"] = fields.get(VH_CORRELATIONID)
            vals["JMSType"] = fields.get(VH_TYPE)
            self._selector_values = vals
        return vals


class MessageLost(Exception):
    """A paged-out message's bytes could not be read back (logged where it was read)."""

    def __init__(self, msg: Message) -> None:
        super().__init__(f"message {msg.message_id}: its paged-out bytes cannot be read back")
        self.msg = msg


# -- the roles an entry meets --------------------------------------------------------
#
# Declared here, beside Entry, so that the modules which play them (dispatch.py,
# destination.py, session.py, the cluster's remote_delivery.py) import this one and not each
# other; dispatch.py and session.py name them too.


class Link(Protocol):
    """What the router needs from a client connection."""

    id: int
    client_id: str | None

    def can_deliver(self) -> bool: ...

    def send_delivery(self, buf: bytearray) -> None: ...

    @property
    def render_delivery(self) -> Callable[[int, Message, bool, int], bytes] | None:
        """None for a JMQ link.  A link of another protocol (STOMP) renders a delivery
        itself, ``render_delivery(consumer_id, msg, redelivered, count) -> bytes``: a
        consumer hands it the message, and ``send_delivery`` the bytes it made, instead
        of the JMQ packet (encode_delivery)."""
        ...


class OwnerStats(Protocol):
    """The counters the router's paths bump on an entry's owner."""

    acked: int
    discarded: int
    expired: int
    purged: int
    rolledback: int


class EntryOwner(Protocol):
    """What accounts for a delivered message (``Entry.owner``): a destination, or the
    cluster's ``InboundOrigin`` for a copy another broker (its home) delivered here.

    Every path that settles, gives up on or counts an entry goes through these members;
    nothing in core asks an owner what kind it is.
    """

    @property
    def name(self) -> str: ...

    @property
    def is_queue(self) -> bool: ...

    @property
    def attributes(self) -> dict: ...

    @property
    def stats(self) -> OwnerStats: ...

    @property
    def store(self) -> Store | None:
        """Where a stored copy's delivery counts and settles are written."""
        ...

    @property
    def home_elsewhere(self) -> bool:
        """True when another broker is the message's home: it sends the reports and
        keeps the dead copy, so this broker's observers stay silent about it."""
        ...

    def limit(self, name: str, default: int = -1) -> int:
        """A destination limit (maxDeliveryCount, ...); ``default`` when it has none."""
        ...

    def account_out(self, entry: Entry) -> None:
        """``entry`` is done with here (consumed, purged, forgotten): counted out and
        settled in the store."""
        ...

    def give_up(self, entry: Entry, reason: str, comment: str | None) -> None:
        """``entry`` is given up on (expired, undeliverable, removed by a limit): counted
        out like ``account_out``; a remote home is told why, to keep the dead copy."""
        ...


class EntryQueue(Protocol):
    """Where a delivered entry goes back to when it is not acknowledged (``Entry.queue``)."""

    @property
    def active(self) -> bool:
        """False once the queue's owner is gone (its entries are then settled, not put
        back)."""
        ...

    def put_back(self, entries: Iterable[Entry]) -> None:
        """Return ``entries`` ahead of what is pending, in their order."""
        ...

    def dispatch(self, now_ms: int) -> None:
        """Deliver what ready consumers will take."""
        ...


class DeliveryTarget(Protocol):
    """What a delivery queue needs from whatever takes its messages.

    :class:`~broker.core.session.Consumer` is the local one.  A remote consumer (a
    cluster link forwarding to a consumer on another broker) implements the same four
    members and is attached with ``QueueDestination.attach`` / ``Subscription.attach``
    (and removed with ``detach``); nothing in the router changes for it.
    """

    # Messages this target takes (None: all); a refused one stays for the others.
    selector: Selector | None
    # The connection it came through (its ``id`` decides noLocal on topics).
    link: Link

    def ready(self) -> bool:
        """Can it take one more message now (credit, started, its link not full)?"""
        ...

    def deliver(self, entry: Entry) -> None:
        """Take ``entry``: set ``entry.consumer`` to itself, count the delivery
        (``entry.count``), and send it on; acknowledgement comes back through the
        router like a local consumer's."""
        ...


class Entry:
    """One message in one delivery queue, with that queue's delivery state."""

    __slots__ = ("msg", "owner", "queue", "redelivered", "count", "consumer", "interest")

    def __init__(
        self, msg: Message, owner: EntryOwner, queue: EntryQueue, interest: str | None = None
    ) -> None:
        self.msg = msg
        # The message store's name for this copy ("" for a queue, the durable
        # subscription's id for a topic); None when the copy is not stored.
        self.interest = interest
        # The destination that accounts for it, and the queue it returns to.
        self.owner = owner
        self.queue = queue
        self.redelivered = False
        self.count = 0
        # The consumer it was last handed to (DeliveryTarget.deliver sets it).
        self.consumer: DeliveryTarget | None = None

    @property
    def home_gone(self) -> bool:
        """Its home is another broker, which has left the cluster: the copy here is
        inactive, and an acknowledgement of it cannot count (the home delivers it again)."""
        return not self.queue.active and self.owner.home_elsewhere
