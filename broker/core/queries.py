"""Named read-only queries on the router's state, for the layers above core.

The admin service (and anything else that reports on the broker: the engine, the
cluster, events) asks these instead of walking the router's tables, the sessions'
unacknowledged entries, the transactions' held acknowledgements or the destinations'
delivery queues itself.  Each function reads, never changes, and says what it returns;
the commands that change state in the same area are the router's
(:meth:`~broker.core.router.MessageRouter.purge`,
:meth:`~broker.core.router.MessageRouter.purge_subscription`,
:meth:`~broker.core.router.MessageRouter.delete_message`).

Where one part owns the state, the question is that part's method and the function here
only names it for the caller (a session's unacknowledged count per consumer:
:meth:`Session.unacked_count <broker.core.session.Session.unacked_count>`; the
transactions: :class:`~broker.core.transaction_rules.TransactionManager`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from broker.protocol.types import DEST_TOPIC

from .destination import Destination, Subscription, TopicDestination
from .session import Consumer, Session

if TYPE_CHECKING:
    from .message import DeliveryTarget, Message
    from .router import MessageRouter
    from .transaction_record import Transaction


# (destination name, is a topic) -> [message count, bytes]
DestCounts = dict[tuple[str, bool], list[int]]


class HeldMessage(NamedTuple):
    """A message a destination holds, as :func:`held_messages` lists it."""

    msg: Message
    # Delivered before (any copy of it, for a topic's subscriptions).
    redelivered: bool
    # Waiting for delivery (False: delivered and not yet acknowledged, or acknowledged
    # in a transaction that is still open).
    pending: bool


# -- destinations ---------------------------------------------------------------------


def destinations(
    router: MessageRouter, *, queues: bool = True, topics: bool = True
) -> list[Destination]:
    """Every destination (the DMQ and temporary ones included): queues first, then
    topics, each in creation order; ``queues``/``topics`` False leave that kind out."""
    found: list[Destination] = []
    if queues:
        found += router.queues.values()
    if topics:
        found += router.topics.values()
    return found


def waiting_count(dest: Destination) -> int:
    """How many message copies wait for delivery in ``dest`` (for a topic: in all its
    subscriptions); delivered-unacknowledged and delayed ones are not counted."""
    return sum(q.count for q in dest.delivery_queues())


def paged_out(dest: Destination) -> tuple[int, int]:
    """(count, bytes) of the message copies waiting in ``dest`` whose bodies are paged
    out of memory (broker/core/paging.py): one look at each, for administrators."""
    n = size = 0
    for q in dest.delivery_queues():
        qn, qsize = q.paged_out()
        n += qn
        size += qsize
    return n, size


def delayed_by_destination(router: MessageRouter) -> DestCounts:
    """[count, bytes] of the messages waiting for their delivery time (JMS 2.0 delivery
    delay), by (destination name, is a topic)."""
    delayed: DestCounts = {}
    for _due, _seq, msg, dtype in router.delayed:
        row = delayed.setdefault((msg.destination, bool(dtype & DEST_TOPIC)), [0, 0])
        row[0] += 1
        row[1] += msg.size
    return delayed


def held_in_transactions(router: MessageRouter) -> DestCounts:
    """[count, bytes] of the messages sent in open (not COMMITTED) transactions, by
    (destination name, is a topic): OpenMQ counts them in their destination from the
    send on, where this router routes them at COMMIT."""
    return router.txns.held_sends()


def held_messages(router: MessageRouter, dest: Destination) -> list[HeldMessage]:
    """Every message ``dest`` holds, oldest (by JMSTimestamp) first, each once: waiting
    in its delivery queues, delivered and not acknowledged in a session, or acknowledged
    in a transaction that has not ended.  A message is ``redelivered`` if any of its
    waiting or unacknowledged copies is."""
    found: dict[bytes, list] = {}
    for q in dest.delivery_queues():
        for e in q:
            row = found.setdefault(e.msg.key, [e.msg, e.redelivered, True])
            row[1] = row[1] or e.redelivered
    for sess in router.sessions.values():
        for e in sess.unacked.values():
            if e.owner is dest:
                row = found.setdefault(e.msg.key, [e.msg, e.redelivered, False])
                row[1] = row[1] or e.redelivered
    for txn in router.txns.all_transactions():
        for e in txn.entries.values():
            if e.owner is dest:
                found.setdefault(e.msg.key, [e.msg, e.redelivered, False])
    rows = [HeldMessage(r[0], r[1], r[2]) for r in found.values()]
    rows.sort(key=lambda r: r.msg.timestamp)
    return rows


# -- consumers and producers ------------------------------------------------------------


def pending_acks(consumer: Consumer) -> int:
    """How many messages delivered to ``consumer`` its session has not acknowledged
    (those acknowledged in an open transaction are no longer counted)."""
    return consumer.session.unacked_count(consumer.id)


def consumer_count(sessions: Iterable[Session]) -> int:
    """How many consumers the given sessions (a connection's) have open."""
    return sum(len(s.consumers) for s in sessions)


def producer_count(sessions: Iterable[Session]) -> int:
    """How many producers the given sessions (a connection's) have open: one look at
    each session, where :func:`producers_per_connection` looks at every producer."""
    return sum(len(s.producers) for s in sessions)


def producers_per_connection(router: MessageRouter) -> dict[int, int]:
    """How many producers each connection has open, by connection (link) id; connections
    without producers are absent."""
    counts: dict[int, int] = {}
    for prod in router.producers.values():
        link_id = prod.session.link.id
        counts[link_id] = counts.get(link_id, 0) + 1
    return counts


def producer_waiting(dest: Destination, producer_id: int) -> bool:
    """Is the producer held by ``dest``'s flow control or an administrator's pause (its
    next RESUME_FLOW waits for room)?"""
    return any(pid == producer_id for _link, pid in dest.waiting_producers)


# -- topic subscriptions -----------------------------------------------------------------


def subscriptions(
    router: MessageRouter, topic_name: str | None = None
) -> list[tuple[TopicDestination, Subscription]]:
    """(topic, subscription) for every durable subscription and every shared non-durable
    one, of every topic or only of the topic named ``topic_name``: per topic its durable
    ones first, then the shared ones that are not durable."""
    rows: list[tuple[TopicDestination, Subscription]] = []
    for topic in router.topics.values():
        if topic_name is not None and topic.name != topic_name:
            continue
        subs = [*topic.durables.values()]
        subs += [s for s in topic.shared.values() if s not in subs]
        rows += [(topic, s) for s in subs]
    return rows


def find_durable(router: MessageRouter, client_id: str | None, name: str) -> Subscription | None:
    """The durable subscription ``name`` of client ID ``client_id`` (None: made without
    one), on whichever topic it is; None if there is none."""
    return router.subs.find_durable((client_id, name))


def subscription_consumers(sub: Subscription) -> list[DeliveryTarget]:
    """The consumers attached to a subscription now (none: an inactive durable)."""
    return list(sub.queue.consumers)


def subscription_message_count(sub: Subscription) -> int:
    """The messages a subscription holds: waiting, plus delivered to its attached
    consumers and not acknowledged."""
    held = sub.queue.count
    for cons in sub.queue.consumers:
        if isinstance(cons, Consumer):
            held += cons.session.unacked_count(cons.id)
    return held


# -- transactions ------------------------------------------------------------------------


def transactions(router: MessageRouter) -> list[Transaction]:
    """Every transaction the broker holds (any state, in doubt ones included), oldest
    first."""
    return router.txns.all_transactions()


def transaction_by_id(router: MessageRouter, txn_id: int) -> Transaction | None:
    """The transaction with JMQTransactionID ``txn_id``, or None; unlike
    :meth:`~broker.core.transaction_rules.TransactionManager.find_transaction` it neither
    raises nor expires one past its lifetime."""
    return router.txns.by_id(txn_id)


__all__ = [
    "DestCounts",
    "HeldMessage",
    "consumer_count",
    "delayed_by_destination",
    "destinations",
    "find_durable",
    "held_in_transactions",
    "held_messages",
    "pending_acks",
    "producer_count",
    "producer_waiting",
    "producers_per_connection",
    "subscription_consumers",
    "subscription_message_count",
    "subscriptions",
    "transaction_by_id",
    "transactions",
    "waiting_count",
]
