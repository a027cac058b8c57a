"""What core's parts share: the destination registry, the store, the settings, the events.

:class:`~broker.core.router.MessageRouter` is the façade the layers above use; the parts
with rules of their own (subscriptions.py, transaction_rules.py, acks.py, limits.py) are
given a :class:`CoreContext` when it builds them, not the router: the tables and hooks
they read, and the two moves every part makes (an entry consumed, an entry forgotten).
What a part needs of another part is passed to it as that part (the acknowledgements
need the limits' DMQ rule), and what the transactions need of the façade itself (to
route a committed message) is the :class:`Routing` protocol.  So no part imports the
router, and core has no import circle (tests/test_layering_core.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.protocol.types import DEST_TOPIC, DMQ_NAME

from . import dmq
from .destination import Destination, QueueDestination, TopicDestination, Totals
from .drops import DEFAULT_INTERVAL as DEFAULT_DROP_INTERVAL
from .ids import UIDGenerator
from .observers import MessageEvents, RouterObservers

if TYPE_CHECKING:
    from broker.store.base import Store

    from .message import Entry, Message
    from .paging import Pager
    from .session import Link, Producer


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
    # imq.metrics.topic.enabled: subscribers may make the metrics topics (monitoring.py).
    metrics_topics: bool = True
    # imq.log.destination.capacity: the messages mq.log.broker holds at most.
    log_topic_capacity: int = 100


class Routing(Protocol):
    """What the transactions ask of the façade: a committed message routed, a
    transacted send's destination made when auto-creation allows."""

    def route(
        self, msg: Message, link: Link | None, dest_type: int, *, internal: bool = False
    ) -> Destination: ...

    def ensure_destination(self, name: str, dest_type: int, link: Link | None) -> Destination: ...


class CoreContext:
    """One router's shared state, as its parts see it."""

    def __init__(
        self, settings: RouterSettings, uids: UIDGenerator, observers: RouterObservers
    ) -> None:
        self.settings = settings
        self.uids = uids
        self.observers = observers
        self.totals = Totals()
        # The destination registry.
        self.queues: dict[str, QueueDestination] = {}
        self.topics: dict[str, TopicDestination] = {}
        self.dmq = QueueDestination(DMQ_NAME, totals=self.totals, attributes=dmq.DMQ_DEFAULTS)
        self.dmq.is_dmq = True
        self.queues[DMQ_NAME] = self.dmq
        # Every producer by id (flow control asks whether one is still open).
        self.producers: dict[int, Producer] = {}
        # Message observers (broker/core/observers.py).
        self.events = MessageEvents()
        # Set once a message store is attached (before any client connects).
        self.store: Store | None = None
        # Pages waiting messages' bodies out when memory runs short (core/paging.py).
        self.pager: Pager | None = None

    # -- the destination registry ------------------------------------------------------

    def lookup(self, name: str, dest_type: int) -> Destination | None:
        if dest_type & DEST_TOPIC:
            return self.topics.get(name)
        return self.queues.get(name)

    def each_destination(self) -> list[Destination]:
        """Every destination, queues first (a copy: callers may remove as they go)."""
        return [*self.queues.values(), *self.topics.values()]

    def each_topic(self) -> Iterable[TopicDestination]:
        """Every topic (a view: callers must not add or remove topics meanwhile)."""
        return self.topics.values()

    # -- what becomes of an entry ------------------------------------------------------

    def consumed(self, entry: Entry) -> None:
        """An entry is done with (acknowledged, committed, or delivered to a
        NO_ACKNOWLEDGE session): accounted out, settled in the store, observers told."""
        entry.owner.account_out(entry)
        fns = self.events.consumed
        if fns:
            self.events.notify(fns, entry)

    def forget(self, entry: Entry) -> None:
        """An entry leaves without being consumed (its queue or subscription is gone,
        or a recovered commit already settled it): accounted out, settled in the store."""
        entry.owner.account_out(entry)


__all__ = ["CoreContext", "RouterSettings", "Routing"]
