"""The HTTP tunnel services (``httpjms``, ``httpsjms``): the asyncio glue that serves
OpenMQ's tunnel servlet protocol at ``/imq/tunnel`` inside the broker process.

A stock client with ``imqConnectionType=HTTP`` (or an ``http://`` address) POSTs
``?Type=connect``, then keeps a GET ``?Type=pull`` outstanding to receive packets and
POSTs each of its packets as ``?Type=push`` (broker/protocol/httptunnel.py).  Each
tunnel connection's reliable stream is a sans-IO :class:`TunnelConnection`
(broker/engine/tunnel.py); the JMQ bytes it carries reach the same
:class:`ClientConnection` and engine as a TCP client's, through :class:`TunnelTransport`,
a stand-in for the socket transport.

OpenMQ runs this part as a servlet in a web container, linked to the broker's
``httpjms`` service over TCP; here the broker is its own web server, so the servlet's
link (``servletHost``/``servletPort``) does not exist.
"""

from __future__ import annotations

import asyncio
import html
import logging
import secrets
import socket
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from broker import props
from broker.engine.tunnel import TunnelConnection
from broker.protocol.errors import ProtocolError
from broker.protocol.http1 import HttpError, HttpRequest, RequestReader, response
from broker.protocol.httptunnel import (
    TunnelPacket,
    TunnelType,
    decode_packets,
    parse_request,
)

from .connection import ClientConnection

if TYPE_CHECKING:
    from .broker import Broker
    from .services import Service

log = logging.getLogger("broker.tunnel")

# The stock client's default URL is http://localhost/imq/tunnel; the tunnel web
# application OpenMQ ships (imqhttp.war) is usually deployed at /imqhttp/tunnel.
PATHS = ("/imq/tunnel", "/imqhttp/tunnel", "/imqhttps/tunnel")
# A continuous-mode pull is held at most this long (the servlet's MAX_PULL_BLOCK_PERIOD).
MAX_PULL_HOLD = 60.0
# A polling client's pull (pullPeriod > 0) is held this long for an answer on its way
# (the servlet answers it empty at once, and the client then sleeps a whole period even
# when the reply to what it just pushed comes a millisecond later).
POLL_GRACE = 0.2
# About this many bytes of packets per pull response.
PULL_BUDGET = 128 * 1024
# A request body: one packet (at most 8 KB of data from the stock client), with room.
MAX_BODY = 1024 * 1024
# The engine stops writing (as on a full socket) above this much unacknowledged output.
HIGH_WATER = 1024 * 1024
LOW_WATER = 256 * 1024
REAP_EVERY = 1.0
# An HTTP connection with no request in progress is closed after this long (longer than a
# held pull, so a client's kept-alive connections are not cut under it).
HTTP_IDLE = 90.0


def tunnel_settings(svc_name: str, config) -> tuple[int, int]:
    """(pullPeriod, connectionTimeout) of a tunnel service (-1, 300 for a service of
    another name with protocol http or https)."""
    declared = props.TUNNEL_PROPS.get(svc_name)
    if declared is None:
        return -1, 300
    pull, timeout = declared
    return config.get(pull), config.get(timeout)


