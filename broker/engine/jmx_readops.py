"""The stock MBeans' operations that only read the broker's state: the ID lists, the
info composites (jmx_info.py), the ObjectName lists and the cluster's broker infos.

Each is a function of (broker, the MBean's key, the arguments) called in place like an
attribute getter, by kind (``Type/Subtype``) and operation name; the engine checks the
signature against the stock MBeanInfo first.  The values come from the same state
imqcmd's ``list``/``query`` read.  Like OpenMQ's MBeans, an ID or info list with
nothing in it is null, not an empty array.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from broker import props
from broker.core import queries
from broker.core.session import Consumer
from broker.engine import jmx_info, jmx_mbeans
from broker.protocol import jmxser
from broker.protocol.javaser import JavaArray, JavaObject
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.types import TransactionState

DOMAIN = jmx_mbeans.DOMAIN
STRING = jmx_mbeans.STRING
INTEGER = jmx_mbeans.INTEGER
LONG = jmx_mbeans.LONG

ReadOp = Callable[[Any, Any, list[Any]], object]


def _ids(values: list[str]) -> JavaArray | None:
    return jmxser.string_array(values) if values else None


def _composites(values: list[JavaObject]) -> JavaArray | None:
    return jmxser.composite_array(values) if values else None


def _names(names: list[str]) -> JavaArray:
    return jmxser.object_name_array(names)


def _is_wildcard(name: str) -> bool:
    return "*" in name or ">" in name


def _consumers(b: Any) -> Iterator[Any]:
    for conn in list(b.connections.values()):
        for session in conn.all_sessions():
            yield from session.consumers.values()


def _producers(b: Any) -> list[Any]:
    return list(b.router.producers.values())


def _connection_name(cid: object, subtype: str = "Monitor") -> str:
    return f"{DOMAIN}:type=Connection,subtype={subtype},id={cid}"


def _service_name(name: str, subtype: str = "Monitor") -> str:
    return f"{DOMAIN}:type=Service,subtype={subtype},name={name}"


# -- consumers and producers ------------------------------------------------------------


def _wildcards(items: Iterator[Any] | list[Any]) -> list[str]:
    return sorted({i.destination.name for i in items if _is_wildcard(i.destination.name)})


def _num_wildcard(items: Iterator[Any] | list[Any], wildcard: object) -> JInt:
    names = [i.destination.name for i in items if _is_wildcard(i.destination.name)]
    if wildcard is None:
        return JInt(len(names))
    return JInt(sum(1 for n in names if n == wildcard))


CONSUMER_MANAGER: dict[str, ReadOp] = {
    "getConsumerIDs": lambda b, k, a: _ids(jmx_info.consumer_ids(b)),
    "getConsumerInfo": lambda b, k, a: _composites(jmx_info.consumer_infos(b)),
    "getConsumerInfoByID": lambda b, k, a: jmx_info.consumer_info(b, str(a[0])),
    "getConsumerWildcards": lambda b, k, a: _ids(_wildcards(_consumers(b))),
    "getNumWildcardConsumers": lambda b, k, a: _num_wildcard(_consumers(b), a[0]),
}
PRODUCER_MANAGER: dict[str, ReadOp] = {
    "getProducerIDs": lambda b, k, a: _ids(jmx_info.producer_ids(b)),
    "getProducerInfo": lambda b, k, a: _composites(jmx_info.producer_infos(b)),
    "getProducerInfoByID": lambda b, k, a: jmx_info.producer_info(b, str(a[0])),
    "getProducerWildcards": lambda b, k, a: _ids(_wildcards(_producers(b))),
    "getNumWildcardProducers": lambda b, k, a: _num_wildcard(_producers(b), a[0]),
}

# -- connections ----------------------------------------------------------------------


def _connections(b: Any, subtype: str) -> JavaArray:
    return _names([_connection_name(cid, subtype) for cid in list(b.connections)])


def _conn_consumer_ids(b: Any, cid: int) -> list[str]:
    conn = b.connections.get(cid)
    if conn is None:
        return []
    return [str(c.id) for s in conn.all_sessions() for c in s.consumers.values()]


def _conn_producer_ids(b: Any, cid: int) -> list[str]:
    return [str(p.id) for p in _producers(b) if p.session.link.id == cid]


def _conn_service(b: Any, cid: int) -> JavaObject | None:
    conn = b.connections.get(cid)
    if conn is None or conn.service is None:
        return None
    return jmxser.object_name(_service_name(conn.service.name))


def _temp_destinations(b: Any, cid: int) -> JavaArray | None:
    names = [
        _destination_name(d, "Monitor")
        for d in queries.destinations(b.router)
        if d.temporary_owner == cid
    ]
    return _names(names) if names else None


def _destination_name(d: Any, subtype: str) -> str:
    kind = "q" if d.is_queue else "t"
    return (
        f"{DOMAIN}:type=Destination,subtype={subtype},desttype={kind},"
        f"name={jmx_mbeans.quote(d.name)}"
    )


CONNECTION_MONITOR: dict[str, ReadOp] = {
    "getConsumerIDs": lambda b, k, a: _ids(_conn_consumer_ids(b, k)),
    "getProducerIDs": lambda b, k, a: _ids(_conn_producer_ids(b, k)),
    "getService": lambda b, k, a: _conn_service(b, k),
    "getTemporaryDestinations": lambda b, k, a: _temp_destinations(b, k),
}

# -- destinations ---------------------------------------------------------------------


def _dest_consumers(b: Any, d: Any) -> list[Any]:
    return [c for c in _consumers(b) if c.destination is d]


def _active_ids(b: Any, d: Any) -> list[str]:
    if d.is_queue:
        return [str(c.id) for c in d.dq.consumers if isinstance(c, Consumer)]
    return [str(c.id) for c in _dest_consumers(b, d)]


def _backup_ids(d: Any) -> list[str]:
    if not d.is_queue:
        return []
    return [str(c.id) for c in d.backups if isinstance(c, Consumer)]


def _dest_connection(d: Any) -> JavaObject | None:
    if d.temporary_owner is None:
        return None
    return jmxser.object_name(_connection_name(d.temporary_owner))


DESTINATION_MONITOR: dict[str, ReadOp] = {
    "getActiveConsumerIDs": lambda b, k, a: _ids(_active_ids(b, k)),
    "getBackupConsumerIDs": lambda b, k, a: _ids(_backup_ids(k)),
    "getConnection": lambda b, k, a: _dest_connection(k),
    "getConsumerIDs": lambda b, k, a: _ids([str(c.id) for c in _dest_consumers(b, k)]),
    "getProducerIDs": lambda b, k, a: _ids(
        [str(p.id) for p in _producers(b) if p.destination is k]
    ),
    # A wildcard consumer or producer is on a destination of its own here (its name
    # with the wildcard), so none is counted on a concrete destination: as the
    # NumWildcard* attributes.
    "getWildcards": lambda b, k, a: None,
    "getConsumerWildcards": lambda b, k, a: None,
    "getProducerWildcards": lambda b, k, a: None,
    "getNumWildcardConsumers": lambda b, k, a: JInt(0),
    "getNumWildcardProducers": lambda b, k, a: JInt(0),
}

# -- services -------------------------------------------------------------------------


def _svc_connection_ids(b: Any, svc: str) -> list[int]:
    return [
        cid
        for cid, c in list(b.connections.items())
        if c.service is not None and c.service.name == svc
    ]


SERVICE_MONITOR: dict[str, ReadOp] = {
    "getConnections": lambda b, k, a: _names(
        [_connection_name(cid) for cid in _svc_connection_ids(b, k)]
    ),
    "getConsumerIDs": lambda b, k, a: _ids(
        [i for cid in _svc_connection_ids(b, k) for i in _conn_consumer_ids(b, cid)]
    ),
    "getProducerIDs": lambda b, k, a: _ids(
        [i for cid in _svc_connection_ids(b, k) for i in _conn_producer_ids(b, cid)]
    ),
}

# -- transactions ---------------------------------------------------------------------


def _transaction(txn: Any) -> JavaObject:
    link = txn.link
    local = jmx_info.client_link(link)
    state = int(txn.state)
    items: list[jmxser.Item] = [
        ("ClientID", "ClientID", STRING, txn.client_id or None),
        (
            "ConnectionString",
            "ConnectionString",
            STRING,
            (f"{local.user or ''}@{local.peer}" if local is not None else "@") if link else None,
        ),
        ("CreationTime", "CreationTime", LONG, JLong(int(txn.created))),
        ("NumAcks", "NumAcks", LONG, JLong(int(txn.held_ack_count))),
        ("NumMsgs", "NumMsgs", LONG, JLong(len(txn.sends))),
        ("State", "State", INTEGER, JInt(state)),
        ("StateLabel", "StateLabel", STRING, TransactionState(state).name),
        ("TransactionID", "TransactionID", STRING, str(txn.id)),
        ("User", "User", STRING, txn.user or None),
        ("XID", "XID", STRING, None if txn.xid is None else str(txn.xid)),
    ]
    return jmxser.composite("TransactionMonitorInfo", "TransactionMonitorInfo", items)


def _transaction_by_id(b: Any, tid: object) -> JavaObject | None:
    text = str(tid)
    if not text.isdigit():
        return None
    txn = queries.transaction_by_id(b.router, int(text))
    return None if txn is None else _transaction(txn)


def _transaction_ids(b: Any) -> JavaArray | None:
    return _ids([str(t.id) for t in queries.transactions(b.router)])


TRANSACTION_MANAGER: dict[str, ReadOp] = {"getTransactionIDs": lambda b, k, a: _transaction_ids(b)}
TRANSACTION_MANAGER_MONITOR: dict[str, ReadOp] = {
    **TRANSACTION_MANAGER,
    "getTransactionInfo": lambda b, k, a: _composites(
        [_transaction(t) for t in queries.transactions(b.router)]
    ),
    "getTransactionInfoByID": lambda b, k, a: _transaction_by_id(b, a[0]),
}

# -- cluster --------------------------------------------------------------------------


def _cluster_brokers(b: Any) -> list[tuple[str, str | None, bool]]:
    """(address, broker ID, running) of every broker of the cluster, this one first."""
    brokerid = b.config.get(props.BROKER_ID) or None
    if b.cluster is None:
        return [(jmx_mbeans.local_address(b), brokerid, True)]
    return [
        (r["address"], brokerid if r["self"] else None, r["state"] == "RUNNING")
        for r in b.cluster.brokers()
    ]


# BrokerState: OPERATING, BROKER_DOWN (OpenMQ's BrokerState constants).
_STATES = {True: (0, "OPERATING"), False: (7, "BROKER_DOWN")}


def _broker_info(entry: tuple[str, str | None, bool], monitor: bool) -> JavaObject:
    address, brokerid, running = entry
    items: list[jmxser.Item] = [
        ("Address", "Address", STRING, address),
        ("ID", "ID", STRING, brokerid),
    ]
    if monitor:
        state, label = _STATES[running]
        items += [
            ("NumMsgs", "NumMsgs", LONG, None),
            ("State", "State", INTEGER, JInt(state)),
            ("StateLabel", "StateLabel", STRING, label),
            ("StatusTimestamp", "StatusTimestamp", LONG, None),
            ("TakeoverBrokerID", "TakeoverBrokerID", STRING, None),
        ]
    return jmxser.composite("BrokerClusterInfo", "BrokerClusterInfo", items)


def _cluster_ops(monitor: bool) -> dict[str, ReadOp]:
    def by(field: int, value: object, b: Any) -> JavaObject | None:
        for entry in _cluster_brokers(b):
            if entry[field] == value:
                return _broker_info(entry, monitor)
        return None

    return {
        "getBrokerAddresses": lambda b, k, a: _ids([e[0] for e in _cluster_brokers(b)]),
        "getBrokerIDs": lambda b, k, a: _ids([e[1] for e in _cluster_brokers(b) if e[1]]),
        "getBrokerInfo": lambda b, k, a: _composites(
            [_broker_info(e, monitor) for e in _cluster_brokers(b)]
        ),
        "getBrokerInfoByAddress": lambda b, k, a: by(0, a[0], b),
        "getBrokerInfoByID": lambda b, k, a: by(1, a[0], b),
    }


# -- by kind --------------------------------------------------------------------------

READ_OPERATIONS: dict[str, dict[str, ReadOp]] = {
    "ConsumerManager/Config": {"getConsumerIDs": CONSUMER_MANAGER["getConsumerIDs"]},
    "ConsumerManager/Monitor": CONSUMER_MANAGER,
    "ProducerManager/Config": {"getProducerIDs": PRODUCER_MANAGER["getProducerIDs"]},
    "ProducerManager/Monitor": PRODUCER_MANAGER,
    "ConnectionManager/Config": {"getConnections": lambda b, k, a: _connections(b, "Config")},
    "ConnectionManager/Monitor": {"getConnections": lambda b, k, a: _connections(b, "Monitor")},
    "Connection/Monitor": CONNECTION_MONITOR,
    "Destination/Monitor": DESTINATION_MONITOR,
    "Service/Monitor": SERVICE_MONITOR,
    "TransactionManager/Config": TRANSACTION_MANAGER,
    "TransactionManager/Monitor": TRANSACTION_MANAGER_MONITOR,
    "Cluster/Config": _cluster_ops(False),
    "Cluster/Monitor": _cluster_ops(True),
}
