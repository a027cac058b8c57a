"""imqcmd's output: OpenMQ's tables (BrokerCmdPrinter) and value formats."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SUCCESS = "Successfully performed the requested operation."


def unlimited(value: object) -> str:
    """OpenMQ shows -1 (and absent limits) as "unlimited"."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if value is None or value == "" or (isinstance(value, int) and value < 0):
        return "unlimited"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def unlimited_or_zero(value: object) -> str:
    """OpenMQ shows 0 and -1 as "unlimited" for the broker-wide limits and log rollover."""
    if isinstance(value, str) and value.strip() == "0":
        return "unlimited"
    return unlimited(value)


def yes_no(value: object) -> str:
    return "true" if value else "false"


def rate(latest: int, previous: int, secs: float) -> str:
    """Per-second rate of a counter between two samples, as OpenMQ prints it."""
    diff = latest - previous
    per_sec = int(diff / secs) if secs > 0 else 0
    if per_sec == 0:
        return "< 1" if diff else "0"
    return str(per_sec)


def kbytes(n: int) -> str:
    if n == 0:
        return "0"
    return "< 1" if n < 1024 else str(n // 1024)


def num(values: dict[str, Any], *keys: str) -> int:
    """The first of ``keys`` present in a metrics dict, as an int (0 when none is)."""
    for key in keys:
        value = values.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
    return 0


class Table:
    """A table printed like OpenMQ's BrokerCmdPrinter: a dashed line, one or two title rows
    (the first may span columns), a dashed line, then the rows."""

    def __init__(self, columns: int, gap: int = 3, *, center: bool = False) -> None:
        self.columns = columns
        self.gap = gap
        self.center = center
        self.titles: list[tuple[list[str], list[int] | None]] = []
        self.rows: list[list[str]] = []

    def title(self, cells: Sequence[str], spans: Sequence[int] | None = None) -> Table:
        self.titles.append(([str(c) for c in cells], list(spans) if spans else None))
        return self

    def add(self, row: Sequence[object]) -> None:
        self.rows.append([str(c) for c in row])

    def _widths(self) -> list[int]:
        widths = [0] * self.columns
        for cells, spans in self.titles:
            for i, cell in enumerate(cells):
                if spans is None or spans[i] == 1:
                    widths[i] = max(widths[i], len(cell))
        for row in self.rows:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))
        for cells, spans in self.titles:
            if spans is None:
                continue
            for i, span in enumerate(spans):
                if span > 1:
                    room = sum(widths[i : i + span]) + self.gap * (span - 1)
                    if len(cells[i]) > room:
                        widths[i + span - 1] += len(cells[i]) - room
        return widths

    def _cell(self, text: str, width: int, center: bool) -> str:
        return text.center(width) if center else text.ljust(width)

    def lines(self, *, with_title: bool = True) -> list[str]:
        widths = self._widths()
        sep = " " * self.gap
        dashes = "-" * (sum(widths) + self.gap * (self.columns - 1))
        out: list[str] = []
        if with_title:
            out.append(dashes)
            for cells, spans in self.titles:
                parts = []
                for i, cell in enumerate(cells):
                    span = 1 if spans is None else spans[i]
                    if span == 0:
                        continue
                    width = sum(widths[i : i + span]) + self.gap * (span - 1)
                    parts.append(self._cell(cell, width, self.center or spans is not None))
                out.append(sep.join(parts).rstrip())
            out.append(dashes)
        for row in self.rows:
            out.append(
                sep.join(
                    self._cell(c, w, self.center) for c, w in zip(row, widths, strict=True)
                ).rstrip()
            )
        return out
