"""The broker's bridge service as ``imqbridgemgr`` sees it (OpenMQ's
``BridgeServiceManagerImpl``): its admin queue and the STOMP bridge's start and stop.

The protocol and the replies' contents: :mod:`broker.protocol.bridge_admin`.  A HELLO on
``__JMQBridgeAdmin`` (an ADMIN service's, as every admin request) is answered with the
name of a temporary queue the broker owns (made on the first HELLO, owned by no
connection); the commands sent there are answered by :func:`command`.  Stopping the
STOMP bridge closes its listeners (``stomp``, ``sslstomp``) and its connections, as the
stock broker's StompServer.stop does; starting it listens on the same ports again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from broker import props
from broker.protocol import bridge_admin as ba
from broker.protocol.admin_types import BRIDGE_QUEUE_PREFIX
from broker.protocol.names import JMQ_ERROR_STRING, JMQ_INSTANCE_NAME, JMQ_STATUS
from broker.protocol.types import DEST_QUEUE, DEST_TEMP

from .common import log

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine
    from broker.server.broker import Broker
    from broker.server.services import Service

STOMP_BRIDGE = "stomp"  # its name in imq.bridge.activelist


@dataclass(frozen=True)
class _Owner:
    """The owner of the bridge service's queue: no connection has id 0, so no one can
    consume from it and no connection's end removes it."""

    id: int = 0


class BridgeService:
    """One broker's bridge service."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        c = broker.config
        self.enabled = bool(c.get(props.BRIDGE_ENABLED))
        has_stomp = self.enabled and STOMP_BRIDGE in c.get(props.BRIDGE_ACTIVELIST)
        self.stomp_state: str | None = ba.STARTED if has_stomp else None
        self.queue: str | None = None
        self._lock = asyncio.Lock()

    def bridges(self) -> list[ba.BridgeView]:
        if self.stomp_state is None:
            return []
        return [ba.BridgeView(STOMP_BRIDGE, ba.STOMP_TYPE, self.stomp_state)]

    def admin_queue(self) -> str:
        """The temporary queue the commands go to (made on first use)."""
        if self.queue is None:
            name = f"{BRIDGE_QUEUE_PREFIX}{self.broker.portmapper_port}/1"
            router = self.broker.router
            if router.lookup(name, DEST_QUEUE | DEST_TEMP) is None:
                router.create_destination(name, DEST_QUEUE | DEST_TEMP, _Owner())  # type: ignore[arg-type]
            self.queue = name
        return self.queue

    def _stomp_services(self) -> list[Service]:
        return [s for s in self.broker.services if s.protocol == "stomp"]

    async def stop_stomp(self) -> None:
        """Close the STOMP listeners and every STOMP connection."""
        for svc in self._stomp_services():
            if svc.server is not None:
                # Listen on the same port when started again, even if it was chosen (0).
                svc.rebind_port = svc.bound_port or svc.port
                svc.server.close()
                svc.server = None
            for conn in list(svc.connections):
                conn.close("the STOMP bridge was stopped")
        self.stomp_state = ba.STOPPED
        log.info("STOMP bridge %s stopped", STOMP_BRIDGE)

    async def start_stomp(self) -> None:
        """Listen again on the STOMP ports; raises OSError when one cannot be bound (the
        listeners opened so far stay, as the stock broker leaves them)."""
        for svc in self._stomp_services():
            if svc.server is None:
                configured = svc.port
                await self.broker.rebind_service(svc, svc.rebind_port or configured)
                svc.port = configured  # 0 (dynamic) stays so for imqcmd list svc
        self.stomp_state = ba.STARTED
        log.info("STOMP bridge %s started", STOMP_BRIDGE)


def service(broker: Broker) -> BridgeService:
    if broker.bridge_service is None:
        broker.bridge_service = BridgeService(broker)
    bs: BridgeService = broker.bridge_service
    return bs


def hello(conn: ConnectionEngine) -> tuple[dict[str, object], str | None]:
    """HELLO on __JMQBridgeAdmin: (reply properties, the command queue or None)."""
    broker = cast("Broker", conn.broker)
    bs = service(broker)
    reply: dict[str, object] = {JMQ_INSTANCE_NAME: broker.config.instance}
    if not bs.enabled:
        reply[JMQ_STATUS] = ba.UNAVAILABLE
        reply[JMQ_ERROR_STRING] = ba.NOT_ENABLED
        return reply, None
    reply[JMQ_STATUS] = ba.OK
    return reply, bs.admin_queue()


async def command(conn: ConnectionEngine, msg_type: object, request: dict) -> ba.Answer:
    """One command to the bridge service's queue: decided, then carried out."""
    bs = service(cast("Broker", conn.broker))
    async with bs._lock:  # one command at a time, as the stock manager's are synchronized
        out = ba.answer(msg_type, request, bs.bridges())
        try:
            for _name in out.stop:
                await bs.stop_stomp()
            for _name in out.start:
                await bs.start_stomp()
        except OSError as exc:
            out.status, out.error, out.body = ba.ERROR, f"STOMP bridge: {exc}", b""
    level = log.info if out.status == ba.OK else log.warning
    level(
        "bridge admin %s from %s (%s): %s%s",
        ba.type_name(msg_type) if isinstance(msg_type, int) else msg_type,
        conn.peer,
        conn.user,
        out.status,
        f" {out.error}" if out.error else "",
    )
    return out
