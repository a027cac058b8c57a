"""The port mapper: the broker's first port, whose table tells clients where every
service listens (imq.portmapper.*; the table's format is broker/protocol/portmapper.py)."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING

from broker import props
from broker.protocol.portmapper import MAX_REQUEST_LINE, PortMapperTable, ServiceEntry
from broker.protocol.types import CURRENT_PACKET_VERSION
from broker.security.tlsaccept import listening_socket

from .clustering import cluster_entry

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("broker")


class PortMapperProtocol(asyncio.Protocol):
    """Answers one port-mapper request: read a line (or time out), write the table, close."""

    def __init__(self, portmapper: PortMapper) -> None:
        self.portmapper = portmapper
        self.buf = b""
        self.sent = False
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # Old clients send nothing, so answer after a short wait even without a line.
        self.timer = asyncio.get_running_loop().call_later(self.portmapper.timeout, self._answer)

    def data_received(self, data: bytes) -> None:
        if self.sent:
            return  # the client's extra lines are read and discarded
        self.buf += data
        if b"\n" in self.buf:
            self._answer()
        elif len(self.buf) > MAX_REQUEST_LINE:
            log.warning("port mapper: request line too long, dropping connection")
            if self.transport:
                self.transport.close()

    def _answer(self) -> None:
        if self.sent or self.transport is None or self.transport.is_closing():
            return
        self.sent = True
        if self.timer:
            self.timer.cancel()
        self.transport.write(self.portmapper.table().encode())
        # Let the client close first (no TIME_WAIT here); close ourselves if it has not
        # within imq.portmapper.sotimeout, as the stock broker does: the C client reads
        # the table to EOF, so every C connection waits this long.
        asyncio.get_running_loop().call_later(self.portmapper.timeout, self.transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer:
            self.timer.cancel()


class PortMapper:
    """The port mapper of one broker: its listener and the table it answers with."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        c = broker.config
        self.timeout = max(c.get(props.PORTMAPPER_SOTIMEOUT), 1) / 1000.0
        self.server: asyncio.AbstractServer | None = None
        # The bound port (imq.portmapper.port may be 0), known from when its socket is
        # bound, before it serves; None while it does not listen.
        self._bound: int | None = None
        self._sock: socket.socket | None = None

    @property
    def port(self) -> int:
        """The port mapper's port (its bound one once it listens)."""
        bound = self._bound
        return self.broker.config.get(props.PORTMAPPER_PORT) if bound is None else bound

    def _host(self) -> str | None:
        c = self.broker.config
        return c.get(props.PORTMAPPER_HOSTNAME) or c.get(props.HOSTNAME) or None

    def bind(self) -> None:
        """Bind its socket (when imq.portmapper.bind), not yet answering: the cluster
        service names this broker by the bound port before anyone is given a table."""
        c = self.broker.config
        if c.get(props.PORTMAPPER_BIND):
            sock = listening_socket(
                self._host(), c.get(props.PORTMAPPER_PORT), c.get(props.PORTMAPPER_BACKLOG)
            )
            self._sock = sock
            self._bound = sock.getsockname()[1]

    async def serve(self) -> None:
        """Answer on the socket :meth:`bind` bound (if any)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        self.server = await asyncio.get_running_loop().create_server(
            lambda: PortMapperProtocol(self), sock=sock
        )
        # Said with the address, so an administrator sees at once whether the broker
        # is reachable from other hosts (all interfaces when imq.hostname is unset).
        log.info(
            "port mapper listening on %s:%s",
            self._host() or "*",
            self.broker.config.get(props.PORTMAPPER_PORT),
        )

    async def rebind(self, port: int) -> None:
        """Move the port mapper to ``port`` (when it listens at all)."""
        if self.server is None:
            return
        c = self.broker.config
        host = self._host()
        sock = listening_socket(host, port, c.get(props.PORTMAPPER_BACKLOG))
        try:
            server = await asyncio.get_running_loop().create_server(
                lambda: PortMapperProtocol(self), sock=sock
            )
        except BaseException:
            sock.close()
            raise
        old, self.server = self.server, server
        self._bound = sock.getsockname()[1]
        old.close()
        log.info("port mapper now listening on %s:%s", host or "*", port)

    def table(self) -> PortMapperTable:
        """Every service this broker offers, with its port."""
        b = self.broker
        pm_port = self.port
        pm_props = {"sessionid": str(b.session_id)}
        brokerid = b.config.get(props.BROKER_ID)
        if brokerid:
            pm_props["brokerid"] = brokerid
        entries = [ServiceEntry("portmapper", "tcp", "PORTMAPPER", pm_port, pm_props)]
        for svc in b.services:
            extra = {"hostname": svc.host} if svc.host and svc.host not in ("0.0.0.0", "::") else {}
            if svc.protocol == "stomp":
                # As OpenMQ's broker lists its STOMP bridge's listener.
                kind = "stomp[TCP]" if svc.ssl_context is None else "stomp[SSL/TLS]"
                # Its port stays listed while imqbridgemgr has the bridge stopped, as there.
                port = svc.listed_port
                entries.append(ServiceEntry("stomp[bridge]", kind, "stomp[bridge]", port))
                continue
            entries.append(ServiceEntry(svc.name, svc.protocol, svc.type, svc.bound_port, extra))
        if b.cluster is not None:
            entries.append(cluster_entry(b.cluster))
        entries.append(ServiceEntry("cluster_discovery", "tcp", "CLUSTER_DISCOVERY", 0))
        if b.jmx is not None:
            entries += b.jmx.portmapper_entries()
        return PortMapperTable(b.config.instance, str(CURRENT_PACKET_VERSION), entries)


__all__ = ["PortMapper", "PortMapperProtocol"]
