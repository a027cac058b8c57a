"""Message events: what happened to a message, told to whoever plugged in to hear it.

The router tells its :class:`MessageEvents` when a message arrives at a destination, is
delivered, is consumed (acknowledged, committed, or delivered to a NO_ACKNOWLEDGE
session), expires, dies (undeliverable, over its delivery count, removed by a limit),
is rejected by a limit, or has no destination.  A report generator (broker/core/
reports.py) or the drop log (broker/core/drops.py) is a :class:`MessageObserver` added
with :meth:`MessageEvents.add` -- nothing is added to the router for it.

Cost on the hot path: each event keeps its own list of callbacks, filled only with the
methods an observer actually defines, and the router tests the list before building a
call.  With nobody listening to deliveries, a delivery costs one list check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .destination import Destination
    from .message import Entry, Message

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


__all__ = ["EVENTS", "MessageEvents", "MessageObserver"]
