"""The dead message queue: what a message looks like when it is moved there.

A dead message keeps its header bytes (message id, JMSDestination = where it was
sent, priority, correlation id...) and gains OpenMQ's ``JMS_SUN_DMQ_*`` properties.
Its expiration is cleared so an expired message can be read from the DMQ.
"""

from __future__ import annotations

import struct

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
