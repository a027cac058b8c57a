"""Sessions, destinations, producers, consumers and the access checks guarding them."""

from __future__ import annotations

import functools
import logging
import struct
import time
from typing import Any

from broker.core.destination import Destination, QueueDestination
from broker.core.errors import RouterError
from broker.core.monitoring import METRICS_PREFIX
from broker.core.selector import Selector, SelectorError, compile_selector
from broker.core.session import Consumer, Session
from broker.protocol.destname import queue_name_problem, topic_pattern_problem
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_ACK_MODE,
    JMQ_BODY_TYPE,
    JMQ_BYTES,
    JMQ_CAN_CREATE,
    JMQ_CLIENT_ID,
    JMQ_CONSUMER_ID,
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_DESTINATION_ID,
    JMQ_DURABLE_NAME,
    JMQ_JMS_SHARE,
    JMQ_LICENSE,
    JMQ_LICENSE_DESC,
    JMQ_NAMESPACE,
    JMQ_NO_LOCAL,
    JMQ_PRODUCER_ID,
    JMQ_QUANTITY,
    JMQ_REDELIVER_ALL,
    JMQ_SELECTOR,
    JMQ_SESSION_ID,
    JMQ_SHARE,
    JMQ_SHARED_SUBSCRIPTION_NAME,
    JMQ_SIZE,
)
from broker.protocol.packet import Packet
from broker.protocol.properties import as_int, optional_str
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    BodyType,
    DestType,
    LimitBehavior,
    Status,
)

from .access import AccessRules
from .effects import Effects, RunBlocking
from .states import CLOSED

log = logging.getLogger("broker.connection")

_I64 = struct.Struct(">q")
_DEST_AUTO = int(DestType.AUTO)


def dest_args(pkt: Packet) -> tuple[str, int]:
    """The JMQDestination and JMQDestType of a request (RouterError 400 if unusable)."""
    props = pkt.properties
    name = props.get(JMQ_DESTINATION)
    dtype = props.get(JMQ_DEST_TYPE, DEST_QUEUE)
    if not isinstance(name, str) or not name:
        raise RouterError(Status.BAD_REQUEST, f"{JMQ_DESTINATION} is missing")
    if not isinstance(dtype, int) or not dtype & (DEST_QUEUE | DEST_TOPIC):
        raise RouterError(Status.BAD_REQUEST, f"bad JMQDestType {dtype}")
    return name, int(dtype)


def reply_dest_type(dest: Destination) -> int:
    """A destination's JMQDestType as OpenMQ's broker reports it in VERIFY_DESTINATION_REPLY
    (and ours in ADD_CONSUMER_REPLY): its type bits, the flavour bits of the request that
    made it, and AUTO for one made on demand (an administrator's has neither)."""
    t = dest.dest_type | dest.flavour
    return t | _DEST_AUTO if dest.auto else t


def credit_bytes(dest: Destination, credit: int) -> int:
    """The JMQBytes beside a producer credit of ``credit`` messages: 0 when it must wait; -1
    (no byte limit) unless, as with OpenMQ's broker, the destination holds producers back
    at a byte limit (FLOW_CONTROL and maxTotalMsgBytes); then the credit at the
    destination's average message size.  Neither stock client enforces it."""
    if credit == 0:
        return 0
    if (
        credit < 0
        or dest.limit_behavior != LimitBehavior.FLOW_CONTROL
        or dest.limit("maxTotalMsgBytes") < 0
    ):
        return -1
    size = dest.msg_bytes_in // dest.msgs_in if dest.msgs_in else 1024
    return credit * max(size, 1)


