"""An admin-protocol client, what ``imqcmd`` does on the wire (docs/developers/protocol.md).

It connects to the broker's ADMIN service (through the port mapper) as an administrator,
opens a CLIENT_ACKNOWLEDGE session with a non-persistent producer on queue ``__JMQAdmin``
and a consumer on a temporary reply queue, then sends OBJECT_MESSAGE requests whose
``JMQMessageType`` selects the command and waits for the matching reply::

    async with await AdminClient.open("127.0.0.1", 7676, "admin", "admin") as admin:
        print(await admin.hello())
        for d in await admin.destinations():
            print(d["name"], d["nMessages"])

Reply bodies are Java-serialised; the ``*Info`` objects (DestinationInfo, ServiceInfo, ...)
are read by javaser's ``decode_object(..., generic=True)``, which turns each object into a
dict of its fields (``__class__`` names the class).
"""

from __future__ import annotations

import ssl as _ssl
from typing import Any

from broker.protocol import admin_requests as req
from broker.protocol import dest_attributes as dattrs
from broker.protocol.admin_types import (
    ADMIN_QUEUE,
    DEBUG,
    DELETE_MESSAGE,
    GET_BROKER_PROPS,
    GET_CONNECTIONS,
    GET_CONSUMERS,
    GET_DESTINATIONS,
    GET_DURABLES,
    GET_MESSAGES,
    GET_SERVICES,
    GET_TRANSACTIONS,
    HELLO,
    RECLAIM_EXPIRED,
)
from broker.protocol.javaser import (
    JavaSerializationError,
    decode_object,
    decode_properties_object,
)
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_BODIES_IN_MEMORY,
    JMQ_BROKER_STATE,
    JMQ_BROKERS_ADDED,
    JMQ_BROKERS_REMOVED,
    JMQ_COMMAND,
    JMQ_CONNECTION_ID,
    JMQ_DESTINATION,
    JMQ_ERROR_STRING,
    JMQ_FILTER_NAME,
    JMQ_FILTER_STATE,
    JMQ_FILTER_TYPE,
    JMQ_GC_PAUSE_MAX,
    JMQ_GET_MESSAGE_BODY,
    JMQ_HIDE_ADMIN_TEMPORARY,
    JMQ_INSTANCE_NAME,
    JMQ_LOOP_LAG_MAX,
    JMQ_LOOP_LAG_P99,
    JMQ_MAX_COUNT,
    JMQ_MAX_NUM_MSGS_RETRIEVED,
    JMQ_MESSAGE_ID,
    JMQ_MESSAGE_TYPE,
    JMQ_ORDER_BY,
    JMQ_PAGED_MESSAGE_BYTES,
    JMQ_PAGED_MESSAGES,
    JMQ_PAGED_OUT,
    JMQ_PRODUCERS,
    JMQ_QUANTITY,
    JMQ_READ_BACK,
    JMQ_SERVICE_NAME,
    JMQ_SHOW_TEMPORARY,
    JMQ_START_INDEX,
    JMQ_START_MESSAGE_INDEX,
    JMQ_STATUS,
    JMQ_TARGET,
)
from broker.protocol.types import (
    DEST_QUEUE,
    MESSAGE_KIND_NAMES,
    PacketType,
)

# GET_MESSAGES' MessageBodyType (the packet type) as a word.
# (A plain JMS Message is "plain" here, "message" in the actions' fallback.)
MESSAGE_KINDS = {**MESSAGE_KIND_NAMES, PacketType.MESSAGE: "plain"}

# DestState (pause) values.
PAUSE_CONSUMERS = req.PAUSE_CONSUMERS
PAUSE_PRODUCERS = req.PAUSE_PRODUCERS
PAUSE_ALL = req.PAUSE_ALL


