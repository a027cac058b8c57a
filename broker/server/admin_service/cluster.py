"""Admin GET_CLUSTER (78): the brokers of this broker's cluster, as ``imqcmd list bkr``
shows them; RELOAD_CLUSTER (58, ``imqcmd reload cls``): every broker of the cluster reads
its broker list again.

The reply's body is a ``java.util.Vector`` of ``Hashtable``, one per broker, with the
keys of ``com.sun.messaging.jms.management.server.BrokerClusterInfo`` that stock imqcmd
reads (OpenMQ's GetClusterHandler): ``Address`` (String ``host:port`` of its port
mapper), ``ID`` (String, the broker id; empty unless configured), ``State`` (Integer, a
``BrokerState`` constant: OPERATING for this broker and the peers whose link is up,
BROKER_DOWN for the others).  An HA cluster's rows (see :mod:`.ha`) also carry
``NumMsgs`` (Long), ``StatusTimestamp`` (Long, its last heartbeat in ms) and
``TakeoverBrokerID`` (String, when taken over).  Ours add ``instanceName`` (String) and
``self`` (Boolean: the broker answering), which stock imqcmd ignores.  A broker that is
not clustered lists itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker import props as imq
from broker.cluster.config import ClusterConfigError, parse_address
from broker.core.errors import RouterError
from broker.protocol.admin_types import (
    BROKER_STATES,
    CHANGE_CLUSTER_MASTER_BROKER,
    GET_CLUSTER,
    RELOAD_CLUSTER,
)
from broker.protocol.javaser import encode_vector
from broker.protocol.names import (
    JMQ_BROKER_LIST,
    JMQ_BROKERS_ADDED,
    JMQ_BROKERS_REMOVED,
    JMQ_CLUSTER_NEW_MASTER_BROKER,
    JMQ_CLUSTER_OLD_MASTER_BROKER,
)
from broker.protocol.types import Status

from . import ha as admin_ha

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine

__all__ = [
    "BROKER_STATES",
    "CHANGE_CLUSTER_MASTER_BROKER",
    "GET_CLUSTER",
    "RELOAD_CLUSTER",
    "change_master_broker",
    "cluster_properties",
    "get_cluster",
    "reload_cluster",
]

# BrokerState (BROKER_STATES): this broker and the peers linked, and the others.
OPERATING, BROKER_DOWN = 0, 7


def get_cluster(conn: ConnectionEngine, props: dict) -> Any:
    b = conn.broker
    if b.ha is not None:
        return admin_ha.get_ha_cluster(conn)
    cluster = b.cluster
    brokerid = b.config.get(imq.BROKER_ID) or ""
    if cluster is None:
        pm = b.portmapper_port
        host = b.config.get(imq.HOSTNAME) or "localhost"
        brokers = [
            {
                "address": f"{host}:{pm}",
                "instance": b.config.instance,
                "state": "RUNNING",
                "self": True,
            }
        ]
    else:
        brokers = cluster.brokers()
    rows = [
        {
            "Address": r["address"],
            "ID": brokerid if r["self"] else "",
            "State": OPERATING if r["state"] == "RUNNING" else BROKER_DOWN,
            "instanceName": r["instance"],
            "self": r["self"],
        }
        for r in brokers
    ]
    return {}, encode_vector(rows)


async def reload_cluster(conn: ConnectionEngine, props: dict) -> tuple[dict, bytes]:
    """This broker and every broker linked to it read the cluster's broker list again
    (``imq.cluster.brokerlist`` in the instance's files or the file of ``imq.cluster.url``),
    link to the brokers added and leave those removed.  As OpenMQ's, for conventional
    clusters: an HA cluster's brokers find each other in their shared store."""
    b = conn.broker
    if b.cluster is None:
        if b.ha is not None:
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
        JMQ_BROKERS_ADDED: ",".join(f"{h}:{p}" for h, p in added),
        JMQ_BROKERS_REMOVED: ",".join(f"{h}:{p}" for h, p in removed),
    }, b""


async def change_master_broker(conn: ConnectionEngine, props: dict) -> tuple[dict, bytes]:
    """CHANGE_CLUSTER_MASTER_BROKER (``imqcmd changemaster cls -o
    imq.cluster.masterbroker=HOST:PORT``), sent to the master broker: the cluster's
    master broker becomes HOST:PORT (broker/cluster/mastership.py).  Refused, with the
    stock broker's statuses, in an HA cluster, unless
    imq.cluster.dynamicChangeMasterBrokerEnabled is true, when the master broker was set
    on the command line, and by the cluster's own checks."""
    b = conn.broker
    what = "change master broker"
    if b.ha is not None:
        raise RouterError(
            Status.PRECONDITION_FAILED, f"{what} does not apply to a broker of an HA cluster"
        )
    if not b.config.get(imq.CLUSTER_DYNAMIC_MASTER):
        raise RouterError(
            Status.NOT_ALLOWED,
            f"dynamic changing of the master broker is not enabled "
            f"({imq.CLUSTER_DYNAMIC_MASTER.name} is false)",
        )
    new_text = props.get(JMQ_CLUSTER_NEW_MASTER_BROKER)
    if not isinstance(new_text, str) or not new_text.strip():
        raise RouterError(Status.BAD_REQUEST, f"no {JMQ_CLUSTER_NEW_MASTER_BROKER} (host:port)")
    old_text = props.get(JMQ_CLUSTER_OLD_MASTER_BROKER)
    try:
        new = parse_address(new_text)
        old = parse_address(old_text) if isinstance(old_text, str) and old_text else None
    except ClusterConfigError as exc:
        raise RouterError(Status.BAD_REQUEST, str(exc)) from None
    if b.config.configured_names().get(imq.CLUSTER_MASTERBROKER.name) == "on the command line":
        raise RouterError(
            Status.NOT_ALLOWED,
            f"{imq.CLUSTER_MASTERBROKER.name} was given on the command line: the master "
            "broker cannot change while it runs (set it in config.properties instead)",
        )
    if b.cluster is None:
        raise RouterError(
            Status.PRECONDITION_FAILED,
            "there is no master broker: this broker is not part of a cluster",
        )
    await b.cluster.mastership.change(new, old)
    return {}, b""


def cluster_properties(b) -> dict[str, str]:
    """imq.cluster.brokerlist and .active as GET_BROKER_PROPS reports them, as OpenMQ's
    URLs (``mq://host:port/``, as stock imqcmd prints them); a broker alone is the active
    list by itself."""
    cluster = b.cluster
    if cluster is None:
        if b.ha is not None:
            return {imq.CLUSTER_BROKERLIST_ACTIVE: b.hello_properties.get(JMQ_BROKER_LIST, "")}
        pm = b.portmapper_port
        host = b.config.get(imq.HOSTNAME) or "localhost"
        return {imq.CLUSTER_BROKERLIST_ACTIVE: f"mq://{host}:{pm}/"}
    return {
        imq.CLUSTER_BROKERLIST.name: ",".join(f"mq://{r['address']}/" for r in cluster.brokers()),
        imq.CLUSTER_BROKERLIST_ACTIVE: cluster.broker_list(),
    }
