"""Admin requests about client connections (OpenMQ's GetConnectionsHandler,
DestroyConnectionsHandler): GET_CONNECTIONS and DESTROY_CONNECTION."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.core import queries
from broker.protocol.javaser import encode_vector
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import JMQ_CONNECTION_ID, JMQ_SERVICE_NAME
from broker.protocol.types import GoodbyeReason, Status

from .common import AdminError, Result, log, long_prop

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


def admin_connection_ids(broker) -> set[int]:
    """The ids of the connections on ADMIN services (imqcmd, the portal's)."""
    return {cid for cid, c in broker.connections.items() if c.service.type == "ADMIN"}


def get_connections(conn: ConnectionEngine, props: dict) -> Result:
    broker = conn.broker
    wanted_service = props.get(JMQ_SERVICE_NAME)
    wanted_id = long_prop(props, JMQ_CONNECTION_ID)
    if wanted_service and not any(s.name == wanted_service for s in broker.services):
        raise AdminError(Status.NOT_FOUND, f"service {wanted_service} not found")
    producers = queries.producers_per_connection(conn.router)
    if wanted_id is not None:
        other = broker.connections.get(wanted_id)
        if other is None:
            raise AdminError(Status.NOT_FOUND, f"no connection {wanted_id}")
        candidates = [other]
    else:
        candidates = list(broker.connections.values())
    rows: list[dict[str, object]] = []
    for other in candidates:
        if wanted_service and other.service.name != wanted_service:
            continue
        host, _, port = other.peer.rpartition(":")
        rows.append(
            {
                "cxnid": JLong(other.id),
                "clientid": other.client_id or "",
                "host": host,
                "port": JInt(int(port) if port.isdigit() else 0),
                "user": other.user or "",
                "nproducers": JInt(producers.get(other.id, 0)),
                "nconsumers": JInt(queries.consumer_count(other.all_sessions())),
                "clientplatform": other.user_agent,
                "service": other.service.name,
                # Ours (OpenMQ's Hashtable has no session count).
                "nsessions": JInt(len(other.sessions)),
            }
        )
    return {}, encode_vector(rows)


def destroy_connection(conn: ConnectionEngine, props: dict) -> Result:
    cxn_id = long_prop(props, JMQ_CONNECTION_ID, required=True)
    other = conn.broker.connections.get(cxn_id)  # type: ignore[arg-type]
    if other is None:
        raise AdminError(Status.NOT_FOUND, f"no connection {cxn_id}")
    log.info("connection %s (%s, %s) closed by the administrator", cxn_id, other.user, other.peer)

    def close() -> None:  # after the reply (which may go to that very connection)
        other.send_goodbye(GoodbyeReason.ADMIN_KILLED_CON, "closed by the administrator")
        other.close()

    asyncio.get_running_loop().call_soon(close)
    return {}, b""
