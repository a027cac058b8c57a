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

from broker.protocol.packet import parse_packet
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    AckMode,
    DestState,
    DestType,
    LimitBehavior,
    Status,
    TransactionState,
    XAFlag,
)
from broker.protocol.xid import Xid
from broker.store.base import (
    QUEUE_INTEREST,
    DestAdd,
    DestRemove,
    MsgSettle,
    RecoveredState,
    Store,
    StoredTransaction,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)

from . import dmq
from .destination import Destination, QueueDestination, Subscription, TopicDestination, Totals
from .dmq import DMQ_NAME
from .drops import DEFAULT_INTERVAL as DEFAULT_DROP_INTERVAL
from .drops import DropLog
from .ids import UIDGenerator
from .message import Entry, Message
from .metrics import note_consumers
from .selector import compile_selector
from .session import Consumer, Link, Producer, Session
from .transaction import Transaction

log = logging.getLogger("broker.router")

DEST_AUTO = int(DestType.AUTO)

ADMIN_QUEUE = "__JMQAdmin"


def _where(dest: Destination) -> str:
    return f"{'queue' if dest.is_queue else 'topic'} {dest.name}"


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
    # Seconds between two WARNINGs about one destination's dropped messages.
    drop_log_interval: float = DEFAULT_DROP_INTERVAL


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
        # Transactions: XA ones by Xid; the change hook (the message store's) and more
        # observers (the admin records); the XA JMQAutoRollback default.
        self.xids: dict[Xid, Transaction] = {}
        self.on_transaction_change: Callable[[Transaction], None] | None = None
        self.transaction_listeners: list[Callable[[Transaction], None]] = []
        self.xa_autorollback_all = False
        # Messages with a JMS 2.0 delivery delay wait here until their time.
        self.delayed: list[tuple[int, int, Message, int]] = []
        self._delayed_seq = itertools.count()
        # Told the earliest due time whenever a delayed message is queued (the server
        # schedules a timer with it); None means someone polls release_due().
        self.on_delayed: Callable[[int], None] | None = None
        self.store: Store | None = None
        self.dmq = QueueDestination(DMQ_NAME, totals=self.totals, attributes=dmq.DMQ_DEFAULTS)
        self.dmq.is_dmq = True
        self.queues[DMQ_NAME] = self.dmq
        # Called with (link, producer id) when a FLOW_CONTROL destination has room again.
        self.on_producer_room: Callable[[object, int], None] | None = None
        self.listeners: list[Callable[[str, dict], None]] = []
        self.drops = DropLog(self.settings.drop_log_interval)

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
        if temp_owner is None and self.store is not None:
            dest.store = self.store
            self.store.submit((DestAdd(name, self._stored_type(dest), dict(attrs)),))
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

    def update_destination(self, dest: Destination, attributes: dict) -> None:
        """Admin UPDATE_DESTINATION: the new attribute values apply at once (limits are
        checked on the next send, backups are promoted into new active places, producers
        held by a limit that no longer holds are released) and are stored."""
        dest.attributes.update(attributes)
        if dest.store is not None:
            dest.store.submit((DestAdd(dest.name, self._stored_type(dest), dict(dest.attributes)),))
        if isinstance(dest, QueueDestination):
            dest.promote_backups()
            dest.dq.dispatch(now_ms())
        if dest.waiting_producers and (
            dest.limit_behavior != LimitBehavior.FLOW_CONTROL or not dest.is_full()
        ):
            self._room(dest)
        log.info("updated %s %s: %s", "queue" if dest.is_queue else "topic", dest.name, attributes)
        self._event("destination.updated", {"name": dest.name, "type": dest.dest_type})

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
        if dest.store is not None:
            dest.store.submit((DestRemove(dest.name, dest.dest_type),))
        log.info("destroyed %s %s", "queue" if dest.is_queue else "topic", dest.name)
        self._event("destination.destroyed", {"name": dest.name})

    # -- the message store ------------------------------------------------------

    @staticmethod
    def _stored_type(dest: Destination) -> int:
        return dest.dest_type | (DEST_AUTO if dest.auto else 0)

    def attach_store(self, store: Store) -> None:
        """Persist from now on (before any client connects)."""
        self.store = store
        self.dmq.store = store

    def recover(self, state: RecoveredState) -> dict[str, int]:
        """Rebuild destinations, durable subscriptions and messages from the store.

        Auto-created destinations come back only if they still hold messages (or
        durable subscriptions), as OpenMQ does; copies that had been delivered come
        back marked redelivered.  Returns counts for the log.
        """
        store = self.store
        wanted: set[tuple[str, bool]] = {
            (m.destination, bool(m.dest_type & DEST_TOPIC)) for m in state.messages
        }
        wanted |= {(d.topic, True) for d in state.durables}
        for d in state.destinations:
            is_topic = bool(d.dest_type & DEST_TOPIC)
            auto = bool(d.dest_type & DEST_AUTO)
            if d.name == DMQ_NAME:
                self.dmq.attributes.update(d.attributes)
                continue
            if auto and (d.name, is_topic) not in wanted:
                if store is not None:
                    store.submit((DestRemove(d.name, d.dest_type & ~DEST_AUTO),))
                continue
            self._recreate(d.name, d.dest_type & ~DEST_AUTO, auto, d.attributes)
        for dur in state.durables:
            topic = self.topics.get(dur.topic) or self._recreate(dur.topic, DEST_TOPIC, True, None)
            sub = Subscription(
                topic,
                compile_selector(dur.selector) if dur.selector else None,  # type: ignore[arg-type]
                dur.no_local,
                0,
                (dur.client_id, dur.name),
                share=dur.share,
            )
            topic.add_subscription(sub, record=False)  # type: ignore[attr-defined]
        t = now_ms()
        n = 0
        for sm in state.messages:
            is_topic = bool(sm.dest_type & DEST_TOPIC)
            dest = (self.topics if is_topic else self.queues).get(sm.destination)
            if dest is None:
                dest = self._recreate(sm.destination, sm.dest_type, True, None)
            msg = Message(parse_packet(sm.raw), sm.destination, 0)
            msg.store_key = sm.key
            for interest, count in sm.interests.items():
                if interest == QUEUE_INTEREST and isinstance(dest, QueueDestination):
                    q = dest.dq
                else:
                    sub = self._durable_by_id(dest, interest)
                    if sub is None:
                        if store is not None:
                            store.submit((MsgSettle(sm.key, interest),))
                        continue
                    q = sub.queue
                entry = Entry(msg, dest, q, interest)
                entry.count = count
                entry.redelivered = count > 0
                dest.account_in(1, msg.size)
                dest.msgs_in -= 1  # recovered, not newly received
                dest.msg_bytes_in -= msg.size
                q.put(entry)
                n += 1
        txns = 0
        for st in state.transactions:
            txns += self._recover_transaction(st)
        for q in self.queues.values():
            q.dq.dispatch(t)
        return {
            "destinations": len(self.queues) + len(self.topics),
            "durables": len(state.durables),
            "messages": n,
            "transactions": txns,
        }

    def _take_stored(self, key: bytes, interest: str) -> Entry | None:
        """Take a recovered entry out of its queue (a transaction holds it)."""
        for table in (self.queues, self.topics):
            for dest in table.values():
                queues = dest.delivery_queues()
                for q in queues:
                    found = q.remove_where(
                        lambda e: e.msg.store_key == key and e.interest == interest
                    )
                    if found:
                        return found[0]
        return None

    def _recover_transaction(self, st: StoredTransaction) -> int:
        """Finish a commit the crash interrupted; keep a PREPARED one in doubt (or roll
        it back when imq.transaction.autorollback says so); drop anything else."""
        store = self.store
        assert store is not None
        state = TransactionState(st.state)
        t = now_ms()
        if state == TransactionState.COMMITTED:
            for send in st.sends:
                dest = self.lookup(send.destination, send.dest_type) or self._recreate(
                    send.destination, send.dest_type, True, None
                )
                if any(e.msg.store_key == send.key for e in getattr(dest, "dq", ())):
                    continue  # its MsgAdd made it to the store before the crash
                msg = Message(parse_packet(send.raw), send.destination, 0)
                msg.store_key = send.key
                dest.publish(msg, t)
            for ack in st.acks:
                entry = self._take_stored(ack.key, ack.interest)
                if entry is not None:
                    self._forget(entry)
            store.submit((TxnRemove(st.txn_id),))
            log.info("transaction %s: its commit was completed after restart", st.txn_id)
            return 1
        if state == TransactionState.PREPARED and not self.xa_autorollback_all:
            info = st.info
            xid = Xid.decode(bytes.fromhex(info["xid"])) if info.get("xid") else None
            txn = Transaction(st.txn_id, None, state=TransactionState.PREPARED, xid=xid)
            txn.auto_rollback = info.get("auto_rollback")
            txn.session_less = bool(info.get("session_less"))
            txn.created = info.get("created") or t
            txn.client_id = info.get("client_id")
            txn.user = info.get("user")
            txn.stored = True
            for send in st.sends:
                msg = Message(parse_packet(send.raw), send.destination, 0)
                msg.store_key = send.key
                txn.sends.append((msg, send.dest_type))
            for ack in st.acks:
                entry = self._take_stored(ack.key, ack.interest)
                if entry is not None:
                    txn.entries[(0, entry.msg.key)] = entry
            self.adopt_transaction(txn)
            log.warning(
                "transaction %s (%s) is PREPARED and in doubt after restart",
                st.txn_id,
                xid or "local",
            )
            return 1
        store.submit((TxnRemove(st.txn_id),))
        log.info("transaction %s (%s) rolled back at restart", st.txn_id, state.name)
        return 0

    def _recreate(self, name: str, dest_type: int, auto: bool, attributes: dict | None):
        is_topic = bool(dest_type & DEST_TOPIC)
        defaults = self.settings.topic_attributes if is_topic else self.settings.queue_attributes
        attrs = dict(defaults or {})
        attrs.update(attributes or {})
        cls = TopicDestination if is_topic else QueueDestination
        dest = cls(name, auto=auto, attributes=attrs, totals=self.totals)
        dest.on_dead = self._dead
        dest.on_room = self._room
        dest.store = self.store
        (self.topics if is_topic else self.queues)[name] = dest  # type: ignore[index]
        return dest

    @staticmethod
    def _durable_by_id(dest: Destination, sub_id: str) -> Subscription | None:
        for sub in getattr(dest, "durables", {}).values():
            if sub.sub_id == sub_id:
                return sub
        return None

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
        note_consumers(dest)
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

    def route(
        self, msg: Message, link: Link, dest_type: int, *, internal: bool = False
    ) -> Destination:
        """Accept a producer's message; raises RouterError with the SEND_REPLY status.
        ``internal`` (the broker's own admin replies) passes the broker-wide limits, so an
        administrator can still work on a broker that is full."""
        dest = self.lookup(msg.destination, dest_type)
        if dest is None:
            dest = self.ensure_destination(msg.destination, dest_type, link)
        s = self.settings
        if s.max_message_size >= 0 and msg.size > s.max_message_size:
            self._reject(dest, "larger than imq.message.max_size")
            raise RouterError(
                Status.ENTITY_TOO_LARGE, f"message of {msg.size} bytes exceeds imq.message.max_size"
            )
        per_msg = dest.limit("maxBytesPerMsg")
        if per_msg >= 0 and msg.size > per_msg:
            self._reject(dest, "larger than maxBytesPerMsg")
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
                self._reject(
                    dest,
                    f"destination full (maxNumMsgs {dest.limit('maxNumMsgs')}, maxTotalMsgBytes "
                    f"{dest.limit('maxTotalMsgBytes')}, limitBehavior {behavior.name})",
                )
                raise RouterError(Status.RESOURCE_FULL, f"destination {dest.name} is full")
        totals = self.totals
        if not internal and (
            (s.system_max_count >= 0 and totals.count >= s.system_max_count)
            or (s.system_max_size >= 0 and totals.bytes + msg.size > s.system_max_size)
        ):
            self._reject(dest, "the broker's imq.system.max_count / max_size is reached")
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
        queues = dest.delivery_queues()
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
        self.drops.note(
            _where(dest),
            "removed to make room for newer messages (limitBehavior "
            f"{'REMOVE_OLDEST' if oldest else 'REMOVE_LOW_PRIORITY'})",
        )
        return True

    def _reject(self, dest: Destination, why: str) -> None:
        """Count a refused message; a producer that did not wait for a reply is not told,
        so the administrator is (broker/core/drops.py)."""
        dest.stats.rejected += 1
        self.drops.note(
            _where(dest),
            f"rejected: {why}; producers that do not wait for a reply (non-persistent "
            "without imqAckOnProduce) are not told",
        )

    def _dead(self, entry: Entry, reason: str, comment: str | None = None) -> bool:
        """An entry is given up on: account it out, and keep a copy in the DMQ when the
        destination uses it (useDMQ) and the producer did not say otherwise.  True when
        the copy went to the DMQ."""
        owner = entry.owner
        owner.account_out(entry)  # type: ignore[attr-defined]
        if reason == dmq.EXPIRED:
            owner.stats.expired += 1  # type: ignore[attr-defined]
        else:
            owner.stats.discarded += 1  # type: ignore[attr-defined]
        if owner is self.dmq or not owner.attributes.get("useDMQ", True):  # type: ignore[attr-defined]
            log.debug("message %s discarded (%s)", entry.msg.message_id, reason)
            return False
        if self.settings.log_dead_messages or entry.msg.selector_values().get(
            "JMS_SUN_LOG_DEAD_MESSAGES"
        ):
            log.info(
                "dead message %s from %s: %s%s",
                entry.msg.message_id,
                owner.name,
                reason,
                f" ({comment})" if comment else "",
            )  # type: ignore[attr-defined]
        if not dmq.preserve(entry.msg):
            return False
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
            return False
        while d.is_full(dead.size):
            # The DMQ's own limit behaviour: its oldest message makes way (and is gone).
            if not d.dq.count:
                log.info("DMQ full, message %s discarded", entry.msg.message_id)
                return False
            old = d.dq._pop()
            assert old is not None
            d.account_out(old)
        # The copy keeps the original's message id; the store needs a key of its own.
        dead.store_key = b"\xff\xff\xff\xff" + self.uids.next().to_bytes(8, "big") + dead.key[12:]
        d.publish(dead, t)
        return True

    def reclaim_expired(self, now: int | None = None) -> int:
        """Remove expired messages still waiting in every destination (the periodic
        expiry job calls this); they go to the DMQ where useDMQ says so."""
        return sum(to_dmq + gone for _, _, to_dmq, gone in self.reclaim_expired_report(now))

    def reclaim_expired_report(self, now: int | None = None) -> list[tuple[str, bool, int, int]]:
        """:meth:`reclaim_expired`, telling per destination (name, is_topic, moved to the
        DMQ, discarded) where any expired; the admin RECLAIM_EXPIRED extension's reply."""
        t = now_ms() if now is None else now
        report: list[tuple[str, bool, int, int]] = []
        for dest in [*self.queues.values(), *self.topics.values()]:
            to_dmq = gone = 0
            for q in dest.delivery_queues():
                for e in q.take_expired(t):
                    if dest.drop(e, dmq.EXPIRED):
                        to_dmq += 1
                    else:
                        gone += 1
            if to_dmq or gone:
                report.append((dest.name, isinstance(dest, TopicDestination), to_dmq, gone))
        n = sum(to_dmq + gone for _, _, to_dmq, gone in report)
        if n:
            log.info("reclaimed %d expired message(s)", n)
        return report

    def reap_idle(self, now: float, reaptime: float) -> list[str]:
        """Destroy auto-created destinations that had no consumers, producers or
        messages for ``reaptime`` seconds (the administrator guide's rule)."""
        reaped = []
        for table in (self.queues, self.topics):
            for dest in list(table.values()):
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

    def set_dest_state(self, dest: Destination, state: DestState) -> None:
        """Admin PAUSE/RESUME: consumers-paused queues stop dispatching, producers-paused
        producers get no RESUME_FLOW; what is resumed dispatches / is released now."""
        dest.state = state
        paused = state in (DestState.CONSUMERS_PAUSED, DestState.PAUSED)
        t = now_ms()
        for q in dest.delivery_queues():
            q.paused = paused
            if not paused:
                q.dispatch(t)
        if state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED) or not dest.waiting_producers:
            return
        if dest.limit_behavior != LimitBehavior.FLOW_CONTROL or not dest.is_full():
            self._room(dest)

    def _room(self, dest: Destination) -> None:
        if dest.state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED):
            return  # paused producers wait for the admin's RESUME (set_dest_state)
        waiting, dest.waiting_producers = dest.waiting_producers, []
        if self.on_producer_room is not None:
            for link, pid in waiting:
                self.on_producer_room(link, pid)

    def hold_producer(self, dest: Destination, link: object, producer_id: int) -> bool:
        """FLOW_CONTROL: True (and remembered) when the producer must wait for room.

        Also True while an admin has paused the destination's producers: their
        RESUME_FLOW is withheld until the RESUME."""
        if dest.state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED):
            dest.waiting_producers.append((link, producer_id))
            return True
        if dest.limit_behavior != LimitBehavior.FLOW_CONTROL or not dest.is_full():
            return False
        dest.waiting_producers.append((link, producer_id))
        return True

    def consumed(self, entry: Entry) -> None:
        """An entry is done with (acknowledged, or delivered to a NO_ACKNOWLEDGE session)."""
        self._forget(entry)

    def purged(self, entries: Iterable[Entry]) -> int:
        """Entries an administrator purged: accounted out, settled in the store and
        counted in numPurgedMsgs; returns how many."""
        n = 0
        for entry in entries:
            self._forget(entry)
            entry.owner.stats.purged += 1  # type: ignore[attr-defined]
            n += 1
        return n

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
                entry.owner.stats.acked += 1  # type: ignore[attr-defined]
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

    # -- transactions ---------------------------------------------------------
    #
    # Local transactions belong to a session; XA ones are also known by their Xid and
    # may be finished from another connection (a transaction manager's recovery).
    # Every refusal is a RouterError with the status the reply carries.

    def _txn_changed(self, txn: Transaction) -> None:
        hook = self.on_transaction_change
        if hook is not None:
            hook(txn)
        for listener in self.transaction_listeners:
            try:
                listener(txn)
            except Exception:  # an observer must not break the protocol
                log.exception("transaction listener failed")

    @staticmethod
    def _check_auto_rollback(value: int | None) -> None:
        if value is None or value in (1, 2):
            return
        if value == 3:
            raise RouterError(
                Status.NOT_IMPLEMENTED, "JMQAutoRollback NEVER is not supported by this broker"
            )
        raise RouterError(Status.BAD_REQUEST, f"bad JMQAutoRollback {value}")

    def _new_transaction(
        self,
        sess: Session | None,
        link: Link | None,
        xid: Xid | None,
        auto_rollback: int | None,
        session_less: bool | None,
        lifetime: int,
        creator: bytes,
        user: str | None,
    ) -> Transaction:
        self._check_auto_rollback(auto_rollback)
        if lifetime < 0:
            raise RouterError(Status.BAD_REQUEST, f"bad JMQLifetime {lifetime}")
        txn = Transaction(
            self.uids.next(),
            sess,
            xid=xid,
            link=link,
            auto_rollback=auto_rollback,
            # Unset: XA transactions are not rolled back when their session or
            # connection closes, other transactions are.
            session_less=(xid is not None) if session_less is None else session_less,
            lifetime=lifetime,
            creator=creator,
            connection_id=link.id if link is not None else 0,
            client_id=link.client_id if link is not None else None,
            user=user,
        )
        txn.on_change = self._txn_changed
        self.transactions[txn.id] = txn
        if xid is not None:
            self.xids[xid] = txn
        txn.changed()
        return txn

    def start_transaction(
        self,
        sess: Session,
        link: Link | None = None,
        *,
        auto_rollback: int | None = None,
        session_less: bool | None = None,
        lifetime: int = 0,
        creator: bytes = b"",
        user: str | None = None,
    ) -> Transaction:
        """START_TRANSACTION of a local transaction on ``sess``."""
        return self._new_transaction(
            sess,
            link if link is not None else sess.link,
            None,
            auto_rollback,
            session_less,
            lifetime,
            creator,
            user,
        )

    def adopt_transaction(self, txn: Transaction) -> Transaction:
        """Take in a transaction rebuilt from the message store at start (no connection
        owns it: it is in doubt until a transaction manager or an administrator finishes
        it).  Its held acknowledgements are entries already taken out of their queues."""
        txn.link = None
        txn.on_change = self._txn_changed
        self.transactions[txn.id] = txn
        if txn.xid is not None:
            self.xids[txn.xid] = txn
        txn.changed()
        return txn

    def replayed_start(self, link: Link, creator: bytes) -> Transaction | None:
        """The transaction a resent START (I flag) already made, if it is still STARTED."""
        if not creator:
            return None
        for t in self.transactions.values():
            if t.creator == creator and t.link is link and t.state == TransactionState.STARTED:
                return t
        return None

    def xa_start(
        self,
        link: Link,
        sess: Session | None,
        xid: Xid,
        flags: int,
        *,
        auto_rollback: int | None = None,
        session_less: bool | None = None,
        lifetime: int = 0,
        creator: bytes = b"",
        user: str | None = None,
    ) -> Transaction:
        """START_TRANSACTION with an Xid: TMNOFLAGS begins a new transaction (409 if the
        Xid is in use), TMJOIN / TMRESUME associate an existing one with ``link``."""
        existing = self.xids.get(xid)
        if existing is not None:
            self._expire_if_due(existing)
        if flags == XAFlag.TMNOFLAGS:
            if existing is not None:
                raise RouterError(
                    Status.CONFLICT, f"Xid {xid} is in use by transaction {existing.id}"
                )
            return self._new_transaction(
                sess, link, xid, auto_rollback, session_less, lifetime, creator, user
            )
        if flags not in (XAFlag.TMJOIN, XAFlag.TMRESUME):
            raise RouterError(Status.BAD_REQUEST, f"START with JMQXAFlags {flags:#x}")
        if existing is None:
            raise RouterError(Status.NOT_FOUND, f"unknown Xid {xid}")
        txn = existing
        self._not_timed_out(txn)
        if flags == XAFlag.TMJOIN:
            allowed = (TransactionState.STARTED, TransactionState.COMPLETE)
        else:
            allowed = (TransactionState.INCOMPLETE, TransactionState.STARTED)
        if txn.state not in allowed:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"transaction {txn.id} is {txn.state.name}: cannot "
                f"{'join' if flags == XAFlag.TMJOIN else 'resume'} it",
            )
        txn.link = link
        if sess is not None:
            txn.session = sess
        txn.set_state(TransactionState.STARTED)
        return txn

    def find_transaction(self, txn_id: int, xid: Xid | None = None) -> Transaction:
        """The transaction a request names by JMQTransactionID or (XA) by its Xid; 404 if
        unknown.  A transaction past its lifetime is rolled back first."""
        txn = self.transactions.get(txn_id) if txn_id else None
        if txn is None and xid is not None:
            txn = self.xids.get(xid)
        if txn is None:
            what = f"transaction {txn_id}" if txn_id else f"Xid {xid}"
            raise RouterError(Status.NOT_FOUND, f"unknown {what}")
        self._expire_if_due(txn)
        return txn

    def check_control(self, txn: Transaction, link: Link | None, admin: bool = False) -> None:
        """May ``link`` end/prepare/commit/roll back ``txn``?  Its own connection may; so
        may anyone once it has none (in doubt: what a transaction manager's recovery
        does), an ADMIN-service connection when it is PREPARED, and, for an XA
        transaction no connection is working in (not STARTED), any connection naming it
        (JTA lets a transaction manager finish a branch through another resource of the
        same broker).  403 otherwise."""
        owner = txn.link
        if owner is None or owner is link:
            return
        if admin and txn.state == TransactionState.PREPARED:
            return
        if txn.is_xa and txn.state != TransactionState.STARTED:
            return
        raise RouterError(
            Status.FORBIDDEN, f"transaction {txn.id} belongs to connection {owner.id}"
        )

    def transaction(self, txn_id: int, link: Link) -> Transaction:
        """The transaction a message or an acknowledgement names: 410 if it does not
        exist (any more), 408 if its lifetime expired, 403 if it is another connection's
        (local transactions), 412 if it does not take work now (not STARTED)."""
        txn = self.transactions.get(txn_id)
        if txn is None:
            raise RouterError(Status.GONE, f"transaction {txn_id} does not exist")
        self._expire_if_due(txn)
        self._not_timed_out(txn)
        if txn.link is not link and not txn.is_xa:
            raise RouterError(
                Status.FORBIDDEN, f"transaction {txn_id} belongs to another connection"
            )
        return txn

    @staticmethod
    def _not_timed_out(txn: Transaction) -> None:
        if txn.state == TransactionState.TIMED_OUT:
            raise RouterError(
                Status.TIMEOUT,
                f"transaction {txn.id} was rolled back by the broker: its lifetime "
                f"of {txn.lifetime} ms expired",
            )

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
        """Hold acknowledgements until COMMIT.  The entries leave the session's unacked
        table now, so closing the consumer or the session does not redeliver them while
        the transaction may still commit."""
        txn.check_open()
        unacked = sess.unacked
        for key in blocks:
            entry = unacked.pop(key, None)
            if entry is None:
                continue
            txn.acks.append((sess, key))
            txn.entries[key] = entry

    def end_transaction(self, txn: Transaction, flags: int) -> None:
        """END_TRANSACTION (XA): TMSUCCESS -> COMPLETE, TMSUSPEND -> INCOMPLETE,
        TMFAIL -> FAILED."""
        if not txn.is_xa:
            raise RouterError(Status.BAD_REQUEST, f"transaction {txn.id} is not an XA one")
        self._not_timed_out(txn)
        st = txn.state
        if flags & XAFlag.TMSUSPEND:
            allowed, nxt = (TransactionState.STARTED,), TransactionState.INCOMPLETE
        elif flags & XAFlag.TMFAIL:
            allowed = (
                TransactionState.STARTED,
                TransactionState.INCOMPLETE,
                TransactionState.FAILED,
            )
            nxt = TransactionState.FAILED
        elif flags & (XAFlag.TMSUCCESS | XAFlag.TMONEPHASE):
            allowed = (TransactionState.STARTED, TransactionState.INCOMPLETE)
            nxt = TransactionState.COMPLETE
        else:
            raise RouterError(Status.BAD_REQUEST, f"END with JMQXAFlags {flags:#x}")
        if st not in allowed:
            raise RouterError(
                Status.PRECONDITION_FAILED, f"transaction {txn.id} is {st.name}: cannot end it"
            )
        txn.set_state(nxt)

    def prepare(self, txn: Transaction, one_phase: bool = False) -> None:
        """PREPARE_TRANSACTION: an XA transaction from COMPLETE (after END TMSUCCESS), a
        local one from STARTED too.  A PREPARED transaction no longer expires."""
        self._not_timed_out(txn)
        ok = (
            (TransactionState.COMPLETE,)
            if txn.is_xa
            else (TransactionState.STARTED, TransactionState.COMPLETE)
        )
        if txn.state not in ok:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"transaction {txn.id} is {txn.state.name}: cannot prepare it",
            )
        txn.cancel_timer()
        txn.one_phase_prepare = one_phase
        txn.set_state(TransactionState.PREPARED)
        # A prepared transaction must survive a crash: its work and state go to the store.
        self._store_transaction(txn, TransactionState.PREPARED, always=True)

    def commit(
        self,
        txn: Transaction,
        link: Link | None,
        one_phase: bool = False,
        one_phase_hint: bool = False,
    ) -> None:
        """COMMIT: route the held messages in order, then apply the held acknowledgements.

        Local transactions commit from STARTED (or PREPARED).  XA: two-phase only from
        PREPARED; one-phase (TMONEPHASE) from COMPLETE or STARTED; ``one_phase_hint``
        (JMQXAOnePhase without TMONEPHASE: a one-phase commit the client ran as prepare +
        commit) from any of the three.
        """
        self._not_timed_out(txn)
        st = txn.state
        if not txn.is_xa:
            ok: tuple[TransactionState, ...] = (
                TransactionState.STARTED,
                TransactionState.PREPARED,
            )
        elif one_phase:
            ok = (TransactionState.COMPLETE, TransactionState.STARTED)
        elif one_phase_hint:
            ok = (TransactionState.COMPLETE, TransactionState.STARTED, TransactionState.PREPARED)
        else:
            ok = (TransactionState.PREPARED,)
        if st not in ok:
            hint = (
                " (a two-phase commit needs PREPARE first)" if txn.is_xa and not one_phase else ""
            )
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"transaction {txn.id} is {st.name}: cannot commit it{hint}",
            )
        txn.cancel_timer()
        self._forget_transaction(txn)
        # One COMMITTED record makes the commit atomic in the store: after a crash the
        # held work is applied from the transaction's records if it was not yet.
        self._store_transaction(txn, TransactionState.COMMITTED)
        for msg, dest_type in txn.sends:
            try:
                self.route(msg, link, dest_type)  # type: ignore[arg-type]
            except RouterError as exc:
                # Limits may have filled since the send was checked; the rest still commit.
                log.warning("committed message to %s dropped: %s", msg.destination, exc.reason)
        for entry in txn.entries.values():
            entry.owner.stats.acked += 1  # type: ignore[attr-defined]
            self.consumed(entry)
        if txn.stored:
            self.store.submit((TxnRemove(txn.id),))  # type: ignore[union-attr]
        txn.set_state(TransactionState.COMMITTED)

    def rollback(
        self, txn: Transaction, redeliver: bool = False, set_redelivered: bool = True
    ) -> None:
        """ROLLBACK (from any state that is not final): forget the held sends; the
        messages acknowledged in the transaction go back to their queues, marked
        redelivered unless JMQSetRedelivered is false.  (``redeliver``, JMQRedeliver, is
        accepted for the protocol's sake: the consumed messages always come back, which
        is what both the REDELIVER-then-ROLLBACK order of the JMS clients and the
        resource adapter's JMQRedeliver ask for.)"""
        if txn.is_final:
            raise RouterError(
                Status.PRECONDITION_FAILED, f"transaction {txn.id} is already {txn.state.name}"
            )
        txn.cancel_timer()
        self._forget_transaction(txn)
        if txn.state != TransactionState.TIMED_OUT:
            self._undo(txn, set_redelivered)
        if txn.stored:
            self.store.submit((TxnRemove(txn.id),))  # type: ignore[union-attr]
        txn.set_state(TransactionState.ROLLEDBACK)

    def _store_transaction(
        self, txn: Transaction, state: TransactionState, always: bool = False
    ) -> None:
        """Write a transaction's persistent sends and stored acknowledgements and its
        state; skipped when nothing in it is durable (unless ``always``)."""
        store = self.store
        if store is None:
            return
        if txn.stored:
            store.submit((TxnState(txn.id, int(state), txn.info()),))
            return
        records: list = [
            TxnSend(txn.id, m.store_key, m.destination, dt, m.raw)
            for m, dt in txn.sends
            if m.persistent
        ]
        records += [
            TxnAck(txn.id, e.msg.store_key, e.interest)
            for e in txn.entries.values()
            if e.interest is not None
        ]
        if not records and not always:
            return
        records.append(TxnState(txn.id, int(state), txn.info()))
        store.submit(records)
        txn.stored = True

    def _undo(self, txn: Transaction, set_redelivered: bool) -> None:
        entries = list(txn.entries.values())
        txn.entries = {}
        for e in entries:
            e.owner.stats.rolledback += 1  # type: ignore[attr-defined]
        if entries:
            sess = txn.session
            self._return_unacked(sess, entries, redelivered=set_redelivered)  # type: ignore[arg-type]

    def _forget_transaction(self, txn: Transaction) -> None:
        self.transactions.pop(txn.id, None)
        if txn.xid is not None and self.xids.get(txn.xid) is txn:
            del self.xids[txn.xid]

    def forget_timed_out(self, txn: Transaction) -> None:
        """A timed-out transaction's owner has been told (408): forget it."""
        if txn.state == TransactionState.TIMED_OUT:
            self._forget_transaction(txn)

    # How long a transaction the broker timed out stays known (answering 408).
    TIMED_OUT_RETENTION_MS = 10 * 60 * 1000

    def _expire_if_due(self, txn: Transaction, now: int | None = None) -> bool:
        if txn.lifetime <= 0:
            return False
        now = now_ms() if now is None else now
        if not txn.is_expired(now):
            return False
        log.warning(
            "transaction %s%s rolled back: its lifetime of %d ms expired",
            txn.id,
            f" (Xid {txn.xid})" if txn.xid is not None else "",
            txn.lifetime,
        )
        txn.cancel_timer()
        self._undo(txn, True)
        txn.sends = []
        txn.acks = []
        txn.timed_out_at = now
        txn.set_state(TransactionState.TIMED_OUT)
        return True

    def expire_transaction(self, txn_id: int) -> int | None:
        """The lifetime timer of ``txn_id`` fired: roll it back if it is due.  Returns the
        ms still to wait when the timer fired early (None otherwise)."""
        self._purge_timed_out()
        txn = self.transactions.get(txn_id)
        if txn is None or txn.is_final:
            return None
        now = now_ms()
        if self._expire_if_due(txn, now):
            if txn.link is None:
                self._forget_transaction(txn)  # nobody left to tell
            return None
        exp = txn.expires_at
        if exp and txn.state not in (TransactionState.PREPARED, TransactionState.TIMED_OUT):
            return max(exp - now, 1)
        return None

    def expire_transactions(self, now: int | None = None) -> int:
        """Roll back every transaction past its lifetime; returns how many."""
        now = now_ms() if now is None else now
        n = sum(1 for t in list(self.transactions.values()) if self._expire_if_due(t, now))
        self._purge_timed_out(now)
        return n

    def _purge_timed_out(self, now: int | None = None) -> None:
        now = now_ms() if now is None else now
        limit = now - self.TIMED_OUT_RETENTION_MS
        for t in [
            t
            for t in self.transactions.values()
            if t.state == TransactionState.TIMED_OUT and (t.link is None or t.timed_out_at < limit)
        ]:
            self._forget_transaction(t)

    def prepared_xids(self) -> list[Xid]:
        """RECOVER_TRANSACTION: the Xids of every PREPARED XA transaction."""
        return [
            t.xid
            for t in self.transactions.values()
            if t.xid is not None and t.state == TransactionState.PREPARED
        ]

    def rollback_session(self, sess: Session) -> None:
        """A session closes: its transactions roll back, except PREPARED ones and
        JMQSessionLess ones (XA by default), which stay without it."""
        for txn in [t for t in self.transactions.values() if t.session is sess]:
            if txn.state == TransactionState.TIMED_OUT:
                self._forget_transaction(txn)
            elif txn.state == TransactionState.PREPARED or txn.session_less:
                txn.session = None
            else:
                self.rollback(txn)

    def release_transactions(self, link: Link) -> None:
        """A connection closes: the transactions associated with it roll back, except
        PREPARED ones and JMQSessionLess ones (XA by default), which live on in doubt
        until a transaction manager or an administrator finishes them."""
        for txn in [t for t in self.transactions.values() if t.link is link]:
            if txn.state == TransactionState.TIMED_OUT:
                self._forget_transaction(txn)
            elif txn.state == TransactionState.PREPARED or txn.session_less:
                txn.link = None
                txn.session = None
                log.info(
                    "transaction %s (%s) kept after its connection closed", txn.id, txn.state.name
                )
                txn.changed()
            else:
                self.rollback(txn)

    # -- connections ---------------------------------------------------------

    def connection_closed(self, link: Link, sessions: Iterable[Session]) -> None:
        """Release everything a connection held: sessions, temp destinations, client ID."""
        self.release_transactions(link)
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
