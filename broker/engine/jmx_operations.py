"""What invoke and setAttribute do, by kind of MBean (``Type/Subtype``): each operation
and writable attribute is the admin request imqcmd sends for the same change
(built by broker/protocol/admin_requests.py, as broker/admintools/client.py's AdminClient
builds it), run by the admin service's own commands
through an :class:`AdminPort` that the driver supplies.

The operations' names, parameter types and the writable attributes are the stock
broker's (jmx_info.json); a kind or operation missing here is answered with
ReflectionException(NoSuchMethodException), as an MBean without that method would.
Functions are coroutines: the engine hands them to the driver and answers the call
with what they return (None for void) or raise (:class:`OperationError`).

Operations that only read the broker's state (the managers' ``getConsumerInfo`` & co.)
may instead sit in the catalogue, ``jmx_mbeans.MBeanKind.operations``: name ->
function of (broker, the MBean's key, arguments), called in place like a getter; an
operation named here wins.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from broker import props as imq
from broker.engine import jmx_mbeans
from broker.engine.jmx_names import ObjectName
from broker.protocol import admin_requests as req
from broker.protocol import jmxser
from broker.protocol.admin_requests import AdminRequest
from broker.protocol.jtypes import JInt
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, DestState, Status

DOMAIN = jmx_mbeans.DOMAIN


class OperationError(Exception):
    """A refused operation or attribute change.  ``kind`` is the Java exception the
    client gets: ``MBeanException`` (the broker refused: wraps a java.lang.Exception
    with ``message``), ``InvalidAttributeValueException``, ``IllegalArgumentException``
    (wrapped in RuntimeOperationsException) or ``InstanceNotFoundException``."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        # The admin reply's status when the broker refused (a JMQStatus).
        self.status = status


class AdminPort(Protocol):
    """What operations need from the running broker (broker/server/jmx_admin.py)."""

    user: str

    async def command(
        self, request: int, props: dict[str, object] | None = None, body: bytes = b""
    ) -> tuple[dict[str, object], bytes]:
        """Run one admin-service command as imqcmd's request would; raises
        OperationError("MBeanException", reason) when the broker refuses."""
        ...

    def destinations(self) -> list[tuple[str, bool]]:
        """(name, is_topic) of every destination an administrator sees."""
        ...

    def services(self) -> list[str]: ...

    def property(self, name: str) -> str | None: ...

    def durable_of(self, consumer_id: str) -> tuple[str | None, str] | None:
        """(client ID, durable name) of the consumer ``consumer_id`` when it is a
        durable subscriber; None when it is not or there is no such consumer."""
        ...


Run = Callable[[AdminPort, ObjectName, list[Any]], Awaitable[object]]
Setter = Callable[[AdminPort, ObjectName, object], Awaitable[None]]


async def send(port: AdminPort, request: AdminRequest) -> tuple[dict[str, object], bytes]:
    """Run ``request`` (built by broker/protocol/admin_requests.py, as the admin client
    builds it) through the admin port."""
    return await port.command(request.type, request.props, request.body or b"")


# -- helpers ---------------------------------------------------------------------------


def unquote(value: str) -> str:
    """An ObjectName value as written (a quoted one without its quotes and escapes)."""
    plain = jmx_mbeans.unquote(value)
    return value if plain is None else plain


def destination_name(name: str, is_topic: bool, subtype: str = "Config") -> str:
    kind = "t" if is_topic else "q"
    # In OpenMQ's key order (MQObjectName), which a notification's source keeps.
    return (
        f"{DOMAIN}:type=Destination,subtype={subtype},desttype={kind},name={jmx_mbeans.quote(name)}"
    )


def _dest_type(text: object) -> int:
    if text == "q":
        return DEST_QUEUE
    if text == "t":
        return DEST_TOPIC
    raise OperationError(
        "IllegalArgumentException", f"destination type must be q or t, not {text!r}"
    )


def _target_dest(target: ObjectName) -> tuple[str, int]:
    keys = dict(target.keys)
    return unquote(keys.get("name", "")), _dest_type(keys.get("desttype"))


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise OperationError("IllegalArgumentException", f"{what} must be a non-empty String")
    return value


