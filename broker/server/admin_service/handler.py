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

This module is the dispatcher: the table from JMQMessageType to command, the request
checks and the reply.  The commands live by subject, as OpenMQ has one handler per
request group, and read the broker's state through core's named queries
(:mod:`broker.core.queries`) and commands, never the router's tables:

* :mod:`.broker_info` -- HELLO, broker properties, shutdown, quiesce, DEBUG;
* :mod:`.connections` -- GET_CONNECTIONS, DESTROY_CONNECTION;
* :mod:`.services` -- GET_SERVICES, UPDATE_SERVICE, PAUSE, RESUME;
* :mod:`.destinations` -- GET/CREATE/UPDATE/PURGE/DESTROY/COMPACT_DESTINATION;
* :mod:`.consumers` -- GET_CONSUMERS (and our producer list);
* :mod:`.durables` -- GET_DURABLES, DESTROY_DURABLE, PURGE_DURABLE;
* :mod:`.transactions` -- GET_TRANSACTIONS, COMMIT/ROLLBACK_TRANSACTION;
* :mod:`.messages` -- GET_MESSAGES, DELETE_MESSAGE;
* :mod:`.metrics`, :mod:`.expiry`, :mod:`.cluster`, :mod:`.ha` -- the commands that
  bring Java classes or subsystems of their own;
* :mod:`.common` -- what they share (request parsing, :class:`AdminError`).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.core.errors import RouterError, now_ms
from broker.core.message import Message
from broker.protocol.admin_types import (
    ADMIN_QUEUE,
    BRIDGE_ADMIN_QUEUE,
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
from broker.protocol.bridge_admin import HELLO as BRIDGE_HELLO
from broker.protocol.jtypes import JInt
from broker.protocol.names import JMQ_ERROR_STRING, JMQ_MESSAGE_TYPE, JMQ_STATUS
from broker.protocol.packet import (
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_REPLYTO,
    VH_REPLYTO_CLASS,
    Packet,
    build_packet,
)
from broker.protocol.sysmsgid import ip_field
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    FLAG_Q,
    FLAG_Z,
    TEMP_QUEUE_CLASS,
    PacketType,
    Status,
)

from . import bridge as admin_bridge
from . import broker_info, connections, consumers, destinations, durables, messages, services
from . import cluster as admin_cluster
from . import expiry as admin_expiry
from . import ha as admin_ha
from . import metrics as admin_metrics
from . import transactions as admin_transactions

# Re-exported: what other modules import from here.
from .broker_info import (
    OPENMQ_VERSION,
    PRODUCT_NAME,
    PRODUCT_VERSION,
    broker_identity,
)
from .common import AdminError, Result, log
from .destinations import admin_defaults

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


Command = Callable[["ConnectionEngine", dict], Any]
BodyCommand = Callable[["ConnectionEngine", dict, bytes], Any]

# JMQMessageType -> command, in OpenMQ's command order.
COMMANDS: dict[int, Command] = {
    HELLO: broker_info.hello,
    GET_BROKER_PROPS: broker_info.get_broker_props,
    GET_CONNECTIONS: connections.get_connections,
    PURGE_DESTINATION: destinations.purge_destination,
    DESTROY_DESTINATION: destinations.destroy_destination,
    DESTROY_DURABLE: durables.destroy_durable,
    SHUTDOWN: broker_info.shutdown,
    GET_DESTINATIONS: destinations.get_destinations,
    GET_SERVICES: services.get_services,
    PAUSE: services.pause,
    RESUME: services.resume,
    GET_CONSUMERS: consumers.get_consumers,
    GET_DURABLES: durables.get_durables,
    PURGE_DURABLE: durables.purge_durable,
    COMPACT_DESTINATION: destinations.compact_destination,
    GET_TRANSACTIONS: admin_transactions.get_transactions,
    COMMIT_TRANSACTION: admin_transactions.commit_transaction,
    ROLLBACK_TRANSACTION: admin_transactions.rollback_transaction,
    DESTROY_CONNECTION: connections.destroy_connection,
    QUIESCE_BROKER: broker_info.quiesce,
    UNQUIESCE_BROKER: broker_info.unquiesce,
    DEBUG: broker_info.debug,
    GET_MESSAGES: messages.get_messages,
    DELETE_MESSAGE: messages.delete_message,
    GET_METRICS: admin_metrics.get_metrics,
    RESET_BROKER: admin_metrics.reset_broker,
    admin_expiry.RECLAIM_EXPIRED: admin_expiry.reclaim_expired,
    admin_cluster.GET_CLUSTER: admin_cluster.get_cluster,
    admin_cluster.RELOAD_CLUSTER: admin_cluster.reload_cluster,
    admin_cluster.CHANGE_CLUSTER_MASTER_BROKER: admin_cluster.change_master_broker,
    admin_ha.TAKEOVER_BROKER: admin_ha.takeover_broker,
}
# Commands whose request carries a body (a serialised object).
BODY_COMMANDS: dict[int, BodyCommand] = {
    CREATE_DESTINATION: destinations.create_destination,
    UPDATE_DESTINATION: destinations.update_destination,
    UPDATE_SERVICE: services.update_service,
    UPDATE_BROKER_PROPS: broker_info.update_broker_props,
}


