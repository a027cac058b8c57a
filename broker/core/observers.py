"""Observers of the router: message events, and the typed hooks the layers above plug in.

Message events: what happened to a message, told to whoever plugged in to hear it.

The router tells its :class:`MessageEvents` when a message arrives at a destination, is
delivered, is consumed (acknowledged, committed, or delivered to a NO_ACKNOWLEDGE
session), expires, dies (undeliverable, over its delivery count, removed by a limit),
is rejected by a limit, or has no destination.  A report generator (broker/core/
reports.py) or the drop log (broker/core/drops.py) is a :class:`MessageObserver` added
with :meth:`MessageEvents.add` -- nothing is added to the router for it.

Cost on the hot path: each event keeps its own list of callbacks, filled only with the
methods an observer actually defines, and the router tests the list before building a
call.  With nobody listening to deliveries, a delivery costs one list check.

:class:`RouterObservers` holds the rest of what the layers above hear or are asked, each
a protocol of its own (producer flow, delayed messages, a check of every producer's
message, transactions, destination and consumer events, the cluster's rules); the broker
builds it and gives it to the router when it makes it.  What starts later (a cluster, a
metrics topic's publisher) registers through its typed ``add_``/``remove_`` methods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .destination import Destination, PositionClaims
    from .message import Entry, Message
    from .session import Consumer
    from .transaction_record import Transaction

log = logging.getLogger("broker.router")

EVENTS = ("arrived", "delivered", "consumed", "expired", "dead", "rejected", "unroutable")


class MessageObserver:
    """Override the events wanted; the ones left alone cost nothing.

    Any object with some of these methods may be added too (no subclassing needed).
    Observers run inside the router: they must be quick and must not call back into it
    (queue work for later instead).  An exception is logged and does not stop routing.
    """

    def arrived(self, dest: Destination, msg: Message) -> None:
        """A message was accepted for ``dest`` and is about to be queued (a delayed one
        when its delivery time comes)."""

    def delivered(self, entry: Entry) -> None:
        """A copy was handed to ``entry.consumer`` (``entry.count`` says how often)."""

    def consumed(self, entry: Entry) -> None:
        """A copy is done with: acknowledged, committed, or delivered without acks."""

    def expired(self, entry: Entry, to_dmq: bool) -> None:
        """A copy expired before it was consumed; ``to_dmq`` when the DMQ kept it."""

    def dead(self, entry: Entry, reason: str, to_dmq: bool) -> None:
        """A copy was given up on for ``reason`` (broker/core/dmq.py's reasons: dead or
        undeliverable as the client said, over maxDeliveryCount, removed by a limit)."""

    def rejected(self, dest: Destination, msg: Message, why: str) -> None:
        """``dest``'s limits (or the broker's) refused ``msg``."""

    def unroutable(self, name: str, dest_type: int, msg: Message, why: str) -> None:
        """``msg`` was refused because its destination ``name`` does not exist and
        cannot be created (auto-creation off, a reserved name...)."""


class MessageEvents:
    """The observers of one router, one callback list per event."""

    __slots__ = ("observers", *EVENTS)

    def __init__(self) -> None:
        self.observers: list[object] = []
        self.arrived: list[Callable[..., None]] = []
        self.delivered: list[Callable[..., None]] = []
        self.consumed: list[Callable[..., None]] = []
        self.expired: list[Callable[..., None]] = []
        self.dead: list[Callable[..., None]] = []
        self.rejected: list[Callable[..., None]] = []
        self.unroutable: list[Callable[..., None]] = []

    def add(self, observer: object) -> None:
        """Start telling ``observer`` about the events it has methods for."""
        if observer in self.observers:
            return
        self.observers.append(observer)
        for name in EVENTS:
            fn = getattr(observer, name, None)
            if fn is None or not callable(fn):
                continue
            if getattr(type(observer), name, None) is getattr(MessageObserver, name):
                continue  # the base class's no-op: not listening to this one
            getattr(self, name).append(fn)

    def remove(self, observer: object) -> None:
        if observer not in self.observers:
            return
        self.observers.remove(observer)
        for name in EVENTS:
            fns = getattr(self, name)
            fns[:] = [f for f in fns if getattr(f, "__self__", None) is not observer]

    @staticmethod
    def notify(fns: list[Callable[..., None]], *args: object) -> None:
        """Call each callback; callers test ``fns`` first so an empty list costs nothing."""
        for fn in fns:
            try:
                fn(*args)
            except Exception:  # an observer must never break routing
                log.exception("message observer %r failed", fn)


class ProducerFlow(Protocol):
    """Told when a FLOW_CONTROL destination's producer may send again, or must stop."""

    def producer_room(self, link: object, producer_id: int) -> None:
        """The destination has room again (RESUME_FLOW to ``link``'s producer)."""

    def producer_pause(self, link: object, producer_id: int) -> None:
        """An administrator paused the destination's producers: stop now (RESUME_FLOW
        with JMQSize 0); they wait for :meth:`producer_room`."""


