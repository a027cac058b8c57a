"""The broker's events as the stock broker's JMX notifications.

One :class:`JmxEvents` per broker hears the router's events (a router event observer:
destinations created, destroyed, paused, resumed, purged, compacted and changed;
connections opened, closed and refused; services paused and resumed; the broker
quiescing and shutting down; the broker's properties changed; its memory state
changing; HA takeovers; other brokers of its cluster joining and leaving) and its
transactions (a
transaction observer), however they were caused (imqcmd, the portal, REST, JMX, a
client), and publishes each as OpenMQ's notification from OpenMQ's MBean.  A change of
a Config MBean's attribute is found by reading the MBean again after an event that
may change it and comparing with what it read before (``jmx.attribute.change``, of the
attributes the stock MBeanInfo says are writable).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from broker import props
from broker.engine import jmx_mbeans, jmx_stockinfo
from broker.engine.jmx import JmxServer
from broker.engine.jmx_mbeans import DOMAIN
from broker.engine.jmx_names import ObjectName
from broker.protocol.types import DEST_TOPIC, TransactionState

log = logging.getLogger(__name__)

DESTINATION_MANAGER = f"{DOMAIN}:type=DestinationManager,subtype=Monitor"
CONNECTION_MANAGER = f"{DOMAIN}:type=ConnectionManager,subtype=Monitor"
SERVICE_MANAGER = f"{DOMAIN}:type=ServiceManager,subtype=Monitor"
TRANSACTION_MANAGER = f"{DOMAIN}:type=TransactionManager,subtype=Monitor"
BROKER_MONITOR = f"{DOMAIN}:type=Broker,subtype=Monitor"
CLUSTER_MONITOR = f"{DOMAIN}:type=Cluster,subtype=Monitor"

_DEST_EVENTS = {
    "destination.paused": "mq.destination.pause",
    "destination.resumed": "mq.destination.resume",
    "destination.purged": "mq.destination.purge",
    "destination.compacted": "mq.destination.compact",
}
_PAUSE_TYPES = {1: "CONSUMERS", 2: "PRODUCERS", 3: "ALL"}
_TXN_TYPES = {
    TransactionState.COMMITTED: "mq.transaction.commit",
    TransactionState.PREPARED: "mq.transaction.prepare",
    TransactionState.ROLLEDBACK: "mq.transaction.rollback",
}


def _dest_monitor(name: str, is_topic: bool, subtype: str = "Monitor") -> str:
    kind = "t" if is_topic else "q"
    return (
        f"{DOMAIN}:type=Destination,subtype={subtype},desttype={kind},name={jmx_mbeans.quote(name)}"
    )


def _dest_config(data: dict) -> str:
    is_topic = bool(int(data.get("type", 0)) & DEST_TOPIC)
    return ObjectName.parse(_dest_monitor(str(data.get("name", "")), is_topic, "Config")).canonical


class JmxEvents:
    """Router and transaction observer that publishes notifications to ``servers``."""

    def __init__(self, broker: Any, servers: list[JmxServer], publish: Callable[..., None]) -> None:
        self.broker = broker
        self.servers = servers
        self._publish = publish
        self.registry = jmx_mbeans.Registry(broker)
        # Connection ID -> (service, user, host): what a close notification names.
        self._connections: dict[int, tuple[str | None, str | None, str | None]] = {}
        self._quiesce_told = False
        self._config: dict[str, dict[str, object]] = self._read_config()

    def attach(self) -> None:
        observers = self.broker.router.observers
        observers.add_router_event_observer(self)
        observers.add_transaction_observer(self)

    def publish(self, source: str, notif_type: str, kind: str, **fields: object) -> None:
        for server in self.servers:
            if not server.clients:
                continue  # nobody connected, so nobody listens
            self._publish(server, source, notif_type, kind, None, **fields)

    # -- router events -----------------------------------------------------------

    def router_event(self, kind: str, data: dict) -> None:
        if kind in ("destination.created", "destination.destroyed"):
            self._destination_made(kind, data)
        elif kind in _DEST_EVENTS:
            self._destination_changed(_DEST_EVENTS[kind], data)
        elif kind.startswith("connection."):
            self._connection(kind, data)
        elif kind in ("service.paused", "service.resumed"):
            what = "pause" if kind == "service.paused" else "resume"
            name = str(data.get("name", ""))
            self.publish(SERVICE_MANAGER, f"mq.service.{what}", "service", name=name)
            source = f"{DOMAIN}:type=Service,subtype=Monitor,name={name}"
            self.publish(source, f"mq.service.{what}", "service", name=name)
        elif kind == "broker.quiesce":
            self._quiesce_told = False
            self._broker_notification("mq.broker.quiesce.start")
            self._quiesce_progress()
        elif kind == "broker.shutdown":
            self._broker_notification("mq.broker.shutdown.start")
        elif kind == "broker.resource_state":
            self._resource_state(data)
        elif kind.startswith("broker.takeover."):
            self._takeover(kind.rpartition(".")[2], data)
        elif kind in ("cluster.broker.join", "cluster.broker.down"):
            self._cluster_member(kind, data)
        self._config_event(kind, data)

    def _destination_made(self, kind: str, data: dict) -> None:
        name = str(data.get("name", ""))
        is_topic = bool(int(data.get("type", 0)) & DEST_TOPIC)
        what = "create" if kind == "destination.created" else "destroy"
        fields: dict[str, object] = {
            "destName": name,
            "destType": "t" if is_topic else "q",
            "createdByAdmin": False,
        }
        if what == "create":
            fields["createdByAdmin"] = not bool(data.get("auto", False))
        self.publish(DESTINATION_MANAGER, f"mq.destination.{what}", "destination", **fields)

    def _destination_changed(self, notif_type: str, data: dict) -> None:
        name = str(data.get("name", ""))
        is_topic = bool(int(data.get("type", 0)) & DEST_TOPIC)
        fields: dict[str, object] = {
            "destName": name,
            "destType": "t" if is_topic else "q",
            "createdByAdmin": False,
        }
        if notif_type == "mq.destination.pause":
            fields["pauseType"] = _PAUSE_TYPES.get(int(data.get("state", 3)), "ALL")
        self.publish(_dest_monitor(name, is_topic), notif_type, "destination", **fields)
        self.publish(DESTINATION_MANAGER, notif_type, "destination", **fields)

    def _connection(self, kind: str, data: dict) -> None:
        cid = data.get("id")
        if kind == "connection.opened" and isinstance(cid, int):
            self._connections[cid] = (data.get("service"), data.get("user"), data.get("host"))
            service, user, host = self._connections[cid]
            notif_type = "mq.connection.open"
        elif kind == "connection.closed" and isinstance(cid, int):
            if cid not in self._connections:
                return  # not a client connection this broker counted (a peer's)
            service, user, host = self._connections.pop(cid)
            notif_type = "mq.connection.close"
            self._quiesce_progress()
        elif kind == "connection.rejected":
            service, user, host = data.get("service"), data.get("user"), data.get("host")
            notif_type = "mq.connection.reject"
        else:
            return
        fields = {
            "id": None if cid is None else str(cid),
            "serviceName": service,
            "userName": user,
            "remoteHost": host,
        }
        self.publish(CONNECTION_MANAGER, notif_type, "connection", **fields)
        if service:
            source = f"{DOMAIN}:type=Service,subtype=Monitor,name={service}"
            self.publish(source, notif_type, "connection", **fields)

    def _broker_notification(self, notif_type: str) -> None:
        b = self.broker
        self.publish(
            BROKER_MONITOR,
            notif_type,
            "broker",
            brokerID=jmx_mbeans.broker_id(b),
            brokerAddress=jmx_mbeans.local_address(b),
        )

    def _resource_state(self, data: dict) -> None:
        # As the ResourceState attribute spells the states; OpenMQ's has no broker ID
        # or address here, and its heap usage is null (MemoryManager passes none).
        self.publish(
            BROKER_MONITOR,
            "mq.broker.resource.state.change",
            "broker",
            oldResourceState=f"{str(data.get('old', '')).upper():<6}",
            newResourceState=f"{str(data.get('new', '')).upper():<6}",
        )

    def _takeover(self, what: str, data: dict) -> None:
        # Told by the Broker and the Cluster Monitor, naming this broker and the one
        # taken over (OpenMQ's Agent.notifyTakeover*).
        fields = {
            "failedBrokerID": data.get("failed"),
            "brokerID": data.get("id"),
            "brokerAddress": jmx_mbeans.local_address(self.broker),
        }
        for source in (BROKER_MONITOR, CLUSTER_MONITOR):
            self.publish(source, f"mq.broker.takeover.{what}", "broker", **fields)

    def _cluster_member(self, kind: str, data: dict) -> None:
        # OpenMQ's ClusterMonitor: the peer's host:port; in an HA cluster its broker ID
        # and the cluster ID, else whether it is the master broker.  A join is told by
        # the Broker Monitor too.
        ha = bool(data.get("ha", False))
        fields: dict[str, object] = {
            "brokerAddress": data.get("address"),
            "highlyAvailable": ha,
            "isMasterBroker": False if ha else bool(data.get("master", False)),
        }
        if ha:
            fields["brokerID"] = data.get("broker_id")
            fields["clusterID"] = self.broker.config.get(props.CLUSTER_ID)
        notif_type = "mq." + kind
        self.publish(CLUSTER_MONITOR, notif_type, "cluster", **fields)
        if kind == "cluster.broker.join":
            self.publish(BROKER_MONITOR, notif_type, "cluster", **fields)

    def _quiesce_progress(self) -> None:
        # OpenMQ tells quiesce.complete when the last client connection has gone.
        if self.broker.quiescing and not self._quiesce_told and self.broker.state == "QUIESCED":
            self._quiesce_told = True
            self._broker_notification("mq.broker.quiesce.complete")

    # -- attribute changes ------------------------------------------------------------

    def _config_event(self, kind: str, data: dict) -> None:
        """Re-read the Config MBeans an event may change: only the one destination or
        service it names (a broker with many destinations must not re-read them all
        for each one created), every one after the broker's properties changed."""
        if kind == "broker.properties":
            self._config_changes(self._read_config())
        elif kind == "destination.created":
            self._config.update(self._read_config({_dest_config(data)}))  # new: nothing changed
        elif kind == "destination.destroyed":
            self._config.pop(_dest_config(data), None)
        elif kind == "destination.updated":
            self._config_changes(self._read_config({_dest_config(data)}))
        elif kind == "service.updated":
            name = f"{DOMAIN}:type=Service,subtype=Config,name={data.get('name', '')}"
            self._config_changes(self._read_config({ObjectName.parse(name).canonical}))

    def _read_config(self, only: set[str] | None = None) -> dict[str, dict[str, object]]:
        """The writable attributes' values of every Config MBean, or of those named in
        ``only`` (canonical names)."""
        out: dict[str, dict[str, object]] = {}
        if only is None:
            found: Iterable[tuple[ObjectName, Any, Any]] = self.registry.mbeans()
        else:
            mbeans = [self.registry.get(ObjectName.parse(n)) for n in only]
            found = [(m.name, m.kind, m.key) for m in mbeans if m is not None]
        for name, kind, key in found:
            if kind.subtype != "Config" or kind.type == "Connection":
                continue
            stock = jmx_stockinfo.kinds().get(f"{kind.type}/{kind.subtype}")
            # The stock broker tells changes of the attributes one may set, not of the
            # counts some Config MBeans show (NumDestinations).
            writable = {a[0] for a in stock.attributes if a[4]} if stock is not None else set()
            values: dict[str, object] = {}
            for attr in kind.attrs:
                if attr.name not in writable:
                    continue
                try:
                    values[attr.name] = attr.read(self.broker, key)
                except Exception:  # noqa: BLE001 - one unreadable value must not stop the rest
                    continue
            out[name.canonical] = values
        return out

    def _config_changes(self, after: dict[str, dict[str, object]]) -> None:
        """Tell the attributes that read differently in ``after`` than before."""
        before = self._config
        self._config = {**before, **after}
        for name, values in after.items():
            old = before.get(name)
            if old is None:
                continue
            mbean = self.registry.get(ObjectName.parse(name))
            for attr_name, value in values.items():
                if attr_name not in old or _same(old[attr_name], value):
                    continue
                attr = mbean.kind.attribute(attr_name) if mbean is not None else None
                self.publish(
                    name,
                    "jmx.attribute.change",
                    "attribute",
                    attributeName=attr_name,
                    attributeType=attr.type if attr is not None else None,
                    oldValue=old[attr_name],
                    newValue=value,
                )

    # -- transactions -------------------------------------------------------------

    def transaction_changed(self, txn: Any) -> None:
        notif_type = _TXN_TYPES.get(txn.state)
        if notif_type is not None:
            self.publish(TRANSACTION_MANAGER, notif_type, "transaction", transactionID=str(txn.id))


def _same(a: object, b: object) -> bool:
    # The values are plain Python values or composites (JavaObject): compare what a
    # client would read.
    return type(a) is type(b) and repr(a) == repr(b)
