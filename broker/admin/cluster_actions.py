"""The brokers of a conventional cluster, as the broker one is connected to sees them
(admin GET_CLUSTER): what ``imqcmd list bkr`` prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.protocol.admin_types import GET_CLUSTER

from .client import read_vector

if TYPE_CHECKING:
    from .client import AdminClient
    from .remote import BrokerAdmin


async def _get_cluster(client: AdminClient) -> list[dict[str, Any]]:
    _, body = await client.request(GET_CLUSTER)
    return [dict(row) for row in read_vector(body)]


def list_brokers(admin: BrokerAdmin) -> list[dict[str, Any]]:
    """Every broker of the cluster: address (host:port of its port mapper), instance,
    state (OPERATING or UNREACHABLE), broker_id, is_self (the broker asked)."""
    return [
        {
            "address": str(r.get("address", "")),
            "instance": str(r.get("instanceName", "")),
            "state": str(r.get("state", "")),
            "broker_id": str(r.get("brokerID", "")),
            "is_self": bool(r.get("self")),
        }
        for r in admin._request(_get_cluster)
    ]
