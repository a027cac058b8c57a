"""The HA cluster's side of the admin service.

TAKEOVER_BROKER (76, ``imqcmd takeover bkr -n BROKERID``): this broker takes over the
data of another broker of its HA cluster now, as OpenMQ's.  For a broker that failed and
was not taken over, or one shut down with -nofailover whose data is wanted elsewhere; a
running broker is refused (PRECONDITION_FAILED).  Request: JMQBrokerID (String).

GET_CLUSTER (78) in an HA cluster: every member the shared store records, as OpenMQ's
GetClusterHandler lists an HA cluster's brokers (its ``BrokerClusterInfo`` keys, see
:mod:`.cluster`): ID, Address, State, NumMsgs (the messages stored under its broker id),
StatusTimestamp (its last heartbeat) and TakeoverBrokerID.  Read fresh from the store in
its writer thread, so a member that just went down shows as down.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from broker.core.errors import RouterError
from broker.protocol.admin_types import TAKEOVER_BROKER
from broker.protocol.javaser import encode_vector
from broker.protocol.jtypes import JLong
from broker.protocol.names import JMQ_BROKER_ID
from broker.protocol.types import Status

if TYPE_CHECKING:
    from broker.models import StoreOwner

    from ..connection import ClientConnection

__all__ = ["TAKEOVER_BROKER", "get_ha_cluster", "ha_state", "takeover_broker"]

# Seconds GET_CLUSTER waits for the store's writer thread to read the members.
STORE_TIMEOUT = 8.0


async def takeover_broker(conn: ClientConnection, props: dict) -> tuple[dict, bytes]:
    target = props.get(JMQ_BROKER_ID)
    if not isinstance(target, str) or not target.strip():
        raise RouterError(Status.BAD_REQUEST, "TAKEOVER_BROKER needs JMQBrokerID")
    monitor = conn.broker.ha
    if monitor is None:
        raise RouterError(Status.NOT_ALLOWED, "this broker is not in an HA cluster")
    await monitor.take_over_now(target.strip())
    return {}, b""


# OpenMQ's broker states (broker.models.BrokerState) as BrokerState integers, as
# GetClusterHandler.convertState maps them (a broker taken over: TAKEOVER_COMPLETE).
_STATES = {
    "OPERATING": 0,
    "QUIESCE_STARTED": 4,
    "QUIESCE_COMPLETED": 5,
    "SHUTDOWN_STARTED": 6,
    "SHUTDOWN_COMPLETE": 7,
    "FAILOVER_PENDING": 7,
    "FAILOVER_STARTED": 1,
    "FAILOVER_COMPLETE": 2,
    "FAILOVER_FAILED": 3,
}


def ha_state(row: StoreOwner, *, failed: bool) -> int:
    """A member's ``State``: its recorded state; BROKER_DOWN (7) for one the monitor
    judged failed, or stopped without saying so."""
    from broker.models import StoreOwner

    state = _STATES.get(row.broker_state, 7)
    if state == 0 and (failed or row.state != StoreOwner.State.RUNNING):
        return 7
    return state


async def get_ha_cluster(conn: ClientConnection) -> tuple[dict, bytes]:
    monitor = conn.broker.ha
    # The store's writer thread: the ORM stays off the event loop.
    fut = monitor.store.call_in_writer(lambda: _ha_rows(monitor))
    try:
        # The writer may be busy with a long batch, or stuck on a database that is away.
        rows = await asyncio.wait_for(fut, STORE_TIMEOUT)
    except TimeoutError:
        raise RouterError(
            Status.UNAVAILABLE,
            f"the store did not answer within {STORE_TIMEOUT:g} s: the HA cluster's "
            "brokers cannot be listed now",
        ) from None
    except RouterError:
        raise
    except Exception as exc:
        raise RouterError(
            Status.UNAVAILABLE, f"cannot read the HA cluster's brokers from the store: {exc}"
        ) from None
    return {}, encode_vector(rows)


def _ha_rows(monitor: Any) -> list[dict[str, Any]]:
    from django.db import connections
    from django.db.models import Count

    from broker.models import StoredMessage
    from broker.store import takeover

    using = monitor.store.using
    try:
        members = takeover.members(monitor.cluster_id, using=using)
        ids = [m.broker_instance for m in members]
        counts = dict(
            StoredMessage.objects.using(using)
            .filter(broker_instance__in=ids)
            .values_list("broker_instance")
            .annotate(n=Count("id"))
        )
    except Exception:
        connections[using].close()
        raise
    failed = {i for i, m in monitor.rows.items() if m.failed}
    out = []
    for m in members:
        me = m.broker_instance == monitor.broker_id
        row: dict[str, Any] = {
            "ID": m.broker_instance,
            "Address": m.address,
            "State": 0 if me else ha_state(m, failed=m.broker_instance in failed),
            "NumMsgs": JLong(counts.get(m.broker_instance, 0)),
            "instanceName": m.broker_instance,
            "self": me,
        }
        if m.heartbeat is not None:
            row["StatusTimestamp"] = JLong(int(m.heartbeat.timestamp() * 1000))
        if m.taken_over_by:
            row["TakeoverBrokerID"] = m.taken_over_by
        out.append(row)
    return out
