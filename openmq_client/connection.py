"""The client connection: port mapper lookup, handshake, and the packet pump.

Why one module (about 950 lines): the port mapper lookup, the handshake, request/reply
correlation and write batching share one connection's state and buffers; sessions,
producers, consumers and messages have their own modules.

One :class:`Connection` owns one TCP stream driven by an :class:`asyncio.Protocol`
(not streams: the read path is one callback per chunk, decoded by the shared sans-IO
:class:`~broker.protocol.packet.PacketReader`).  Requests carry the A flag and a
per-connection correlation number in the fixed header's consumerID (counting from 1,
as the Java client does); the broker echoes it in the reply, which resolves a future.
JMS messages from the broker are routed by the same field, which then holds the
broker-assigned consumer id.

Writes are queued and flushed once per event-loop turn with ``writelines``, so a burst
of sends or acknowledgements becomes one system call.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import platform
import ssl as _ssl
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from broker.protocol.auth import AUTH_BASIC, AUTH_DIGEST, encode_auth_body, encode_basic_password
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_ACK_MODE,
    JMQ_AUTH_TYPE,
    JMQ_BLOCK,
    JMQ_CHALLENGE,
    JMQ_CLIENT_ID,
    JMQ_CONNECTION_ID,
    JMQ_CONSUMER_ID,
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_GOODBYE_REASON,
    JMQ_GOODBYE_REASON_STRING,
    JMQ_HA_CLIENT,
    JMQ_NAMESPACE,
    JMQ_PRODUCER_ID,
    JMQ_PROTOCOL_LEVEL,
    JMQ_RBUFFER_SIZE,
    JMQ_REASON,
    JMQ_RECONNECTABLE,
    JMQ_SERVICE,
    JMQ_SESSION_ID,
    JMQ_SHARE,
    JMQ_SIZE,
    JMQ_STATUS,
    JMQ_USER_AGENT,
    JMQ_VERSION,
)
from broker.protocol.packet import BadPacket, Packet, PacketError, PacketReader, build_packet
from broker.protocol.portmapper import PortMapperError, encode_request, parse_table
from broker.protocol.sysmsgid import ip_field
from broker.protocol.types import (
    FLAG_A,
    FLAG_F,
    OPENMQ_VERSION,
    TEMP_PREFIX,
    AckMode,
    PacketType,
    Status,
)

from .destination import Destination, TemporaryQueue, TemporaryTopic
from .errors import (
    BrokerUnreachableException,
    IllegalStateException,
    JMSException,
    JMSSecurityException,
    ResourceAllocationException,
    status_error,
)
from .session import Session
from .wire import FLUSH_THRESHOLD, next_sequence, reply_status

if TYPE_CHECKING:
    from .consumer import _Sink
    from .producer import _Target
    from .sync import _Runner

log = logging.getLogger(__name__)

T = TypeVar("T")

CLIENT_VERSION = OPENMQ_VERSION  # what it reports (JMQVersion); a test changes it
PROTOCOL_LEVEL = 500
DEFAULT_FLOW_COUNT = 100


_MESSAGE_MAX = 6

# How long close() waits for the broker to answer STOP ... GOODBYE before dropping.
CLOSE_TIMEOUT = 30.0


def user_agent() -> str:
    """The JMQUserAgent string, shaped like the Java client's."""
    return (
        f"Message Queue/{CLIENT_VERSION} (Python; {platform.system()} "
        f"{platform.release()} {platform.machine()})"
    )


