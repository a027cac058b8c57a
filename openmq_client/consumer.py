"""Message consumers (receive with timeout, or a listener) and queue browsers.

Deliveries are buffered as raw packets; a :class:`~openmq_client.message.Message` is
made only when the application takes one.  Consumer flow control follows the Java
client: when a delivery carries the C flag the broker has stopped at the prefetch
limit, and the client sends RESUME_FLOW (JMQConsumerID, JMQSize = room left) once
its buffer has drained to half the limit.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_ACK_MODE,
    JMQ_BLOCK,
    JMQ_BODY_TYPE,
    JMQ_CAN_CREATE,
    JMQ_CONSUMER_ID,
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_DURABLE_NAME,
    JMQ_JMS_SHARE,
    JMQ_LAST_DELIVERED_ID_IN_TRANSACTION,
    JMQ_NO_LOCAL,
    JMQ_RECONNECT,
    JMQ_REDELIVER_ALL,
    JMQ_SELECTOR,
    JMQ_SESSION_ID,
    JMQ_SHARE,
    JMQ_SHARED_SUBSCRIPTION_NAME,
    JMQ_SIZE,
    JMQ_STATUS,
)
from broker.protocol.packet import Packet
from broker.protocol.types import FLAG_C, FLAG_P, AckMode, BodyType, PacketType, Status

from .destination import Destination, Queue
from .errors import BrokerUnreachableException, IllegalStateException, JMSException, status_error
from .message import Message

if TYPE_CHECKING:
    from .session import Session

log = logging.getLogger(__name__)

_I64 = struct.Struct(">q")
_SYSID = slice(20, 52)

AUTO = AckMode.AUTO_ACKNOWLEDGE
CLIENT = AckMode.CLIENT_ACKNOWLEDGE
DUPS_OK = AckMode.DUPS_OK_ACKNOWLEDGE
NO_ACK = AckMode.NO_ACKNOWLEDGE

Listener = Callable[[Message], Any]


class _Sink(Protocol):
    """Anything the connection routes deliveries to by consumer id."""

    def _on_message(self, pkt: Packet) -> None: ...

    def _connection_closed(self) -> None: ...


def _expire(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class MessageConsumer:
    """Receives messages from one destination (create with ``session.create_consumer``)."""

    def __init__(
        self,
        session: Session,
        destination: Destination,
        selector: str | None,
        no_local: bool,
        prefetch: int,
        durable_name: str | None,
        shared_name: str | None = None,
    ) -> None:
        self._session = session
        self._conn = session._connection
        self.destination = destination
        self.selector = selector
        self.no_local = no_local
        self.durable_name = durable_name
        # JMS 2.0 shared subscription name (shared durable: the durable name).
        self.shared_name = shared_name
        self.consumer_id = 0
        self._cid_bytes = b""
        self._queue: deque[Packet] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._last_delivered: bytes | None = None
        self._resume_requested = False
        self._listener: Listener | None = None
        self._task: asyncio.Task[None] | None = None
        self._set_prefetch(prefetch)
        # Acknowledge with A and wait, except non-persistent non-durable topic
        # messages in AUTO mode (decided per message from the P flag).
        self._np_topic_no_wait = not destination.is_queue and durable_name is None

    def _set_prefetch(self, prefetch: int) -> None:
        self.prefetch = prefetch
        threshold = prefetch // 2
        if threshold >= prefetch:
            threshold = prefetch - 1
        self._threshold = threshold

    @property
    def is_closed(self) -> bool:
        return self._closed

    async def _register(self) -> None:
        conn = self._conn
        dest = self.destination
        await conn._create_destination(dest)
        session = self._session
        props: dict[str, object] = {
            JMQ_DESTINATION: dest.name,
            JMQ_DEST_TYPE: JInt(dest.dest_type),
            JMQ_NO_LOCAL: self.no_local,
            JMQ_RECONNECT: False,
            JMQ_SIZE: JInt(self.prefetch),
            JMQ_SESSION_ID: JLong(session.session_id),
        }
        # Like the Java client: a JMS 2.0 shared consumer says JMQJMSShare and names its
        # subscription; the others say JMQShare per imqEnableSharedClientID (durable)
        # or imqEnableSharedSubscriptions (non-durable, not temporary).
        if self.shared_name is not None:
            props[JMQ_JMS_SHARE] = True
            props[JMQ_SHARED_SUBSCRIPTION_NAME] = self.shared_name
        elif self.durable_name is not None:
            props[JMQ_SHARE] = conn.enable_shared_client_id
        else:
            props[JMQ_SHARE] = conn.enable_shared_subscriptions and not dest.is_temporary
        if self.selector is not None:
            props[JMQ_SELECTOR] = self.selector
        if session.ack_mode > 0:
            props[JMQ_ACK_MODE] = JInt(int(session.ack_mode))
        if self.durable_name is not None:
            props[JMQ_DURABLE_NAME] = self.durable_name

        def registered(reply: Packet) -> None:
            # Runs as the reply is read: deliveries may follow in the same chunk.
            if reply.properties.get(JMQ_STATUS) != Status.OK:
                return
            cid = reply.properties.get(JMQ_CONSUMER_ID)
            if cid is None:
                raise JMSException("ADD_CONSUMER_REPLY without JMQConsumerID")
            self.consumer_id = int(cid)  # type: ignore[call-overload]
            self._cid_bytes = _I64.pack(self.consumer_id)
            size = reply.properties.get(JMQ_SIZE)
            if isinstance(size, int) and size > 0:
                self._set_prefetch(size)
            conn._consumers[self.consumer_id] = self

        ok = (Status.OK, Status.RETRY)
        has_sel = self.selector is not None
        reply = await conn._request(
            PacketType.ADD_CONSUMER, props, hook=registered, ok=ok, what=dest.name, selector=has_sel
        )
        if reply.properties.get(JMQ_STATUS) == Status.RETRY:
            await conn._request(
                PacketType.ADD_CONSUMER, props, hook=registered, what=dest.name, selector=has_sel
            )

    # ------------------------------------------------------------ delivery

    def _on_message(self, pkt: Packet) -> None:
        """Called by the read loop for every delivery to this consumer."""
        if self._closed:
            return
        self._queue.append(pkt)
        self._conn._in_queue += 1
        if pkt.flags & FLAG_C:
            self._resume_requested = True
            self._check_resume()
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    def _check_resume(self) -> None:
        if self._resume_requested and len(self._queue) <= self._threshold:
            room = self.prefetch - len(self._queue)
            if room > 0:
                self._resume_requested = False
                conn = self._conn
                if conn._transport is not None:
                    conn._send(
                        PacketType.RESUME_FLOW,
                        {JMQ_CONSUMER_ID: JLong(self.consumer_id), JMQ_SIZE: JInt(room)},
                    )

    def _take(self) -> Message:
        """Hand the oldest buffered message to the application (flow bookkeeping)."""
        pkt = self._queue.popleft()
        self._conn._delivered()
        if self._resume_requested:
            self._check_resume()
        sysid = self._last_delivered = pkt.raw[_SYSID]
        session = self._session
        if session.ack_mode == CLIENT:
            # Before the application sees it, so acknowledge() inside a listener covers it.
            session._unacked.append(self._cid_bytes + sysid)
        return Message._received(pkt, session, self.consumer_id)

    def _ack(self, msg: Message) -> Any:
        """Acknowledge per the session mode; returns an awaitable when a reply is awaited."""
        session = self._session
        mode = session.ack_mode
        pkt = msg._pkt
        if pkt is None:
            return None
        block = self._cid_bytes + pkt.raw[_SYSID]
        if mode == AUTO:
            if session.ack_on_acknowledge and not (
                self._np_topic_no_wait and not pkt.flags & FLAG_P
            ):
                return session._ack_wait([block])
            session._ack_nowait([block])
        elif mode == DUPS_OK:
            dups = session._dups
            dups.append(block)
            if len(dups) >= session.dups_ok_limit or not self._queue:
                session._flush_dups()
        elif mode == CLIENT:
            pass  # recorded by _take; sent by message.acknowledge()
        elif session.transacted:
            session._unacked.append(block)
            return session._ack_wait([block])
        return None

    async def receive(self, timeout: float | None = None) -> Message | None:
        """The next message; None after ``timeout`` seconds or if the consumer is closed.

        ``timeout=None`` waits for ever, ``0`` does not wait.  While the connection is
        stopped nothing is handed out, even if messages are already buffered.
        """
        if self._listener is not None:
            raise IllegalStateException("consumer has a message listener")
        q = self._queue
        conn = self._conn
        if not (q and conn._started):
            if self._closed or conn._closed:
                return None
            if self._session._dups:
                self._session._flush_dups()
            if timeout is not None and timeout <= 0:
                return None
            loop = conn._loop
            deadline = None if timeout is None else loop.time() + timeout
            while not (q and conn._started):
                fut: asyncio.Future[None] = loop.create_future()
                self._waiter = fut
                handle = None if deadline is None else loop.call_at(deadline, _expire, fut)
                try:
                    await fut
                finally:
                    if handle is not None:
                        handle.cancel()
                    if self._waiter is fut:
                        self._waiter = None
                if self._closed or conn._closed or self._listener is not None:
                    return None
                if deadline is not None and loop.time() >= deadline and not (q and conn._started):
                    return None
        msg = self._take()
        r = self._ack(msg)
        if r is not None:
            try:
                await r
            except BrokerUnreachableException:
                # The connection went with the acknowledgement on its way. The broker may
                # have applied it before it went: dropping the message here would lose it.
                # The application has it; if the broker did not apply the acknowledgement,
                # the message comes again, flagged redelivered (AUTO's duplicate case).
                if self._session.ack_mode != AUTO:
                    raise
        return msg

    async def receive_no_wait(self) -> Message | None:
        """A buffered message or None, without waiting."""
        return await self.receive(0)

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        while True:
            msg = await self.receive()
            if msg is None:
                return
            yield msg

    # ------------------------------------------------------------ listener

    @property
    def listener(self) -> Listener | None:
        return self._listener

    def set_listener(self, listener: Listener | None) -> None:
        """Deliver messages to ``listener`` (a function or coroutine function) instead.

        In AUTO and DUPS_OK modes a message is acknowledged after the listener
        returns.  An exception from the listener is logged and the message still
        counts as consumed.
        """
        if self._closed:
            raise IllegalStateException("consumer is closed")
        self._listener = listener
        task = self._task
        if listener is None:
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                self._task = None
            return
        if task is None:
            # A receive() waiting right now returns None: the listener takes over.
            w = self._waiter
            self._waiter = None
            if w is not None and not w.done():
                w.set_result(None)
            self._task = self._conn._loop.create_task(self._listen())

    async def _listen(self) -> None:
        loop = self._conn._loop
        q = self._queue
        try:
            conn = self._conn
            while not self._closed and self._listener is not None:
                if not (q and conn._started):
                    if self._session._dups:
                        self._session._flush_dups()
                    if conn._closed:
                        return
                    fut: asyncio.Future[None] = loop.create_future()
                    self._waiter = fut
                    await fut
                    continue
                listener = self._listener
                msg = self._take()
                try:
                    r = listener(msg)
                    if inspect.isawaitable(r):
                        await r
                except Exception:
                    log.exception("message listener of %r failed", self)
                a = self._ack(msg)
                if a is not None:
                    await a
        except JMSException as exc:
            if not self._closed:
                log.error("listener loop of %r stopped: %s", self, exc)
        finally:
            if self._task is asyncio.current_task():
                self._task = None

    # --------------------------------------------------------- life cycle

    def _drain_queue(self) -> list[bytes]:
        """Empty the buffer (recover/rollback) and return the messages' ack blocks."""
        cid = self._cid_bytes
        blocks = [cid + p.raw[_SYSID] for p in self._queue]
        for _ in range(len(self._queue)):
            self._conn._delivered()
        self._queue.clear()
        return blocks

    def _after_recover(self) -> None:
        if self._resume_requested:
            self._check_resume()

    def _wake(self) -> None:
        """Let a waiting receive()/listener look again (connection started or closed)."""
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    def _connection_closed(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    async def close(self) -> None:
        """DELETE_CONSUMER naming the last delivered message; buffered ones go back."""
        await self._close()
        session = self._session
        if self in session._consumers:
            session._consumers.remove(self)

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        task = self._task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._connection_closed()
        session = self._session
        conn = self._conn
        if session.ack_mode == DUPS_OK:
            session._flush_dups()
        try:
            if conn._transport is not None and self.consumer_id:
                props: dict[str, object] = {
                    JMQ_CONSUMER_ID: JLong(self.consumer_id),
                    JMQ_BLOCK: True,
                }
                last = self._last_delivered
                if last is not None:
                    props[JMQ_BODY_TYPE] = JInt(BodyType.SYSMESSAGEID)
                    if session.transacted and any(b[8:] == last for b in session._unacked):
                        props[JMQ_LAST_DELIVERED_ID_IN_TRANSACTION] = True
                    body = last
                else:
                    props[JMQ_BODY_TYPE] = JInt(BodyType.NONE)
                    props[JMQ_REDELIVER_ALL] = True
                    body = b""
                await conn._request(PacketType.DELETE_CONSUMER, props, body)
        finally:
            conn._consumers.pop(self.consumer_id, None)
            for _ in range(len(self._queue)):
                conn._delivered()
            self._queue.clear()

    async def __aenter__(self) -> MessageConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<MessageConsumer id={self.consumer_id} dest={self.destination!r}>"


class _BrowserSink:
    """Collects the messages a DELIVER request brings back for a browser id."""

    def __init__(self) -> None:
        self.packets: list[Packet] = []
        self.last_seen = False

    def _on_message(self, pkt: Packet) -> None:
        self.packets.append(pkt)

    def _connection_closed(self) -> None:
        pass


# The Java client fetches browsed messages in chunks of this many ids.
BROWSE_CHUNK = 1000


class QueueBrowser:
    """Looks at a queue's messages without consuming them."""

    def __init__(self, session: Session, queue: Queue, selector: str | None) -> None:
        self._session = session
        self.queue = queue
        self.selector = selector
        self._closed = False

    async def messages(self) -> list[Message]:
        """A snapshot of the queue: BROWSE for the ids, then DELIVER them (L on the last)."""
        if self._closed:
            raise IllegalStateException("browser is closed")
        self._session._check_open()
        conn = self._session._connection
        props: dict[str, object] = {
            JMQ_DESTINATION: self.queue.name,
            JMQ_DEST_TYPE: JInt(self.queue.dest_type),
        }
        if self.selector is not None:
            props[JMQ_SELECTOR] = self.selector
        reply = await conn._request(
            PacketType.BROWSE,
            props,
            ok=(Status.OK, Status.NOT_FOUND),
            what=self.queue.name,
            selector=self.selector is not None,
        )
        rp = reply.properties
        if rp.get(JMQ_STATUS) == Status.NOT_FOUND:
            if rp.get(JMQ_CAN_CREATE):
                return []
            raise status_error(PacketType.BROWSE, Status.NOT_FOUND, what=self.queue.name)
        body = reply.body
        if len(body) % 32:
            raise JMSException(f"BROWSE_REPLY body of {len(body)} bytes is not a list of ids")
        if not body:
            return []
        bid = rp.get(JMQ_CONSUMER_ID)
        if bid is None:
            raise JMSException("BROWSE_REPLY without JMQConsumerID")
        bid = int(bid)  # type: ignore[call-overload]
        sink = _BrowserSink()
        conn._consumers[bid] = sink
        try:
            step = 32 * BROWSE_CHUNK
            for i in range(0, len(body), step):
                # Deliveries precede DELIVER_REPLY on the stream, so they are all in
                # the sink when the reply resolves.
                await conn._request(
                    PacketType.DELIVER,
                    {JMQ_CONSUMER_ID: JLong(bid)},
                    body[i : i + step],
                    ok=(Status.OK, Status.NOT_FOUND),
                )
        finally:
            conn._consumers.pop(bid, None)
        return [Message._received(p, None, bid) for p in sink.packets]

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        for m in await self.messages():
            yield m

    async def close(self) -> None:
        """Browsers hold no broker resources between reads; just mark closed."""
        self._closed = True
        if self in self._session._browsers:
            self._session._browsers.remove(self)

    def __repr__(self) -> str:
        return f"<QueueBrowser {self.queue!r}>"


__all__ = ["MessageConsumer", "QueueBrowser"]
