"""The connection services: what each one is (:class:`Service`) and how the broker's
properties configure them (imq.service.activelist, imq.<svc>.*, the STOMP bridge's
listeners), before anything listens."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker import props
from broker.config import DEFAULTS, BrokerConfig, ConfigError
from broker.core.metrics import ServiceCounters
from broker.engine import ConnectionEngine
from broker.protocol.auth import AUTH_BASIC, AUTH_DIGEST
from broker.security.tlsaccept import TlsListener

from .connection import ClientConnection

# STOMP, WebSocket and the HTTP tunnel (and wsproto, h11) are imported by the services
# that use them: off by default, they would cost every broker's start their imports.
if TYPE_CHECKING:
    from .broker import Broker
    from .tunnel import TunnelService

log = logging.getLogger("broker")

# What a service's user repository is looked up by: (service name, authentication type).
RepositoryFor = Callable[[str, str], object]


@dataclass
class Service:
    """A connection service (jms, admin, ssljms, ssladmin, httpjms, httpsjms) and its
    listener."""

    name: str
    type: str  # NORMAL or ADMIN
    # tcp, tls (the same packets inside TLS), http or https (inside the HTTP tunnel),
    # stomp (the STOMP bridge's listeners), ws or wss (STOMP over WebSocket)
    protocol: str
    host: str | None
    port: int
    auth_type: str
    max_connections: int  # -1 = unlimited
    backlog: int = 100
    ssl_context: ssl.SSLContext | None = None
    server: asyncio.Server | TlsListener | None = None
    connections: set[ConnectionEngine] = field(default_factory=set)
    # Admin PAUSE of the service: new connections are refused (HELLO_REPLY 503) until RESUME.
    paused: bool = False
    # Traffic of all its connections (GET_METRICS' MetricCounters; core/metrics.py).
    metrics: ServiceCounters = field(default_factory=ServiceCounters)
    # Connections accepted and refused (paused, quiesced, over the limit) since the start
    # (JMX's NumConnectionsOpened / NumConnectionsRejected).
    connections_opened: int = 0
    connections_rejected: int = 0
    # The HTTP tunnel's connections (http and https services; server/tunnel.py).
    tunnel: TunnelService | None = None
    # The STOMP service's settings (protocol stomp; server/stomp.py).
    stomp: Any = None
    # A listener stopped (imqbridgemgr stop) listens on this port when started again:
    # the one it had, also when ``port`` is 0 (dynamic, which it stays).
    rebind_port: int = 0

    def protocol_factory(self, broker: Broker) -> Callable[[], asyncio.Protocol]:
        """What the listener makes for each accepted socket."""
        tunnel = self.tunnel
        if tunnel is not None:
            return tunnel.protocol
        if self.protocol == "stomp":
            from .stomp import StompConnection

            return lambda: StompConnection(broker, self)
        if self.protocol in ("ws", "wss"):
            from .websocket import WebSocketStompConnection

            return lambda: WebSocketStompConnection(broker, self)
        return lambda: ClientConnection(broker, self)

    @property
    def bound_port(self) -> int:
        if self.server is None or not self.server.sockets:
            return 0
        return self.server.sockets[0].getsockname()[1]

    @property
    def listed_port(self) -> int:
        """The port to show: the one listened on, else the one a stopped listener listens
        on again, else the configured one."""
        return self.bound_port or self.rebind_port or self.port


def configured_services(
    c: BrokerConfig, repository_for: RepositoryFor, repositories: dict[str, object]
) -> list[Service]:
    """The services the broker is to start, configured (key material unlocked), each
    one's user repository entered in ``repositories``; a protocol not available is
    warned of and left out.  Raises ConfigError on a bad configuration."""
    services: list[Service] = []
    tls_context: ssl.SSLContext | None = None
    for name in c.get(props.SERVICE_ACTIVELIST):
        svc = _service(c, name, repository_for, repositories)
        if svc.protocol in ("ws", "wss"):
            # OpenMQ's WebSocket services; here they carry STOMP (server/websocket.py).
            from .stomp import stomp_settings

            svc.stomp = stomp_settings(c)
        if svc.protocol in ("tls", "https", "wss"):
            if tls_context is None:
                from broker.security.tls import server_context

                tls_context = server_context(c)
            svc.ssl_context = tls_context
        elif svc.protocol not in ("tcp", "http", "ws"):
            log.warning(
                "service %s: protocol %s is not available yet, not started", name, svc.protocol
            )
            continue
        services.append(svc)
    for svc in _stomp_services(c, repository_for, repositories):
        if svc.name == "sslstomp":
            if tls_context is None:
                from broker.security.tls import server_context

                tls_context = server_context(c)
            svc.ssl_context = tls_context
        services.append(svc)
    return services


def _service(
    c: BrokerConfig, name: str, repository_for: RepositoryFor, repositories: dict[str, object]
) -> Service:
    proto = c.service_prop(name, "protocoltype", "tcp") or "tcp"
    stype = c.service_prop(name, "servicetype", "ADMIN" if "admin" in name else "NORMAL")
    host = c.service_prop(name, f"{proto}.hostname", c.get(props.HOSTNAME)) or None
    port = int(c.service_prop(name, f"{proto}.port", "0") or 0)
    auth = (
        c.service_prop(name, "authentication.type", c.get(props.AUTH_TYPE)) or AUTH_DIGEST
    ).lower()
    if auth not in (AUTH_BASIC, AUTH_DIGEST):
        raise ConfigError(f"imq.{name}.authentication.type: unknown type {auth!r}")
    repositories[name] = repository_for(name, auth)
    backlog = int(c.service_prop(name, f"{proto}.backlog", "100") or 100)
    return Service(
        name, str(stype).upper(), proto, host, port, auth, _max_connections(c, name), backlog
    )


def _stomp_services(
    c: BrokerConfig, repository_for: RepositoryFor, repositories: dict[str, object]
) -> list[Service]:
    """OpenMQ's STOMP bridge listeners (imq.bridge.enabled, stomp in
    imq.bridge.activelist): ``stomp`` when imq.bridge.stomp.tcp.enabled, ``sslstomp``
    (the same frames inside TLS, the broker's key material) when
    imq.bridge.stomp.tls.enabled."""
    if not (c.get(props.BRIDGE_ENABLED) and "stomp" in c.get(props.BRIDGE_ACTIVELIST)):
        return []
    auth = (c.get(props.AUTH_TYPE) or AUTH_DIGEST).lower()
    wanted = []
    if c.get(props.STOMP_TCP_ENABLED):
        wanted.append(("stomp", c.get(props.STOMP_TCP_PORT)))
    if c.get(props.STOMP_TLS_ENABLED):
        wanted.append(("sslstomp", c.get(props.STOMP_TLS_PORT)))
    from .stomp import stomp_settings

    services = []
    for name, port in wanted:
        repositories[name] = repository_for(name, auth)
        svc = Service(
            name,
            "NORMAL",
            "stomp",
            c.get(props.HOSTNAME) or None,
            port,
            auth,
            _max_connections(c, name),
        )
        svc.stomp = stomp_settings(c)
        services.append(svc)
    return services


def _max_connections(c: BrokerConfig, name: str) -> int:
    """The connection limit of a service (-1 = unlimited).

    ``imq.<svc>.max_connections`` is ours.  OpenMQ limits a service through its thread
    pool, ``imq.<svc>.max_threads``; with the dedicated model every connection holds its
    threads, so we read a configured max_threads as the connection limit.  Only a value
    set by the administrator counts: the shipped defaults (jms 1000, admin 10) size a Java
    thread pool and would needlessly cap an asyncio broker, so they are ignored.
    """
    value = c.service_prop(name, "max_connections")
    if value is None or not value.strip():
        threads = c.service_prop(name, "max_threads")
        if threads is None or threads == DEFAULTS.get(f"imq.{name}.max_threads"):
            return -1
        value = threads
    try:
        limit = int(value.strip())
    except ValueError:
        raise ConfigError(f"imq.{name}.max_connections: not a number: {value!r}") from None
    return limit if limit >= 0 else -1


__all__ = ["Service", "configured_services"]
