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
    """Every broker of the cluster: address, instanceName, state, brokerID, self."""
    return admin._request(_get_cluster)
