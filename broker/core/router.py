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

from .destination import Destination, QueueDestination, Subscription, TopicDestination, Totals
from .ids import UIDGenerator
from .message import Entry, Message
from .session import Consumer, Link, Producer, Session
from .transaction import Transaction

log = logging.getLogger("broker.router")

DMQ_NAME = "mq.sys.dmq"
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
        self.queues[DMQ_NAME] = QueueDestination(DMQ_NAME, totals=self.totals)
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
    ) -> Consumer:
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
        cid = self.uids.next()
        if isinstance(dest, QueueDestination):
            limit = dest.limit("maxNumActiveConsumers")
            if limit >= 0 and len(dest.dq.consumers) >= limit:
                raise RouterError(
                    Status.CONFLICT, f"queue {name} already has its maximum of {limit} consumers"
                )
            cons = Consumer(cid, sess, dest, dest.dq, selector, no_local, prefetch, self)
            dest.dq.add_consumer(cons)
        else:
            assert isinstance(dest, TopicDestination)
            sub = self._subscription_for(sess, dest, selector, no_local, durable_name)
            cons = Consumer(cid, sess, dest, sub.queue, None, no_local, prefetch, self, sub)
            sub.queue.add_consumer(cons)
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
    ) -> Subscription:
        if durable_name is None:
            sub = Subscription(topic, selector, no_local, sess.link.id)
            topic.add_subscription(sub)
            return sub
        client_id = sess.link.client_id
        if not client_id:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                "a durable subscription needs a client ID on the connection",
            )
        key = (client_id, durable_name)
        existing = self._find_durable(key)
        if existing is not None:
            if existing.queue.consumers:
                raise RouterError(Status.CONFLICT, f"durable subscription {durable_name} is in use")
            changed = (
                existing.topic is not topic
                or (existing.selector.text if existing.selector else None)
                != (selector.text if selector else None)
                or existing.no_local != no_local
            )
            if not changed:
                existing.connection_id = sess.link.id
                return existing
            # JMS: a changed subscription is the old one deleted and a new one made.
            for e in existing.topic.remove_subscription(existing):
                self._forget(e)
        sub = Subscription(topic, selector, no_local, sess.link.id, key)
        topic.add_subscription(sub)
        return sub

    def _find_durable(self, key: tuple[str, str]) -> Subscription | None:
        for t in self.topics.values():
            sub = t.durables.get(key)
            if sub is not None:
                return sub
        return None

    def unsubscribe(self, client_id: str | None, durable_name: str) -> None:
        if not client_id:
            raise RouterError(Status.PRECONDITION_FAILED, "unsubscribe needs a client ID")
        sub = self._find_durable((client_id, durable_name))
        if sub is None:
            raise RouterError(Status.NOT_FOUND, f"no durable subscription {durable_name}")
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
        sub = cons.subscription
        if sub is not None and sub.durable_key is None:
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
        max_msgs = dest.limit("maxNumMsgs")
        max_bytes = dest.limit("maxTotalMsgBytes")
        if (max_msgs >= 0 and dest.msg_count >= max_msgs) or (
            max_bytes >= 0 and dest.msg_bytes + msg.size > max_bytes
        ):
            if dest.limit_behavior == LimitBehavior.REMOVE_OLDEST and dest.is_queue:
                self._remove_oldest(dest)  # type: ignore[arg-type]
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

    def _remove_oldest(self, dest: QueueDestination) -> None:
        for bucket in dest.dq.buckets:
            if bucket:
                e = bucket.popleft()
                dest.dq.count -= 1
                dest.dq.bytes -= e.msg.size
                self._forget(e)
                return

    def consumed(self, entry: Entry) -> None:
        """An entry is done with (acknowledged, or delivered to a NO_ACKNOWLEDGE session)."""
        self._forget(entry)

    def _forget(self, entry: Entry) -> None:
        entry.owner.account_out(entry)  # type: ignore[attr-defined]

    def acknowledge(
        self, sess: Session, blocks: Iterable[tuple[int, bytes]], ack_type: int = 0
    ) -> int:
        """ACKNOWLEDGE: returns how many blocks named an unacknowledged message."""
        found = 0
        unacked = sess.unacked
        for key in blocks:
            entry = unacked.pop(key, None)
            if entry is None:
                continue
            found += 1
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
