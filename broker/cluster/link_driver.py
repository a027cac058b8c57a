"""One link to another broker of the cluster: the asyncio glue around its link engine.

The protocol -- the handshake, the per-state rules, what drops a link -- is
:mod:`broker.cluster.linkengine`'s (sans-IO, tested by feeding it bytes).  This class
feeds it the transport's callbacks; writing the engine's output once per loop turn and
carrying out its effects is :class:`broker.driver.EngineDriver`'s, as for a client's
``ConnectionEngine`` (``broker/server/connection.py``).  The cluster service knows a
link by this object: its attributes and methods are the engine's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.driver import EngineDriver
from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo

from .linkengine import HANDSHAKE_TIMEOUT, LinkEngine, LinkHost, LinkRefused

if TYPE_CHECKING:
    from .service import ClusterService

__all__ = ["HANDSHAKE_TIMEOUT", "BrokerLink", "LinkRefused"]


class BrokerLink(EngineDriver):
    """The transport side of one broker-to-broker link."""

    engine: LinkEngine

    def __init__(
        self,
        service: ClusterService,
        expected: tuple[str, int] | None = None,
        expected_instance: str | None = None,
    ) -> None:
        super().__init__()
        self.service = service
        self.connected_at = time.time()
        self.engine = LinkEngine(
            LinkHost(
                init_body=lambda: service.link_init().encode(),
                info_body=service.broker_info,
                check_peer=lambda init: service.check_peer(self, init),
                up=lambda: service.link_up(self),
                packet=lambda pkt: service.on_packet(self, pkt),
                closed=lambda: service.link_closed(self),
            ),
            expected=expected,
            expected_instance=expected_instance,
            wake=self._wake,
            handshake_timeout=service.cfg.handshake_timeout,
        )

    # -- asyncio ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses (no isinstance check).
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.engine.remote_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.run(self.engine.start())

    def data_received(self, data: bytes) -> None:
        self.run(self.engine.receive_data(data))

    def connection_lost(self, exc: Exception | None) -> None:
        self.cancel_timers()
        self.engine.connection_lost(exc)

    # -- output ---------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:  # no loop: a link made in process (tests) writes nowhere
            self.engine.data_to_send()

    def wrote(self, out: Sequence[bytes | bytearray]) -> None:
        self.engine.last_sent = time.monotonic()

    # -- the engine, as the cluster service uses a link ---------------------------------

    @property
    def up(self) -> bool:
        return self.engine.up

    @property
    def closed(self) -> bool:
        return self.engine.closed

    @property
    def goodbye(self) -> bool:
        return self.engine.goodbye

    @property
    def peer(self) -> gp.LinkInit | None:
        return self.engine.peer

    @property
    def peer_info(self) -> BrokerInfo | None:
        return self.engine.peer_info

    @property
    def address(self) -> gp.BrokerAddress | None:
        return self.engine.address

    @property
    def expected(self) -> tuple[str, int] | None:
        return self.engine.expected

    @property
    def expected_instance(self) -> str | None:
        return self.engine.expected_instance

    @property
    def reason(self) -> str | None:
        return self.engine.reason

    @property
    def logged(self) -> bool:
        return self.engine.logged

    @property
    def remote_addr(self) -> str:
        return self.engine.remote_addr

    @property
    def last_heard(self) -> float:
        return self.engine.last_heard

    @property
    def last_sent(self) -> float:
        return self.engine.last_sent

    @property
    def flow_stopped(self) -> bool:
        return self.engine.flow_stopped

    @flow_stopped.setter
    def flow_stopped(self, value: bool) -> None:
        self.engine.flow_stopped = value

    def send(self, pkt: gp.GPacket) -> None:
        self.engine.send(pkt)

    def write(self, data: bytes) -> None:
        self.engine.write(data)

    def drop(self, reason: str) -> None:
        self.engine.drop(reason)

    def close(self) -> None:
        self.engine.close()

    def leave(self) -> None:
        self.engine.leave(self.service.address_props())

    def heard_goodbye(self) -> None:
        self.engine.heard_goodbye()

    def describe(self) -> str:
        return self.engine.describe()