# -- destination attributes: JMX name -> imqcmd name (broker/protocol/dest_attributes) --

DEST_ATTRIBUTES = {
    "ConsumerFlowLimit": "consumerFlowLimit",
    "LimitBehavior": "limitBehavior",
    "LocalDeliveryPreferred": "localDeliveryPreferred",
    "MaxBytesPerMsg": "maxBytesPerMsg",
    "MaxNumActiveConsumers": "maxNumActiveConsumers",
    "MaxNumBackupConsumers": "maxNumBackupConsumers",
    "MaxNumMsgs": "maxNumMsgs",
    "MaxNumProducers": "maxNumProducers",
    "MaxTotalMsgBytes": "maxTotalMsgBytes",
    "UseDMQ": "useDMQ",
    "ValidateXMLSchemaEnabled": "validateXMLSchemaEnabled",
    "XMLSchemaURIList": "XMLSchemaURIList",
    "ReloadXMLSchemaOnFailure": "reloadXMLSchemaOnFailure",
    # Settable at creation only (DestinationAttributes.LOCAL_ONLY, MAX_NUM_SHARED...).
    "LocalOnly": "isLocalOnly",
    "MaxNumSharedConsumers": "maxNumSharedConsumers",
    "SharedFlowLimit": "sharedConsumerFlowLimit",
}


def _dest_attrs(values: list[tuple[str, object]]) -> dict[str, object]:
    out = {}
    for name, value in values:
        imqcmd = DEST_ATTRIBUTES.get(name)
        if imqcmd is None:
            raise OperationError("InvalidAttributeValueException", f"unknown attribute {name}")
        out[imqcmd] = value
    return out


async def _update_destination(port: AdminPort, target: ObjectName, attrs: dict) -> None:
    name, dest_type = _target_dest(target)
    try:
        request = req.update_destination(name, dest_type, attrs)
    except ValueError as exc:
        raise OperationError("InvalidAttributeValueException", str(exc)) from None
    await send(port, request)


def _dest_setter(attr: str) -> Setter:
    async def run(port: AdminPort, target: ObjectName, value: object) -> None:
        await _update_destination(port, target, {DEST_ATTRIBUTES[attr]: value})

    return run


# -- broker properties behind Config attributes -----------------------------------------

BROKER_PROPERTIES = {
    "Broker/Config": {"Port": imq.PORTMAPPER_PORT.name},
    "DestinationManager/Config": {
        "AutoCreateQueues": imq.AUTOCREATE_QUEUE.name,
        "AutoCreateTopics": imq.AUTOCREATE_TOPIC.name,
        "AutoCreateQueueMaxNumActiveConsumers": imq.AUTOCREATE_QUEUE_MAX_ACTIVE.name,
        "AutoCreateQueueMaxNumBackupConsumers": imq.AUTOCREATE_QUEUE_MAX_BACKUP.name,
        "DMQTruncateBody": imq.DMQ_TRUNCATE_BODY.name,
        "LogDeadMsgs": imq.LOG_DEAD_MSGS.name,
        "MaxBytesPerMsg": imq.MESSAGE_MAX_SIZE.name,
        "MaxNumMsgs": imq.SYSTEM_MAX_COUNT.name,
        "MaxTotalMsgBytes": imq.SYSTEM_MAX_SIZE.name,
    },
    "Log/Config": {
        "Level": imq.LOG_LEVEL.name,
        "RolloverBytes": imq.LOG_ROLLOVER_BYTES.name,
        "RolloverSecs": imq.LOG_ROLLOVER_SECS.name,
    },
}


def _property_setter(prop: str) -> Setter:
    async def run(port: AdminPort, target: ObjectName, value: object) -> None:
        await send(port, req.update_broker_props({prop: value}))

    return run


# Service attribute -> update_service's argument.
_SERVICE_FIELDS = {"Port": "port", "MinThreads": "min_threads", "MaxThreads": "max_threads"}