class DelayTimer(Protocol):
    """Told the earliest due time whenever a delayed message is queued (the server
    schedules a timer for ``router.release_due``)."""

    def delayed_due(self, due_ms: int) -> None: ...


class PutCheck(Protocol):
    """Asked about each producer's message before it is accepted (routed or held in a
    transaction)."""

    def check_put(self, msg: Message) -> None:
        """Raise RouterError to fail the send (the report generator: a message asking
        for reports without a JMSReplyTo)."""


class TransactionObserver(Protocol):
    """Told about every change of a transaction's state (the administrators' rows, the
    cluster's remote transactions)."""

    def transaction_changed(self, txn: Transaction) -> None: ...


class RouterEventObserver(Protocol):
    """Told about destinations created, updated or destroyed, durable subscriptions
    removed and connections closed: ``(kind, data)``, e.g. ``("destination.created",
    {"name": ..., "type": ...})``.  The router also tells ``destination.paused``/
    ``resumed``/``purged``; the layers above add theirs on the same channel
    (``connection.opened``/``rejected``, ``destination.compacted``, ``service.paused``/
    ``resumed``/``updated``, ``broker.properties``/``quiesce``/``shutdown``,
    ``broker.resource_state`` (the memory state changed: ``old``, ``new``),
    ``broker.takeover.start``/``complete``/``fail`` (HA: ``failed``, ``id``),
    ``cluster.broker.join``/``down`` (a peer's ``address``; ``master`` or, in an HA
    cluster, ``ha`` and ``broker_id``)): observers ignore the kinds they do not know."""

    def router_event(self, kind: str, data: dict) -> None: ...


class ConsumerObserver(Protocol):
    """Told ``("added" | "removed", consumer)`` about every local consumer."""

    def consumer_event(self, what: str, cons: Consumer) -> None: ...


class ClusterRules(Protocol):
    """What the router asks of the cluster it is part of."""

    @property
    def positions(self) -> PositionClaims:
        """The cluster's say over queue consumer positions (core/positions.py)."""
        ...

    def check_change(self, kind: str, name: str) -> None:
        """Raise RouterError to refuse a change the master broker must record (an
        administrator's destination, a durable subscription made or removed) while it
        cannot (the master is unreachable)."""


class RouterObservers:
    """Everything outside core that the router tells or asks, typed; the broker makes it
    and gives it to :class:`~broker.core.router.MessageRouter` when it builds one."""

    __slots__ = (
        "cluster",
        "consumers",
        "delay_timer",
        "producer_flow",
        "put_check",
        "router_events",
        "transactions",
    )

    def __init__(
        self,
        *,
        producer_flow: ProducerFlow | None = None,
        delay_timer: DelayTimer | None = None,
        put_check: PutCheck | None = None,
        transactions: list[TransactionObserver] | None = None,
    ) -> None:
        self.producer_flow = producer_flow
        self.delay_timer = delay_timer
        self.put_check = put_check
        self.transactions: list[TransactionObserver] = list(transactions or ())
        self.router_events: list[RouterEventObserver] = []
        self.consumers: list[ConsumerObserver] = []
        # None on a broker alone; set once by the cluster service (attach_cluster).
        self.cluster: ClusterRules | None = None

    def add_consumer_observer(self, obs: ConsumerObserver) -> None:
        if obs not in self.consumers:
            self.consumers.append(obs)

    def remove_consumer_observer(self, obs: ConsumerObserver) -> None:
        if obs in self.consumers:
            self.consumers.remove(obs)

    def add_router_event_observer(self, obs: RouterEventObserver) -> None:
        if obs not in self.router_events:
            self.router_events.append(obs)

    def add_transaction_observer(self, obs: TransactionObserver) -> None:
        if obs not in self.transactions:
            self.transactions.append(obs)

    def remove_transaction_observer(self, obs: TransactionObserver) -> None:
        if obs in self.transactions:
            self.transactions.remove(obs)

    def transaction_changed(self, txn: Transaction) -> None:
        for obs in self.transactions:
            try:
                obs.transaction_changed(txn)
            except Exception:  # an observer must not break the protocol
                log.exception("transaction observer %r failed", obs)

    def consumer_event(self, what: str, cons: Consumer) -> None:
        for obs in self.consumers:
            obs.consumer_event(what, cons)

    def router_event(self, kind: str, data: dict) -> None:
        for obs in self.router_events:
            try:
                obs.router_event(kind, data)
            except Exception:  # a monitoring hook must never break routing
                log.exception("router event observer %r failed", obs)

    def check_change(self, kind: str, name: str) -> None:
        """Raise RouterError when the cluster refuses the change (see ClusterRules)."""
        cluster = self.cluster
        if cluster is not None:
            cluster.check_change(kind, name)


__all__ = [
    "EVENTS",
    "ClusterRules",
    "ConsumerObserver",
    "DelayTimer",
    "MessageEvents",
    "MessageObserver",
    "ProducerFlow",
    "PutCheck",
    "RouterEventObserver",
    "RouterObservers",
    "TransactionObserver",
]
