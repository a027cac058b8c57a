"""JMX notifications as the JDK's RMI connector server keeps them, sans-IO.

The server holds one buffer of recent notifications (each with a sequence number),
and each client connection its listeners (an ID per MBean name and filter, from
addNotificationListeners).  A client fetches with fetchNotifications(sequence, max,
timeout): the notifications from that sequence number on that its listeners select,
at once if there are any, else when one arrives or the timeout passes (the JDK
client's long poll, 60 s by default).  A first fetch with sequence -1 only learns
where the buffer is.  Past :data:`BUFFER_SIZE` the oldest are dropped; a client that
fell behind gets ``earliestSequenceNumber`` above what it asked for and the JDK's
client reports the loss to its listeners.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.engine.jmx_names import ObjectName
from broker.protocol.javaser import JavaObject

# jmx.remote.x.notification.buffer.size's default in the JDK's connector server.
BUFFER_SIZE = 1000


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener of a client: notifications of MBean ``name`` whose type starts with
    one of ``types`` (None: every type; NotificationFilterSupport's prefixes)."""

    name: ObjectName
    types: tuple[str, ...] | None

    def selects(self, source: ObjectName, notif_type: str) -> bool:
        if self.name.is_pattern:
            if not self.name.matches(source):
                return False
        elif self.name.canonical != source.canonical:
            return False
        return self.types is None or any(notif_type.startswith(t) for t in self.types)


@dataclass(frozen=True, slots=True)
class Buffered:
    sequence: int
    source: ObjectName
    notif_type: str
    notification: JavaObject


@dataclass
class ClientListeners:
    """The listeners of one client connection, by ID."""

    by_id: dict[int, Listener] = field(default_factory=dict)

    def matching(self, item: Buffered) -> list[int]:
        return [lid for lid, lst in self.by_id.items() if lst.selects(item.source, item.notif_type)]


class NotificationBuffer:
    """The server's recent notifications and the sequence numbers they carry."""

    def __init__(self, size: int = BUFFER_SIZE) -> None:
        self._items: collections.deque[Buffered] = collections.deque(maxlen=size)
        self.next_sequence = 0
        self._next_listener = 1

    def new_listener_id(self) -> int:
        lid = self._next_listener
        self._next_listener += 1
        return lid

    @property
    def earliest(self) -> int:
        return self._items[0].sequence if self._items else self.next_sequence

    def add(
        self, source: ObjectName, notif_type: str, make: Callable[[int], JavaObject]
    ) -> Buffered:
        """Buffer a notification; ``make(sequence)`` builds it with its number."""
        seq = self.next_sequence
        self.next_sequence += 1
        item = Buffered(seq, source, notif_type, make(seq))
        self._items.append(item)
        return item

    def fetch(
        self, start: int, limit: int, listeners: ClientListeners
    ) -> tuple[int, int, list[tuple[int, JavaObject]]]:
        """(earliest, next sequence, [(listener ID, notification)]) from ``start`` on;
        ``next`` is where the client goes on (past what it was given, or the end)."""
        earliest = self.earliest
        if start < 0:
            return earliest, self.next_sequence, []
        found: list[tuple[int, JavaObject]] = []
        next_seq = self.next_sequence
        for item in self._items:
            if item.sequence < start:
                continue
            ids = listeners.matching(item)
            if not ids:
                continue
            if len(found) + len(ids) > max(limit, 1) and found:
                next_seq = item.sequence
                break
            found += [(lid, item.notification) for lid in ids]
        return earliest, next_seq, found
