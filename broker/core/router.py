"""The message router: destinations, sessions, consumers, producers and acknowledgements.

Plain objects driven by the server layer.  Every operation returns a protocol status
(and data) instead of raising, so the caller can put it straight into a reply.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    AckMode,
    LimitBehavior,
    Status,
    TransactionState,
)

from . import dmq
from .destination import Destination, QueueDestination, Subscription, TopicDestination, Totals
from .dmq import DMQ_NAME
from .ids import UIDGenerator
from .message import Entry, Message
from .session import Consumer, Link, Producer, Session
from .transaction import Transaction

log = logging.getLogger("broker.router")

ADMIN_QUEUE = "__JMQAdmin"


def now_ms() -> int:
    return int(time.time() * 1000)


class RouterError(Exception):
    """An operation refused with a protocol status and a reason for JMQReason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class RouterSettings:
    """The broker properties the router consults (read once at start-up)."""

    autocreate_queue: bool = True
    autocreate_topic: bool = True
    queue_attributes: dict | None = None
    topic_attributes: dict | None = None
    producer_batch: int = 1000
    max_message_size: int = 70 * 1024 * 1024
    system_max_count: int = -1
    system_max_size: int = -1
    # Named in JMS_SUN_DMQ_DEAD_BROKER / _PRODUCING_BROKER of dead messages.
    broker_name: str = "imqbroker"
    dmq_truncate_body: bool = False
    log_dead_messages: bool = False


@dataclass
class ClientIDClaim:
    link_id: int
    shared: bool
    namespace: str | None