class TunnelService:
    """One tunnel service's connections, by connection id."""

    def __init__(self, broker: Broker, svc: Service) -> None:
        self.broker = broker
        self.svc = svc
        self.pull_period, self.connection_timeout = tunnel_settings(svc.name, broker.config)
        self.server_name = f"{socket.gethostname()}:{broker.config.instance}"
        self.sessions: dict[int, TunnelSession] = {}
        self.http: set[HttpConnection] = set()
        self._reaper: asyncio.Task | None = None
        self.started = time.time()

    def start(self) -> None:
        self._reaper = asyncio.create_task(self._reap_loop())

    def protocol(self) -> HttpConnection:
        return HttpConnection(self)

    async def close(self) -> None:
        """At shutdown: answer the held pulls with what is left (the GOODBYEs), then
        close every HTTP connection."""
        if self._reaper is not None:
            self._reaper.cancel()
        # The engines' GOODBYEs and closes are written on the next loop turn; a held pull
        # is answered as they arrive, and the clients get a moment to pull the rest.
        if self.sessions:
            await asyncio.sleep(0.3)
        for s in list(self.sessions.values()):
            s.flush_pull()
        for h in list(self.http):
            if h.transport is not None:
                h.transport.close()

    # -- requests ----------------------------------------------------------------

    def handle(self, http: HttpConnection, req: HttpRequest) -> bool:
        """Answer ``req`` (True) or hold it (a pull waiting for packets: False)."""
        if req.path.rstrip("/") not in PATHS:
            http.answer(404, f"no tunnel at {req.path}\n".encode(), "text/plain")
            return True
        if req.method not in ("GET", "POST"):
            http.answer(405, b"GET or POST\n", "text/plain")
            return True
        try:
            treq = parse_request(req.query)
            if treq.type == "":
                http.answer(200, self._status_page(), "text/html; charset=UTF-8")
                return True
            if treq.server_name is not None and treq.server_name != self.server_name:
                # A connection to another broker behind the same URL: the servlet aborts.
                if treq.type == "pull" and treq.conn_id is not None:
                    http.answer_packets([TunnelPacket(TunnelType.CONN_ABORT, treq.conn_id)])
                else:
                    http.answer(404, f"no broker {treq.server_name} here\n".encode(), "text/plain")
                return True
            if treq.type == "connect":
                self._connect(http, req)
                return True
            if treq.type == "push":
                self._push(http, req)
                return True
            assert treq.conn_id is not None
            session = self.sessions.get(treq.conn_id)
            if session is None:
                http.answer_packets([TunnelPacket(TunnelType.CONN_ABORT, treq.conn_id)])
                return True
            return session.pull(http)
        except ProtocolError as exc:
            log.warning("%s: bad tunnel request from %s: %s", self.svc.name, http.peer_text, exc)
            http.answer(400, f"{exc}\n".encode(), "text/plain")
            return True

    def _connect(self, http: HttpConnection, req: HttpRequest) -> None:
        packets = decode_packets(req.body)
        if packets[0].type != TunnelType.CONN_INIT:
            raise ProtocolError(f"connect request carries packet type {packets[0].type}")
        conn_id = self._new_id()
        session = TunnelSession(self, conn_id, http.peer)
        self.sessions[conn_id] = session
        # The client takes its connection id and the ServerName for its later URLs from
        # this echo of its CONN_INIT packet.
        reply = TunnelPacket(
            TunnelType.CONN_INIT, conn_id, body=f"ServerName={self.server_name}".encode()
        )
        http.answer_packets([reply])
        log.debug("%s: tunnel connection %s from %s", self.svc.name, conn_id, http.peer_text)
        session.open()

    def _new_id(self) -> int:
        # A connection id is all a pull or push names, so it is not guessable (the
        # servlet counts up from the clock): a random positive Java int.
        while True:
            conn_id = secrets.randbelow((1 << 31) - 1) + 1
            if conn_id not in self.sessions:
                return conn_id

    def _push(self, http: HttpConnection, req: HttpRequest) -> None:
        packets = decode_packets(req.body)
        now = time.monotonic()
        touched: list[TunnelSession] = []
        for p in packets:
            session = self.sessions.get(p.conn_id)
            if session is None:
                log.debug("%s: packet for unknown tunnel connection %s", self.svc.name, p.conn_id)
                continue
            session.state.request_started(now)
            session.state.request_ended(now)
            session.receive(p, now)
            if session not in touched:
                touched.append(session)
        http.answer_packets([TunnelPacket(TunnelType.NO_OP)])
        for s in touched:
            s.after_receive()

    def _status_page(self) -> bytes:
        # The servlet answers a request without a query with a status page.
        rows = "".join(
            f"<tr><td>{sid}</td><td>{html.escape(s.peer_text)}</td>"
            f"<td>{s.state.bytes_in}</td><td>{s.state.bytes_out}</td></tr>"
            for sid, s in sorted(self.sessions.items())
        )
        page = (
            "<html><head><title>JMQ HTTP Tunneling</title></head><body>"
            f"<p>HTTP tunneling service {html.escape(self.svc.name)} of broker "
            f"{html.escape(self.server_name)} ready.</p>"
            f"<p>Tunnel connections: {len(self.sessions)}</p>"
            "<table><tr><th>id</th><th>client</th><th>bytes in</th><th>bytes out</th></tr>"
            f"{rows}</table></body></html>\n"
        )
        return page.encode()

    # -- housekeeping ------------------------------------------------------------

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(REAP_EVERY)
            try:
                self.reap(time.monotonic())
            except Exception:
                log.exception("%s: tunnel housekeeping failed", self.svc.name)

    def reap(self, now: float) -> None:
        """Retransmit what is due, drop connections whose client is gone."""
        for session in list(self.sessions.values()):
            st = session.state
            if st.finished and not session.engine_open:
                self.forget(session)
            elif st.expired(now):
                session.abort(
                    f"no HTTP request for {now - st.last_request:.0f} s "
                    f"(connection timeout {st.idle_limit:.0f} s)"
                )
            elif st.tick(now):
                session.wake()

    def forget(self, session: TunnelSession) -> None:
        self.sessions.pop(session.conn_id, None)


