"""Admin TAKEOVER_BROKER (76, ``imqcmd takeover bkr -n BROKERID``): this broker takes over
the data of another broker of its HA cluster now, as OpenMQ's.  For a broker that failed
and was not taken over, or one shut down with -nofailover whose data is wanted elsewhere;
a running broker is refused (PRECONDITION_FAILED).  Request: JMQBrokerID (String)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.core.errors import RouterError
from broker.protocol.admin_types import TAKEOVER_BROKER
from broker.protocol.types import Status

if TYPE_CHECKING:
    from ..connection import ClientConnection

__all__ = ["TAKEOVER_BROKER", "takeover_broker"]


async def takeover_broker(conn: ClientConnection, props: dict) -> tuple[dict, bytes]:
    target = props.get("JMQBrokerID")
    if not isinstance(target, str) or not target.strip():
        raise RouterError(Status.BAD_REQUEST, "TAKEOVER_BROKER needs JMQBrokerID")
    monitor = getattr(conn.broker, "ha", None)
    if monitor is None:
        raise RouterError(Status.NOT_ALLOWED, "this broker is not in an HA cluster")
    await monitor.take_over_now(target.strip())
    return {}, b""