class MessageRouter:
    """Holds every destination and routes messages between producers and consumers."""

    def __init__(
        self, settings: RouterSettings | None = None, uids: UIDGenerator | None = None
    ) -> None:
        self.settings = settings or RouterSettings()
        self.uids = uids or UIDGenerator()
        self.queues: dict[str, QueueDestination] = {}
        self.topics: dict[str, TopicDestination] = {}
        self.consumers: dict[int, Consumer] = {}
        self.producers: dict[int, Producer] = {}
        self.sessions: dict[int, Session] = {}
        self.client_ids: dict[str, list[ClientIDClaim]] = {}
        self.totals = Totals()
        self.browsers: dict[int, tuple[Destination, list[bytes]]] = {}
        self.transactions: dict[int, Transaction] = {}
        # Messages with a JMS 2.0 delivery delay wait here until their time.
        self.delayed: list[tuple[int, int, Message, int]] = []
        self._delayed_seq = itertools.count()
        # Told the earliest due time whenever a delayed message is queued (the server
        # schedules a timer with it); None means someone polls release_due().
        self.on_delayed: Callable[[int], None] | None = None
        self.dmq = QueueDestination(DMQ_NAME, totals=self.totals, attributes=dmq.DMQ_DEFAULTS)
        self.dmq.is_dmq = True
        self.queues[DMQ_NAME] = self.dmq
        # Called with (link, producer id) when a FLOW_CONTROL destination has room again.
        self.on_producer_room: Callable[[object, int], None] | None = None
        self.listeners: list[Callable[[str, dict], None]] = []

    # -- destinations ---------------------------------------------------------

    def lookup(self, name: str, dest_type: int) -> Destination | None:
        if dest_type & DEST_TOPIC:
            return self.topics.get(name)
        return self.queues.get(name)

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
        is_topic = bool(dest_type & DEST_TOPIC)
        existing = self.lookup(name, dest_type)
        if existing is not None:
            raise RouterError(Status.CONFLICT, f"destination {name} already exists")
        temp_owner = None
        if dest_type & DEST_TEMP:
            if link is None:
                raise RouterError(Status.BAD_REQUEST, "temporary destination needs a connection")
            temp_owner = link.id
        elif auto:
            if name.startswith("mq.") and name != DMQ_NAME:
                raise RouterError(Status.FORBIDDEN, f"{name}: names starting with mq. are reserved")
            allowed = self.settings.autocreate_topic if is_topic else self.settings.autocreate_queue
            if not allowed:
                raise RouterError(
                    Status.NOT_FOUND, f"{name} does not exist and auto-creation is disabled"
                )
        defaults = self.settings.topic_attributes if is_topic else self.settings.queue_attributes
        attrs = dict(defaults or {})
        attrs.update(attributes or {})
        cls = TopicDestination if is_topic else QueueDestination
        dest = cls(
            name,
            temporary_owner=temp_owner,
            auto=auto and temp_owner is None,
            attributes=attrs,
            totals=self.totals,
        )
        dest.on_dead = self._dead
        dest.on_room = self._room
        (self.topics if is_topic else self.queues)[name] = dest  # type: ignore[index]
        log.info(
            "created %s %s%s",
            "topic" if is_topic else "queue",
            name,
            " (temporary)" if temp_owner else " (auto-created)" if dest.auto else "",
        )
        self._event("destination.created", {"name": name, "type": dest.dest_type})
        return dest

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
        self._remove_destination(dest)

    def _remove_destination(self, dest: Destination) -> None:
        if isinstance(dest, QueueDestination):
            self.queues.pop(dest.name, None)
            for e in dest.dq.clear():
                self._forget(e)
            dest.dq.active = False
        else:
            assert isinstance(dest, TopicDestination)
            self.topics.pop(dest.name, None)
            for sub in list(dest.subscriptions):
                for e in dest.remove_subscription(sub):
                    self._forget(e)
        log.info("destroyed %s %s", "queue" if dest.is_queue else "topic", dest.name)
        self._event("destination.destroyed", {"name": dest.name})

    # -- sessions -------------------------------------------------------------

    def create_session(self, link: Link, ack_mode: int) -> Session:
        if ack_mode not in (0, 1, 2, 3, AckMode.NO_ACKNOWLEDGE):
            raise RouterError(Status.BAD_REQUEST, f"invalid acknowledge mode {ack_mode}")
        sess = Session(self.uids.next(), link, ack_mode)
        self.sessions[sess.id] = sess
        return sess

    def destroy_session(self, sess: Session) -> None:
        self.rollback_session(sess)
        for cons in list(sess.consumers.values()):
            self.remove_consumer(cons, None, redeliver_all=True)
        for prod in list(sess.producers.values()):
            self.remove_producer(prod)
        self._return_unacked(sess, list(sess.unacked.values()), redelivered=True)
        sess.unacked.clear()
        self.sessions.pop(sess.id, None)

    # -- producers ------------------------------------------------------------

    def add_producer(self, sess: Session, name: str, dest_type: int) -> Producer:
        dest = self.ensure_destination(name, dest_type, sess.link)
        limit = dest.limit("maxNumProducers")
        if limit >= 0 and len(dest.producers) >= limit:
            raise RouterError(
                Status.CONFLICT, f"{name} already has its maximum of {limit} producers"
            )
        prod = Producer(self.uids.next(), sess, dest, self.settings.producer_batch)
        dest.producers[prod.id] = prod
        sess.producers[prod.id] = prod
        self.producers[prod.id] = prod
        return prod

    def remove_producer(self, prod: Producer) -> None:
        prod.destination.producers.pop(prod.id, None)
        prod.session.producers.pop(prod.id, None)
        self.producers.pop(prod.id, None)

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
    ) -> Consumer:
        """ADD_CONSUMER.  ``share`` is OpenMQ's JMQShare, ``jms_share`` + ``shared_name``
        a JMS 2.0 shared subscription (JMQJMSShare, JMQSharedSubscriptionName); both
        only matter on topics."""
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
            cons = Consumer(cid, sess, dest, dest.dq, selector, no_local, prefetch, self)
            if not dest.attach(cons):
                raise RouterError(
                    Status.CONFLICT,
                    f"queue {name} already has its maximum of "
                    f"{dest.limit('maxNumActiveConsumers')} active and "
                    f"{dest.limit('maxNumBackupConsumers', 0)} backup consumers",
                )
        else:
            assert isinstance(dest, TopicDestination)
            sub = self._subscription_for(
                sess, dest, selector, no_local, durable_name, share, jms_share, shared_name
            )
            cons = Consumer(
                self.uids.next(), sess, dest, sub.queue, None, no_local, prefetch, self, sub
            )
            sub.attach(cons)
        cid = cons.id
        sess.consumers[cid] = cons
        self.consumers[cid] = cons
        # No dispatch here: the caller replies first, or deliveries would name a
        # consumer the client does not know yet.
        return cons

    def _subscription_for(
        self,
        sess: Session,
        topic: TopicDestination,
        selector,
        no_local: bool,
        durable_name: str | None,
        share: bool = False,
        jms_share: bool = False,
        shared_name: str | None = None,
    ) -> Subscription:
        """The subscription a new topic consumer attaches to, keyed as OpenMQ does:
        a plain consumer gets its own; a durable one is (client ID, durable name);
        JMQShare on a non-durable: (client ID, topic, selector); a JMS 2.0 shared
        one: (client ID or None, shared subscription name), or with a durable name
        the durable (client ID or None, durable name)."""
        if share and jms_share:
            raise RouterError(Status.BAD_REQUEST, "both JMQShare and JMQJMSShare are set")
        mode = "jms" if jms_share else "mq" if share else None
        client_id = sess.link.client_id or None
        if topic.is_temporary and (durable_name is not None or mode is not None):
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"temporary topic {topic.name} cannot have durable or shared subscriptions",
            )
        if durable_name is None:
            if mode is None:
                sub = Subscription(topic, selector, no_local, sess.link.id)
                topic.add_subscription(sub)
                return sub
            if mode == "jms":
                if not shared_name or not shared_name.strip():
                    raise RouterError(
                        Status.PRECONDITION_FAILED,
                        "a shared subscription needs a name (JMQSharedSubscriptionName)",
                    )
                key: tuple = ("jms", client_id, shared_name)
                what = f"shared subscription {shared_name}"
                existing = self._find_shared(key)
            else:
                if client_id is None:
                    raise RouterError(
                        Status.PRECONDITION_FAILED,
                        "a shared (JMQShare) non-durable subscription needs a client ID",
                    )
                text = selector.text if selector is not None else None
                key = ("mq", client_id, topic.name, text)
                what = f"shared subscription of {client_id} on {topic.name}"
                existing = topic.shared.get(key)
            if existing is not None:
                self._check_join(existing, topic, selector, no_local, mode, what)
                return existing
            sub = Subscription(topic, selector, no_local, sess.link.id, share=mode, shared_key=key)
            topic.add_subscription(sub)
            return sub
        if client_id is None and mode != "jms":
            raise RouterError(
                Status.PRECONDITION_FAILED,
                "a durable subscription needs a client ID on the connection",
            )
        dkey = (client_id, durable_name)
        existing = self._find_durable(dkey)
        if existing is not None:
            what = f"durable subscription {durable_name}"
            if existing.queue.consumers:
                self._check_join(existing, topic, selector, no_local, mode, what)
                return existing
            if (existing.share == "jms") != (mode == "jms"):
                # JMS 2.0: shared and unshared durable subscriptions may not share a name.
                raise RouterError(
                    Status.CONFLICT,
                    f"{what} exists as a"
                    f"{' shared' if existing.share == 'jms' else 'n unshared'} subscription",
                )
            changed = (
                existing.topic is not topic
                or existing.selector_text != (selector.text if selector else None)
                or existing.no_local != no_local
            )
            if not changed:
                existing.share = mode
                return existing
            # JMS: a changed subscription is the old one deleted and a new one made.
            for e in existing.topic.remove_subscription(existing):
                self._forget(e)
        sub = Subscription(topic, selector, no_local, sess.link.id, dkey, share=mode)
        topic.add_subscription(sub)
        return sub

    @staticmethod
    def _check_join(
        sub: Subscription,
        topic: TopicDestination,
        selector,
        no_local: bool,
        mode: str | None,
        what: str,
    ) -> None:
        """A consumer joining a subscription that has consumers: 409 unless all share it
        the same way, on the same topic, selector and noLocal, within maxNumSharedConsumers."""
        if sub.share is None or mode is None:
            raise RouterError(Status.CONFLICT, f"{what} is in use and not shared")
        if sub.share != mode:
            raise RouterError(
                Status.CONFLICT,
                f"{what} is shared by {'JMS 2.0' if sub.share == 'jms' else 'JMQShare'} consumers",
            )
        if sub.topic is not topic:
            raise RouterError(
                Status.CONFLICT, f"{what} is in use on another topic ({sub.topic.name})"
            )
        if sub.selector_text != (selector.text if selector is not None else None):
            raise RouterError(Status.CONFLICT, f"{what} is in use with a different selector")
        if sub.no_local != no_local:
            raise RouterError(Status.CONFLICT, f"{what} is in use with a different noLocal")
        limit = topic.limit("maxNumSharedConsumers")
        if 0 <= limit <= len(sub.queue.consumers):
            raise RouterError(
                Status.CONFLICT, f"{what} already has its maximum of {limit} shared consumers"
            )

    def _find_durable(self, key: tuple[str | None, str]) -> Subscription | None:
        for t in self.topics.values():
            sub = t.durables.get(key)
            if sub is not None:
                return sub
        return None

    def _find_shared(self, key: tuple) -> Subscription | None:
        for t in self.topics.values():
            sub = t.shared.get(key)
            if sub is not None:
                return sub
        return None

    def unsubscribe(self, client_id: str | None, durable_name: str) -> None:
        """Delete a durable subscription (409 while any consumer is attached).  Without a
        client ID only a JMS 2.0 shared durable subscription made without one is found."""
        sub = self._find_durable((client_id or None, durable_name))
        if sub is None:
            raise RouterError(
                Status.NOT_FOUND,
                f"no durable subscription {durable_name}"
                + (f" for client ID {client_id}" if client_id else " without a client ID"),
            )
        if sub.queue.consumers:
            raise RouterError(Status.CONFLICT, f"durable subscription {durable_name} is in use")
        for e in sub.topic.remove_subscription(sub):
            self._forget(e)

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
        sess = cons.session
        mine = [(k, e) for k, e in sess.unacked.items() if k[0] == cons.id]
        if redeliver_all:
            back = mine
        elif last_delivered is not None:
            # Prefetched after the last message the application saw: not really delivered.
            back = []
            seen = False
            for k, e in mine:
                if seen:
                    back.append((k, e))
                if k[1] == last_delivered:
                    seen = True
            if not seen:
                back = []
        else:
            back = []
        for k, _e in back:
            del sess.unacked[k]
        if back:
            unseen = not redeliver_all
            entries = [e for _k, e in back]
            if unseen:
                for e in entries:
                    e.count -= 1
            self._return_unacked(sess, entries, redelivered=not unseen)
        if sub is not None and sub.durable_key is None and not sub.queue.consumers:
            # A non-durable subscription goes with its last consumer.
            for e in sub.topic.remove_subscription(sub):
                self._forget(e)
        else:
            cons.queue.dispatch(now_ms())

    # -- messages ------------------------------------------------------------

    def route(self, msg: Message, link: Link, dest_type: int) -> Destination:
        """Accept a producer's message; raises RouterError with the SEND_REPLY status."""
        dest = self.lookup(msg.destination, dest_type)
        if dest is None:
            dest = self.ensure_destination(msg.destination, dest_type, link)
        s = self.settings
        if s.max_message_size >= 0 and msg.size > s.max_message_size:
            raise RouterError(
                Status.ENTITY_TOO_LARGE, f"message of {msg.size} bytes exceeds imq.message.max_size"
            )
        per_msg = dest.limit("maxBytesPerMsg")
        if per_msg >= 0 and msg.size > per_msg:
            raise RouterError(
                Status.ENTITY_TOO_LARGE,
                f"message of {msg.size} bytes exceeds {dest.name} maxBytesPerMsg",
            )
        if dest.is_full(msg.size):
            behavior = dest.limit_behavior
            if behavior == LimitBehavior.FLOW_CONTROL:
                # Accepted: the producer is slowed instead (its RESUME_FLOW is held).
                pass
            elif behavior == LimitBehavior.REMOVE_OLDEST and self._evict(dest, oldest=True):
                pass
            elif behavior == LimitBehavior.REMOVE_LOW_PRIORITY and self._evict(
                dest, oldest=False, below=msg.priority
            ):
                pass
            else:
                raise RouterError(Status.RESOURCE_FULL, f"destination {dest.name} is full")
        totals = self.totals
        if (s.system_max_count >= 0 and totals.count >= s.system_max_count) or (
            s.system_max_size >= 0 and totals.bytes + msg.size > s.system_max_size
        ):
            raise RouterError(Status.RESOURCE_FULL, "the broker's message limit is reached")
        t = now_ms()
        if msg.delivery_time > t:
            heapq.heappush(
                self.delayed, (msg.delivery_time, next(self._delayed_seq), msg, dest_type)
            )
            if self.on_delayed is not None:
                self.on_delayed(self.delayed[0][0])
            return dest
        dest.publish(msg, t)
        return dest

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
            dest.publish(msg, t)
        return delayed[0][0] if delayed else None

    def _evict(self, dest: Destination, oldest: bool, below: int = 10) -> bool:
        """Make room by moving one pending entry to the DMQ: the oldest of the lowest
        priority (REMOVE_OLDEST looks at age first, REMOVE_LOW_PRIORITY at priority)."""
        queues = [dest.dq] if isinstance(dest, QueueDestination) else [
            sub.queue for sub in dest.subscriptions  # type: ignore[attr-defined]
        ]
        best: tuple[tuple[int, int], object, int] | None = None
        for q in queues:
            for prio, bucket in enumerate(q.buckets):
                if not bucket or (not oldest and prio > below):
                    continue
                head = bucket[0]
                rank = (head.msg.timestamp, prio) if oldest else (prio, head.msg.timestamp)
                if best is None or rank < best[0]:
                    best = (rank, q, prio)
        if best is None:
            return False
        _rank, q, prio = best
        entry = q.buckets[prio].popleft()  # type: ignore[attr-defined]
        q.count -= 1  # type: ignore[attr-defined]
        q.bytes -= entry.msg.size  # type: ignore[attr-defined]
        self._dead(entry, dmq.REMOVED_OLDEST if oldest else dmq.REMOVED_LOW_PRIORITY)
        return True

    def _dead(self, entry: Entry, reason: str, comment: str | None = None) -> None:
        """An entry is given up on: account it out, and keep a copy in the DMQ when the
        destination uses it (useDMQ) and the producer did not say otherwise."""
        owner = entry.owner
        owner.account_out(entry)  # type: ignore[attr-defined]
        if owner is self.dmq or not owner.attributes.get("useDMQ", True):  # type: ignore[attr-defined]
            log.debug("message %s discarded (%s)", entry.msg.message_id, reason)
            return
        if self.settings.log_dead_messages or entry.msg.selector_values().get(
            "JMS_SUN_LOG_DEAD_MESSAGES"
        ):
            log.info("dead message %s from %s: %s%s", entry.msg.message_id, owner.name,
                     reason, f" ({comment})" if comment else "")  # type: ignore[attr-defined]
        if not dmq.preserve(entry.msg):
            return
        t = now_ms()
        dead = dmq.dead_message(
            entry.msg,
            reason,
            now_ms=t,
            broker=self.settings.broker_name,
            delivery_count=entry.count,
            comment=comment,
            truncate_body=self.settings.dmq_truncate_body,
        )
        d = self.dmq
        per_msg = d.limit("maxBytesPerMsg")
        if per_msg >= 0 and dead.size > per_msg:
            log.info("message %s too large for the DMQ, discarded", entry.msg.message_id)
            return
        while d.is_full(dead.size):
            # The DMQ's own limit behaviour: its oldest message makes way (and is gone).
            if not d.dq.count:
                log.info("DMQ full, message %s discarded", entry.msg.message_id)
                return
            old = d.dq._pop()
            assert old is not None
            d.account_out(old)
        d.publish(dead, t)

    def reclaim_expired(self, now: int | None = None) -> int:
        """Remove expired messages still waiting in every destination (the periodic
        expiry job calls this); they go to the DMQ where useDMQ says so."""
        t = now_ms() if now is None else now
        n = 0
        for q in list(self.queues.values()):
            for e in q.dq.take_expired(t):
                q.drop(e, dmq.EXPIRED)
                n += 1
        for topic in list(self.topics.values()):
            for sub in list(topic.subscriptions):
                for e in sub.queue.take_expired(t):
                    topic.drop(e, dmq.EXPIRED)
                    n += 1
        if n:
            log.info("reclaimed %d expired message(s)", n)
        return n

    def reap_idle(self, now: float, reaptime: float) -> list[str]:
        """Destroy auto-created destinations that had no consumers, producers or
        messages for ``reaptime`` seconds (the administrator guide's rule)."""
        reaped = []
        for table in (self.queues, self.topics):
            for dest in list(table.values()):
                if not dest.auto:
                    continue
                if dest.msg_count or dest.producers or dest.consumers() or (
                    isinstance(dest, TopicDestination) and dest.durables
                ):
                    dest.idle_since = None
                    continue
                if dest.idle_since is None:
                    dest.idle_since = now
                elif now - dest.idle_since >= reaptime:
                    self._remove_destination(dest)
                    reaped.append(dest.name)
        return reaped

    def _room(self, dest: Destination) -> None:
        waiting, dest.waiting_producers = dest.waiting_producers, []
        if self.on_producer_room is not None:
            for link, pid in waiting:
                self.on_producer_room(link, pid)

    def hold_producer(self, dest: Destination, link: object, producer_id: int) -> bool:
        """FLOW_CONTROL: True (and remembered) when the producer must wait for room."""
        if dest.limit_behavior != LimitBehavior.FLOW_CONTROL or not dest.is_full():
            return False
        dest.waiting_producers.append((link, producer_id))
        return True

    def consumed(self, entry: Entry) -> None:
        """An entry is done with (acknowledged, or delivered to a NO_ACKNOWLEDGE session)."""
        self._forget(entry)

    def _forget(self, entry: Entry) -> None:
        entry.owner.account_out(entry)  # type: ignore[attr-defined]

    def acknowledge(
        self,
        sess: Session,
        blocks: Iterable[tuple[int, bytes]],
        ack_type: int = 0,
        dead_reason: int = 0,
        comment: str | None = None,
    ) -> int:
        """ACKNOWLEDGE: returns how many blocks named an unacknowledged message.

        JMQAckType 2 (DEAD) sends the messages to the DMQ; 1 (UNDELIVERABLE) removes
        them without one, as OpenMQ does.
        """
        found = 0
        unacked = sess.unacked
        for key in blocks:
            entry = unacked.pop(key, None)
            if entry is None:
                continue
            found += 1
            if ack_type == 2:
                reason = dmq.EXPIRED if dead_reason == 1 else dmq.UNDELIVERABLE
                self._dead(entry, reason, comment)
            else:
                self._forget(entry)
        return found

    def redeliver(
        self, sess: Session, blocks: Iterable[tuple[int, bytes]], set_redelivered: bool
    ) -> None:
        """REDELIVER (session recover / rollback): back to their queues, in order."""
        entries = []
        for key in blocks:
            entry = sess.unacked.pop(key, None)
            if entry is not None:
                entries.append(entry)
        self._return_unacked(sess, entries, redelivered=set_redelivered)

    def _return_unacked(self, sess: Session, entries: list[Entry], redelivered: bool) -> None:
        by_queue: dict[int, tuple[object, list[Entry]]] = {}
        for e in entries:
            q = e.queue
            if not q.active:  # type: ignore[attr-defined]
                self._forget(e)
                continue
            limit = e.owner.limit("maxDeliveryCount")  # type: ignore[attr-defined]
            if 0 < limit <= e.count:
                self._dead(e, dmq.UNDELIVERABLE, f"delivered {e.count} times")
                continue
            if redelivered:
                e.redelivered = True
            by_queue.setdefault(id(q), (q, []))[1].append(e)
        t = now_ms()
        for q, group in by_queue.values():
            q.put_back(group)  # type: ignore[attr-defined]
            q.dispatch(t)  # type: ignore[attr-defined]

    # -- local transactions ------------------------------------------------

    def start_transaction(self, sess: Session) -> Transaction:
        txn = Transaction(self.uids.next(), sess)
        self.transactions[txn.id] = txn
        return txn

    def transaction(self, txn_id: int, link: Link) -> Transaction:
        txn = self.transactions.get(txn_id)
        if txn is None:
            raise RouterError(Status.GONE, f"transaction {txn_id} does not exist")
        if txn.session.link is not link:
            raise RouterError(
                Status.FORBIDDEN, f"transaction {txn_id} belongs to another connection"
            )
        return txn

    def transacted_send(self, txn: Transaction, msg: Message, dest_type: int, link: Link) -> None:
        """Check the message now (so SEND_REPLY tells the truth) and hold it until COMMIT."""
        txn.check_open()
        dest = self.lookup(msg.destination, dest_type)
        if dest is None:
            dest = self.ensure_destination(msg.destination, dest_type, link)
        s = self.settings
        per_msg = dest.limit("maxBytesPerMsg")
        if (s.max_message_size >= 0 and msg.size > s.max_message_size) or (
            per_msg >= 0 and msg.size > per_msg
        ):
            raise RouterError(Status.ENTITY_TOO_LARGE, f"message of {msg.size} bytes is too large")
        txn.sends.append((msg, dest_type))

    def transacted_ack(
        self, txn: Transaction, sess: Session, blocks: list[tuple[int, bytes]]
    ) -> None:
        txn.check_open()
        txn.acks.extend((sess, key) for key in blocks if key in sess.unacked)

    def commit(self, txn: Transaction, link: Link) -> None:
        """COMMIT: route the held messages in order, then apply the held acknowledgements."""
        txn.check_open()
        del self.transactions[txn.id]
        txn.state = TransactionState.COMMITTED
        for msg, dest_type in txn.sends:
            try:
                self.route(msg, link, dest_type)
            except RouterError as exc:
                # Limits may have filled since the send was checked; the rest still commit.
                log.warning("committed message to %s dropped: %s", msg.destination, exc.reason)
        for sess, key in txn.acks:
            entry = sess.unacked.pop(key, None)
            if entry is not None:
                self._forget(entry)

    def rollback(
        self, txn: Transaction, redeliver: bool = False, set_redelivered: bool = True
    ) -> None:
        """ROLLBACK: forget the held sends; acknowledged messages stay unacknowledged (or go
        back to their queues at once when the client asks with JMQRedeliver)."""
        self.transactions.pop(txn.id, None)
        txn.state = TransactionState.ROLLEDBACK
        if redeliver:
            by_session: dict[int, tuple[Session, list]] = {}
            for sess, key in txn.acks:
                by_session.setdefault(id(sess), (sess, []))[1].append(key)
            for sess, keys in by_session.values():
                self.redeliver(sess, keys, set_redelivered)

    def rollback_session(self, sess: Session) -> None:
        for txn in [t for t in self.transactions.values() if t.session is sess]:
            self.rollback(txn)

    # -- connections ---------------------------------------------------------

    def connection_closed(self, link: Link, sessions: Iterable[Session]) -> None:
        """Release everything a connection held: sessions, temp destinations, client ID."""
        for sess in list(sessions):
            self.destroy_session(sess)
        for table in (self.queues, self.topics):
            for dest in list(table.values()):
                if dest.temporary_owner == link.id:
                    self._remove_destination(dest)
        self.release_client_id(link)

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

    # -- client IDs ------------------------------------------------------------

    def set_client_id(
        self, link: Link, client_id: str | None, shared: bool, namespace: str | None
    ) -> None:
        """SET_CLIENTID with the sharing and namespace rules of the protocol."""
        if client_id is None:
            self.release_client_id(link)
            link.client_id = None
            return
        if not client_id.strip():
            raise RouterError(Status.BAD_REQUEST, "client ID is empty")
        claims = self.client_ids.setdefault(client_id, [])
        for c in claims:
            if c.link_id == link.id:
                continue
            if not c.shared or not shared:
                raise RouterError(Status.CONFLICT, f"client ID {client_id} is already in use")
            if namespace is not None and (c.namespace is None or c.namespace == namespace):
                raise RouterError(
                    Status.CONFLICT, f"client ID {client_id} is already in use in this namespace"
                )
        claims.append(ClientIDClaim(link.id, shared, namespace))
        link.client_id = client_id

    def release_client_id(self, link: Link) -> None:
        cid = link.client_id
        if cid is None:
            return
        claims = [c for c in self.client_ids.get(cid, []) if c.link_id != link.id]
        if claims:
            self.client_ids[cid] = claims
        else:
            self.client_ids.pop(cid, None)

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
        for e in dest.dq:
            if e.msg.key in wanted:
                found[e.msg.key] = e.msg
        if len(found) < len(wanted):
            for sess in self.sessions.values():
                for e in sess.unacked.values():
                    if e.owner is dest and e.msg.key in wanted:
                        found[e.msg.key] = e.msg
        return [found[k] for k in keys if k in found]

    # -- events ---------------------------------------------------------------

    def _event(self, kind: str, data: dict) -> None:
        for listener in self.listeners:
            try:
                listener(kind, data)
            except Exception:  # a monitoring hook must never break routing
                log.exception("event listener failed")


__all__ = [
    "MessageRouter",
    "RouterError",
    "RouterSettings",
    "DMQ_NAME",
    "ADMIN_QUEUE",
    "DEST_QUEUE",
    "DEST_TOPIC",
]