def _service_setter(attr: str) -> Setter:
    field = _SERVICE_FIELDS[attr]

    async def run(port: AdminPort, target: ObjectName, value: object) -> None:
        name = unquote(dict(target.keys).get("name", ""))
        await send(port, req.update_service(name, **{field: int(value)}))  # type: ignore[call-overload]

    return run


SETTERS: dict[str, dict[str, Setter]] = {
    **{
        kind: {attr: _property_setter(prop) for attr, prop in attrs.items()}
        for kind, attrs in BROKER_PROPERTIES.items()
    },
    "Destination/Config": {
        a: _dest_setter(a)
        for a in DEST_ATTRIBUTES
        if a not in ("LocalOnly", "MaxNumSharedConsumers", "SharedFlowLimit")
    },
    "Service/Config": {a: _service_setter(a) for a in _SERVICE_FIELDS},
}


# -- operations ------------------------------------------------------------------------


def _command(build: Callable[[], AdminRequest]) -> Run:
    async def run(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
        await send(port, build())
        return None

    return run


async def _get_property(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    return port.property(_text(args[0], "propertyName"))


async def _shutdown(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    no_failover = bool(args and args[0])
    time = int(args[1]) if len(args) > 1 and args[1] else None
    await send(port, req.shutdown(no_failover=no_failover, time=time))
    return None


async def _create(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    dest_type = _dest_type(args[0])
    name = _text(args[1], "destinationName")
    attrs = _dest_attrs(args[2]) if len(args) > 2 and args[2] is not None else {}
    try:
        request = req.create_destination(name, dest_type, attrs)
    except ValueError as exc:
        raise OperationError("MBeanException", str(exc)) from None
    await send(port, request)
    return None


async def _destroy(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    dest_type = _dest_type(args[0])
    name = _text(args[1], "destinationName")
    await send(port, req.destroy_destination(name, dest_type))
    return None


async def _get_destinations(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    subtype = dict(target.keys).get("subtype", "Config")
    return ("ObjectName[]", [destination_name(n, t, subtype) for n, t in port.destinations()])


async def _get_services(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    subtype = dict(target.keys).get("subtype", "Config")
    names = [f"{DOMAIN}:type=Service,subtype={subtype},name={s}" for s in jmx_mbeans.SERVICE_NAMES]
    return ("ObjectName[]", names)


_PAUSE_TYPES = {
    "ALL": DestState.PAUSED.value,
    "CONSUMERS": DestState.CONSUMERS_PAUSED.value,
    "PRODUCERS": DestState.PRODUCERS_PAUSED.value,
}


def _pause_type(args: list[Any]) -> int:
    text = args[0] if args else "ALL"
    what = _PAUSE_TYPES.get(str(text or "ALL").upper())
    if what is None:
        raise OperationError(
            "IllegalArgumentException", f"pause type must be ALL, CONSUMERS or PRODUCERS: {text}"
        )
    return what


async def _dest_pause(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    name, dest_type = _target_dest(target)
    await send(port, req.pause_destination(name, dest_type, _pause_type(args)))
    return None


async def _dest_resume(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    name, dest_type = _target_dest(target)
    await send(port, req.resume_destination(name, dest_type))
    return None


async def _dest_purge(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    name, dest_type = _target_dest(target)
    await send(port, req.purge_destination(name, dest_type))
    return None


async def _dest_compact(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    name, dest_type = _target_dest(target)
    await send(port, req.compact(name, dest_type))
    return None


async def _all_dests_pause(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    # DestinationManager pause: every destination (imqcmd pause dst without -n).
    what = _pause_type(args)
    for name, is_topic in port.destinations():
        await send(port, req.pause_destination(name, DEST_TOPIC if is_topic else DEST_QUEUE, what))
    return None


async def _all_dests_resume(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    for name, is_topic in port.destinations():
        await send(port, req.resume_destination(name, DEST_TOPIC if is_topic else DEST_QUEUE))
    return None


def _number(value: object, what: str) -> int:
    text = _text(value, what)
    if not text.isdigit():
        raise OperationError("MBeanException", f"{what} {text!r} is not a number")
    return int(text)


def _id_command(build: Callable[[int], AdminRequest], what: str) -> Run:
    """A command on one object named by the operation's String argument (a number)."""

    async def run(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
        await send(port, build(_number(args[0], what)))
        return None

    return run


async def _takeover(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    await send(port, req.takeover(_text(args[0], "brokerID")))
    return None


async def _change_master(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    # Cluster changeMasterBroker(oldMasterBroker, newMasterBroker): as OpenMQ's, the
    # broker's refusal is not an exception but a ChangeMasterBrokerResult saying it.
    # Both are needed: the stock MBean fails (MBeanException) on a null one too.
    old, new = (args + [None, None])[:2]
    if not (isinstance(old, str) and old and isinstance(new, str) and new):
        raise OperationError(
            "MBeanException", "changeMasterBroker needs oldMasterBroker and newMasterBroker"
        )
    try:
        await send(port, req.change_master_broker(new, old))
        success, status, detail = True, 0, ""
    except OperationError as exc:
        if exc.status is None:
            raise
        success, status = False, exc.status
        detail = f"{exc.message}[{_status_text(exc.status)}]"
    return jmxser.composite(
        "ChangeMasterBrokerResult",
        "ChangeMasterBrokerResult",
        [
            ("Success", "Success", jmx_mbeans.BOOLEAN, success),
            ("StatusCode", "StatusCode", jmx_mbeans.INTEGER, JInt(status)),
            ("DetailMessage", "DetailMessage", jmx_mbeans.STRING, detail),
        ],
    )


def _status_text(status: int) -> str:
    """OpenMQ's Status.getString: ``NOT_ALLOWED(405)``."""
    try:
        return f"{Status(status).name}({status})"
    except ValueError:
        return f"UNKNOWN({status})"


async def _purge_consumer(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
    # ConsumerManager purge(consumerID): the messages of a durable subscriber's
    # subscription, as imqcmd purge dur.
    consumer_id = _text(args[0], "consumerID")
    durable = port.durable_of(consumer_id)
    if durable is None:
        raise OperationError(
            "MBeanException", f"consumer {consumer_id} is not a durable subscriber here"
        )
    client_id, name = durable
    await send(port, req.purge_durable(name, client_id))
    return None


def _service_command(build: Callable[[str], AdminRequest]) -> Run:
    async def run(port: AdminPort, target: ObjectName, args: list[Any]) -> object:
        await send(port, build(unquote(dict(target.keys).get("name", ""))))
        return None

    return run


# Kind -> operation -> run; overloads share one function (args as the client sent them).
OPERATIONS: dict[str, dict[str, Run]] = {
    "Broker/Config": {
        "getProperty": _get_property,
        "quiesce": _command(req.quiesce),
        "unquiesce": _command(req.unquiesce),
        "resetMetrics": _command(req.reset_metrics),
        "restart": _command(req.restart),
        "shutdown": _shutdown,
        "takeover": _takeover,
    },
    "Cluster/Config": {
        "reload": _command(req.reload_cluster),
        "changeMasterBroker": _change_master,
    },
    "ConnectionManager/Config": {"destroy": _id_command(req.destroy_connection, "connectionID")},
    "ConsumerManager/Config": {"purge": _purge_consumer},
    "TransactionManager/Config": {
        "commit": _id_command(req.commit_transaction, "transactionID"),
        "rollback": _id_command(req.rollback_transaction, "transactionID"),
    },
    "DestinationManager/Config": {
        "create": _create,
        "destroy": _destroy,
        "getDestinations": _get_destinations,
        "compact": _command(req.compact),
        "pause": _all_dests_pause,
        "resume": _all_dests_resume,
    },
    "DestinationManager/Monitor": {"getDestinations": _get_destinations},
    "Destination/Config": {
        "pause": _dest_pause,
        "resume": _dest_resume,
        "purge": _dest_purge,
        "compact": _dest_compact,
    },
    "ServiceManager/Config": {
        "getServices": _get_services,
        "pause": _command(req.pause_broker),
        "resume": _command(req.resume_broker),
    },
    "ServiceManager/Monitor": {"getServices": _get_services},
    "Service/Config": {
        "pause": _service_command(req.pause_service),
        "resume": _service_command(req.resume_service),
    },
}
