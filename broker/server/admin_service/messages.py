"""Admin requests about the messages a destination holds (OpenMQ's
GetMessagesHandler, DeleteMessageHandler): GET_MESSAGES and DELETE_MESSAGE."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from broker.core import queries
from broker.core.message import Message
from broker.protocol.admin_info import HashMap, Hashtable, encode_admin_vector
from broker.protocol.javaser import JavaSerializationError, decode_map_body
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_GET_MESSAGE_BODY,
    JMQ_MAX_NUM_MSGS_RETRIEVED,
    JMQ_START_MESSAGE_INDEX,
)
from broker.protocol.packet import VH_CORRELATIONID, VH_DESTINATION, VH_REPLYTO, VH_TYPE, Packet
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, FLAG_Z, PacketType, Status

from .common import AdminError, Result, log, long_prop, lookup, message_id

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


def get_messages(conn: ConnectionEngine, props: dict) -> Result:
    """GET_MESSAGES: a HashMap per message (GetMessagesHandler's keys), a window of
    JMQMaxNumMsgsRetrieved from JMQStartMessageIndex, or the one JMQMessageID."""
    if not isinstance(props.get(JMQ_DESTINATION), str) or JMQ_DEST_TYPE not in props:
        raise AdminError(Status.BAD_REQUEST, f"{JMQ_DESTINATION} and {JMQ_DEST_TYPE} are needed")
    dest = lookup(conn, props)
    mid = message_id(props, required=False)
    with_body = props.get(JMQ_GET_MESSAGE_BODY) is True
    held = queries.held_messages(conn.router, dest)
    if mid is not None:
        held = [r for r in held if r.msg.message_id == mid]
        if not held:
            raise AdminError(
                Status.NOT_FOUND, f"Could not locate message {mid} in destination {dest.name}"
            )
    else:
        start = long_prop(props, JMQ_START_MESSAGE_INDEX) or 0
        limit = long_prop(props, JMQ_MAX_NUM_MSGS_RETRIEVED)
        if start < 0 or (limit is not None and limit < 0):
            raise AdminError(Status.BAD_REQUEST, "negative message index or count")
        held = held[start : None if limit is None else start + limit]
    router = conn.router
    rows = [_message_row(router, msg, red, with_body) for msg, red, _p in held]
    return {}, encode_admin_vector(rows)


def _message_row(router, msg: Message, redelivered: bool, with_body: bool) -> HashMap:
    pkt = Packet(msg.raw)
    fields = pkt.fields
    corr = fields.get(VH_CORRELATIONID)
    row = HashMap(
        CorrelationID=corr,
        CorrelationIDAsBytes=corr.encode("utf-8") if isinstance(corr, str) else None,
        DeliveryMode=JInt(2 if msg.persistent else 1),
        DestinationName=msg.destination,
        DestinationType=JInt(DEST_QUEUE if msg.is_queue else DEST_TOPIC),
        Expiration=JLong(msg.expiration),
        MessageID=msg.message_id,
        Priority=JInt(msg.priority),
        Redelivered=redelivered,
    )
    # Ours: the JMSDestination header, where the message was sent (for a message of
    # the DMQ the destination it died on; DestinationType is that one's type too).
    row["JMSDestinationName"] = fields.get(VH_DESTINATION) or msg.destination
    reply_to = fields.get(VH_REPLYTO)
    if isinstance(reply_to, str) and reply_to:
        row["ReplyToDestinationName"] = reply_to
        queue = router.lookup(reply_to, DEST_QUEUE)
        topic = router.lookup(reply_to, DEST_TOPIC)
        if (queue is None) != (topic is None):
            row["ReplyToDestinationType"] = JInt(DEST_QUEUE if queue else DEST_TOPIC)
    row["Timestamp"] = JLong(msg.timestamp)
    row["Type"] = fields.get(VH_TYPE)
    try:
        row["MessageProperties"] = Hashtable(
            {k: v for k, v in pkt.properties.items() if v is not None}
        )
    except Exception:  # malformed properties cannot have been routed, but be safe
        row["MessageProperties"] = None
    row["MessageBodyType"] = JInt(pkt.type)
    if with_body:
        body = pkt.body
        if pkt.flags & FLAG_Z and body:
            try:
                body = zlib.decompress(body)
            except zlib.error:
                pass
        # Ours: the body as sent, whatever the type.
        row["MessageBodyBytes"] = body
        if pkt.type == PacketType.TEXT_MESSAGE:
            row["MessageBody"] = body.decode("utf-8", errors="replace")
        elif pkt.type in (PacketType.BYTES_MESSAGE, PacketType.STREAM_MESSAGE):
            row["MessageBody"] = body
        elif pkt.type == PacketType.MAP_MESSAGE and body:
            try:
                row["MessageBody"] = HashMap(decode_map_body(body))
            except JavaSerializationError:
                pass
        elif pkt.type == PacketType.OBJECT_MESSAGE:
            # OpenMQ sends the object itself; its bytes are that object serialised.
            row["MessageBody"] = body
    return row


def delete_message(conn: ConnectionEngine, props: dict) -> Result:
    """DELETE_MESSAGE: remove a waiting message (settled in the store as if it had
    been acknowledged); 409 while it is delivered and not acknowledged."""
    if JMQ_DEST_TYPE not in props:
        raise AdminError(Status.BAD_REQUEST, "DELETE_MESSAGE: JMQDestType is missing")
    dest = lookup(conn, props)
    mid = message_id(props, required=True)
    assert mid is not None  # required
    if conn.router.delete_message(dest, mid):
        log.info("message %s deleted from %s by %s", mid, dest.name, conn.user)
        return {}, b""
    if any(r.msg.message_id == mid for r in queries.held_messages(conn.router, dest)):
        raise AdminError(
            Status.CONFLICT,
            f"message {mid} in {dest.name} is being delivered: it cannot be deleted now",
        )
    raise AdminError(Status.NOT_FOUND, f"Could not locate message {mid} in destination {dest.name}")