class AdminError(Exception):
    """A non-200 admin reply (``status`` is JMQStatus, ``text`` the JMQErrorString)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{text} (status {status})" if text else f"status {status}")
        self.status = status
        self.text = text


# --------------------------------------------------------------------------------------
# Reply bodies
# --------------------------------------------------------------------------------------


def read_vector(data: bytes | None) -> list[Any]:
    if not data:
        return []
    value = decode_object(data, generic=True)
    if not isinstance(value, list):
        raise JavaSerializationError("expected a java.util.Vector")
    return value


# --------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------


class AdminClient:
    """One admin connection (see the module docstring)."""

    def __init__(self, conn, session, producer, consumer, reply_queue) -> None:
        self.conn = conn
        self.session = session
        self.producer = producer
        self.consumer = consumer
        self.reply_queue = reply_queue

    @classmethod
    async def open(
        cls,
        host: str = "localhost",
        port: int = 7676,
        user: str = "admin",
        password: str = "admin",
        *,
        connect_timeout: float = 30.0,
        ssl: _ssl.SSLContext | None = None,
    ) -> AdminClient:
        """Connect to the ADMIN service found through the port mapper at host:port; with
        ``ssl``, to its TLS admin service (``ssladmin``), verifying the broker with that
        client context."""
        from openmq_client import AckMode, Queue, connect

        conn = await connect(
            host,
            port,
            user=user,
            password=password,
            service_type="ADMIN",
            connect_timeout=connect_timeout,
            ping_interval=None,
            ssl=ssl or False,
        )
        try:
            await conn.start()
            session = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
            producer = await session.create_producer(Queue(ADMIN_QUEUE), persistent=False)
            reply_queue = await session.create_temporary_queue()
            consumer = await session.create_consumer(reply_queue)
        except BaseException:
            await conn.close()
            raise
        return cls(conn, session, producer, consumer, reply_queue)

    async def close(self) -> None:
        if not self.conn.is_closed:
            await self.conn.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(
        self,
        msg_type: int,
        props: dict[str, object] | None = None,
        body: bytes | None = None,
        timeout: float = 10,
    ) -> tuple[dict[str, object], bytes | None]:
        """Send one request; the reply's properties and body.  Raises AdminError on a
        non-200 JMQStatus, TimeoutError when no reply comes within ``timeout`` and
        ConnectionError when the connection closes first."""
        from openmq_client import ObjectMessage

        msg = ObjectMessage(
            body,
            properties={JMQ_MESSAGE_TYPE: JInt(msg_type), **(props or {})},
            reply_to=self.reply_queue,
        )
        await self.producer.send(msg, persistent=False)
        loop_deadline = timeout
        while True:
            reply = await self.consumer.receive(timeout=loop_deadline)
            if reply is None:
                if self.conn.is_closed:
                    # receive() gives None at once when the connection goes: say so, not
                    # that the broker was slow.
                    raise ConnectionError("the connection closed before the broker replied")
                raise TimeoutError(f"no reply from the broker within {timeout:g} s")
            await reply.acknowledge()
            rprops = reply.properties
            if rprops.get(JMQ_MESSAGE_TYPE) != msg_type + 1:
                continue  # a late reply to an earlier request
            status = int(rprops.get(JMQ_STATUS, 500))  # type: ignore[call-overload]
            if status != 200:
                raise AdminError(status, str(rprops.get(JMQ_ERROR_STRING) or ""))
            data = reply.data if isinstance(reply, ObjectMessage) else None
            return rprops, data

    # -- commands ---------------------------------------------------------------------

    async def hello(self) -> str:
        props, _ = await self.request(HELLO)
        return str(props.get(JMQ_INSTANCE_NAME, ""))

    async def broker_props(self) -> dict[str, str]:
        _, body = await self.request(GET_BROKER_PROPS)
        return decode_properties_object(body) if body else {}

    async def connections(self, service: str | None = None) -> list[dict[str, Any]]:
        props = {JMQ_SERVICE_NAME: service} if service else None
        _, body = await self.request(GET_CONNECTIONS, props)
        return read_vector(body)

    async def destinations(
        self, name: str | None = None, dest_type: int = DEST_QUEUE
    ) -> list[dict[str, Any]]:
        props = _dest(name, dest_type) if name else None
        _, body = await self.request(GET_DESTINATIONS, props)
        return read_vector(body)

    async def destinations_page(
        self,
        start: int = 0,
        limit: int = 50,
        *,
        dest_type: int | None = None,
        name: str | None = None,
        state: int | None = None,
        temporary: bool = True,
        order: str = "name",
        hide_admin_temporary: bool = False,
    ) -> tuple[list[dict[str, Any]], int]:
        """One filtered, ordered page of destinations and the number that matched (our
        extension of GET_DESTINATIONS; ``order`` is ``name`` or ``depth``;
        ``hide_admin_temporary`` leaves out the reply queues of admin tools' connections)."""
        props: dict[str, object] = {
            JMQ_START_INDEX: JInt(start),
            JMQ_MAX_COUNT: JInt(limit),
            JMQ_SHOW_TEMPORARY: temporary,
            JMQ_ORDER_BY: order,
        }
        if dest_type:
            props[JMQ_FILTER_TYPE] = JInt(dest_type)
        if name:
            props[JMQ_FILTER_NAME] = name
        if state is not None:
            props[JMQ_FILTER_STATE] = JInt(state)
        if hide_admin_temporary:
            props[JMQ_HIDE_ADMIN_TEMPORARY] = True
        rprops, body = await self.request(GET_DESTINATIONS, props)
        total = rprops.get(JMQ_QUANTITY)
        rows = read_vector(body)
        return rows, int(total) if isinstance(total, int) else len(rows)

    async def services(self, name: str | None = None) -> list[dict[str, Any]]:
        props = {JMQ_SERVICE_NAME: name} if name else None
        _, body = await self.request(GET_SERVICES, props)
        return read_vector(body)

    async def purge(self, name: str, dest_type: int = DEST_QUEUE) -> None:
        await self.request(*req.purge_destination(name, dest_type))

    async def destroy(self, name: str, dest_type: int = DEST_QUEUE) -> None:
        await self.request(*req.destroy_destination(name, dest_type))

    async def destroy_durable(self, name: str, client_id: str | None) -> None:
        await self.request(*req.destroy_durable(name, client_id))

    async def pause_destination(
        self, name: str, dest_type: int = DEST_QUEUE, what: int = PAUSE_ALL
    ) -> None:
        await self.request(*req.pause_destination(name, dest_type, what))

    async def resume_destination(self, name: str, dest_type: int = DEST_QUEUE) -> None:
        await self.request(*req.resume_destination(name, dest_type))

    async def pause_service(self, name: str) -> None:
        await self.request(*req.pause_service(name))

    async def resume_service(self, name: str) -> None:
        await self.request(*req.resume_service(name))

    async def pause(self) -> None:
        """Pause the whole broker (its NORMAL services)."""
        await self.request(*req.pause_broker())

    async def resume(self) -> None:
        await self.request(*req.resume_broker())

    async def shutdown(self, timeout: float = 10, *, no_failover: bool = False) -> None:
        """Ask the broker to shut down; a missing reply or a closed connection counts as
        success, as in imqcmd.
        ``no_failover``: in an HA cluster, no other broker is to take its data over."""
        try:
            await self.request(*req.shutdown(no_failover=no_failover), timeout=timeout)
        except (TimeoutError, ConnectionError):
            pass

    async def takeover(self, broker_id: str, timeout: float = 120) -> None:
        """Ask the broker to take over another broker of its HA cluster now
        (TAKEOVER_BROKER); it answers once the data is loaded."""
        await self.request(*req.takeover(broker_id), timeout=timeout)

    async def reload_cluster(self, timeout: float = 30) -> dict[str, list[str]]:
        """RELOAD_CLUSTER (``imqcmd reload cls``): the broker and the brokers linked to it
        read the cluster's broker list again; returns the brokers it added and removed."""
        props, _ = await self.request(*req.reload_cluster(), timeout=timeout)
        return {
            k: [a for a in str(props.get(name, "")).split(",") if a]
            for k, name in (("added", JMQ_BROKERS_ADDED), ("removed", JMQ_BROKERS_REMOVED))
        }

    async def change_master_broker(
        self, new_master: str, old_master: str | None = None, timeout: float = 120
    ) -> None:
        """CHANGE_CLUSTER_MASTER_BROKER (``imqcmd changemaster cls``), to the master
        broker: ``new_master`` (host:port of its port mapper) becomes the cluster's
        master broker; ``old_master``, when given, must be the current one."""
        await self.request(*req.change_master_broker(new_master, old_master), timeout=timeout)

    async def restart(self, timeout: float = 10) -> None:
        """Ask the broker to restart (SHUTDOWN with JMQRestart): it stops cleanly and
        starts again in the same process; this connection ends with it."""
        try:
            await self.request(*req.restart(), timeout=timeout)
        except (TimeoutError, ConnectionError):
            pass

    async def state(self) -> str:
        """RUNNING, QUIESCING or QUIESCED (the HELLO reply's JMQBrokerState, ours)."""
        props, _ = await self.request(HELLO)
        return str(props.get(JMQ_BROKER_STATE, "RUNNING"))

    async def quiesce(self) -> None:
        """New client connections on NORMAL services are refused (503) until unquiesce;
        those already open carry on."""
        await self.request(*req.quiesce())

    async def unquiesce(self) -> None:
        await self.request(*req.unquiesce())

    async def update_broker_props(self, props: dict[str, str]) -> None:
        """Change broker properties at run time (and in the instance's config.properties).
        AdminError 400 names the properties that cannot change at run time or the bad
        values; then nothing is changed."""
        await self.request(*req.update_broker_props(dict(props)))

    async def reload_access_control(self) -> None:
        """Re-read the access control rules now (DEBUG reload accesscontrol, ours)."""
        await self.request(DEBUG, {JMQ_COMMAND: "reload", JMQ_TARGET: "accesscontrol"})

    # -- services and connections ---------------------------------------------------------

    async def update_service(
        self,
        name: str,
        port: int | None = None,
        min_threads: int | None = None,
        max_threads: int | None = None,
    ) -> None:
        """UPDATE_SERVICE: a new port (0: any free one), and the thread counts (for this
        broker maxThreads is the service's connection limit, -1 for none)."""
        await self.request(*req.update_service(name, port, min_threads, max_threads))

    async def connection(self, cxn_id: int) -> dict[str, Any]:
        """One connection's GET_CONNECTIONS row; AdminError 404 if there is none."""
        _, body = await self.request(GET_CONNECTIONS, {JMQ_CONNECTION_ID: JLong(cxn_id)})
        rows = read_vector(body)
        if not rows:
            raise AdminError(404, f"no connection {cxn_id}")
        return rows[0]

    async def destroy_connection(self, cxn_id: int) -> None:
        """Close a client connection (it is told GOODBYE, ADMIN_KILLED_CON)."""
        await self.request(*req.destroy_connection(cxn_id))

    # -- destinations ---------------------------------------------------------------------

    async def create_destination(
        self, name: str, dest_type: int, attrs: dict[str, object] | None = None
    ) -> None:
        """Create a destination as an administrator (kept across restarts).  ``attrs``
        by their imqcmd names (broker.protocol.dest_attributes); values may be strings.
        ValueError for a bad attribute, AdminError 409 if it exists, 400 if refused."""
        await self.request(*req.create_destination(name, dest_type, attrs))

    async def update_destination(self, name: str, dest_type: int, attrs: dict[str, object]) -> None:
        """Change attributes of a destination; they apply at once.  AdminError 404 if it
        does not exist."""
        await self.request(*req.update_destination(name, dest_type, attrs))

    async def destination_attributes(
        self, name: str, dest_type: int = DEST_QUEUE
    ) -> dict[str, object]:
        """The destination's attributes by their imqcmd names (those that apply to its
        kind, see broker.protocol.dest_attributes), e.g. to fill in an edit form."""
        props, body = await self.request(GET_DESTINATIONS, _dest(name, dest_type))
        (info,) = read_vector(body)
        extra = {
            attr: props[prop] for attr, prop in dattrs.EXTRA_PROPERTIES.items() if prop in props
        }
        return dattrs.attributes_of_info(info, extra)

    async def compact(self, name: str | None = None, dest_type: int = DEST_QUEUE) -> None:
        """Reclaim the file store's disk space now (one store for all destinations)."""
        await self.request(*req.compact(name, dest_type))

    async def consumers(self, name: str, dest_type: int = DEST_QUEUE) -> list[dict[str, Any]]:
        """GET_CONSUMERS: one dict per consumer with OpenMQ's keys (ConsumerID,
        ConnectionID, ClientID, Host, User, ServiceName, AcknowledgeMode, Selector,
        Durable, DurableName, DurableActive, FlowPaused, NumMsgs, NumMsgsPendingAcks,
        LastAckTime, DestinationName, DestinationType)."""
        _, body = await self.request(GET_CONSUMERS, _dest(name, dest_type))
        return read_vector(body)

    async def producers(self, name: str, dest_type: int = DEST_QUEUE) -> list[dict[str, Any]]:
        """The destination's producers (GET_CONSUMERS with our JMQProducers): ProducerID,
        ConnectionID, SessionID, Host, User, ServiceName, FlowPaused, DestinationName,
        DestinationType."""
        props = {**_dest(name, dest_type), JMQ_PRODUCERS: True}
        _, body = await self.request(GET_CONSUMERS, props)
        return read_vector(body)

    async def messages(
        self,
        name: str,
        dest_type: int = DEST_QUEUE,
        start: int = 0,
        limit: int | None = 100,
        msg_id: str | None = None,
        body: bool = True,
    ) -> list[dict[str, Any]]:
        """GET_MESSAGES: the messages a destination holds, oldest first, ``limit`` of them
        from index ``start`` (or the one ``msg_id``, AdminError 404 if unknown).  Each
        dict has OpenMQ's keys (MessageID "ID:...", Type (JMSType), Priority, Timestamp,
        Expiration, DeliveryMode, Redelivered, CorrelationID, MessageProperties,
        MessageBodyType = the packet type, DestinationName...), ``MessageKind`` (text,
        bytes, map, stream, object, plain) and with ``body`` MessageBody (OpenMQ's form:
        str, bytes or dict) and MessageBodyBytes (the body as sent)."""
        props: dict[str, object] = {**_dest(name, dest_type), JMQ_GET_MESSAGE_BODY: bool(body)}
        if msg_id is not None:
            props[JMQ_MESSAGE_ID] = msg_id
        else:
            props[JMQ_START_MESSAGE_INDEX] = JLong(start)
            if limit is not None:
                props[JMQ_MAX_NUM_MSGS_RETRIEVED] = JLong(limit)
        _, data = await self.request(GET_MESSAGES, props)
        rows = read_vector(data)
        for row in rows:
            row["MessageKind"] = MESSAGE_KINDS.get(int(row.get("MessageBodyType") or 0), "plain")
        return rows

    async def delete_message(self, name: str, dest_type: int, msg_id: str) -> None:
        """Remove one waiting message (AdminError 404 unknown, 409 being delivered)."""
        props = {**_dest(name, dest_type), JMQ_MESSAGE_ID: msg_id}
        await self.request(DELETE_MESSAGE, props)

    # -- durable subscriptions -------------------------------------------------------------

    async def durables(self, topic: str | None = None) -> list[dict[str, Any]]:
        """GET_DURABLES: DurableInfo objects as dicts (name, clientID, nMessages,
        isActive, isDurable, isShared, isJMSShared, activeCount, uidString,
        activeConsumers {uid: ConsumerInfo}, consumer (ConsumerInfo: destination,
        selector...))."""
        _, body = await self.request(GET_DURABLES, {JMQ_DESTINATION: topic} if topic else None)
        return read_vector(body)

    async def purge_durable(self, name: str, client_id: str | None) -> None:
        """Drop the messages waiting for a durable subscription."""
        await self.request(*req.purge_durable(name, client_id))

    # -- transactions ---------------------------------------------------------------------

    async def transactions(self) -> list[dict[str, Any]]:
        """GET_TRANSACTIONS: one dict per open transaction (txnid (a string), xid,
        state (the numbers in docs/developers/protocol.md), user, clientid, timestamp,
        connection, connectionid, nmsgs, nacks, type...)."""
        _, body = await self.request(GET_TRANSACTIONS)
        return read_vector(body)

    async def commit_transaction(self, txn_id: int) -> None:
        """Commit a PREPARED transaction (AdminError 412 otherwise, 404 unknown)."""
        await self.request(*req.commit_transaction(txn_id))

    async def rollback_transaction(self, txn_id: int) -> None:
        """Roll back a transaction (an XA one from STARTED to PREPARED, a local one when
        PREPARED)."""
        await self.request(*req.rollback_transaction(txn_id))

    async def metrics(
        self, service: str | None = None, destination: str | None = None, dest_type: int = 1
    ) -> dict[str, Any]:
        """GET_METRICS (52): the ``destination``'s DestMetricsCounters (numMsgsIn,
        msgBytesIn, numMsgs, peakNumMsgs, numConsumers, ... and timeStamp), else the
        ``service``'s MetricCounters (messagesIn, messageBytesIn, packetsIn, nConnections,
        ...; plus ``pagedMessages``/``pagedMessageBytes``, its copies paged out of
        memory), else the broker's total MetricCounters (plus ``loopLagMax``/``loopLagP99``,
        the event-loop lag, and ``gcPauseMax``, the longest garbage collection, in µs;
        ``bodiesInMemory``, the bytes of message bodies in memory, and ``pagedOut``/
        ``readBack``, messages paged out and read back so far); a dict of the Java fields
        and map entries, ``__class__`` naming the class."""
        if destination:
            props: dict[str, object] | None = _dest(destination, dest_type)
        elif service:
            props = {JMQ_SERVICE_NAME: service}
        else:
            props = None
        reply, body = await self.request(52, props)
        if not body:
            return {}
        value = decode_object(body, generic=True)
        if not isinstance(value, dict):
            raise JavaSerializationError("expected a metrics object")
        # Ours on the broker's total: the event-loop lag (µs) beside the Java object.
        for key, name in (
            (JMQ_LOOP_LAG_MAX, "loopLagMax"),
            (JMQ_LOOP_LAG_P99, "loopLagP99"),
            (JMQ_GC_PAUSE_MAX, "gcPauseMax"),
            (JMQ_BODIES_IN_MEMORY, "bodiesInMemory"),
            (JMQ_PAGED_OUT, "pagedOut"),
            (JMQ_READ_BACK, "readBack"),
            (JMQ_PAGED_MESSAGES, "pagedMessages"),
            (JMQ_PAGED_MESSAGE_BYTES, "pagedMessageBytes"),
        ):
            if key in reply:
                value[name] = int(reply[key])
        return value

    async def reset_metrics(self) -> None:
        """RESET_BROKER (84) with JMQResetType JMQMetrics (imqcmd reset bkr -t metrics)."""
        await self.request(*req.reset_metrics())

    async def reclaim_expired(self) -> list[dict[str, Any]]:
        """RECLAIM_EXPIRED (200, our extension): sweep expired messages now; one dict per
        destination where any expired (DestinationName, DestinationType, ToDMQ,
        Discarded)."""
        _, body = await self.request(RECLAIM_EXPIRED)
        return read_vector(body)


_dest = req.destination_props


__all__ = ["ADMIN_QUEUE", "AdminClient", "AdminError", "read_vector"]
