"""The connection engine's shared part: state, input, output and closing.

:class:`EngineBase` is what every rule set (handshake, resources, messages,
transactions) builds on, and :class:`Host` what the engine needs from the broker"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from broker.core.session import Session
from broker.protocol.auth import AUTH_DIGEST
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt
from broker.protocol.names import (
    JMQ_EXIT,
    JMQ_GOODBYE_REASON,
    JMQ_GOODBYE_REASON_STRING,
    JMQ_REASON,
    JMQ_SESSION_ID,
    JMQ_STATUS,
)
from broker.protocol.packet import (
    OFF_FLAGS,
    BadPacket,
    OversizedPacket,
    Packet,
    PacketReader,
    build_packet,
)
from broker.protocol.properties import as_int
from broker.protocol.types import (
    FLAG_A,
    FLAG_F,
    MESSAGE_TYPES,
    PACKET_TYPE_LIMIT,
    GoodbyeReason,
    PacketType,
    Status,
    is_reply,
    packet_type_name,
    reply_type,
)

from .effects import NO_EFFECTS, Close, Effect, Effects, Outbox, StartTimer
from .states import (
    BEFORE_LOGIN,
    CLOSED,
    HOLDS_INPUT,
    IGNORES_INPUT,
    NEW,
    PACKET_RULES,
    READY,
    ConnEvent,
    Rule,
    next_state,
)

if TYPE_CHECKING:
    from broker.core.memory import MemoryManager
    from broker.core.message import Message
    from broker.core.router import MessageRouter
    from broker.security.acl import AccessController
    from broker.security.repository import LoginThrottle, UserRepository

    from .ports import BridgePort, ClusterPort, HAPort, ServicePort

log = logging.getLogger("broker.connection")


class Host(Protocol):
    """What the engine needs from the broker around it (``broker.server.broker.Broker``)."""

    router: MessageRouter
    version: str
    product_name: str
    session_id: int
    max_packet_size: int
    auth_timeout: float
    # .count: messages per batch, 0 when memory is red.
    memory: MemoryManager
    flow_waiting: set
    access: AccessController
    login_throttle: LoginThrottle
    # imq.user.shipped_passwords.loopback_only (security/shipped.py)
    shipped_loopback_only: bool
    # The optional subsystems (ports.py): None on a broker alone.
    cluster: ClusterPort | None
    ha: HAPort | None
    bridge_service: BridgePort | None
    # Extra HELLO_REPLY properties (an HA cluster's JMQHA, JMQBrokerList...).
    hello_properties: dict[str, object]

    def repository_for(self, service: ServicePort) -> UserRepository: ...
    def accepts_connection(self, service: ServicePort) -> bool: ...
    def over_connection_limit(self, service: ServicePort) -> bool: ...
    def connection_opened(self, conn: EngineBase) -> None: ...
    def connection_closed(self, conn: EngineBase) -> None: ...
    def destroy_stale_connection(self, old_id: int, new: EngineBase) -> None: ...
    def hello_verdict(self, props: dict) -> tuple[int, dict[str, object], str | None]: ...
    def failed_over_here(self, props: dict) -> bool: ...
    def when_stored(self, callback: Callable[[], None]) -> None: ...
    def check_memory(self) -> None: ...
    def answer_info_request(self, conn: EngineBase, pkt: Packet) -> None: ...
    def tell_broker_list(self, conn: EngineBase) -> None: ...


# Packet type -> handler, filled in by engine.py once the rule sets are assembled.
HANDLERS: dict[int, Callable[[Any, Packet], None]] = {}


def _noop() -> None:
    pass


class EngineBase(Outbox):
    """State, input, output and closing; the rule sets add the packet handlers."""

    # MessageRules' handler of the message types, which _dispatch calls directly.
    on_message: Callable[[Packet], None]
    # ... and of a message packet over the frame limit, already read past.
    on_oversized_message: Callable[[OversizedPacket], None]
    # The router's Link: a JMQ connection's deliveries are JMQ packets (StompLink renders
    # its own, see message.Link).
    render_delivery: Callable[[int, Message, bool, int], bytes] | None = None

    def __init__(
        self,
        broker: Host,
        service: ServicePort,
        *,
        wake: Callable[[], None] = _noop,
        flush: Callable[[], None] = _noop,
        admin: Callable[[Any, Packet], None] | None = None,
    ) -> None:
        self.broker = broker
        self.router = broker.router
        self.service = service
        # Called once per batch when output or effects become pending (the driver flushes).
        self.wake = wake
        # Called when an answer the store held back is queued: the driver writes it now.
        self.flush = flush
        # The admin service's request handler (admin queue messages on an ADMIN service).
        self.admin = admin
        self.id = broker.router.uids.next()
        self.client_id: str | None = None
        self.state = NEW
        self._rules, self._default_rule = PACKET_RULES[NEW]
        self.peer = "?"
        self.sockname: tuple | None = None  # the local address, for the admin service
        # A message over the size limit is read past and refused, the connection goes on.
        self.reader = PacketReader(broker.max_packet_size, skip_oversized=True)
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
        # An HA client that failed over here: when (ms) its HELLO named a store session
        # this broker holds but is not its own (a broker it took over, or an earlier run);
        # 0 otherwise.  Its transactions that were not prepared died with that broker
        # (broker/engine/transaction_requests.py answers for them).
        self.failed_over_at = 0
        # The JMQBrokerList HELLO_REPLY gave (None without one): told again at login if
        # an HA cluster's members changed in between.
        self.told_broker_list: object = None
        self.lost_transactions: set[int] = set()
        self.connected_at = time.time()
        self.last_read = time.monotonic()
        self.ping_outstanding = 0
        # Connection flow control towards the client (HELLO's JMQSize / JMQRBufferSize).
        self.flow_limit = -1
        self.flow_left = -1
        self.flow_paused = False
        self.write_paused = False
        Outbox.__init__(self)  # the write batch and effects the driver takes
        self._backlog: list[Packet | BadPacket] = []
        self.msgs_in = 0
        self.msgs_out = 0
        # The service's traffic counters (GET_METRICS), shared by its connections.
        self.metrics = service.metrics
        # Access control of sends without a producer: (name, type) -> "" allowed or the
        # refusal, valid for one rule generation; refusals logged once per destination.
        self._acl_sends: dict[tuple[str, int], str] = {}
        self._acl_gen = -1
        self._acl_logged: set[tuple[str, int]] = set()

    def _session(self, pkt: Packet) -> Session | None:
        sid = pkt.properties.get(JMQ_SESSION_ID)
        if sid is None:
            # Clients before 3.5 have no sessions: one implicit session per connection.
            if self.implicit_session is None:
                self.implicit_session = self.router.create_session(self, 1)
            return self.implicit_session
        return self.sessions.get(as_int(sid))

    # -- states --------------------------------------------------------------------

    def _to(self, event: ConnEvent) -> None:
        state = self.state = next_state(self.state, event)
        if state in PACKET_RULES:
            self._rules, self._default_rule = PACKET_RULES[state]

    # -- entry points (the driver calls these and runs the effects they return) ------

    def start(self) -> Effects:
        """The transport is up: register with the broker, arm the login deadline."""
        self.broker.connection_opened(self)
        timeout = self.broker.auth_timeout
        if timeout > 0:
            self._effect(StartTimer("auth", timeout, self.auth_expired))
        return self.take_effects()

    def receive_data(self, data: bytes) -> Effects:
        """Bytes from the client: decode, answer, and return what the driver must do."""
        if self.state in IGNORES_INPUT:
            return NO_EFFECTS
        self.last_read = time.monotonic()
        self.ping_outstanding = 0
        try:
            packets = self.reader.feed(data)
        except ProtocolError as exc:
            self.fatal(f"unreadable data from {self.peer}: {exc}")
            return self.take_effects()
        m = self.metrics
        m.packets_in += len(packets)
        m.packet_bytes_in += len(data)
        return self.receive_packets(packets)

    def receive_packets(self, packets: list[Packet | BadPacket]) -> Effects:
        """Decoded packets: receive_data after decoding (a driver without bytes could
        call it directly; none does today)."""
        if self.state in HOLDS_INPUT:
            self._backlog.extend(packets)
        elif self.state not in IGNORES_INPUT:
            self._process(packets)
        return self.take_effects() if self._effects else NO_EFFECTS

    def connection_lost(self) -> None:
        """The transport is gone (the client closed, or our Close was carried out)."""
        if self.state is not CLOSED:
            self._to(ConnEvent.CLOSED)
            self._release()
        self.broker.connection_closed(self)

    def resume_writing(self) -> None:
        """The socket drained: deliveries may flow again."""
        self.write_paused = False
        if self.state is READY:
            self.router.redispatch(self.sessions.values())

    def auth_expired(self) -> Effects:
        """The login deadline passed."""
        if self.state in BEFORE_LOGIN:
            self.fatal("authentication not completed in time")
        return self.take_effects()

    # -- packet processing -------------------------------------------------------

    def _process(self, packets: list) -> None:
        for i, pkt in enumerate(packets):
            state = self.state
            if state in IGNORES_INPUT:
                return
            if state in HOLDS_INPUT:
                self._backlog.extend(packets[i:])
                return
            if type(pkt) is OversizedPacket:
                if not self._oversized(pkt):
                    return
                continue
            if type(pkt) is BadPacket:
                self._reply_error(
                    pkt.type, pkt.flags, pkt.consumer_id, Status.BAD_REQUEST, pkt.reason
                )
                self.fatal(f"malformed {packet_type_name(pkt.type)} packet: {pkt.reason}")
                return
            try:
                self._dispatch(pkt)
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

    def _oversized(self, pkt: OversizedPacket) -> bool:
        """A packet over the frame limit, already read past: a message is refused with
        ENTITY_TOO_LARGE as OpenMQ's broker does (the stock client reports C4095) and the
        connection goes on; anything else ends it.  False when the connection ends."""
        name = packet_type_name(pkt.type)
        if self.state is READY and pkt.type in MESSAGE_TYPES:
            self.on_oversized_message(pkt)
            return True
        self._reply_error(pkt.type, pkt.flags, pkt.consumer_id, Status.BAD_REQUEST, pkt.reason)
        self.fatal(f"oversized {name} packet from {self.peer}: {pkt.reason}")
        return False

    def _dispatch(self, pkt: Packet) -> None:
        ptype = pkt.type
        if ptype in MESSAGE_TYPES:
            if self.state is not READY:
                self._not_authenticated(pkt)
                return
            self.on_message(pkt)
            return
        handler = HANDLERS.get(ptype)
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
        rule = self._rules.get(ptype, self._default_rule)
        if rule is Rule.HANDLE:
            handler(self, pkt)
        elif rule is Rule.NOT_AUTHENTICATED:
            self._not_authenticated(pkt)
        elif rule is Rule.REPEATED_HELLO:
            self.reply(pkt, Status.ERROR, reason="HELLO on a connection that already said HELLO")
        else:  # OUT_OF_SEQUENCE: AUTHENTICATE without a challenge
            self.reply(pkt, Status.ERROR, reason="AUTHENTICATE without a challenge")
            self.fatal(f"{pkt.type_name} out of sequence")

    def _not_authenticated(self, pkt: Packet) -> None:
        self._reply_error(
            pkt.type, pkt.flags, pkt.consumer_id, Status.ERROR, "connection is not authenticated"
        )
        self.fatal(f"{pkt.type_name} before authentication from {self.peer}")

    # -- output ----------------------------------------------------------------------

    def write(self, data: bytes | bytearray) -> None:
        """Queue bytes for the client (the driver writes the batch once per loop turn)."""
        self._out.append(data)
        if not self._pending:
            self._pending = True
            self.wake()

    def when_stored(self, answer: Callable[[], None]) -> None:
        """Run ``answer`` (which queues a reply) once what was submitted is stored, and
        have the driver write it at once: the client is waiting for it, and left to the
        next loop turn it would leave behind whatever other reads that turn serves
        first (with sync on, a lone producer's round trip grew by a consumer's
        acknowledgement and its deliveries)."""

        def release() -> None:
            answer()
            self.flush()

        self.broker.when_stored(release)

    def _effect(self, effect: Effect) -> None:
        self._effects.append(effect)
        if not self._pending:
            self._pending = True
            self.wake()

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
        p: dict[str, object] = {JMQ_STATUS: JInt(status)}
        if reason:
            p[JMQ_REASON] = reason
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
                props={JMQ_STATUS: JInt(status), JMQ_REASON: reason},
                consumer_id=consumer_id,
            )
        )

    def send_goodbye(self, reason: int, text: str, exit_: bool = False) -> None:
        self.write(
            build_packet(
                PacketType.GOODBYE,
                props={
                    JMQ_GOODBYE_REASON: JInt(reason),
                    JMQ_GOODBYE_REASON_STRING: text,
                    JMQ_EXIT: exit_,
                },
            )
        )

    # -- closing -------------------------------------------------------------------

    def fatal(self, reason: str) -> None:
        """Log once, say GOODBYE, and close this connection only."""
        if self.state is CLOSED:
            return
        log.warning("closing connection %s from %s: %s", self.id, self.peer, reason)
        self.send_goodbye(GoodbyeReason.CON_FATAL_ERROR, reason)
        self.close(reason)

    def close(self, reason: str = "closed") -> None:
        """Release everything the connection holds and ask the driver to close."""
        if self.state is CLOSED:
            return
        self._to(ConnEvent.CLOSED)
        self._release()
        self._effect(Close(reason))

    def _release(self) -> None:
        sessions = self.all_sessions()
        self.sessions.clear()
        self.router.connection_closed(self, sessions)

    def all_sessions(self) -> list[Session]:
        """The connection's open sessions: those the client created, then the implicit
        one (sends and consumers without a session of their own), if it exists."""
        sessions = list(self.sessions.values())
        if self.implicit_session is not None:
            sessions.append(self.implicit_session)
        return sessions

    # -- Link interface (the router delivers through these) ----------------------------

    def can_deliver(self) -> bool:
        return (
            self.started and not self.flow_paused and not self.write_paused and self.state is READY
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
