"""The JMX RMI connector's asyncio driver (engine: broker/engine/jmx.py).

It listens on imq.jmx.connector.jmxrmi.port (0: any free port), names itself in the
port mapper as OpenMQ's broker does (``jmxrmi rmi JMX 0 [url=service:jmx:rmi://HOST/
stub/...]``), and checks newClient's credentials as the admin service checks a login:
the same user repository, the shipped-account rule and the ADMIN access rules.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import time
from typing import Any, cast

from broker import props
from broker.engine.jmx import (
    Authenticate,
    Close,
    Effect,
    JmxServer,
    JrmpSession,
    Run,
    Send,
    Wait,
)
from broker.engine.jmx_mbeans import DOMAIN, Registry, attach_tally
from broker.engine.jmx_names import ObjectName
from broker.protocol.portmapper import ServiceEntry
from broker.security.digest import constant_time_equals, md5str
from broker.security.shipped import refused_off_loopback
from broker.security.tlsaccept import listening_socket, serve
from broker.server.jmx_admin import JmxAdminPort
from broker.server.jmx_events import JmxEvents

log = logging.getLogger(__name__)

SERVICE = "jmxrmi"
SSL_SERVICE = "ssljmxrmi"
CONNECTORS = (SERVICE, SSL_SERVICE)
# A connection that sends nothing for this long is closed (the JDK's client pools idle
# connections for 15 s and pings before reusing an older one).
IDLE_TIMEOUT = 120.0
# Notification sources as OpenMQ's MQObjectName writes them (a notification's source
# keeps its key order).
LOG_MONITOR = f"{DOMAIN}:type=Log,subtype=Monitor"
# Log records become notifications from this level up (OpenMQ's types: INFO, WARNING
# and ERROR).
_LOG_TYPES = ((logging.ERROR, "ERROR"), (logging.WARNING, "WARNING"), (logging.INFO, "INFO"))


class JmxConnector:
    """The JMX connectors of one broker (jmxrmi, ssljmxrmi): one listener and exported
    RMIServer each, the MBeans shared."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        # Connector name -> (its exported objects and sessions, its listener).
        self.servers: dict[str, tuple[JmxServer, asyncio.AbstractServer]] = {}
        self.log_handler: JmxLogHandler | None = None
        # With the RMI registry (imq.jmx.rmiregistry.start): its listener and the
        # connectors' registry URLs.
        self.registry: asyncio.AbstractServer | None = None
        self.urls: dict[str, str] = {}

    def url(self, name: str = SERVICE) -> str:
        if name in self.urls:
            return self.urls[name]
        server = self.servers[name][0]
        stub = base64.b64encode(server.stub_bytes()).decode("ascii")
        return f"service:jmx:rmi://{server.host}/stub/{stub}"

    def portmapper_entries(self) -> list[ServiceEntry]:
        return [ServiceEntry(n, "rmi", "JMX", 0, {"url": self.url(n)}) for n in self.servers]

    @property
    def listeners(self) -> list[asyncio.AbstractServer]:
        extra = [self.registry] if self.registry is not None else []
        return [listener for _s, listener in self.servers.values()] + extra

    def close(self) -> None:
        """Stop listening (sessions carry on until the broker closes them)."""
        for listener in self.listeners:
            listener.close()
        if self.log_handler is not None:
            logging.getLogger().removeHandler(self.log_handler)
            self.log_handler = None


