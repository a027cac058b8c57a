"""Sessions, destinations, producers, consumers and the access checks guarding them."""

from __future__ import annotations

import functools
import logging
import struct
import time
from typing import Any

from broker.core.router import RouterError
from broker.core.selector import SelectorError, compile_selector
from broker.core.session import Consumer, Session
from broker.protocol.destname import queue_name_problem, topic_pattern_problem
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import Packet
from broker.protocol.properties import as_int
from broker.protocol.types import DEST_QUEUE, DEST_TEMP, DEST_TOPIC, FLAG_A, Status

from .effects import Effects, RunBlocking
from .states import CLOSED

log = logging.getLogger("broker.connection")

_I64 = struct.Struct(">q")


def dest_args(pkt: Packet) -> tuple[str, int]:
    """JMQDestination and JMQDestType of a request (RouterError 400 if unusable)."""
    props = pkt.properties
    name = props.get("JMQDestination")
    dtype = props.get("JMQDestType", DEST_QUEUE)
    if not isinstance(name, str) or not name:
        raise RouterError(Status.BAD_REQUEST, "JMQDestination is missing")
    if not isinstance(dtype, int) or not dtype & (DEST_QUEUE | DEST_TOPIC):
        raise RouterError(Status.BAD_REQUEST, f"bad JMQDestType {dtype}")
    return name, int(dtype)


