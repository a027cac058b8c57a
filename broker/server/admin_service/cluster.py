"""Admin GET_CLUSTER (78): the brokers of this broker's cluster, as ``imqcmd list bkr``
shows them; RELOAD_CLUSTER (58, ``imqcmd reload cls``): every broker of the cluster reads
its broker list again.

The reply's body is a ``java.util.Vector`` of ``Hashtable``, one per broker:
``address`` (String ``host:port`` of its port mapper), ``brokerID`` (String, empty
unless configured), ``instanceName`` (String), ``state`` (String: ``OPERATING`` for
this broker and the peers whose link is up, ``UNREACHABLE`` for the others) and
``self`` (Boolean: the broker answering).  A broker that is not clustered lists itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker import props as imq
from broker.cluster.config import ClusterConfigError
from broker.core.errors import RouterError
from broker.protocol.admin_types import GET_CLUSTER, RELOAD_CLUSTER
from broker.protocol.javaser import encode_vector
from broker.protocol.types import Status

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine

__all__ = ["GET_CLUSTER", "RELOAD_CLUSTER", "cluster_properties", "get_cluster", "reload_cluster"]


def get_cluster(conn: ConnectionEngine, props: dict) -> tuple[dict, bytes]:
    b = conn.broker
    cluster = b.cluster
    brokerid = b.config.get(imq.BROKER_ID) or ""
    if cluster is None:
        pm = b.portmapper_table().services[0].port
        host = b.config.get(imq.HOSTNAME) or "localhost"
        rows = [
            {"address": f"{host}:{pm}", "instanceName": b.config.instance, "state": "OPERATING"}
        ]
        rows[0]["self"] = True
    else:
        rows = [
            {
                "address": r["address"],
                "instanceName": r["instance"],
                "state": "OPERATING" if r["state"] == "RUNNING" else r["state"],
                "self": r["self"],
            }
            for r in cluster.brokers()
        ]
    for r in rows:
        r["brokerID"] = brokerid if r["self"] else ""
    return {}, encode_vector(rows)


async def reload_cluster(conn: ConnectionEngine, props: dict) -> tuple[dict, bytes]:
    """This broker and every broker linked to it read the cluster's broker list again
    (``imq.cluster.brokerlist`` in the instance's files or the file of ``imq.cluster.url``),
    link to the brokers added and leave those removed.  As OpenMQ's, for conventional
    clusters: an HA cluster's brokers find each other in their shared store."""
    b = conn.broker
    if b.cluster is None:
        if getattr(b, "ha", None) is not None:
            raise RouterError(
                Status.CONFLICT,
                "reload cls is for conventional clusters: the brokers of an HA cluster find "
                "each other in their shared store",
            )
        raise RouterError(
            Status.CONFLICT,
            "this broker is not part of a cluster (no imq.cluster.brokerlist or "
            "imq.cluster.url at start-up), so there is no cluster configuration to reload",
        )
    try:
        added, removed = await b.cluster.reload(propagate=True)
    except ClusterConfigError as exc:
        raise RouterError(Status.ERROR, f"cannot read the cluster configuration: {exc}") from None
    return {
        "JMQBrokersAdded": ",".join(f"{h}:{p}" for h, p in added),
        "JMQBrokersRemoved": ",".join(f"{h}:{p}" for h, p in removed),
    }, b""


def cluster_properties(b) -> dict[str, str]:
    """imq.cluster.brokerlist and .active as GET_BROKER_PROPS reports them."""
    cluster = b.cluster
    if cluster is None:
        return {}
    return {
        imq.CLUSTER_BROKERLIST.name: ",".join(r["address"] for r in cluster.brokers()),
        imq.CLUSTER_BROKERLIST_ACTIVE: ",".join(
            r["address"] for r in cluster.brokers() if r["state"] == "RUNNING"
        ),
    }
