"""The message router: the coordinator of destinations, sessions, consumers and producers.

It holds the shared state (the destination, session, consumer, producer, transaction
and client-ID tables, the broker-wide totals, the DMQ) and does the plain moves itself:
creating and destroying destinations, sessions, producers and consumers, accepting a
message (:meth:`MessageRouter.route`) and browsing.  The rules with a subject of their
own live beside it, each in a module named for it, reached as the router's parts
(``router.subs``, ``router.txns``, ``router.acks``, ``router.limits``; the router keeps
no copies of their methods):

* broker/core/subscriptions.py -- durable and shared topic subscriptions, client IDs;
* broker/core/transaction_rules.py -- local and XA transactions (transaction_record.py: the record);
* broker/core/acks.py -- acknowledgements, redelivery, maxDeliveryCount;
* broker/core/limits.py -- destination and broker limits, evictions, the DMQ, expiry,
  producer flow control and admin pause;
* broker/core/recovery.py -- rebuilding everything from the message store at start.

Plug-in points, so new kinds of consumer and listener need nothing added here: a
remote consumer (a cluster link) is a :class:`~broker.core.dispatch.DeliveryTarget`
attached to a destination's delivery queue; a report generator (COA/COD/exception/
expiry reports) is a :class:`~broker.core.observers.MessageObserver` added to
``router.events``.

Plain objects driven by the server layer.  Every operation returns a protocol status
(and data) or raises :class:`RouterError` with one, so the caller can put it straight
into a reply.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Iterable

from broker.protocol.admin_types import ADMIN_QUEUE
from broker.protocol.destname import (
    INTERNAL_PREFIX,
    name_problem,
    queue_name_problem,
    topic_pattern_problem,
)
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    DMQ_NAME,
    FLAG_I,
    FLAG_R,
    FLAVOURS,
    AckMode,
    Status,
)
from broker.store.base import DestAdd, DestRemove, RecoveredState, Store

from . import topicnames
from .acks import Acknowledgements
from .context import CoreContext, RouterSettings
from .destination import (
    DEST_AUTO,
    Destination,
    QueueDestination,
    Subscription,
    TopicDestination,
)
from .dispatch import DeliveryQueue
from .drops import DropLog, DropReporter
from .errors import RouterError, now_ms
from .ids import UIDGenerator
from .limits import Limits
from .message import Entry, Message
from .metrics import note_consumers
from .observers import ClusterRules, RouterObservers
from .paging import Pager
from .recovery import recover
from .session import Consumer, Link, Producer, Session
from .subscriptions import Subscriptions
from .transaction_rules import TransactionManager

log = logging.getLogger("broker.router")

# A send that says it is sent again: R (our client, after a failover) or I (OpenMQ's).
_SENT_AGAIN = FLAG_R | FLAG_I


class MessageRouter:
    """Holds every destination and routes messages between producers and consumers."""

    def __init__(
        self,
        settings: RouterSettings | None = None,
        uids: UIDGenerator | None = None,
        observers: RouterObservers | None = None,
    ) -> None:
        # The shared state the parts are given (core/context.py); the router's tables
        # are the context's, under the names the layers above read.
        ctx = self.ctx = CoreContext(
            settings or RouterSettings(), uids or UIDGenerator(), observers or RouterObservers()
        )
        self.settings = ctx.settings
        self.uids = ctx.uids
        self.queues = ctx.queues
        self.topics = ctx.topics
        self.dmq = ctx.dmq
        self.producers = ctx.producers
        self.totals = ctx.totals
        self.consumers: dict[int, Consumer] = {}
        self.sessions: dict[int, Session] = {}
        self.browsers: dict[int, tuple[Destination, list[bytes]]] = {}
        # What the layers above hear or are asked (broker/core/observers.py): producer
        # flow, delayed messages' timer, the put check, transactions, destination and
        # consumer events, the cluster's rules.
        self.observers = ctx.observers
        # Message observers (broker/core/observers.py); the drop log is the first.
        self.events = ctx.events
        self.drops = DropLog(ctx.settings.drop_log_interval)
        self.events.add(DropReporter(self.drops))
        # The XA JMQAutoRollback default.
        self.xa_autorollback_all = False
        # Messages with a JMS 2.0 delivery delay wait here until their time.
        self.delayed: list[tuple[int, int, Message, int]] = []
        self._delayed_seq = itertools.count()
        # The parts with rules of their own (see the module docstring), each given the
        # context and the parts it uses.
        self.limits = Limits(ctx)
        self.acks = Acknowledgements(ctx, self.limits)
        self.subs = Subscriptions(ctx)
        self.txns = TransactionManager(ctx, self.acks, self)
        # The router's own moves on an entry are the context's.
        self.consumed = ctx.consumed
        self.forget = ctx.forget
        self.lookup = ctx.lookup

    @property
    def store(self) -> Store | None:
        """The message store, once attached (:meth:`attach_store`)."""
        return self.ctx.store

    @property
    def pager(self) -> Pager | None:
        """Pages waiting messages' bodies out when memory runs short (core/paging.py)."""
        return self.ctx.pager

    # -- destinations ---------------------------------------------------------

    def consumer(self, consumer_id: int) -> Consumer | None:
        """A local consumer by id (None when there is none)."""
        return self.consumers.get(consumer_id)

    def producer(self, producer_id: int) -> Producer | None:
        """A producer by id (None when there is none)."""
        return self.producers.get(producer_id)

    def browser(self, browser_id: int) -> tuple[Destination, list[bytes]] | None:
        """A queue browser's destination and the keys it still has to show."""
        return self.browsers.get(browser_id)

    def local_consumers(self) -> list[Consumer]:
        """Every consumer of this broker's clients, oldest first."""
        return list(self.consumers.values())

    def each_destination(self) -> list[Destination]:
        """Every destination, queues first (a copy: callers may remove as they go)."""
        return self.ctx.each_destination()

    def each_topic(self) -> Iterable[TopicDestination]:
        """Every topic (a view: callers must not add or remove topics meanwhile)."""
        return self.ctx.each_topic()

    def _new_destination(
        self,
        name: str,
        is_topic: bool,
        attributes: dict | None,
        *,
        temporary_owner: int | None = None,
        auto: bool = False,
    ) -> Destination:
        """Make a destination with the configured defaults under ``attributes``, wire it
        to the router and enter it in its table (not yet in the store)."""
        defaults = self.settings.topic_attributes if is_topic else self.settings.queue_attributes
        attrs = dict(defaults or {})
        attrs.update(attributes or {})
        cls = TopicDestination if is_topic else QueueDestination
        dest = cls(
            name, temporary_owner=temporary_owner, auto=auto, attributes=attrs, totals=self.totals
        )
        dest.on_dead = self.limits.dead
        dest.on_room = self.limits.room
        if temporary_owner is None:
            dest.store = self.store
        dest.pager = self.pager
        if isinstance(dest, TopicDestination):
            self.topics[name] = dest
        else:
            cluster = self.observers.cluster
            dest.claims = cluster.positions if cluster is not None else None
            self.queues[name] = dest
        return dest

    def restore_destination(
        self, name: str, dest_type: int, auto: bool, attributes: dict | None
    ) -> Destination:
        """A destination the message store already holds, made again at recovery."""
        return self._new_destination(name, bool(dest_type & DEST_TOPIC), attributes, auto=auto)

    def create_destination(
        self,
        name: str,
        dest_type: int,
        link: Link | None = None,
        *,
        auto: bool = True,
        attributes: dict | None = None,
    ) -> Destination:
        """CREATE_DESTINATION: returns the destination; raises RouterError on refusal."""
        if not name:
            raise RouterError(Status.BAD_REQUEST, "destination name is empty")
        # Every way a destination comes to be passes here (JMS create, producers,
        # consumers and sends that auto-create, the admin service, cluster peers).
        problem = name_problem(name)
        if problem is not None:
            log.info("destination refused: %s", problem)
            raise RouterError(Status.BAD_REQUEST, problem)
        is_topic = bool(dest_type & DEST_TOPIC)
        if not is_topic:
            # Before the auto-create and conflict checks: OpenMQ's broker answers 415
            # whatever else holds, so must we.
            problem = queue_name_problem(name)
            if problem is not None:
                log.info("destination refused: %s", problem)
                raise RouterError(Status.UNSUPPORTED_TYPE, problem)
        else:
            problem = topic_pattern_problem(name)
            if problem is not None:
                log.info("destination refused: %s", problem)
                raise RouterError(Status.NOT_ACCEPTABLE, problem)
        existing = self.lookup(name, dest_type)
        if existing is not None:
            raise RouterError(Status.CONFLICT, f"destination {name} already exists")
        temp_owner = None
        if dest_type & DEST_TEMP:
            if link is None:
                raise RouterError(Status.BAD_REQUEST, "temporary destination needs a connection")
            temp_owner = link.id
        elif auto:
            s = self.settings
            if name == topicnames.LOG_TOPIC and is_topic:
                # The broker's log topic, made for its subscribers as the metrics topics.
                attributes = topicnames.log_topic_attributes(s.log_topic_capacity)
            elif name.startswith(INTERNAL_PREFIX) and name != DMQ_NAME:
                # Only the metrics topics, made (whatever auto-creation allows) with
                # attributes of their own.
                attributes = topicnames.internal_attributes(
                    name, is_topic, enabled=s.metrics_topics, may_watch=self._may_watch
                )
            elif not (s.autocreate_topic if is_topic else s.autocreate_queue) and not (
                name == ADMIN_QUEUE and not is_topic
            ):
                # The admin queue is made on demand whatever auto-creation says (OpenMQ's
                # always exists): with imq.autocreate.queue=false, imqcmd would otherwise
                # be locked out once an idle admin queue was reaped.
                raise RouterError(
                    Status.NOT_FOUND, f"{name} does not exist and auto-creation is disabled"
                )
        if temp_owner is None and not auto:
            self.check_change("destination", name)
        dest = self._new_destination(
            name,
            is_topic,
            attributes,
            temporary_owner=temp_owner,
            auto=auto and temp_owner is None,
        )
        if dest_type & FLAVOURS:
            dest.flavour = dest_type & FLAVOURS
        if dest.store is not None:
            dest.store.submit((DestAdd(name, self._stored_type(dest), dict(dest.attributes)),))
        log.info(
            "created %s %s%s",
            "topic" if is_topic else "queue",
            name,
            " (temporary)" if temp_owner else " (auto-created)" if dest.auto else "",
        )
        self._event("destination.created", {"name": name, "type": dest.dest_type})
        return dest

    def _may_watch(self, name: str, dest_type: int) -> bool:
        # A destination's metrics topic: it exists, or it may be auto-created.
        s = self.settings
        can = s.autocreate_topic if dest_type & DEST_TOPIC else s.autocreate_queue
        return can or self.lookup(name, dest_type) is not None

    def ensure_destination(self, name: str, dest_type: int, link: Link | None) -> Destination:
        """The destination, auto-creating it when allowed (producers, consumers)."""
        dest = self.lookup(name, dest_type)
        if dest is None:
            dest = self.create_destination(
                name, dest_type & ~DEST_TEMP if not dest_type & DEST_TEMP else dest_type, link
            )
        return dest

    def destroy_destination(self, name: str, dest_type: int, link: Link | None = None) -> None:
        dest = self.lookup(name, dest_type)
        if dest is None:
            raise RouterError(Status.NOT_FOUND, f"destination {name} not found")
        if name == DMQ_NAME:
            raise RouterError(Status.FORBIDDEN, "the dead message queue cannot be destroyed")
        if dest.is_temporary and link is not None and dest.temporary_owner != link.id:
            raise RouterError(
                Status.FORBIDDEN, f"temporary destination {name} belongs to another connection"
            )
        if dest.consumers():
            raise RouterError(Status.CONFLICT, f"destination {name} has active consumers")
        if not dest.auto and not dest.is_temporary:
            self.check_change("destination", name)
        self._remove_destination(dest)

    def update_destination(self, dest: Destination, attributes: dict) -> None:
        """Admin UPDATE_DESTINATION: the new attribute values apply at once (limits are
        checked on the next send, backups are promoted into new active places, producers
        held by a limit that no longer holds are released) and are stored."""
        if not dest.auto and not dest.is_temporary:
            self.check_change("destination", dest.name)
        dest.attributes.update(attributes)
        if dest.store is not None:
            dest.store.submit((DestAdd(dest.name, self._stored_type(dest), dict(dest.attributes)),))
        if isinstance(dest, QueueDestination):
            dest.promote_backups()
            dest.dq.dispatch(now_ms())
        if dest.waiting_producers:
            self.limits.room(dest)  # the new limits may give them room
        log.info("updated %s %s: %s", "queue" if dest.is_queue else "topic", dest.name, attributes)
        self._event("destination.updated", {"name": dest.name, "type": dest.dest_type})

    def _remove_destination(self, dest: Destination) -> None:
        if isinstance(dest, QueueDestination):
            self.queues.pop(dest.name, None)
            for e in dest.dq.clear():
                self.forget(e)
            dest.dq.active = False
        else:
            assert isinstance(dest, TopicDestination)
            self.topics.pop(dest.name, None)
            for sub in list(dest.subscriptions):
                self.subs.remove(sub)
        if dest.store is not None:
            dest.store.submit((DestRemove(dest.name, dest.dest_type),))
        log.info("destroyed %s %s", "queue" if dest.is_queue else "topic", dest.name)
        self._event(
            "destination.destroyed", {"name": dest.name, "type": dest.dest_type, "auto": dest.auto}
        )

    def reap_idle(self, now: float, reaptime: float) -> list[str]:
        """Destroy auto-created destinations that had no consumers, producers or
        messages for ``reaptime`` seconds (the administrator guide's rule)."""
        reaped = []
        for dest in self.each_destination():
            if not dest.auto:
                continue
            if (
                dest.msg_count
                or dest.producers
                or dest.consumers()
                or (isinstance(dest, TopicDestination) and dest.durables)
            ):
                dest.idle_since = None
                continue
            if dest.idle_since is None:
                dest.idle_since = now
            elif now - dest.idle_since >= reaptime:
                self._remove_destination(dest)
                reaped.append(dest.name)
        return reaped

    # -- the message store ------------------------------------------------------

    @staticmethod
    def _stored_type(dest: Destination) -> int:
        return dest.dest_type | (DEST_AUTO if dest.auto else 0)

    def attach_store(self, store: Store) -> None:
        """Persist from now on (before any client connects)."""
        self.ctx.store = store
        self.dmq.store = store

    def attach_pager(self, pager: Pager | None) -> None:
        """Page waiting messages' bodies out with ``pager`` from now on (every
        destination, subscription and the DMQ; None: never)."""
        self.ctx.pager = pager
        for dest in self.each_destination():
            dest.pager = pager

    def delivery_queues(self) -> list[DeliveryQueue]:
        """Every delivery queue: each queue's, each topic subscription's."""
        return [dq for dest in self.each_destination() for dq in dest.delivery_queues()]

    def recover(self, state: RecoveredState) -> dict[str, int]:
        """Rebuild destinations, durable subscriptions, messages and transactions from
        the store (broker/core/recovery.py).  Returns counts for the log."""
        return recover(self, state)

    # -- sessions -------------------------------------------------------------

    def create_session(self, link: Link, ack_mode: int) -> Session:
        if ack_mode not in (0, 1, 2, 3, AckMode.NO_ACKNOWLEDGE):
            raise RouterError(Status.BAD_REQUEST, f"invalid acknowledge mode {ack_mode}")
        sess = Session(self.uids.next(), link, ack_mode)
        self.sessions[sess.id] = sess
        return sess

    def destroy_session(self, sess: Session) -> None:
        self.txns.rollback_session(sess)
        for cons in list(sess.consumers.values()):
            self.remove_consumer(cons, None, redeliver_all=True)
        for prod in list(sess.producers.values()):
            self.remove_producer(prod)
        self.acks.return_unacked(sess, list(sess.unacked.values()), redelivered=True)
        sess.unacked.clear()
        self.sessions.pop(sess.id, None)

    # -- producers ------------------------------------------------------------

    def add_producer(self, sess: Session, name: str, dest_type: int) -> Producer:
        dest = self.ensure_destination(name, dest_type, sess.link)
        limit = dest.limit("maxNumProducers")
        if limit == 0:
            raise RouterError(Status.CONFLICT, f"{name} takes no producers")
        if limit > 0 and len(dest.producers) >= limit:
            raise RouterError(
                Status.CONFLICT, f"{name} already has its maximum of {limit} producers"
            )
        prod = Producer(self.uids.next(), sess, dest, self.settings.producer_batch)
        dest.producers[prod.id] = prod
        sess.producers[prod.id] = prod
        self.producers[prod.id] = prod
        return prod

    def remove_producer(self, prod: Producer) -> None:
        dest = prod.destination
        dest.producers.pop(prod.id, None)
        prod.session.producers.pop(prod.id, None)
        self.producers.pop(prod.id, None)
        if prod.granted and dest.waiting_producers:
            self.limits.room(dest)  # the credit it held is room for the others

    # -- consumers ------------------------------------------------------------

    def add_consumer(
        self,
        sess: Session,
        name: str,
        dest_type: int,
        *,
        selector=None,
        no_local: bool = False,
        prefetch: int = -1,
        durable_name: str | None = None,
        share: bool = False,
        jms_share: bool = False,
        shared_name: str | None = None,
        position: int | None = None,
    ) -> Consumer:
        """ADD_CONSUMER.  ``share`` is OpenMQ's JMQShare, ``jms_share`` + ``shared_name``
        a JMS 2.0 shared subscription (JMQJMSShare, JMQSharedSubscriptionName); both
        only matter on topics.  ``position``: a queue consumer's place, taken in the
        cluster beforehand (core/positions.py); None: the first free one."""
        dest = self.lookup(name, dest_type)
        if dest is None:
            if dest_type & DEST_TEMP:
                raise RouterError(Status.NOT_FOUND, f"temporary destination {name} does not exist")
            dest = self.ensure_destination(name, dest_type, sess.link)
        if dest.is_temporary and dest.temporary_owner != sess.link.id:
            raise RouterError(
                Status.NOT_ALLOWED,
                f"temporary destination {name} was not created on this connection",
            )
        if isinstance(dest, QueueDestination):
            cid = self.uids.next()
            cons = Consumer(
                cid, sess, dest, dest.dq, selector, no_local, prefetch, self.events, self.acks
            )
            if not dest.attach(cons, position):
                raise RouterError(
                    Status.CONFLICT,
                    f"queue {name} already has its maximum of "
                    f"{dest.limit('maxNumActiveConsumers')} active and "
                    f"{dest.limit('maxNumBackupConsumers', 0)} backup consumers",
                )
        else:
            assert isinstance(dest, TopicDestination)
            sub = self.subs.subscription_for(
                sess, dest, selector, no_local, durable_name, share, jms_share, shared_name
            )
            cons = Consumer(
                self.uids.next(),
                sess,
                dest,
                sub.queue,
                None,
                no_local,
                prefetch,
                self.events,
                self.acks,
                sub,
            )
            sub.attach(cons)
        note_consumers(dest)
        cid = cons.id
        sess.consumers[cid] = cons
        self.consumers[cid] = cons
        if self.observers.consumers:
            self.observers.consumer_event("added", cons)
        # No dispatch here: the caller replies first, or deliveries would name a
        # consumer the client does not know yet.
        return cons

    def remove_consumer(
        self, cons: Consumer, last_delivered: bytes | None, redeliver_all: bool = False
    ) -> None:
        """DELETE_CONSUMER: messages the application never saw go back at once."""
        if cons.closed:
            return
        cons.closed = True
        sub = cons.subscription
        if sub is not None:
            sub.detach(cons)
        elif isinstance(cons.destination, QueueDestination):
            # An active consumer's place goes to the oldest backup; the messages it
            # had not acknowledged are put back first (below), ahead of the rest.
            cons.destination.detach(cons)
        else:
            cons.queue.remove_consumer(cons)
        cons.session.consumers.pop(cons.id, None)
        self.consumers.pop(cons.id, None)
        self.acks.consumer_closed(cons, last_delivered, redeliver_all)
        if self.observers.consumers:
            self.observers.consumer_event("removed", cons)
        if sub is not None and sub.durable_key is None and not sub.queue.consumers:
            # A non-durable subscription goes with its last consumer.
            self.subs.remove(sub)
        else:
            cons.queue.dispatch(now_ms())
        if cons.destination.waiting_producers:
            self.limits.consumers_changed(cons.destination)

    # -- messages ------------------------------------------------------------

    def route(
        self, msg: Message, link: Link | None, dest_type: int, *, internal: bool = False
    ) -> Destination:
        """Accept a producer's message; raises RouterError with the SEND_REPLY status.
        ``internal`` (the broker's own admin replies) passes the broker-wide limits, so an
        administrator can still work on a broker that is full."""
        check = self.observers.put_check
        if link is not None and check is not None and not internal:
            check.check_put(msg)
        dest = self.lookup(msg.destination, dest_type)
        if dest is None:
            try:
                dest = self.ensure_destination(msg.destination, dest_type, link)
            except RouterError as exc:
                if self.events.unroutable:
                    self.events.notify(
                        self.events.unroutable, msg.destination, dest_type, msg, exc.reason
                    )
                raise
        if msg.base_flags & _SENT_AGAIN and msg.persistent and self._stored(msg.key):
            # OpenMQ's broker answers a message it already holds with 304 and keeps the
            # one it has (a client resending after a failover, whose first send was
            # stored but not confirmed).
            raise RouterError(Status.NOT_MODIFIED, "Message already exists on the broker")
        self.limits.check_send(dest, msg, internal)
        t = now_ms()
        if msg.delivery_time > t:
            heapq.heappush(
                self.delayed, (msg.delivery_time, next(self._delayed_seq), msg, dest_type)
            )
            if self.pager is not None:
                self.pager.waiting(msg)
            timer = self.observers.delay_timer
            if timer is not None:
                timer.delayed_due(self.delayed[0][0])
            return dest
        arrived = self.events.arrived
        if arrived:
            self.events.notify(arrived, dest, msg)
        dest.publish(msg, t)
        return dest

    def _stored(self, key: bytes) -> bool:
        store = self.store
        return store is not None and store.holds(key)

    def deliver_to(self, sub: Subscription, msg: Message) -> None:
        """Put a message the broker made in one subscription of its topic only (a
        metrics topic's first map for a new subscriber); raises RouterError when the
        topic's limits refuse it."""
        topic = sub.topic
        self.limits.check_send(topic, msg, True)
        topic.publish_one(sub, msg, now_ms())

    def release_due(self, now: int | None = None) -> int | None:
        """Publish delayed messages whose time has come; returns the next due time."""
        t = now_ms() if now is None else now
        delayed = self.delayed
        while delayed and delayed[0][0] <= t:
            _due, _n, msg, dest_type = heapq.heappop(delayed)
            dest = self.lookup(msg.destination, dest_type)
            if dest is None:
                log.info("delayed message for %s dropped: destination is gone", msg.destination)
                continue
            arrived = self.events.arrived
            if arrived:
                self.events.notify(arrived, dest, msg)
            dest.publish(msg, t)
        return delayed[0][0] if delayed else None

    def purged(self, entries: Iterable[Entry]) -> int:
        """Entries an administrator purged: accounted out, settled in the store and
        counted in numPurgedMsgs; returns how many."""
        n = 0
        for entry in entries:
            self.forget(entry)
            entry.owner.stats.purged += 1
            n += 1
        return n

    def purge(self, dest: Destination) -> int:
        """Admin PURGE_DESTINATION: drop every message waiting in ``dest`` (for a topic:
        in each of its subscriptions), as :meth:`purged`; the ones delivered and not yet
        acknowledged stay with their consumers.  Returns how many were dropped."""
        n = sum(self.purged(q.clear()) for q in dest.delivery_queues())
        if self.observers.router_events:
            self._event("destination.purged", {"name": dest.name, "type": dest.dest_type})
        return n

    def purge_subscription(self, sub: Subscription) -> int:
        """Admin PURGE_DURABLE: drop the messages waiting for a topic subscription (those
        delivered and not yet acknowledged stay); returns how many."""
        return self.purged(sub.queue.clear())

    def delete_message(self, dest: Destination, message_id: str) -> int:
        """Admin DELETE_MESSAGE: take the waiting copies of the message with JMSMessageID
        ``message_id`` out of ``dest`` and settle them as if acknowledged (consumed:
        accounted out, settled in the store, observers told).  Returns how many copies
        were removed; 0 when none waits (it may be delivered and unacknowledged, see
        :func:`broker.core.queries.held_messages`, or not there at all)."""
        removed: list[Entry] = []
        # Packed entries (runs.py) are unpacked only in the runs holding a key with the
        # id's timestamp (its last part): the others are not looked into.
        try:
            stamp: bytes | None = int(message_id.rsplit("-", 1)[1]).to_bytes(8, "big", signed=True)
        except (IndexError, ValueError, OverflowError):
            stamp = None
        for q in dest.delivery_queues():
            removed += q.remove_where(
                lambda e: e.msg.message_id == message_id,
                None if stamp is None else (lambda run: run.has_key(stamp)),
            )
        for entry in removed:
            self.consumed(entry)
        return len(removed)

    # -- expiry ---------------------------------------------------------------------

    def reclaim_expired(self, now: int | None = None) -> int:
        """Remove expired messages still waiting in every destination (the periodic
        expiry job calls this); they go to the DMQ where useDMQ says so."""
        return sum(to_dmq + gone for _, _, to_dmq, gone in self.limits.reclaim_expired_report(now))

    # -- connections ---------------------------------------------------------

    def connection_closed(self, link: Link, sessions: Iterable[Session]) -> None:
        """Release everything a connection held: sessions, temp destinations, client ID."""
        self.txns.release_transactions(link)
        for sess in list(sessions):
            self.destroy_session(sess)
        for dest in self.each_destination():
            if dest.temporary_owner == link.id:
                self._remove_destination(dest)
        self.subs.release_client_id(link)
        if self.observers.router_events:
            self._event("connection.closed", {"id": link.id})

    def redispatch(self, sessions: Iterable[Session]) -> None:
        """A connection or session can take deliveries again."""
        t = now_ms()
        seen = set()
        for sess in sessions:
            for cons in list(sess.consumers.values()):
                q = cons.queue
                if id(q) not in seen:
                    seen.add(id(q))
                    q.dispatch(t)

    # -- browsing ---------------------------------------------------------------

    def browse(self, name: str, dest_type: int, selector) -> tuple[int, list[bytes]]:
        """BROWSE: a browser id and the SysMessageIDs of the queue's messages, in order."""
        dest = self.lookup(name, dest_type or DEST_QUEUE)
        if dest is None or not isinstance(dest, QueueDestination):
            raise RouterError(Status.NOT_FOUND, f"queue {name} not found")
        t = now_ms()
        keys = []
        for e in dest.dq:
            if e.msg.is_expired(t):
                continue
            if selector is None or selector.matches(e.msg.selector_values()):
                keys.append(e.msg.key)
        bid = self.uids.next()
        self.browsers[bid] = (dest, keys)
        return bid, keys

    def find_messages(self, dest: Destination, keys: list[bytes]) -> list[Message]:
        """The still-existing messages among ``keys`` (pending or delivered, not acked)."""
        if not isinstance(dest, QueueDestination):
            return []
        wanted = set(keys)
        found: dict[bytes, Message] = {}
        for e in dest.dq.find(wanted):
            found[e.msg.key] = e.msg
        if len(found) < len(wanted):
            for sess in self.sessions.values():
                for e in sess.unacked.values():
                    if e.owner is dest and e.msg.key in wanted:
                        found[e.msg.key] = e.msg
        return [found[k] for k in keys if k in found]

    # -- events ---------------------------------------------------------------

    def attach_cluster(self, cluster: ClusterRules) -> None:
        """This broker is part of a cluster from now on: ``cluster`` guards the changes
        its master broker records and claims queue consumer positions."""
        self.observers.cluster = cluster
        for queue in self.queues.values():
            queue.claims = cluster.positions

    def check_change(self, kind: str, name: str) -> None:
        """Raise RouterError when the cluster refuses the change."""
        self.observers.check_change(kind, name)

    def _event(self, kind: str, data: dict) -> None:
        self.observers.router_event(kind, data)


__all__ = ["MessageRouter", "RouterSettings"]
