"""What an import from a stock OpenMQ instance took, changed on the way, or left behind.

:class:`Report` collects one :class:`Item` per thing the import looked at (a property, a
user, a rule, the keystore, a destination, a durable subscription, a queue's messages),
with one of three outcomes: ``taken`` (as it was), ``adapted`` (taken in another form,
the detail says how) and ``not taken`` (the detail says why and what to do instead).
``manage.py imqimport`` prints it; the portal could show the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ADAPTED", "NOT_TAKEN", "OUTCOMES", "TAKEN", "Item", "Report"]

TAKEN = "taken"
ADAPTED = "adapted"
NOT_TAKEN = "not taken"
OUTCOMES = (TAKEN, ADAPTED, NOT_TAKEN)


@dataclass(frozen=True)
class Item:
    """One thing looked at: its kind (``property``, ``user``...), name and outcome."""

    outcome: str
    kind: str
    name: str
    detail: str = ""

    def line(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.outcome:<9}  {self.kind:<13} {self.name}{detail}"


@dataclass
class Report:
    """The items of one import, in the order they were looked at."""

    items: list[Item] = field(default_factory=list)

    def add(self, outcome: str, kind: str, name: str, detail: str = "") -> Item:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
        item = Item(outcome, kind, name, detail)
        self.items.append(item)
        return item

    def taken(self, kind: str, name: str, detail: str = "") -> Item:
        return self.add(TAKEN, kind, name, detail)

    def adapted(self, kind: str, name: str, detail: str) -> Item:
        return self.add(ADAPTED, kind, name, detail)

    def not_taken(self, kind: str, name: str, why: str) -> Item:
        return self.add(NOT_TAKEN, kind, name, why)

    def extend(self, other: Report) -> None:
        self.items.extend(other.items)

    def by_outcome(self, outcome: str) -> list[Item]:
        return [i for i in self.items if i.outcome == outcome]

    def find(self, kind: str, name: str) -> Item | None:
        """The last item about ``name`` of ``kind``, or None."""
        for item in reversed(self.items):
            if item.kind == kind and item.name == name:
                return item
        return None

    def counts(self) -> dict[str, int]:
        return {o: len(self.by_outcome(o)) for o in OUTCOMES}

    def lines(self) -> list[str]:
        """Every item, then one summary line (taken first, not taken last)."""
        ordered = [i for o in OUTCOMES for i in self.by_outcome(o)]
        c = self.counts()
        summary = f"{c[TAKEN]} taken, {c[ADAPTED]} adapted, {c[NOT_TAKEN]} not taken"
        return [i.line() for i in ordered] + [summary]