class TunnelSession:
    """One tunnel connection: its stream state, its engine, its held pull."""

    def __init__(self, service: TunnelService, conn_id: int, peer: tuple[str, int]) -> None:
        self.service = service
        self.conn_id = conn_id
        self.peer = peer
        self.peer_text = f"{peer[0]}:{peer[1]}"
        now = time.monotonic()
        self.state = TunnelConnection(
            conn_id,
            now,
            pull_period=service.pull_period,
            connection_timeout=service.connection_timeout,
        )
        self.protocol = ClientConnection(service.broker, service.svc)
        self.transport = TunnelTransport(self)
        self.engine_open = False
        self.held: HttpConnection | None = None
        self._hold_timer: asyncio.TimerHandle | None = None
        self._wake_scheduled = False
        self.write_paused = False

    def open(self) -> None:
        self.engine_open = True
        self.protocol.connection_made(self.transport)

    # -- client -> broker ----------------------------------------------------------

    def receive(self, pkt: TunnelPacket, now: float) -> None:
        self.state.receive(pkt, now)

    def after_receive(self) -> None:
        """Hand what arrived in order to the engine, react to the client's close, and
        let the engine write again once its output was acknowledged."""
        self.deliver()
        st = self.state
        if st.peer_closed and self.engine_open:
            log.debug("tunnel connection %s closed by the client", self.conn_id)
            self._engine_lost(None)
        if self.write_paused and st.unacked_bytes < LOW_WATER:
            self.write_paused = False
            if self.engine_open:
                self.protocol.resume_writing()
        self.wake()

    def deliver(self) -> None:
        data = self.state.take_inbox()
        if data and self.engine_open:
            self.protocol.data_received(data)

    # -- broker -> client ----------------------------------------------------------

    def send(self, data: bytes) -> None:
        st = self.state
        st.send(data)
        if not self.write_paused and st.unacked_bytes > HIGH_WATER and self.engine_open:
            self.write_paused = True
            self.protocol.pause_writing()
        self.wake()

    def wake(self) -> None:
        """Answer the held pull at the end of this loop turn (output of one turn goes in
        one response)."""
        if self.held is None or self._wake_scheduled:
            return
        self._wake_scheduled = True
        asyncio.get_running_loop().call_soon(self._woken)

    def _woken(self) -> None:
        self._wake_scheduled = False
        if self.held is not None and self.state.has_output():
            self.flush_pull()

    def pull(self, http: HttpConnection) -> bool:
        st = self.state
        now = time.monotonic()
        st.request_started(now)
        if self.held is not None:
            # A newer pull replaces the held one (its client gave up on it).
            self._answer_held([TunnelPacket(TunnelType.NO_OP)])
        if st.has_output():
            self._answer(http, st.take_pull(now, PULL_BUDGET))
            return True
        if st.finished:
            self._answer(http, [TunnelPacket(TunnelType.NO_OP)])
            return True
        # A polling client is kept only a moment (it comes back after its period).
        hold = POLL_GRACE if st.pull_period > 0 else MAX_PULL_HOLD
        self.held = http
        http.holding = self
        self._hold_timer = asyncio.get_running_loop().call_later(hold, self._hold_expired)
        return False

    def _hold_expired(self) -> None:
        self._hold_timer = None
        if self.held is not None:
            self._answer_held([TunnelPacket(TunnelType.NO_OP)])

    def flush_pull(self) -> None:
        if self.held is None:
            return
        st = self.state
        packets = st.take_pull(time.monotonic(), PULL_BUDGET) if st.has_output() else []
        self._answer_held(packets or [TunnelPacket(TunnelType.NO_OP)])

    def _answer_held(self, packets: list[TunnelPacket]) -> None:
        http = self.held
        self.held = None
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None
        if http is not None:
            http.holding = None
            self._answer(http, packets)

    def _answer(self, http: HttpConnection, packets: list[TunnelPacket]) -> None:
        self.state.request_ended(time.monotonic())
        http.answer_packets(packets)
        if self.state.finished and not self.engine_open:
            self.service.forget(self)

    def pull_lost(self, http: HttpConnection) -> None:
        """The HTTP connection of the held pull closed (the client went away, or a
        proxy gave up): the packets not yet sent stay for the next pull."""
        if self.held is http:
            self.held = None
            if self._hold_timer is not None:
                self._hold_timer.cancel()
                self._hold_timer = None
            self.state.request_ended(time.monotonic())

    # -- closing ---------------------------------------------------------------------

    def engine_closed(self) -> None:
        """The engine closed the connection: CONN_CLOSE after the last data; the engine
        learns it is gone on the next loop turn, as after a socket's close."""
        self.state.close()
        self.wake()
        if self.engine_open:
            asyncio.get_running_loop().call_soon(self._engine_lost, None)

    def _engine_lost(self, exc: Exception | None) -> None:
        if not self.engine_open:
            return
        self.engine_open = False
        self.protocol.connection_lost(exc)

    def abort(self, reason: str) -> None:
        """The client is gone: close its connection in the broker as a dropped TCP
        connection is closed (its unacknowledged messages are delivered again)."""
        log.info(
            "%s: tunnel connection %s from %s aborted: %s",
            self.service.svc.name,
            self.conn_id,
            self.peer_text,
            reason,
        )
        self.service.forget(self)
        if self.held is not None:
            self._answer_held([TunnelPacket(TunnelType.CONN_ABORT, self.conn_id)])
        if self.engine_open:
            self._engine_lost(ConnectionAbortedError(reason))


