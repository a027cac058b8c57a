"""The history charts' series, read from the ``Rollup`` table (portal/pipeline/models.py).

A range picks its granularity: the last hour in minutes, the last day in minutes (hours
when no minute rollups are kept for it), the last week in hours, the last month in days.
:func:`history_series` answers columns (one list per figure, ``t`` the bucket starts in
Unix seconds), the shape the chart library (uPlot) draws without conversion::

    {"broker": "imqbroker", "destination": "", "type": "", "range": "day",
     "granularity": "minute", "since": 1767139200, "until": 1767225600,
     "t": [...], "depth_min": [...], "depth_avg": [...], "depth_max": [...],
     "rate_in_avg": [...], "rate_out_avg": [...], "rate_in_max": [...], "rate_out_max": [...],
     "bytes_max": [...], "memory_bytes_max": [...], "memory_state_peak": [...], ...}

One query per call, on the (broker, destination, granularity, bucket_start) index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["RANGES", "HistoryRange", "brokers_with_history", "history_series", "pipeline_runs"]


@dataclass(frozen=True)
class HistoryRange:
    """A chart range: how far back, and the granularities to read, first found wins."""

    name: str
    label: str
    span: timedelta
    granularities: tuple[str, ...]


RANGES: dict[str, HistoryRange] = {
    r.name: r
    for r in (
        HistoryRange("hour", "Last hour", timedelta(hours=1), ("minute",)),
        HistoryRange("day", "Last day", timedelta(days=1), ("minute", "hour")),
        HistoryRange("week", "Last week", timedelta(days=7), ("hour",)),
        HistoryRange("month", "Last month", timedelta(days=30), ("day",)),
    )
}

FIELDS = (
    "samples",
    "depth_min",
    "depth_avg",
    "depth_max",
    "bytes_max",
    "msgs_in",
    "msgs_out",
    "rate_in_avg",
    "rate_in_max",
    "rate_out_avg",
    "rate_out_max",
    "producers_max",
    "consumers_max",
    "connections_max",
    "memory_state_peak",
    "memory_bytes_max",
)


def _number(value: Any) -> float | int | None:
    if value is None:
        return None
    return value if isinstance(value, int) else round(float(value), 3)


def history_series(
    broker: str,
    range_name: str,
    destination: str = "",
    dest_type: str = "",
    *,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The series of one broker (``destination=""``) or one destination over a range
    (see the module docstring); ValueError for an unknown range."""
    from .models import Rollup

    wanted = RANGES.get(range_name)
    if wanted is None:
        raise ValueError(f"range must be one of {', '.join(RANGES)}, not {range_name!r}")
    until = now or datetime.now(UTC)
    since = until - wanted.span
    base = Rollup.objects.filter(
        broker=broker, destination=destination, bucket_start__gte=since, bucket_start__lt=until
    )
    if destination and dest_type:
        base = base.filter(dest_type=dest_type)
    granularity = wanted.granularities[0]
    rows: list[dict[str, Any]] = []
    for granularity in wanted.granularities:
        rows = list(
            base.filter(granularity=granularity)
            .order_by("bucket_start")
            .values("bucket_start", *FIELDS)
        )
        if rows:
            break
    out: dict[str, Any] = {
        "broker": broker,
        "destination": destination,
        "type": dest_type,
        "range": wanted.name,
        "granularity": granularity if rows else wanted.granularities[0],
        "since": int(since.timestamp()),
        "until": int(until.timestamp()),
        "t": [int(r["bucket_start"].timestamp()) for r in rows],
    }
    for field in FIELDS:
        out[field] = [_number(r[field]) for r in rows]
    return out


def brokers_with_history() -> list[str]:
    """The broker instances that have rollups, by name."""
    from .models import Rollup

    return list(Rollup.objects.order_by("broker").values_list("broker", flat=True).distinct())


def pipeline_runs():
    """The pipeline's runs, newest first (a queryset: the page paginates it)."""
    from .models import PipelineRun

    return PipelineRun.objects.order_by("-started", "-id")
