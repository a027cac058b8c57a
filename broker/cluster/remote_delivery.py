"""The two ends of remote delivery.

On the message's home broker a :class:`RemoteConsumer` stands for a consumer on another
broker: it is a :class:`~broker.core.dispatch.DeliveryTarget` attached to the queue's
delivery queue or to a subscription like a local consumer, and its ``deliver`` sends
G_MESSAGE_DATA over the link.  The entries it sent stay in its ``inflight`` table (and a
persistent message in the home store) until the consumer's broker acknowledges them;
if that broker goes away they go back to their queue, marked redelivered.

On the consumer's broker an :class:`InboundOrigin` is the ``owner`` and ``queue`` of the
entries received for one local consumer: when the router settles such an entry
(``account_out``) the acknowledgement goes home, and when it puts one back
(``put_back``: session recover, rollback) it is delivered again from here while its
consumer lives, as OpenMQ's brokers do; once the consumer has gone the home broker is told
(ACK_IGNORED) to deliver it again.  Nothing in the router knows about either.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING

from broker.core.dispatch import next_ready
from broker.core.errors import now_ms
from broker.core.session import Consumer
from broker.protocol import gpacket as gp
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC

if TYPE_CHECKING:
    from collections.abc import Iterable

    from broker.core.destination import Destination, Subscription
    from broker.core.dispatch import DeliveryQueue, DeliveryTarget
    from broker.core.message import Entry
    from broker.core.selector import Selector
    from broker.core.session import Link
    from broker.store.base import Store

    from .delivery import RemoteDelivery
    from .link_driver import BrokerLink

DEFAULT_WINDOW = 1000
# Remote consumers get connection ids of their own (negative: never a local connection's).
_link_ids = itertools.count(-1, -1)


class RemoteLinkRef:
    """What a delivery queue sees as a remote consumer's connection (noLocal, ids)."""

    __slots__ = ("id", "client_id")
    # Never called: a remote consumer delivers through its cluster link.
    render_delivery = None

    def __init__(self, client_id: str | None) -> None:
        self.id = next(_link_ids)
        self.client_id = client_id

    def can_deliver(self) -> bool:
        return True

    def send_delivery(self, buf: bytearray) -> None:  # pragma: no cover - never called
        raise RuntimeError("a remote consumer's deliveries go through its cluster link")


class RemoteConsumer:
    """A consumer on another broker, as this (home) broker delivers to it."""

    def __init__(
        self,
        service: RemoteDelivery,
        link: BrokerLink,
        uid: gp.ConsumerUID,
        destination: Destination,
        queue: DeliveryQueue,
        selector: Selector | None,
        window: int,
        link_ref: RemoteLinkRef,
        durable_name: str | None,
        subscription: Subscription | None = None,
    ) -> None:
        self.service = service
        self.peer = link
        self.uid = uid
        self.destination = destination
        self.queue = queue
        self.selector = selector
        self.window = window if window > 0 else DEFAULT_WINDOW
        # A subscription the peer announced as its own interest: its window while no
        # consumer is attached, and the prefetch of each attached one (G_DURABLE_ATTACH).
        self.base_window = self.window
        self.attached: dict[int, int] = {}
        # Whether it stands for a subscription the peer announced (see delivery.py).
        self.announced = False
        self.link: Link = link_ref
        self.durable_name = durable_name
        # A JMS 2.0 shared subscription's name (OpenMQ's G_DURABLE_ATTACH names it).
        self.shared_name: str | None = None
        self.subscription = subscription
        self.inflight: dict[bytes, Entry] = {}
        self.closed = False
        self.delivered = 0
        # What the admin listings read from a consumer (GET_CONSUMERS, GET_DURABLES).
        self.id = uid.consumer_id
        self.session = _RemoteSession(self)

    @property
    def credit(self) -> int:
        return self.window - len(self.inflight)

    def ready(self) -> bool:
        if self.closed or self.peer.closed or self.peer.flow_stopped:
            return False
        if len(self.inflight) >= self.window:
            return False
        dest = self.destination
        if dest.is_queue and dest.attributes.get("localDeliveryPreferred"):
            # A local consumer that can take the message gets it first.
            for c in self.queue.consumers:
                if not isinstance(c, RemoteConsumer) and c.ready():
                    return False
        return True

    def deliver(self, entry: Entry) -> None:
        entry.count += 1
        entry.consumer = self
        msg = entry.msg
        self.inflight[msg.key] = entry
        self.delivered += 1
        events = self.service.router.events
        if events.delivered:
            events.notify(events.delivered, entry)
        w = gp.BodyWriter()
        self.uid.write(w)
        w.raw(bytes(msg.encode_delivery(self.uid.consumer_id, entry.redelivered, entry.count)))
        # OpenMQ counts the deliveries before this one, and reads D (whether to send a
        # "delivered" ack back) and the home broker's address as mandatory.
        props: dict[str, object] = {
            **self.service.peers.address_props(),
            "D": False,
            "C": 1,
            f"CUID-DCT:{self.uid.consumer_id}": entry.count - 1,
        }
        if entry.redelivered:
            props["redelivered"] = True
        self.peer.send(gp.GPacket(gp.G_MESSAGE_DATA, props, w.bytes()))

    def set_attached(self, consumer_id: int, prefetch: int | None) -> None:
        """A consumer attached to (prefetch given) or left (None) this subscription."""
        if prefetch is None:
            self.attached.pop(consumer_id, None)
        else:
            self.attached[consumer_id] = prefetch if prefetch > 0 else DEFAULT_WINDOW
        self.window = max(self.base_window, sum(self.attached.values()))

    def take_inflight(self) -> list[Entry]:
        out = list(self.inflight.values())
        self.inflight.clear()
        return out


