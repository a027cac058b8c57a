"""The STOMP engine: one STOMP connection's rules, without I/O, over a JMQ engine.

OpenMQ's STOMP bridge is a JMS client inside the broker; here a STOMP connection is a
:class:`ConnectionEngine` (the JMQ rules: login against the user repository, access
control, sessions, consumers, transactions, flow control, limits) that the STOMP engine
drives with the JMQ packets each frame means, reading what that engine answers (replies,
deliveries, GOODBYE) and writing STOMP frames for them.  So the same users, groups, ACL
rules, destinations, limits, DMQ and transactions hold for both protocols, and the
connection is listed (``imqcmd list cxn``) as any other.

Bytes come in through :meth:`receive_data`; frames for the client go to ``out`` (the
driver's write batch, ``wake`` called once per batch); effects (the JMQ engine's, and
the heart-beat timers) are returned or left for :meth:`take_effects`, as in engine.py.
The driver calls :meth:`pump` before it writes and :meth:`after_write` after, which is
where a subscription gets its next delivery credit: a subscriber that does not read
stops its deliveries once the transport pauses writing.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.protocol.auth import encode_auth_body, encode_basic_password
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import OFF_SIZE, VH_TRANSACTIONID, Packet, build_packet
from broker.protocol.stomp import VERSIONS, Frame, FrameReader, encode_frame
from broker.protocol.sysmsgid import sysmsgid_string
from broker.protocol.types import (
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_A,
    MESSAGE_TYPES,
    AckMode,
    PacketType,
    Status,
)
from broker.security.digest import md5str

from .effects import NO_EFFECTS, CancelTimer, Close, Effect, Effects, StartTimer
from .engine import ConnectionEngine
from .stomp_mapping import (
    MappingError,
    StompDest,
    message_frame_headers,
    message_packet,
    parse_destination,
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

log = logging.getLogger("broker.stomp")

_ACK_BLOCK = struct.Struct(">q32s")
_SIZE = struct.Struct(">i")
_ACK_MODES = {"auto": AckMode.NO_ACKNOWLEDGE, "client": AckMode.CLIENT_ACKNOWLEDGE}
_ACK_MODES["client-individual"] = AckMode.CLIENT_ACKNOWLEDGE
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

    __slots__ = ("id", "dest", "ack", "cid", "unacked", "delivered", "durable")

    def __init__(self, sid: str, dest: StompDest, ack: str, durable: str | None) -> None:
        self.id = sid
        self.dest = dest
        self.ack = ack
        self.cid = 0  # the JMQ consumer id, once ADD_CONSUMER is answered
        # message-id -> sysmsgid, in delivery order (client acks are cumulative).
        self.unacked: dict[str, bytes] = {}
        self.delivered = 0  # since the last credit
        self.durable = durable


Reply = Callable[[Packet], None]


class StompEngine:
    """The broker's side of one STOMP connection, without I/O."""

    def __init__(
        self,
        broker: Any,
        service: Any,
        *,
        wake: Callable[[], None],
        flush: Callable[[], None],
        settings: StompSettings | None = None,
    ) -> None:
        self.settings = s = settings or getattr(service, "stomp", None) or StompSettings()
        self.wake = wake
        self.flush = flush
        self.inner = ConnectionEngine(
            broker, service, wake=self._inner_wake, flush=self._inner_flush
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
        )
        self.out: list[bytes | bytearray] = []
        self.output_pending = False
        self._effects: list[Effect] = []
        self._backlog: list[Frame] = []
        self._waiting: dict[int, Reply] = {}
        self._next_cid = 0
        self._pumping = False
        self.subs: dict[str, Subscription] = {}
        self._by_cid: dict[int, Subscription] = {}
        self._txns: dict[str, int] = {}
        self._temps: set[str] = set()
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

    def take_effects(self) -> Effects:
        effects = self._effects
        if not effects:
            return NO_EFFECTS
        self._effects = []
        return effects

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
                    {"JMQConsumerID": JLong(sub.cid), "JMQSize": JInt(self.settings.prefetch)},
                )
        self.pump()

    # -- output ------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        self._wrote = True
        self.out.append(data)
        if not self.output_pending:
            self.output_pending = True
            self.wake()

    def send(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        self.write(encode_frame(command, headers, body, self.version))

    def _effect(self, eff: Effect) -> None:
        self._effects.append(eff)
        if not self.output_pending:
            self.output_pending = True
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
            handler = _HANDLERS.get(f.command)
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
        if not self.output_pending:
            self.output_pending = True
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
        self._pumping = True
        try:
            inner = self.inner
            while inner.out:
                out, inner.out = inner.out, []
                inner.output_pending = False
                for buf in out:
                    off = 0
                    n = len(buf)
                    while off + 12 <= n:
                        size = _SIZE.unpack_from(buf, OFF_SIZE + off)[0]
                        self._from_broker(Packet(bytes(buf[off : off + size])))
                        off += size
            inner.output_pending = False
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

    def _from_broker(self, pkt: Packet) -> None:
        ptype = pkt.type
        if ptype in MESSAGE_TYPES:
            self._deliver(pkt)
            return
        cb = self._waiting.pop(pkt.consumer_id, None) if pkt.consumer_id else None
        if cb is not None:
            cb(pkt)
        elif ptype == PacketType.AUTHENTICATE_REQUEST:
            self._authenticate(pkt)
        elif ptype == PacketType.GOODBYE:
            why = pkt.properties.get("JMQGoodbyeReasonString") or "the broker closed the connection"
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
        self._client_beats = _heartbeat(f.get("heart-beat")) if version != "1.0" else (0, 0)
        self.version = self.reader.version = version
        login = f.get("login")
        self._login = (login, f.get("passcode") or "") if login is not None else ("guest", "guest")
        self._connect = f
        self._to(StompEvent.CONNECT)
        self._request(
            PacketType.HELLO,
            {
                "JMQProtocolLevel": JInt(_PROTOCOL_LEVEL),
                "JMQUserAgent": f"STOMP {version}",
                "JMQVersion": version,
            },
            self._hello_answered,
        )

    def _hello_answered(self, pkt: Packet) -> None:
        status = pkt.properties.get("JMQStatus")
        if status != Status.OK:
            reason = pkt.properties.get("JMQReason") or f"connection refused ({status})"
            self._fatal(str(reason), self._connect)

    def _authenticate(self, pkt: Packet) -> None:
        user, password = self._login
        auth_type = str(pkt.properties.get("JMQAuthType", "basic"))
        if auth_type == "basic":
            credential = encode_basic_password(password)
        else:
            nonce = pkt.body.decode("ascii", "replace")
            credential = md5str(md5str(f"{user}:{password}") + ":" + nonce)
        self._request(
            PacketType.AUTHENTICATE,
            {"JMQAuthType": auth_type},
            self._authenticated,
            body=encode_auth_body(user, credential),
        )

    def _authenticated(self, pkt: Packet) -> None:
        status = pkt.properties.get("JMQStatus")
        f = self._connect
        if status != Status.OK:
            why = (
                "access denied"
                if status == Status.FORBIDDEN
                else "authentication failed: unknown user or wrong passcode"
            )
            reason = pkt.properties.get("JMQReason")
            self._fatal(f"{why} ({reason})" if reason and status == Status.FORBIDDEN else why, f)
            return
        assert f is not None
        cid = f.get("client-id")
        if cid:
            self._request(PacketType.SET_CLIENTID, {"JMQClientID": cid}, self._client_id_set)
        else:
            self._logged_in()

    def _client_id_set(self, pkt: Packet) -> None:
        if pkt.properties.get("JMQStatus") != Status.OK:
            reason = pkt.properties.get("JMQReason") or "client-id refused"
            self._fatal(f"client-id refused: {reason}", self._connect)
            return
        self._logged_in()

    def _logged_in(self) -> None:
        f = self._connect
        assert f is not None
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
        if self.hb_out:
            self._effect(StartTimer("stomp-hb-out", self.hb_out / 1000, self._beat_out))
        if self.hb_in:
            self._effect(StartTimer("stomp-hb-in", self.hb_in / 4000, self._check_in))

    # -- heart-beats -------------------------------------------------------------------

    def _beat_out(self) -> Effects:
        if self.state is CONNECTED:
            if not self._wrote:
                self.write(b"\n")
            self._wrote = False
            self._effect(StartTimer("stomp-hb-out", self.hb_out / 1000, self._beat_out))
        return self.take_effects()

    def _check_in(self) -> Effects:
        if self.state is CONNECTED:
            silent = (time.monotonic() - self.last_read) * 1000
            # Dropped once silent for 1.5 intervals, checked every quarter: within twice.
            if silent > self.hb_in * 1.5:
                self._fatal(
                    f"no heart-beat or frame for {silent / 1000:.1f} s "
                    f"(the client promised one every {self.hb_in / 1000:g} s)",
                    None,
                )
            else:
                self._effect(StartTimer("stomp-hb-in", self.hb_in / 4000, self._check_in))
        return self.take_effects()

    # -- frames ------------------------------------------------------------------------

    def _status_reply(self, f: Frame, what: str, then: Callable[[], None] | None = None) -> Reply:
        def answered(pkt: Packet) -> None:
            status = pkt.properties.get("JMQStatus")
            if status == Status.OK:
                if then is not None:
                    then()
                self._receipt(f)
            else:
                reason = pkt.properties.get("JMQReason") or f"status {status}"
                log.info("STOMP connection %s: %s refused: %s", self.id, what, reason)
                self._error(f"{what} refused: {reason}", f)

        return answered

    def _ensure_temp(self, dest: StompDest) -> None:
        if dest.dtype & DEST_TEMP and dest.name not in self._temps:
            own = f"stomp/{self.id}/"
            if own not in dest.name:
                return  # another connection's: it exists or it does not
            self._temps.add(dest.name)
            self._request(
                PacketType.CREATE_DESTINATION,
                {"JMQDestination": dest.name, "JMQDestType": JInt(dest.dtype)},
                lambda _pkt: None,
            )

    def _session(self, ack_mode: int) -> int:
        sid = self._sessions.get(ack_mode)
        if sid is None:

            def made(pkt: Packet) -> None:
                got = pkt.properties.get("JMQSessionID")
                if isinstance(got, int):
                    self._sessions[ack_mode] = int(got)

            self._request(PacketType.CREATE_SESSION, {"JMQAckMode": JInt(ack_mode)}, made)
            sid = self._sessions.get(ack_mode)
            if sid is None:
                raise MappingError("could not create a session")
        return sid

    def on_send(self, f: Frame) -> None:
        dest = parse_destination(f.get("destination"), self.id)
        rt = f.get("reply-to")
        reply_to = parse_destination(rt, self.id) if rt else None
        txn = 0
        tname = f.get("transaction")
        if tname is not None:
            txn = self._txns.get(tname, 0)
            if not txn:
                raise MappingError(f"SEND in transaction {tname!r}, which is not begun")
        self._ensure_temp(dest)
        if reply_to is not None:
            self._ensure_temp(reply_to)
        cid = self._cid()
        self._waiting[cid] = self._status_reply(f, f"SEND to {dest.stomp}")
        raw = message_packet(
            f.headers, f.body, dest, reply_to, txn, self.id, self.id, want_reply=cid, flags=FLAG_A
        )
        self._feed(raw)

    def on_subscribe(self, f: Frame) -> None:
        dest = parse_destination(f.get("destination"), self.id)
        sid = f.get("id")
        if sid is None:
            if self.version != "1.0":
                raise MappingError("SUBSCRIBE without an id header")
            sid = "/subscription-to/" + dest.stomp  # as the stock bridge names it
        if sid in self.subs:
            raise MappingError(f"subscription {sid!r} exists already on this connection")
        ack = f.get("ack", "auto") or "auto"
        mode = _ACK_MODES.get(ack)
        if mode is None:
            raise MappingError(f"ack:{ack} is not auto, client or client-individual")
        durable = f.get("durable-subscriber-name") or f.get("persistent-subscription-name")
        if durable and not dest.dtype & DEST_TOPIC:
            durable = None  # a queue's subscription is durable anyway (the stock bridge too)
        sub = Subscription(sid, dest, ack, durable)
        self._ensure_temp(dest)
        props: dict[str, object] = {
            "JMQDestination": dest.name,
            "JMQDestType": JInt(dest.dtype),
            "JMQSessionID": JLong(self._session(mode)),
            "JMQSize": JInt(self.settings.prefetch),
        }
        selector = f.get("selector")
        if selector:
            props["JMQSelector"] = selector
        if durable:
            props["JMQDurableName"] = durable
        if (f.get("no-local") or "").lower() == "true":
            props["JMQNoLocal"] = True
        self.subs[sid] = sub

        def added(pkt: Packet) -> None:
            p = pkt.properties
            cons = p.get("JMQConsumerID")
            if p.get("JMQStatus") != Status.OK or not isinstance(cons, int):
                self.subs.pop(sid, None)
                reason = p.get("JMQReason") or f"status {p.get('JMQStatus')}"
                log.info("STOMP connection %s: SUBSCRIBE %s refused: %s", self.id, sid, reason)
                self._error(f"SUBSCRIBE to {dest.stomp} refused: {reason}", f)
                return
            sub.cid = int(cons)
            self._by_cid[sub.cid] = sub
            self._receipt(f)

        self._request(PacketType.ADD_CONSUMER, props, added)

    def on_unsubscribe(self, f: Frame) -> None:
        sid = f.get("id")
        durable = f.get("durable-subscriber-name") or f.get("persistent-subscription-name")
        sub = self.subs.get(sid) if sid is not None else None
        if sub is None and sid is None and self.version == "1.0":
            d = f.get("destination")
            sub = next((s for s in self.subs.values() if s.dest.stomp == d), None)
        if sub is None and not durable:
            raise MappingError(f"no subscription {sid!r} on this connection")
        if sub is not None:
            del self.subs[sub.id]
            self._by_cid.pop(sub.cid, None)
            if sub.cid:
                # Its unacked messages go back to be delivered again.
                self._request(
                    PacketType.DELETE_CONSUMER,
                    {"JMQConsumerID": JLong(sub.cid), "JMQRedeliverAll": True},
                    (lambda _p: None) if durable else self._status_reply(f, "UNSUBSCRIBE"),
                )
        if durable:
            props: dict[str, object] = {"JMQDurableName": durable}
            if self.inner.client_id:
                props["JMQClientID"] = self.inner.client_id
            self._request(
                PacketType.DELETE_CONSUMER, props, self._status_reply(f, f"UNSUBSCRIBE {durable}")
            )

    def _acked(self, f: Frame) -> tuple[Subscription, list[tuple[str, bytes]]]:
        """The subscription and messages an ACK or NACK names (cumulative for client)."""
        if self.version == "1.2":
            ack_id = f.get("id")
            if ack_id is None:
                raise MappingError(f"{f.command} without an id header")
            sub_cid, _, msg_id = ack_id.partition(":")
            sub = self._by_cid.get(int(sub_cid)) if sub_cid.isdigit() else None
        else:
            msg_id = f.get("message-id") or ""
            if not msg_id:
                raise MappingError(f"{f.command} without a message-id header")
            sname = f.get("subscription")
            if sname is not None:
                sub = self.subs.get(sname)
            else:
                sub = next((s for s in self.subs.values() if msg_id in s.unacked), None)
        if sub is None or msg_id not in sub.unacked:
            raise MappingError(f"{f.command} of message {msg_id!r}, which is not waiting for one")
        if sub.ack == "client":
            taken = []
            for mid, key in sub.unacked.items():
                taken.append((mid, key))
                if mid == msg_id:
                    break
        else:
            taken = [(msg_id, sub.unacked[msg_id])]
        for mid, _ in taken:
            del sub.unacked[mid]
        return sub, taken

    def on_ack(self, f: Frame) -> None:
        sub, taken = self._acked(f)
        body = b"".join(_ACK_BLOCK.pack(sub.cid, key) for _, key in taken)
        fields: dict[int, object] | None = None
        tname = f.get("transaction")
        if tname is not None:
            txn = self._txns.get(tname)
            if not txn:
                raise MappingError(f"ACK in transaction {tname!r}, which is not begun")
            fields = {VH_TRANSACTIONID: txn}
        self._request(
            PacketType.ACKNOWLEDGE, None, self._status_reply(f, "ACK"), body=body, fields=fields
        )

    def on_nack(self, f: Frame) -> None:
        if self.version == "1.0":
            raise ProtocolError("NACK is not a STOMP 1.0 frame")
        sub, taken = self._acked(f)
        body = b"".join(_ACK_BLOCK.pack(sub.cid, key) for _, key in taken)
        # Back to the destination, marked redelivered (and counted towards the DMQ).
        self._request(PacketType.REDELIVER, {"JMQSetRedelivered": True}, body=body)
        self._receipt(f)

    def on_begin(self, f: Frame) -> None:
        name = f.get("transaction")
        if not name:
            raise MappingError("BEGIN without a transaction header")
        if name in self._txns:
            raise MappingError(f"transaction {name!r} is already begun")

        def started(pkt: Packet) -> None:
            p = pkt.properties
            tid = p.get("JMQTransactionID")
            if p.get("JMQStatus") != Status.OK or not isinstance(tid, int):
                self._error(f"BEGIN {name} refused: {p.get('JMQReason')}", f)
                return
            self._txns[name] = int(tid)
            self._receipt(f)

        self._request(
            PacketType.START_TRANSACTION,
            {"JMQSessionID": JLong(self._session(AckMode.NONE))},
            started,
        )

    def _end(self, f: Frame, ptype: int, what: str) -> None:
        name = f.get("transaction") or ""
        tid = self._txns.pop(name, None)
        if tid is None:
            raise MappingError(f"{what} of transaction {name!r}, which is not begun")
        props: dict[str, object] = {"JMQTransactionID": JLong(tid)}
        if ptype == PacketType.ROLLBACK_TRANSACTION:
            # What was acked in it comes again, marked redelivered.
            props["JMQRedeliver"] = True
        self._request(ptype, props, self._status_reply(f, f"{what} {name}"))

    def on_commit(self, f: Frame) -> None:
        self._end(f, PacketType.COMMIT_TRANSACTION, "COMMIT")

    def on_abort(self, f: Frame) -> None:
        self._end(f, PacketType.ROLLBACK_TRANSACTION, "ABORT")

    def on_disconnect(self, f: Frame) -> None:
        # Everything before it has been answered (the JMQ engine answers in order, a
        # persistent send once stored): the receipt waits for those still outstanding.
        if self._waiting:
            self._disconnect = f
            self._waiting_done(lambda: self._disconnected(f))
            return
        self._disconnected(f)

    def _waiting_done(self, then: Callable[[], None]) -> None:
        pending = dict(self._waiting)
        left = set(pending)

        for cid, cb in pending.items():

            def wrapped(pkt: Packet, cid: int = cid, cb: Reply = cb) -> None:
                cb(pkt)
                left.discard(cid)
                if not left:
                    then()

            self._waiting[cid] = wrapped

    def _disconnected(self, f: Frame) -> None:
        if self.state is CLOSED:
            return
        self._receipt(f)
        self._close("DISCONNECT from the client")

    # -- deliveries --------------------------------------------------------------------

    def _deliver(self, pkt: Packet) -> None:
        sub = self._by_cid.get(pkt.consumer_id)
        if sub is None:
            return  # a consumer just unsubscribed: the broker takes it back
        msg_id = "ID:" + sysmsgid_string(pkt.sysmsgid)
        ack = None
        if sub.ack != "auto":
            sub.unacked[msg_id] = pkt.sysmsgid
            ack = f"{sub.cid}:{msg_id}"
        sub.delivered += 1
        headers, body = message_frame_headers(pkt, sub.id, sub.dest.stomp, ack, self.id)
        self.write(encode_frame("MESSAGE", headers, body, self.version))


def _heartbeat(value: str | None) -> tuple[int, int]:
    if not value:
        return 0, 0
    try:
        a, _, b = value.partition(",")
        cx, cy = int(a.strip()), int(b.strip())
    except ValueError:
        raise ProtocolError(f"bad heart-beat header {value!r}") from None
    if cx < 0 or cy < 0:
        raise ProtocolError(f"bad heart-beat header {value!r}")
    return cx, cy


_HANDLERS: dict[str, Callable[[StompEngine, Frame], None]] = {
    "CONNECT": StompEngine.on_connect,
    "STOMP": StompEngine.on_connect,
    "SEND": StompEngine.on_send,
    "SUBSCRIBE": StompEngine.on_subscribe,
    "UNSUBSCRIBE": StompEngine.on_unsubscribe,
    "ACK": StompEngine.on_ack,
    "NACK": StompEngine.on_nack,
    "BEGIN": StompEngine.on_begin,
    "COMMIT": StompEngine.on_commit,
    "ABORT": StompEngine.on_abort,
    "DISCONNECT": StompEngine.on_disconnect,
}

__all__ = ["StompEngine", "StompSettings", "Subscription"]
