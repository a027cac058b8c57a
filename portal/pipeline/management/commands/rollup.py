"""``manage.py rollup --since ... --until ...``: run the metrics rollup job by hand."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError

from portal.pipeline.rollup import run_rollup

_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
BAR = 30


def parse_time(text: str, now: datetime) -> datetime:
    """``now``, a relative time (``-2h``, ``-30m``, ``-1d``, ``-1w``) or an ISO time (UTC
    when it names no zone)."""
    text = text.strip()
    if text == "now":
        return now
    m = _RELATIVE.match(text)
    if m:
        return now - timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
    try:
        ts = datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"not a time: {text!r} (ISO, 'now' or relative like -2h)") from exc
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts


class ProgressBar:
    """A plain-text progress bar: one line per stage and per tenth of a long stage."""

    def __init__(self, out) -> None:
        self.out = out
        self.last: tuple[str, int] | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        tenth = 10 if total <= 0 else min(10, done * 10 // total)
        if self.last == (stage, tenth):
            return
        self.last = (stage, tenth)
        filled = BAR * tenth // 10
        count = f" {done:,}/{total:,}" if total > 1 else ""
        self.out.write(f"[{'#' * filled}{'.' * (BAR - filled)}] {tenth * 10:3d}% {stage}{count}")
        self.out.flush()


class Command(BaseCommand):
    help = "Roll the raw metrics of [since, until) up into minute/hour/day buckets (Spark)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--since", default="-3h", help="ISO time, 'now' or like -2h")
        parser.add_argument("--until", default="now", help="ISO time, 'now' or like -5m")
        parser.add_argument("--raw-url", default=None, help="raw store (default METRICS_RAW_URL)")
        parser.add_argument("--master", default=None, help="Spark master (default SPARK_MASTER)")

    def run_from_argv(self, argv: list[str]) -> None:
        # argparse takes "-2h" after --since for an option: join such pairs first.
        fixed: list[str] = []
        for arg in argv:
            if fixed and fixed[-1] in ("--since", "--until") and _RELATIVE.match(arg):
                fixed[-1] = f"{fixed[-1]}={arg}"
            else:
                fixed.append(arg)
        super().run_from_argv(fixed)

    def handle(self, *args, **opts) -> None:
        now = datetime.now(UTC)
        since = parse_time(opts["since"], now)
        until = parse_time(opts["until"], now)
        if until <= since:
            raise CommandError("--until must be after --since")
        self.stdout.write(f"rollup {since.isoformat()} .. {until.isoformat()}")
        run = run_rollup(
            since,
            until,
            trigger="manual",
            raw_url=opts["raw_url"],
            master=opts["master"],
            progress=ProgressBar(self.stdout),
        )
        seconds = (run.finished - run.started).total_seconds() if run.finished else 0.0
        if run.status != "ok":
            sys.stderr.write(run.error + "\n")
            raise CommandError(f"rollup failed (run {run.pk}): {run.error.splitlines()[0]}")
        self.stdout.write(
            f"ok (run {run.pk}): {run.rows_in:,} samples -> {run.rows_out:,} rollups "
            f"in {seconds:.1f} s"
        )
