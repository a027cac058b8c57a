"""The MBeans served over JMX: OpenMQ's names (com.sun.messaging.jms.server), attribute
names and Java types, read from the running broker each time a client asks.

The catalogue is declarative: one :class:`MBeanKind` per (type, subtype) with its
attributes (:class:`Attr`: name, Java type, reader).  Readers take ``(broker, key)``:
``key`` is what names the instance (a service name, a Destination, a connection id;
None for the broker-wide MBeans).  They read through the same queries as imqcmd's
admin handlers (broker/server/admin_service) so JMX, imqcmd, the portal and REST agree.
Operations (invoke) are kept beside the attributes of the same kind.

Names, attributes and types are the stock OpenMQ 6.9 broker's, captured with
tests/interop/java/JmxCatalog.java (getMBeanInfo and getAttribute of every MBean);
docs/reference/jmx.md lists where values differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from broker import props
from broker.core import queries
from broker.core.admin_views import (
    broker_counters,
    destination_held_values,
    destination_info_values,
    destination_metric_values,
    is_listed_by_admin,
    listed_by_admin,
    memory_figures,
    service_threads,
)
from broker.engine.jmx_names import ObjectName
from broker.protocol import jmxser
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.types import OPENMQ_VERSION, TransactionState

DOMAIN = "com.sun.messaging.jms.server"
# What javax.management's MBeanServer answers when created without a domain.
DEFAULT_DOMAIN = "DefaultDomain"

Getter = Callable[[Any], object]
Reader = Callable[[Any, Any], object]  # (broker, key) -> value
# What several attributes of an MBean are picked from, made once per getAttributes
# (broker, key) -> e.g. a destination's DestinationInfo values.
View = Callable[[Any, Any], Any]

STRING = "java.lang.String"
INTEGER = "java.lang.Integer"
LONG = "java.lang.Long"
BOOLEAN = "java.lang.Boolean"
COMPOSITE = jmxser.COMPOSITE_DATA


@dataclass(frozen=True)
class Attr:
    """One attribute: its name, the Java type MBeanInfo declares, and its reader; or
    the view it is picked from and the pick (made with :func:`picked`)."""

    name: str
    type: str
    read: Reader
    view: View | None = None
    pick: Callable[[Any], object] | None = None


def picked(name: str, jtype: str, view: View, pick: Callable[[Any], object]) -> Attr:
    """An attribute whose value ``pick`` takes from what ``view(broker, key)`` gives:
    a getAttributes makes each view once for the attributes it reads."""
    return Attr(name, jtype, lambda b, k: pick(view(b, k)), view, pick)


@dataclass(frozen=True, eq=False)
class MBeanKind:
    """The MBeans of one ``type``/``subtype``: their attributes in OpenMQ's names (one
    instance each: compared and hashed by identity, as the lookups want).  ``stamp``:
    for the kinds whose values change only with what it returns (the configuration, a
    destination's attributes), ``stamp(broker, key)`` (see :func:`settled`)."""

    type: str
    subtype: str
    attrs: tuple[Attr, ...]
    stamp: Callable[[Any, Any], object] | None = None

    def attribute(self, name: str) -> Attr | None:
        for a in self.attrs:
            if a.name == name:
                return a
        return None


@dataclass(frozen=True)
class MBean:
    """One MBean instance: its name, kind and key."""

    name: ObjectName
    kind: MBeanKind
    key: Any

    @property
    def readers(self) -> dict[str, Reader]:
        """Attribute name -> reader, called with (broker, :attr:`key`)."""
        return _READERS[self.kind]

    @property
    def attributes(self) -> dict[str, Getter]:
        """Attribute name -> getter of the broker (the readers bound to the key)."""
        key = self.key

        def getter(read: Reader) -> Getter:
            return lambda b: read(b, key)

        return {name: getter(read) for name, read in self.readers.items()}


# -- readers shared by several kinds ---------------------------------------------------


def _configured(b: Any, _key: Any = None) -> tuple[object, ...]:
    # The values of the Broker, Cluster, Log and Service Config MBeans follow from the
    # configuration (its version is bumped by every change) and the port mapper's port.
    config = b.config
    return (config, config.version, b.portmapper_port)


def _cfg_int(b: Any, name: str, default: int) -> int:
    return b.config.get_int(name, default)


def _host(b: Any, _key: Any = None) -> str:
    # The stock broker names itself "localhost" when imq.hostname is unset.
    return b.config.get(props.HOSTNAME) or "localhost"


def broker_id(b: Any, _key: Any = None) -> str | None:
    """imq.brokerid (None when unset)."""
    return b.config.get(props.BROKER_ID) or None


def _services(b: Any) -> list[Any]:
    """The running JMQ services (not the STOMP bridge's listeners)."""
    return _view("services", b, lambda: [s for s in b.services if s.protocol != "stomp"])


def _counters(b: Any, services: list[Any] | None = None) -> dict[str, int]:
    """broker_counters of ``services`` (default: every JMQ service); one service's or
    all of them once per reading (a Service Monitor reads nine of them)."""
    if services is None:
        return _view("counters", b, lambda: broker_counters(b, _services(b)))
    if len(services) == 1:
        return _view("counters", services[0], lambda: broker_counters(b, services))
    return broker_counters(b, services)


def _consumers(b: Any) -> int:
    return sum(queries.consumer_count(c.all_sessions()) for c in b.connections.values())


def _wildcard_consumers(b: Any) -> int:
    return sum(
        1
        for c in b.connections.values()
        for s in c.all_sessions()
        for cons in s.consumers.values()
        if _is_wildcard(cons.destination.name)
    )


def _is_wildcard(name: str) -> bool:
    return "*" in name or ">" in name


def _producers(b: Any) -> int:
    return len(b.router.producers)


def _wildcard_producers(b: Any) -> int:
    return sum(1 for p in b.router.producers.values() if _is_wildcard(p.destination.name))


def _destinations(b: Any) -> list[Any]:
    return _view("destinations", b, lambda: listed_by_admin(b.router))


def _transactions(b: Any) -> int:
    return len(queries.transactions(b.router))


# Every service the stock broker knows (imq.service.list), listed whether it runs or not.
SERVICE_NAMES = ("admin", "httpjms", "httpsjms", "jms", "ssladmin", "ssljms", "wsjms", "wssjms")


# -- Broker ----------------------------------------------------------------------------

_BROKER = (
    Attr("BrokerID", STRING, broker_id),
    Attr("Host", STRING, _host),
    Attr("InstanceName", STRING, lambda b, k: b.config.instance),
    Attr("Port", INTEGER, lambda b, k: JInt(b.portmapper_port)),
    Attr("Version", STRING, lambda b, k: OPENMQ_VERSION),
)
BROKER_CONFIG = MBeanKind("Broker", "Config", _BROKER, stamp=_configured)
BROKER_MONITOR = MBeanKind(
    "Broker",
    "Monitor",
    (
        *_BROKER,
        Attr("Embedded", BOOLEAN, lambda b, k: False),
        # The stock broker pads its memory state label ("GREEN ").
        Attr("ResourceState", STRING, lambda b, k: f"{b.memory.state.upper():<6}"),
    ),
    stamp=lambda b, k: (*_configured(b), b.memory.state),
)

# -- Cluster ---------------------------------------------------------------------------

OPERATING = 0


def local_address(b: Any) -> str:
    """This broker's host:port as the cluster names it."""
    return f"{b.config.get(props.HOSTNAME) or '127.0.0.1'}:{b.portmapper_port}"


def _local_info(b: Any, monitor: bool) -> object:
    items: list[jmxser.Item] = [
        ("Address", "Address", STRING, local_address(b)),
        ("ID", "ID", STRING, broker_id(b)),
    ]
    if monitor:
        items += [
            ("NumMsgs", "NumMsgs", LONG, None),
            ("State", "State", INTEGER, JInt(OPERATING)),
            ("StateLabel", "StateLabel", STRING, "OPERATING"),
            ("StatusTimestamp", "StatusTimestamp", LONG, None),
            ("TakeoverBrokerID", "TakeoverBrokerID", STRING, None),
        ]
    return jmxser.composite("BrokerClusterInfo", "BrokerClusterInfo", items)


def _master_info(b: Any, monitor: bool) -> object:
    master = b.config.get(props.CLUSTER_MASTERBROKER)
    if not master:
        return None
    items: list[jmxser.Item] = [
        ("Address", "Address", STRING, master),
        ("ID", "ID", STRING, None),
    ]
    return jmxser.composite("BrokerClusterInfo", "BrokerClusterInfo", items)


def _cluster(monitor: bool, config_url_default: str | None) -> tuple[Attr, ...]:
    return (
        Attr("ClusterID", STRING, lambda b, k: b.config.get(props.CLUSTER_ID) or None),
        Attr(
            "ConfigFileURL",
            STRING,
            lambda b, k: b.config.get(props.CLUSTER_URL) or config_url_default,
        ),
        Attr(
            "HighlyAvailable",
            BOOLEAN,
            lambda b, k: str(b.config.get(props.CLUSTER_HA)).lower() == "true",
        ),
        Attr("LocalBrokerInfo", COMPOSITE, lambda b, k: _local_info(b, monitor)),
        Attr("MasterBrokerInfo", COMPOSITE, lambda b, k: _master_info(b, monitor)),
        Attr(
            "UseSharedDatabaseForConfigRecord",
            BOOLEAN,
            lambda b, k: b.config.get_bool("imq.cluster.nomasterbroker", False),
        ),
    )


# The stock broker answers null for an unset cluster URL in Config, "" in Monitor.
CLUSTER_CONFIG = MBeanKind("Cluster", "Config", _cluster(False, None), stamp=_configured)
# Its monitor fields are constants here (a broker of ours is OPERATING, reports no
# message count): the configuration settles it too.
CLUSTER_MONITOR = MBeanKind("Cluster", "Monitor", _cluster(True, ""), stamp=_configured)

# -- managers --------------------------------------------------------------------------


def _opened(b: Any) -> int:
    return sum(s.connections_opened for s in _services(b))


def _rejected(b: Any) -> int:
    return sum(s.connections_rejected for s in _services(b))


_NUM_CONNECTIONS = Attr("NumConnections", INTEGER, lambda b, k: JInt(len(b.connections)))
CONNECTION_MANAGER_CONFIG = MBeanKind("ConnectionManager", "Config", (_NUM_CONNECTIONS,))
CONNECTION_MANAGER_MONITOR = MBeanKind(
    "ConnectionManager",
    "Monitor",
    (
        _NUM_CONNECTIONS,
        Attr("NumConnectionsOpened", LONG, lambda b, k: JLong(_opened(b))),
        Attr("NumConnectionsRejected", LONG, lambda b, k: JLong(_rejected(b))),
    ),
)

_NUM_CONSUMERS = Attr("NumConsumers", INTEGER, lambda b, k: JInt(_consumers(b)))
CONSUMER_MANAGER_CONFIG = MBeanKind("ConsumerManager", "Config", (_NUM_CONSUMERS,))
CONSUMER_MANAGER_MONITOR = MBeanKind(
    "ConsumerManager",
    "Monitor",
    (
        _NUM_CONSUMERS,
        Attr("NumWildcardConsumers", INTEGER, lambda b, k: JInt(_wildcard_consumers(b))),
    ),
)

_NUM_PRODUCERS = Attr("NumProducers", INTEGER, lambda b, k: JInt(_producers(b)))
PRODUCER_MANAGER_CONFIG = MBeanKind("ProducerManager", "Config", (_NUM_PRODUCERS,))
PRODUCER_MANAGER_MONITOR = MBeanKind(
    "ProducerManager",
    "Monitor",
    (
        _NUM_PRODUCERS,
        Attr("NumWildcardProducers", INTEGER, lambda b, k: JInt(_wildcard_producers(b))),
    ),
)


def _dest_totals(b: Any, _key: Any = None) -> tuple[int, int, int, int]:
    """(messages, bytes) in every destination, then in the DMQ: one look at each."""
    count = size = dmq_count = dmq_size = 0
    for d in _destinations(b):
        count += d.msg_count
        size += d.msg_bytes
        if d.is_dmq:
            dmq_count += d.msg_count
            dmq_size += d.msg_bytes
    return count, size, dmq_count, dmq_size


def _total(name: str, at: int) -> Attr:
    return picked(name, LONG, _dest_totals, lambda t: JLong(t[at]))


_NUM_DESTINATIONS = Attr("NumDestinations", INTEGER, lambda b, k: JInt(len(_destinations(b))))
DESTINATION_MANAGER_CONFIG = MBeanKind(
    "DestinationManager",
    "Config",
    (
        Attr(
            "AutoCreateQueueMaxNumActiveConsumers",
            INTEGER,
            lambda b, k: JInt(b.config.get(props.AUTOCREATE_QUEUE_MAX_ACTIVE)),
        ),
        Attr(
            "AutoCreateQueueMaxNumBackupConsumers",
            INTEGER,
            lambda b, k: JInt(b.config.get(props.AUTOCREATE_QUEUE_MAX_BACKUP)),
        ),
        Attr("AutoCreateQueues", BOOLEAN, lambda b, k: b.config.get(props.AUTOCREATE_QUEUE)),
        Attr("AutoCreateTopics", BOOLEAN, lambda b, k: b.config.get(props.AUTOCREATE_TOPIC)),
        Attr("DMQTruncateBody", BOOLEAN, lambda b, k: b.config.get(props.DMQ_TRUNCATE_BODY)),
        Attr("LogDeadMsgs", BOOLEAN, lambda b, k: b.config.get(props.LOG_DEAD_MSGS)),
        Attr("MaxBytesPerMsg", LONG, lambda b, k: JLong(b.config.get(props.MESSAGE_MAX_SIZE))),
        Attr("MaxNumMsgs", LONG, lambda b, k: JLong(b.config.get(props.SYSTEM_MAX_COUNT))),
        Attr("MaxTotalMsgBytes", LONG, lambda b, k: JLong(b.config.get(props.SYSTEM_MAX_SIZE))),
        _NUM_DESTINATIONS,
    ),
    # The properties, and how many destinations there are.
    stamp=lambda b, k: (*_configured(b), len(_destinations(b))),
)
DESTINATION_MANAGER_MONITOR = MBeanKind(
    "DestinationManager",
    "Monitor",
    (
        _NUM_DESTINATIONS,
        _total("NumMsgs", 0),
        _total("NumMsgsInDMQ", 2),
        _total("TotalMsgBytes", 1),
        _total("TotalMsgBytesInDMQ", 3),
    ),
)


def _threads(b: Any, which: str) -> int:
    total = 0
    for s in _services(b):
        low, high = service_threads(b, s)
        total += low if which == "min" else high
    return total


# The sums of the traffic counters: MetricCounters' fields as imqcmd's "metrics svc".
_TRAFFIC = (
    ("MsgBytesIn", "messageBytesIn"),
    ("MsgBytesOut", "messageBytesOut"),
    ("NumMsgsIn", "messagesIn"),
    ("NumMsgsOut", "messagesOut"),
    ("NumPktsIn", "packetsIn"),
    ("NumPktsOut", "packetsOut"),
    ("PktBytesIn", "packetBytesIn"),
    ("PktBytesOut", "packetBytesOut"),
)


def _traffic(select: Callable[[Any, Any], list[Any] | None], inactive: int) -> tuple[Attr, ...]:
    """The traffic attributes over the services ``select(broker, key)`` gives (None: the
    service is not running: ``inactive``, as the stock broker's -1)."""

    def counters(b: Any, k: Any) -> dict[str, int] | None:
        chosen = select(b, k)
        return None if chosen is None else _counters(b, chosen)

    def pick(field_name: str) -> Callable[[dict[str, int] | None], object]:
        return lambda c: JLong(inactive if c is None else c[field_name])

    return tuple(picked(name, LONG, counters, pick(f)) for name, f in _TRAFFIC)


SERVICE_MANAGER_CONFIG = MBeanKind(
    "ServiceManager",
    "Config",
    (
        Attr("MaxThreads", INTEGER, lambda b, k: JInt(_threads(b, "max"))),
        Attr("MinThreads", INTEGER, lambda b, k: JInt(_threads(b, "min"))),
    ),
    # The threads configured for the services running.
    stamp=lambda b, k: (*_configured(b), tuple((s.name, s.type) for s in _services(b))),
)
SERVICE_MANAGER_MONITOR = MBeanKind(
    "ServiceManager",
    "Monitor",
    (
        *_traffic(lambda b, k: _services(b), -1),
        Attr("NumActiveThreads", INTEGER, lambda b, k: JInt(_counters(b)["threadsActive"])),
        Attr("NumServices", INTEGER, lambda b, k: JInt(len(SERVICE_NAMES))),
    ),
)


class TransactionTally:
    """Transactions committed and rolled back since the JMX connector started (a
    transaction observer of the router: told once per state change)."""

    def __init__(self) -> None:
        self.committed = 0
        self.rolled_back = 0

    def transaction_changed(self, txn: Any) -> None:
        if txn.state == TransactionState.COMMITTED:
            self.committed += 1
        elif txn.state == TransactionState.ROLLEDBACK:
            self.rolled_back += 1


def _tally(b: Any) -> TransactionTally | None:
    for listener in b.router.observers.transactions:
        if isinstance(listener, TransactionTally):
            return listener
    return None


def attach_tally(broker: Any) -> None:
    """Count transactions from now on (the JMX connector's start)."""
    if _tally(broker) is None:
        broker.router.observers.add_transaction_observer(TransactionTally())


def _committed(b: Any) -> JLong:
    t = _tally(b)
    return JLong(0 if t is None else t.committed)


def _rolled_back(b: Any) -> JLong:
    t = _tally(b)
    return JLong(0 if t is None else t.rolled_back)


_NUM_TRANSACTIONS = Attr("NumTransactions", INTEGER, lambda b, k: JInt(_transactions(b)))
TRANSACTION_MANAGER_CONFIG = MBeanKind("TransactionManager", "Config", (_NUM_TRANSACTIONS,))
TRANSACTION_MANAGER_MONITOR = MBeanKind(
    "TransactionManager",
    "Monitor",
    (
        _NUM_TRANSACTIONS,
        Attr("NumTransactionsCommitted", LONG, lambda b, k: _committed(b)),
        Attr("NumTransactionsRollback", LONG, lambda b, k: _rolled_back(b)),
    ),
)

# -- Log, JVM --------------------------------------------------------------------------

LOG_CONFIG = MBeanKind(
    "Log",
    "Config",
    (
        Attr("Level", STRING, lambda b, k: str(b.config.get(props.LOG_LEVEL)).upper()),
        Attr("LogDirectory", STRING, lambda b, k: b.config.get(props.LOG_FILE_DIRPATH)),
        Attr("LogFileName", STRING, lambda b, k: b.config.get(props.LOG_FILE_NAME)),
        Attr(
            "RolloverBytes",
            LONG,
            lambda b, k: JLong(
                b.config.get(props.LOG_ROLLOVER_SIZE)
                if b.config.configured(props.LOG_ROLLOVER_SIZE.name)
                or not b.config.configured(props.LOG_ROLLOVER_BYTES.name)
                else b.config.get(props.LOG_ROLLOVER_BYTES)
            ),
        ),
        Attr("RolloverSecs", LONG, lambda b, k: JLong(b.config.get(props.LOG_ROLLOVER_SECS))),
    ),
    stamp=_configured,
)
# The Log Monitor MBean has no attributes, only the log notifications.
LOG_MONITOR = MBeanKind("Log", "Monitor", ())


def _memory(b: Any) -> dict[str, int]:
    # broker_counters' figures, without the services' counters it sums besides.
    total, free = memory_figures(b)
    return {"total": total, "free": free}


# A Python process has no JVM heap: the figures are the broker's message memory budget
# and what of it message bodies leave free (what imqcmd's "metrics bkr" shows as memory).
JVM_MONITOR = MBeanKind(
    "JVM",
    "Monitor",
    (
        Attr("FreeMemory", LONG, lambda b, k: JLong(_memory(b)["free"])),
        Attr("InitMemory", LONG, lambda b, k: JLong(0)),
        Attr("MaxMemory", LONG, lambda b, k: JLong(b.memory.budget)),
        Attr("TotalMemory", LONG, lambda b, k: JLong(_memory(b)["total"])),
    ),
)

# -- Service ---------------------------------------------------------------------------

_PROTOCOL = {
    "jms": "tcp",
    "admin": "tcp",
    "ssljms": "tls",
    "ssladmin": "tls",
    "httpjms": "http",
    "httpsjms": "https",
    "wsjms": "ws",
    "wssjms": "wss",
}
# imq.<service>.max_threads / min_threads defaults of the stock broker.
_THREAD_DEFAULTS = {
    "jms": (10, 1000),
    "admin": (4, 10),
    "ssljms": (10, 500),
    "ssladmin": (4, 10),
    "httpjms": (10, 500),
    "httpsjms": (10, 500),
    "wsjms": (10, 1000),
    "wssjms": (10, 1000),
}
# The WebSocket services' default ports (OpenMQ's Grizzly listeners).
_WS_PORTS = {"wsjms": 7670, "wssjms": 7671}
SERVICE_RUNNING, SERVICE_PAUSED, SERVICE_UNKNOWN = 0, 1, -1
_SERVICE_LABELS = {SERVICE_RUNNING: "RUNNING", SERVICE_PAUSED: "PAUSED", SERVICE_UNKNOWN: "UNKNOWN"}


def _service(b: Any, name: str) -> Any | None:
    for s in _services(b):
        if s.name == name:
            return s
    return None


def _service_threads(b: Any, name: str) -> tuple[int, int]:
    low, high = _THREAD_DEFAULTS.get(name, (10, 1000))
    return _cfg_int(b, f"imq.{name}.min_threads", low), _cfg_int(b, f"imq.{name}.max_threads", high)


def _configured_port(b: Any, name: str) -> JInt | None:
    proto = _PROTOCOL.get(name, "tcp")
    if proto in ("http", "https"):
        return None  # the tunnel has no port of its own in the stock broker
    default = _WS_PORTS.get(name, 0)
    return JInt(_cfg_int(b, f"imq.{name}.{proto}.port", default))


def _service_opened(b: Any, name: str) -> int:
    s = _service(b, name)
    return 0 if s is None else s.connections_opened


def _service_rejected(b: Any, name: str) -> int:
    s = _service(b, name)
    return 0 if s is None else s.connections_rejected


def _service_state(b: Any, name: str) -> int:
    s = _service(b, name)
    if s is None or s.server is None:
        return SERVICE_UNKNOWN
    return SERVICE_PAUSED if s.paused else SERVICE_RUNNING


def _service_port(b: Any, name: str) -> JInt:
    s = _service(b, name)
    if s is not None and s.bound_port:
        return JInt(s.bound_port)
    configured = _configured_port(b, name)
    return JInt(-1) if configured is None else configured


def _service_count(b: Any, name: str, what: str) -> int:
    s = _service(b, name)
    if s is None:
        return 0
    if what == "connections":
        return len(s.connections)
    if what == "consumers":
        return sum(queries.consumer_count(c.all_sessions()) for c in s.connections)
    return sum(queries.producer_count(c.all_sessions()) for c in s.connections)


def _one_service(b: Any, name: str) -> list[Any] | None:
    s = _service(b, name)
    return None if s is None else [s]


SERVICE_CONFIG = MBeanKind(
    "Service",
    "Config",
    (
        Attr("MaxThreads", INTEGER, lambda b, k: JInt(_service_threads(b, k)[1])),
        Attr("MinThreads", INTEGER, lambda b, k: JInt(_service_threads(b, k)[0])),
        Attr("Name", STRING, lambda b, k: k),
        Attr("Port", INTEGER, lambda b, k: _configured_port(b, k)),
        # The stock WebSocket services run on Grizzly's pool and answer null.
        Attr(
            "ThreadPoolModel",
            STRING,
            lambda b, k: (
                None if k in _WS_PORTS else b.config.get(f"imq.{k}.threadpool_model", "dedicated")
            ),
        ),
    ),
    stamp=_configured,
)
SERVICE_MONITOR = MBeanKind(
    "Service",
    "Monitor",
    (
        *_traffic(_one_service, -1),
        Attr("Name", STRING, lambda b, k: k),
        Attr(
            "NumActiveThreads",
            INTEGER,
            lambda b, k: JInt(
                -1 if _service(b, k) is None else _counters(b, _one_service(b, k))["threadsActive"]
            ),
        ),
        Attr("NumConnections", INTEGER, lambda b, k: JInt(_service_count(b, k, "connections"))),
        Attr(
            "NumConnectionsOpened",
            LONG,
            lambda b, k: JLong(_service_opened(b, k)),
        ),
        Attr(
            "NumConnectionsRejected",
            LONG,
            lambda b, k: JLong(_service_rejected(b, k)),
        ),
        Attr("NumConsumers", INTEGER, lambda b, k: JInt(_service_count(b, k, "consumers"))),
        Attr("NumProducers", INTEGER, lambda b, k: JInt(_service_count(b, k, "producers"))),
        Attr("Port", INTEGER, lambda b, k: _service_port(b, k)),
        Attr("State", INTEGER, lambda b, k: JInt(_service_state(b, k))),
        Attr("StateLabel", STRING, lambda b, k: _SERVICE_LABELS[_service_state(b, k)]),
    ),
    # A service that is not running has no counters: -1s, 0s, UNKNOWN and the port
    # configured.  A running one is read at every call.
    stamp=lambda b, k: _configured(b) if _service(b, k) is None else None,
)

# -- Destination -----------------------------------------------------------------------

_DEST_STATE_LABELS = {0: "Running", 1: "Consumers Paused", 2: "Producers Paused", 3: "Paused"}
_LIMIT_BEHAVIORS = ("FLOW_CONTROL", "REMOVE_OLDEST", "REJECT_NEWEST", "REMOVE_LOW_PRIORITY")


# The views of the reading in progress (None: no reading), by kind and object: a
# destination's info and metrics (each walks the destination's waiting messages, so the
# attributes a getAttributes asks for share one walk instead of one each: a monitoring
# poll of a destination with a backlog cost seconds of the event loop otherwise), the
# services and their counters, the destinations listed, the producers per connection.
_reading: dict[tuple[str, int], Any] | None = None


@contextmanager
def one_reading() -> Iterator[None]:
    """Attributes read within share each destination's info and metrics (the engine
    reads a getAttributes' attributes inside one; single-threaded, like the engine)."""
    global _reading
    outer = _reading
    _reading = {} if outer is None else outer
    try:
        yield
    finally:
        _reading = outer


def _view(what: str, d: Any, make: Callable[[], Any]) -> Any:
    memo = _reading
    if memo is None:
        return make()
    key = (what, id(d))
    value = memo.get(key)
    if value is None:
        value = memo[key] = make()
    return value


def _held(b: Any) -> queries.DestCounts:
    # Every open transaction's sends looked at once per reading, not once per view.
    return _view("held", b.router, lambda: queries.held_in_transactions(b.router))


def _delayed(b: Any) -> queries.DestCounts:
    return _view("delayed", b.router, lambda: queries.delayed_by_destination(b.router))


def _info_view(b: Any, d: Any) -> dict[str, Any]:
    return destination_info_values(b.router, d, _delayed(b), _held(b))


def _held_view(b: Any, d: Any) -> dict[str, int]:
    # The few DestinationInfo fields the Monitor MBean reads, without the rest.
    return destination_held_values(b.router, d, _delayed(b), _held(b))


def _metrics_view(b: Any, d: Any) -> dict[str, int]:
    return destination_metric_values(b.router, d, _held(b))[0]


def _unlimited(value: Any) -> JLong:
    # OpenMQ's checkLongUnlimitedZero: 0 (unlimited in a DestinationInfo) reads -1.
    v = int(value)
    return JLong(-1 if v == 0 else v)


def _info_attr(name: str, jtype: str, convert: Callable[[dict[str, Any]], object]) -> Attr:
    return picked(name, jtype, _info_view, convert)


def _held_attr(name: str, jtype: str, key: str) -> Attr:
    box = JInt if jtype == INTEGER else JLong
    return picked(name, jtype, _held_view, lambda h: box(int(h[key])))


def _metric_attr(name: str, jtype: str, key: str) -> Attr:
    box = JInt if jtype == INTEGER else JLong
    return picked(name, jtype, _metrics_view, lambda m: box(int(m.get(key, 0))))


def _dest_type(d: Any) -> str:
    return "q" if d.is_queue else "t"


DESTINATION_CONFIG = MBeanKind(
    "Destination",
    "Config",
    (
        _info_attr("ConsumerFlowLimit", LONG, lambda i: JLong(int(i["maxPrefetch"]))),
        _info_attr(
            "LimitBehavior", STRING, lambda i: _LIMIT_BEHAVIORS[int(i["destLimitBehavior"])]
        ),
        _info_attr("LocalDeliveryPreferred", BOOLEAN, lambda i: i["destCDP"] == 1),
        _info_attr("LocalOnly", BOOLEAN, lambda i: i["destScope"] == 0),
        _info_attr("MaxBytesPerMsg", LONG, lambda i: _unlimited(i["maxMessageSize"])),
        _info_attr("MaxNumActiveConsumers", INTEGER, lambda i: JInt(int(i["maxActiveConsumers"]))),
        _info_attr(
            "MaxNumBackupConsumers", INTEGER, lambda i: JInt(int(i["maxFailoverConsumers"]))
        ),
        _info_attr("MaxNumMsgs", LONG, lambda i: _unlimited(i["maxMessages"])),
        _info_attr("MaxNumProducers", INTEGER, lambda i: JInt(int(i["maxProducers"]))),
        _info_attr("MaxTotalMsgBytes", LONG, lambda i: _unlimited(i["maxMessageBytes"])),
        Attr("Name", STRING, lambda b, d: d.name),
        _info_attr(
            "ReloadXMLSchemaOnFailure", BOOLEAN, lambda i: bool(i["reloadXMLSchemaOnFailure"])
        ),
        Attr("Type", STRING, lambda b, d: _dest_type(d)),
        _info_attr("UseDMQ", BOOLEAN, lambda i: bool(i["useDMQ"])),
        _info_attr(
            "ValidateXMLSchemaEnabled", BOOLEAN, lambda i: bool(i["validateXMLSchemaEnabled"])
        ),
        _info_attr("XMLSchemaURIList", STRING, lambda i: i.get("XMLSchemaUriList")),
    ),
    # Its values follow from the destination's attributes (and what it was made as).
    stamp=lambda b, d: (d, d.is_dmq, tuple(d.attributes.items())),
)


def _created_by_admin(d: Any) -> bool:
    return not (d.auto or d.is_dmq or d.is_temporary)


def _temp_connection(d: Any) -> str | None:
    return None if d.temporary_owner is None else str(d.temporary_owner)


def _dest_state(d: Any) -> int:
    return int(d.state)


DESTINATION_MONITOR = MBeanKind(
    "Destination",
    "Monitor",
    (
        _metric_attr("AvgNumActiveConsumers", INTEGER, "avgNumActiveConsumers"),
        _metric_attr("AvgNumBackupConsumers", INTEGER, "avgNumBackupConsumers"),
        _metric_attr("AvgNumConsumers", INTEGER, "avgNumConsumers"),
        _metric_attr("AvgNumMsgs", LONG, "avgNumMsgs"),
        _metric_attr("AvgTotalMsgBytes", LONG, "avgTotalMsgBytes"),
        Attr("ConnectionID", STRING, lambda b, d: _temp_connection(d)),
        Attr("CreatedByAdmin", BOOLEAN, lambda b, d: _created_by_admin(d)),
        _metric_attr("DiskReserved", LONG, "diskReserved"),
        _metric_attr("DiskUsed", LONG, "diskUsed"),
        _metric_attr("DiskUtilizationRatio", INTEGER, "diskUtilizationRatio"),
        _metric_attr("MsgBytesIn", LONG, "msgBytesIn"),
        _metric_attr("MsgBytesOut", LONG, "msgBytesOut"),
        Attr("Name", STRING, lambda b, d: d.name),
        # The stock broker answers "" (it does not look the next message up here).
        Attr("NextMessageID", STRING, lambda b, d: ""),
        _metric_attr("NumActiveConsumers", INTEGER, "numActiveConsumers"),
        _metric_attr("NumBackupConsumers", INTEGER, "numBackupConsumers"),
        _metric_attr("NumConsumers", INTEGER, "numConsumers"),
        _metric_attr("NumMsgs", LONG, "numMsgs"),
        _held_attr("NumMsgsHeldInTransaction", LONG, "nTxnMessages"),
        _metric_attr("NumMsgsIn", LONG, "numMsgsIn"),
        _held_attr("NumMsgsInDelayDelivery", LONG, "nInDelayMessages"),
        _metric_attr("NumMsgsOut", LONG, "numMsgsOut"),
        _held_attr("NumMsgsPendingAcks", LONG, "nUnackMessages"),
        # Remote messages exist in a cluster only; ours holds none of another broker's.
        Attr("NumMsgsRemote", LONG, lambda b, d: JLong(0)),
        _held_attr("NumProducers", INTEGER, "nProducers"),
        Attr("NumWildcardConsumers", INTEGER, lambda b, d: JInt(0)),
        Attr("NumWildcardProducers", INTEGER, lambda b, d: JInt(0)),
        Attr("NumWildcards", INTEGER, lambda b, d: JInt(0)),
        _metric_attr("PeakMsgBytes", LONG, "peakMsgBytes"),
        _metric_attr("PeakNumActiveConsumers", INTEGER, "peakNumActiveConsumers"),
        _metric_attr("PeakNumBackupConsumers", INTEGER, "peakNumBackupConsumers"),
        _metric_attr("PeakNumConsumers", INTEGER, "peakNumConsumers"),
        _metric_attr("PeakNumMsgs", LONG, "peakNumMsgs"),
        _metric_attr("PeakTotalMsgBytes", LONG, "peakTotalMsgBytes"),
        Attr("State", INTEGER, lambda b, d: JInt(_dest_state(d))),
        Attr("StateLabel", STRING, lambda b, d: _DEST_STATE_LABELS.get(_dest_state(d), "unknown")),
        Attr("Temporary", BOOLEAN, lambda b, d: bool(d.is_temporary)),
        _metric_attr("TotalMsgBytes", LONG, "totalMsgBytes"),
        _held_attr("TotalMsgBytesHeldInTransaction", LONG, "nTxnMessageBytes"),
        Attr("TotalMsgBytesRemote", LONG, lambda b, d: JLong(0)),
        Attr("Type", STRING, lambda b, d: _dest_type(d)),
    ),
)

# -- Connection ------------------------------------------------------------------------


def _conn(b: Any, cid: int) -> Any:
    return b.connections[cid]


def _peer(b: Any, cid: int) -> tuple[str, int]:
    host, _, port = str(_conn(b, cid).peer).rpartition(":")
    return host, int(port) if port.isdigit() else 0


def _conn_producers(b: Any, cid: int) -> int:
    return queries.producer_count(_conn(b, cid).all_sessions())


def _conn_consumers(b: Any, cid: int) -> int:
    return queries.consumer_count(_conn(b, cid).all_sessions())


_CONNECTION_ID = Attr("ConnectionID", STRING, lambda b, k: str(k))
CONNECTION_CONFIG = MBeanKind("Connection", "Config", (_CONNECTION_ID,))
CONNECTION_MONITOR = MBeanKind(
    "Connection",
    "Monitor",
    (
        Attr("ClientID", STRING, lambda b, k: _conn(b, k).client_id),
        Attr("ClientPlatform", STRING, lambda b, k: _conn(b, k).user_agent),
        _CONNECTION_ID,
        Attr("CreationTime", LONG, lambda b, k: JLong(int(_conn(b, k).connected_at * 1000))),
        Attr("Host", STRING, lambda b, k: _peer(b, k)[0]),
        Attr("NumConsumers", INTEGER, lambda b, k: JInt(_conn_consumers(b, k))),
        Attr("NumProducers", INTEGER, lambda b, k: JInt(_conn_producers(b, k))),
        Attr("Port", INTEGER, lambda b, k: JInt(_peer(b, k)[1])),
        Attr("ServiceName", STRING, lambda b, k: _conn(b, k).service.name),
        Attr("User", STRING, lambda b, k: _conn(b, k).user),
    ),
)

# -- the catalogue ---------------------------------------------------------------------

# The MBeans of which the broker has exactly one, in the stock broker's order of names.
SINGLETONS: tuple[MBeanKind, ...] = (
    BROKER_CONFIG,
    BROKER_MONITOR,
    CLUSTER_CONFIG,
    CLUSTER_MONITOR,
    CONNECTION_MANAGER_CONFIG,
    CONNECTION_MANAGER_MONITOR,
    CONSUMER_MANAGER_CONFIG,
    CONSUMER_MANAGER_MONITOR,
    DESTINATION_MANAGER_CONFIG,
    DESTINATION_MANAGER_MONITOR,
    JVM_MONITOR,
    LOG_CONFIG,
    LOG_MONITOR,
    PRODUCER_MANAGER_CONFIG,
    PRODUCER_MANAGER_MONITOR,
    SERVICE_MANAGER_CONFIG,
    SERVICE_MANAGER_MONITOR,
    TRANSACTION_MANAGER_CONFIG,
    TRANSACTION_MANAGER_MONITOR,
)
PER_SERVICE = (SERVICE_CONFIG, SERVICE_MONITOR)
PER_DESTINATION = (DESTINATION_CONFIG, DESTINATION_MONITOR)
PER_CONNECTION = (CONNECTION_CONFIG, CONNECTION_MONITOR)
KINDS: dict[tuple[str, str], MBeanKind] = {
    (k.type, k.subtype): k for k in (*SINGLETONS, *PER_SERVICE, *PER_DESTINATION, *PER_CONNECTION)
}
# Each kind's readers by attribute name (what getAttributes looks up, once per call).
_READERS: dict[MBeanKind, dict[str, Reader]] = {
    k: {a.name: a.read for a in k.attrs} for k in KINDS.values()
}
# Each kind's plans by the attribute names a getAttributes asks for (a monitoring
# agent asks for the same names every poll): the names served and how to read each.
_Step = tuple[View | None, Callable[..., object]]
_PLANS: dict[tuple[MBeanKind, tuple[str, ...]], tuple[tuple[str, ...], tuple[_Step, ...]]] = {}
_PLANS_LIMIT = 1024
_UNSET = object()


def _step(a: Attr) -> _Step:
    """How a getAttributes reads ``a``: (its view, the pick) or (None, its reader)."""
    if a.view is not None and a.pick is not None:
        return a.view, a.pick
    return None, a.read


def _plan(kind: MBeanKind, names: object) -> tuple[tuple[str, ...], tuple[_Step, ...]]:
    if type(names) is not list:
        raise ProtocolError("expected a String[]")
    try:
        plan_key = (kind, tuple(names))
        plan = _PLANS.get(plan_key)
    except TypeError:  # an unhashable element: not a String
        raise ProtocolError("expected a String[]") from None
    if plan is not None:
        return plan
    by_name = {a.name: a for a in kind.attrs}
    served = [by_name[n] for n in jmxser.read_strings(names) if n in by_name]
    plan = (
        tuple(a.name for a in served),
        tuple(_step(a) for a in served),
    )
    if len(_PLANS) >= _PLANS_LIMIT:
        _PLANS.clear()
    _PLANS[plan_key] = plan
    return plan


def settled(b: Any, mbean: MBean) -> object | None:
    """What the values of ``mbean`` follow from, when its kind says (its ``stamp``): an
    answer kept with it stays right while it compares equal (None: read the values)."""
    stamp = mbean.kind.stamp
    return None if stamp is None else stamp(b, mbean.key)


def read_attributes(b: Any, mbean: MBean, names: object) -> tuple[tuple[str, ...], list[object]]:
    """getAttributes: the attributes of ``names`` (a decoded String[]) that ``mbean``
    has, in that order, and their values; each view several of them pick from is made
    once, and the readers share the broker-wide views (:func:`one_reading`)."""
    global _reading
    attrs, steps = _plan(mbean.kind, names)
    key = mbean.key
    views: dict[View, Any] = {}
    values: list[object] = []
    append = values.append
    # one_reading(), without a generator's cost on every call of a poll.
    outer = _reading
    if outer is None:
        _reading = {}
    try:
        for view, read in steps:
            if view is None:
                append(read(b, key))
                continue
            seen = views.get(view, _UNSET)
            if seen is _UNSET:
                seen = views[view] = view(b, key)
            append(read(seen))
    finally:
        _reading = outer
    return attrs, values


# What a name says before the broker's state is looked at (None: none of ours), by
# name (a poll names the same MBeans every time): its kind, then None and the MBean of
# a singleton or service, "c" and the MBean of a connection (there while its id is), or
# the desttype and the destination name (looked up at each call).
_Named = tuple[MBeanKind, str | None, Any]
_NAMED: dict[ObjectName, _Named | None] = {}
_SINGLETON_KINDS = frozenset(SINGLETONS)
_SERVICE_KINDS = frozenset(PER_SERVICE)
_CONNECTION_KINDS = frozenset(PER_CONNECTION)


def quote(value: str) -> str:
    """javax.management.ObjectName.quote."""
    out = ['"']
    for ch in value:
        if ch == "\n":
            out.append("\\n")
        elif ch in '\\"*?':
            out.append("\\" + ch)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def unquote(value: str) -> str | None:
    """javax.management.ObjectName.unquote (None: not a quoted value)."""
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        return None
    out: list[str] = []
    i = 1
    while i < len(value) - 1:
        ch = value[i]
        if ch == "\\":
            i += 1
            nxt = value[i] if i < len(value) - 1 else ""
            out.append("\n" if nxt == "n" else nxt)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _named(name: ObjectName) -> _Named | None:
    """What ``name`` says of the MBean it names, if it can be one of ours."""
    if name.is_pattern or name.domain != DOMAIN:
        return None
    keys = dict(name.keys)
    kind = KINDS.get((keys.get("type", ""), keys.get("subtype", "")))
    if kind is None:
        return None
    extra = len(keys) - 2  # the keys besides type and subtype (both there: KINDS)
    if kind in _SINGLETON_KINDS:
        return None if extra else (kind, None, MBean(name, kind, None))
    if kind in _SERVICE_KINDS:
        svc = keys.get("name")
        if extra != 1 or svc not in SERVICE_NAMES:
            return None
        return (kind, None, MBean(name, kind, svc))
    if kind in _CONNECTION_KINDS:
        cid = keys.get("id", "")
        if extra != 1 or not cid.isdigit():
            return None
        return (kind, "c", MBean(name, kind, int(cid)))
    desttype = keys.get("desttype")
    quoted = keys.get("name")
    if extra != 2 or quoted is None or desttype not in ("q", "t"):
        return None
    dest_name = unquote(quoted)
    return None if dest_name is None else (kind, desttype, dest_name)


def _name(kind: MBeanKind, **keys: str) -> ObjectName:
    all_keys = {"type": kind.type, "subtype": kind.subtype, **keys}
    return ObjectName(DOMAIN, tuple(sorted(all_keys.items())))


def _dest_keys(d: Any) -> dict[str, str]:
    return {"desttype": _dest_type(d), "name": quote(d.name)}


class Registry:
    """The broker's MBeans, enumerated from its state at each call (destinations and
    connections come and go), and the queries the RMI connection answers."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        # The names each destination and connection has, made once for it (a poll lists
        # them every time): by destination object (its name and type never change) and
        # by connection id.
        self._dest_names: dict[Any, tuple[ObjectName, ...]] = {}
        self._conn_names: dict[int, tuple[ObjectName, ...]] = {}

    def mbeans(self) -> Iterator[tuple[ObjectName, MBeanKind, Any]]:
        b = self.broker
        yield from _FIXED
        dest_names = self._dest_names
        dests = _destinations(b)
        if len(dest_names) > 2 * len(dests) + 64:  # those of destinations gone
            dest_names.clear()
        for d in dests:
            names = dest_names.get(d)
            if names is None:
                keys = _dest_keys(d)
                names = dest_names[d] = tuple(_name(k, **keys) for k in PER_DESTINATION)
            for name, kind in zip(names, PER_DESTINATION, strict=True):
                yield name, kind, d
        conn_names = self._conn_names
        if len(conn_names) > 2 * len(b.connections) + 64:
            conn_names.clear()
        for cid in list(b.connections):
            names = conn_names.get(cid)
            if names is None:
                names = conn_names[cid] = tuple(_name(k, id=str(cid)) for k in PER_CONNECTION)
            for name, kind in zip(names, PER_CONNECTION, strict=True):
                yield name, kind, cid

    def __len__(self) -> int:
        return sum(1 for _ in self.mbeans())

    def get(self, name: ObjectName) -> MBean | None:
        try:
            found = _NAMED[name]
        except KeyError:  # a name not asked for before
            found = _named(name)
            if len(_NAMED) >= _PLANS_LIMIT:
                _NAMED.clear()
            _NAMED[name] = found
        if found is None:
            return None
        kind, what, arg = found
        if what is None:  # a singleton or a service: always there
            return arg
        b = self.broker
        if what == "c":
            return arg if arg.key in b.connections else None
        d = (b.router.queues if what == "q" else b.router.topics).get(arg)
        if d is None or _dest_type(d) != what or not is_listed_by_admin(d):
            return None
        return MBean(name, kind, d)

    def query(self, pattern: ObjectName | None) -> list[ObjectName]:
        names = [n for n, _k, _key in self.mbeans()]
        if pattern is None or pattern == _EVERY:
            return names
        return [n for n in names if pattern.matches(n)]


_MISSING = object()
# The broker-wide and per-service MBeans: always there, under the same names.
_FIXED: tuple[tuple[ObjectName, MBeanKind, Any], ...] = (
    *((_name(kind), kind, None) for kind in SINGLETONS),
    *((_name(kind, name=svc), kind, svc) for svc in SERVICE_NAMES for kind in PER_SERVICE),
)
# DOMAIN:*, what a monitoring agent lists: every MBean of ours.
_EVERY = ObjectName(DOMAIN, (), True)
