"""The HA cluster as the shared database store records it: every member broker, its
state (OpenMQ's: OPERATING, FAILOVER_COMPLETE...), its last heartbeat, and which broker
took it over.  Read from the StoreOwner rows (the portal shares the brokers' database),
so it shows a broker that is down, which no running broker's admin service could.

And TAKEOVER_BROKER (server/admin_service/ha.py): a broker takes over another one's data now."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet
from django.utils import timezone

from broker.models import StoreOwner

from .common import record_change

if TYPE_CHECKING:
    from ..broker_handle import BrokerAdmin


def ha_brokers_queryset(cluster_id: str | None = None) -> QuerySet[StoreOwner]:
    """The HA members' rows (of one cluster id, if given), by cluster and broker id."""
    qs = StoreOwner.objects.filter(ha=True).order_by("cluster_id", "broker_instance")
    return qs.filter(cluster_id=cluster_id) if cluster_id else qs


def ha_broker_dict(row: StoreOwner) -> dict[str, Any]:
    """One member as the portal and the REST API show it."""
    age = None
    if row.heartbeat is not None:
        age = round((timezone.now() - row.heartbeat).total_seconds(), 1)
    return {
        "broker_id": row.broker_instance,
        "cluster_id": row.cluster_id,
        "address": row.address,
        "state": row.broker_state,
        "running": row.state == StoreOwner.State.RUNNING,
        "heartbeat": row.heartbeat,
        "heartbeat_age": age,
        "interval": row.interval,
        "epoch": row.epoch,
        "pid": row.pid,
        "taken_over_by": row.taken_over_by,
        "taken_over_at": row.taken_over_at,
    }


def ha_brokers(cluster_id: str | None = None) -> list[dict[str, Any]]:
    return [ha_broker_dict(r) for r in ha_brokers_queryset(cluster_id)]


def takeover_broker(admin: BrokerAdmin, actor: str, broker_id: str) -> None:
    """Have the broker take over another broker of its HA cluster now (imqcmd takeover
    bkr -n BROKERID): one that failed and was not taken over, or stopped -nofailover."""
    admin.takeover(broker_id)
    record_change(
        actor,
        f"had the broker take over broker {broker_id}",
        {"type": "broker", "op": "takeover", "target": broker_id},
    )