class _Protocol(asyncio.Protocol):
    """Thin adapter from asyncio callbacks to the connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn._connection_made(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.conn._data_received(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._connection_lost(exc)

    def pause_writing(self) -> None:
        self.conn._write_paused = True

    def resume_writing(self) -> None:
        self.conn._resume_writing()


class Connection:
    """A JMS connection to a broker (create it with :func:`connect`)."""

    def __init__(
        self,
        *,
        user: str = "guest",
        password: str = "guest",
        flow_count: int = DEFAULT_FLOW_COUNT,
        connection_flow_limit: int | None = None,
        ping_interval: float | None = 30.0,
        request_timeout: float | None = None,
        enable_shared_client_id: bool = False,
        enable_shared_subscriptions: bool = False,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._user = user
        self._password = password
        self.flow_count = flow_count
        self.connection_flow_limit = connection_flow_limit
        self.ping_interval = ping_interval
        self.request_timeout = request_timeout
        # imqEnableSharedClientID / imqEnableSharedSubscriptions: JMQShare on
        # SET_CLIENTID and durable subscribers / on other consumers (OpenMQ sharing).
        self.enable_shared_client_id = enable_shared_client_id
        self.enable_shared_subscriptions = enable_shared_subscriptions

        self._transport: asyncio.Transport | None = None
        self._reader = PacketReader()
        self._wbuf: list[bytes] = []
        self._wsize = 0
        self._flush_scheduled = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._activity = False
        self._ping_handle: asyncio.TimerHandle | None = None

        self._next_cid = itertools.count(1).__next__
        self._pending: dict[
            int, tuple[asyncio.Future[Packet], Callable[[Packet], None] | None]
        ] = {}
        self._hs_queue: asyncio.Queue[Packet | None] | None = None
        self._consumers: dict[int, _Sink] = {}
        self._producers: dict[int, _Target] = {}
        self._sessions: list[Session] = []
        self._temp_counter = 0

        # Connection-level flow, client -> broker (HELLO_REPLY JMQSize).
        self._send_credit = -1
        self._send_resume: asyncio.Future[None] | None = None
        # Connection-level flow, broker -> client (F flag on deliveries).
        self._in_queue = 0
        self._resume_requested = False

        self._started = False
        self._closing = False
        self._closed = False
        self._lost = asyncio.Event()
        self._exception_listener: Callable[[JMSException], Any] | None = None
        self._sync_runner: _Runner | None = None
        self._client_id: str | None = None

        self.local_address = ""
        self.local_port = 0
        self._ip = ip_field(None)
        self.connection_id: int | None = None
        self.broker_protocol_level = PROTOCOL_LEVEL
        self.broker_version: str | None = None
        self.service: str | None = None
        self.auth_type: str | None = None
        self.hello_reply: dict[str, object] = {}

    # ------------------------------------------------------------------ state

    @property
    def client_id(self) -> str | None:
        return self._client_id

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def is_started(self) -> bool:
        return self._started

    def set_exception_listener(self, listener: Callable[[JMSException], Any] | None) -> None:
        """Called (sync or async) when the broker says GOODBYE or the connection breaks."""
        self._exception_listener = listener

    def _check_open(self) -> None:
        if self._closed or self._closing:
            raise IllegalStateException("connection is closed")

    def _maybe_sync(self, coro: Coroutine[Any, Any, T]) -> Any:
        """Return ``coro``, or run it to completion when called from a sync-API thread."""
        runner = self._sync_runner
        if runner is not None and not runner.in_loop_thread():
            return runner.run(coro)
        return coro

    # ---------------------------------------------------------------- transport

    def _connection_made(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        sock = transport.get_extra_info("sockname")
        if sock:
            self.local_address = sock[0]
            self.local_port = sock[1]
            try:
                self._ip = ip_field(sock[0].split("%", 1)[0])
            except ValueError:
                self._ip = ip_field(None)

    def _connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        was_closing = self._closing
        self._closed = True
        self._started = False
        if self._ping_handle is not None:
            self._ping_handle.cancel()
        err = BrokerUnreachableException(
            f"connection to broker lost{': ' + str(exc) if exc else ''}"
        )
        pending, self._pending = self._pending, {}
        for fut, _hook in pending.values():
            if not fut.done():
                fut.set_exception(err)
        if self._hs_queue is not None:
            self._hs_queue.put_nowait(None)
        for sink in list(self._consumers.values()):
            sink._connection_closed()
        for t in list(self._producers.values()):
            t._wake()
        if self._send_resume is not None and not self._send_resume.done():
            self._send_resume.set_result(None)
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)
        self._drain_waiters.clear()
        self._lost.set()
        # During the handshake connect() raises the reason itself (a refused login, ...);
        # the broker closing the socket after it is no second event worth reporting.
        if not was_closing and not self._handshaking:
            self._notify(err)

    def _notify(self, err: JMSException) -> None:
        listener = self._exception_listener
        if listener is None:
            log.warning("connection %s: %s", self.connection_id, err)
            return
        try:
            r = listener(err)
            if inspect.isawaitable(r):
                self._loop.create_task(r)  # type: ignore[arg-type]
        except Exception:
            log.exception("exception listener failed")

    def _resume_writing(self) -> None:
        self._write_paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def _drain(self) -> None:
        """Wait while the transport's buffer is above its high-water mark."""
        if self._write_paused and self._transport is not None:
            w = self._loop.create_future()
            self._drain_waiters.append(w)
            await w

    def _write(self, data: bytes) -> None:
        self._wbuf.append(data)
        self._wsize += len(data)
        self._activity = True
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _write_now(self, data: bytes) -> None:
        """Write a request the caller is about to wait for at once, after anything queued
        (saves the loop turn of the deferred flush on a round trip)."""
        if self._wbuf:
            self._write(data)
            self._flush()
            return
        self._activity = True
        t = self._transport
        if t is not None and not t.is_closing():
            t.write(data)

    def _flush(self) -> None:
        self._flush_scheduled = False
        buf = self._wbuf
        if not buf:
            return
        self._wbuf = []
        self._wsize = 0
        t = self._transport
        if t is not None and not t.is_closing():
            t.writelines(buf)

    async def _throttle(self) -> None:
        """Back-pressure for senders that do not wait for replies."""
        if self._wsize >= FLUSH_THRESHOLD:
            self._flush()
            # Give the loop a turn: lets replies, deliveries and RESUME_FLOWs in.
            await asyncio.sleep(0)
        if self._write_paused:
            await self._drain()

    def _send(
        self,
        ptype: int,
        props: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        fields: Mapping[int, object] | None = None,
        flags: int = 0,
        consumer_id: int = 0,
    ) -> None:
        """Queue a control packet for writing."""
        self._write(
            build_packet(
                ptype,
                props=props,
                body=body,
                flags=flags,
                consumer_id=consumer_id,
                fields=fields,
                ip=self._ip,
                port=self.local_port,
                sequence=next_sequence(),
            )
        )

    # ------------------------------------------------------------------ requests

    def _register(
        self, hook: Callable[[Packet], None] | None = None
    ) -> tuple[int, asyncio.Future[Packet]]:
        cid = self._next_cid()
        fut: asyncio.Future[Packet] = self._loop.create_future()
        self._pending[cid] = (fut, hook)
        return cid, fut

    async def _await_reply(self, cid: int, fut: asyncio.Future[Packet], what: str) -> Packet:
        if self.request_timeout is None:
            return await fut
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.request_timeout)
        except TimeoutError:
            self._pending.pop(cid, None)
            raise JMSException(f"no reply to {what} within {self.request_timeout} s") from None

    async def _request(
        self,
        ptype: int,
        props: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        fields: Mapping[int, object] | None = None,
        hook: Callable[[Packet], None] | None = None,
        ok: tuple[int, ...] = (Status.OK,),
        what: str = "",
        selector: bool = False,
    ) -> Packet:
        """Send a request with the A flag and wait for its reply.

        ``hook`` runs synchronously when the reply is read, before any later packet is
        dispatched (used to register consumer/producer ids before their traffic).
        Raises the mapped :class:`JMSException` if the status is not in ``ok``.
        """
        self._check_live()
        cid, fut = self._register(hook)
        self._send(ptype, props, body, fields=fields, flags=FLAG_A, consumer_id=cid)
        reply = await self._await_reply(cid, fut, PacketType(ptype).name)
        status = reply_status(reply)
        if status not in ok:
            raise status_error(
                ptype, status, reply.properties.get(JMQ_REASON), what=what, selector=selector
            )  # type: ignore[arg-type]
        return reply

    def _check_live(self) -> None:
        if self._closed or self._transport is None:
            raise IllegalStateException("connection is closed")

    # ------------------------------------------------------------------ reading

    def _data_received(self, data: bytes) -> None:
        self._activity = True
        try:
            packets = self._reader.feed(data)
        except PacketError as exc:
            log.error("corrupt stream from broker: %s", exc)
            if self._transport is not None:
                self._transport.abort()
            return
        consumers = self._consumers
        for p in packets:
            t = p.type
            if 0 < t <= _MESSAGE_MAX:
                if p.__class__ is BadPacket:
                    log.warning("undecodable message packet dropped: %s", p.reason)  # type: ignore[union-attr]
                    continue
                sink = consumers.get(p.consumer_id)
                if sink is not None:
                    sink._on_message(p)  # type: ignore[arg-type]
                elif log.isEnabledFor(logging.DEBUG):
                    log.debug("message for unknown consumer %d dropped", p.consumer_id)
                if p.flags & FLAG_F:
                    self._resume_requested = True
                    self._check_resume()
            else:
                self._on_control(p)  # type: ignore[arg-type]

    def _on_control(self, p: Packet | BadPacket) -> None:
        t = p.type
        if p.__class__ is BadPacket:
            log.warning("undecodable %s from broker: %s", t, p.reason)  # type: ignore[union-attr]
            entry = self._pending.pop(p.consumer_id, None)
            if entry is not None and not entry[0].done():
                entry[0].set_exception(JMSException(f"undecodable reply: {p.reason}"))  # type: ignore[union-attr]
            return
        assert isinstance(p, Packet)
        if t == PacketType.PING:
            if p.flags & FLAG_A:
                self._send(
                    PacketType.PING_REPLY, {JMQ_STATUS: JInt(200)}, consumer_id=p.consumer_id
                )
            return
        if t == PacketType.PING_REPLY:
            return
        if t == PacketType.RESUME_FLOW:
            self._on_resume_flow(p)
            return
        if t == PacketType.GOODBYE:
            self._on_goodbye(p)
            return
        if self._hs_queue is not None:
            self._hs_queue.put_nowait(p)
            return
        entry = self._pending.pop(p.consumer_id, None)
        if entry is None:
            log.debug("unsolicited %s (cid %d) ignored", p.type_name, p.consumer_id)
            return
        fut, hook = entry
        if hook is not None:
            try:
                hook(p)
            except Exception as exc:  # a malformed reply must not kill the read loop
                if not fut.done():
                    fut.set_exception(exc)
                return
        if not fut.done():
            fut.set_result(p)

    def _on_resume_flow(self, p: Packet) -> None:
        props = p.properties
        size = props.get(JMQ_SIZE)
        pid = props.get(JMQ_PRODUCER_ID)
        if pid is not None:
            target = self._producers.get(pid)  # type: ignore[call-overload]
            if target is not None:
                target._resume(size)  # type: ignore[arg-type]
            return
        if props.get(JMQ_CONSUMER_ID) is not None:
            return
        self._send_credit = -1 if size is None or size < 0 else int(size)  # type: ignore[operator,call-overload]
        if self._send_credit != 0:
            fut, self._send_resume = self._send_resume, None
            if fut is not None and not fut.done():
                fut.set_result(None)

    def _on_goodbye(self, p: Packet) -> None:
        props = p.properties
        reason = props.get(JMQ_GOODBYE_REASON_STRING) or props.get(JMQ_GOODBYE_REASON)
        err = JMSException(f"broker closed the connection: {reason}")
        was_closing = self._closing
        self._closing = True
        if not was_closing and not self._handshaking:
            self._notify(err)
        if self._transport is not None:
            self._transport.close()

    # --------------------------------------------------------- connection flow

    def _check_resume(self) -> None:
        """Answer an F flag: resume at once unless a client-side limit is configured."""
        if not self._resume_requested:
            return
        limit = self.connection_flow_limit
        if limit is None or self._in_queue < limit:
            self._resume_requested = False
            if self._transport is not None:
                self._send(PacketType.RESUME_FLOW, {JMQ_SIZE: JInt(self.flow_count)})

    def _delivered(self) -> None:
        """A delivered message left a consumer's buffer (for the connection flow count)."""
        self._in_queue -= 1
        if self._resume_requested:
            self._check_resume()

    async def _wait_send_credit(self) -> None:
        fut = self._send_resume
        if fut is None:
            fut = self._send_resume = self._loop.create_future()
        await fut
        self._check_live()

    # ---------------------------------------------------------------- handshake

    async def _open(
        self,
        host: str,
        port: int,
        timeout: float | None,
        ssl_context: _ssl.SSLContext | None = None,
    ) -> None:
        if ssl_context is None:
            opening = self._loop.create_connection(lambda: _Protocol(self), host, port)
        else:
            opening = self._loop.create_connection(
                lambda: _Protocol(self), host, port, ssl=ssl_context, server_hostname=host
            )
        await asyncio.wait_for(opening, timeout)
        await asyncio.wait_for(self._handshake(), timeout)
        if self.ping_interval and self.ping_interval > 0:
            self._ping_handle = self._loop.call_later(self.ping_interval, self._ping_tick)

    @property
    def _handshaking(self) -> bool:
        return self._hs_queue is not None

    async def _hs_next(self) -> Packet:
        assert self._hs_queue is not None
        p = await self._hs_queue.get()
        if p is None:
            raise BrokerUnreachableException("connection closed during the handshake")
        return p

    async def _handshake(self) -> None:
        self._hs_queue = asyncio.Queue()
        props = {
            JMQ_RBUFFER_SIZE: JInt(self.flow_count),
            JMQ_PROTOCOL_LEVEL: JInt(PROTOCOL_LEVEL),
            JMQ_VERSION: CLIENT_VERSION,
            JMQ_USER_AGENT: user_agent(),
            JMQ_RECONNECTABLE: False,
            # This client never fails over, so it does not claim to be an HA client.
            JMQ_HA_CLIENT: False,
        }
        cid = self._next_cid()
        self._send(PacketType.HELLO, props, flags=FLAG_A, consumer_id=cid)
        reply = await self._hs_next()
        if reply.type != PacketType.HELLO_REPLY:
            raise JMSException(f"expected HELLO_REPLY, got {reply.type_name}")
        rp = reply.properties
        self.hello_reply = dict(rp)
        status = reply_status(reply)
        if status != Status.OK:
            if status in (Status.UNAVAILABLE, Status.TIMEOUT, Status.MOVED_PERMANENTLY):
                raise ResourceAllocationException(
                    f"broker refused the connection: {status}",
                    status,
                    rp.get(JMQ_REASON),  # type: ignore[arg-type]
                )
            raise status_error(PacketType.HELLO, status, rp.get(JMQ_REASON))  # type: ignore[arg-type]
        cid_prop = rp.get(JMQ_CONNECTION_ID)
        self.connection_id = None if cid_prop is None else int(cid_prop)  # type: ignore[call-overload]
        self.broker_protocol_level = int(rp.get(JMQ_PROTOCOL_LEVEL, PROTOCOL_LEVEL))  # type: ignore[call-overload]
        self.broker_version = rp.get(JMQ_VERSION)  # type: ignore[assignment]
        self.service = rp.get(JMQ_SERVICE)  # type: ignore[assignment]
        size = rp.get(JMQ_SIZE)
        self._send_credit = -1 if size is None or size < 0 else int(size)  # type: ignore[operator,call-overload]

        req = await self._hs_next()
        if req.type != PacketType.AUTHENTICATE_REQUEST:
            raise JMSException(f"expected AUTHENTICATE_REQUEST, got {req.type_name}")
        rq = req.properties
        st = rq.get(JMQ_STATUS)
        if st is not None and st != Status.OK:
            if st == Status.FORBIDDEN:
                raise JMSSecurityException("connection forbidden", st, rq.get(JMQ_REASON))  # type: ignore[arg-type]
            raise status_error(PacketType.HELLO, st, rq.get(JMQ_REASON))  # type: ignore[arg-type]
        auth_type = rq.get(JMQ_AUTH_TYPE)
        if rq.get(JMQ_CHALLENGE) is not True or not isinstance(auth_type, str):
            raise JMSSecurityException("broker sent no authentication challenge")
        self.auth_type = auth_type
        while req.type == PacketType.AUTHENTICATE_REQUEST:
            if req.properties.get(JMQ_AUTH_TYPE) != auth_type:
                raise JMSSecurityException(
                    f"authentication type changed from {auth_type} to "
                    f"{req.properties.get(JMQ_AUTH_TYPE)}"
                )
            body = self._auth_response(auth_type, req.body)
            cid = self._next_cid()
            self._send(
                PacketType.AUTHENTICATE,
                {JMQ_AUTH_TYPE: auth_type},
                body,
                flags=FLAG_A,
                consumer_id=cid,
            )
            req = await self._hs_next()
        if req.type != PacketType.AUTHENTICATE_REPLY:
            raise JMSException(f"expected AUTHENTICATE_REPLY, got {req.type_name}")
        status = reply_status(req)
        reason = req.properties.get(JMQ_REASON)
        if status in (Status.FORBIDDEN, Status.INVALID_LOGIN, Status.UNAUTHORIZED):
            raise JMSSecurityException(
                f"authentication failed for user {self._user!r}: {status}",
                status,
                reason,  # type: ignore[arg-type]
            )
        if status == Status.UNAVAILABLE:
            raise ResourceAllocationException("broker unavailable", status, reason)  # type: ignore[arg-type]
        if status != Status.OK:
            raise status_error(PacketType.AUTHENTICATE, status, reason)  # type: ignore[arg-type]
        self._hs_queue = None

    def _auth_response(self, auth_type: str, challenge: bytes) -> bytes:
        if auth_type == AUTH_BASIC:
            return encode_auth_body(self._user, encode_basic_password(self._password))
        if auth_type == AUTH_DIGEST:
            return encode_auth_body(
                self._user, digest_credential(self._user, self._password, challenge)
            )
        raise JMSSecurityException(f"unsupported authentication type {auth_type!r}")

    def _ping_tick(self) -> None:
        if self._closed or self._transport is None:
            return
        if not self._activity:
            # Keep-alive without A, like the Java client's default.
            self._send(PacketType.PING)
        self._activity = False
        assert self.ping_interval
        self._ping_handle = self._loop.call_later(self.ping_interval, self._ping_tick)

    # --------------------------------------------------------------- JMS API

    async def set_client_id(
        self, client_id: str, *, shared: bool | None = None, namespace: str | None = None
    ) -> None:
        """SET_CLIENTID; raises InvalidClientIDException if the broker refuses it.

        ``shared`` (default: ``enable_shared_client_id``) lets other connections use the
        same id if they say so too; ``namespace`` (with ``shared``) keeps it unique
        among the connections that name the same namespace.
        """
        self._check_open()
        if self._client_id is not None:
            raise IllegalStateException(f"client id already set to {self._client_id!r}")
        if shared is None:
            shared = self.enable_shared_client_id
        props: dict[str, object] = {JMQ_CLIENT_ID: client_id, JMQ_SHARE: shared}
        if namespace is not None:
            props[JMQ_NAMESPACE] = namespace
        await self._request(PacketType.SET_CLIENTID, props, what=repr(client_id))
        self._client_id = client_id

    async def create_session(
        self,
        ack_mode: int = AckMode.AUTO_ACKNOWLEDGE,
        transacted: bool = False,
        *,
        ack_on_acknowledge: bool = True,
        dups_ok_limit: int = 64,
    ) -> Session:
        """Open a session.

        ``ack_on_acknowledge=False`` sends AUTO/CLIENT acknowledgements without waiting
        for the broker's reply (the Java client's ``imqAckOnAcknowledge=false``).
        ``dups_ok_limit`` is how many DUPS_OK acknowledgements are batched.
        """
        self._check_open()
        mode = AckMode.NONE if transacted else AckMode(ack_mode)
        props = None if transacted else {JMQ_ACK_MODE: JInt(int(mode))}
        reply = await self._request(PacketType.CREATE_SESSION, props)
        sid = reply.properties.get(JMQ_SESSION_ID)
        session = Session(
            self,
            -1 if sid is None else int(sid),  # type: ignore[call-overload]
            mode,
            transacted,
            ack_on_acknowledge=ack_on_acknowledge,
            dups_ok_limit=dups_ok_limit,
        )
        self._sessions.append(session)
        if transacted:
            await session._start_transaction()
        return session

    async def start(self) -> None:
        """Start (or resume) delivery: START, which the broker does not answer."""
        self._check_open()
        self._check_live()
        if not self._started:
            self._send(PacketType.START)
            self._started = True
            # Messages buffered while stopped may now be handed out.
            for s in self._sessions:
                for c in s._consumers:
                    c._wake()

    async def stop(self) -> None:
        """Stop delivery; returns once the broker confirmed with STOP_REPLY."""
        self._check_open()
        if self._started:
            self._started = False
            await self._request(PacketType.STOP)

    async def create_temporary_queue(self) -> TemporaryQueue:
        """A queue that lives as long as this connection."""
        return await self._create_temporary(True)  # type: ignore[return-value]

    async def create_temporary_topic(self) -> TemporaryTopic:
        """A topic that lives as long as this connection."""
        return await self._create_temporary(False)  # type: ignore[return-value]

    async def _create_temporary(self, queue: bool) -> TemporaryQueue | TemporaryTopic:
        self._check_open()
        self._temp_counter += 1
        owner = self._client_id or self.local_address
        kind = "queue" if queue else "topic"
        name = f"{TEMP_PREFIX}{kind}/{owner}/{self.local_port}/{self._temp_counter}"
        dest: TemporaryQueue | TemporaryTopic = (
            TemporaryQueue(name, self) if queue else TemporaryTopic(name, self)
        )
        await self._create_destination(dest)
        return dest

    async def _delete_temporary(self, dest: Destination) -> None:
        self._check_open()
        # NOT_FOUND is fine: the broker may not have made it yet, as the Java client says.
        await self._request(
            PacketType.DESTROY_DESTINATION,
            {JMQ_DESTINATION: dest.name, JMQ_DEST_TYPE: JInt(dest.dest_type)},
            ok=(Status.OK, Status.NOT_FOUND),
            what=dest.name,
        )

    async def _create_destination(self, dest: Destination) -> None:
        """CREATE_DESTINATION, sent before every producer, consumer and temp destination."""
        props = {JMQ_DESTINATION: dest.name, JMQ_DEST_TYPE: JInt(dest.dest_type)}
        ok = (Status.OK, Status.CONFLICT, Status.RETRY)
        reply = await self._request(PacketType.CREATE_DESTINATION, props, ok=ok, what=dest.name)
        if reply_status(reply) == Status.RETRY:
            await self._request(
                PacketType.CREATE_DESTINATION,
                props,
                ok=(Status.OK, Status.CONFLICT),
                what=dest.name,
            )

    async def close(self) -> None:
        """Close everything politely and say GOODBYE; waits for GOODBYE_REPLY."""
        if self._closed or self._closing:
            if not self._closed:
                await self._lost.wait()
            return
        self._closing = True
        try:
            await asyncio.wait_for(self._say_goodbye(), CLOSE_TIMEOUT)
        except (TimeoutError, JMSException) as exc:
            log.debug("error while closing: %s", exc)
        finally:
            self._flush()
            if self._transport is not None:
                self._transport.close()
            try:
                await asyncio.wait_for(self._lost.wait(), 5)
            except TimeoutError:
                if self._transport is not None:
                    self._transport.abort()
            self._closed = True

    async def _say_goodbye(self) -> None:
        if self._transport is None:
            return
        if self._started:
            self._started = False
            await self._request(PacketType.STOP)
        for s in list(self._sessions):
            await s._close(from_connection=True)
        props: dict[str, object] = {JMQ_BLOCK: self._client_id is not None}
        if self.connection_id is not None:
            props[JMQ_CONNECTION_ID] = JLong(self.connection_id)
        await self._request(PacketType.GOODBYE, props)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<Connection id={self.connection_id} {self.local_address}:{self.local_port}>"