class AdminHandler:
    """Executes admin requests for the connections of one broker."""

    def __init__(self) -> None:
        self._sequence = itertools.count(1)
        self._commands: dict[int, Command] = dict(COMMANDS)
        self._body_commands: dict[int, BodyCommand] = dict(BODY_COMMANDS)
        self._tasks: set[asyncio.Task] = set()

    def handle(self, conn: ConnectionEngine, pkt: Packet) -> None:
        """Answer one request (the caller sends any SEND_REPLY)."""
        props = pkt.properties
        dest = pkt.fields.get(VH_DESTINATION)
        if dest != ADMIN_QUEUE:
            self._bridge(conn, pkt, dest)
            return
        request = props.get(JMQ_MESSAGE_TYPE)
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

    def _bridge(self, conn: ConnectionEngine, pkt: Packet, dest: object) -> None:
        """imqbridgemgr's requests: HELLO on __JMQBridgeAdmin, then its commands on the
        bridge service's queue (admin_service/bridge.py)."""
        props = pkt.properties
        request = props.get(JMQ_MESSAGE_TYPE)
        reply_to = pkt.fields.get(VH_REPLYTO)
        if not isinstance(reply_to, str) or not reply_to:
            log.warning("bridge admin message from %s has no JMSReplyTo; not answered", conn.peer)
            return
        if dest == BRIDGE_ADMIN_QUEUE:
            if request != BRIDGE_HELLO:
                # The stock broker hands other types on __JMQBridgeAdmin to the bridge
                # service's queue's handler, which only reads its own queue: refused here.
                self._send(
                    conn,
                    reply_to,
                    {
                        JMQ_STATUS: JInt(Status.BAD_REQUEST),
                        JMQ_ERROR_STRING: f"send bridge commands to the queue HELLO names, "
                        f"not {BRIDGE_ADMIN_QUEUE}",
                    },
                    b"",
                )
                return
            reply, queue = admin_bridge.hello(conn)
            reply_props = {
                JMQ_MESSAGE_TYPE: JInt(BRIDGE_HELLO + 1),
                **{k: JInt(v) if k == JMQ_STATUS else v for k, v in reply.items()},
            }
            fields = {VH_REPLYTO: queue, VH_REPLYTO_CLASS: TEMP_QUEUE_CLASS} if queue else None
            log.info("bridge admin HELLO from %s (%s): %s", conn.peer, conn.user, reply[JMQ_STATUS])
            self._send(conn, reply_to, reply_props, b"", fields)
            return

        async def run() -> None:
            out = await admin_bridge.command(conn, request, props)
            self._send(conn, reply_to, out.properties(), out.body)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
            JMQ_MESSAGE_TYPE: JInt(request + 1),
            JMQ_STATUS: JInt(status),
        }
        if error is not None:
            reply_props[JMQ_ERROR_STRING] = error
        reply_props.update(extra)
        self._send(conn, reply_to, reply_props, body)

    def _send(
        self,
        conn: ConnectionEngine,
        queue: str,
        props: dict,
        body: bytes,
        fields: dict[int, object] | None = None,
    ) -> None:
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
            fields={
                VH_DESTINATION: queue,
                VH_DESTINATION_CLASS: TEMP_QUEUE_CLASS,
                **(fields or {}),
            },
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


# One handler serves every admin connection of the process (its sequence numbers the
# replies' SysMessageIDs).
HANDLER = AdminHandler()

__all__ = [
    "ADMIN_QUEUE",
    "BODY_COMMANDS",
    "COMMANDS",
    "HANDLER",
    "OPENMQ_VERSION",
    "PRODUCT_NAME",
    "PRODUCT_VERSION",
    "AdminError",
    "AdminHandler",
    "Result",
    "admin_defaults",
    "broker_identity",
]