async def start_jmx(broker: Any) -> JmxConnector | None:
    """Start the connectors imq.jmx.connector.activelist lists (jmxrmi, ssljmxrmi)."""
    c = broker.config
    active = [n for n in c.get(props.JMX_CONNECTOR_ACTIVELIST) if n]
    for name in active:
        if name not in CONNECTORS:
            log.warning("JMX connector %s is not available, not started", name)
    names = [n for n in CONNECTORS if n in active]
    if not names:
        return None
    bind = c.get(props.JMX_HOSTNAME) or c.get(props.HOSTNAME) or None
    # The address written into the stubs: what clients connect to.
    host = bind if bind and bind not in ("0.0.0.0", "::") else socket.gethostname()
    registry = Registry(broker)
    attach_tally(broker)
    loop = asyncio.get_running_loop()
    connector = JmxConnector(broker)
    for name in names:
        context = None
        if name == SSL_SERVICE:
            from broker.security.tls import server_context

            context = server_context(c)  # ConfigError without key material: start fails
        port_prop = props.JMX_SSL_PORT if name == SSL_SERVICE else props.JMX_RMI_PORT
        sock = listening_socket(bind, c.get(port_prop), 50)
        port = sock.getsockname()[1]
        server = JmxServer(registry, broker, host, port, service=name, tls=context is not None)

        def factory(server: JmxServer = server) -> asyncio.Protocol:
            return JrmpProtocol(broker, server)

        listener = await serve(factory, sock, context, name)
        connector.servers[name] = (server, listener)
        log.info("JMX connector %s listening on %s:%s", name, bind or "*", port)
    if c.get(props.JMX_REGISTRY_START):
        await _start_registry(broker, connector, bind)
    elif c.get(props.JMX_REGISTRY_USE):
        log.warning(
            "imq.jmx.rmiregistry.use without imq.jmx.rmiregistry.start: binding in an outside "
            "RMI registry is not supported; the service URLs carry the stubs"
        )
    servers = [s for s, _l in connector.servers.values()]
    JmxEvents(broker, servers, publish).attach()
    connector.log_handler = JmxLogHandler(servers, loop)
    logging.getLogger().addHandler(connector.log_handler)
    return connector


async def _start_registry(broker: Any, connector: JmxConnector, bind: str | None) -> None:
    """An RMI registry on imq.jmx.rmiregistry.port binding each connector's RMIServer
    as BROKERHOST/PORTMAPPERPORT/CONNECTOR (the stock broker's names)."""
    c = broker.config
    port = c.get(props.JMX_REGISTRY_PORT)
    sock = listening_socket(bind, port, 50)
    reg_host = c.get(props.JMX_HOSTNAME) or c.get(props.HOSTNAME) or "localhost"
    first = next(iter(connector.servers.values()))[0]
    registry = JmxServer(first.registry, broker, first.host, sock.getsockname()[1])
    for name, (server, _listener) in connector.servers.items():
        path = f"{reg_host}/{c.get(props.PORTMAPPER_PORT)}/{name}"
        registry.bound[path] = server
        connector.urls[name] = (
            f"service:jmx:rmi://{server.host}/jndi/rmi://{reg_host}:{port}/{path}"
        )
    listener = await serve(lambda: JrmpProtocol(broker, registry), sock, None, "rmiregistry")
    connector.registry = listener
    log.info("RMI registry for JMX listening on %s:%s", bind or "*", port)


# -- notifications -------------------------------------------------------------------

_PROTOCOLS: dict[JrmpSession, JrmpProtocol] = {}


def publish(
    server: JmxServer,
    source: str,
    notif_type: str,
    kind: str,
    message: str | None,
    **fields: object,
) -> None:
    """Send a notification to the clients listening to ``source`` (event loop only)."""
    now = int(time.time() * 1000)
    for session in server.publish(source, notif_type, kind, message, now, **fields):
        proto = _PROTOCOLS.get(session)
        if proto is not None:
            proto.apply(session.wake())


class JmxLogHandler(logging.Handler):
    """The broker's log records (INFO and up) as Log Monitor notifications."""

    def __init__(self, servers: list[JmxServer], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.INFO)
        self.servers = servers
        self.loop = loop
        self._source = ObjectName.parse(LOG_MONITOR)

    def emit(self, record: logging.LogRecord) -> None:
        listening = [s for s in self.servers if s.listened(self._source)]
        if not listening:
            return
        level = next((name for lvl, name in _LOG_TYPES if record.levelno >= lvl), "INFO")
        try:
            text = record.getMessage()
        except Exception:  # a bad format string: the record's own text
            text = str(record.msg)
        try:
            for server in listening:
                self.loop.call_soon_threadsafe(
                    lambda s=server: publish(
                        s, LOG_MONITOR, f"mq.log.level.{level}", "log", text, level=level
                    )
                )
        except RuntimeError:  # the loop is closed: the broker is stopping
            pass