def compile_or_400(text: object) -> Selector | None:
    """The compiled JMQSelector (None for none), RouterError 400 if it does not parse."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    try:
        return compile_selector(str(text))
    except SelectorError as exc:
        raise RouterError(Status.BAD_REQUEST, f"invalid selector: {exc}") from exc


class ResourceRules(AccessRules):
    """Session, destination, producer and consumer handlers of :class:`ConnectionEngine`."""

    client_id: str | None  # EngineBase's

    # -- sessions ----------------------------------------------------------------

    def on_create_session(self, pkt: Packet) -> None:
        ack_mode = as_int(pkt.properties.get(JMQ_ACK_MODE, 0))
        try:
            sess = self.router.create_session(self, ack_mode)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        self.sessions[sess.id] = sess
        self.reply(pkt, Status.OK, {JMQ_SESSION_ID: JLong(sess.id)})

    def on_destroy_session(self, pkt: Packet) -> None:
        sid = pkt.properties.get(JMQ_SESSION_ID)
        sess = self.sessions.pop(as_int(sid), None) if sid is not None else None
        if sess is None:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no session {sid}")
            return
        self.router.destroy_session(sess)
        for cid in [c for c, s in self.consumer_sessions.items() if s is sess]:
            del self.consumer_sessions[cid]
        self.reply(pkt, Status.OK)

    def _named_session(self, pkt: Packet) -> Session | None:
        """The session START/STOP name (None: the whole connection); RouterError if unknown."""
        sid = pkt.properties.get(JMQ_SESSION_ID)
        if sid is None:
            return None
        sess = self.sessions.get(as_int(sid))
        if sess is None:
            raise RouterError(Status.NOT_FOUND, f"no session {sid}")
        return sess

    def on_start(self, pkt: Packet) -> None:
        try:
            sess = self._named_session(pkt)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        if sess is not None:
            sess.stopped = False
        else:
            self.started = True
        self.reply(pkt, Status.OK)
        self.router.redispatch([sess] if sess is not None else self.all_sessions())

    def on_stop(self, pkt: Packet) -> None:
        try:
            sess = self._named_session(pkt)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        if sess is not None:
            sess.stopped = True
        else:
            self.started = False
        # Deliveries are written synchronously, so nothing follows this reply.
        self.reply(pkt, Status.OK)

    def on_set_clientid(self, pkt: Packet) -> None:
        props = pkt.properties
        cid = props.get(JMQ_CLIENT_ID)
        try:
            self.router.subs.set_client_id(
                self,
                optional_str(cid),
                bool(props.get(JMQ_SHARE, False)),
                optional_str(props.get(JMQ_NAMESPACE)),
            )
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        cluster = self.broker.cluster
        if cid is not None and cluster is not None and cluster.locks.needed():
            # Granted only when no other broker of the cluster holds the same ID (shared
            # with JMQShare: then only an unshared holder refuses it).
            done = functools.partial(self._client_id_locked, pkt, str(cid))
            args = (
                str(cid),
                bool(props.get(JMQ_SHARE, False)),
                optional_str(props.get(JMQ_NAMESPACE)),
            )
            self._effect(RunBlocking(cluster.locks.acquire_client_id_blocking, args, done))
            return
        self.reply(pkt, Status.OK)

    def _client_id_locked(
        self, pkt: Packet, cid: str, result: Any, error: BaseException | None
    ) -> Effects:
        """The cluster's answer to this connection's client ID lock."""
        if self.state is CLOSED:
            return self.take_effects()
        if error is not None or result != 0:
            self.router.subs.release_client_id(self)
            self.client_id = None
            why = "no answer from the cluster" if error is not None else "in use on another broker"
            self.reply(pkt, Status.CONFLICT, reason=f"client ID {cid} is {why}")
        else:
            self.reply(pkt, Status.OK)
        return self.take_effects()

    # -- destinations --------------------------------------------------------------

    def on_create_destination(self, pkt: Packet) -> None:
        try:
            name, dtype = dest_args(pkt)
            self._require(name, dtype, "create")
            self.router.create_destination(name, dtype, self)
        except RouterError as exc:
            extra: dict[str, object] | None = None
            if exc.status == Status.CONFLICT:
                # OpenMQ's broker answers 200 here; its clients take 409 as the same.
                existing = self.router.lookup(*dest_args(pkt))
                if existing is not None:
                    extra = {JMQ_DEST_TYPE: JInt(reply_dest_type(existing))}
                    extra |= existing.xml_schema()
            self.reply(pkt, exc.status, extra, reason=exc.reason)
            return
        # The type asked for, flavour bits and all, as OpenMQ's broker answers it, and
        # whether the client is to validate XML (a wildcard topic names no destination).
        props: dict[str, object] = {JMQ_DEST_TYPE: JInt(dtype)}
        dest = self.router.lookup(name, dtype)
        if dest is not None:
            props.update(dest.xml_schema())
        self.reply(pkt, Status.OK, props)

    def on_destroy_destination(self, pkt: Packet) -> None:
        try:
            name, dtype = dest_args(pkt)
            self.router.destroy_destination(name, dtype, self)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        self.reply(pkt, Status.OK)

    def on_verify_destination(self, pkt: Packet) -> None:
        try:
            name, dtype = dest_args(pkt)
            compile_or_400(pkt.properties.get(JMQ_SELECTOR))
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        dest = self.router.lookup(name, dtype)
        if dest is None:
            # The client would create it next: tell it now that it cannot (415, as
            # CREATE_DESTINATION would answer), not 404 "you may create it".
            if dtype & DEST_TOPIC:
                problem, status = topic_pattern_problem(name), Status.NOT_ACCEPTABLE
            else:
                problem, status = queue_name_problem(name), Status.UNSUPPORTED_TYPE
            if problem is not None:
                self.reply(pkt, status, reason=problem)
                return
            s = self.router.settings
            can = s.autocreate_topic if dtype & DEST_TOPIC else s.autocreate_queue
            if dtype & DEST_TOPIC and name.startswith(METRICS_PREFIX):
                can = s.metrics_topics  # made for subscribers whatever auto-creation says
            self.reply(
                pkt,
                Status.NOT_FOUND,
                {JMQ_CAN_CREATE: bool(can)},
                reason=f"destination {name} not found",
            )
            return
        self.reply(pkt, Status.OK, {JMQ_DEST_TYPE: JInt(reply_dest_type(dest))})

    # -- producers -----------------------------------------------------------------

    def on_add_producer(self, pkt: Packet) -> None:
        try:
            name, dtype = dest_args(pkt)
            sess = self._session(pkt)
            if sess is None:
                raise RouterError(Status.NOT_FOUND, "unknown JMQSessionID")
            self._require(name, dtype, "produce")
            prod = self.router.add_producer(sess, name, dtype)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        # 0: it waits now; RESUME_FLOW follows when there is room (limits.producer_credit).
        batch = self.router.limits.producer_credit(prod, self)
        self.reply(
            pkt,
            Status.OK,
            {
                JMQ_PRODUCER_ID: JLong(prod.id),
                JMQ_SIZE: JInt(batch),
                JMQ_BYTES: JLong(credit_bytes(prod.destination, batch)),
                # OpenMQ's DestinationUID string (no stock client reads it).
                JMQ_DESTINATION_ID: ("T:" if dtype & DEST_TOPIC else "Q:") + name,
            },
        )

    def on_delete_producer(self, pkt: Packet) -> None:
        pid = pkt.properties.get(JMQ_PRODUCER_ID)
        prod = self.router.producer(as_int(pid)) if pid is not None else None
        if prod is None or prod.session.link is not self:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no producer {pid}")
            return
        self.router.remove_producer(prod)
        self.reply(pkt, Status.OK)

    # -- consumers ---------------------------------------------------------------------

    def on_add_consumer(self, pkt: Packet) -> None:
        try:
            name, dtype = dest_args(pkt)
            self._require(name, dtype, "consume")
            dest = None
            if dtype & DEST_QUEUE and not dtype & DEST_TEMP:
                dest = self.router.lookup(name, dtype) or self.router.ensure_destination(
                    name, dtype, self
                )
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        cluster = self.broker.cluster
        if (
            isinstance(dest, QueueDestination)
            and cluster is not None
            and cluster.positions.governs(dest)
        ):
            # A limited queue's place is cluster-wide: its lock first (core/positions.py),
            # so two consumers attaching on two brokers never both become active.
            done = functools.partial(self._position_locked, pkt, dest, cluster.positions)
            self._effect(RunBlocking(cluster.positions.first_free_blocking, (dest,), done))
            return
        self._add_consumer(pkt, None)

    def _position_locked(
        self, pkt: Packet, dest: QueueDestination, positions: Any, result: Any, error: Any
    ) -> Effects:
        """The cluster's answer to a new queue consumer's position."""
        if error is not None or not isinstance(result, int) or result < 0:
            if self.state is not CLOSED:
                why = "no answer from the cluster" if error is not None else "none is free"
                self.reply(
                    pkt,
                    Status.CONFLICT,
                    reason=f"queue {dest.name}: no consumer position in the cluster ({why})",
                )
            return self.take_effects()
        try:
            if self.state is not CLOSED:
                self._add_consumer(pkt, result)
        finally:
            positions.settle(dest.name, result)
        return self.take_effects()

    def _add_consumer(self, pkt: Packet, position: int | None) -> None:
        props = pkt.properties
        try:
            name, dtype = dest_args(pkt)
            sess = self._session(pkt)
            if sess is None:
                raise RouterError(Status.NOT_FOUND, "unknown JMQSessionID")
            selector = compile_or_400(props.get(JMQ_SELECTOR))
            size = props.get(JMQ_SIZE)
            prefetch = int(size) if isinstance(size, int) else -1
            durable = props.get(JMQ_DURABLE_NAME)
            shared_name = props.get(JMQ_SHARED_SUBSCRIPTION_NAME)
            cons = self.router.add_consumer(
                sess,
                name,
                dtype,
                selector=selector,
                no_local=bool(props.get(JMQ_NO_LOCAL, False)),
                prefetch=prefetch,
                durable_name=str(durable) if durable else None,
                share=props.get(JMQ_SHARE) is True,
                jms_share=props.get(JMQ_JMS_SHARE) is True,
                shared_name=str(shared_name) if shared_name is not None else None,
                position=position,
            )
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        sub = cons.subscription
        if sub is not None and sub.share is not None:
            # Shared subscriptions: sharedConsumerFlowLimit instead of consumerFlowLimit.
            limit = cons.destination.limit("sharedConsumerFlowLimit", 5)
        else:
            limit = cons.destination.limit("consumerFlowLimit")
        # JMQSize as OpenMQ's broker takes it: a prefetch above the limit is cut to it; -1
        # is no limit (the seed says so too) and so is none (a client without consumer
        # flow control, which would never resume the consumer).  0, which OpenMQ's broker
        # answers with 0 and then stalls the consumer, is the destination's limit here.
        if limit > 0 and (cons.prefetch == 0 or cons.prefetch > limit):
            cons.prefetch = cons.credit = limit
        self.consumer_sessions[cons.id] = sess
        reply = {
            JMQ_CONSUMER_ID: JLong(cons.id),
            JMQ_DEST_TYPE: JInt(reply_dest_type(cons.destination)),
        }
        if isinstance(size, int):
            reply[JMQ_SIZE] = JInt(cons.prefetch if cons.prefetch > 0 else -1)
        self.reply(pkt, Status.OK, reply)
        # Only now: a delivery before the reply would name a consumer the client lacks.
        cons.queue.dispatch(int(time.time() * 1000))

    def on_delete_consumer(self, pkt: Packet) -> None:
        props = pkt.properties
        cid = props.get(JMQ_CONSUMER_ID)
        if cid is None:
            durable = props.get(JMQ_DURABLE_NAME)
            if not durable:
                self.reply(pkt, Status.BAD_REQUEST, reason=f"{JMQ_CONSUMER_ID} is missing")
                return
            client_id = optional_str(props.get(JMQ_CLIENT_ID, self.client_id))
            try:
                self.router.subs.unsubscribe(client_id, str(durable))
            except RouterError as exc:
                self.reply(pkt, exc.status, reason=exc.reason)
                return
            self.reply(pkt, Status.OK)
            return
        cons: Consumer | None = self.router.consumer(as_int(cid))
        # Not ``cons.link is not self`` in the condition: mypy would narrow self to a Link.
        mine = cons is not None and cons.link is self
        if cons is None or not mine:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no consumer {cid}")
            return
        last = None
        body = pkt.body
        if props.get(JMQ_BODY_TYPE) == BodyType.SYSMESSAGEID and len(body) >= 32:
            last = body[:32]
        self.router.remove_consumer(cons, last, bool(props.get(JMQ_REDELIVER_ALL, False)))
        self.reply(pkt, Status.OK)

    # -- miscellany ---------------------------------------------------------------------

    def on_generate_uid(self, pkt: Packet) -> None:
        n = pkt.properties.get(JMQ_QUANTITY, 1)
        if not isinstance(n, int) or not 0 < n <= 10000:
            self.reply(pkt, Status.BAD_REQUEST, reason=f"bad JMQQuantity {n}")
            return
        body = b"".join(_I64.pack(self.router.uids.next()) for _ in range(n))
        self.reply(pkt, Status.OK, {JMQ_QUANTITY: JInt(n)}, body=body)

    def on_get_license(self, pkt: Packet) -> None:
        self.reply(
            pkt,
            Status.OK,
            {
                JMQ_LICENSE: "unl",
                JMQ_LICENSE_DESC: f"{self.broker.product_name} (unlimited)",
            },
        )

    def on_info_request(self, pkt: Packet) -> None:
        self.broker.answer_info_request(self, pkt)
