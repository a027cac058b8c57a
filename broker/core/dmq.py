"""The dead message queue: when a message given up on is kept there, and how it looks.

A dead message keeps its header bytes (message id, JMSDestination = where it was
sent, priority, correlation id...) and gains OpenMQ's ``JMS_SUN_DMQ_*`` properties.
Its expiration is cleared so an expired message can be read from the DMQ.

:func:`keep` is the one rule for whether and how a copy goes to the DMQ: the live
broker applies it (broker/core/limits.py) to the DMQ destination, and the expiry job
(broker/jobs/dbexpiry.py) to a stopped broker's DMQ rows, each behind
:class:`DeadLetters`.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Protocol

from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.mqreports import MQRO_DISCARD_MSG, REPORT_DISCARD_MSG
from broker.protocol.packet import HEADER_SIZE, OFF_PROP_OFFSET, OFF_SIZE, Packet
from broker.protocol.properties import encode_properties
from broker.protocol.types import DMQ_NAME

from .message import Message

# JMS_SUN_DMQ_UNDELIVERED_REASON values, as OpenMQ names them.
EXPIRED = "EXPIRED"
UNDELIVERABLE = "UNDELIVERABLE"
REMOVED_OLDEST = "REMOVED_OLDEST"
REMOVED_LOW_PRIORITY = "REMOVED_LOW_PRIORITY"
ERROR = "ERROR"

DMQ_DEFAULTS = {
    "maxNumMsgs": 1000,
    "maxTotalMsgBytes": 10 * 1024 * 1024,
    "limitBehavior": "REMOVE_OLDEST",
    "maxBytesPerMsg": -1,
    "useDMQ": False,
    # As OpenMQ's: no producer may be added (ADD_PRODUCER answers 409); the broker itself
    # puts dead messages there.
    "maxNumProducers": 0,
}

log = logging.getLogger("broker.router")

_OFF_EXPIRATION = 12
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


def preserve(msg: Message, reason: str = EXPIRED) -> bool:
    """False when the producer asked not to keep it: JMS_SUN_PRESERVE_UNDELIVERED=false,
    or, for a message given up on other than by expiry, IBM MQ's
    JMS_IBM_Report_Discard_Msg (discarded instead of going to the DMQ)."""
    values = msg.selector_values()
    if values.get("JMS_SUN_PRESERVE_UNDELIVERED", True) is False:
        return False
    return reason == EXPIRED or values.get(REPORT_DISCARD_MSG) != MQRO_DISCARD_MSG


def dead_message(
    msg: Message,
    reason: str,
    *,
    now_ms: int,
    broker: str,
    delivery_count: int,
    comment: str | None = None,
    truncate_body: bool = False,
) -> Message:
    """A copy of ``msg`` for the DMQ, with the reason, time and broker recorded."""
    pkt = Packet(msg.raw)
    try:
        props = dict(pkt.properties)
    except ProtocolError:
        # Stored before the arrival check (see Message.selector_values): the copy keeps
        # what can be read, the DMQ's own properties.
        props = {}
    props["JMS_SUN_DMQ_UNDELIVERED_REASON"] = reason
    props["JMS_SUN_DMQ_UNDELIVERED_TIMESTAMP"] = JLong(now_ms)
    props["JMS_SUN_DMQ_DELIVERY_COUNT"] = JInt(delivery_count)
    props["JMS_SUN_DMQ_DEAD_BROKER"] = broker
    props.setdefault("JMS_SUN_DMQ_PRODUCING_BROKER", broker)
    if comment:
        props["JMS_SUN_DMQ_UNDELIVERED_COMMENT"] = comment
    body = pkt.body
    if truncate_body or props.get("JMS_SUN_TRUNCATE_MSG_BODY") is True:
        body = b""
        props["JMS_SUN_DMQ_BODY_TRUNCATED"] = True
    section = encode_properties(props)
    varheader = msg.raw[HEADER_SIZE : pkt.prop_offset]
    head = bytearray(msg.raw[:HEADER_SIZE])
    _I64.pack_into(head, _OFF_EXPIRATION, 0)
    _I32.pack_into(head, OFF_PROP_OFFSET, pkt.prop_offset)
    _I32.pack_into(head, OFF_PROP_OFFSET + 4, len(section))
    _I32.pack_into(head, OFF_SIZE, pkt.prop_offset + len(section) + len(body))
    dead = Message(
        Packet(bytes(head) + varheader + section + body), DMQ_NAME, msg.origin_connection
    )
    return dead


class DeadLetters(Protocol):
    """Where dead copies are kept: the DMQ destination of a running broker, or the DMQ
    rows of a stopped one."""

    def limit(self, name: str, default: int = -1) -> int:
        """The DMQ's attribute ``name`` (maxBytesPerMsg, ...) as a number."""
        ...

    def is_full(self, extra_bytes: int = 0) -> bool:
        """Would one more message of ``extra_bytes`` pass maxNumMsgs or maxTotalMsgBytes?"""
        ...

    def make_way(self) -> bool:
        """Drop the message that goes first (its limitBehavior is REMOVE_OLDEST);
        False when there is none to drop."""
        ...

    def add(self, dead: Message) -> None:
        """Keep ``dead``."""
        ...