class JrmpProtocol(asyncio.Protocol):
    """One JRMP connection: bytes to the session, its effects to the socket."""

    def __init__(self, broker: Any, server: JmxServer) -> None:
        self.broker = broker
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.session: JrmpSession | None = None
        self._idle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.session = JrmpSession(self.server, str(peer[0]), int(peer[1]))
        _PROTOCOLS[self.session] = self
        self._wait: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._last_input = self._loop.time()
        self._idle = self._loop.call_later(IDLE_TIMEOUT, self._timeout)

    def _timeout(self) -> None:
        # Input since the timer was set (data_received only notes its time, rather
        # than setting a new timer for each call): wait for the rest of the time.
        left = self._last_input + IDLE_TIMEOUT - self._loop.time()
        if left > 0:
            self._idle = self._loop.call_later(left, self._timeout)
        elif self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        assert self.session is not None
        self._last_input = self._loop.time()
        self._apply(self.session.feed(data))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()
        if self._wait is not None:
            self._wait.cancel()
        if self.session is not None:
            self.session.lost()
            _PROTOCOLS.pop(self.session, None)

    def apply(self, effects: list[Effect]) -> None:
        self._apply(effects)

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if self.transport is None or self.transport.is_closing():
                return
            if isinstance(effect, Send):
                if self._wait is not None:  # a waiting fetch is answered
                    self._wait.cancel()
                    self._wait = None
                self.transport.write(effect.data)
            elif isinstance(effect, Close):
                self.transport.close()
            elif isinstance(effect, Authenticate):
                asyncio.get_running_loop().create_task(self._authenticate(effect))
            elif isinstance(effect, Run):
                asyncio.get_running_loop().create_task(self._run(effect))
            elif isinstance(effect, Wait):
                self._wait = asyncio.get_running_loop().call_later(
                    effect.seconds, self._fetch_timeout
                )

    def _fetch_timeout(self) -> None:
        self._wait = None
        if self.session is not None:
            self._apply(self.session.fetch_timeout())

    async def _run(self, req: Run) -> None:
        assert self.session is not None
        port = JmxAdminPort(self.broker, req.user, self.session.peer)
        value: object = None
        error: BaseException | None = None
        try:
            value = await req.job(port)
        except Exception as exc:  # the engine words the refusal; a bug is logged there
            error = exc
        self._apply(self.session.run_result(req, value, error))

    async def _authenticate(self, req: Authenticate) -> None:
        assert self.session is not None
        try:
            ok, why = await check_admin_login(
                self.broker, req.user, req.password, self.session.peer
            )
        except Exception as exc:  # the repository failed: refuse, say why in the log
            log.error("user repository failed for JMX login of %s: %s", req.user, exc)
            ok, why = False, "user repository unavailable"
        self._apply(self.session.auth_result(req, ok, why))


async def check_admin_login(broker: Any, user: str, password: str, peer: str) -> tuple[bool, str]:
    """Whether ``user``/``password`` may use the admin service: (ok, why not)."""
    repo = broker.service_repositories.get("admin")
    if repo is None:
        repo = broker._repository_for("admin", "basic")
    loop = asyncio.get_running_loop()
    verify = repo.verify_basic
    if verify is not None:  # LDAP: the directory checks the password
        record = await loop.run_in_executor(broker.executor, verify, user, password)
        ok = record is not None
    else:
        record = await loop.run_in_executor(broker.executor, repo.lookup, user)
        ok = (
            record is not None
            and record.active
            and constant_time_equals(md5str(f"{user}:{password}"), record.password_digest)
        )
    if not ok:
        return False, f"unknown user or wrong password: {user}"
    if refused_off_loopback(broker.shipped_loopback_only, peer, user, record.password_digest):
        return False, f"shipped password accepted from loopback addresses only: {user}"
    allowed, why = broker.access.check_connection("admin", "ADMIN", user, record.groups)
    if not allowed:
        return False, f"access denied to ADMIN service: {user}: {why}"
    return True, ""
