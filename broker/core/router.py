"""The message router: the coordinator of destinations, sessions, consumers and producers.

It holds the shared state (the destination, session, consumer, producer, transaction
and client-ID tables, the broker-wide totals, the DMQ) and does the plain moves itself:
creating and destroying sessions, producers and consumers, accepting a message
(:meth:`MessageRouter.route`) and browsing.  The rules with a subject of their own live
beside it, each in a module named for it, reached as the router's parts (``router.dests``,
``router.subs``, ``router.txns``, ``router.acks``, ``router.limits``; the router keeps
no copies of their methods, and offers the destination moves the layers above call under
their old names, ``create_destination`` and the like, as the part's own bound methods):

* broker/core/destination_rules.py -- making, changing, destroying and reaping
  destinations (the name rules, auto-creation, the broker's own topics);
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

from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    FLAG_I,
    FLAG_R,
    AckMode,
    Status,
)
from broker.store.base import RecoveredState, Store

from .acks import Acknowledgements
from .context import CoreContext, RouterSettings
from .destination import (
    Destination,
    QueueDestination,
    Subscription,
    TopicDestination,
)
from .destination_rules import DestinationRules
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
        self.dests = DestinationRules(ctx, self.limits, self.subs)
        self.txns = TransactionManager(ctx, self.acks, self)
        # The destination moves the layers above ask of the façade are the part's.
        self.restore_destination = self.dests.restore
        self.create_destination = self.dests.create
        self.ensure_destination = self.dests.ensure
        self.destroy_destination = self.dests.destroy
        self.update_destination = self.dests.update
        self.reap_idle = self.dests.reap_idle
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

    # -- lookups ---------------------------------------------------------------

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

    # -- the message store ------------------------------------------------------

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
                self.dests.remove(dest)
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