class RemoteConsumers:
    """The other brokers' consumers attached here (remote delivery's, read by the remote
    transactions): by (link, consumer id) as their interests announced them, and the
    consumers attached to a subscription a peer announced (G_DURABLE_ATTACH), by
    (link, their id), to that subscription's key."""

    def __init__(self) -> None:
        self.remotes: dict[tuple[BrokerLink, int], RemoteConsumer] = {}
        self.attached: dict[tuple[BrokerLink, int], tuple[BrokerLink, int]] = {}

    def remote_for(self, link: BrokerLink, consumer_id: int) -> RemoteConsumer | None:
        """The remote consumer a peer's acknowledgement names: one announced by its
        interest, or the subscription an attached consumer of it belongs to."""
        rc = self.remotes.get((link, consumer_id))
        if rc is None:
            key = self.attached.get((link, consumer_id))
            if key is not None:
                rc = self.remotes.get(key)
        return rc


class _RemoteSession:
    """The session a remote consumer's messages count as unacknowledged in, for the
    admin listings: the messages sent to the other broker and not yet acknowledged."""

    ack_mode = 1  # AUTO_ACKNOWLEDGE: the remote broker acknowledges for its client

    def __init__(self, rc: RemoteConsumer) -> None:
        self._rc = rc

    @property
    def unacked(self) -> dict[tuple[int, bytes], Entry]:
        rc = self._rc
        return {(rc.id, k): e for k, e in rc.inflight.items()}


class _Stats:
    # The counters the router's paths bump on an entry's owner (acks, limits, purge,
    # a transaction's rollback).
    __slots__ = ("acked", "discarded", "expired", "purged", "rolledback")

    def __init__(self) -> None:
        self.acked = self.discarded = self.expired = self.purged = self.rolledback = 0


