"""The STOMP engine's shared part: state, input, output, the JMQ engine underneath (each
frame becomes JMQ requests, each JMQ reply, delivery or GOODBYE becomes frames), CONNECT
and the login (agreeing heart-beats: stomp_beats.py keeps them), and deliveries.
stomp.py says how the parts fit."""

from __future__ import annotations

import logging
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.protocol.auth import encode_auth_body, encode_basic_password
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_AUTH_TYPE,
    JMQ_CLIENT_ID,
    JMQ_CONSUMER_ID,
    JMQ_GOODBYE_REASON_STRING,
    JMQ_PROTOCOL_LEVEL,
    JMQ_REASON,
    JMQ_SIZE,
    JMQ_STATUS,
    JMQ_USER_AGENT,
    JMQ_VERSION,
)
from broker.protocol.packet import OFF_CONSUMER_ID, OFF_SIZE, Packet, build_packet
from broker.protocol.stomp import VERSIONS, Frame, FrameReader, encode_frame, parse_heart_beat
from broker.protocol.types import (
    FLAG_A,
    FLAG_R,
    MESSAGE_TYPES,
    PacketType,
    Status,
)
from broker.security.digest import md5str

from .effects import NO_EFFECTS, CancelTimer, Close, Effect, Effects, Outbox, StartTimer
from .messages import SEND_REPLY_OK
from .stomp_beats import StompHeartBeats
from .stomp_link import StompLink
from .stomp_mapping import (
    MappingError,
    SendShape,
    StompDest,
    frame_parts,
    subscription_head,
)
from .stomp_states import (
    CLOSED,
    CONNECTED,
    FRAME_RULES,
    NEW,
    FrameRule,
    StompEvent,
    next_state,
)

if TYPE_CHECKING:
    from broker.core.message import Message

log = logging.getLogger("broker.stomp")

_SIZE = struct.Struct(">i")
_I64 = struct.Struct(">q")
# A SEND's OK reply, whatever its correlation id: the bytes either side of that id.
_SEND_OK_LEN = len(SEND_REPLY_OK)
SEND_OK_HEAD = SEND_REPLY_OK[:OFF_CONSUMER_ID]
SEND_OK_REST = SEND_REPLY_OK[OFF_CONSUMER_ID + 8 :]
# The JMQ protocol level the STOMP side speaks to the JMQ engine.
_PROTOCOL_LEVEL = 500


@dataclass(slots=True)
class StompSettings:
    """A STOMP service's settings (broker/props.py's STOMP_* properties)."""

    # What the server offers in CONNECTED's heart-beat: (sx, sy) in ms; 0 = none.
    heartbeat_send: int = 10000
    heartbeat_receive: int = 10000
    max_frame: int = 70 * 1024 * 1024
    max_headers: int = 1000
    max_header_line: int = 64 * 1024
    # Deliveries in flight per subscription before the next credit (after a write).
    prefetch: int = 1000


class Subscription:
    """One SUBSCRIBE: its id, destination, ack mode and the messages not acked yet."""

    __slots__ = ("id", "dest", "ack", "cid", "unacked", "delivered", "durable", "head")

    def __init__(self, sid: str, dest: StompDest, ack: str, durable: str | None) -> None:
        self.id = sid
        self.dest = dest
        self.ack = ack
        self.cid = 0  # the JMQ consumer id, once ADD_CONSUMER is answered
        # message-id -> sysmsgid, in delivery order (client acks are cumulative).  An
        # OrderedDict: acks take the oldest, and a dict's iteration would step over every
        # slot its earlier deletions left at the front (until it next resizes).
        self.unacked: OrderedDict[str, bytes] = OrderedDict()
        self.delivered = 0  # since the last credit
        self.durable = durable
        self.head: bytes | None = None  # its MESSAGE frames' first lines


Reply = Callable[[Packet], None]

# Command -> handler, filled in by stomp.py once the rule sets are assembled.
FRAME_HANDLERS: dict[str, Callable[[Any, Frame], None]] = {}


