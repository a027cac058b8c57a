"""Messages a destination's limits refused or pushed out, told to the administrator.

A non-persistent message sent without imqAckOnProduce gets no reply, so when a full
destination rejects it (REJECT_NEWEST) the producer never learns; REMOVE_OLDEST and
REMOVE_LOW_PRIORITY push messages out just as quietly.  OpenMQ behaves the same, but an
administrator must be able to see it: the counts are in the destination's metrics
(numRejectedMsgs, and the discarded count for evictions), and this module logs one
WARNING per destination and interval with how many and why -- never one per message,
which would flood the log exactly when the broker is busiest.

:class:`DropReporter` is how the router feeds it: a message observer
(broker/core/observers.py) hearing rejections and limit evictions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .dmq import REMOVED_LOW_PRIORITY, REMOVED_OLDEST
from .observers import MessageObserver

if TYPE_CHECKING:
    from .destination import Destination
    from .message import Entry, EntryOwner, Message

log = logging.getLogger("broker.limits")

DEFAULT_INTERVAL = 30.0


class _Pending:
    __slots__ = ("count", "reason", "since")

    def __init__(self, reason: str, since: float) -> None:
        self.count = 0
        self.reason = reason
        self.since = since


class DropLog:
    """Counts drops per destination and logs them at most once per ``interval`` each.

    The first drop of a quiet destination is logged at once; later ones are summed and
    logged when the interval has passed, by the next drop or by :meth:`flush` (called
    from the broker's housekeeping so the tail of a burst is reported too).
    """

    def __init__(
        self, interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._pending: dict[str, _Pending] = {}

    def note(self, where: str, reason: str) -> None:
        """One message dropped at ``where`` (e.g. "queue orders") for ``reason``."""
        now = self._clock()
        p = self._pending.get(where)
        if p is None:
            p = self._pending[where] = _Pending(reason, now)
        p.count += 1
        p.reason = reason
        last = self._last.get(where)
        if last is None or now - last >= self.interval:
            self._emit(where, p, now)

    def flush(self) -> None:
        """Log what was held back once its destination's interval has passed."""
        now = self._clock()
        for where in [w for w, p in self._pending.items() if p.count]:
            if now - self._last.get(where, 0.0) >= self.interval:
                self._emit(where, self._pending[where], now)
        # Forget destinations quiet for a whole interval so the maps stay small.
        for where in [w for w, t in self._last.items() if now - t >= 2 * self.interval]:
            if not self._pending.get(where):
                self._last.pop(where, None)

    def _emit(self, where: str, p: _Pending, now: float) -> None:
        span = max(now - p.since, 0.0)
        log.warning(
            "%s: %d message(s) dropped in the last %.0f s: %s",
            where,
            p.count,
            span,
            p.reason,
        )
        self._last[where] = now
        del self._pending[where]


def where(dest: EntryOwner) -> str:
    """How the log names a destination: "queue orders", "topic prices"."""
    return f"{'queue' if dest.is_queue else 'topic'} {dest.name}"


class DropReporter(MessageObserver):
    """Tells a :class:`DropLog` about the messages a destination's limits dropped."""

    def __init__(self, drops: DropLog) -> None:
        self.drops = drops

    def rejected(self, dest: Destination, msg: Message, why: str) -> None:
        # A producer that did not wait for a reply is not told, so the administrator is.
        self.drops.note(
            where(dest),
            f"rejected: {why}; producers that do not wait for a reply (non-persistent "
            "without imqAckOnProduce) are not told",
        )

    def dead(self, entry: Entry, reason: str, to_dmq: bool) -> None:
        if reason == REMOVED_OLDEST or reason == REMOVED_LOW_PRIORITY:
            self.drops.note(
                where(entry.owner),
                f"removed to make room for newer messages (limitBehavior {reason.replace('REMOVED', 'REMOVE')})",
            )
