"""One client connection: framing, the handshake, and the packet handlers.

An ``asyncio.Protocol`` (not streams) so each read is decoded and answered in one
callback, and everything written during one event-loop turn leaves in one
``writelines`` call.  The router is called synchronously; only user look-ups, which
touch the database, run in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.core.message import Message
from broker.core.router import RouterError
from broker.core.selector import SelectorError, compile_selector
from broker.core.session import Consumer, Session
from broker.protocol.auth import (
    AUTH_BASIC,
    AUTH_DIGEST,
    AuthBodyError,
    decode_auth_body,
    decode_basic_password,
)
from broker.protocol.errors import ProtocolError
from broker.protocol.javaser import encode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import (
    OFF_CONSUMER_ID,
    OFF_FLAGS,
    BadPacket,
    Packet,
    PacketReader,
    build_packet,
)
from broker.protocol.sysmsgid import SysMessageID
from broker.protocol.types import (
    CURRENT_PACKET_VERSION,
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_A,
    FLAG_C,
    FLAG_F,
    FLAG_I,
    FLAG_L,
    FLAG_Q,
    MESSAGE_TYPES,
    PACKET_TYPE_LIMIT,
    AckType,
    GoodbyeReason,
    PacketType,
    Status,
    TransactionState,
    XAFlag,
    is_reply,
    packet_type_name,
    reply_type,
)
from broker.protocol.xid import Xid, XidError, encode_xids
from broker.security.digest import constant_time_equals, digest_response, md5str

from .admin_service import handler as admin

if TYPE_CHECKING:
    from .broker import Broker, Service

log = logging.getLogger("broker.connection")

MIN_PROTOCOL_LEVEL = 350
MAX_PROTOCOL_LEVEL = 500
# After refusing a login the broker waits this long for the client to close first: the
# C client (libmqcrt) reports "connection closed" instead of the refusal when the socket's
# EOF arrives right behind the AUTHENTICATE_REPLY (its reader tears the connection down
# before the waiting call takes the reply).
REFUSED_LOGIN_LINGER = 2.0

_I64 = struct.Struct(">q")
_ACK_BLOCK = struct.Struct(">q32s")

# States of a connection.
NEW, AUTHENTICATING, READY, CLOSED = range(4)

# Packets a client may send before it has authenticated.
_PRE_AUTH = frozenset(
    {
        PacketType.HELLO,
        PacketType.AUTHENTICATE,
        PacketType.PING,
        PacketType.PING_REPLY,
        PacketType.GOODBYE,
    }
)


def _reply_template(ptype: int, status: int) -> bytes:
    return build_packet(ptype, props={"JMQStatus": JInt(status)}, timestamp=0)


# The commonest replies are fixed bytes; only the correlation id changes.
_SEND_REPLY_OK = _reply_template(PacketType.SEND_REPLY, Status.OK)
_ACK_REPLY_OK = _reply_template(PacketType.ACKNOWLEDGE_REPLY, Status.OK)


def _with_cid(template: bytes, consumer_id: int) -> bytearray:
    buf = bytearray(template)
    _I64.pack_into(buf, OFF_CONSUMER_ID, consumer_id)
    return buf


class ClientConnection(asyncio.Protocol):
    """The broker's side of one client connection (implements the router's ``Link``)."""

    def __init__(self, broker: Broker, service: Service) -> None:
        self.broker = broker
        self.router = broker.router
        self.service = service
        self.id = broker.router.uids.next()
        self.client_id: str | None = None
        self.state = NEW
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.reader = PacketReader(broker.max_packet_size)
        self.sessions: dict[int, Session] = {}
        # Consumer id -> session, kept after DELETE_CONSUMER so late acks still find it.
        self.consumer_sessions: dict[int, Session] = {}
        self.implicit_session: Session | None = None
        self.browsers: dict[int, object] = {}
        self.started = False
        self.protocol_level = 0
        self.user: str | None = None
        self.groups: frozenset[str] = frozenset()
        self.auth_type = AUTH_DIGEST
        self.nonce = ""
        self.user_agent = ""
        self.client_version = ""  # HELLO's JMQVersion, e.g. "4.5.2", "6.0.0"
        self.connected_at = time.time()
        self.last_read = time.monotonic()
        self.ping_outstanding = 0
        # Connection flow control towards the client (HELLO's JMQSize / JMQRBufferSize).
        self.flow_limit = -1
        self.flow_left = -1
        self.flow_paused = False
        self.write_paused = False
        self._out: list[bytes | bytearray] = []
        self._flush_scheduled = False
        self._blocked = False
        self._backlog: list[Packet | BadPacket] = []
        self._refused = False
        self._auth_timer: asyncio.TimerHandle | None = None
        self._closing = False
        self.msgs_in = 0
        self.msgs_out = 0
        # The service's traffic counters (GET_METRICS), shared by its connections.
        self.metrics = service.metrics
        # Access control of sends without a producer: (name, type) -> "" allowed or the
        # refusal, valid for one rule generation; refusals logged once per destination.
        self._acl_sends: dict[tuple[str, int], str] = {}
        self._acl_gen = -1
        self._acl_logged: set[tuple[str, int]] = set()

    # -- asyncio callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            # The dual-stack listener reports IPv4 clients as ::ffff:a.b.c.d.
            host = peer[0][7:] if peer[0].startswith("::ffff:") else peer[0]
            self.peer = f"{host}:{peer[1]}"
        self.broker.connection_opened(self)
        timeout = self.broker.auth_timeout
        if timeout > 0:
            self._auth_timer = asyncio.get_running_loop().call_later(timeout, self._auth_expired)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.state != CLOSED:
            self.state = CLOSED
            self._release()
        if self._auth_timer:
            self._auth_timer.cancel()
        self.broker.connection_closed(self)

    def pause_writing(self) -> None:
        # The client is not reading: stop pushing messages until the socket drains.
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.state == READY:
            self.router.redispatch(self.sessions.values())

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self.last_read = time.monotonic()
        self.ping_outstanding = 0
        try:
            packets = self.reader.feed(data)
        except ProtocolError as exc:
            self.fatal(f"unreadable data from {self.peer}: {exc}")
            return
        m = self.metrics
        m.packets_in += len(packets)
        m.packet_bytes_in += len(data)
        if self._blocked:
            self._backlog.extend(packets)
            return
        self._process(packets)

    # -- packet processing -------------------------------------------------------

    def _process(self, packets: list) -> None:
        for i, pkt in enumerate(packets):
            if self.state == CLOSED or self._closing:
                return
            if self._blocked:
                self._backlog.extend(packets[i:])
                return
            if type(pkt) is BadPacket:
                self._reply_error(
                    pkt.type, pkt.flags, pkt.consumer_id, Status.BAD_REQUEST, pkt.reason
                )
                self.fatal(f"malformed {packet_type_name(pkt.type)} packet: {pkt.reason}")
                return
            try:
                self._handle(pkt)
            except ProtocolError as exc:
                # Bad input, by type: every decoder in broker.protocol raises only this.
                self._reply_error(
                    pkt.type, pkt.flags, pkt.consumer_id, Status.BAD_REQUEST, str(exc)
                )
                self.fatal(f"malformed {pkt.type_name} packet: {exc}")
                return
            except Exception as exc:
                # Anything else is a bug in the broker, not in the client's bytes.
                log.exception("error handling %s from %s", pkt.type_name, self.peer)
                self._reply_error(
                    pkt.type, pkt.flags, pkt.consumer_id, Status.ERROR, f"internal error: {exc}"
                )

    def _handle(self, pkt: Packet) -> None:
        ptype = pkt.type
        if ptype in MESSAGE_TYPES:
            if self.state != READY:
                self._not_authenticated(pkt)
                return
            self.on_message(pkt)
            return
        handler = _HANDLERS.get(ptype)
        if handler is None:
            self._reply_error(
                ptype,
                pkt.flags,
                pkt.consumer_id,
                Status.BAD_REQUEST,
                f"unknown packet type {ptype}",
            )
            self.fatal(f"unknown packet type {ptype} from {self.peer}")
            return
        if self.state != READY and ptype not in _PRE_AUTH:
            self._not_authenticated(pkt)
            return
        handler(self, pkt)

    def _not_authenticated(self, pkt: Packet) -> None:
        self._reply_error(
            pkt.type, pkt.flags, pkt.consumer_id, Status.ERROR, "connection is not authenticated"
        )
        self.fatal(f"{pkt.type_name} before authentication from {self.peer}")

    # -- writing -------------------------------------------------------------------

    def write(self, data: bytes | bytearray) -> None:
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        t = self.transport
        if t is not None and not t.is_closing():
            t.writelines(out)
            m = self.metrics
            m.packets_out += len(out)
            m.packet_bytes_out += sum(map(len, out))

    def reply(
        self,
        pkt: Packet,
        status: int = Status.OK,
        props: dict | None = None,
        body: bytes = b"",
        reason: str | None = None,
    ) -> None:
        """Send ``pkt``'s reply (type + 1, same correlation id) if the client asked for one."""
        if not pkt.flags & FLAG_A:
            return
        p: dict[str, object] = {"JMQStatus": JInt(status)}
        if reason:
            p["JMQReason"] = reason
        if props:
            p.update(props)
        self.write(
            build_packet(reply_type(pkt.type), props=p, body=body, consumer_id=pkt.consumer_id)
        )

    def _reply_error(
        self, ptype: int, flags: int, consumer_id: int, status: int, reason: str
    ) -> None:
        """Answer a failed request that asked for a reply (A flag) and has a reply type."""
        if not flags & FLAG_A or not 0 < ptype < PACKET_TYPE_LIMIT or is_reply(ptype):
            return
        if ptype == PacketType.GOODBYE:
            return
        self.write(
            build_packet(
                reply_type(ptype),
                props={"JMQStatus": JInt(status), "JMQReason": reason},
                consumer_id=consumer_id,
            )
        )

    def send_goodbye(self, reason: int, text: str, exit_: bool = False) -> None:
        self.write(
            build_packet(
                PacketType.GOODBYE,
                props={
                    "JMQGoodbyeReason": JInt(reason),
                    "JMQGoodbyeReasonString": text,
                    "JMQExit": exit_,
                },
            )
        )

    def fatal(self, reason: str) -> None:
        """Log once, say GOODBYE, and close this connection only."""
        if self._closing or self.state == CLOSED:
            return
        log.warning("closing connection %s from %s: %s", self.id, self.peer, reason)
        self.send_goodbye(GoodbyeReason.CON_FATAL_ERROR, reason)
        self.close()

    def close(self) -> None:
        """Flush what is queued and close the socket."""
        if self._closing:
            return
        self._closing = True
        self._flush()
        if self.state != CLOSED:
            self.state = CLOSED
            self._release()
        if self.transport is not None:
            self.transport.close()

    def _release(self) -> None:
        sessions = list(self.sessions.values())
        if self.implicit_session is not None:
            sessions.append(self.implicit_session)
        self.sessions.clear()
        self.router.connection_closed(self, sessions)

    def _auth_expired(self) -> None:
        if self.state in (NEW, AUTHENTICATING):
            self.fatal("authentication not completed in time")

    # -- Link interface ----------------------------------------------------------

    def can_deliver(self) -> bool:
        return (
            self.started and not self.flow_paused and not self.write_paused and self.state == READY
        )

    def send_delivery(self, buf: bytearray) -> None:
        if self.flow_left > 0:
            self.flow_left -= 1
            if self.flow_left == 0:
                # The last message before the pause carries F.
                buf[OFF_FLAGS + 1] |= FLAG_F
                self.flow_paused = True
        self.msgs_out += 1
        m = self.metrics
        m.messages_out += 1
        m.message_bytes_out += len(buf)
        self.write(buf)

    # -- handshake -------------------------------------------------------------------

    def on_hello(self, pkt: Packet) -> None:
        if self.state != NEW:
            self.reply(pkt, Status.ERROR, reason="HELLO on a connection that already said HELLO")
            return
        if pkt.version != CURRENT_PACKET_VERSION:
            self.fatal(f"packet version {pkt.version} is not supported (clients before MQ 3.5)")
            return
        props = pkt.properties
        level = int(props.get("JMQProtocolLevel", 100))  # type: ignore[arg-type]
        if level > MAX_PROTOCOL_LEVEL or level < MIN_PROTOCOL_LEVEL:
            supported = MAX_PROTOCOL_LEVEL if level > MAX_PROTOCOL_LEVEL else MIN_PROTOCOL_LEVEL
            log.info(
                "protocol level %s from %s not supported, offering %s", level, self.peer, supported
            )
            self.reply(
                pkt,
                Status.BAD_VERSION,
                {"JMQProtocolLevel": JInt(supported)},
                reason=f"protocol level {level} is not supported",
            )
            return
        if self.service.paused:
            self.reply(pkt, Status.UNAVAILABLE, reason=f"service {self.service.name} is paused")
            self.close()
            return
        if not self.broker.accepts_connection(self.service):
            self.reply(pkt, Status.UNAVAILABLE, reason="the broker is quiesced")
            self.close()
            return
        if self.broker.over_connection_limit(self.service):
            self.reply(
                pkt,
                Status.UNAVAILABLE,
                reason=f"service {self.service.name} has reached its connection limit",
            )
            self.close()
            return
        self.protocol_level = level
        self.user_agent = str(props.get("JMQUserAgent", ""))
        self.client_version = str(props.get("JMQVersion", ""))
        flow = props.get("JMQSize", props.get("JMQRBufferSize"))
        if isinstance(flow, int) and flow > 0:
            self.flow_limit = self.flow_left = int(flow)
        old = props.get("JMQConnectionID")
        if isinstance(old, int):
            self.broker.destroy_stale_connection(old, self)
        b = self.broker
        reply_props: dict[str, object] = {
            "JMQConnectionID": JLong(self.id),
            "JMQProtocolLevel": JInt(level),
            "JMQVersion": b.version,
            "JMQService": self.service.name,
            "JMQSize": JInt(b.memory.count),
            "JMQMaxMsgBytes": JLong(b.router.settings.max_message_size),
            "JMQBrokerSessionID": JLong(b.session_id),
        }
        self.reply(pkt, Status.OK, reply_props)
        if b.memory.count == 0:
            b.flow_waiting.add(self)
        self.auth_type = self.service.auth_type
        body = b""
        if self.auth_type == AUTH_DIGEST:
            seed = f"{SysMessageID.from_bytes(pkt.sysmsgid)}:{time.time_ns()}{self.id}"
            self.nonce = md5str(seed)
            body = self.nonce.encode("ascii")
        self.write(
            build_packet(
                PacketType.AUTHENTICATE_REQUEST,
                props={
                    "JMQAuthType": self.auth_type,
                    "JMQChallenge": True,
                    "JMQStatus": JInt(Status.OK),
                    "JMQSequence": JInt(pkt.sequence),
                },
                body=body,
                consumer_id=pkt.consumer_id,
            )
        )
        self.state = AUTHENTICATING

    def on_authenticate(self, pkt: Packet) -> None:
        if self.state != AUTHENTICATING:
            self.reply(pkt, Status.ERROR, reason="AUTHENTICATE without a challenge")
            self.fatal("AUTHENTICATE out of sequence")
            return
        auth_type = pkt.properties.get("JMQAuthType")
        if auth_type != self.auth_type:
            self._auth_failed(pkt, None, f"authentication type {auth_type!r} was not offered")
            return
        try:
            user, credential = decode_auth_body(pkt.body)
        except AuthBodyError as exc:
            self._auth_failed(pkt, None, str(exc))
            return
        repo = self.broker.repository_for(self.service)
        verify = getattr(repo, "verify_basic", None)
        args: tuple = (user,)
        if verify is not None:
            # LDAP: the directory checks the password (bind as the user); basic only.
            try:
                args = (user, decode_basic_password(credential))
            except AuthBodyError as exc:
                self._auth_failed(pkt, user, str(exc))
                return
        # The repository blocks (database, file, directory): hold further packets until done.
        self._blocked = True
        fut = asyncio.get_running_loop().run_in_executor(
            self.broker.executor, verify or repo.lookup, *args
        )
        fut.add_done_callback(
            lambda f: self._auth_checked(pkt, user, credential, f, verified=verify is not None)
        )

    def _auth_checked(
        self, pkt: Packet, user: str, credential: str, fut: asyncio.Future, verified: bool = False
    ) -> None:
        """``verified``: the repository checked the password itself (LDAP bind)."""
        self._blocked = False
        if self.state == CLOSED:
            return
        try:
            record = fut.result()
        except Exception as exc:
            log.error("user repository failed for %s: %s", user, exc)
            self.reply(pkt, Status.ERROR, reason="user repository unavailable")
            self.close()
            return
        ok = False
        reason = "unknown user or wrong password"
        if verified:
            ok = record is not None
        elif record is not None and record.active:
            if self.auth_type == AUTH_BASIC:
                try:
                    password = decode_basic_password(credential)
                    ok = constant_time_equals(md5str(f"{user}:{password}"), record.password_digest)
                except AuthBodyError as exc:
                    reason = str(exc)
            else:
                ok = constant_time_equals(
                    digest_response(record.password_digest, self.nonce), credential
                )
        elif record is not None:
            reason = "user is inactive"
        if not ok:
            self._auth_failed(pkt, user, reason)
            return
        svc = self.service
        allowed, why = self.broker.access.check_connection(svc.name, svc.type, user, record.groups)
        if not allowed:
            log.warning(
                "connection %s: user %s from %s refused on service %s (%s): %s",
                self.id,
                user,
                self.peer,
                svc.name,
                svc.type,
                why,
            )
            self.reply(pkt, Status.FORBIDDEN, reason=f"access denied to {svc.type} service: {why}")
            self.close()
            return
        self.user = user
        self.groups = record.groups
        self.state = READY
        if self._auth_timer:
            self._auth_timer.cancel()
            self._auth_timer = None
        log.info(
            "connection %s: %s authenticated from %s (%s)",
            self.id,
            user,
            self.peer,
            self.user_agent or "unknown client",
        )
        self.reply(pkt, Status.OK)
        backlog, self._backlog = self._backlog, []
        if backlog:
            self._process(backlog)

    def _auth_failed(
        self, pkt: Packet, user: str | None, reason: str, status: int = Status.FORBIDDEN
    ) -> None:
        log.warning("authentication failed for user %s from %s: %s", user or "?", self.peer, reason)
        host = self.peer.rpartition(":")[0] or self.peer
        count, delay = self.broker.login_throttle.failed(host, time.monotonic())
        if delay <= 0:
            self._refuse_login(pkt, status)
            return
        log.warning(
            "slowing down failed logins from %s: %d failures within %.0f s, "
            "answering user %s after %.0f s",
            host,
            count,
            self.broker.login_throttle.window,
            user or "?",
            delay,
        )
        # Hold the connection (and whatever it sends) until the delayed answer.
        self._blocked = True

        def answer() -> None:
            if self.state != CLOSED:
                self._refuse_login(pkt, status)

        asyncio.get_running_loop().call_later(delay, answer)

    def _refuse_login(self, pkt: Packet, status: int) -> None:
        """Answer a failed login, ignore the rest, and close unless the client does first."""
        self.reply(pkt, status, reason="authentication failed")
        self._flush()
        self._refused = True

        def close() -> None:
            if self.state != CLOSED:
                self.close()

        asyncio.get_running_loop().call_later(REFUSED_LOGIN_LINGER, close)

    def on_goodbye(self, pkt: Packet) -> None:
        self.reply(pkt, Status.OK)
        self.close()

    def on_ping(self, pkt: Packet) -> None:
        self.reply(pkt, Status.OK)

    def on_ping_reply(self, pkt: Packet) -> None:
        self.ping_outstanding = 0

    # -- sessions ----------------------------------------------------------------

    def _session(self, pkt: Packet) -> Session | None:
        sid = pkt.properties.get("JMQSessionID")
        if sid is None:
            # Clients before 3.5 have no sessions: one implicit session per connection.
            if self.implicit_session is None:
                self.implicit_session = self.router.create_session(self, 1)
            return self.implicit_session
        return self.sessions.get(int(sid))  # type: ignore[arg-type]

    def on_create_session(self, pkt: Packet) -> None:
        ack_mode = int(pkt.properties.get("JMQAckMode", 0))  # type: ignore[arg-type]
        try:
            sess = self.router.create_session(self, ack_mode)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        self.sessions[sess.id] = sess
        self.reply(pkt, Status.OK, {"JMQSessionID": JLong(sess.id)})

    def on_destroy_session(self, pkt: Packet) -> None:
        sid = pkt.properties.get("JMQSessionID")
        sess = self.sessions.pop(int(sid), None) if sid is not None else None  # type: ignore[arg-type]
        if sess is None:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no session {sid}")
            return
        self.router.destroy_session(sess)
        for cid in [c for c, s in self.consumer_sessions.items() if s is sess]:
            del self.consumer_sessions[cid]
        self.reply(pkt, Status.OK)

    def _named_session(self, pkt: Packet) -> Session | None:
        """The session START/STOP name (None: the whole connection); RouterError if unknown."""
        sid = pkt.properties.get("JMQSessionID")
        if sid is None:
            return None
        sess = self.sessions.get(int(sid))  # type: ignore[arg-type]
        if sess is None:
            raise RouterError(Status.NOT_FOUND, f"no session {sid}")
        return sess

    def on_start(self, pkt: Packet) -> None:
        try:
            sess = self._named_session(pkt)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        if sess is not None:
            sess.stopped = False
        else:
            self.started = True
        self.reply(pkt, Status.OK)
        self.router.redispatch([sess] if sess is not None else self._all_sessions())

    def on_stop(self, pkt: Packet) -> None:
        try:
            sess = self._named_session(pkt)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        if sess is not None:
            sess.stopped = True
        else:
            self.started = False
        # Deliveries are written synchronously, so nothing follows this reply.
        self.reply(pkt, Status.OK)

    def _all_sessions(self) -> list[Session]:
        sessions = list(self.sessions.values())
        if self.implicit_session is not None:
            sessions.append(self.implicit_session)
        return sessions

    def on_set_clientid(self, pkt: Packet) -> None:
        props = pkt.properties
        cid = props.get("JMQClientID")
        try:
            self.router.set_client_id(
                self,
                cid if cid is None else str(cid),
                bool(props.get("JMQShare", False)),
                props.get("JMQNamespace"),
            )  # type: ignore[arg-type]
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        self.reply(pkt, Status.OK)

    # -- destinations --------------------------------------------------------------

    @staticmethod
    def _dest_args(pkt: Packet) -> tuple[str, int]:
        props = pkt.properties
        name = props.get("JMQDestination")
        dtype = props.get("JMQDestType", DEST_QUEUE)
        if not isinstance(name, str) or not name:
            raise RouterError(Status.BAD_REQUEST, "JMQDestination is missing")
        if not isinstance(dtype, int) or not dtype & (DEST_QUEUE | DEST_TOPIC):
            raise RouterError(Status.BAD_REQUEST, f"bad JMQDestType {dtype}")
        return name, int(dtype)

    def on_create_destination(self, pkt: Packet) -> None:
        try:
            name, dtype = self._dest_args(pkt)
            self._require(name, dtype, "create")
            dest = self.router.create_destination(name, dtype, self)
        except RouterError as exc:
            extra = None
            if exc.status == Status.CONFLICT:
                existing = self.router.lookup(*self._dest_args(pkt))
                extra = {"JMQDestType": JInt(existing.dest_type)} if existing else None
            self.reply(pkt, exc.status, extra, reason=exc.reason)
            return
        self.reply(pkt, Status.OK, {"JMQDestType": JInt(dest.dest_type)})

    def on_destroy_destination(self, pkt: Packet) -> None:
        try:
            name, dtype = self._dest_args(pkt)
            self.router.destroy_destination(name, dtype, self)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        self.reply(pkt, Status.OK)

    def on_verify_destination(self, pkt: Packet) -> None:
        try:
            name, dtype = self._dest_args(pkt)
            self._compile(pkt.properties.get("JMQSelector"))
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        dest = self.router.lookup(name, dtype)
        if dest is None:
            s = self.router.settings
            can = s.autocreate_topic if dtype & DEST_TOPIC else s.autocreate_queue
            self.reply(
                pkt,
                Status.NOT_FOUND,
                {"JMQCanCreate": bool(can)},
                reason=f"destination {name} not found",
            )
            return
        self.reply(pkt, Status.OK, {"JMQDestType": JInt(dest.dest_type)})

    @staticmethod
    def _compile(text: object):
        if text is None or (isinstance(text, str) and not text.strip()):
            return None
        try:
            return compile_selector(str(text))
        except SelectorError as exc:
            raise RouterError(Status.BAD_REQUEST, f"invalid selector: {exc}") from exc

    # -- access control ------------------------------------------------------------

    def _denied(self, name: str, dtype: int, op: str) -> str | None:
        """Why the access rules refuse ``op`` on ``name`` (and the auto-creation it would
        cause), or None if they allow it (security/acl.py, spec/security.md §3.2)."""
        acl = self.broker.access
        svc = self.service
        if dtype & DEST_TEMP or not acl.dest_enabled(svc.name):
            return None
        kind = "topic" if dtype & DEST_TOPIC else "queue"
        user = self.user or ""
        if op != "create":
            ok, why = acl.check_dest(svc.name, svc.type, kind, name, op, user, self.groups)
            if not ok:
                return f"access denied: {user} may not {op} on {kind} {name} ({why})"
        s = self.router.settings
        if not (s.autocreate_topic if kind == "topic" else s.autocreate_queue):
            return None
        dest = self.router.lookup(name, dtype)
        # Only what would be auto-created: an admin-created destination needs no create.
        if dest is None or (op == "create" and dest.auto):
            ok, why = acl.check_create(svc.name, svc.type, kind, name, user, self.groups)
            if not ok:
                return f"access denied: {user} may not create {kind} {name} ({why})"
        return None

    def _require(self, name: str, dtype: int, op: str) -> None:
        why = self._denied(name, dtype, op)
        if why is not None:
            log.info("connection %s: %s", self.id, why)
            raise RouterError(Status.FORBIDDEN, why)

    def _has_producer(self, name: str, dest_type: int) -> bool:
        topic = bool(dest_type & DEST_TOPIC)
        sessions = list(self.sessions.values())
        if self.implicit_session is not None:
            sessions.append(self.implicit_session)
        for sess in sessions:
            for prod in sess.producers.values():
                d = prod.destination
                if d.name == name and bool(d.dest_type & DEST_TOPIC) == topic:
                    return True
        return False

    def _send_allowed(self, pkt: Packet, name: str, dest_type: int) -> bool:
        """A message to a destination this connection registered no producer on is
        checked like ADD_PRODUCER (cached per destination and rule generation)."""
        gen = self.broker.access.generation
        if gen != self._acl_gen:
            self._acl_sends.clear()
            self._acl_gen = gen
        key = (name, dest_type)
        why = self._acl_sends.get(key)
        if why is None:
            if self._has_producer(name, dest_type):
                why = ""
            else:
                why = self._denied(name, dest_type, "produce") or ""
            self._acl_sends[key] = why
        if not why:
            return True
        if pkt.flags & FLAG_A:
            self.reply(pkt, Status.FORBIDDEN, reason=why)
        elif key not in self._acl_logged:
            self._acl_logged.add(key)
            log.warning("connection %s: messages dropped: %s", self.id, why)
        return False

    # -- producers -----------------------------------------------------------------

    def on_add_producer(self, pkt: Packet) -> None:
        try:
            name, dtype = self._dest_args(pkt)
            sess = self._session(pkt)
            if sess is None:
                raise RouterError(Status.NOT_FOUND, "unknown JMQSessionID")
            self._require(name, dtype, "produce")
            prod = self.router.add_producer(sess, name, dtype)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        batch = prod.batch if prod.batch > 0 else -1
        if self.router.hold_producer(prod.destination, self, prod.id):
            batch = 0  # paused now; RESUME_FLOW follows when there is room
        self.reply(
            pkt,
            Status.OK,
            {
                "JMQProducerID": JLong(prod.id),
                "JMQSize": JInt(batch),
                "JMQBytes": JLong(-1),
                "JMQDestinationID": name,
            },
        )

    def on_delete_producer(self, pkt: Packet) -> None:
        pid = pkt.properties.get("JMQProducerID")
        prod = self.router.producers.get(int(pid)) if pid is not None else None  # type: ignore[arg-type]
        if prod is None or prod.session.link is not self:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no producer {pid}")
            return
        self.router.remove_producer(prod)
        self.reply(pkt, Status.OK)

    # -- messages --------------------------------------------------------------------

    def on_message(self, pkt: Packet) -> None:
        if pkt.prop_size:
            # Checked on arrival, so a bad table is the sender's 400 and never fails
            # later in a selector, the DMQ or an admin listing.
            pkt.properties  # noqa: B018
        self.msgs_in += 1
        m = self.metrics
        m.messages_in += 1
        m.message_bytes_in += pkt.size
        flags = pkt.flags
        try:
            name = pkt.fields.get(1)
            if not isinstance(name, str) or not name:
                raise RouterError(Status.BAD_REQUEST, "message has no destination")
            if name == admin.ADMIN_QUEUE and flags & FLAG_Q and self.service.type == "ADMIN":
                # Admin requests are not stored: answered on the JMSReplyTo queue (admin.md).
                if flags & FLAG_A:
                    self.write(_with_cid(_SEND_REPLY_OK, pkt.consumer_id))
                admin.HANDLER.handle(self, pkt)
                if flags & (FLAG_C | FLAG_F):
                    self._flow_after_send(pkt, flags)
                return
            msg = Message(pkt, name, self.id)
            dest_type = DEST_QUEUE if flags & FLAG_Q else DEST_TOPIC
            if not self._send_allowed(pkt, name, dest_type):
                self._flow_after_send(pkt, flags)
                return
            txn_id = pkt.transaction_id
            if txn_id:
                txn = self.router.transaction(txn_id, self)
                self.router.transacted_send(txn, msg, dest_type, self)
            else:
                self.router.route(msg, self, dest_type)
        except RouterError as exc:
            if flags & FLAG_A:
                self.reply(pkt, exc.status, reason=exc.reason)
            else:
                log.info(
                    "message to %s from %s refused: %s", pkt.fields.get(1), self.peer, exc.reason
                )
            self._flow_after_send(pkt, flags)
            return
        if flags & FLAG_A:
            reply = _with_cid(_SEND_REPLY_OK, pkt.consumer_id)
            if msg.persistent and not txn_id:
                # With sync on, "stored" is said only once the record is on disk.
                self.broker.when_stored(lambda: self.write(reply))
            else:
                self.write(reply)
        self.broker.check_memory()
        if flags & (FLAG_C | FLAG_F):
            self._flow_after_send(pkt, flags)

    def _flow_after_send(self, pkt: Packet, flags: int) -> None:
        # The client stops after a C (producer) or F (connection) flagged message until
        # we resume it; without this answer its send() blocks forever.
        if flags & FLAG_C:
            pid = pkt.producer_id
            prod = self.router.producers.get(pid)
            # FLOW_CONTROL: a full destination resumes the producer when it has room.
            if prod is None or not self.router.hold_producer(prod.destination, self, pid):
                self.resume_producer(pid)
        if flags & FLAG_F:
            count = self.broker.memory.count
            if count == 0:
                # Red memory state: this client waits until memory recovers.
                self.broker.flow_waiting.add(self)
            else:
                self.resume_connection_flow(count)

    def resume_connection_flow(self, count: int) -> None:
        """RESUME_FLOW for the whole connection (no producer or consumer id)."""
        if self.state != CLOSED:
            self.write(build_packet(PacketType.RESUME_FLOW, props={"JMQSize": JInt(count)}))

    def resume_producer(self, pid: int) -> None:
        """RESUME_FLOW for one producer, with a fresh allowance."""
        if self.state == CLOSED:
            return
        prod = self.router.producers.get(pid)
        size = prod.batch if prod is not None and prod.batch > 0 else -1
        self.write(
            build_packet(
                PacketType.RESUME_FLOW,
                props={"JMQProducerID": JLong(pid), "JMQSize": JInt(size), "JMQBytes": JLong(-1)},
            )
        )

    # -- consumers ---------------------------------------------------------------------

    def on_add_consumer(self, pkt: Packet) -> None:
        props = pkt.properties
        try:
            name, dtype = self._dest_args(pkt)
            sess = self._session(pkt)
            if sess is None:
                raise RouterError(Status.NOT_FOUND, "unknown JMQSessionID")
            selector = self._compile(props.get("JMQSelector"))
            size = props.get("JMQSize")
            prefetch = int(size) if isinstance(size, int) else -1  # absent: no consumer flow
            durable = props.get("JMQDurableName")
            shared_name = props.get("JMQSharedSubscriptionName")
            self._require(name, dtype, "consume")
            cons = self.router.add_consumer(
                sess,
                name,
                dtype,
                selector=selector,
                no_local=bool(props.get("JMQNoLocal", False)),
                prefetch=prefetch,
                durable_name=str(durable) if durable else None,
                share=props.get("JMQShare") is True,
                jms_share=props.get("JMQJMSShare") is True,
                shared_name=str(shared_name) if shared_name is not None else None,
            )
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        sub = cons.subscription
        if sub is not None and sub.share is not None:
            # Shared subscriptions: sharedConsumerFlowLimit instead of consumerFlowLimit.
            limit = cons.destination.limit("sharedConsumerFlowLimit", 5)
        else:
            limit = cons.destination.limit("consumerFlowLimit")
        if limit > 0 and (cons.prefetch <= 0 or cons.prefetch > limit):
            cons.prefetch = cons.credit = limit
        self.consumer_sessions[cons.id] = sess
        reply = {"JMQConsumerID": JLong(cons.id), "JMQDestType": JInt(cons.destination.dest_type)}
        if cons.prefetch > 0:
            reply["JMQSize"] = JInt(cons.prefetch)
        self.reply(pkt, Status.OK, reply)
        # Only now: a delivery before the reply would name a consumer the client lacks.
        cons.queue.dispatch(int(time.time() * 1000))

    def on_delete_consumer(self, pkt: Packet) -> None:
        props = pkt.properties
        cid = props.get("JMQConsumerID")
        if cid is None:
            durable = props.get("JMQDurableName")
            if not durable:
                self.reply(pkt, Status.BAD_REQUEST, reason="JMQConsumerID is missing")
                return
            client_id = props.get("JMQClientID", self.client_id)
            try:
                self.router.unsubscribe(client_id, str(durable))  # type: ignore[arg-type]
            except RouterError as exc:
                self.reply(pkt, exc.status, reason=exc.reason)
                return
            self.reply(pkt, Status.OK)
            return
        cons: Consumer | None = self.router.consumers.get(int(cid))  # type: ignore[arg-type]
        if cons is None or cons.link is not self:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no consumer {cid}")
            return
        last = None
        body = pkt.body
        if props.get("JMQBodyType") == 3 and len(body) >= 32:
            last = body[:32]
        self.router.remove_consumer(cons, last, bool(props.get("JMQRedeliverAll", False)))
        self.reply(pkt, Status.OK)

    def on_resume_flow(self, pkt: Packet) -> None:
        props = pkt.properties
        size = props.get("JMQSize", props.get("JMQRBufferSize"))
        cid = props.get("JMQConsumerID")
        if cid is not None:
            cons = self.router.consumers.get(int(cid))  # type: ignore[arg-type]
            if cons is not None and cons.link is self:
                cons.resume(int(size) if isinstance(size, int) else None)
                cons.queue.dispatch(int(time.time() * 1000))
            return
        if isinstance(size, int) and size > 0:
            self.flow_limit = int(size)
        elif isinstance(size, int) and size < 0:
            self.flow_limit = -1
        self.flow_left = self.flow_limit
        self.flow_paused = False
        self.router.redispatch(self._all_sessions())

    def on_flow_paused(self, pkt: Packet) -> None:
        # Informational: the client tells us it has paused itself.
        log.debug("connection %s reports its flow paused", self.id)

    # -- acknowledgements -----------------------------------------------------------

    def _ack_blocks(self, pkt: Packet) -> dict[Session, list[tuple[int, bytes]]] | None:
        body = pkt.body
        if not body or len(body) % 40:
            return None
        by_session: dict[Session, list[tuple[int, bytes]]] = {}
        cs = self.consumer_sessions
        for off in range(0, len(body), 40):
            cid, key = _ACK_BLOCK.unpack_from(body, off)
            sess = cs.get(cid)
            if sess is not None:
                by_session.setdefault(sess, []).append((cid, key))
        return by_session

    def on_acknowledge(self, pkt: Packet) -> None:
        groups = self._ack_blocks(pkt)
        if groups is None:
            self.reply(
                pkt,
                Status.BAD_REQUEST,
                reason=f"acknowledge body of {pkt.body_size} bytes is not n x 40",
            )
            return
        ack_type = dead_reason = 0
        comment = None
        if pkt.prop_size:
            props = pkt.properties
            ack_type = int(props.get("JMQAckType", 0))  # type: ignore[arg-type]
            dead_reason = int(props.get("JMQDeadReason", 0))  # type: ignore[arg-type]
            comment = props.get("JMQComment")
        txn = None
        if pkt.transaction_id:
            try:
                txn = self.router.transaction(pkt.transaction_id, self)
            except RouterError as exc:
                self.reply(pkt, exc.status, reason=exc.reason)
                return
        for sess, blocks in groups.items():
            if not sess.acknowledges and txn is None:
                self.reply(
                    pkt, Status.NOT_ALLOWED, reason="acknowledgement on a NO_ACKNOWLEDGE session"
                )
                return
            if txn is not None:
                try:
                    self.router.transacted_ack(txn, sess, blocks)
                except RouterError as exc:
                    self.reply(pkt, exc.status, reason=exc.reason)
                    return
                continue
            self.router.acknowledge(sess, blocks, ack_type, dead_reason, comment)
            if ack_type in (AckType.UNDELIVERABLE, AckType.DEAD):
                log.info(
                    "%d message(s) given up by the client (JMQAckType %s) removed",
                    len(blocks),
                    ack_type,
                )
        if pkt.flags & FLAG_A:
            self.write(_with_cid(_ACK_REPLY_OK, pkt.consumer_id))

    def on_redeliver(self, pkt: Packet) -> None:
        groups = self._ack_blocks(pkt)
        if groups is None:
            self.reply(pkt, Status.BAD_REQUEST, reason="redeliver body is not n x 40")
            return
        set_r = bool(pkt.properties.get("JMQSetRedelivered", False))
        for sess, blocks in groups.items():
            self.router.redeliver(sess, blocks, set_r)
        self.reply(pkt, Status.OK)

    # -- browsing --------------------------------------------------------------------

    def on_browse(self, pkt: Packet) -> None:
        props = pkt.properties
        try:
            name = props.get("JMQDestination")
            if not isinstance(name, str):
                raise RouterError(Status.BAD_REQUEST, "JMQDestination is missing")
            selector = self._compile(props.get("JMQSelector"))
            self._require(name, DEST_QUEUE, "browse")
            bid, keys = self.router.browse(name, DEST_QUEUE, selector)
        except RouterError as exc:
            extra = None
            if exc.status == Status.NOT_FOUND:
                extra = {"JMQCanCreate": bool(self.router.settings.autocreate_queue)}
            self.reply(pkt, exc.status, extra, reason=exc.reason)
            return
        self.browsers[bid] = name
        self.reply(pkt, Status.OK, {"JMQConsumerID": JLong(bid)}, body=b"".join(keys))

    def on_deliver(self, pkt: Packet) -> None:
        bid = pkt.properties.get("JMQConsumerID")
        body = pkt.body
        if bid is None or len(body) % 32:
            self.reply(pkt, Status.BAD_REQUEST, reason="DELIVER needs JMQConsumerID and n x 32")
            return
        browser = self.router.browsers.get(int(bid))  # type: ignore[arg-type]
        if browser is None or int(bid) not in self.browsers:  # type: ignore[arg-type]
            self.reply(pkt, Status.NOT_FOUND, reason=f"no browser {bid}")
            return
        keys = [body[i : i + 32] for i in range(0, len(body), 32)]
        msgs = self.router.find_messages(browser[0], keys)
        for i, msg in enumerate(msgs):
            extra = FLAG_L if i == len(msgs) - 1 else 0
            self.write(msg.encode_delivery(int(bid), False, 1, extra))  # type: ignore[arg-type]
        if msgs:
            self.reply(pkt, Status.OK)
        else:
            self.reply(pkt, Status.NOT_FOUND, reason="none of the messages exist any more")

    # -- miscellany ---------------------------------------------------------------------

    def on_generate_uid(self, pkt: Packet) -> None:
        n = pkt.properties.get("JMQQuantity", 1)
        if not isinstance(n, int) or not 0 < n <= 10000:
            self.reply(pkt, Status.BAD_REQUEST, reason=f"bad JMQQuantity {n}")
            return
        body = b"".join(_I64.pack(self.router.uids.next()) for _ in range(n))
        self.reply(pkt, Status.OK, {"JMQQuantity": JInt(n)}, body=body)

    def on_get_license(self, pkt: Packet) -> None:
        self.reply(
            pkt,
            Status.OK,
            {
                "JMQLicense": "unl",
                "JMQLicenseDesc": f"{self.broker.product_name} (unlimited)",
            },
        )

    def on_info_request(self, pkt: Packet) -> None:
        self.broker.answer_info_request(self, pkt)

    # -- transactions ------------------------------------------------------------------
    #
    # Local transactions (START with JMQSessionID) and XA ones (START with JMQXAFlags and
    # a marshalled Xid body).  The state machine is the router's; these handlers read
    # the request, answer the seed's statuses and keep the I-flag (resent) rules.

    @staticmethod
    def _txn_id(pkt: Packet) -> int:
        tid = pkt.properties.get("JMQTransactionID")
        if tid is None:
            return 0
        if isinstance(tid, bool) or not isinstance(tid, int):
            raise RouterError(Status.BAD_REQUEST, f"bad JMQTransactionID {tid!r}")
        return int(tid)

    @staticmethod
    def _txn_xid(pkt: Packet) -> Xid | None:
        """The Xid in the body (None without a body, or for the null Xid)."""
        if not pkt.body_size:
            return None
        try:
            xid = Xid.decode(pkt.body)
        except XidError as exc:
            raise RouterError(Status.BAD_REQUEST, f"bad Xid in the body: {exc}") from None
        return None if xid.is_null else xid

    @staticmethod
    def _txn_int(pkt: Packet, name: str) -> int | None:
        value = pkt.properties.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise RouterError(Status.BAD_REQUEST, f"bad {name} {value!r}")
        return int(value)

    def _txn_from(self, pkt: Packet, control: bool = True):
        """The transaction a request names (JMQTransactionID, else the Xid body), checked
        for whether this connection may act on it."""
        tid = self._txn_id(pkt)
        xid = self._txn_xid(pkt)
        if not tid and xid is None:
            raise RouterError(Status.BAD_REQUEST, "JMQTransactionID (or an Xid body) is missing")
        txn = self.router.find_transaction(tid, xid)
        if control:
            self.router.check_control(txn, self, self.service.type == "ADMIN")
        return txn

    def _arm_txn_timer(self, txn, delay_ms: int) -> None:
        """Roll ``txn`` back when its JMQLifetime is over (the router decides)."""
        router = self.router
        loop = asyncio.get_running_loop()

        def fire() -> None:
            txn.timer = None
            remaining = router.expire_transaction(txn.id)
            if remaining:
                txn.timer = loop.call_later(remaining / 1000, fire)

        txn.cancel_timer()
        txn.timer = loop.call_later(delay_ms / 1000, fire)

    def _txn_reply(self, pkt: Packet, txn, status: int = Status.OK, **extra: object) -> None:
        props: dict[str, object] = {"JMQTransactionID": JLong(txn.id)} if txn else {}
        props.update(extra)
        self.reply(pkt, status, props)

    def _txn_refused(self, pkt: Packet, exc: RouterError, txn=None) -> None:
        props: dict[str, object] = {}
        if txn is not None:
            props["JMQTransactionID"] = JLong(txn.id)
            if txn.state == TransactionState.FAILED:
                props["JMQPrepareStateFAILED"] = True
        if exc.status == Status.ERROR or exc.status == Status.FORBIDDEN:
            log.warning("%s from %s refused: %s", pkt.type_name, self.peer, exc.reason)
        self.reply(pkt, exc.status, props, reason=exc.reason)

    def on_start_transaction(self, pkt: Packet) -> None:
        props = pkt.properties
        resent = bool(pkt.flags & FLAG_I)
        try:
            xid = self._txn_xid(pkt)
            flags = self._txn_int(pkt, "JMQXAFlags")
            auto_rollback = self._txn_int(pkt, "JMQAutoRollback")
            lifetime = self._txn_int(pkt, "JMQLifetime") or 0
            session_less = props.get("JMQSessionLess")
            if session_less is not None and not isinstance(session_less, bool):
                raise RouterError(Status.BAD_REQUEST, f"bad JMQSessionLess {session_less!r}")
            sess = self._session(pkt)
            if sess is None:
                raise RouterError(Status.NOT_FOUND, "unknown JMQSessionID")
            if xid is None:
                if flags:
                    raise RouterError(
                        Status.BAD_REQUEST, f"START with JMQXAFlags {flags:#x} needs an Xid body"
                    )
                if resent:
                    done = self.router.replayed_start(self, pkt.sysmsgid)
                    if done is not None:
                        self._txn_reply(pkt, done, Status.NOT_MODIFIED)
                        return
                txn = self.router.start_transaction(
                    sess,
                    self,
                    auto_rollback=auto_rollback,
                    session_less=session_less,
                    lifetime=lifetime,
                    creator=pkt.sysmsgid,
                    user=self.user,
                )
                new = True
            else:
                flags = flags or 0
                if resent and flags == XAFlag.TMNOFLAGS:
                    done = self.router.xids.get(xid)
                    if done is not None and done.state == TransactionState.STARTED:
                        self._txn_reply(pkt, done, Status.NOT_MODIFIED)
                        return
                txn = self.router.xa_start(
                    self,
                    sess,
                    xid,
                    flags,
                    auto_rollback=auto_rollback,
                    session_less=session_less,
                    lifetime=lifetime,
                    creator=pkt.sysmsgid,
                    user=self.user,
                )
                new = flags == XAFlag.TMNOFLAGS
        except RouterError as exc:
            self._txn_refused(pkt, exc)
            return
        if new and txn.lifetime > 0:
            self._arm_txn_timer(txn, txn.lifetime)
        self._txn_reply(pkt, txn)

    def on_end_transaction(self, pkt: Packet) -> None:
        txn = None
        try:
            txn = self._txn_from(pkt)
            flags = self._txn_int(pkt, "JMQXAFlags")
            if flags is None:
                raise RouterError(Status.BAD_REQUEST, "END_TRANSACTION without JMQXAFlags")
            if pkt.properties.get("JMQNoOp") is True:
                self._txn_reply(pkt, txn)
                return
            if pkt.flags & FLAG_I and txn.state == {
                XAFlag.TMSUSPEND: TransactionState.INCOMPLETE,
                XAFlag.TMFAIL: TransactionState.FAILED,
            }.get(flags, TransactionState.COMPLETE):
                self._txn_reply(pkt, txn, Status.NOT_MODIFIED)
                return
            self.router.end_transaction(txn, flags)
        except RouterError as exc:
            self._txn_refused(pkt, exc, txn)
            return
        self._txn_reply(pkt, txn)

    def on_prepare_transaction(self, pkt: Packet) -> None:
        txn = None
        try:
            txn = self._txn_from(pkt)
            if pkt.flags & FLAG_I and txn.state == TransactionState.PREPARED:
                self._txn_reply(pkt, txn, Status.NOT_MODIFIED)
                return
            self.router.prepare(txn, one_phase=pkt.properties.get("JMQXAOnePhase") is True)
        except RouterError as exc:
            self._txn_refused(pkt, exc, txn)
            return
        # "Prepared" is a promise to survive a crash: say it once the store has it.
        self.broker.when_stored(lambda: self._txn_reply(pkt, txn))

    def _next_transaction(self, pkt: Packet, txn, reply: dict[str, object]) -> None:
        """JMQStartNextTransaction: a local transaction's session goes on in a new one."""
        sess = txn.session
        if txn.is_xa or sess is None or not pkt.properties.get("JMQStartNextTransaction"):
            return
        if sess is not self.implicit_session and self.sessions.get(sess.id) is not sess:
            return
        nxt = self.router.start_transaction(
            sess,
            self,
            auto_rollback=txn.auto_rollback,
            session_less=txn.session_less,
            lifetime=txn.lifetime,
            user=self.user,
        )
        if nxt.lifetime > 0:
            self._arm_txn_timer(nxt, nxt.lifetime)
        reply["JMQNextTransactionID"] = JLong(nxt.id)

    def _txn_or_replayed(self, pkt: Packet):
        """The transaction a COMMIT/ROLLBACK names; None when it was a resend (I flag) of
        one already finished, which is answered OK here (it was done)."""
        try:
            return self._txn_from(pkt)
        except RouterError as exc:
            if exc.status == Status.NOT_FOUND and pkt.flags & FLAG_I:
                self.reply(pkt, Status.OK, {"JMQTransactionID": JLong(self._txn_id(pkt))})
                return None
            raise

    def on_commit_transaction(self, pkt: Packet) -> None:
        props = pkt.properties
        txn = None
        try:
            txn = self._txn_or_replayed(pkt)
            if txn is None:
                return
            flags = self._txn_int(pkt, "JMQXAFlags") or 0
            self.router.commit(
                txn,
                self,
                one_phase=bool(flags & XAFlag.TMONEPHASE),
                one_phase_hint=props.get("JMQXAOnePhase") is True,
            )
        except RouterError as exc:
            self._txn_refused(pkt, exc, txn)
            return
        reply: dict[str, object] = {"JMQTransactionID": JLong(txn.id)}
        self._next_transaction(pkt, txn, reply)
        if txn.stored:
            self.broker.when_stored(lambda: self.reply(pkt, Status.OK, reply))
        else:
            self.reply(pkt, Status.OK, reply)

    def on_rollback_transaction(self, pkt: Packet) -> None:
        props = pkt.properties
        txn = None
        try:
            txn = self._txn_or_replayed(pkt)
            if txn is None:
                return
            if txn.state == TransactionState.TIMED_OUT:
                # Already rolled back by the broker: say so once, then forget it.
                self.router.forget_timed_out(txn)
                raise RouterError(
                    Status.TIMEOUT,
                    f"transaction {txn.id} was rolled back by the broker: its lifetime expired",
                )
            self.router.rollback(
                txn,
                redeliver=props.get("JMQRedeliver") is True,
                set_redelivered=props.get("JMQSetRedelivered") is not False,
            )
        except RouterError as exc:
            if not pkt.flags & FLAG_A:
                log.info("ROLLBACK_TRANSACTION from %s refused: %s", self.peer, exc.reason)
            self._txn_refused(pkt, exc, txn)
            return
        reply: dict[str, object] = {"JMQTransactionID": JLong(txn.id)}
        self._next_transaction(pkt, txn, reply)
        self.reply(pkt, Status.OK, reply)

    def on_recover_transaction(self, pkt: Packet) -> None:
        """RECOVER_TRANSACTION: with JMQTransactionID, whether that one is PREPARED;
        otherwise every PREPARED Xid on TMSTARTRSCAN and none on other flags."""
        try:
            tid = self._txn_id(pkt)
            flags = self._txn_int(pkt, "JMQXAFlags") or 0
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        if tid:
            txn = self.router.transactions.get(tid)
            if txn is None or txn.state != TransactionState.PREPARED:
                self.reply(
                    pkt,
                    Status.NOT_FOUND,
                    {"JMQQuantity": JInt(0)},
                    reason=f"transaction {tid} is not PREPARED",
                )
                return
            xids = [txn.xid] if txn.xid is not None else []
            extra: dict[str, object] = {"JMQTransactionID": JLong(tid)}
        else:
            xids = self.router.prepared_xids() if flags & XAFlag.TMSTARTRSCAN else []
            extra = {}
        self.reply(
            pkt, Status.OK, {"JMQQuantity": JInt(len(xids)), **extra}, body=encode_xids(xids)
        )

    def on_verify_transaction(self, pkt: Packet) -> None:
        """VERIFY_TRANSACTION: the transaction's state and attributes as a serialised
        Hashtable (State numbered from 1 as the client protocol does); 404 if unknown."""
        try:
            txn = self._txn_from(pkt, control=False)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        table: dict[str, object] = {
            "State": JInt(int(txn.state) + 1),
            "JMQAutoRollback": JInt(txn.effective_auto_rollback(self.router.xa_autorollback_all)),
            "JMQSessionLess": bool(txn.session_less),
            "JMQLifetime": JLong(txn.lifetime),
            "JMQCreateTime": JLong(txn.created),
        }
        if txn.xid is not None:
            table["JMQXid"] = str(txn.xid)
        self.reply(
            pkt, Status.OK, {"JMQTransactionID": JLong(txn.id)}, body=encode_hashtable(table)
        )

    def on_not_implemented(self, pkt: Packet) -> None:
        self.reply(
            pkt,
            Status.NOT_IMPLEMENTED,
            reason=f"{pkt.type_name} is not supported by this broker yet",
        )