class TunnelTransport(asyncio.Transport):
    """What :class:`ClientConnection` writes to and closes, in place of a socket."""

    def __init__(self, session: TunnelSession) -> None:
        super().__init__()
        self._session = session
        self._closing = False

    def write(self, data: Any) -> None:
        if not self._closing:
            self._session.send(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        if not self._closing:
            self._session.send(b"".join(list_of_data))

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._session.engine_closed()

    def abort(self) -> None:
        self.close()

    def is_closing(self) -> bool:
        return self._closing

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return self._session.state.unacked_bytes

    def pause_reading(self) -> None:
        self._session.state.reading_paused = True

    def resume_reading(self) -> None:
        s = self._session
        s.state.reading_paused = False
        asyncio.get_running_loop().call_soon(s.after_receive)

    def is_reading(self) -> bool:
        return not self._session.state.reading_paused

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._session.peer
        if name == "sockname":
            svc = self._session.service.svc
            if svc.server is not None and svc.server.sockets:
                return svc.server.sockets[0].getsockname()
        return default


class HttpConnection(asyncio.Protocol):
    """One HTTP connection to a tunnel service: requests one at a time, kept alive."""

    def __init__(self, service: TunnelService) -> None:
        self.service = service
        self.reader = RequestReader(MAX_BODY)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("?", 0)
        self.peer_text = "?"
        self.pending: deque[HttpRequest] = deque()
        self.current: HttpRequest | None = None
        self.holding: TunnelSession | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._last_read = time.monotonic()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            host = peer[0][7:] if peer[0].startswith("::ffff:") else peer[0]
            self.peer = (host, peer[1])
            self.peer_text = f"{host}:{peer[1]}"
        self.service.http.add(self)
        self._arm_idle()

    def _arm_idle(self, delay: float = HTTP_IDLE) -> None:
        self._idle = asyncio.get_running_loop().call_later(delay, self._idle_expired)

    def _idle_expired(self) -> None:
        self._idle = None
        if self.transport is None:
            return
        quiet = time.monotonic() - self._last_read
        if self.current is None and quiet >= HTTP_IDLE:
            self.transport.close()
        else:
            self._arm_idle(max(HTTP_IDLE - quiet, 1.0))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self.service.http.discard(self)
        if self.holding is not None:
            self.holding.pull_lost(self)
            self.holding = None
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self._last_read = time.monotonic()
        try:
            requests = self.reader.feed(data)
        except HttpError as exc:
            log.warning(
                "%s: unreadable HTTP request from %s: %s",
                self.service.svc.name,
                self.peer_text,
                exc,
            )
            self._write(response(exc.status, f"{exc}\n".encode(), "text/plain", False))
            if self.transport is not None:
                self.transport.close()
            return
        self.pending.extend(requests)
        self._next()

    def _next(self) -> None:
        while self.current is None and self.pending and self.transport is not None:
            req = self.current = self.pending.popleft()
            try:
                self.service.handle(self, req)
            except Exception:
                log.exception("%s: tunnel request %s failed", self.service.svc.name, req.query)
                if self.current is req:
                    self.answer(500, b"internal error\n", "text/plain")

    def answer(self, status: int, body: bytes, content_type: str) -> None:
        req = self.current
        if req is None:
            return
        self.current = None
        keep = req.keep_alive and status < 400
        self._write(response(status, body, content_type, keep))
        if not keep:
            if self.transport is not None:
                self.transport.close()
            return
        if self.pending:
            asyncio.get_running_loop().call_soon(self._next)

    def answer_packets(self, packets: list[TunnelPacket]) -> None:
        self.answer(200, b"".join(p.encode() for p in packets), "application/octet-stream")

    def _write(self, data: bytes) -> None:
        t = self.transport
        if t is not None and not t.is_closing():
            t.write(data)