def digest_credential(user: str, password: str, nonce: bytes) -> str:
    """The digest response: ``MD5STR(MD5STR(user:password) + ":" + nonce)``."""
    from broker.security.digest import md5str

    return md5str(md5str(user + ":" + password) + ":" + nonce.decode("utf-8"))


async def lookup_service(
    host: str,
    port: int = 7676,
    *,
    service_type: str = "NORMAL",
    service_name: str | None = None,
    timeout: float | None = 60.0,
    protocol: str = "tcp",
) -> int:
    """Ask the port mapper for the port of a service: the first line with this
    ``protocol`` (``tcp``, or ``tls`` for the SSL services) and ``service_type``, or the
    line named ``service_name``."""

    async def read_table() -> bytes:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(encode_request())
            data = bytearray()
            while True:
                line = await reader.readline()
                if not line:
                    break
                data += line
                if line.strip() == b".":
                    break
            return bytes(data)
        finally:
            writer.close()

    try:
        data = await asyncio.wait_for(read_table(), timeout)
    except (TimeoutError, OSError) as exc:
        raise BrokerUnreachableException(
            f"cannot reach the port mapper at {host}:{port}: {exc}"
        ) from exc
    try:
        table = parse_table(data)
    except PortMapperError as exc:
        raise JMSException(str(exc)) from exc
    if _version_tuple(table.packet_version) < (3, 0, 1):
        raise JMSException(f"broker packet version {table.packet_version} is not supported")
    entry = table.find(service_type, protocol, service_name)
    if entry is None:
        kind = service_name or (service_type if protocol == "tcp" else f"{protocol} {service_type}")
        raise JMSException(f"port mapper at {host}:{port} lists no {kind} service")
    if entry.port <= 0:
        raise ResourceAllocationException(f"service {entry.name} is paused")
    return entry.port