@dataclass(frozen=True)
class DeadLetterPolicy:
    """What the broker's configuration says about dead messages."""

    broker: str  # JMS_SUN_DMQ_DEAD_BROKER (and PRODUCING_BROKER when unset)
    truncate_body: bool = False  # imq.destination.DMQ.truncateBody
    log_dead_messages: bool = False  # imq.destination.logDeadMsgs


def keep(
    msg: Message,
    reason: str,
    comment: str | None,
    delivery_count: int,
    *,
    source: str,
    attributes: dict,
    from_dmq: bool,
    policy: DeadLetterPolicy,
    box: DeadLetters,
    now_ms: int,
) -> bool:
    """A message given up on in destination ``source`` (``attributes``; ``from_dmq``
    when that is the DMQ itself): logged when asked, and a copy kept in ``box`` when
    the destination uses the DMQ (useDMQ, default true), the producer did not say
    otherwise (:func:`preserve`) and the DMQ's limits allow (a copy over
    maxBytesPerMsg is not kept; the DMQ's oldest messages make way for it).  True when
    the copy was kept."""
    if from_dmq or not attributes.get("useDMQ", True):
        log.debug("message %s discarded (%s)", msg.message_id, reason)
        return False
    if policy.log_dead_messages or msg.selector_values().get("JMS_SUN_LOG_DEAD_MESSAGES"):
        log.info(
            "dead message %s from %s: %s%s",
            msg.message_id,
            source,
            reason,
            f" ({comment})" if comment else "",
        )
    if not preserve(msg, reason):
        return False
    return keep_copy(msg, reason, comment, delivery_count, policy=policy, box=box, now_ms=now_ms)


def keep_copy(
    msg: Message,
    reason: str,
    comment: str | None,
    delivery_count: int,
    *,
    policy: DeadLetterPolicy,
    box: DeadLetters,
    now_ms: int,
) -> bool:
    """Put a dead copy of ``msg`` in ``box``, its limits permitting; True if it went."""
    dead = dead_message(
        msg,
        reason,
        now_ms=now_ms,
        broker=policy.broker,
        delivery_count=delivery_count,
        comment=comment,
        truncate_body=policy.truncate_body,
    )
    per_msg = box.limit("maxBytesPerMsg")
    if per_msg >= 0 and dead.size > per_msg:
        log.info("message %s too large for the DMQ, discarded", msg.message_id)
        return False
    while box.is_full(dead.size):
        # The DMQ's own limit behaviour: its oldest message makes way (and is gone).
        if not box.make_way():
            log.info("DMQ full, message %s discarded", msg.message_id)
            return False
    box.add(dead)
    return True
