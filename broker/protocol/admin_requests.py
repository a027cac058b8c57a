"""The admin requests that change the broker, as imqcmd sends them: one builder per
command, shared by the admin client (broker/admintools/client.py, behind imqcmd, the portal
and REST) and the JMX operations (broker/engine/jmx_operations.py), so the two cannot
drift apart.

Each builder returns an :class:`AdminRequest`: the ``JMQMessageType``, the message's
properties and its ObjectMessage body (None: no body).  Sans-IO: nothing is sent here.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.protocol import dest_attributes as dattrs
from broker.protocol.admin_info import (
    SERVICE_MAX_THREADS,
    SERVICE_MIN_THREADS,
    SERVICE_PORT,
    encode_admin_object,
    service_info,
)
from broker.protocol.admin_types import (
    CHANGE_CLUSTER_MASTER_BROKER,
    COMMIT_TRANSACTION,
    COMPACT_DESTINATION,
    CREATE_DESTINATION,
    DESTROY_CONNECTION,
    DESTROY_DESTINATION,
    DESTROY_DURABLE,
    PAUSE,
    PURGE_DESTINATION,
    PURGE_DURABLE,
    QUIESCE_BROKER,
    RELOAD_CLUSTER,
    RESET_BROKER,
    RESUME,
    ROLLBACK_TRANSACTION,
    SHUTDOWN,
    TAKEOVER_BROKER,
    UNQUIESCE_BROKER,
    UPDATE_BROKER_PROPS,
    UPDATE_DESTINATION,
    UPDATE_SERVICE,
)
from broker.protocol.javaser import encode_properties_object
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_BROKER_ID,
    JMQ_CLIENT_ID,
    JMQ_CLUSTER_NEW_MASTER_BROKER,
    JMQ_CLUSTER_OLD_MASTER_BROKER,
    JMQ_CONNECTION_ID,
    JMQ_DEST_STATE,
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_DURABLE_NAME,
    JMQ_METRICS,
    JMQ_NO_FAILOVER,
    JMQ_PAUSE_TARGET,
    JMQ_RESET_TYPE,
    JMQ_RESTART,
    JMQ_SERVICE_NAME,
    JMQ_TIME,
    JMQ_TRANSACTION_ID,
)
from broker.protocol.types import DEST_QUEUE, DestState

# DestState values a destination pause takes (imqcmd pause dst -pst).
PAUSE_ALL = DestState.PAUSED.value
PAUSE_CONSUMERS = DestState.CONSUMERS_PAUSED.value
PAUSE_PRODUCERS = DestState.PRODUCERS_PAUSED.value


class AdminRequest(NamedTuple):
    """One admin request: ``JMQMessageType``, properties, ObjectMessage body."""

    type: int
    props: dict[str, object] | None = None
    body: bytes | None = None


def destination_props(name: str | None, dest_type: int) -> dict[str, object]:
    """The properties naming one destination."""
    return {JMQ_DESTINATION: name, JMQ_DEST_TYPE: JInt(dest_type)}


def property_text(value: object) -> str:
    """A broker property's value as UPDATE_BROKER_PROPS carries it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))  # a JInt/JLong's own str() is its repr
    return str(value)


# -- the broker ---------------------------------------------------------------------------


def pause_broker() -> AdminRequest:
    return AdminRequest(PAUSE)


def resume_broker() -> AdminRequest:
    return AdminRequest(RESUME)


def shutdown(*, no_failover: bool = False, time: int | None = None) -> AdminRequest:
    """``no_failover``: in an HA cluster no other broker takes this one's data over;
    ``time``: seconds to wait before shutting down."""
    props: dict[str, object] = {}
    if no_failover:
        props[JMQ_NO_FAILOVER] = True
    if time:
        props[JMQ_TIME] = JInt(time)
    return AdminRequest(SHUTDOWN, props or None)


def restart() -> AdminRequest:
    return AdminRequest(SHUTDOWN, {JMQ_RESTART: True})


def quiesce() -> AdminRequest:
    return AdminRequest(QUIESCE_BROKER)


def unquiesce() -> AdminRequest:
    return AdminRequest(UNQUIESCE_BROKER)


def reset_metrics() -> AdminRequest:
    return AdminRequest(RESET_BROKER, {JMQ_RESET_TYPE: JMQ_METRICS})


def takeover(broker_id: str) -> AdminRequest:
    return AdminRequest(TAKEOVER_BROKER, {JMQ_BROKER_ID: broker_id})


def update_broker_props(values: dict[str, object]) -> AdminRequest:
    text = {str(k): property_text(v) for k, v in values.items()}
    return AdminRequest(UPDATE_BROKER_PROPS, None, encode_properties_object(text))


# -- the cluster --------------------------------------------------------------------------


def reload_cluster() -> AdminRequest:
    return AdminRequest(RELOAD_CLUSTER)


