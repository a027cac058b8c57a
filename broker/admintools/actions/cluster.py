"""The brokers of a conventional cluster, as the broker one is connected to sees them
(admin GET_CLUSTER): what ``imqcmd list bkr`` prints; RELOAD_CLUSTER, every broker of
the cluster reads its broker list again; CHANGE_CLUSTER_MASTER_BROKER, another broker
becomes the master broker (server/admin_service/cluster.py's requests)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.admin_types import BROKER_STATES, GET_CLUSTER

from ..client import read_vector
from .common import record_change

if TYPE_CHECKING:
    from ..broker_handle import BrokerAdmin
    from ..client import AdminClient


async def _get_cluster(client: AdminClient) -> list[dict[str, Any]]:
    _, body = await client.request(GET_CLUSTER)
    return [dict(row) for row in read_vector(body)]


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


def list_brokers(admin: BrokerAdmin) -> list[dict[str, Any]]:
    """Every broker of the cluster: address (host:port of its port mapper), instance,
    state (OpenMQ's BrokerState name: OPERATING, BROKER_DOWN, TAKEOVER_COMPLETE...),
    broker_id, is_self (the broker asked); in an HA cluster also num_msgs (stored under
    its broker id), takeover_broker_id and status_timestamp (ms), else None."""
    out = []
    for r in admin._request(_get_cluster):
        state = r.get("State")
        out.append(
            {
                "address": str(r.get("Address", "")),
                "instance": str(r.get("instanceName", "")),
                "state": BROKER_STATES.get(state, str(state)) if isinstance(state, int) else "",
                "broker_id": str(r.get("ID", "")),
                "is_self": bool(r.get("self")),
                "num_msgs": _int(r.get("NumMsgs")),
                "takeover_broker_id": r.get("TakeoverBrokerID"),
                "status_timestamp": _int(r.get("StatusTimestamp")),
            }
        )
    return out


def change_master_broker(admin: BrokerAdmin, actor: str, new_master: str) -> None:
    """Make ``new_master`` (host:port) the cluster's master broker (imqcmd changemaster
    cls); asked of the master broker itself."""
    admin.change_master_broker(new_master)
    record_change(
        actor,
        f"changed the cluster's master broker to {new_master}",
        {"type": "broker", "op": "change_master_broker", "master": new_master},
    )


def reload_cluster(admin: BrokerAdmin, actor: str) -> dict[str, list[str]]:
    """Have every broker of the cluster read its broker list again (imqcmd reload cls);
    returns the brokers added and removed, as ``host:port``."""
    changed = admin.reload_cluster()
    record_change(
        actor,
        "reloaded the cluster configuration"
        + "".join(f"; {k} {', '.join(v)}" for k, v in changed.items() if v),
        {"type": "broker", "op": "reload_cluster", **changed},
    )
    return changed
