"""Physical destinations: queues, topics and topic subscriptions."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from broker.protocol.dest_attributes import DESTINATION_ATTRIBUTES
from broker.protocol.names import (
    JMQ_RELOAD_XML_SCHEMA_ON_FAILURE,
    JMQ_VALIDATE_XML_SCHEMA,
    JMQ_XML_SCHEMA_URI_LIST,
)
from broker.protocol.properties import as_int
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    DestState,
    DestType,
    LimitBehavior,
)
from broker.store.base import (
    QUEUE_INTEREST,
    DurableAdd,
    DurableRemove,
    MsgAdd,
    MsgSettle,
    Store,
)

from .dispatch import DeliveryQueue, DeliveryTarget
from .message import Entry, Link, Message

if TYPE_CHECKING:
    from broker.core.selector import Selector

    from .paging import Pager

UNLIMITED = -1
# Attributes whose 0 is no limit (OpenMQ's broker reads them so): a 0 stored by an older
# release or written into a store by hand must not refuse every message.
_ZERO_UNLIMITED = frozenset(a.name for a in DESTINATION_ATTRIBUTES if a.zero_unlimited)
DEST_DMQ = int(DestType.DMQ)


def attribute_limit(attributes: Mapping[str, object], name: str, default: int = UNLIMITED) -> int:
    """A destination's limit attribute as a number (``default`` when unset or unreadable;
    -1 is no limit, and so is 0 for the attributes OpenMQ reads that way)."""
    try:
        value = as_int(attributes.get(name, default))
    except (TypeError, ValueError):
        return default
    if value == 0 and name in _ZERO_UNLIMITED:
        return UNLIMITED
    return value


# Marks an auto-created destination in the message store's record of it.
DEST_AUTO = int(DestType.AUTO)


class Attributes(dict):
    """A destination's attributes (a dict) that counts its changes, so what is read from
    them for every message (Destination.send_limits) is read again only after one."""

    __slots__ = ("changes",)

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.changes = 0

    def __setitem__(self, key: str, value: object) -> None:
        super().__setitem__(key, value)
        self.changes += 1

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.changes += 1

    def __ior__(self, other: Any) -> Attributes:  # type: ignore[misc]
        self.update(other)
        return self

    def update(self, *args: Any, **kw: Any) -> None:
        super().update(*args, **kw)
        self.changes += 1

    def pop(self, *args: Any) -> Any:
        self.changes += 1
        return super().pop(*args)

    def popitem(self) -> tuple[str, object]:
        self.changes += 1
        return super().popitem()

    def setdefault(self, key: str, default: object = None) -> object:
        self.changes += 1
        return super().setdefault(key, default)

    def clear(self) -> None:
        super().clear()
        self.changes += 1


class Totals:
    """Broker-wide message count and bytes, shared by every destination."""

    __slots__ = ("count", "bytes")

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0


class ProducerSession(Protocol):
    @property
    def link(self) -> Link: ...


class RegisteredProducer(Protocol):
    """A producer as its destination keeps it (session.Producer): flow control reads
    and resets the credit it was given."""

    @property
    def id(self) -> int: ...

    @property
    def session(self) -> ProducerSession: ...

    granted: int
    granted_at: float


class DestStats:
    """A destination's rarely changing metric state (its per-message counters -- messages
    and bytes in and out, peak depth and largest message -- are its own attributes;
    core/metrics.py reads both)."""

    __slots__ = (
        "peak_consumers",
        "peak_active",
        "peak_backup",
        "expired",
        "purged",
        "acked",
        "discarded",
        "rejected",
        "rolledback",
        "samples",
        "sum_msgs",
        "sum_bytes",
        "sum_consumers",
        "sum_active",
        "sum_backup",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.peak_consumers = 0
        self.peak_active = 0
        self.peak_backup = 0
        self.expired = 0
        self.purged = 0
        self.acked = 0
        self.discarded = 0
        self.rejected = 0
        self.rolledback = 0
        self.samples = 0
        self.sum_msgs = 0
        self.sum_bytes = 0
        self.sum_consumers = 0
        self.sum_active = 0
        self.sum_backup = 0


class Destination:
    """What queues and topics share: name, kind, limits, counters.  The
    :class:`~broker.core.dispatch.EntryOwner` of the entries it publishes."""

    is_queue = True
    # Its messages' home is this broker (see EntryOwner).
    home_elsewhere = False
    # The flavour bits (DestType.FLAVOR_*) of the JMQDestType it was made with: OpenMQ's
    # broker keeps them and reports them back (VERIFY_DESTINATION_REPLY); nothing else
    # reads them, and they are not stored.
    flavour = 0

    def __init__(
        self,
        name: str,
        *,
        temporary_owner: int | None = None,
        auto: bool = False,
        attributes: dict | None = None,
        totals: Totals | None = None,
    ) -> None:
        self.name = name
        self.totals = totals if totals is not None else Totals()
        self.temporary_owner = temporary_owner
        self.auto = auto
        self.attributes = Attributes(attributes or {})
        self._send_limits: tuple[int, int, int, int] | None = None
        self.state = DestState.RUNNING
        self.producers: dict[int, RegisteredProducer] = {}
        self.msg_count = 0
        self.msg_bytes = 0
        self.msgs_in = 0
        self.msgs_out = 0
        # Metrics (core/metrics.py): bytes in/out, high-water marks, the rest in stats.
        self.msg_bytes_in = 0
        self.msg_bytes_out = 0
        self.peak_msgs = 0
        self.peak_bytes = 0
        self.peak_msg_bytes = 0
        self.stats = DestStats()
        self.is_dmq = False
        # The message store, for destinations that outlive a restart (not temporary).
        self.store: Store | None = None
        # Where waiting messages' bodies go when memory runs short (core/paging.py).
        self._pager: Pager | None = None
        # Set by the router: where entries go that the destination gives up on
        # (expired, over the delivery count, removed by a limit), reason given.
        self.on_dead: Callable[[Entry, str], bool] | None = None
        # Producers whose RESUME_FLOW (their next credit) waits for room: flow control
        # (limits.producer_credit) or an administrator's pause.
        self.waiting_producers: list[tuple[object, int]] = []
        self.on_room: Callable[[Destination], None] | None = None
        # They are looked at again when the count and bytes held fall to these (-1: not
        # by draining).
        self.resume_count = -1
        self.resume_bytes = -1
        # When an auto-created destination was first seen unused (for reaping).
        self.idle_since: float | None = None

    @property
    def pager(self) -> Pager | None:
        return self._pager

    @pager.setter
    def pager(self, pager: Pager | None) -> None:
        self._pager = pager
        for dq in self.delivery_queues():
            dq.pager = pager

    @property
    def dest_type(self) -> int:
        t = DEST_QUEUE if self.is_queue else DEST_TOPIC
        if self.is_dmq:
            t |= DEST_DMQ
        return t | DEST_TEMP if self.temporary_owner is not None else t

    def drop(self, entry: Entry, reason: str) -> bool:
        """An entry this destination gives up on: to the DMQ hook, or just forgotten.
        True when it went to the DMQ."""
        if self.on_dead is not None:
            return bool(self.on_dead(entry, reason))
        self.account_out(entry)
        return False

    def send_limits(self) -> tuple[int, int, int, int]:
        """(the attributes' change count, maxBytesPerMsg, maxNumMsgs, maxTotalMsgBytes):
        every message sent asks, so they are read once per change of the attributes."""
        known = self._send_limits
        changes = self.attributes.changes
        if known is None or known[0] != changes:
            known = self._send_limits = (
                changes,
                self.limit("maxBytesPerMsg"),
                self.limit("maxNumMsgs"),
                self.limit("maxTotalMsgBytes"),
            )
        return known

    def is_full(self, extra_bytes: int = 0) -> bool:
        _, _, max_msgs, max_bytes = self.send_limits()
        return (max_msgs >= 0 and self.msg_count >= max_msgs) or (
            max_bytes >= 0 and self.msg_bytes + extra_bytes > max_bytes
        )

    @property
    def is_temporary(self) -> bool:
        return self.temporary_owner is not None

    def limit(self, name: str, default: int = UNLIMITED) -> int:
        return attribute_limit(self.attributes, name, default)

    def xml_schema(self) -> dict[str, object]:
        """What the stock broker's CREATE_DESTINATION reply says of XML schema validation
        (the stock Java client then validates each TextMessage it sends here)."""

        def on(name: str) -> bool:
            value = self.attributes.get(name)
            return value if isinstance(value, bool) else str(value).strip().lower() == "true"

        out: dict[str, object] = {
            JMQ_VALIDATE_XML_SCHEMA: on("validateXMLSchemaEnabled"),
            JMQ_RELOAD_XML_SCHEMA_ON_FAILURE: on("reloadXMLSchemaOnFailure"),
        }
        uris = self.attributes.get("XMLSchemaURIList")
        if uris:
            out[JMQ_XML_SCHEMA_URI_LIST] = str(uris)
        return out

    @property
    def limit_behavior(self) -> LimitBehavior:
        value = self.attributes.get("limitBehavior", "REJECT_NEWEST")
        try:
            return LimitBehavior[str(value)]
        except KeyError:
            return LimitBehavior.REJECT_NEWEST

    def account_in(self, entry_count: int, size: int) -> None:
        self.msg_count += entry_count
        self.msg_bytes += size * entry_count
        self.msgs_in += 1
        self.msg_bytes_in += size
        if self.msg_count > self.peak_msgs:
            self.peak_msgs = self.msg_count
        if self.msg_bytes > self.peak_bytes:
            self.peak_bytes = self.msg_bytes
        if size > self.peak_msg_bytes:
            self.peak_msg_bytes = size
        t = self.totals
        t.count += entry_count
        t.bytes += size * entry_count

    def account_out(self, entry: Entry) -> None:
        size = entry.msg.size
        self.msg_count -= 1
        self.msg_bytes -= size
        self.msgs_out += 1
        self.msg_bytes_out += size
        t = self.totals
        t.count -= 1
        t.bytes -= size
        if entry.interest is not None and self.store is not None:
            self.store.submit((MsgSettle(entry.msg.store_key, entry.interest),))
        if (
            self.waiting_producers
            and self.msg_count <= self.resume_count
            and self.msg_bytes <= self.resume_bytes
            and self.on_room is not None
        ):
            self.on_room(self)

    def give_up(self, entry: Entry, reason: str, comment: str | None) -> None:
        # Whether a copy goes to the DMQ is the router's rule (core/limits.py).
        self.account_out(entry)

    def consumers(self) -> list[DeliveryTarget]:
        raise NotImplementedError

    def delivery_queues(self) -> list[DeliveryQueue]:
        """Where this destination's pending entries wait."""
        raise NotImplementedError

    def publish(self, msg: Message, now_ms: int) -> None:
        raise NotImplementedError


class PositionClaims(Protocol):
    """The cluster's say over the positions of a queue's local consumers
    (core/positions.py; the cluster's is in cluster/positions.py)."""

    def needed(self, dest: QueueDestination, target: DeliveryTarget) -> bool:
        """Must ``target`` take the cluster lock before it moves to another position?"""
        ...

    def claim(self, dest: QueueDestination, target: DeliveryTarget, position: int) -> None:
        """Take ``position`` for ``target``; the answer is ``dest.claimed(...)``, later."""
        ...


class QueueDestination(Destination):
    """A queue: each message goes to one consumer.

    OpenMQ's consumer model: every consumer has a position (core/positions.py); those
    below ``maxNumActiveConsumers`` (-1 = unlimited) are active and share the messages
    round-robin (they are ``dq.consumers``); the next ``maxNumBackupConsumers`` (-1 =
    unlimited) wait in ``backups`` and get nothing until an active one goes, when the
    first backup moves up into its place.  The delivery policies are presets: single =
    1/0, failover = 1/-1, round-robin = -1/0.  In a cluster the positions are
    cluster-wide: a local consumer takes its place through ``claims``, a remote one
    comes with the place its broker gave it.
    """

    is_queue = True

    def __init__(self, name: str, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.dq = DeliveryQueue(on_drop=self.drop)
        self.backups: list[DeliveryTarget] = []
        self.positions: dict[DeliveryTarget, int] = {}
        # Remote consumers whose broker announces when they move up (ours do).
        self.told: set[DeliveryTarget] = set()
        # Local backups whose last claim failed: they wait for the next change.
        self.refused: set[DeliveryTarget] = set()
        self.claims: PositionClaims | None = None
        self.claiming: DeliveryTarget | None = None

    def consumers(self) -> list[DeliveryTarget]:
        return [*self.dq.consumers, *self.backups]

    def delivery_queues(self) -> list[DeliveryQueue]:
        return [self.dq]

    def max_positions(self) -> int:
        """How many positions there are (-1: no end)."""
        active = self.limit("maxNumActiveConsumers")
        backup = self.limit("maxNumBackupConsumers", 0)
        return UNLIMITED if active < 0 or backup < 0 else active + backup

    def free_positions(self, taken: Collection[int] = ()) -> Iterator[int]:
        """The positions nobody holds, lowest first (endless when the queue has no end)."""
        held = set(self.positions.values())
        held.update(taken)
        size = self.max_positions()
        n = 0
        while size < 0 or n < size:
            if n not in held:
                yield n
            n += 1

    def _is_active_place(self, position: int) -> bool:
        max_active = self.limit("maxNumActiveConsumers")
        return max_active < 0 or (position < max_active and len(self.dq.consumers) < max_active)

    def attach(
        self, cons: DeliveryTarget, position: int | None = None, *, told: bool = False
    ) -> bool:
        """Add a consumer at ``position`` (None: the first free one), active when the
        position is, else as a backup; False if no position is free.  ``told``: a remote
        consumer whose broker announces its moves (:meth:`moved`)."""
        if position is None or position < 0:
            position = next(self.free_positions(), None)
            if position is None:
                return False
        self.positions[cons] = position
        if told:
            self.told.add(cons)
        if self._is_active_place(position):
            self.dq.add_consumer(cons)
        else:
            self._add_backup(cons)
        return True

    def _add_backup(self, cons: DeliveryTarget) -> None:
        positions = self.positions
        at = positions[cons]
        i = len(self.backups)
        while i and positions.get(self.backups[i - 1], -1) > at:
            i -= 1
        self.backups.insert(i, cons)

    def detach(self, cons: DeliveryTarget) -> None:
        """Remove a consumer; backups move up into the room it leaves."""
        self.positions.pop(cons, None)
        self.told.discard(cons)
        self.refused.clear()  # a place may have come free: every backup may try again
        if self.claiming is cons:
            self.claiming = None
        if cons in self.backups:
            self.backups.remove(cons)
        else:
            self.dq.remove_consumer(cons)
        self.promote_backups()

    def promote_backups(self) -> None:
        """Backups move up, in position order, while there is room for active ones.

        A backup already in an active place (``maxNumActiveConsumers`` was raised) just
        starts; another takes the first free active place, through ``claims`` when it
        must (one claim at a time); a remote one whose broker announces its moves waits
        for that (:meth:`moved`).
        """
        max_active = self.limit("maxNumActiveConsumers")
        for target in list(self.backups):
            if max_active >= 0 and len(self.dq.consumers) >= max_active:
                return
            if self._is_active_place(self.positions[target]):
                self._activate(target)
                continue
            if target in self.told or target in self.refused:
                continue
            free = next(self.free_positions(), None)
            if free is None or not self._is_active_place(free):
                return
            claims = self.claims
            if claims is not None and claims.needed(self, target):
                if self.claiming is None:
                    self.claiming = target
                    claims.claim(self, target, free)
                return
            self.positions[target] = free
            self._activate(target)

    def _activate(self, target: DeliveryTarget) -> None:
        self.backups.remove(target)
        self.dq.add_consumer(target)

    def claimed(self, target: DeliveryTarget, position: int, ok: bool) -> None:
        """The answer to a claim: on success ``target`` moves up to ``position``."""
        if self.claiming is target:
            self.claiming = None
        if target not in self.backups:
            return  # gone meanwhile
        holder = next((t for t, p in self.positions.items() if p == position), None)
        if ok and holder is None and self._is_active_place(position):
            self.positions[target] = position
            self._activate(target)
        else:
            self.refused.add(target)
        self.promote_backups()

    def moved(self, target: DeliveryTarget, position: int) -> None:
        """A remote consumer's broker moved it to ``position`` (it took the lock)."""
        if target not in self.positions:
            return
        self.positions[target] = position
        if target in self.backups:
            if self._is_active_place(position):
                self._activate(target)
            else:
                self.backups.remove(target)
                self._add_backup(target)

    def publish(self, msg: Message, now_ms: int) -> None:
        self.account_in(1, msg.size)
        entry = Entry(msg, self, self.dq)
        if msg.persistent and self.store is not None:
            # Recorded before dispatch, so a settle can never precede its message.
            entry.interest = QUEUE_INTEREST
            msg.stored = True
            self.store.submit(
                (MsgAdd(msg.store_key, self.name, self.dest_type, msg.raw, (QUEUE_INTEREST,)),)
            )
        self.dq.offer(entry, now_ms)


class Subscription:
    """A topic subscriber's own queue; durable ones outlive their consumer.

    ``share`` says who may attach more consumers: None (one consumer, standard JMS),
    ``"mq"`` (OpenMQ's JMQShare) or ``"jms"`` (JMS 2.0 shared subscription).  The
    consumers of a shared subscription take its messages round-robin.  A shared
    non-durable subscription is found by ``shared_key`` in its topic's ``shared``.
    """

    def __init__(
        self,
        topic: TopicDestination,
        selector: Selector | None,
        no_local: bool,
        connection_id: int,
        durable_key: tuple[str | None, str] | None = None,
        *,
        share: str | None = None,
        shared_key: tuple | None = None,
    ) -> None:
        self.topic = topic
        self.selector = selector
        self.no_local = no_local
        # Every message, without asking wants() (neither is changed after this).
        self.takes_all = selector is None and not no_local
        self.connection_id = connection_id
        # noLocal: the connections of the consumers (the last ones, while none is attached).
        self.local_ids = {connection_id}
        self.durable_key = durable_key
        self.share = share
        self.shared_key = shared_key
        self.queue = DeliveryQueue()

    @property
    def selector_text(self) -> str | None:
        return self.selector.text if self.selector is not None else None

    def attach(self, cons: DeliveryTarget) -> None:
        self.queue.add_consumer(cons)
        self.connection_id = cons.link.id
        self.local_ids = {c.link.id for c in self.queue.consumers}

    def detach(self, cons: DeliveryTarget) -> None:
        self.queue.remove_consumer(cons)
        if self.queue.consumers:
            self.local_ids = {c.link.id for c in self.queue.consumers}

    @property
    def sub_id(self) -> str:
        """The message store's name for a durable subscription."""
        client_id, name = self.durable_key  # type: ignore[misc]
        return f"{client_id or ''}:{name}"

    def wants(self, msg: Message) -> bool:
        if self.no_local and msg.origin_connection in self.local_ids:
            return False
        sel = self.selector
        return sel is None or sel.matches(msg.selector_values())


class TopicDestination(Destination):
    """A topic: each message goes to every matching subscription."""

    is_queue = False

    def __init__(self, name: str, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.subscriptions: list[Subscription] = []
        self.durables: dict[tuple[str | None, str], Subscription] = {}
        # Shared non-durable subscriptions by key (JMQShare or JMS 2.0 name).
        self.shared: dict[tuple, Subscription] = {}

    def consumers(self) -> list[DeliveryTarget]:
        return [c for s in self.subscriptions for c in s.queue.consumers]

    def delivery_queues(self) -> list[DeliveryQueue]:
        return [s.queue for s in self.subscriptions]

    def publish(self, msg: Message, now_ms: int) -> None:
        targets = [s for s in self.subscriptions if s.takes_all or s.wants(msg)]
        self.account_in(len(targets), msg.size)
        if not targets:
            return
        # Only durable subscribers' copies outlive a restart, so only they are stored.
        store = self.store if msg.persistent else None
        if store is not None:
            interests = tuple(s.sub_id for s in targets if s.durable_key is not None)
            # Its bytes can come back from the store only if no copy is outside it.
            msg.stored = len(interests) == len(targets)
            if interests:
                store.submit(
                    (MsgAdd(msg.store_key, self.name, self.dest_type, msg.raw, interests),)
                )
        for sub in targets:
            interest = sub.sub_id if store is not None and sub.durable_key is not None else None
            sub.queue.offer(Entry(msg, self, sub.queue, interest), now_ms)

    def publish_one(self, sub: Subscription, msg: Message, now_ms: int) -> None:
        """Publish ``msg`` to ``sub`` alone (one copy, stored for a durable one when
        persistent); the other subscriptions never see it."""
        self.account_in(1, msg.size)
        interest = None
        if msg.persistent and self.store is not None and sub.durable_key is not None:
            interest = sub.sub_id
            msg.stored = True
            self.store.submit(
                (MsgAdd(msg.store_key, self.name, self.dest_type, msg.raw, (interest,)),)
            )
        sub.queue.offer(Entry(msg, self, sub.queue, interest), now_ms)

    def add_subscription(self, sub: Subscription, *, record: bool = True) -> None:
        """Attach a subscription (``record=False`` when it comes back from the store)."""
        sub.queue.on_drop = self.drop
        sub.queue.pager = self._pager
        sub.queue.paused = self.state in (DestState.CONSUMERS_PAUSED, DestState.PAUSED)
        self.subscriptions.append(sub)
        if sub.durable_key is not None:
            self.durables[sub.durable_key] = sub
            if record and self.store is not None:
                client_id, name = sub.durable_key
                self.store.submit(
                    (
                        DurableAdd(
                            sub.sub_id,
                            client_id,
                            name,
                            self.name,
                            sub.selector_text,
                            sub.no_local,
                            sub.share,
                        ),
                    )
                )
        elif sub.shared_key is not None:
            self.shared[sub.shared_key] = sub

    def remove_subscription(self, sub: Subscription) -> list[Entry]:
        """Drop a subscription; returns its pending entries so the caller can account."""
        if sub in self.subscriptions:
            self.subscriptions.remove(sub)
        if sub.durable_key is not None:
            self.durables.pop(sub.durable_key, None)
            if self.store is not None:
                self.store.submit((DurableRemove(sub.sub_id),))
        elif sub.shared_key is not None:
            self.shared.pop(sub.shared_key, None)
        sub.queue.active = False
        return sub.queue.clear()