def change_master_broker(new_master: str, old_master: str | None = None) -> AdminRequest:
    """CHANGE_CLUSTER_MASTER_BROKER (``imqcmd changemaster cls``): ``host:port`` of the
    new master broker's port mapper; ``old_master``, when given, must be the current
    one.  Stock imqcmd also sends its -o properties as the body; no broker reads it."""
    props: dict[str, object] = {JMQ_CLUSTER_NEW_MASTER_BROKER: new_master}
    if old_master:
        props[JMQ_CLUSTER_OLD_MASTER_BROKER] = old_master
    return AdminRequest(CHANGE_CLUSTER_MASTER_BROKER, props)


# -- services and connections -------------------------------------------------------------


def pause_service(name: str) -> AdminRequest:
    return AdminRequest(PAUSE, {JMQ_PAUSE_TARGET: JMQ_SERVICE_NAME, JMQ_SERVICE_NAME: name})


def resume_service(name: str) -> AdminRequest:
    return AdminRequest(RESUME, {JMQ_PAUSE_TARGET: JMQ_SERVICE_NAME, JMQ_SERVICE_NAME: name})


def update_service(
    name: str,
    port: int | None = None,
    min_threads: int | None = None,
    max_threads: int | None = None,
) -> AdminRequest:
    """UPDATE_SERVICE of what is given; ValueError when nothing is."""
    values: dict[str, object] = {"name": name}
    mask = 0
    if port is not None:
        values["port"] = int(port)
        mask |= SERVICE_PORT
    if min_threads is not None:
        values["minThreads"] = int(min_threads)
        mask |= SERVICE_MIN_THREADS
    if max_threads is not None:
        values["maxThreads"] = int(max_threads)
        mask |= SERVICE_MAX_THREADS
    if not mask:
        raise ValueError("update_service: nothing to update (port, min_threads, max_threads)")
    info = service_info(updateMask=mask, **values)
    return AdminRequest(UPDATE_SERVICE, None, encode_admin_object(info))


def destroy_connection(cxn_id: int) -> AdminRequest:
    return AdminRequest(DESTROY_CONNECTION, {JMQ_CONNECTION_ID: JLong(cxn_id)})


# -- destinations -------------------------------------------------------------------------


def create_destination(
    name: str, dest_type: int, attrs: dict[str, object] | None = None
) -> AdminRequest:
    """``attrs`` by their imqcmd names (dest_attributes); ValueError for a bad one."""
    info, props = dattrs.destination_request(name, dest_type, attrs or {})
    return AdminRequest(CREATE_DESTINATION, props, info)


def update_destination(name: str, dest_type: int, attrs: dict[str, object]) -> AdminRequest:
    """ValueError for a bad attribute or none."""
    if not attrs:
        raise ValueError("update_destination: no attribute to change")
    info, props = dattrs.destination_request(name, dest_type, attrs)
    return AdminRequest(UPDATE_DESTINATION, props, info)


def destroy_destination(name: str, dest_type: int = DEST_QUEUE) -> AdminRequest:
    return AdminRequest(DESTROY_DESTINATION, destination_props(name, dest_type))


def purge_destination(name: str, dest_type: int = DEST_QUEUE) -> AdminRequest:
    return AdminRequest(PURGE_DESTINATION, destination_props(name, dest_type))


def compact(name: str | None = None, dest_type: int = DEST_QUEUE) -> AdminRequest:
    """COMPACT_DESTINATION of one destination, or of the whole store without a name."""
    return AdminRequest(COMPACT_DESTINATION, destination_props(name, dest_type) if name else None)


def pause_destination(
    name: str, dest_type: int = DEST_QUEUE, what: int = PAUSE_ALL
) -> AdminRequest:
    props = {JMQ_PAUSE_TARGET: JMQ_DESTINATION, **destination_props(name, dest_type)}
    props[JMQ_DEST_STATE] = JInt(what)
    return AdminRequest(PAUSE, props)


def resume_destination(name: str, dest_type: int = DEST_QUEUE) -> AdminRequest:
    return AdminRequest(
        RESUME, {JMQ_PAUSE_TARGET: JMQ_DESTINATION, **destination_props(name, dest_type)}
    )


# -- durable subscriptions and transactions -----------------------------------------------


def _durable_props(name: str, client_id: str | None) -> dict[str, object]:
    props: dict[str, object] = {JMQ_DURABLE_NAME: name}
    if client_id:
        props[JMQ_CLIENT_ID] = client_id
    return props


def purge_durable(name: str, client_id: str | None) -> AdminRequest:
    return AdminRequest(PURGE_DURABLE, _durable_props(name, client_id))


def destroy_durable(name: str, client_id: str | None) -> AdminRequest:
    return AdminRequest(DESTROY_DURABLE, _durable_props(name, client_id))


def commit_transaction(txn_id: int) -> AdminRequest:
    return AdminRequest(COMMIT_TRANSACTION, {JMQ_TRANSACTION_ID: JLong(txn_id)})


def rollback_transaction(txn_id: int) -> AdminRequest:
    return AdminRequest(ROLLBACK_TRANSACTION, {JMQ_TRANSACTION_ID: JLong(txn_id)})
