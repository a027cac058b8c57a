"""Message producers.

The hot path builds a message packet from a per-destination template: the variable
header (PRODUCERID, DESTINATION, DESTINATION_CLASS) is encoded once, and per message
only the 72-byte fixed header is packed (timestamp, sequence, expiration, priority,
flags, size).  Properties are encoded only when the message has some.

Non-persistent sends do not wait for anything but flow control: the producer's
allowance from ADD_PRODUCER_REPLY (C flag + RESUME_FLOW with JMQProducerID) and the
connection's from HELLO_REPLY (F flag + RESUME_FLOW without ids).
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING

from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_PRODUCER_ID,
    JMQ_REASON,
    JMQ_SESSION_ID,
    JMQ_SIZE,
    JMQ_STATUS,
)
from broker.protocol.packet import (
    HEADER,
    VH_CORRELATIONID,
    VH_DELIVERY_TIME,
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_PRODUCERID,
    VH_REPLYTO,
    VH_REPLYTO_CLASS,
    VH_TRANSACTIONID,
    VH_TYPE,
    Packet,
    encode_fields,
)
from broker.protocol.properties import PropertyError, encode_properties
from broker.protocol.sysmsgid import SysMessageID
from broker.protocol.types import (
    CURRENT_PACKET_VERSION,
    FLAG_A,
    FLAG_C,
    FLAG_F,
    FLAG_P,
    FLAG_Q,
    FLAG_R,
    HEADER_SIZE,
    MAGIC,
    PacketType,
    Status,
)

from .destination import Destination
from .errors import IllegalStateException, JMSException, MessageFormatException, status_error
from .message import Message
from .wire import FLUSH_THRESHOLD, next_sequence, reply_status

if TYPE_CHECKING:
    import asyncio

    from .session import Session

_pack_header = HEADER.pack

# The broker's SEND_REPLY carries JMQStatus only: its property table is this prefix and
# the status as a big-endian int, read in place instead of decoding the table.
_STATUS_ONLY = encode_properties({JMQ_STATUS: JInt(0)})[:-4]
_STATUS_AT = len(_STATUS_ONLY)
_STATUS_SIZE = _STATUS_AT + 4
_I32 = struct.Struct(">i")


def _reply_status(reply: Packet) -> int:
    raw = reply.raw
    off = reply.prop_offset
    if (
        reply.prop_size == _STATUS_SIZE
        and reply.version == CURRENT_PACKET_VERSION
        and raw.startswith(_STATUS_ONLY, off)
    ):
        return _I32.unpack_from(raw, off + _STATUS_AT)[0]
    return reply_status(reply)


class _Target:
    """One destination a producer sends to: its broker producer id, template and flow state."""

    __slots__ = ("dest", "producer_id", "credit", "resume", "vh", "qflag")

    def __init__(self, dest: Destination) -> None:
        self.dest = dest
        self.producer_id = 0
        self.credit = -1
        self.resume: asyncio.Future[None] | None = None
        self.vh = b""
        self.qflag = FLAG_Q if dest.is_queue else 0

    def _set_id(self, producer_id: int) -> None:
        self.producer_id = producer_id
        self.vh = encode_fields(
            {
                VH_PRODUCERID: producer_id,
                VH_DESTINATION: self.dest.name,
                VH_DESTINATION_CLASS: self.dest.class_name,
            }
        )

    def _resume(self, size: int | None) -> None:
        """RESUME_FLOW for this producer: a new allowance (absent or -1 = unlimited)."""
        self.credit = -1 if size is None or size < 0 else int(size)
        if self.credit != 0:
            fut, self.resume = self.resume, None
            if fut is not None and not fut.done():
                fut.set_result(None)

    def _wake(self) -> None:
        fut, self.resume = self.resume, None
        if fut is not None and not fut.done():
            fut.set_result(None)


class MessageProducer:
    """Sends messages to one destination, or to any if created without one."""

    def __init__(
        self,
        session: Session,
        destination: Destination | None,
        *,
        persistent: bool = True,
        priority: int = 4,
        ttl_ms: int = 0,
        ack_on_produce: bool | None = None,
    ) -> None:
        self._session = session
        self._conn = session._connection
        self.destination = destination
        self.persistent = persistent
        self.priority = priority
        self.ttl_ms = ttl_ms
        self.ack_on_produce = ack_on_produce
        self._targets: dict[Destination, _Target] = {}
        # The target of the bound destination: the common case skips the dict lookup.
        self._bound: _Target | None = None
        self._closed = False

    async def _target(self, dest: Destination) -> _Target:
        t = self._targets.get(dest)
        if t is not None:
            return t
        conn = self._conn
        await conn._create_destination(dest)
        t = _Target(dest)

        def registered(reply: Packet) -> None:
            # Runs as the reply is read, so a RESUME_FLOW right behind it finds us.
            if reply.properties.get(JMQ_STATUS) != Status.OK:
                return
            pid = reply.properties.get(JMQ_PRODUCER_ID)
            if pid is None:
                raise JMSException("ADD_PRODUCER_REPLY without JMQProducerID")
            t._set_id(int(pid))  # type: ignore[call-overload]
            size = reply.properties.get(JMQ_SIZE)
            t.credit = -1 if size is None or size < 0 else int(size)  # type: ignore[operator,call-overload]
            conn._producers[t.producer_id] = t

        props = {
            JMQ_DESTINATION: dest.name,
            JMQ_DEST_TYPE: JInt(dest.dest_type),
            JMQ_SESSION_ID: JLong(self._session.session_id),
        }
        ok = (Status.OK, Status.RETRY)
        reply = await conn._request(
            PacketType.ADD_PRODUCER, props, hook=registered, ok=ok, what=dest.name
        )
        if reply_status(reply) == Status.RETRY:
            await conn._request(PacketType.ADD_PRODUCER, props, hook=registered, what=dest.name)
        self._targets[dest] = t
        if dest == self.destination:
            self._bound = t
        return t

    async def send(
        self,
        message: Message,
        *,
        destination: Destination | None = None,
        persistent: bool | None = None,
        priority: int | None = None,
        ttl_ms: int | None = None,
        delivery_delay_ms: int = 0,
        ack_on_produce: bool | None = None,
        redelivered: bool = False,
    ) -> None:
        """Send a message.

        Persistent messages (the JMS default) are sent with A and this waits for
        SEND_REPLY; non-persistent ones are not waited for unless ``ack_on_produce``.
        Afterwards the message's JMSMessageID, JMSTimestamp, JMSExpiration,
        JMSDestination, JMSPriority and JMSDeliveryMode reflect the send.
        ``redelivered`` sets the packet's R bit, the client overriding JMSRedelivered to
        true: a send repeated after a failover, whose first SEND_REPLY never came.  It
        goes with the message's first SysMessageID (JMSMessageID, JMSTimestamp): a broker
        that stored the first send answers NOT_MODIFIED (304) and keeps that one, and
        this returns as for a send it stored; otherwise the consumer can tell from the
        R bit that it may be a second copy.
        """
        if self._closed:
            raise IllegalStateException("producer is closed")
        conn = self._conn
        if conn._closed or conn._closing:
            raise IllegalStateException("connection is closed")
        t = self._bound
        if destination is None and t is not None:
            dest = t.dest
        else:
            dest = self.destination
            if destination is not None:
                if dest is not None and destination != dest:
                    raise JMSException("this producer is bound to another destination")
                dest = destination
            if dest is None:
                raise JMSException("no destination given")
            t = self._targets.get(dest)
            if t is None:
                t = await self._target(dest)

        # Flow control: wait for the broker's RESUME_FLOW if the last send used the allowance.
        if t.credit == 0:
            if t.resume is None:
                t.resume = conn._loop.create_future()
            await t.resume
            conn._check_live()
        if conn._send_credit == 0:
            await conn._wait_send_credit()

        if message._pkt is not None:
            message._materialize()
        if persistent is None:
            persistent = self.persistent
        if priority is None:
            priority = self.priority
        if ttl_ms is None:
            ttl_ms = self.ttl_ms
        aop = self.ack_on_produce if ack_on_produce is None else ack_on_produce
        want_reply = persistent if aop is None else aop

        first = message._sysid if redelivered else None
        now = first.timestamp if first is not None else int(time.time() * 1000)
        expiration = now + ttl_ms if ttl_ms > 0 else 0
        flags = t.qflag | FLAG_P if persistent else t.qflag
        if redelivered:
            flags |= FLAG_R

        if t.credit > 0:
            t.credit -= 1
            if t.credit == 0:
                flags |= FLAG_C
        if conn._send_credit > 0:
            conn._send_credit -= 1
            if conn._send_credit == 0:
                flags |= FLAG_F

        corr = message._correlation_id
        reply_to = message._reply_to
        jtype = message._jms_type
        session = self._session
        if (
            corr is None
            and reply_to is None
            and jtype is None
            and not delivery_delay_ms
            and not session.transacted
        ):
            vh = t.vh
        else:
            fields: dict[int, object] = {
                VH_PRODUCERID: t.producer_id,
                VH_DESTINATION: dest.name,
                VH_DESTINATION_CLASS: dest.class_name,
            }
            if corr is not None:
                fields[VH_CORRELATIONID] = corr
            if reply_to is not None:
                fields[VH_REPLYTO] = reply_to.name
                fields[VH_REPLYTO_CLASS] = reply_to.class_name
            if jtype is not None:
                fields[VH_TYPE] = jtype
            if delivery_delay_ms:
                fields[VH_DELIVERY_TIME] = now + delivery_delay_ms
            if session.transacted:
                fields[VH_TRANSACTIONID] = session._transaction_id
            vh = encode_fields(fields)

        props = message._props
        if props:
            try:
                pr = encode_properties(props)
            except (PropertyError, struct.error) as exc:
                # struct.error: an int beyond 64 bits put straight into the dict.
                raise MessageFormatException(str(exc)) from exc
        else:
            pr = b""
        body = message._encode_body()

        if first is not None:  # the same message again: its first id
            ip, port, seq = first.ip, first.port, first.sequence
        else:
            ip, port, seq = conn._ip, conn.local_port, next_sequence()
        cid = 0
        fut = None
        if want_reply:
            cid, fut = conn._register()
            flags |= FLAG_A
        prop_offset = HEADER_SIZE + len(vh)
        header = _pack_header(
            MAGIC,
            CURRENT_PACKET_VERSION,
            message.PACKET_TYPE,
            prop_offset + len(pr) + len(body),
            expiration,
            now,
            ip,
            port,
            seq,
            prop_offset,
            len(pr),
            priority,
            0,
            flags,
            cid,
        )
        if fut is not None:
            conn._write_now(header + vh + pr + body)
        else:
            conn._write(header + vh + pr + body)

        message._timestamp = now
        message._expiration = expiration
        message._priority = priority
        message._persistent = persistent
        message._destination = dest
        message._delivery_time = now + delivery_delay_ms if delivery_delay_ms else 0
        message._sysid = SysMessageID(now, ip, port, seq)

        if fut is not None:
            reply = await conn._await_reply(cid, fut, "SEND")
            status = _reply_status(reply)
            if status == Status.NOT_MODIFIED and first is not None:
                return  # the broker had stored the first send: it keeps that one
            if status != Status.OK:
                raise status_error(
                    message.PACKET_TYPE,
                    status,
                    reply.properties.get(JMQ_REASON),  # type: ignore[arg-type]
                    what=f"to {dest.name}",
                )
        elif conn._wsize >= FLUSH_THRESHOLD or conn._write_paused:
            await conn._throttle()

    async def close(self) -> None:
        """DELETE_PRODUCER for every destination this producer was registered on."""
        await self._close()
        if self in self._session._producers:
            self._session._producers.remove(self)

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        for t in self._targets.values():
            conn._producers.pop(t.producer_id, None)
            t._wake()
            if conn._transport is not None and t.producer_id:
                await conn._request(
                    PacketType.DELETE_PRODUCER, {JMQ_PRODUCER_ID: JLong(t.producer_id)}
                )
        self._targets.clear()
        self._bound = None

    async def __aenter__(self) -> MessageProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<MessageProducer dest={self.destination!r}>"


__all__ = ["MessageProducer"]