class StompEngineBase(StompHeartBeats, Outbox):
    """State, input, output, the JMQ engine underneath, CONNECT, heart-beats and
    deliveries; the frame rules (stomp_frames.py) add the rest."""

    # Slots: ten thousand idle connections are ten thousand of these (bench/stomp.py
    # --idle), and a dict per instance is most of an idle one's memory.
    __slots__ = (
        "settings",
        "wake",
        "flush",
        "inner",
        "router",
        "metrics",
        "id",
        "state",
        "_rules",
        "_default",
        "version",
        "reader",
        "_backlog",
        "_waiting",
        "_adding",
        "_held",
        "_next_cid",
        "_pumping",
        "subs",
        "_by_cid",
        "_txns",
        "_txn_nacks",
        "_temps",
        "_dests",
        "_shapes",
        "_sessions",
        "_login",
        "_connect",
        "_client_beats",
        "_disconnect",
        "last_read",
        "_wrote",
        "hb_in",
        "hb_out",
        "_ip",
    )

    def __init__(
        self,
        broker: Any,
        service: Any,
        *,
        wake: Callable[[], None],
        flush: Callable[[], None],
        settings: StompSettings | None = None,
    ) -> None:
        self.settings = s = settings or service.stomp or StompSettings()
        self.wake = wake
        self.flush = flush
        self.inner = StompLink(
            broker, service, self, wake=self._inner_wake, flush=self._inner_flush
        )
        self.router = self.inner.router
        self.metrics = self.inner.metrics
        self.id = self.inner.id
        self.state = NEW
        self._rules, self._default = FRAME_RULES[NEW]
        self.version = "1.0"
        self.reader = FrameReader(
            "1.0",
            max_frame=s.max_frame,
            max_headers=s.max_headers,
            max_header_line=s.max_header_line,
            hold_after_connect=True,  # what comes with CONNECT is read in its version
        )
        Outbox.__init__(self)  # the write batch and effects the driver takes
        self._backlog: list[Frame] = []
        # Correlation id -> what takes the reply: a callback, or the SEND frame whose
        # OK reply means its receipt (no closure per SEND).
        self._waiting: dict[int, Reply | Frame] = {}
        # The subscription whose ADD_CONSUMER is being answered, and the deliveries
        # made meanwhile, written after its receipt (see on_subscribe).
        self._adding: Subscription | None = None
        self._held: list[bytes] | None = None
        self._next_cid = 0
        self._ip: bytes | None = None  # the client's address for message IDs, once known
        self._pumping = False
        self.subs: dict[str, Subscription] = {}
        self._by_cid: dict[int, Subscription] = {}
        self._txns: dict[str, int] = {}
        # Transaction -> the NACKs made in it, done at its COMMIT (None: none yet).
        self._txn_nacks: dict[str, list[tuple[Subscription, list[tuple[str, bytes]]]]] | None = None
        self._temps: set[str] = set()
        self._dests: dict[str, StompDest] = {}  # destination header -> its parse
        self._shapes: dict[tuple[tuple[str, str], ...], SendShape] = {}  # on_send
        self._sessions: dict[int, int] = {}  # ack mode -> JMQ session id
        self._login: tuple[str, str] = ("guest", "guest")
        self._connect: Frame | None = None
        self._client_beats = (0, 0)
        self._disconnect: Frame | None = None
        self.last_read = time.monotonic()
        self._wrote = False
        self.hb_in = 0  # ms: the client beats at least this often (0: not watched)
        self.hb_out = 0  # ms: we beat this often (0: never)

    # -- what the driver and the broker read -----------------------------------------

    @property
    def peer(self) -> str:
        return self.inner.peer

    @peer.setter
    def peer(self, value: str) -> None:
        self.inner.peer = value

    @property
    def sockname(self) -> Any:
        return self.inner.sockname

    @sockname.setter
    def sockname(self, value: Any) -> None:
        self.inner.sockname = value

    @property
    def write_paused(self) -> bool:
        return self.inner.write_paused

    @write_paused.setter
    def write_paused(self, value: bool) -> None:
        self.inner.write_paused = value

    # -- entry points ------------------------------------------------------------------

    def start(self) -> Effects:
        """The transport is up: the JMQ engine registers and arms its login deadline
        (a client that never sends CONNECT is closed when it passes)."""
        self._effects.extend(self.inner.start())
        self.pump()
        return self.take_effects()

    def receive_data(self, data: bytes) -> Effects:
        if self.state is CLOSED:
            return NO_EFFECTS
        # The broker's ping loop reads the JMQ engine's idea of when the client was heard.
        self.last_read = self.inner.last_read = time.monotonic()
        self.inner.ping_outstanding = 0
        m = self.metrics
        m.packet_bytes_in += len(data)
        try:
            frames = self.reader.feed(data)
        except ProtocolError as exc:
            self._fatal(f"unreadable STOMP data: {exc}", None)
            return self.take_effects()
        m.packets_in += len(frames)
        for f in frames:
            if self.state is CLOSED:
                break
            self._frame(f)
        self.pump()
        return self.take_effects()

    def connection_lost(self) -> None:
        """The transport is gone: the JMQ engine releases everything (unacked messages
        go back, open transactions roll back, temporary destinations go)."""
        if self.state is not CLOSED:
            self._to(StompEvent.CLOSED)
        self.inner.connection_lost()

    def resume_writing(self) -> None:
        self.inner.resume_writing()
        self.after_write()

    def after_write(self) -> None:
        """The driver wrote a batch: subscriptions that used half their credit get the
        next (not while the transport holds a full buffer: then resume_writing will)."""
        if self.state is not CONNECTED or self.inner.write_paused:
            return
        half = max(1, self.settings.prefetch // 2)
        for sub in list(self.subs.values()):
            if sub.delivered >= half and sub.cid:
                sub.delivered = 0
                self._request(
                    PacketType.RESUME_FLOW,
                    {JMQ_CONSUMER_ID: JLong(sub.cid), JMQ_SIZE: JInt(self.settings.prefetch)},
                )
        self.pump()

    # -- output ------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        self._wrote = True
        self._out.append(data)
        if not self._pending:
            self._pending = True
            self.wake()

    def send(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        self.write(encode_frame(command, headers, body, self.version))

    def _effect(self, eff: Effect) -> None:
        self._effects.append(eff)
        if not self._pending:
            self._pending = True
            self.wake()

    def _receipt(self, frame: Frame) -> None:
        rid = frame.get("receipt")
        if rid is not None:
            self.send("RECEIPT", [("receipt-id", rid)])

    def _error(self, message: str, frame: Frame | None, detail: str = "") -> None:
        """An ERROR frame (the connection goes on: a refused operation)."""
        headers = [("message", message), ("content-type", "text/plain")]
        if frame is not None:
            rid = frame.get("receipt")
            if rid is not None:
                headers.append(("receipt-id", rid))
        self.send("ERROR", headers, (detail or message).encode("utf-8"))

    def _fatal(self, reason: str, frame: Frame | None) -> None:
        """ERROR, log once, close this connection only."""
        if self.state is CLOSED:
            return
        log.warning("closing STOMP connection %s from %s: %s", self.id, self.peer, reason)
        self._error(reason, frame)
        self._close(reason)

    def _close(self, reason: str) -> None:
        if self.state is CLOSED:
            return
        self._to(StompEvent.CLOSED)
        self._effect(CancelTimer("stomp-hb-in"))
        self._effect(CancelTimer("stomp-hb-out"))
        # The JMQ engine releases the connection's resources and asks the driver to close.
        self.inner.close(reason)
        self._collect_inner()
        if not any(type(e) is Close for e in self._effects):
            self._effect(Close(reason))

    # -- states --------------------------------------------------------------------------

    def _to(self, event: StompEvent) -> None:
        self.state = next_state(self.state, event)
        self._rules, self._default = FRAME_RULES[self.state]

    def _frame(self, f: Frame) -> None:
        if self._disconnect is not None:
            return  # after DISCONNECT: nothing more is taken
        rule = self._rules.get(f.command, self._default)
        if rule is FrameRule.HANDLE:
            handler = FRAME_HANDLERS.get(f.command)
            if handler is None:
                self._fatal(f"{f.command} is not a client frame", f)
                return
            try:
                handler(self, f)
            except MappingError as exc:
                self._error(str(exc), f)
            except ProtocolError as exc:
                self._fatal(str(exc), f)
        elif rule is FrameRule.HOLD:
            self._backlog.append(f)
        elif rule is FrameRule.NOT_CONNECTED:
            self._fatal(f"{f.command} before CONNECT", f)
        elif rule is FrameRule.ALREADY_CONNECTED:
            self._fatal(f"{f.command} on a connection that is already connected", f)

    # -- the JMQ engine underneath ----------------------------------------------------

    def _inner_wake(self) -> None:
        if not self._pending:
            self._pending = True
            self.wake()

    def _inner_flush(self) -> None:
        # An answer the store released (a persistent send's reply): out now.
        self.pump()
        self.flush()

    def _collect_inner(self) -> None:
        eff = self.inner.take_effects()
        if eff:
            self._effects.extend(eff)

    def _request(
        self,
        ptype: int,
        props: dict[str, object] | None = None,
        on_reply: Reply | None = None,
        *,
        body: bytes = b"",
        fields: dict[int, object] | None = None,
    ) -> None:
        """A JMQ request to the engine underneath; ``on_reply`` gets its reply."""
        cid = 0
        flags = 0
        if on_reply is not None:
            cid = self._cid()
            self._waiting[cid] = on_reply
            flags = FLAG_A
        raw = build_packet(
            ptype, props=props, body=body, flags=flags, consumer_id=cid, fields=fields
        )
        self._feed(raw)

    def _cid(self) -> int:
        self._next_cid += 1
        return self._next_cid

    def _feed(self, raw: bytes) -> None:
        eff = self.inner.receive_packets([Packet(raw)])
        if eff:
            self._effects.extend(eff)
        self.pump()

    def pump(self) -> None:
        """Turn what the JMQ engine wrote (replies, deliveries, GOODBYE) into frames."""
        if self._pumping:
            return
        inner = self.inner
        # Nothing queued since the last pump (most reads: SENDs and ACKs make no JMQ
        # packet): nothing to take (data_to_send would only clear a flag already clear).
        if inner._pending or inner._out or inner._effects:
            self._pumping = True
            try:
                # Until the engine queues nothing more (a delivery's frame can cause a
                # reply); the last, empty, call also clears its flush_pending when only
                # effects were.
                while out := inner.data_to_send():
                    for buf in out:
                        off = 0
                        n = len(buf)
                        while off + 12 <= n:
                            size = _SIZE.unpack_from(buf, OFF_SIZE + off)[0]
                            if size == _SEND_OK_LEN and self._send_ok(buf, off):
                                off += size
                                continue
                            self._from_broker(Packet(bytes(buf[off : off + size])))
                            off += size
                self._collect_inner()
            finally:
                self._pumping = False
        if self._backlog and self.state is CONNECTED:
            # Frames that came with CONNECT, taken now that it is answered: here, not in
            # the reply's callback, so their own requests are answered as they are made.
            backlog, self._backlog = self._backlog, []
            for frame in backlog:
                if self.state is CLOSED:
                    break
                self._frame(frame)

    def _send_ok(self, buf: bytes | bytearray, off: int) -> bool:
        """A SEND's OK reply, taken without decoding it: its receipt, if it asked."""
        cut = off + OFF_CONSUMER_ID
        if buf[off:cut] != SEND_OK_HEAD or buf[cut + 8 : off + _SEND_OK_LEN] != SEND_OK_REST:
            return False
        self._send_done(_I64.unpack_from(buf, cut)[0], buf, off)
        return True

    def _send_done(self, cid: int, buf: bytes | bytearray, off: int = 0) -> None:
        """SEND ``cid`` is answered OK (its SEND_REPLY at ``off`` in ``buf``): the frame's
        receipt, or the waiter a DISCONNECT wrapped round it (_waiting_done)."""
        waiting = self._waiting.pop(cid, None)
        if type(waiting) is Frame:
            self._receipt(waiting)
        elif waiting is not None:
            waiting(Packet(bytes(buf[off : off + _SEND_OK_LEN])))  # type: ignore[operator]

    def _from_broker(self, pkt: Packet) -> None:
        ptype = pkt.type
        if ptype in MESSAGE_TYPES:
            return  # never: StompLink delivers through render (a browse is not STOMP's)
        cb = self._waiting.pop(pkt.consumer_id, None) if pkt.consumer_id else None
        if cb is not None:
            self._answered(cb, pkt)
        elif ptype == PacketType.AUTHENTICATE_REQUEST:
            self._authenticate(pkt)
        elif ptype == PacketType.GOODBYE:
            why = (
                pkt.properties.get(JMQ_GOODBYE_REASON_STRING) or "the broker closed the connection"
            )
            if self.state is not CLOSED:
                self._error(str(why), None)
                self._to(StompEvent.CLOSED)
        elif ptype == PacketType.PING:
            # The broker's ping of an idle connection (imq.ping.interval): STOMP has none
            # to pass on, and a client that promised heart-beats is watched by them; the
            # transport is alive, so answered here (1.1+: an end-of-line probes the socket).
            if self.version != "1.0" and self.state is CONNECTED:
                self.write(b"\n")
            if pkt.flags & FLAG_A:
                self._request(PacketType.PING_REPLY)
        # RESUME_FLOW (producers: sends carry no producer): nothing to say.

    # -- CONNECT -----------------------------------------------------------------------

    def on_connect(self, f: Frame) -> None:
        accept = f.get("accept-version")
        if accept is None:
            version = "1.0"
        else:
            offered = {v.strip() for v in accept.split(",")}
            common = [v for v in VERSIONS if v in offered]
            if not common:
                self.send(
                    "ERROR",
                    [("version", ",".join(VERSIONS)), ("message", "no supported version")],
                    f"Supported protocol versions are {' '.join(VERSIONS)}".encode(),
                )
                self._close(f"STOMP versions {accept} not supported")
                return
            version = common[-1]
        self._client_beats = parse_heart_beat(f.get("heart-beat")) if version != "1.0" else (0, 0)
        self.version = self.reader.version = version
        login = f.get("login")
        self._login = (login, f.get("passcode") or "") if login is not None else ("guest", "guest")
        self._connect = f
        self._to(StompEvent.CONNECT)
        # The frames that came in the same read as CONNECT, which the reader kept
        # unread: read now in the version agreed (their escapes), held until the login.
        held = self.reader.feed(b"")
        if held:
            self.metrics.packets_in += len(held)
            self._backlog.extend(held)
        self._request(
            PacketType.HELLO,
            {
                JMQ_PROTOCOL_LEVEL: JInt(_PROTOCOL_LEVEL),
                JMQ_USER_AGENT: f"STOMP {version}",
                JMQ_VERSION: version,
            },
            self._hello_answered,
        )

    def _hello_answered(self, pkt: Packet) -> None:
        status = pkt.properties.get(JMQ_STATUS)
        if status != Status.OK:
            reason = pkt.properties.get(JMQ_REASON) or f"connection refused ({status})"
            self._fatal(str(reason), self._connect)

    def _authenticate(self, pkt: Packet) -> None:
        user, password = self._login
        auth_type = str(pkt.properties.get(JMQ_AUTH_TYPE, "basic"))
        if auth_type == "basic":
            credential = encode_basic_password(password)
        else:
            nonce = pkt.body.decode("ascii", "replace")
            credential = md5str(md5str(f"{user}:{password}") + ":" + nonce)
        self._request(
            PacketType.AUTHENTICATE,
            {JMQ_AUTH_TYPE: auth_type},
            self._authenticated,
            body=encode_auth_body(user, credential),
        )

    def _authenticated(self, pkt: Packet) -> None:
        status = pkt.properties.get(JMQ_STATUS)
        f = self._connect
        if status != Status.OK:
            why = (
                "access denied"
                if status == Status.FORBIDDEN
                else "authentication failed: unknown user or wrong passcode"
            )
            reason = pkt.properties.get(JMQ_REASON)
            self._fatal(f"{why} ({reason})" if reason and status == Status.FORBIDDEN else why, f)
            return
        assert f is not None
        cid = f.get("client-id")
        if cid:
            self._request(PacketType.SET_CLIENTID, {JMQ_CLIENT_ID: cid}, self._client_id_set)
        else:
            self._logged_in()

    def _client_id_set(self, pkt: Packet) -> None:
        if pkt.properties.get(JMQ_STATUS) != Status.OK:
            reason = pkt.properties.get(JMQ_REASON) or "client-id refused"
            self._fatal(f"client-id refused: {reason}", self._connect)
            return
        self._logged_in()

    def _logged_in(self) -> None:
        self._request(PacketType.START)
        headers = [("version", self.version)]
        if self.version != "1.0":
            cx, cy = self._client_beats
            sx, sy = self.settings.heartbeat_send, self.settings.heartbeat_receive
            self.hb_out = max(sx, cy) if sx and cy else 0
            self.hb_in = max(cx, sy) if cx and sy else 0
            headers.append(("heart-beat", f"{sx},{sy}"))
        headers.append(("session", str(self.id)))
        headers.append(("server", f"openmq-py/{self.inner.broker.version}"))
        self._to(StompEvent.LOGGED_IN)
        log.info(
            "STOMP connection %s: %s connected from %s (STOMP %s)",
            self.id,
            self._login[0],
            self.peer,
            self.version,
        )
        self.send("CONNECTED", headers)
        # Neither the CONNECT frame nor the passcode is kept past the login.
        self._connect = None
        self._login = ("", "")
        if self.hb_out:
            self._effect(StartTimer("stomp-hb-out", self.hb_out / 2000, self._beat_out))
        if self.hb_in:
            self._effect(StartTimer("stomp-hb-in", self.hb_in / 4000, self._check_in))

    def _answered(self, cb: Reply | Frame, pkt: Packet) -> None:
        if type(cb) is Frame:
            self._send_answered(cb, pkt)
        else:
            cb(pkt)  # type: ignore[operator]

    def _send_answered(self, f: Frame, pkt: Packet) -> None:
        status = pkt.properties.get(JMQ_STATUS)
        if status == Status.OK:
            self._receipt(f)
            return
        self._send_refused(f, status, pkt.properties.get(JMQ_REASON))

    def _send_refused(self, f: Frame, status: object, reason: object) -> None:
        reason = reason or f"status {status}"
        what = f"SEND to {f.get('destination')}"
        log.info("STOMP connection %s: %s refused: %s", self.id, what, reason)
        self._error(f"{what} refused: {reason}", f)

    # -- deliveries (StompLink calls these from the router) --------------------------

    def render(self, consumer_id: int, msg: Message, redelivered: bool, count: int) -> bytes:
        sub = self._by_cid.get(consumer_id)
        if sub is None:
            sub = self._adding
            if sub is None:
                return b""  # not a subscription of ours (cannot be: see on_unsubscribe)
            # A new subscription's first deliveries, made as its consumer is added.
            sub.cid = consumer_id
            self._by_cid[consumer_id] = sub
        parts = frame_parts(msg, self.version, self.id)
        ack = 0
        if sub.ack != "auto":
            sub.unacked[parts.msg_id] = msg.key
            # The ack header is 1.2's (an ACK's id); 1.0 and 1.1 ACK by message-id, and
            # every header line costs a client's parser (stomp.py: ~19,000 instructions).
            if self.version == "1.2":
                ack = consumer_id
        sub.delivered += 1
        head = sub.head
        if head is None:
            head = sub.head = subscription_head(sub.id, sub.dest.stomp, self.version)
        return parts.frame(head, ack, redelivered or bool(msg.base_flags & FLAG_R), count)

    def write_delivery(self, frame: bytes) -> None:
        held = self._held
        if held is not None:
            held.append(frame)
            return
        # write(), inline: once a delivery.
        self._wrote = True
        self._out.append(frame)
        if not self._pending:
            self._pending = True
            self.wake()

    def release_held(self) -> None:
        """Write the deliveries held while a subscription was being added."""
        self._adding = None
        held, self._held = self._held, None
        if held:
            for frame in held:
                self.write(frame)
