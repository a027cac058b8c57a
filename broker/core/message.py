"""Messages as the router holds them.

A :class:`Message` is what a producer sent, kept as the received bytes (with a
DELIVERY_COUNT slot added once) so each delivery is a copy plus a few patched bytes.
An :class:`Entry` is one message's place in one delivery queue: a queue has one entry
per message, a topic one per subscription, each with its own redelivery state.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING

from broker.protocol.errors import ProtocolError
from broker.protocol.packet import (
    OFF_FLAGS,
    OFF_SYSMSGID,
    VH_CORRELATIONID,
    VH_DELIVERY_TIME,
    VH_TYPE,
    Packet,
    with_delivery_count_slot,
)
from broker.protocol.sysmsgid import sysmsgid_string
from broker.protocol.types import FLAG_A, FLAG_C, FLAG_F, FLAG_L, FLAG_P, FLAG_Q, FLAG_R

if TYPE_CHECKING:
    from .dispatch import DeliveryTarget, EntryOwner, EntryQueue

log = logging.getLogger("broker.router")

_I32 = struct.Struct(">i")
_FLAGS_CID = struct.Struct(">Hq")
# Flags a producer may have set that mean nothing on a delivery.  R stays: the client
# overrides JMSRedelivered to true (a send repeated after a failover, protocol §R bit).
_STRIP = ~(FLAG_F | FLAG_C | FLAG_L | FLAG_A) & 0xFFFF
# The DELIVERY_COUNT field with_delivery_count_slot adds (clients never send one): a
# message's size is the packet as sent, as OpenMQ counts it (limits, imqcmd's bytes).
_DC_SLOT = 8


class Message:
    """A message held by the broker."""

    __slots__ = (
        "raw",
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
        self.raw = raw
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
        m = cls.__new__(cls)
        m.raw = raw
        m.dc_offset = dc_offset
        m.type = ptype
        m.base_flags = flags & _STRIP
        m.priority = priority
        m.expiration = 0
        m.timestamp = timestamp
        m.key = m.store_key = raw[OFF_SYSMSGID : OFF_SYSMSGID + 32]
        m.destination = destination
        m.is_queue = bool(flags & FLAG_Q)
        m.persistent = bool(flags & FLAG_P)
        m.size = len(raw) - _DC_SLOT
        m.origin_connection = 0
        m.delivery_time = 0
        m._selector_values = None
        m.report_info = None
        return m

    def is_expired(self, now_ms: int) -> bool:
        return 0 < self.expiration <= now_ms

    @property
    def message_id(self) -> str:
        return "ID:" + sysmsgid_string(self.key)

    def encode_delivery(
        self, consumer_id: int, redelivered: bool, count: int, extra_flags: int = 0
    ) -> bytearray:
        """The bytes to send to a consumer: the producer's packet with our header bits."""
        buf = bytearray(self.raw)
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