_HANDLERS: dict[int, Callable[[ClientConnection, Packet], None]] = {
    PacketType.HELLO: ClientConnection.on_hello,
    PacketType.AUTHENTICATE: ClientConnection.on_authenticate,
    PacketType.GOODBYE: ClientConnection.on_goodbye,
    PacketType.PING: ClientConnection.on_ping,
    PacketType.PING_REPLY: ClientConnection.on_ping_reply,
    PacketType.CREATE_SESSION: ClientConnection.on_create_session,
    PacketType.DESTROY_SESSION: ClientConnection.on_destroy_session,
    PacketType.START: ClientConnection.on_start,
    PacketType.STOP: ClientConnection.on_stop,
    PacketType.SET_CLIENTID: ClientConnection.on_set_clientid,
    PacketType.CREATE_DESTINATION: ClientConnection.on_create_destination,
    PacketType.DESTROY_DESTINATION: ClientConnection.on_destroy_destination,
    PacketType.VERIFY_DESTINATION: ClientConnection.on_verify_destination,
    PacketType.ADD_PRODUCER: ClientConnection.on_add_producer,
    PacketType.DELETE_PRODUCER: ClientConnection.on_delete_producer,
    PacketType.ADD_CONSUMER: ClientConnection.on_add_consumer,
    PacketType.DELETE_CONSUMER: ClientConnection.on_delete_consumer,
    PacketType.RESUME_FLOW: ClientConnection.on_resume_flow,
    PacketType.FLOW_PAUSED: ClientConnection.on_flow_paused,
    PacketType.ACKNOWLEDGE: ClientConnection.on_acknowledge,
    PacketType.REDELIVER: ClientConnection.on_redeliver,
    PacketType.BROWSE: ClientConnection.on_browse,
    PacketType.DELIVER: ClientConnection.on_deliver,
    PacketType.GENERATE_UID: ClientConnection.on_generate_uid,
    PacketType.GET_LICENSE: ClientConnection.on_get_license,
    PacketType.INFO_REQUEST: ClientConnection.on_info_request,
    PacketType.START_TRANSACTION: ClientConnection.on_start_transaction,
    PacketType.COMMIT_TRANSACTION: ClientConnection.on_commit_transaction,
    PacketType.ROLLBACK_TRANSACTION: ClientConnection.on_rollback_transaction,
    PacketType.END_TRANSACTION: ClientConnection.on_end_transaction,
    PacketType.PREPARE_TRANSACTION: ClientConnection.on_prepare_transaction,
    PacketType.RECOVER_TRANSACTION: ClientConnection.on_recover_transaction,
    PacketType.VERIFY_TRANSACTION: ClientConnection.on_verify_transaction,
}