def compile_or_400(text: object):
    """The compiled JMQSelector (None for none), RouterError 400 if it does not parse."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    try:
        return compile_selector(str(text))
    except SelectorError as exc:
        raise RouterError(Status.BAD_REQUEST, f"invalid selector: {exc}") from exc


class ResourceRules:
    """Session, destination, producer and consumer handlers of :class:`ConnectionEngine`."""

    client_id: str | None  # EngineBase's

    # -- sessions ----------------------------------------------------------------

    def _session(self: Any, pkt: Packet) -> Session | None:
        sid = pkt.properties.get("JMQSessionID")
        if sid is None:
            # Clients before 3.5 have no sessions: one implicit session per connection.
            if self.implicit_session is None:
                self.implicit_session = self.router.create_session(self, 1)
            return self.implicit_session
        return self.sessions.get(as_int(sid))

    def on_create_session(self: Any, pkt: Packet) -> None:
        ack_mode = as_int(pkt.properties.get("JMQAckMode", 0))
        try:
            sess = self.router.create_session(self, ack_mode)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        self.sessions[sess.id] = sess
        self.reply(pkt, Status.OK, {"JMQSessionID": JLong(sess.id)})

    def on_destroy_session(self: Any, pkt: Packet) -> None:
        sid = pkt.properties.get("JMQSessionID")
        sess = self.sessions.pop(as_int(sid), None) if sid is not None else None
        if sess is None:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no session {sid}")
            return
        self.router.destroy_session(sess)
        for cid in [c for c, s in self.consumer_sessions.items() if s is sess]:
            del self.consumer_sessions[cid]
        self.reply(pkt, Status.OK)

    def _named_session(self: Any, pkt: Packet) -> Session | None:
        """The session START/STOP name (None: the whole connection); RouterError if unknown."""
        sid = pkt.properties.get("JMQSessionID")
        if sid is None:
            return None
        sess = self.sessions.get(as_int(sid))
        if sess is None:
            raise RouterError(Status.NOT_FOUND, f"no session {sid}")
        return sess

    def on_start(self: Any, pkt: Packet) -> None:
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

    def on_stop(self: Any, pkt: Packet) -> None:
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

    def on_set_clientid(self: Any, pkt: Packet) -> None:
        props = pkt.properties
        cid = props.get("JMQClientID")
        try:
            self.router.subs.set_client_id(
                self,
                cid if cid is None else str(cid),
                bool(props.get("JMQShare", False)),
                props.get("JMQNamespace"),
            )
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        cluster = getattr(self.broker, "cluster", None)
        if cid is not None and cluster is not None and cluster.locks.needed():
            # Granted only when no other broker of the cluster holds the same ID.
            if not props.get("JMQShare", False):
                done = functools.partial(self._client_id_locked, pkt, str(cid))
                self._effect(
                    RunBlocking(cluster.locks.acquire_blocking, (f"clientid:{cid}",), done)
                )
                return
        self.reply(pkt, Status.OK)

    def _client_id_locked(
        self: Any, pkt: Packet, cid: str, result: Any, error: BaseException | None
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

    def on_create_destination(self: Any, pkt: Packet) -> None:
        try:
            name, dtype = dest_args(pkt)
            self._require(name, dtype, "create")
            dest = self.router.create_destination(name, dtype, self)
        except RouterError as exc:
            extra = None
            if exc.status == Status.CONFLICT:
                existing = self.router.lookup(*dest_args(pkt))
                extra = {"JMQDestType": JInt(existing.dest_type)} if existing else None
            self.reply(pkt, exc.status, extra, reason=exc.reason)
            return
        self.reply(pkt, Status.OK, {"JMQDestType": JInt(dest.dest_type)})

    def on_destroy_destination(self: Any, pkt: Packet) -> None:
        try:
            name, dtype = dest_args(pkt)
            self.router.destroy_destination(name, dtype, self)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        self.reply(pkt, Status.OK)

    def on_verify_destination(self: Any, pkt: Packet) -> None:
        try:
            name, dtype = dest_args(pkt)
            compile_or_400(pkt.properties.get("JMQSelector"))
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
            self.reply(
                pkt,
                Status.NOT_FOUND,
                {"JMQCanCreate": bool(can)},
                reason=f"destination {name} not found",
            )
            return
        self.reply(pkt, Status.OK, {"JMQDestType": JInt(dest.dest_type)})

    # -- access control ------------------------------------------------------------

    def _denied(self: Any, name: str, dtype: int, op: str) -> str | None:
        """Why the access rules refuse ``op`` on ``name`` (and the auto-creation it would
        cause), or None if they allow it (security/acl.py; docs/developers/protocol.md)."""
        acl = self.broker.access
        svc = self.service
        if dtype & DEST_TEMP or not acl.dest_enabled(svc.name):
            return None
        kind = "topic" if dtype & DEST_TOPIC else "queue"
        user = self.user or ""
        if op != "create":
            ok, why = acl.check_dest(svc.name, svc.type, kind, name, op, user, self.groups)
            if not ok:
                return f"access denied: {user} may not {op} on {kind} {name} ({why})"
        s = self.router.settings
        if not (s.autocreate_topic if kind == "topic" else s.autocreate_queue):
            return None
        dest = self.router.lookup(name, dtype)
        # Only what would be auto-created: an admin-created destination needs no create.
        if dest is None or (op == "create" and dest.auto):
            ok, why = acl.check_create(svc.name, svc.type, kind, name, user, self.groups)
            if not ok:
                return f"access denied: {user} may not create {kind} {name} ({why})"
        return None

    def _require(self: Any, name: str, dtype: int, op: str) -> None:
        why = self._denied(name, dtype, op)
        if why is not None:
            log.info("connection %s: %s", self.id, why)
            raise RouterError(Status.FORBIDDEN, why)

    def _has_producer(self: Any, name: str, dest_type: int) -> bool:
        topic = bool(dest_type & DEST_TOPIC)
        for sess in self.all_sessions():
            for prod in sess.producers.values():
                d = prod.destination
                if d.name == name and bool(d.dest_type & DEST_TOPIC) == topic:
                    return True
        return False

    def send_denied(self: Any, name: str, dest_type: int) -> str | None:
        """Why this connection may not send to the destination, or None: allowed where it
        registered a producer, else checked like ADD_PRODUCER; cached per destination
        and rule generation (a stream of messages, or of their reports, costs one rule
        look-up)."""
        gen = self.broker.access.generation
        if gen != self._acl_gen:
            self._acl_sends.clear()
            self._acl_gen = gen
        key = (name, dest_type)
        why = self._acl_sends.get(key)
        if why is None:
            if self._has_producer(name, dest_type):
                why = ""
            else:
                why = self._denied(name, dest_type, "produce") or ""
            self._acl_sends[key] = why
        return why or None

    def _send_allowed(self: Any, pkt: Packet, name: str, dest_type: int) -> bool:
        """A message to a destination this connection registered no producer on is
        checked like ADD_PRODUCER (send_denied); refused, it is answered or logged once."""
        why = self.send_denied(name, dest_type)
        if why is None:
            return True
        key = (name, dest_type)
        if pkt.flags & FLAG_A:
            self.reply(pkt, Status.FORBIDDEN, reason=why)
        elif key not in self._acl_logged:
            self._acl_logged.add(key)
            log.warning("connection %s: messages dropped: %s", self.id, why)
        return False

    # -- producers -----------------------------------------------------------------

    def on_add_producer(self: Any, pkt: Packet) -> None:
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
                "JMQProducerID": JLong(prod.id),
                "JMQSize": JInt(batch),
                "JMQBytes": JLong(-1),
                "JMQDestinationID": name,
            },
        )

    def on_delete_producer(self: Any, pkt: Packet) -> None:
        pid = pkt.properties.get("JMQProducerID")
        prod = self.router.producer(as_int(pid)) if pid is not None else None
        if prod is None or prod.session.link is not self:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no producer {pid}")
            return
        self.router.remove_producer(prod)
        self.reply(pkt, Status.OK)

    # -- consumers ---------------------------------------------------------------------

    def on_add_consumer(self: Any, pkt: Packet) -> None:
        props = pkt.properties
        try:
            name, dtype = dest_args(pkt)
            sess = self._session(pkt)
            if sess is None:
                raise RouterError(Status.NOT_FOUND, "unknown JMQSessionID")
            selector = compile_or_400(props.get("JMQSelector"))
            size = props.get("JMQSize")
            prefetch = int(size) if isinstance(size, int) else -1  # absent: no consumer flow
            durable = props.get("JMQDurableName")
            shared_name = props.get("JMQSharedSubscriptionName")
            self._require(name, dtype, "consume")
            cons = self.router.add_consumer(
                sess,
                name,
                dtype,
                selector=selector,
                no_local=bool(props.get("JMQNoLocal", False)),
                prefetch=prefetch,
                durable_name=str(durable) if durable else None,
                share=props.get("JMQShare") is True,
                jms_share=props.get("JMQJMSShare") is True,
                shared_name=str(shared_name) if shared_name is not None else None,
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
        if limit > 0 and (cons.prefetch <= 0 or cons.prefetch > limit):
            cons.prefetch = cons.credit = limit
        self.consumer_sessions[cons.id] = sess
        reply = {"JMQConsumerID": JLong(cons.id), "JMQDestType": JInt(cons.destination.dest_type)}
        if cons.prefetch > 0:
            reply["JMQSize"] = JInt(cons.prefetch)
        self.reply(pkt, Status.OK, reply)
        # Only now: a delivery before the reply would name a consumer the client lacks.
        cons.queue.dispatch(int(time.time() * 1000))

    def on_delete_consumer(self: Any, pkt: Packet) -> None:
        props = pkt.properties
        cid = props.get("JMQConsumerID")
        if cid is None:
            durable = props.get("JMQDurableName")
            if not durable:
                self.reply(pkt, Status.BAD_REQUEST, reason="JMQConsumerID is missing")
                return
            client_id = props.get("JMQClientID", self.client_id)
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
        if props.get("JMQBodyType") == 3 and len(body) >= 32:
            last = body[:32]
        self.router.remove_consumer(cons, last, bool(props.get("JMQRedeliverAll", False)))
        self.reply(pkt, Status.OK)

    # -- miscellany ---------------------------------------------------------------------

    def on_generate_uid(self: Any, pkt: Packet) -> None:
        n = pkt.properties.get("JMQQuantity", 1)
        if not isinstance(n, int) or not 0 < n <= 10000:
            self.reply(pkt, Status.BAD_REQUEST, reason=f"bad JMQQuantity {n}")
            return
        body = b"".join(_I64.pack(self.router.uids.next()) for _ in range(n))
        self.reply(pkt, Status.OK, {"JMQQuantity": JInt(n)}, body=body)

    def on_get_license(self: Any, pkt: Packet) -> None:
        self.reply(
            pkt,
            Status.OK,
            {
                "JMQLicense": "unl",
                "JMQLicenseDesc": f"{self.broker.product_name} (unlimited)",
            },
        )

    def on_info_request(self: Any, pkt: Packet) -> None:
        self.broker.answer_info_request(self, pkt)
