"""One link to another broker of the cluster: the handshake, then GPackets both ways.

The handshake (docs/developers/protocol.md, "Cluster links"): each side sends LINK_INIT
and BROKER_INFO as legacy link packets, checks the other's identity, cluster version and
match properties, answers with a G_BROKER_INFO_REPLY (46), and the link is up once both
replies are in.  BROKER_INFO's body is a v301 property table instead of Java
serialisation (so these brokers link only with each other).

Anything wrong -- bytes that are not packets, a wrong version, a truncated packet, a
peer that never finishes the handshake, a peer claiming an identity it cannot have --
drops this link with one WARNING naming the reason; the broker goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from broker.protocol import gpacket as gp
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JLong
from broker.protocol.properties import decode_properties, encode_properties

if TYPE_CHECKING:
    from .service import ClusterService

log = logging.getLogger("broker.cluster")

HANDSHAKE_TIMEOUT = 10.0


class LinkRefused(Exception):
    """The peer may not link to this broker; the message says why."""


class BrokerLink(asyncio.Protocol):
    """The transport side of one broker-to-broker link."""

    def __init__(
        self,
        service: ClusterService,
        expected: tuple[str, int] | None = None,
        expected_instance: str | None = None,
    ) -> None:
        self.service = service
        # Set when this side dialled: the address it meant to reach.
        self.expected = expected
        self.expected_instance = expected_instance
        self.transport: asyncio.Transport | None = None
        self.reader = gp.GPacketReader()
        self.peer: gp.LinkInit | None = None
        self.peer_info: dict = {}
        self.up = False
        self.goodbye = False
        self.closed = False
        self.reason: str | None = None
        # Whether the reason it closed was logged already (drop() logs it).
        self.logged = False
        self.flow_stopped = False
        self._got_reply = False
        self._sent_reply = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self.last_heard = time.monotonic()
        self.last_sent = time.monotonic()
        self.remote_addr = ""
        self.connected_at = time.time()

    # -- asyncio ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.remote_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(HANDSHAKE_TIMEOUT, self._handshake_timeout)
        svc = self.service
        self.write(gp.encode_link(gp.LinkPacket(gp.LINK_INIT, svc.link_init().encode())))
        self.write(gp.encode_link(gp.LinkPacket(gp.LINK_BROKER_INFO, svc.broker_info())))

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_heard = time.monotonic()
        try:
            packets = self.reader.feed(data)
            for pkt in packets:
                if self.closed:
                    return
                if isinstance(pkt, gp.LinkPacket):
                    self._link_packet(pkt)
                elif not self.up:
                    self._handshake_gpacket(pkt)
                else:
                    self.service.on_packet(self, pkt)
        except (ProtocolError, LinkRefused) as exc:
            self.drop(str(exc))

    def connection_lost(self, exc: Exception | None) -> None:
        was_closed = self.closed
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        if not was_closed and self.reason is None:
            if self.goodbye:
                self.reason = "left the cluster (GOODBYE)"
            elif self.reader.pending:
                self.reason = f"connection lost in the middle of a packet ({exc or 'EOF'})"
            else:
                self.reason = f"connection lost ({exc or 'closed by peer'})"
        self.service.link_closed(self)

    # -- writing ----------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue bytes; everything written in one event-loop turn leaves in one call."""
        if self.closed or self.transport is None:
            return
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(self._out)
            self.last_sent = time.monotonic()
        self._out.clear()

    def send(self, pkt: gp.GPacket) -> None:
        self.write(gp.encode(pkt))

    def drop(self, reason: str) -> None:
        """Close the link, logging ``reason`` once."""
        if self.closed:
            return
        self.reason = reason
        self.logged = True
        log.warning("cluster link %s dropped: %s", self.describe(), reason)
        self._flush()
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def close(self) -> None:
        """Close after what is queued has gone (GOODBYE, shutdown)."""
        self._flush()
        if self.transport is not None:
            self.transport.close()

    def describe(self) -> str:
        if self.peer is not None:
            return f"{self.peer.address} ({self.remote_addr})"
        if self.expected is not None:
            return f"to {self.expected[0]}:{self.expected[1]} ({self.remote_addr})"
        return f"from {self.remote_addr}"

    @property
    def address(self) -> gp.BrokerAddress | None:
        return self.peer.address if self.peer is not None else None

    # -- handshake -----------------------------------------------------------------

    def _handshake_timeout(self) -> None:
        if not self.up and not self.closed:
            self.drop(f"no complete handshake within {HANDSHAKE_TIMEOUT:g} s")

    def _link_packet(self, pkt: gp.LinkPacket) -> None:
        if pkt.type == gp.LINK_INIT:
            if self.peer is not None:
                raise LinkRefused("second LINK_INIT on one link")
            init = gp.LinkInit.decode(pkt.body)
            self.service.check_peer(self, init)
            self.peer = init
        elif pkt.type == gp.LINK_BROKER_INFO:
            if self.peer is None:
                raise LinkRefused("BROKER_INFO before LINK_INIT")
            if self.peer_info:
                raise LinkRefused("second BROKER_INFO on one link")
            self.peer_info = decode_properties(pkt.body) or {"instance": self.peer.instance}
            self._sent_reply = True
            self.send(gp.GPacket(gp.G_BROKER_INFO_REPLY, {"S": 200}, self.service.broker_info()))
            self._maybe_up()
        elif pkt.type == gp.LINK_PING and self.up:
            pass  # pre-raptor keep-alive: hearing it is enough (last_heard)
        else:
            raise LinkRefused(f"unexpected link packet type {pkt.type}")

    def _handshake_gpacket(self, pkt: gp.GPacket) -> None:
        if pkt.type != gp.G_BROKER_INFO_REPLY or not self._sent_reply:
            raise LinkRefused(f"{pkt.name} before the handshake was complete")
        status = pkt.props.get("S")
        if status != 200:
            raise LinkRefused(f"peer refused the link (status {status}, {pkt.props.get('reason')})")
        self._got_reply = True
        self._maybe_up()

    def _maybe_up(self) -> None:
        if self._got_reply and self._sent_reply and not self.up:
            if self._timer is not None:
                self._timer.cancel()
            self.up = True
            self.service.link_up(self)


def broker_info_body(instance: str, host: str, port: int, start_ms: int, extra: dict) -> bytes:
    """This broker's BROKER_INFO body: a property table (see the module docstring)."""
    props = {
        "instance": instance,
        "host": host,
        "port": port,
        "startTime": JLong(start_ms),
        "clusterProtocolVersion": gp.CLUSTER_VERSION,
    }
    props.update(extra)
    return encode_properties(props)