def client_ssl_context(
    ssl: bool | _ssl.SSLContext, verify: bool = True, cafile: str | None = None
) -> _ssl.SSLContext:
    """The client context for ``connect(ssl=...)``: a given context as it is; otherwise
    TLS 1.2+ verifying the broker against ``cafile`` (e.g. the broker's ``keystore.crt``)
    or the system's CAs, or, with ``verify=False``, trusting any certificate (self-signed
    development setups: encrypted, but open to a man in the middle)."""
    if isinstance(ssl, _ssl.SSLContext):
        return ssl
    ctx = _ssl.create_default_context(cafile=cafile)
    ctx.minimum_version = _ssl.TLSVersion.TLSv1_2
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = _ssl.CERT_NONE
    return ctx


def _version_tuple(v: str) -> tuple[int, ...]:
    """``"301"`` or ``"3.0.1"`` as a comparable tuple."""
    if "." in v:
        return tuple(int(x) for x in v.split(".") if x.isdigit())
    return tuple(int(c) for c in v if c.isdigit())


async def connect(
    host: str = "127.0.0.1",
    port: int = 7676,
    *,
    user: str = "guest",
    password: str = "guest",
    direct: bool = False,
    service_name: str | None = None,
    service_type: str = "NORMAL",
    client_id: str | None = None,
    flow_count: int = DEFAULT_FLOW_COUNT,
    connection_flow_limit: int | None = None,
    ping_interval: float | None = 30.0,
    request_timeout: float | None = None,
    connect_timeout: float | None = 60.0,
    exception_listener: Callable[[JMSException], Any] | None = None,
    enable_shared_client_id: bool = False,
    enable_shared_subscriptions: bool = False,
    ssl: bool | _ssl.SSLContext = False,
    ssl_verify: bool = True,
    ssl_cafile: str | None = None,
) -> Connection:
    """Connect and authenticate.

    By default ``port`` is the port mapper's and the JMS service port is looked up;
    with ``direct=True`` it is the service port itself.  The authentication type is
    whatever the broker asks for (``basic`` or ``digest``).  ``flow_count`` is sent as
    ``JMQRBufferSize`` (messages the broker may push before it waits for RESUME_FLOW).
    ``enable_shared_client_id`` and ``enable_shared_subscriptions`` are OpenMQ's
    ``imqEnableSharedClientID`` and ``imqEnableSharedSubscriptions``.

    ``ssl`` (True or an :class:`ssl.SSLContext`) connects over TLS: the port mapper's
    first ``tls`` line of the type (ssljms, or ssladmin for ``service_type="ADMIN"``) is
    used.  With ``ssl=True`` the broker's certificate is verified against ``ssl_cafile``
    (or the system's CAs) unless ``ssl_verify=False``; see :func:`client_ssl_context`.
    """
    ssl_context = client_ssl_context(ssl, ssl_verify, ssl_cafile) if ssl else None
    if not direct:
        port = await lookup_service(
            host,
            port,
            service_type=service_type,
            service_name=service_name,
            timeout=connect_timeout,
            protocol="tls" if ssl_context is not None else "tcp",
        )
    conn = Connection(
        user=user,
        password=password,
        flow_count=flow_count,
        connection_flow_limit=connection_flow_limit,
        ping_interval=ping_interval,
        request_timeout=request_timeout,
        enable_shared_client_id=enable_shared_client_id,
        enable_shared_subscriptions=enable_shared_subscriptions,
    )
    conn.set_exception_listener(exception_listener)
    try:
        try:
            await conn._open(host, port, connect_timeout, ssl_context)
        except OSError as exc:
            raise BrokerUnreachableException(f"cannot connect to {host}:{port}: {exc}") from exc
        except TimeoutError as exc:
            raise BrokerUnreachableException(f"timed out connecting to {host}:{port}") from exc
        if client_id is not None:
            await conn.set_client_id(client_id)
    except BaseException:
        conn._closing = True
        conn._closed = True
        if conn._transport is not None:
            conn._transport.close()
        raise
    return conn


__all__ = ["Connection", "client_ssl_context", "connect", "digest_credential", "lookup_service"]
