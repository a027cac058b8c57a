"""Physical destinations: queues, topics and topic subscriptions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.types import DEST_QUEUE, DEST_TEMP, DEST_TOPIC, DestState, LimitBehavior

from .dispatch import DeliveryQueue
from .message import Entry, Message

if TYPE_CHECKING:
    from broker.core.selector import Selector

    from .session import Consumer, Producer

UNLIMITED = -1


class Totals:
    """Broker-wide message count and bytes, shared by every destination."""

    __slots__ = ("count", "bytes")

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0


class Destination:
    """What queues and topics share: name, kind, limits, counters."""

    is_queue = True

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
        self.attributes: dict = dict(attributes or {})
        self.state = DestState.RUNNING
        self.producers: dict[int, Producer] = {}
        self.msg_count = 0
        self.msg_bytes = 0
        self.msgs_in = 0
        self.msgs_out = 0

    @property
    def dest_type(self) -> int:
        t = DEST_QUEUE if self.is_queue else DEST_TOPIC
        return t | DEST_TEMP if self.temporary_owner is not None else t

    @property
    def is_temporary(self) -> bool:
        return self.temporary_owner is not None

    def limit(self, name: str, default: int = UNLIMITED) -> int:
        try:
            return int(self.attributes.get(name, default))
        except (TypeError, ValueError):
            return default

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
        t = self.totals
        t.count += entry_count
        t.bytes += size * entry_count

    def account_out(self, entry: Entry) -> None:
        size = entry.msg.size
        self.msg_count -= 1
        self.msg_bytes -= size
        self.msgs_out += 1
        t = self.totals
        t.count -= 1
        t.bytes -= size

    def consumers(self) -> list[Consumer]:
        raise NotImplementedError

    def publish(self, msg: Message, now_ms: int) -> None:
        raise NotImplementedError


class QueueDestination(Destination):
    """A queue: each message goes to one consumer."""

    is_queue = True

    def __init__(self, name: str, **kw) -> None:
        super().__init__(name, **kw)
        self.dq = DeliveryQueue()

    def consumers(self) -> list[Consumer]:
        return list(self.dq.consumers)

    def publish(self, msg: Message, now_ms: int) -> None:
        self.account_in(1, msg.size)
        self.dq.put(Entry(msg, self, self.dq))
        self.dq.dispatch(now_ms)


class Subscription:
    """A topic subscriber's own queue; durable ones outlive their consumer."""

    def __init__(
        self,
        topic: TopicDestination,
        selector: Selector | None,
        no_local: bool,
        connection_id: int,
        durable_key: tuple[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self.selector = selector
        self.no_local = no_local
        self.connection_id = connection_id
        self.durable_key = durable_key
        self.queue = DeliveryQueue()

    def wants(self, msg: Message) -> bool:
        if self.no_local and msg.origin_connection == self.connection_id:
            return False
        sel = self.selector
        return sel is None or sel.matches(msg.selector_values())


class TopicDestination(Destination):
    """A topic: each message goes to every matching subscription."""

    is_queue = False

    def __init__(self, name: str, **kw) -> None:
        super().__init__(name, **kw)
        self.subscriptions: list[Subscription] = []
        self.durables: dict[tuple[str, str], Subscription] = {}

    def consumers(self) -> list[Consumer]:
        return [c for s in self.subscriptions for c in s.queue.consumers]

    def publish(self, msg: Message, now_ms: int) -> None:
        targets = [s for s in self.subscriptions if s.wants(msg)]
        self.account_in(len(targets), msg.size)
        if not targets:
            return
        for sub in targets:
            sub.queue.put(Entry(msg, self, sub.queue))
            sub.queue.dispatch(now_ms)

    def add_subscription(self, sub: Subscription) -> None:
        self.subscriptions.append(sub)
        if sub.durable_key is not None:
            self.durables[sub.durable_key] = sub

    def remove_subscription(self, sub: Subscription) -> list[Entry]:
        """Drop a subscription; returns its pending entries so the caller can account."""
        if sub in self.subscriptions:
            self.subscriptions.remove(sub)
        if sub.durable_key is not None:
            self.durables.pop(sub.durable_key, None)
        sub.queue.active = False
        return sub.queue.clear()
