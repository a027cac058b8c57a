"""Sessions: factories for producers/consumers, acknowledgement, recover, transactions.

Acknowledgement bodies are 40-byte blocks: the int64 consumer id the message was
delivered with, then its 32-byte SysMessageID (header bytes 20..51).  What is sent
when follows the Java client (docs/developers/protocol.md):

* AUTO: one ACKNOWLEDGE per message, with A (and a wait) except for non-persistent
  messages from a non-durable topic subscription;
* DUPS_OK: batches without A, flushed every ``dups_ok_limit`` messages or when the
  consumer runs dry;
* CLIENT: ``message.acknowledge()`` sends everything the session has delivered;
* transacted: each consumed message is acknowledged inside the transaction.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_CAN_CREATE,
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_DURABLE_NAME,
    JMQ_SELECTOR,
    JMQ_SESSION_ID,
    JMQ_SET_REDELIVERED,
    JMQ_STATUS,
    JMQ_TRANSACTION_ID,
)
from broker.protocol.packet import VH_TRANSACTIONID
from broker.protocol.types import AckMode, PacketType, Status

from .consumer import MessageConsumer, QueueBrowser
from .destination import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic
from .errors import IllegalStateException, JMSException, status_error
from .message import Message
from .producer import MessageProducer

if TYPE_CHECKING:
    from .connection import Connection

_I64 = struct.Struct(">q")


class Session:
    """A single-threaded context for producing and consuming (create with ``create_session``)."""

    def __init__(
        self,
        connection: Connection,
        session_id: int,
        ack_mode: int,
        transacted: bool,
        *,
        ack_on_acknowledge: bool = True,
        dups_ok_limit: int = 64,
    ) -> None:
        self._connection = connection
        self.session_id = session_id
        self.ack_mode = AckMode.NONE if transacted else AckMode(ack_mode)
        self.transacted = transacted
        self.ack_on_acknowledge = ack_on_acknowledge
        self.dups_ok_limit = max(1, dups_ok_limit)
        self._consumers: list[MessageConsumer] = []
        self._producers: list[MessageProducer] = []
        self._browsers: list[QueueBrowser] = []
        # Blocks of messages delivered to the application and not yet acknowledged
        # (CLIENT mode; consumed-in-transaction for transacted sessions).
        self._unacked: list[bytes] = []
        self._dups: list[bytes] = []
        self._transaction_id = 0
        self._closed = False
        self._reply_queue: TemporaryQueue | None = None
        self._reply_consumer: MessageConsumer | None = None
        self._reply_producer: MessageProducer | None = None
        self._request_lock = asyncio.Lock()

    @property
    def connection(self) -> Connection:
        return self._connection

    @property
    def is_closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateException("session is closed")
        self._connection._check_open()

    # ----------------------------------------------------------- factories

    @staticmethod
    def queue(name: str) -> Queue:
        return Queue(name)

    @staticmethod
    def topic(name: str) -> Topic:
        return Topic(name)

    async def create_producer(
        self,
        destination: Destination | None = None,
        *,
        persistent: bool = True,
        priority: int = 4,
        ttl_ms: int = 0,
        ack_on_produce: bool | None = None,
    ) -> MessageProducer:
        """A producer for ``destination`` (or an unidentified one if None)."""
        self._check_open()
        prod = MessageProducer(
            self,
            destination,
            persistent=persistent,
            priority=priority,
            ttl_ms=ttl_ms,
            ack_on_produce=ack_on_produce,
        )
        if destination is not None:
            await prod._target(destination)
        self._producers.append(prod)
        return prod

    async def create_consumer(
        self,
        destination: Destination,
        selector: str | None = None,
        *,
        no_local: bool = False,
        prefetch: int = 1000,
    ) -> MessageConsumer:
        """A consumer; ``prefetch`` is the consumer flow limit sent as JMQSize."""
        return await self._add_consumer(destination, selector, no_local, prefetch, None)

    async def create_durable_subscriber(
        self,
        topic: Topic,
        name: str,
        selector: str | None = None,
        *,
        no_local: bool = False,
        prefetch: int = 1000,
    ) -> MessageConsumer:
        """A durable topic subscription named ``name``."""
        if not isinstance(topic, Topic):
            raise JMSException("durable subscriptions need a topic")
        return await self._add_consumer(topic, selector, no_local, prefetch, name)

    async def create_shared_consumer(
        self,
        topic: Topic,
        name: str,
        selector: str | None = None,
        *,
        prefetch: int = 1000,
    ) -> MessageConsumer:
        """A consumer on the JMS 2.0 shared non-durable subscription ``name``.

        Consumers on one shared subscription (same client id, or none) take its
        messages in turn; it lasts while it has consumers.
        """
        if not isinstance(topic, Topic):
            raise JMSException("shared subscriptions need a topic")
        return await self._add_consumer(topic, selector, False, prefetch, None, name)

    async def create_shared_durable_consumer(
        self,
        topic: Topic,
        name: str,
        selector: str | None = None,
        *,
        prefetch: int = 1000,
    ) -> MessageConsumer:
        """A consumer on the JMS 2.0 shared durable subscription ``name`` (kept, with
        its messages, while no consumer is attached; delete it with ``unsubscribe``)."""
        if not isinstance(topic, Topic):
            raise JMSException("durable subscriptions need a topic")
        return await self._add_consumer(topic, selector, False, prefetch, name, name)

    async def _add_consumer(
        self,
        destination: Destination,
        selector: str | None,
        no_local: bool,
        prefetch: int,
        durable_name: str | None,
        shared_name: str | None = None,
    ) -> MessageConsumer:
        self._check_open()
        if selector is not None and not selector.strip():
            selector = None
        cons = MessageConsumer(
            self, destination, selector, no_local, prefetch, durable_name, shared_name
        )
        await cons._register()
        self._consumers.append(cons)
        return cons

    async def unsubscribe(self, name: str) -> None:
        """Delete durable subscription ``name`` (DELETE_CONSUMER with JMQDurableName;
        the broker answers 409 while a consumer uses it)."""
        self._check_open()
        await self._connection._request(
            PacketType.DELETE_CONSUMER, {JMQ_DURABLE_NAME: name}, what=repr(name)
        )

    async def create_browser(self, queue: Queue, selector: str | None = None) -> QueueBrowser:
        """A queue browser (VERIFY_DESTINATION now; BROWSE/DELIVER when read)."""
        self._check_open()
        if not isinstance(queue, Queue):
            raise JMSException("only queues can be browsed")
        if selector is not None and not selector.strip():
            selector = None
        props: dict[str, object] = {
            JMQ_DESTINATION: queue.name,
            JMQ_DEST_TYPE: JInt(queue.dest_type),
        }
        if selector is not None:
            props[JMQ_SELECTOR] = selector
        reply = await self._connection._request(
            PacketType.VERIFY_DESTINATION,
            props,
            ok=(Status.OK, Status.NOT_FOUND),
            what=queue.name,
            selector=selector is not None,
        )
        if reply.properties.get(JMQ_STATUS) == Status.NOT_FOUND and not reply.properties.get(
            JMQ_CAN_CREATE
        ):
            raise status_error(PacketType.VERIFY_DESTINATION, Status.NOT_FOUND, what=queue.name)
        browser = QueueBrowser(self, queue, selector)
        self._browsers.append(browser)
        return browser

    async def create_temporary_queue(self) -> TemporaryQueue:
        """A temporary queue owned by this session's connection."""
        self._check_open()
        return await self._connection.create_temporary_queue()

    async def create_temporary_topic(self) -> TemporaryTopic:
        """A temporary topic owned by this session's connection."""
        self._check_open()
        return await self._connection.create_temporary_topic()

    async def request(
        self,
        destination: Destination,
        message: Message,
        timeout: float | None = None,
        *,
        persistent: bool = False,
    ) -> Message | None:
        """Send ``message`` with JMSReplyTo set to a temporary queue and wait for one reply.

        The temporary queue and its consumer are made on first use and kept for the
        session's life (like a Java ``QueueRequestor``).  Returns None on timeout.
        Requests on one session are serialised; a reply whose JMSCorrelationID names
        neither this request's JMSMessageID nor its JMSCorrelationID is skipped.
        """
        self._check_open()
        async with self._request_lock:
            if self._reply_consumer is None:
                self._reply_queue = await self._connection.create_temporary_queue()
                self._reply_consumer = await self.create_consumer(self._reply_queue)
                self._reply_producer = await self.create_producer(None)
            assert self._reply_producer is not None
            message.reply_to = self._reply_queue
            await self._reply_producer.send(message, destination=destination, persistent=persistent)
            wanted = {message.message_id, message.correlation_id}
            loop = self._connection._loop
            deadline = None if timeout is None else loop.time() + timeout
            while True:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                reply = await self._reply_consumer.receive(left)
                # A late reply to an earlier request that timed out is skipped.
                if reply is None or reply.correlation_id is None or reply.correlation_id in wanted:
                    return reply

    # --------------------------------------------------------- acknowledgement

    def _ack_packet_fields(self) -> dict[int, object] | None:
        return {VH_TRANSACTIONID: self._transaction_id} if self.transacted else None

    async def _ack_wait(self, blocks: list[bytes]) -> None:
        await self._connection._request(
            PacketType.ACKNOWLEDGE, body=b"".join(blocks), fields=self._ack_packet_fields()
        )

    def _ack_nowait(self, blocks: list[bytes]) -> None:
        self._connection._send(
            PacketType.ACKNOWLEDGE, body=b"".join(blocks), fields=self._ack_packet_fields()
        )

    def _flush_dups(self) -> None:
        """Send the batched DUPS_OK acknowledgements (no A, no reply)."""
        blocks = self._dups
        if blocks:
            self._dups = []
            conn = self._connection
            if conn._transport is not None and not conn._closed:
                self._ack_nowait(blocks)

    async def _client_acknowledge(self) -> None:
        """Acknowledge everything delivered and unacknowledged (CLIENT mode only)."""
        if self.ack_mode != AckMode.CLIENT_ACKNOWLEDGE:
            return
        self._check_open()
        blocks = self._unacked
        if not blocks:
            return
        self._unacked = []
        if self.ack_on_acknowledge:
            await self._ack_wait(blocks)
        else:
            self._ack_nowait(blocks)

    async def acknowledge(self) -> None:
        """Same as ``message.acknowledge()`` for any message of this session."""
        await self._client_acknowledge()

    # -------------------------------------------------------- recover / txn

    def _take_queued_blocks(self) -> list[bytes]:
        """Blocks of prefetched, undelivered messages; the consumers' buffers are emptied."""
        blocks: list[bytes] = []
        for c in self._consumers:
            blocks.extend(c._drain_queue())
        return blocks

    async def _redeliver_all(self) -> None:
        """Stop the session, give back buffered and unacknowledged messages, resume.

        Same order as the Java client: STOP (session), REDELIVER of the buffered
        messages with JMQSetRedelivered=false, REDELIVER of the delivered ones with
        true, then START for the session.
        """
        conn = self._connection
        sid = {JMQ_SESSION_ID: JLong(self.session_id)}
        await conn._request(PacketType.STOP, sid)
        queued = self._take_queued_blocks()
        delivered = self._unacked + self._dups
        self._unacked = []
        self._dups = []
        if queued:
            conn._send(PacketType.REDELIVER, {JMQ_SET_REDELIVERED: False}, b"".join(queued))
        if delivered:
            props: dict[str, object] = {JMQ_SET_REDELIVERED: True}
            if self.transacted and self._transaction_id:
                props[JMQ_TRANSACTION_ID] = JLong(self._transaction_id)
            conn._send(PacketType.REDELIVER, props, b"".join(delivered))
        conn._send(PacketType.START, sid)
        for c in self._consumers:
            c._after_recover()

    async def recover(self) -> None:
        """Redeliver every unacknowledged message, marked redelivered (not transacted)."""
        self._check_open()
        if self.transacted:
            raise IllegalStateException("recover() on a transacted session")
        if self.ack_mode == AckMode.NO_ACKNOWLEDGE:
            raise IllegalStateException("recover() in NO_ACKNOWLEDGE mode")
        await self._redeliver_all()

    async def _start_transaction(self) -> None:
        reply = await self._connection._request(
            PacketType.START_TRANSACTION, {JMQ_SESSION_ID: JLong(self.session_id)}
        )
        tid = reply.properties.get(JMQ_TRANSACTION_ID)
        if tid is None:
            raise JMSException("START_TRANSACTION_REPLY without JMQTransactionID")
        self._transaction_id = int(tid)  # type: ignore[call-overload]

    async def commit(self) -> None:
        """Commit the current transaction and start the next one."""
        self._check_open()
        if not self.transacted:
            raise IllegalStateException("commit() on a non-transacted session")
        await self._connection._request(
            PacketType.COMMIT_TRANSACTION, {JMQ_TRANSACTION_ID: JLong(self._transaction_id)}
        )
        self._unacked = []
        await self._start_transaction()

    async def rollback(self) -> None:
        """Roll back: sent messages are dropped, consumed ones come back redelivered."""
        self._check_open()
        if not self.transacted:
            raise IllegalStateException("rollback() on a non-transacted session")
        await self._redeliver_all()
        await self._connection._request(
            PacketType.ROLLBACK_TRANSACTION, {JMQ_TRANSACTION_ID: JLong(self._transaction_id)}
        )
        await self._start_transaction()

    # ------------------------------------------------------------------ close

    async def close(self) -> None:
        """Close consumers (DELETE_CONSUMER), producers (DELETE_PRODUCER), then DESTROY_SESSION."""
        await self._close()

    async def _close(self, from_connection: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        conn = self._connection
        try:
            for c in list(self._consumers):
                await c._close()
            for p in list(self._producers):
                await p._close()
            for b in list(self._browsers):
                b._closed = True
            if self.transacted and self._transaction_id and conn._transport is not None:
                await conn._request(
                    PacketType.ROLLBACK_TRANSACTION,
                    {JMQ_TRANSACTION_ID: JLong(self._transaction_id)},
                    ok=(Status.OK, Status.NOT_FOUND, Status.BAD_REQUEST),
                )
                self._transaction_id = 0
            if conn._transport is not None:
                await conn._request(
                    PacketType.DESTROY_SESSION, {JMQ_SESSION_ID: JLong(self.session_id)}
                )
        finally:
            if self in conn._sessions:
                conn._sessions.remove(self)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self._connection._maybe_sync(coro)

    def __repr__(self) -> str:
        return f"<Session id={self.session_id} mode={self.ack_mode.name}>"


__all__ = ["Session"]
