"""Sessions, consumers and producers, and the link they deliver through.

The router never touches sockets: a :class:`Link` (the server's connection object)
is told to send bytes and says whether it can take more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker.protocol.types import FLAG_C, AckMode
from broker.store.base import MsgDelivered

from .message import Entry, Link

if TYPE_CHECKING:
    from broker.core.selector import Selector

    from .destination import Destination, Subscription
    from .dispatch import DeliveryQueue


class DeliveryEvents(Protocol):
    """The message events a consumer tells of its deliveries (the router's
    :class:`~broker.core.observers.MessageEvents`)."""

    delivered: list[Callable[..., None]]

    def notify(self, fns: list[Callable[..., None]], *args: object) -> None: ...


class Settler(Protocol):
    """Settles what a consumer delivered to a session that does not acknowledge (the
    router's :class:`~broker.core.acks.Acknowledgements`)."""

    def settle(self, entry: Entry) -> None: ...


class Session:
    """A JMS session: its ack mode, its consumers and the messages it has not acknowledged."""

    __slots__ = (
        "id",
        "link",
        "ack_mode",
        "acknowledges",
        "stopped",
        "consumers",
        "producers",
        "unacked",
    )

    def __init__(self, sid: int, link: Link, ack_mode: int) -> None:
        self.id = sid
        self.link = link
        self.ack_mode = ack_mode
        # Read on every delivery; a session's mode never changes.
        self.acknowledges = ack_mode != AckMode.NO_ACKNOWLEDGE
        self.stopped = False
        self.consumers: dict[int, Consumer] = {}
        self.producers: dict[int, Producer] = {}
        # (consumer id, sysmsgid) -> entry, in delivery order.
        self.unacked: dict[tuple[int, bytes], Entry] = {}

    def unacked_count(self, consumer_id: int) -> int:
        """How many messages delivered to consumer ``consumer_id`` of this session are
        not acknowledged yet (not counting those acknowledged in an open transaction)."""
        return sum(1 for key in self.unacked if key[0] == consumer_id)


class Consumer:
    """A client's message consumer, fed by one delivery queue: the local
    :class:`~broker.core.dispatch.DeliveryTarget`."""

    __slots__ = (
        "id",
        "session",
        "link",
        "destination",
        "queue",
        "subscription",
        "selector",
        "no_local",
        "prefetch",
        "credit",
        "closed",
        "delivered",
        "events",
        "acks",
        "render",
    )

    def __init__(
        self,
        cid: int,
        session: Session,
        destination: Destination,
        queue: DeliveryQueue,
        selector: Selector | None,
        no_local: bool,
        prefetch: int,
        events: DeliveryEvents,
        acks: Settler,
        subscription: Subscription | None = None,
    ) -> None:
        self.id = cid
        self.session = session
        self.link = session.link
        self.destination = destination
        self.queue = queue
        self.subscription = subscription
        self.selector = selector
        self.no_local = no_local
        # prefetch <= 0 means unlimited: no consumer flow control.
        self.prefetch = prefetch
        self.credit = prefetch if prefetch > 0 else -1
        self.closed = False
        self.delivered = 0
        self.events = events
        self.acks = acks
        # The link's own encoding of a delivery (see message.Link), read once.
        self.render = self.link.render_delivery

    def ready(self) -> bool:
        return (
            self.credit != 0
            and not self.closed
            and not self.session.stopped
            and self.link.can_deliver()
        )

    def deliver(self, entry: Entry) -> None:
        entry.count += 1
        entry.consumer = self
        extra = 0
        if self.credit > 0:
            self.credit -= 1
            if self.credit == 0:
                # Tell the client we stop here until its RESUME_FLOW.
                extra = FLAG_C
        msg = entry.msg
        render = self.render
        if render is None:
            buf = msg.encode_delivery(self.id, entry.redelivered, entry.count, extra)
        else:
            # Bytes, not a packet: they go back to the link that made them, whose
            # send_delivery takes them (StompLink's, which overrides the JMQ one).
            buf = render(self.id, msg, entry.redelivered, entry.count)  # type: ignore[assignment]
        if entry.interest is not None:
            # So a restart knows this copy was delivered (and marks it redelivered).
            store = entry.owner.store
            if store is not None:
                store.submit((MsgDelivered(msg.store_key, entry.interest, entry.count),))
        events = self.events
        if events.delivered:
            events.notify(events.delivered, entry)
        session = self.session
        if session.acknowledges:
            session.unacked[(self.id, msg.key)] = entry
        else:
            self.acks.settle(entry)
        self.delivered += 1
        self.link.send_delivery(buf)

    def resume(self, size: int | None) -> None:
        """RESUME_FLOW for this consumer: a new allowance (``-1`` or ``None`` keeps the old size)."""
        if size is not None and size != 0:
            self.prefetch = size
        self.credit = self.prefetch if self.prefetch > 0 else -1


class Producer:
    """A message producer registered with ADD_PRODUCER."""

    __slots__ = ("id", "session", "destination", "batch", "sent", "granted", "granted_at")

    def __init__(self, pid: int, session: Session, destination: Destination, batch: int) -> None:
        self.id = pid
        self.session = session
        self.destination = destination
        self.batch = batch
        self.sent = 0
        # The credit (messages) last given by flow control (0 while it waits), and when.
        self.granted = 0
        self.granted_at = 0.0
