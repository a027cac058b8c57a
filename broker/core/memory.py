"""Memory states (green, yellow, orange, red) and what each allows producers.

OpenMQ measures the JVM heap; here the measure is the bytes of message bodies the broker
holds in memory (not those paged out to disk: broker/core/paging.py) against a budget
(``imq.memory.limit``, or ``imq.system.max_size`` when set).
Each state has a threshold (percent of the budget) and a connection flow count: how
many messages a client may send before it must wait for RESUME_FLOW (JMQSize in
HELLO_REPLY and RESUME_FLOW). Red's count is 0: producers wait until memory recovers.
A hold (:meth:`MemoryManager.hold`: the disk is short of space) makes it 0 in any state.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker import props

LEVELS = ("green", "yellow", "orange", "red")
# imq.<level>.threshold / imq.<level>.count as declared (broker/props.py).
DEFAULT_THRESHOLDS = {lv: int(p.default or 0) for lv, p in props.MEMORY_THRESHOLDS.items()}
DEFAULT_COUNTS = {lv: int(p.default or 0) for lv, p in props.MEMORY_COUNTS.items()}


@dataclass(frozen=True)
class Level:
    name: str
    threshold_bytes: int
    count: int


class MemoryManager:
    """Tracks the current memory state from the bytes in use."""

    def __init__(
        self,
        budget_bytes: int,
        thresholds: dict[str, int] | None = None,
        counts: dict[str, int] | None = None,
    ) -> None:
        th = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
        values = [th[n] for n in LEVELS]
        if values != sorted(values):
            raise ValueError(
                "memory thresholds must rise from green to red: "
                + ", ".join(f"imq.{n}.threshold={th[n]}" for n in LEVELS)
            )
        self._thresholds = th
        self._counts = {**DEFAULT_COUNTS, **(counts or {})}
        self._set_levels(budget_bytes)
        self.index = 0
        self.used = 0
        # The state before the last change (what a state-change notification tells).
        self.previous = LEVELS[0]
        # Why producers are held whatever the state (None: they are not).
        self.held: str | None = None

    def _set_levels(self, budget_bytes: int) -> None:
        self.budget = max(int(budget_bytes), 1)
        th, cn = self._thresholds, self._counts
        self.levels = [Level(n, self.budget * th[n] // 100, cn[n]) for n in LEVELS]

    def set_budget(self, budget_bytes: int) -> Level | None:
        """A new budget (an administrator changed imq.system.max_size): the thresholds
        follow it; returns the new level when the state changed with it."""
        self._set_levels(budget_bytes)
        return self.update(self.used)

    @property
    def level(self) -> Level:
        return self.levels[self.index]

    @property
    def state(self) -> str:
        return self.level.name

    @property
    def count(self) -> int:
        """The connection flow count clients get now (-1 would mean unlimited)."""
        return 0 if self.held is not None else self.level.count

    @property
    def bytes(self) -> int:
        """The connection flow bytes clients get now (JMQBytes beside JMQSize): as OpenMQ's
        memory levels size it, half the memory still free below the budget (a quarter in
        yellow and orange), 0 whenever the count is 0."""
        if self.count == 0:
            return 0
        free = max(self.budget - self.used, 0)
        return max(free // (2 if self.index == 0 else 4), 1)

    def hold(self, reason: str | None) -> bool:
        """Hold producers for ``reason`` (None: stop holding them); True when that
        changed whether they are held."""
        was = self.held is not None
        self.held = reason
        return was != (reason is not None)

    @property
    def percent(self) -> float:
        return 100.0 * self.used / self.budget

    def update(self, used: int) -> Level | None:
        """Record the bytes in use; returns the new level when the state changed."""
        self.used = used
        i = self.index
        levels = self.levels
        # Cheap when nothing changes: one comparison each way.
        if i + 1 < len(levels) and used >= levels[i + 1].threshold_bytes:
            while i + 1 < len(levels) and used >= levels[i + 1].threshold_bytes:
                i += 1
        elif i > 0 and used < levels[i].threshold_bytes:
            while i > 0 and used < levels[i].threshold_bytes:
                i -= 1
        if i == self.index:
            return None
        self.previous = levels[self.index].name
        self.index = i
        return levels[i]
