"""The broker side of the admin protocol: requests to queue ``__JMQAdmin``.

The protocol: docs/developers/protocol.md, "The admin protocol".

An admin tool (imqcmd) sends OBJECT_MESSAGEs to ``__JMQAdmin`` over an ADMIN service;
``JMQMessageType`` selects the command.  Such messages are never stored: the
:class:`AdminHandler` answers each with an OBJECT_MESSAGE (type ``n + 1``, a
``JMQStatus``, sometimes a Java-serialised body) published to the request's JMSReplyTo
temporary queue, so the tool's consumer receives it like any other delivery.

A command is a function of (connection, request properties) -- plus the request body
for the CREATE/UPDATE ones -- that returns (reply properties, reply body), or a
coroutine giving them when the work has to wait (the store, a new listening socket, a
thread).  A refusal is raised as :class:`AdminError` or ``RouterError`` (status, reason)
and becomes the reply's JMQStatus and JMQErrorString; each is logged once.

This module is long (about 1,500 lines) because it is one dispatcher with some thirty
commands that share its request parsing and reply encoding, in OpenMQ's command order;
the commands that bring Java classes of their own live beside it (:mod:`.metrics`,
:mod:`.expiry`).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import itertools
import logging
import weakref
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker import props as imq
from broker.config import BrokerConfig, ConfigError
from broker.core import queries
from broker.core.message import Message
from broker.core.metrics import consumer_counts
from broker.core.router import RouterError, now_ms
from broker.protocol import dest_attributes as dattrs
from broker.protocol.admin_info import (
    DEST_NAME,
    DEST_TYPE,
    SERVICE_MAX_THREADS,
    SERVICE_MIN_THREADS,
    SERVICE_PORT,
    HashMap,
    Hashtable,
    Shared,
    connection_info,
    consumer_info,
    destination_info,
    durable_info,
    encode_admin_vector,
    encode_infos,
    service_info,
)
from broker.protocol.admin_types import (  # noqa: F401 - re-exported for the handlers
    ADMIN_QUEUE,
    COMMAND_NAMES,
    COMMIT_TRANSACTION,
    COMPACT_DESTINATION,
    CREATE_DESTINATION,
    DEBUG,
    DELETE_MESSAGE,
    DESTROY_CONNECTION,
    DESTROY_DESTINATION,
    DESTROY_DURABLE,
    GET_BROKER_PROPS,
    GET_CONNECTIONS,
    GET_CONSUMERS,
    GET_DESTINATIONS,
    GET_DURABLES,
    GET_MESSAGES,
    GET_METRICS,
    GET_SERVICES,
    GET_TRANSACTIONS,
    HELLO,
    PAUSE,
    PURGE_DESTINATION,
    PURGE_DURABLE,
    QUIESCE_BROKER,
    RESET_BROKER,
    RESUME,
    ROLLBACK_TRANSACTION,
    SHUTDOWN,
    UNQUIESCE_BROKER,
    UPDATE_BROKER_PROPS,
    UPDATE_DESTINATION,
    UPDATE_SERVICE,
)
from broker.protocol.destname import admin_name_problem
from broker.protocol.javaser import (
    JavaSerializationError,
    decode_map_body,
    decode_object,
    decode_properties_object,
    encode_hashtable,
    encode_properties_object,
    encode_vector,
)
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import (
    VH_CORRELATIONID,
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_REPLYTO,
    VH_TYPE,
    Packet,
    build_packet,
)
from broker.protocol.sysmsgid import ip_field
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_Q,
    FLAG_Z,
    DestState,
    DestType,
    GoodbyeReason,
    PacketType,
    Status,
    TransactionState,
)

from . import cluster as admin_cluster
from . import expiry as admin_expiry
from . import ha as admin_ha
from . import metrics as admin_metrics

try:
    PRODUCT_VERSION = importlib.metadata.version("openmq-py")
except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
    PRODUCT_VERSION = "0+source"
PRODUCT_NAME = "openmq-py"
# The OpenMQ release whose wire and admin protocol we follow (the vectors' imqcmd 6.9.0).
OPENMQ_VERSION = "6.9.0"

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine

log = logging.getLogger("broker.admin")

TEMP_QUEUE_CLASS = "com.sun.messaging.jmq.jmsclient.TemporaryQueueImpl"


# com.sun.messaging.jmq.util.ServiceState
SERVICE_RUNNING = 3
SERVICE_PAUSED = 4
SERVICE_STOPPED = 6

SHUTDOWN_DELAY = 0.2  # seconds between the SHUTDOWN reply and the stop

# GetTransactionsHandler's transaction types.
TXN_LOCAL = 0

# (props, body) of a reply; the handler adds JMQMessageType and JMQStatus.
Result = tuple[dict[str, object], bytes]

# Broker properties UPDATE_BROKER_PROPS may change at run time, with their value kind
# (imqcmd update bkr's list, plus the other auto-creation defaults and housekeeping
# settings the broker reads live).
RUNTIME_PROPERTIES: dict[str, str] = {
    imq.AUTOCREATE_QUEUE.name: "bool",
    imq.AUTOCREATE_TOPIC.name: "bool",
    imq.AUTOCREATE_REAPTIME.name: "int",
    imq.AUTOCREATE_QUEUE_MAX_ACTIVE.name: "count",
    imq.AUTOCREATE_QUEUE_MAX_BACKUP.name: "count",
    imq.AUTOCREATE_QUEUE_FLOW_LIMIT.name: "count",
    imq.AUTOCREATE_TOPIC_FLOW_LIMIT.name: "count",
    imq.AUTOCREATE_TOPIC_MAX_SHARED.name: "count",
    imq.AUTOCREATE_TOPIC_SHARED_FLOW_LIMIT.name: "count",
    imq.AUTOCREATE_DEST_ATTRIBUTES["maxNumMsgs"].name: "count",
    imq.AUTOCREATE_DEST_ATTRIBUTES["maxTotalMsgBytes"].name: "size",
    imq.AUTOCREATE_DEST_ATTRIBUTES["maxBytesPerMsg"].name: "size",
    imq.AUTOCREATE_DEST_ATTRIBUTES["maxNumProducers"].name: "count",
    imq.AUTOCREATE_DEST_ATTRIBUTES["maxDeliveryCount"].name: "count",
    imq.AUTOCREATE_DEST_ATTRIBUTES["limitBehavior"].name: "behavior",
    imq.AUTOCREATE_USE_DMQ.name: "bool",
    imq.AUTOCREATE_DEST_ATTRIBUTES["isLocalOnly"].name: "bool",
    imq.QUEUE_DELIVERY_POLICY.name: "policy",
    imq.SYSTEM_MAX_COUNT.name: "count",
    imq.SYSTEM_MAX_SIZE.name: "size",
    imq.MESSAGE_MAX_SIZE.name: "size",
    imq.EXPIRATION_INTERVAL.name: "positive",
    imq.DMQ_TRUNCATE_BODY.name: "bool",
    imq.LOG_DEAD_MSGS.name: "bool",
    imq.TRANSACTION_AUTOROLLBACK.name: "bool",
    imq.LOG_LEVEL.name: "level",
    imq.LOG_ROLLOVER_SECS.name: "int",
    imq.LOG_ROLLOVER_BYTES.name: "size",
    imq.LOG_ROLLOVER_SIZE.name: "size",
    imq.PORTMAPPER_PORT.name: "port",
}
# Names newer imqcmd releases send (java.util.logging's) for ours.
PROPERTY_ALIASES = {
    ".level": imq.LOG_LEVEL.name,
    "java.util.logging.FileHandler.limit": imq.LOG_ROLLOVER_BYTES.name,
}

_DEST_FLAVORS = int(DestType.FLAVOR_SINGLE | DestType.FLAVOR_RROBIN | DestType.FLAVOR_FAILOVER)
# DestinationInfo.type is the full type less these (GetDestinationsHandler): TEMP, DMQ and
# the queue/topic bits stay, so imqcmd can hide temporaries and skip the DMQ.
_DEST_PRIVATE_BITS = int(DestType.INTERNAL | DestType.AUTO | DestType.ADMIN)


def broker_identity(config: BrokerConfig) -> dict[str, str]:
    """What GetBrokerPropsHandler adds to the configuration, as OpenMQ has it for a
    stand-alone (not embedded, not HA) broker: the version properties, the broker ID if
    one is configured, the cluster lists and the java.util.logging names imqcmd reads
    for the log level and rollover size.  The version is the OpenMQ release whose
    protocol we speak, so OpenMQ tools treat us as that release; our own name and
    version are in the product-name and build fields."""
    major, minor, _micro = OPENMQ_VERSION.split(".")
    values = {
        imq.PRODUCT_VERSION: OPENMQ_VERSION,
        imq.PRODUCT_MAJOR: major,
        imq.PRODUCT_MINOR: minor,
        imq.PRODUCT_NAME: PRODUCT_NAME,
        imq.PRODUCT_NAME_SHORT: PRODUCT_NAME,
        imq.BUILD_NUMBER: PRODUCT_VERSION,
        imq.BUILD_MILESTONE: "FCS",
        imq.EMBEDDED: "false",
        imq.CLUSTER_BROKERLIST.name: "",
        imq.CLUSTER_BROKERLIST_ACTIVE: "",
        # The level and rollover size the broker runs with (broker/logsetup.py reads
        # imq.log.file.rolloversize, then the older rolloverbytes; -1: no size limit).
        ".level": str(config.get(imq.LOG_LEVEL)).strip().upper(),
        "java.util.logging.FileHandler.limit": str(_rollover_bytes(config)),
    }
    # Globals.getBrokerID(): imq.brokerid, else the JDBC store's broker ID; none by default.
    brokerid = config.get(imq.BROKER_ID) or config.get(imq.JDBC_BROKER_ID)
    if brokerid:
        values[imq.BROKER_ID.name] = str(brokerid)
    if not config.get(imq.AUTOCREATE_USE_DMQ.name):
        values[imq.AUTOCREATE_USE_DMQ.name] = "true"
    return values


def _rollover_bytes(config: BrokerConfig) -> int:
    size = config.get(imq.LOG_ROLLOVER_SIZE)
    if size <= 0:
        size = config.get(imq.LOG_ROLLOVER_BYTES)
    return size if size > 0 else -1


class AdminError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _dest_type(props: dict) -> int:
    value = props.get("JMQDestType")
    return int(value) if isinstance(value, int) else DEST_QUEUE  # type: ignore[arg-type]


def _dest_name(props: dict) -> str:
    name = props.get("JMQDestination")
    if not isinstance(name, str) or not name:
        raise AdminError(Status.BAD_REQUEST, "JMQDestination is missing")
    return name


def _flag(value: object, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return default
    return str(value).strip().lower() == "true"


def _openmq4(conn: ConnectionEngine) -> bool:
    """Is the admin client an OpenMQ 4.x one (HELLO's JMQVersion "4.x")?  Some of its
    classes compute other serialVersionUIDs."""
    major = conn.client_version.split(".", 1)[0].strip()
    return major.isdigit() and int(major) < 5


def _long_prop(props: dict, name: str, required: bool = False) -> int | None:
    value = props.get(name)
    if value is None:
        if required:
            raise AdminError(Status.BAD_REQUEST, f"{name} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError(Status.BAD_REQUEST, f"{name} must be a number, not {value!r}")
    return int(value)


def _read_info(body: bytes, cls: str) -> dict[str, Any]:
    """The fields of the ``*Info`` object a CREATE/UPDATE request carries."""
    if not body:
        raise AdminError(Status.BAD_REQUEST, f"the request has no {cls} body")
    try:
        info = decode_object(body, generic=True)
    except JavaSerializationError as exc:
        raise AdminError(Status.BAD_REQUEST, f"unreadable {cls} body: {exc}") from None
    if (
        not isinstance(info, dict)
        or info.get("__class__") != f"com.sun.messaging.jmq.util.admin.{cls}"
    ):
        got = info.get("__class__") if isinstance(info, dict) else type(info).__name__
        raise AdminError(Status.BAD_REQUEST, f"the request body is a {got}, not a {cls}")
    return info


def _destination_info(dest, delayed: list[int], held: list[int]) -> Any:
    """A ``DestinationInfo`` for GET_DESTINATIONS (sizes in bytes, -1 = unlimited).

    ``held``: [count, bytes] of the messages sent to it in open transactions, which
    OpenMQ counts in the destination already (nMessages, nTxnMessages and UnAck: imqcmd
    shows Count = nMessages - nTxnMessages), and ``delayed`` those in delivery delay."""
    pending = queries.waiting_count(dest)
    _all, active, backups = consumer_counts(dest)
    if dest.is_queue:
        cdp = (
            dattrs.CDP_LOCAL_PREFERRED
            if _flag(dest.attributes.get("localDeliveryPreferred"), False)
            else dattrs.CDP_DISTRIBUTED
        )
    else:
        cdp = dattrs.CDP_NA
    uris = dest.attributes.get("XMLSchemaURIList")
    full = dest.dest_type | (int(DestType.AUTO) if dest.auto else 0)
    return destination_info(
        nMessages=dest.msg_count + held[0],
        nMessageBytes=dest.msg_bytes + held[1],
        nTxnMessages=held[0],
        nTxnMessageBytes=held[1],
        nConsumers=active + backups,
        nProducers=len(dest.producers),
        naConsumers=active,
        nfConsumers=backups,
        autocreated=bool(dest.auto or dest.is_dmq or dest.is_temporary),
        destState=int(dest.state),
        name=dest.name,
        type=full & ~_DEST_PRIVATE_BITS,
        fulltype=full,
        maxMessages=dest.limit("maxNumMsgs"),
        maxMessageBytes=dest.limit("maxTotalMsgBytes"),
        maxMessageSize=dest.limit("maxBytesPerMsg"),
        destScope=0 if _flag(dest.attributes.get("isLocalOnly"), False) else 1,
        destLimitBehavior=int(dest.limit_behavior),
        maxPrefetch=dest.limit("consumerFlowLimit"),
        destCDP=cdp,
        maxActiveConsumers=dest.limit("maxNumActiveConsumers") if dest.is_queue else -1,
        maxFailoverConsumers=dest.limit("maxNumBackupConsumers", 0) if dest.is_queue else 0,
        maxProducers=dest.limit("maxNumProducers"),
        maxNumSharedConsumers=dest.limit("maxNumSharedConsumers"),
        sharedConsumerFlowLimit=dest.limit("sharedConsumerFlowLimit", 5),
        useDMQ=False if dest.is_dmq else _flag(dest.attributes.get("useDMQ"), True),
        nUnackMessages=max(0, dest.msg_count - pending - delayed[0]) + held[0],
        nInDelayMessages=delayed[0],
        nInDelayMessageBytes=delayed[1],
        validateXMLSchemaEnabled=_flag(dest.attributes.get("validateXMLSchemaEnabled"), False),
        XMLSchemaUriList=str(uris) if uris else None,
        reloadXMLSchemaOnFailure=_flag(dest.attributes.get("reloadXMLSchemaOnFailure"), False),
    )


def admin_defaults(settings, is_topic: bool, dest_type: int) -> dict[str, object]:
    """The attributes an admin-created destination starts from (OpenMQ's
    defaults): unlimited counts and sizes, REJECT_NEWEST, 100 producers, the auto-creation
    flow limits; a queue's consumer counts follow its delivery-policy flavour bits
    (single 1/0, round-robin -1/0, failover 1/-1), else the auto-creation defaults."""
    auto = dict((settings.topic_attributes if is_topic else settings.queue_attributes) or {})
    attrs: dict[str, object] = {
        "maxNumMsgs": -1,
        "maxTotalMsgBytes": -1,
        "maxBytesPerMsg": -1,
        "maxNumProducers": 100,
        "limitBehavior": "REJECT_NEWEST",
        "useDMQ": True,
        "isLocalOnly": False,
        "maxDeliveryCount": -1,
        "consumerFlowLimit": auto.get("consumerFlowLimit", 1000),
    }
    if is_topic:
        attrs["maxNumSharedConsumers"] = auto.get("maxNumSharedConsumers", -1)
        attrs["sharedConsumerFlowLimit"] = auto.get("sharedConsumerFlowLimit", 5)
    else:
        active = auto.get("maxNumActiveConsumers", -1)
        backup = auto.get("maxNumBackupConsumers", 0)
        if dest_type & DestType.FLAVOR_SINGLE:
            active, backup = 1, 0
        elif dest_type & DestType.FLAVOR_RROBIN:
            active, backup = -1, 0
        elif dest_type & DestType.FLAVOR_FAILOVER:
            active, backup = 1, -1
        attrs["maxNumActiveConsumers"] = active
        attrs["maxNumBackupConsumers"] = backup
    return attrs


def _host(peer: str) -> str:
    return peer.rpartition(":")[0] or peer


def _check_property(name: str, kind: str, value: str) -> str | None:
    """Why ``value`` is not usable for broker property ``name`` (None if it is)."""
    from broker.logsetup import parse_level

    probe = BrokerConfig({name: value})
    text = value.strip()
    try:
        if kind == "bool":
            if text.lower() not in ("true", "false"):
                return f"{name}: {value!r} is not true or false"
        elif kind in ("int", "count", "positive", "port"):
            number = probe.get_int(name, 0)
            if kind == "count" and number < -1:
                return f"{name}: {number} is negative (use -1 for unlimited)"
            if kind == "positive" and number < 1:
                return f"{name}: must be at least 1"
            if kind == "port" and not 0 < number < 65536:
                return f"{name}: {number} is not a port number"
        elif kind == "size":
            probe.get_size(name, 0)
        elif kind == "level":
            parse_level(text)
        elif kind == "behavior":
            if text not in dattrs.LIMIT_BEHAVIORS:
                return f"{name}: {value!r} is not one of {', '.join(dattrs.LIMIT_BEHAVIORS)}"
        elif kind == "policy":
            if text.lower() not in ("single", "failover", "round-robin"):
                return f"{name}: {value!r} is not single, failover or round-robin"
    except (ConfigError, ValueError) as exc:
        return str(exc) if name in str(exc) else f"{name}: {exc}"
    return None


# Ours, on GET_DESTINATIONS (stock imqcmd sends none of them and gets every destination):
# the portal asks for one filtered, ordered page and the total (JMQQuantity), so a broker
# with tens of thousands of destinations answers a page in milliseconds.
LIST_PROPS = (
    "JMQStartIndex",
    "JMQMaxCount",
    "JMQFilterType",
    "JMQFilterName",
    "JMQFilterState",
    "JMQShowTemporary",
    "JMQOrderBy",
    "JMQHideAdminTemporary",
)


def admin_connection_ids(broker) -> set[int]:
    """The ids of the connections on ADMIN services (imqcmd, the portal's)."""
    return {cid for cid, c in broker.connections.items() if c.service.type == "ADMIN"}


def _select_destinations(dests: list, props: dict) -> tuple[list, int]:
    """The page of ``dests`` the LIST_PROPS ask for, and how many matched in all."""
    kind = props.get("JMQFilterType")
    if isinstance(kind, int) and kind & (DEST_QUEUE | DEST_TOPIC):
        dests = [d for d in dests if d.dest_type & int(kind)]
    needle = props.get("JMQFilterName")
    if isinstance(needle, str) and needle:
        low = needle.lower()
        dests = [d for d in dests if low in d.name.lower()]
    state = props.get("JMQFilterState")
    if isinstance(state, int) and not isinstance(state, bool):
        dests = [d for d in dests if int(d.state) == int(state)]
    if not _flag(props.get("JMQShowTemporary"), True):
        dests = [d for d in dests if not d.is_temporary]
    order = props.get("JMQOrderBy") or "name"
    if order == "depth":
        dests.sort(key=lambda d: (-d.msg_count, d.name))
    elif order == "name":
        dests.sort(key=lambda d: (not d.is_queue, d.name))
    else:
        raise AdminError(Status.BAD_REQUEST, f"JMQOrderBy must be name or depth, not {order!r}")
    start = props.get("JMQStartIndex", 0)
    count = props.get("JMQMaxCount", -1)
    if not isinstance(start, int) or not isinstance(count, int) or start < 0:
        raise AdminError(Status.BAD_REQUEST, "JMQStartIndex must be >= 0 and JMQMaxCount a number")
    total = len(dests)
    end = total if count < 0 else start + int(count)
    return dests[int(start) : end], total


class AdminHandler:
    """Executes admin requests for the connections of one broker."""

    def __init__(self) -> None:
        self._sequence = itertools.count(1)
        self._commands: dict[int, Callable[[ConnectionEngine, dict], Any]] = {
            HELLO: self._hello,
            GET_BROKER_PROPS: self._broker_props,
            GET_CONNECTIONS: self._connections,
            PURGE_DESTINATION: self._purge,
            DESTROY_DESTINATION: self._destroy,
            DESTROY_DURABLE: self._destroy_durable,
            SHUTDOWN: self._shutdown,
            GET_DESTINATIONS: self._destinations,
            GET_SERVICES: self._services,
            PAUSE: self._pause,
            RESUME: self._resume,
            GET_CONSUMERS: self._consumers,
            GET_DURABLES: self._durables,
            PURGE_DURABLE: self._purge_durable,
            COMPACT_DESTINATION: self._compact,
            GET_TRANSACTIONS: self._transactions,
            COMMIT_TRANSACTION: self._commit_transaction,
            ROLLBACK_TRANSACTION: self._rollback_transaction,
            DESTROY_CONNECTION: self._destroy_connection,
            QUIESCE_BROKER: self._quiesce,
            UNQUIESCE_BROKER: self._unquiesce,
            DEBUG: self._debug,
            GET_MESSAGES: self._messages,
            DELETE_MESSAGE: self._delete_message,
        }
        self._commands[GET_METRICS] = admin_metrics.get_metrics
        self._commands[RESET_BROKER] = admin_metrics.reset_broker
        self._commands[admin_expiry.RECLAIM_EXPIRED] = admin_expiry.reclaim_expired
        self._commands[admin_cluster.GET_CLUSTER] = admin_cluster.get_cluster
        self._commands[admin_cluster.RELOAD_CLUSTER] = admin_cluster.reload_cluster
        self._commands[admin_ha.TAKEOVER_BROKER] = admin_ha.takeover_broker
        # Commands whose request carries a body (a serialised object).
        self._body_commands: dict[int, Callable[[ConnectionEngine, dict, bytes], Any]] = {
            CREATE_DESTINATION: self._create_destination,
            UPDATE_DESTINATION: self._update_destination,
            UPDATE_SERVICE: self._update_service,
            UPDATE_BROKER_PROPS: self._update_broker_props,
        }
        # Subscription -> the number GET_DURABLES shows as its uidString.
        self._sub_uids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._tasks: set[asyncio.Task] = set()

    def handle(self, conn: ConnectionEngine, pkt: Packet) -> None:
        """Answer one request (the caller sends any SEND_REPLY)."""
        props = pkt.properties
        request = props.get("JMQMessageType")
        if not isinstance(request, int) or isinstance(request, bool):
            log.warning("admin message from %s without JMQMessageType dropped", conn.peer)
            return
        request = int(request)
        reply_to = pkt.fields.get(VH_REPLYTO)
        if not isinstance(reply_to, str) or not reply_to:
            log.warning(
                "admin request %s from %s has no JMSReplyTo; not answered", request, conn.peer
            )
            return
        name = COMMAND_NAMES.get(request, f"admin message type {request}")
        try:
            if request in self._body_commands:
                body = pkt.body
                if pkt.flags & FLAG_Z and body:
                    try:
                        body = zlib.decompress(body)
                    except zlib.error as exc:
                        raise AdminError(
                            Status.BAD_REQUEST, f"bad compressed body: {exc}"
                        ) from None
                result = self._body_commands[request](conn, props, body)
            elif request in self._commands:
                result = self._commands[request](conn, props)
            else:
                raise AdminError(
                    Status.NOT_IMPLEMENTED, f"{name} is not supported by this broker yet"
                )
        except Exception as exc:
            self._finish(conn, request, name, reply_to, None, exc)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)

            def done(t: asyncio.Task) -> None:
                self._tasks.discard(t)
                if t.cancelled():
                    self._finish(conn, request, name, reply_to, None, AdminError(503, "cancelled"))
                elif t.exception() is not None:
                    self._finish(conn, request, name, reply_to, None, t.exception())
                else:
                    self._finish(conn, request, name, reply_to, t.result(), None)

            task.add_done_callback(done)
        else:
            self._finish(conn, request, name, reply_to, result, None)

    def _finish(
        self,
        conn: ConnectionEngine,
        request: int,
        name: str,
        reply_to: str,
        result: Result | None,
        exc: BaseException | None,
    ) -> None:
        """Send the reply of a request that is done (or failed); log it once."""
        status: int = Status.OK
        error: str | None = None
        extra: dict[str, object] = {}
        body = b""
        if exc is None:
            if result is not None:
                extra, body = result
            log.info("admin %s from %s (%s): %s", name, conn.peer, conn.user, status)
        elif isinstance(exc, AdminError | RouterError | ValueError):
            if isinstance(exc, AdminError | RouterError):
                status, error = exc.status, exc.reason
            else:  # a value the request carried is unusable
                status, error = Status.BAD_REQUEST, str(exc)
            log.warning(
                "admin %s from %s (%s) refused (%s): %s", name, conn.peer, conn.user, status, error
            )
        else:  # a bug must not take the connection down
            log.error("admin %s from %s failed", name, conn.peer, exc_info=exc)
            status, error = Status.ERROR, f"{name} failed: {exc}"
        reply_props: dict[str, object] = {
            "JMQMessageType": JInt(request + 1),
            "JMQStatus": JInt(status),
        }
        if error is not None:
            reply_props["JMQErrorString"] = error
        reply_props.update(extra)
        self._send(conn, reply_to, reply_props, body)

    def _send(self, conn: ConnectionEngine, queue: str, props: dict, body: bytes) -> None:
        router = conn.router
        dest = router.lookup(queue, DEST_QUEUE | DEST_TEMP)
        if dest is None:
            log.warning("admin reply queue %s is gone; reply dropped", queue)
            return
        sock = conn.sockname
        host = sock[0] if sock else None
        if host and host.startswith("::ffff:"):
            host = host[7:]
        raw = build_packet(
            PacketType.OBJECT_MESSAGE,
            props=props,
            body=body,
            flags=FLAG_Q,
            fields={VH_DESTINATION: queue, VH_DESTINATION_CLASS: TEMP_QUEUE_CLASS},
            priority=4,
            timestamp=now_ms(),
            ip=ip_field(host),
            port=conn.service.port,
            sequence=next(self._sequence) & 0x7FFFFFFF,
        )
        pkt = Packet(raw)
        msg = Message(pkt, queue, conn.id)
        try:
            router.route(msg, conn, DEST_QUEUE, internal=True)
        except RouterError as exc:
            log.warning("admin reply to %s refused: %s", queue, exc.reason)

    # -- broker ------------------------------------------------------------------------

    def _hello(self, conn: ConnectionEngine, props: dict) -> Result:
        b = conn.broker
        return {"JMQInstanceName": b.config.instance, "JMQBrokerState": b.state}, b""

    def _broker_props(self, conn: ConnectionEngine, props: dict) -> Result:
        b = conn.broker
        values = b.config.as_dict()
        # As OpenMQ adds to its configuration: the current totals.
        router = b.router
        # OpenMQ counts a transaction's messages from the send on (held_in_transactions).
        held = queries.held_in_transactions(router).values()
        values[imq.CURRENT_COUNT] = str(router.totals.count + sum(h[0] for h in held))
        values[imq.CURRENT_SIZE] = str(router.totals.bytes + sum(h[1] for h in held))
        values[imq.DMQ_CURRENT_COUNT] = str(router.dmq.msg_count)
        values[imq.DMQ_CURRENT_SIZE] = str(router.dmq.msg_bytes)
        values.update(broker_identity(b.config))
        values.update(admin_cluster.cluster_properties(b))
        # Ours: RUNNING, QUIESCING or QUIESCED; the memory state; open connections (the
        # portal's overview needs no connection list for a count).
        values[imq.BROKER_STATE] = b.state
        values[imq.MEMORY_STATE] = b.memory.state
        values[imq.CURRENT_CONNECTIONS] = str(len(b.connections))
        lag = b.loop_lag
        if lag is not None:  # the last window's event-loop lag, in milliseconds
            values[imq.LOOP_LAG_MAX] = f"{lag.max_ms:.3f}"
            values[imq.LOOP_LAG_P99] = f"{lag.p99_ms:.3f}"
        return {}, encode_properties_object(values)

    def _update_broker_props(self, conn: ConnectionEngine, props: dict, body: bytes):
        """UPDATE_BROKER_PROPS: only properties that can change at run time, all or none;
        applied now and written to the instance's config.properties."""
        if not body:
            raise AdminError(Status.BAD_REQUEST, "the request has no java.util.Properties body")
        try:
            wanted = decode_properties_object(body)
        except JavaSerializationError as exc:
            raise AdminError(Status.BAD_REQUEST, f"unreadable Properties body: {exc}") from None
        if not wanted:
            raise AdminError(Status.BAD_REQUEST, "no broker property to update")
        changes: dict[str, str] = {}
        refused: list[str] = []
        bad: list[str] = []
        for raw_name, value in wanted.items():
            name = PROPERTY_ALIASES.get(raw_name, raw_name)
            kind = RUNTIME_PROPERTIES.get(name)
            if kind is None:
                refused.append(raw_name)
                continue
            why = _check_property(name, kind, value)
            if why is not None:
                bad.append(why)
            changes[name] = value.strip()
        if refused:
            raise AdminError(
                Status.BAD_REQUEST,
                "these properties cannot be changed at run time: " + ", ".join(sorted(refused)),
            )
        if bad:
            raise AdminError(Status.BAD_REQUEST, "; ".join(bad))
        return self._apply_broker_props(conn, changes)

    async def _apply_broker_props(self, conn: ConnectionEngine, changes: dict[str, str]) -> Result:
        broker = conn.broker
        config = broker.config
        port = changes.get(imq.PORTMAPPER_PORT.name)
        if port is not None and int(port) != config.get(imq.PORTMAPPER_PORT):
            try:
                await broker.rebind_portmapper(int(port))
            except OSError as exc:
                raise AdminError(
                    Status.CONFLICT, f"imq.portmapper.port: cannot listen on port {port}: {exc}"
                ) from None
        for name, value in changes.items():
            config.set(name, value)
        broker.apply_properties(set(changes))
        await self._save_config(conn)
        log.info("broker properties updated: %s", changes)
        return {}, b""

    @staticmethod
    async def _save_config(conn: ConnectionEngine) -> None:
        broker = conn.broker
        try:
            await asyncio.get_running_loop().run_in_executor(
                broker.executor, broker.config.save_instance_file
            )
        except OSError as exc:
            raise AdminError(
                Status.ERROR, f"applied, but {broker.config.instance_file} not written: {exc}"
            ) from None

    def _shutdown(self, conn: ConnectionEngine, props: dict) -> Result:
        restart = props.get("JMQRestart") is True
        delay = props.get("JMQTime")
        wait = SHUTDOWN_DELAY
        if isinstance(delay, int) and not isinstance(delay, bool) and delay > 0:
            wait = float(delay)
        log.info(
            "%s requested by %s (%s)%s",
            "restart" if restart else "shutdown",
            conn.user,
            conn.peer,
            f" in {wait:g} s" if wait > SHUTDOWN_DELAY else "",
        )
        broker = conn.broker
        failover = props.get("JMQNoFailover") is not True  # HA: another broker takes over
        asyncio.get_running_loop().call_later(
            wait, lambda: broker.request_stop(restart=restart, failover=failover)
        )
        return {}, b""

    def _quiesce(self, conn: ConnectionEngine, props: dict) -> Result:
        broker = conn.broker
        if not broker.quiescing:
            broker.quiescing = True
            log.info("broker quiescing: no new client connections")
        return {"JMQBrokerState": broker.state}, b""

    def _unquiesce(self, conn: ConnectionEngine, props: dict) -> Result:
        broker = conn.broker
        if broker.quiescing:
            broker.quiescing = False
            log.info("broker no longer quiesced: client connections accepted again")
        return {"JMQBrokerState": broker.state}, b""

    def _debug(self, conn: ConnectionEngine, props: dict):
        """DEBUG: ``reload accesscontrol`` (ours); OpenMQ's other debug commands are not
        available."""
        cmd = str(props.get("JMQCommand") or "").strip().lower()
        target = str(props.get("JMQTarget") or "").strip().lower()
        if cmd == "reload" and target == "accesscontrol":

            async def reload() -> Result:
                await conn.broker.reload_access_control()
                return {}, encode_hashtable({"accesscontrol": "reloaded"})

            return reload()
        raise AdminError(
            Status.NOT_IMPLEMENTED,
            f"DEBUG {props.get('JMQCommand')!s} {props.get('JMQTarget') or ''}".rstrip()
            + " is not supported by this broker (only reload accesscontrol)",
        )

    # -- connections ---------------------------------------------------------------------

    def _connections(self, conn: ConnectionEngine, props: dict) -> Result:
        broker = conn.broker
        wanted_service = props.get("JMQServiceName")
        wanted_id = _long_prop(props, "JMQConnectionID")
        if wanted_service and not any(s.name == wanted_service for s in broker.services):
            raise AdminError(Status.NOT_FOUND, f"service {wanted_service} not found")
        producers = queries.producers_per_connection(conn.router)
        if wanted_id is not None:
            other = broker.connections.get(wanted_id)
            if other is None:
                raise AdminError(Status.NOT_FOUND, f"no connection {wanted_id}")
            candidates = [other]
        else:
            candidates = list(broker.connections.values())
        rows: list[dict[str, object]] = []
        for other in candidates:
            if wanted_service and other.service.name != wanted_service:
                continue
            host, _, port = other.peer.rpartition(":")
            rows.append(
                {
                    "cxnid": JLong(other.id),
                    "clientid": other.client_id or "",
                    "host": host,
                    "port": JInt(int(port) if port.isdigit() else 0),
                    "user": other.user or "",
                    "nproducers": JInt(producers.get(other.id, 0)),
                    "nconsumers": JInt(queries.consumer_count(other.all_sessions())),
                    "clientplatform": other.user_agent,
                    "service": other.service.name,
                    # Ours (OpenMQ's Hashtable has no session count).
                    "nsessions": JInt(len(other.sessions)),
                }
            )
        return {}, encode_vector(rows)

    def _destroy_connection(self, conn: ConnectionEngine, props: dict) -> Result:
        cxn_id = _long_prop(props, "JMQConnectionID", required=True)
        other = conn.broker.connections.get(cxn_id)  # type: ignore[arg-type]
        if other is None:
            raise AdminError(Status.NOT_FOUND, f"no connection {cxn_id}")
        log.info(
            "connection %s (%s, %s) closed by the administrator", cxn_id, other.user, other.peer
        )

        def close() -> None:  # after the reply (which may go to that very connection)
            other.send_goodbye(GoodbyeReason.ADMIN_KILLED_CON, "closed by the administrator")
            other.close()

        asyncio.get_running_loop().call_soon(close)
        return {}, b""

    # -- services --------------------------------------------------------------------------

    def _services(self, conn: ConnectionEngine, props: dict) -> Result:
        broker = conn.broker
        wanted = props.get("JMQServiceName")
        services = [s for s in broker.services if not wanted or s.name == wanted]
        if wanted and not services:
            raise AdminError(Status.NOT_FOUND, f"service {wanted} not found")
        config = broker.config
        infos = []
        for svc in services:
            admin = svc.type == "ADMIN"
            if svc.paused:
                state = SERVICE_PAUSED
            else:
                state = SERVICE_RUNNING if svc.server is not None else SERVICE_STOPPED
            infos.append(
                service_info(
                    name=svc.name,
                    protocol=svc.protocol,
                    type=1 if admin else 0,
                    state=state,
                    nConnections=len(svc.connections),
                    currentThreads=admin_metrics.THREADS_PER_CONNECTION * len(svc.connections),
                    dynamicPort=svc.port == 0,
                    port=svc.bound_port or svc.port,
                    minThreads=config.get_int(f"imq.{svc.name}.min_threads", 4 if admin else 10),
                    maxThreads=config.get_int(f"imq.{svc.name}.max_threads", 10 if admin else 1000),
                )
            )
        return {}, encode_infos(infos)

    def _update_service(self, conn: ConnectionEngine, props: dict, body: bytes):
        """UPDATE_SERVICE: the port (the service listens there from now on; open
        connections carry on) and the thread counts.  With no threads here, maxThreads
        is the service's connection limit (-1: none) and minThreads is only recorded."""
        info = _read_info(body, "ServiceInfo")
        broker = conn.broker
        name = info.get("name")
        svc = next((s for s in broker.services if s.name == name), None)
        if svc is None:
            raise AdminError(Status.NOT_FOUND, f"service {name} not found")
        mask = int(info.get("updateMask") or 0)
        if not mask & (SERVICE_PORT | SERVICE_MIN_THREADS | SERVICE_MAX_THREADS):
            raise AdminError(Status.BAD_REQUEST, f"no property of service {name} to update")
        port = int(info.get("port", 0)) if mask & SERVICE_PORT else None
        low = int(info.get("minThreads", 0)) if mask & SERVICE_MIN_THREADS else None
        high = int(info.get("maxThreads", 0)) if mask & SERVICE_MAX_THREADS else None
        if port is not None and not 0 <= port < 65536:
            raise AdminError(Status.BAD_REQUEST, f"{port} is not a port number")
        if low is not None and low < 0:
            raise AdminError(Status.BAD_REQUEST, f"minThreads {low} is negative")
        if high is not None and (high == 0 or high < -1):
            raise AdminError(Status.BAD_REQUEST, f"maxThreads {high} must be positive (or -1)")
        config = broker.config
        if high is None:
            high_now = config.get_int(
                f"imq.{name}.max_threads", 10 if svc.type == "ADMIN" else 1000
            )
        else:
            high_now = high
        if low is not None and high_now > 0 and low > high_now:
            raise AdminError(Status.BAD_REQUEST, f"minThreads {low} is above maxThreads {high_now}")

        async def apply() -> Result:
            if port is not None and port != svc.bound_port:
                try:
                    await broker.rebind_service(svc, port)
                except OSError as exc:
                    raise AdminError(
                        Status.CONFLICT, f"service {name} cannot listen on port {port}: {exc}"
                    ) from None
                config.set(f"imq.{name}.{svc.protocol}.port", str(port))
            if low is not None:
                config.set(f"imq.{name}.min_threads", str(low))
            if high is not None:
                svc.max_connections = high if high > 0 else -1
                config.set(f"imq.{name}.max_threads", str(high))
                config.set(f"imq.{name}.max_connections", str(svc.max_connections))
            await self._save_config(conn)
            log.info(
                "service %s updated:%s%s%s",
                name,
                f" port {port}" if port is not None else "",
                f" minThreads {low}" if low is not None else "",
                f" maxThreads (connection limit) {high}" if high is not None else "",
            )
            return {}, b""

        return apply()

    # -- destinations --------------------------------------------------------------------

    def _lookup(self, conn: ConnectionEngine, props: dict):
        name = _dest_name(props)
        dtype = _dest_type(props)
        dest = conn.router.lookup(name, dtype)
        if dest is None or bool(dest.dest_type & DEST_TOPIC) != bool(dtype & DEST_TOPIC):
            raise AdminError(Status.NOT_FOUND, f"destination {name} not found")
        return dest

    def _destinations(self, conn: ConnectionEngine, props: dict) -> Result:
        router = conn.router
        extra: dict[str, object] = {}
        if isinstance(props.get("JMQDestination"), str):
            dests = [self._lookup(conn, props)]
        else:
            dests = [d for d in queries.destinations(router) if d.name != ADMIN_QUEUE]
            if any(p in props for p in LIST_PROPS):
                if _flag(props.get("JMQHideAdminTemporary"), False):
                    # The portal's pages: the reply queues of admin tools' connections
                    # (the portal's own among them) are plumbing, not the operator's.
                    tools = admin_connection_ids(conn.broker)
                    dests = [d for d in dests if d.temporary_owner not in tools]
                dests, total = _select_destinations(dests, props)
                extra["JMQQuantity"] = JInt(total)
        delayed = queries.delayed_by_destination(router)
        held = queries.held_in_transactions(router)
        infos = [
            _destination_info(
                d,
                delayed.get((d.name, not d.is_queue), [0, 0]),
                held.get((d.name, not d.is_queue), [0, 0]),
            )
            for d in dests
        ]
        if len(dests) == 1 and isinstance(props.get("JMQDestination"), str):
            # Ours: the attributes DestinationInfo has no field for, of the one asked for.
            for attr, prop in dattrs.EXTRA_PROPERTIES.items():
                extra[prop] = JInt(dests[0].limit(attr))
        return extra, encode_infos(infos)

    @staticmethod
    def _extra_attributes(props: dict) -> dict[str, object]:
        """Attributes DestinationInfo has no field for, sent as our own properties."""
        out: dict[str, object] = {}
        for attr, prop in dattrs.EXTRA_PROPERTIES.items():
            if prop in props:
                out[attr] = dattrs.convert(attr, props[prop])
        return out

    def _create_destination(self, conn: ConnectionEngine, props: dict, body: bytes) -> Result:
        """CREATE_DESTINATION: an admin-created destination (kept across restarts) with the
        attributes the DestinationInfo's update mask names, defaults for the rest."""
        info = _read_info(body, "DestinationInfo")
        mask = int(info.get("updateMask") or 0)
        name = info.get("name")
        if not mask & DEST_NAME or not isinstance(name, str) or not name:
            raise AdminError(Status.BAD_REQUEST, "the DestinationInfo names no destination")
        dtype = int(info.get("type") or 0) if mask & DEST_TYPE else 0
        if not dtype & (DEST_QUEUE | DEST_TOPIC):
            dtype |= DEST_QUEUE | int(DestType.FLAVOR_SINGLE)
        is_topic = bool(dtype & DEST_TOPIC)
        if dtype & DEST_TEMP:
            raise AdminError(Status.BAD_REQUEST, "temporary destinations cannot be created here")
        problem = admin_name_problem(name)
        if problem is not None:
            raise AdminError(Status.BAD_REQUEST, problem)
        attrs = dattrs.attributes_from_info(info)
        attrs.update(self._extra_attributes(props))
        self._check_applies(attrs, is_topic)
        router = conn.router
        kind = "topic" if is_topic else "queue"
        if router.lookup(name, dtype) is not None:
            raise AdminError(Status.CONFLICT, f"{kind} {name} already exists")
        full = admin_defaults(router.settings, is_topic, dtype)
        full.update(attrs)
        router.create_destination(
            name, DEST_TOPIC if is_topic else DEST_QUEUE, None, auto=False, attributes=full
        )
        log.info("%s %s created by %s: %s", kind, name, conn.user, attrs or "defaults")
        return {}, b""

    @staticmethod
    def _check_applies(attrs: dict[str, object], is_topic: bool) -> None:
        wrong = [n for n in attrs if not dattrs.BY_NAME[n].applies(is_topic)]
        if wrong:
            raise AdminError(
                Status.BAD_REQUEST,
                f"{', '.join(wrong)} cannot be set on a {'topic' if is_topic else 'queue'}",
            )

    def _update_destination(self, conn: ConnectionEngine, props: dict, body: bytes) -> Result:
        """UPDATE_DESTINATION: the attributes the update mask names, effective now."""
        info = _read_info(body, "DestinationInfo")
        name = info.get("name")
        if not isinstance(name, str) or not name:
            raise AdminError(Status.BAD_REQUEST, "the DestinationInfo names no destination")
        is_topic = bool(int(info.get("type") or 0) & DEST_TOPIC)
        dest = conn.router.lookup(name, DEST_TOPIC if is_topic else DEST_QUEUE)
        if dest is None or dest.name == ADMIN_QUEUE:
            raise AdminError(
                Status.NOT_FOUND, f"{'topic' if is_topic else 'queue'} {name} not found"
            )
        attrs = dattrs.attributes_from_info(info)
        attrs.update(self._extra_attributes(props))
        if not attrs:
            raise AdminError(Status.BAD_REQUEST, f"no attribute of {name} to update")
        self._check_applies(attrs, is_topic)
        conn.router.update_destination(dest, attrs)
        return {}, b""

    def _purge(self, conn: ConnectionEngine, props: dict) -> Result:
        dest = self._lookup(conn, props)
        purged = conn.router.purge(dest)
        log.info("purged %d messages from %s", purged, dest.name)
        return {}, b""

    def _destroy(self, conn: ConnectionEngine, props: dict) -> Result:
        dest = self._lookup(conn, props)
        if dest.name == ADMIN_QUEUE:
            raise AdminError(Status.FORBIDDEN, f"{ADMIN_QUEUE} cannot be destroyed")
        conn.router.destroy_destination(dest.name, _dest_type(props))
        return {}, b""

    def _compact(self, conn: ConnectionEngine, props: dict):
        """COMPACT_DESTINATION: reclaim the file store's space now.  The file store is
        one log for every destination, so naming one compacts the lot; the database
        store has nothing to compact."""
        if isinstance(props.get("JMQDestination"), str):
            self._lookup(conn, props)
        store = conn.broker.store
        compact_soon = getattr(store, "compact_soon", None)
        if compact_soon is None:
            log.info("COMPACT_DESTINATION: the %s needs no compaction", type(store).__name__)
            return {}, b""
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()

        def finished(error: BaseException | None) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        compact_soon(finished)

        async def wait() -> Result:
            try:
                await done
            except Exception as exc:
                raise AdminError(Status.ERROR, f"compaction failed: {exc}") from None
            log.info("file store compacted")
            return {}, b""

        return wait()

    # -- consumers, producers and durable subscriptions -------------------------------------

    def _consumers(self, conn: ConnectionEngine, props: dict) -> Result:
        """GET_CONSUMERS: a Vector of HashMap, one per consumer (GetConsumersHandler's
        keys).  With our JMQProducers=true: the destination's producers instead."""
        if not isinstance(props.get("JMQDestination"), str) or "JMQDestType" not in props:
            raise AdminError(Status.BAD_REQUEST, "JMQDestination and JMQDestType are needed")
        dest = self._lookup(conn, props)
        if props.get("JMQProducers") is True:
            rows = [self._producer_row(dest, p) for p in dest.producers.values()]
        else:
            rows = [self._consumer_row(dest, c) for c in dest.consumers()]
        return {}, encode_admin_vector(rows)

    @staticmethod
    def _consumer_row(dest, cons) -> HashMap:
        link = cons.link
        sub = cons.subscription
        durable = sub is not None and sub.durable_key is not None
        selector = cons.selector.text if cons.selector is not None else None
        if sub is not None:
            selector = sub.selector_text
        # Session ack modes are jakarta.jms.Session's numbers (0: SESSION_TRANSACTED).
        mode = cons.session.ack_mode
        pending = queries.pending_acks(cons)
        return HashMap(
            AcknowledgeMode=JInt(mode),
            ClientID=link.client_id,
            ConnectionID=str(link.id),
            ConsumerID=str(cons.id),
            DestinationName=dest.name,
            DestinationType=JInt(DEST_QUEUE if dest.is_queue else DEST_TOPIC),
            Durable=durable,
            DurableActive=durable,
            DurableName=sub.durable_key[1] if durable else None,
            FlowPaused=cons.credit == 0,
            Host=_host(getattr(link, "peer", "")),
            LastAckTime=JLong(0),
            NumMsgs=JLong(cons.delivered),
            NumMsgsPendingAcks=JLong(pending),
            Selector=selector,
            ServiceName=link.service.name if hasattr(link, "service") else None,
            User=getattr(link, "user", None),
        )

    @staticmethod
    def _producer_row(dest, prod) -> HashMap:
        link = prod.session.link
        waiting = queries.producer_waiting(dest, prod.id)
        return HashMap(
            ProducerID=str(prod.id),
            ConnectionID=str(link.id),
            SessionID=str(prod.session.id),
            DestinationName=dest.name,
            DestinationType=JInt(DEST_QUEUE if dest.is_queue else DEST_TOPIC),
            FlowPaused=waiting,
            Host=_host(getattr(link, "peer", "")),
            ServiceName=link.service.name if hasattr(link, "service") else None,
            User=getattr(link, "user", None),
        )

    def _sub_uid(self, conn: ConnectionEngine, sub) -> str:
        uid = self._sub_uids.get(sub)
        if uid is None:
            uid = self._sub_uids[sub] = conn.router.uids.next()
        return str(uid)

    def _durables(self, conn: ConnectionEngine, props: dict) -> Result:
        """GET_DURABLES: a DurableInfo per durable or shared subscription (optionally of
        one topic, or of one durable name)."""
        topic_name = props.get("JMQDestination")
        wanted = props.get("JMQDurableName")
        infos = []
        only = topic_name if isinstance(topic_name, str) else None
        for topic, sub in queries.subscriptions(conn.router, only):
            durable = sub.durable_key is not None
            if durable:
                client_id, name = sub.durable_key
            elif sub.share == "jms":
                _kind, client_id, name = sub.shared_key
            else:
                client_id, name = sub.shared_key[1], None
            if isinstance(wanted, str) and name != wanted:
                continue
            infos.append(self._durable_info(conn, topic, sub, durable, client_id, name))
        return {}, encode_admin_vector(infos)

    def _durable_info(self, conn, topic, sub, durable: bool, client_id, name):
        uid = self._sub_uid(conn, sub)
        active = {}
        consumers = queries.subscription_consumers(sub)
        for cons in consumers:
            cid = Shared(str(cons.id))
            active[cid] = consumer_info(
                uidString=cid,
                subuidString=str(uid),
                connection=connection_info(cons.link.id, openmq4=_openmq4(conn)),
            )
        return durable_info(
            name=name,
            clientID=client_id,
            nMessages=queries.subscription_message_count(sub),
            isActive=bool(consumers),
            isDurable=durable,
            isShared=sub.share is not None,
            isJMSShared=sub.share == "jms",
            activeCount=len(consumers),
            uidString=uid,
            activeConsumers=active,
            consumer=consumer_info(
                destination=topic.name, type=DEST_TOPIC, selector=sub.selector_text
            ),
        )

    def _find_durable(self, conn: ConnectionEngine, props: dict):
        name = props.get("JMQDurableName")
        if not isinstance(name, str) or not name:
            raise AdminError(Status.BAD_REQUEST, "JMQDurableName is missing")
        client_id = props.get("JMQClientID")
        if client_id is not None and (not isinstance(client_id, str) or not client_id.strip()):
            raise AdminError(Status.BAD_REQUEST, f"bad JMQClientID {client_id!r}")
        sub = queries.find_durable(conn.router, client_id or None, name)
        if sub is not None:
            return sub
        raise AdminError(
            Status.NOT_FOUND,
            f"no durable subscription {name}"
            + (f" for client ID {client_id}" if client_id else " without a client ID"),
        )

    def _destroy_durable(self, conn: ConnectionEngine, props: dict) -> Result:
        name = props.get("JMQDurableName")
        if not isinstance(name, str) or not name:
            raise AdminError(Status.BAD_REQUEST, "JMQDurableName is missing")
        client_id = props.get("JMQClientID")
        conn.router.unsubscribe(client_id if isinstance(client_id, str) else None, name)
        return {}, b""

    def _purge_durable(self, conn: ConnectionEngine, props: dict) -> Result:
        """PURGE_DURABLE: drop the messages waiting for a durable subscription (those
        delivered and not yet acknowledged stay with their consumer)."""
        sub = self._find_durable(conn, props)
        purged = conn.router.purge_subscription(sub)
        log.info("purged %d messages of durable subscription %s", purged, sub.sub_id)
        return {}, b""

    # -- transactions --------------------------------------------------------------------

    def _transactions(self, conn: ConnectionEngine, props: dict) -> Result:
        """GET_TRANSACTIONS: a Hashtable per transaction (GetTransactionsHandler's keys),
        JMQQuantity = how many."""
        router = conn.router
        wanted = _long_prop(props, "JMQTransactionID")
        if wanted is not None:
            txn = queries.transaction_by_id(router, wanted)
            if txn is None:
                raise AdminError(Status.NOT_FOUND, f"no transaction {wanted}")
            txns = [txn]
        else:
            txns = queries.transactions(router)
        rows = []
        for txn in txns:
            row: dict[str, object] = {"type": JInt(TXN_LOCAL)}
            if txn.xid is not None:
                row["xid"] = str(txn.xid)
            row["txnid"] = str(txn.id)
            if txn.user:
                row["user"] = txn.user
            if txn.client_id:
                row["clientid"] = txn.client_id
            row["timestamp"] = JLong(txn.created)
            link = txn.link
            row["connection"] = (
                f"{getattr(link, 'user', '') or ''}@{getattr(link, 'peer', '')}" if link else ""
            )
            row["nmsgs"] = JInt(len(txn.sends))
            row["nacks"] = JInt(txn.held_ack_count)
            row["state"] = JInt(int(txn.state))
            if txn.connection_id:
                row["connectionid"] = JLong(txn.connection_id)
            row["homebroker"] = ""
            row["allbrokers"] = ""
            row["pendingbrokers"] = ""
            rows.append(row)
        return {"JMQQuantity": JInt(len(rows))}, encode_vector(rows)

    def _transaction(self, conn: ConnectionEngine, props: dict):
        tid = _long_prop(props, "JMQTransactionID", required=True)
        assert tid is not None  # required
        txn = queries.transaction_by_id(conn.router, tid)
        if txn is None:
            raise AdminError(Status.NOT_FOUND, f"no transaction {tid}")
        return txn

    def _commit_transaction(self, conn: ConnectionEngine, props: dict):
        """COMMIT_TRANSACTION of a PREPARED transaction (in doubt, or anyone's); the reply
        waits until the store has the commit."""
        txn = self._transaction(conn, props)
        if txn.state != TransactionState.PREPARED:
            raise AdminError(
                Status.PRECONDITION_FAILED,
                f"transaction {txn.id} is {txn.state.name}, not PREPARED: it cannot be "
                "committed by an administrator",
            )
        conn.router.commit(txn, None)
        log.info("transaction %s committed by the administrator %s", txn.id, conn.user)
        broker = conn.broker
        loop = asyncio.get_running_loop()
        stored: asyncio.Future = loop.create_future()
        broker.when_stored(lambda: stored.done() or stored.set_result(None))

        async def wait() -> Result:
            await stored
            return {}, b""

        return wait()

    def _rollback_transaction(self, conn: ConnectionEngine, props: dict) -> Result:
        """ROLLBACK_TRANSACTION of a transaction between STARTED and PREPARED; a local one
        only once PREPARED (its client still works in it otherwise)."""
        txn = self._transaction(conn, props)
        state = txn.state
        if not TransactionState.STARTED <= state <= TransactionState.PREPARED:
            raise AdminError(
                Status.PRECONDITION_FAILED,
                f"transaction {txn.id} is {state.name}: it cannot be rolled back",
            )
        if txn.xid is None and state != TransactionState.PREPARED:
            raise AdminError(
                Status.PRECONDITION_FAILED,
                f"rollback of non-XA transaction {txn.id} in state {state.name} is not "
                "supported (only PREPARED ones)",
            )
        conn.router.rollback(txn)
        log.info("transaction %s rolled back by the administrator %s", txn.id, conn.user)
        return {}, b""

    # -- messages ---------------------------------------------------------------------------

    @staticmethod
    def _message_id(props: dict, required: bool) -> str | None:
        mid = props.get("JMQMessageID")
        if mid is None:
            if required:
                raise AdminError(Status.BAD_REQUEST, "JMQMessageID is missing")
            return None
        if not isinstance(mid, str) or not mid.strip():
            raise AdminError(Status.BAD_REQUEST, f"bad JMQMessageID {mid!r}")
        mid = mid.strip()
        return mid if mid.startswith("ID:") else "ID:" + mid

    def _messages(self, conn: ConnectionEngine, props: dict) -> Result:
        """GET_MESSAGES: a HashMap per message (GetMessagesHandler's keys), a window of
        JMQMaxNumMsgsRetrieved from JMQStartMessageIndex, or the one JMQMessageID."""
        if not isinstance(props.get("JMQDestination"), str) or "JMQDestType" not in props:
            raise AdminError(Status.BAD_REQUEST, "JMQDestination and JMQDestType are needed")
        dest = self._lookup(conn, props)
        mid = self._message_id(props, required=False)
        with_body = props.get("JMQGetMessageBody") is True
        held = queries.held_messages(conn.router, dest)
        if mid is not None:
            held = [r for r in held if r.msg.message_id == mid]
            if not held:
                raise AdminError(
                    Status.NOT_FOUND, f"Could not locate message {mid} in destination {dest.name}"
                )
        else:
            start = _long_prop(props, "JMQStartMessageIndex") or 0
            limit = _long_prop(props, "JMQMaxNumMsgsRetrieved")
            if start < 0 or (limit is not None and limit < 0):
                raise AdminError(Status.BAD_REQUEST, "negative message index or count")
            held = held[start : None if limit is None else start + limit]
        router = conn.router
        rows = [self._message_row(router, msg, red, with_body) for msg, red, _p in held]
        return {}, encode_admin_vector(rows)

    @staticmethod
    def _message_row(router, msg: Message, redelivered: bool, with_body: bool) -> HashMap:
        pkt = Packet(msg.raw)
        fields = pkt.fields
        corr = fields.get(VH_CORRELATIONID)
        row = HashMap(
            CorrelationID=corr,
            CorrelationIDAsBytes=corr.encode("utf-8") if isinstance(corr, str) else None,
            DeliveryMode=JInt(2 if msg.persistent else 1),
            DestinationName=msg.destination,
            DestinationType=JInt(DEST_QUEUE if msg.is_queue else DEST_TOPIC),
            Expiration=JLong(msg.expiration),
            MessageID=msg.message_id,
            Priority=JInt(msg.priority),
            Redelivered=redelivered,
        )
        # Ours: the JMSDestination header, where the message was sent (for a message of
        # the DMQ the destination it died on; DestinationType is that one's type too).
        row["JMSDestinationName"] = fields.get(VH_DESTINATION) or msg.destination
        reply_to = fields.get(VH_REPLYTO)
        if isinstance(reply_to, str) and reply_to:
            row["ReplyToDestinationName"] = reply_to
            queue = router.lookup(reply_to, DEST_QUEUE)
            topic = router.lookup(reply_to, DEST_TOPIC)
            if (queue is None) != (topic is None):
                row["ReplyToDestinationType"] = JInt(DEST_QUEUE if queue else DEST_TOPIC)
        row["Timestamp"] = JLong(msg.timestamp)
        row["Type"] = fields.get(VH_TYPE)
        try:
            row["MessageProperties"] = Hashtable(
                {k: v for k, v in pkt.properties.items() if v is not None}
            )
        except Exception:  # malformed properties cannot have been routed, but be safe
            row["MessageProperties"] = None
        row["MessageBodyType"] = JInt(pkt.type)
        if with_body:
            body = pkt.body
            if pkt.flags & FLAG_Z and body:
                try:
                    body = zlib.decompress(body)
                except zlib.error:
                    pass
            # Ours: the body as sent, whatever the type.
            row["MessageBodyBytes"] = body
            if pkt.type == PacketType.TEXT_MESSAGE:
                row["MessageBody"] = body.decode("utf-8", errors="replace")
            elif pkt.type in (PacketType.BYTES_MESSAGE, PacketType.STREAM_MESSAGE):
                row["MessageBody"] = body
            elif pkt.type == PacketType.MAP_MESSAGE and body:
                try:
                    row["MessageBody"] = HashMap(decode_map_body(body))
                except JavaSerializationError:
                    pass
            elif pkt.type == PacketType.OBJECT_MESSAGE:
                # OpenMQ sends the object itself; its bytes are that object serialised.
                row["MessageBody"] = body
        return row

    def _delete_message(self, conn: ConnectionEngine, props: dict) -> Result:
        """DELETE_MESSAGE: remove a waiting message (settled in the store as if it had
        been acknowledged); 409 while it is delivered and not acknowledged."""
        if "JMQDestType" not in props:
            raise AdminError(Status.BAD_REQUEST, "DELETE_MESSAGE: JMQDestType is missing")
        dest = self._lookup(conn, props)
        mid = self._message_id(props, required=True)
        assert mid is not None  # required
        if conn.router.delete_message(dest, mid):
            log.info("message %s deleted from %s by %s", mid, dest.name, conn.user)
            return {}, b""
        if any(r.msg.message_id == mid for r in queries.held_messages(conn.router, dest)):
            raise AdminError(
                Status.CONFLICT,
                f"message {mid} in {dest.name} is being delivered: it cannot be deleted now",
            )
        raise AdminError(
            Status.NOT_FOUND, f"Could not locate message {mid} in destination {dest.name}"
        )

    # PAUSE / RESUME (JMQPauseTarget names the property that identifies the target).
    # A destination: consumers-paused stops its dispatch, producers-paused withholds the
    # producers' RESUME_FLOW (like FLOW_CONTROL: a producer stops at its next flow-control
    # point and a new one gets JMQSize 0; messages already in flight are accepted).
    # A service (or, without a target, every NORMAL service): new connections get
    # HELLO_REPLY 503 until RESUME; established connections carry on.

    def _pause_target(self, conn: ConnectionEngine, props: dict, state: DestState) -> None:
        target = props.get("JMQPauseTarget")
        if target == "JMQDestination" or (target is None and "JMQDestination" in props):
            dest = self._lookup(conn, props)
            conn.router.set_dest_state(dest, state)
            log.info("destination %s is now %s", dest.name, state.name)
            return
        paused = state != DestState.RUNNING
        name = props.get("JMQServiceName")
        if name is not None and not isinstance(name, str):
            raise AdminError(Status.BAD_REQUEST, f"bad JMQServiceName {name!r}")
        # Stock imqcmd's pause/resume bkr names the target JMQServiceName without a
        # service name: every service but admin, as OpenMQ's PauseHandler.
        if isinstance(name, str) and target in ("JMQServiceName", None):
            services = [s for s in conn.broker.services if s.name == name]
            if not services:
                raise AdminError(Status.NOT_FOUND, f"service {name} not found")
            if paused and services[0].type == "ADMIN":
                raise AdminError(Status.BAD_REQUEST, f"admin service {name} cannot be paused")
        elif target in ("JMQServiceName", None):
            services = [s for s in conn.broker.services if s.type != "ADMIN"]
        else:
            raise AdminError(Status.BAD_REQUEST, f"unknown JMQPauseTarget {target}")
        for svc in services:
            svc.paused = paused
            log.info("service %s %s", svc.name, "paused" if paused else "resumed")

    def _pause(self, conn: ConnectionEngine, props: dict) -> Result:
        value = props.get("JMQDestState", DestState.PAUSED)
        try:
            state = DestState(int(value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise AdminError(Status.BAD_REQUEST, f"bad JMQDestState {value}") from None
        if state == DestState.RUNNING:
            raise AdminError(Status.BAD_REQUEST, "JMQDestState 0 is not a pause")
        self._pause_target(conn, props, state)
        return {}, b""

    def _resume(self, conn: ConnectionEngine, props: dict) -> Result:
        self._pause_target(conn, props, DestState.RUNNING)
        return {}, b""


# One handler serves every admin connection of the process (its sequence numbers the
# replies' SysMessageIDs).
HANDLER = AdminHandler()

__all__ = [
    "ADMIN_QUEUE",
    "AdminError",
    "AdminHandler",
    "HANDLER",
    "RUNTIME_PROPERTIES",
    "admin_defaults",
]