class InboundOrigin:
    """Owner and queue of the entries a home broker sent for one local consumer (an
    :class:`~broker.core.dispatch.EntryOwner` and :class:`~broker.core.dispatch.EntryQueue`)."""

    # The home broker keeps the dead copy (it is told why with ACK_DEAD).
    attributes: dict = {"useDMQ": False}
    store: Store | None = None
    is_queue = True
    # The message's home broker tells its observers (reports) what becomes of it: the
    # copies here raise no events of their own there.
    home_elsewhere = True

    def __init__(
        self, service: RemoteDelivery, link: BrokerLink, uid: gp.ConsumerUID, dest: str
    ) -> None:
        self.service = service
        self.peer = link
        self.uid = uid
        # For the log: the destination of the first message (the consumer's own).
        self.name = dest
        # Messages whose home broker asked (G_MESSAGE_DATA D=true) to hear when they
        # reach the consumer: OpenMQ's broker asks so of the last message its window for
        # this consumer allows, and sends no more until the ACK_DELIVERED comes back.
        self.notify: set[bytes] = set()
        self.stats = _Stats()
        # Entries the local consumer could not take yet (no credit, stopped connection).
        self.pending: deque[Entry] = deque()
        # Set when the home broker delivers to a local subscription (its UID), not to
        # one consumer: the subscription's consumers share what comes.
        self.subscription: Subscription | None = service.interests.uid_subs.get(uid.consumer_id)
        self._turn = 0

    @property
    def active(self) -> bool:
        return not self.peer.closed

    def limit(self, name: str, default: int = -1) -> int:
        if name != "maxDeliveryCount":
            return default  # the other limits are the home broker's to apply
        # A message the local client backs out (recover, rollback) is redelivered from
        # here while its consumer lives, so this broker counts its deliveries and, over
        # its own destination's maxDeliveryCount, gives it up to the home broker (ACK_DEAD,
        # undeliverable: the DMQ and the reports are the home's).
        kind = DEST_TOPIC if self.subscription is not None else DEST_QUEUE
        dest = self.service.router.lookup(self.name, kind)
        return dest.limit(name, default) if dest is not None else default

    def _ack_uid(self, entry: Entry) -> gp.ConsumerUID:
        """Whom an acknowledgement names: the consumer, also of a message the home broker
        sent a subscription (as OpenMQ's brokers acknowledge)."""
        if self.subscription is not None:
            cons = entry.consumer
            if isinstance(cons, Consumer):
                return gp.ConsumerUID(cons.id, cons.link.id, self.uid.broker)
        return self.uid

    def account_out(self, entry: Entry) -> None:
        if self.service.txns.held_two_phase(entry):
            return  # its home broker hears the XA transaction's outcome (remote_transactions.py)
        self.service.send_ack(self.peer, self._ack_uid(entry), [entry.msg.key], gp.ACK_ACKNOWLEDGED)

    def give_up(self, entry: Entry, reason: str, comment: str | None) -> None:
        """Expired here or given up by the local client: ACK_DEAD home with the reason,
        where the message goes to the DMQ and its reports are sent."""
        self.service.send_ack(
            self.peer,
            self._ack_uid(entry),
            [entry.msg.key],
            gp.ACK_DEAD,
            {"deadReason": reason, "deadComment": comment},
        )

    def put_back(self, entries: Iterable[Entry]) -> None:
        """Entries the local client did not keep (rollback, recover, consumer closed)."""
        entries = list(entries)
        if self._consumer_lives():
            # Redelivered from here, as OpenMQ's brokers do: their home broker leaves an
            # ACK_IGNORED of a consumer that is still attached unanswered (the consumer's
            # broker has the copies), and gives them back only when the consumer goes.
            self.pending.extendleft(reversed(entries))
            self.service.retry_pending(self)
            return
        for e in entries:
            self.notify.discard(e.msg.key)
            self.service.send_ack(
                self.peer,
                self._ack_uid(e),
                [e.msg.key],
                gp.ACK_IGNORED,
                {"redelivered": bool(e.redelivered)},
            )

    def _consumer_lives(self) -> bool:
        if self.peer.closed:
            return False
        if self.subscription is not None:
            return not self.waiting
        cons = self.service.router.consumer(self.uid.consumer_id)
        return cons is not None and not cons.closed

    def dispatch(self, _now: int | None = None) -> None:
        """Hand pending entries to the local consumer while it can take them."""
        if self.subscription is not None:
            self._dispatch_subscription()
            return
        cons: Consumer | None = self.service.router.consumer(self.uid.consumer_id)
        if cons is None or cons.closed:
            self.put_back(list(self.pending))
            self.pending.clear()
            self.notify.clear()
            return
        while self.pending and cons.ready():
            self._hand(cons, self.pending.popleft())

    def _dispatch_subscription(self) -> None:
        """Messages sent to a local subscription go to its consumers, round robin; with
        none attached they wait here for the next (the home broker sends no more than
        the subscription's window meanwhile)."""
        sub = self.subscription
        assert sub is not None
        # Its local consumers only: what a home broker sent is not sent on to a third.
        local = [c for c in sub.queue.consumers if isinstance(c, Consumer)]
        while self.pending:
            i = next_ready(local, self._turn)
            if i < 0:
                return
            self._turn = i + 1
            self._hand(local[i], self.pending.popleft())

    def _hand(self, cons: DeliveryTarget, entry: Entry) -> None:
        """Deliver ``entry`` to ``cons``; tell its home broker when it asked (D=true)."""
        cons.deliver(entry)
        if self.notify and entry.msg.key in self.notify:
            self.notify.discard(entry.msg.key)
            self.service.send_ack(
                self.peer, self._ack_uid(entry), [entry.msg.key], gp.ACK_DELIVERED
            )

    @property
    def waiting(self) -> bool:
        """Entries wait for a consumer to attach (nothing to retry until one does)."""
        sub = self.subscription
        return sub is not None and not any(
            not isinstance(c, RemoteConsumer) for c in sub.queue.consumers
        )

    def offer(self, entry: Entry) -> None:
        self.pending.append(entry)
        self.dispatch(now_ms())
