"""The broker side of the admin protocol (admin.md): requests to queue ``__JMQAdmin``.

An admin tool (imqcmd) sends OBJECT_MESSAGEs to ``__JMQAdmin`` over an ADMIN service;
``JMQMessageType`` selects the command.  Such messages are never stored: the
:class:`AdminHandler` answers each with an OBJECT_MESSAGE (type ``n + 1``, a
``JMQStatus``, sometimes a Java-serialised body) published to the request's JMSReplyTo
temporary queue, so the tool's consumer receives it like any other delivery.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.core.message import Message
from broker.core.router import RouterError, now_ms
from broker.protocol.admin_info import destination_info, encode_infos, service_info
from broker.protocol.javaser import JavaObject, encode_properties_object, encode_vector
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import (
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_REPLYTO,
    Packet,
    build_packet,
)
from broker.protocol.sysmsgid import ip_field
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_Q,
    DestState,
    PacketType,
    Status,
)

if TYPE_CHECKING:
    from .connection import ClientConnection

log = logging.getLogger("broker.admin")

ADMIN_QUEUE = "__JMQAdmin"
TEMP_QUEUE_CLASS = "com.sun.messaging.jmq.jmsclient.TemporaryQueueImpl"

# MessageType constants (mqcomm-util .../util/admin/MessageType).
CREATE_DESTINATION = 10
DESTROY_DESTINATION = 12
DESTROY_DURABLE = 14
GET_CONNECTIONS = 16
GET_DESTINATIONS = 20
GET_SERVICES = 26
HELLO = 28
PAUSE = 30
PURGE_DESTINATION = 32
RESUME = 36
SHUTDOWN = 38
GET_BROKER_PROPS = 54

COMMAND_NAMES = {
    10: "CREATE_DESTINATION",
    12: "DESTROY_DESTINATION",
    14: "DESTROY_DURABLE",
    16: "GET_CONNECTIONS",
    18: "GET_CONSUMERS",
    20: "GET_DESTINATIONS",
    22: "GET_DURABLES",
    24: "GET_LOGS",
    26: "GET_SERVICES",
    28: "HELLO",
    30: "PAUSE",
    32: "PURGE_DESTINATION",
    34: "RESTART",
    36: "RESUME",
    38: "SHUTDOWN",
    40: "UPDATE_DESTINATION",
    42: "UPDATE_PROPERTIES",
    44: "VIEW_LOG",
    46: "UPDATE_SERVICE",
    52: "GET_METRICS",
    54: "GET_BROKER_PROPS",
    56: "UPDATE_BROKER_PROPS",
    58: "RELOAD_CLUSTER",
    60: "GET_TRANSACTIONS",
    62: "COMMIT_TRANSACTION",
    64: "ROLLBACK_TRANSACTION",
    66: "PURGE_DURABLE",
    68: "COMPACT_DESTINATION",
    70: "DESTROY_CONNECTION",
    72: "DEBUG",
    74: "QUIESCE_BROKER",
    76: "TAKEOVER_BROKER",
    78: "GET_CLUSTER",
    80: "GET_JMX",
    82: "UNQUIESCE_BROKER",
    84: "RESET_BROKER",
    86: "GET_MESSAGES",
    88: "DELETE_MESSAGE",
    90: "REPLACE_MESSAGE",
    92: "CHECKPOINT_BROKER",
    94: "UPDATE_CLUSTER_BROKERLIST",
    96: "CHANGE_CLUSTER_MASTER_BROKER",
    98: "MIGRATESTORE_BROKER",
}

# com.sun.messaging.jmq.util.ServiceState
SERVICE_RUNNING = 3
SERVICE_PAUSED = 4
SERVICE_STOPPED = 6

SHUTDOWN_DELAY = 0.2  # seconds between the SHUTDOWN reply and the stop

# (props, body) of a reply; the handler adds JMQMessageType and JMQStatus.
Result = tuple[dict[str, object], bytes]


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


def _destination_info(dest, delayed: list[int]) -> JavaObject:
    """A ``DestinationInfo`` for GET_DESTINATIONS (sizes in bytes, -1 = unlimited)."""
    queues = dest.delivery_queues()
    pending = sum(q.count for q in queues)
    consumers = dest.consumers()
    if dest.is_queue:
        active = len(dest.dq.consumers)
        backups = len(dest.backups)
    else:
        active, backups = len(consumers), 0
    return destination_info(
        nMessages=dest.msg_count,
        nMessageBytes=dest.msg_bytes,
        nConsumers=len(consumers),
        nProducers=len(dest.producers),
        naConsumers=active,
        nfConsumers=backups,
        autocreated=bool(dest.auto or dest.is_dmq or dest.is_temporary),
        destState=int(dest.state),
        name=dest.name,
        type=dest.dest_type & (DEST_QUEUE | DEST_TOPIC),
        fulltype=dest.dest_type,
        maxMessages=dest.limit("maxNumMsgs"),
        maxMessageBytes=dest.limit("maxTotalMsgBytes"),
        maxMessageSize=dest.limit("maxBytesPerMsg"),
        destScope=0 if _flag(dest.attributes.get("isLocalOnly"), False) else 1,
        destLimitBehavior=int(dest.limit_behavior),
        maxPrefetch=dest.limit("consumerFlowLimit"),
        maxActiveConsumers=dest.limit("maxNumActiveConsumers") if dest.is_queue else -1,
        maxFailoverConsumers=dest.limit("maxNumBackupConsumers", 0) if dest.is_queue else 0,
        maxProducers=dest.limit("maxNumProducers"),
        maxNumSharedConsumers=dest.limit("maxNumSharedConsumers"),
        sharedConsumerFlowLimit=dest.limit("sharedConsumerFlowLimit", 5),
        useDMQ=False if dest.is_dmq else _flag(dest.attributes.get("useDMQ"), True),
        nUnackMessages=max(0, dest.msg_count - pending - delayed[0]),
        nInDelayMessages=delayed[0],
        nInDelayMessageBytes=delayed[1],
    )


class AdminHandler:
    """Executes admin requests for the connections of one broker."""

    def __init__(self) -> None:
        self._sequence = itertools.count(1)
        self._commands: dict[int, Callable[[ClientConnection, dict], Result]] = {
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
        }

    def handle(self, conn: ClientConnection, pkt: Packet) -> None:
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
        command = self._commands.get(request)
        status: int = Status.OK
        extra: dict[str, object] = {}
        body = b""
        name = COMMAND_NAMES.get(request, f"admin message type {request}")
        if command is None:
            status, error = Status.NOT_IMPLEMENTED, f"{name} is not supported by this broker yet"
        else:
            try:
                extra, body = command(conn, props)
                error = None
            except (AdminError, RouterError) as exc:
                status, error = exc.status, exc.reason
            except Exception:  # a bug must not take the connection down
                log.exception("admin %s failed", name)
                status, error = Status.ERROR, f"{name} failed"
        log.info("admin %s from %s (%s): %s", name, conn.peer, conn.user, status)
        reply_props: dict[str, object] = {
            "JMQMessageType": JInt(request + 1),
            "JMQStatus": JInt(status),
        }
        if error is not None:
            reply_props["JMQErrorString"] = error
        reply_props.update(extra)
        self._send(conn, reply_to, reply_props, body)

    def _send(self, conn: ClientConnection, queue: str, props: dict, body: bytes) -> None:
        router = conn.router
        dest = router.lookup(queue, DEST_QUEUE | DEST_TEMP)
        if dest is None:
            log.warning("admin reply queue %s is gone; reply dropped", queue)
            return
        sock = conn.transport.get_extra_info("sockname") if conn.transport else None
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
            router.route(msg, conn, DEST_QUEUE)
        except RouterError as exc:
            log.warning("admin reply to %s refused: %s", queue, exc.reason)

    # -- commands ----------------------------------------------------------------------

    def _hello(self, conn: ClientConnection, props: dict) -> Result:
        return {"JMQInstanceName": conn.broker.config.instance}, b""

    def _broker_props(self, conn: ClientConnection, props: dict) -> Result:
        return {}, encode_properties_object(conn.broker.config.as_dict())

    def _connections(self, conn: ClientConnection, props: dict) -> Result:
        wanted_service = props.get("JMQServiceName")
        wanted_id = props.get("JMQConnectionID")
        producers: dict[int, int] = {}
        for prod in conn.router.producers.values():
            link_id = prod.session.link.id
            producers[link_id] = producers.get(link_id, 0) + 1
        rows: list[dict[str, object]] = []
        for other in list(conn.broker.connections.values()):
            if wanted_service and other.service.name != wanted_service:
                continue
            if isinstance(wanted_id, int) and other.id != int(wanted_id):
                continue
            host, _, port = other.peer.rpartition(":")
            row: dict[str, object] = {"cxnid": JLong(other.id)}
            if other.client_id:
                row["clientid"] = other.client_id
            row["host"] = host
            row["port"] = JInt(int(port) if port.isdigit() else 0)
            row["user"] = other.user or ""
            row["nproducers"] = JInt(producers.get(other.id, 0))
            row["nconsumers"] = JInt(len(other.consumer_sessions))
            row["clientplatform"] = other.user_agent
            row["service"] = other.service.name
            rows.append(row)
        if isinstance(wanted_id, int) and not rows:
            raise AdminError(Status.NOT_FOUND, f"no connection {int(wanted_id)}")
        return {}, encode_vector(rows)

    def _lookup(self, conn: ClientConnection, props: dict):
        name = _dest_name(props)
        dtype = _dest_type(props)
        dest = conn.router.lookup(name, dtype)
        if dest is None or bool(dest.dest_type & DEST_TOPIC) != bool(dtype & DEST_TOPIC):
            raise AdminError(Status.NOT_FOUND, f"destination {name} not found")
        return dest

    def _destinations(self, conn: ClientConnection, props: dict) -> Result:
        router = conn.router
        if isinstance(props.get("JMQDestination"), str):
            dests = [self._lookup(conn, props)]
        else:
            dests = [
                d
                for d in [*router.queues.values(), *router.topics.values()]
                if d.name != ADMIN_QUEUE
            ]
        delayed: dict[tuple[str, bool], list[int]] = {}
        for _, _, msg, dtype in router.delayed:
            row = delayed.setdefault((msg.destination, bool(dtype & DEST_TOPIC)), [0, 0])
            row[0] += 1
            row[1] += msg.size
        infos = [_destination_info(d, delayed.get((d.name, not d.is_queue), [0, 0])) for d in dests]
        return {}, encode_infos(infos)

    def _services(self, conn: ClientConnection, props: dict) -> Result:
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
                    dynamicPort=svc.port == 0,
                    port=svc.bound_port or svc.port,
                    minThreads=config.get_int(f"imq.{svc.name}.min_threads", 4 if admin else 10),
                    maxThreads=config.get_int(f"imq.{svc.name}.max_threads", 10 if admin else 1000),
                )
            )
        return {}, encode_infos(infos)

    def _purge(self, conn: ClientConnection, props: dict) -> Result:
        dest = self._lookup(conn, props)
        router = conn.router
        purged = 0
        for queue in dest.delivery_queues():
            for entry in queue.clear():
                router.consumed(entry)  # accounts the entry out (and settles it in the store)
                purged += 1
        log.info("purged %d messages from %s", purged, dest.name)
        return {}, b""

    def _destroy(self, conn: ClientConnection, props: dict) -> Result:
        dest = self._lookup(conn, props)
        if dest.name == ADMIN_QUEUE:
            raise AdminError(Status.FORBIDDEN, f"{ADMIN_QUEUE} cannot be destroyed")
        conn.router.destroy_destination(dest.name, _dest_type(props))
        return {}, b""

    def _destroy_durable(self, conn: ClientConnection, props: dict) -> Result:
        name = props.get("JMQDurableName")
        if not isinstance(name, str) or not name:
            raise AdminError(Status.BAD_REQUEST, "JMQDurableName is missing")
        client_id = props.get("JMQClientID")
        conn.router.unsubscribe(client_id if isinstance(client_id, str) else None, name)
        return {}, b""

    # PAUSE / RESUME (JMQPauseTarget names the property that identifies the target).
    # A destination: consumers-paused stops its dispatch, producers-paused withholds the
    # producers' RESUME_FLOW (like FLOW_CONTROL: a producer stops at its next flow-control
    # point and a new one gets JMQSize 0; messages already in flight are accepted).
    # A service (or, without a target, every NORMAL service): new connections get
    # HELLO_REPLY 503 until RESUME; established connections carry on.

    def _pause_target(self, conn: ClientConnection, props: dict, state: DestState) -> None:
        target = props.get("JMQPauseTarget")
        if target == "JMQDestination" or (target is None and "JMQDestination" in props):
            dest = self._lookup(conn, props)
            conn.router.set_dest_state(dest, state)
            log.info("destination %s is now %s", dest.name, state.name)
            return
        paused = state != DestState.RUNNING
        name = props.get("JMQServiceName")
        if target == "JMQServiceName" or (target is None and isinstance(name, str)):
            services = [s for s in conn.broker.services if s.name == name]
            if not services:
                raise AdminError(Status.NOT_FOUND, f"service {name} not found")
            if paused and services[0].type == "ADMIN":
                raise AdminError(Status.BAD_REQUEST, f"admin service {name} cannot be paused")
        elif target is None:
            services = [s for s in conn.broker.services if s.type != "ADMIN"]
        else:
            raise AdminError(Status.BAD_REQUEST, f"unknown JMQPauseTarget {target}")
        for svc in services:
            svc.paused = paused
            log.info("service %s %s", svc.name, "paused" if paused else "resumed")

    def _pause(self, conn: ClientConnection, props: dict) -> Result:
        value = props.get("JMQDestState", DestState.PAUSED)
        try:
            state = DestState(int(value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise AdminError(Status.BAD_REQUEST, f"bad JMQDestState {value}") from None
        if state == DestState.RUNNING:
            raise AdminError(Status.BAD_REQUEST, "JMQDestState 0 is not a pause")
        self._pause_target(conn, props, state)
        return {}, b""

    def _resume(self, conn: ClientConnection, props: dict) -> Result:
        self._pause_target(conn, props, DestState.RUNNING)
        return {}, b""

    def _shutdown(self, conn: ClientConnection, props: dict) -> Result:
        if props.get("JMQRestart") is True:
            raise AdminError(Status.NOT_IMPLEMENTED, "RESTART is not supported by this broker yet")
        log.info("shutdown requested by %s (%s)", conn.user, conn.peer)
        asyncio.get_running_loop().call_later(SHUTDOWN_DELAY, conn.broker.request_stop)
        return {}, b""


# One handler serves every admin connection of the process (its sequence numbers the
# replies' SysMessageIDs).
HANDLER = AdminHandler()
