"""What the Jobs page does (its views are thin wrappers): the schedules (read, edit,
run now) and the recent runs of the expiry and log rollover jobs.  A change (an edited
schedule, a job run now) sends a change event to the live pages
(:func:`broker.admintools.events.send_event`)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from broker.admintools.events import send_event

from . import logroll
from .models import ExpiryRun, JobStatus, LogRolloverRun
from .schedules import DEFAULT_SCHEDULES, ensure_schedules

log = logging.getLogger(__name__)


class ScheduleError(ValueError):
    """A schedule change that cannot be made (the message says why)."""


@dataclass
class ScheduleRow:
    """One periodic task as the Jobs page shows it."""

    id: int
    name: str
    task: str
    every: int | None
    enabled: bool
    last_run: datetime | None
    total_runs: int
    kwargs: str


def schedules() -> list[ScheduleRow]:
    """The periodic tasks (the defaults created first if missing), by name."""
    from django_celery_beat.models import PeriodicTask

    ensure_schedules()
    rows = []
    for t in PeriodicTask.objects.select_related("interval").order_by("name"):
        if t.name.startswith("celery."):
            continue  # celery's own housekeeping entries
        rows.append(
            ScheduleRow(
                t.id,
                t.name,
                t.task,
                _seconds(t.interval) if t.interval else None,
                t.enabled,
                t.last_run_at,
                t.total_run_count,
                t.kwargs,
            )
        )
    return rows


def _seconds(interval) -> int:
    factor = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 0}
    return int(interval.every * factor.get(interval.period, 1))


def update_schedule(
    name: str, every: int, enabled: bool, *, kwargs: dict | None = None, user: str = ""
) -> None:
    """Set a periodic task's interval (seconds, >= 1) and whether it runs; beat's
    DatabaseScheduler picks the change up at its next sync."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    if every < 1:
        raise ScheduleError("the interval must be at least 1 second")
    with transaction.atomic():
        try:
            task = PeriodicTask.objects.select_for_update().get(name=name)
        except PeriodicTask.DoesNotExist:
            raise ScheduleError(f"no schedule named {name!r}") from None
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=every, period=IntervalSchedule.SECONDS
        )
        task.interval, task.enabled = interval, enabled
        fields = ["interval", "enabled"]
        if kwargs is not None:
            task.kwargs = json.dumps(kwargs)
            fields.append("kwargs")
        task.save(update_fields=fields)  # PeriodicTask.save also bumps the change marker
    log.info("schedule %s: every %d s, %s (by %s)", name, every, "on" if enabled else "off", user)
    send_event(
        {
            "type": "schedule",
            "op": "update",
            "name": name,
            "every": every,
            "enabled": enabled,
            "by": user or "unknown",
        }
    )


def run_now(name: str, *, user: str = "") -> str:
    """Queue a scheduled task once, now.  When that fails (Redis down) the failure is
    recorded as a failed run of that job, logged, and raised."""
    from django_celery_beat.models import PeriodicTask

    from portal.celery import app

    try:
        task = PeriodicTask.objects.get(name=name)
    except PeriodicTask.DoesNotExist:
        raise ScheduleError(f"no schedule named {name!r}") from None
    try:
        result = app.send_task(
            task.task,
            kwargs=json.loads(task.kwargs or "{}"),
            retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.5},
        )
    except Exception as exc:
        error = f"cannot queue {task.task}: {exc}"
        log.error("job %s: %s", name, error)
        _record_failure(task.task, error)
        raise ScheduleError(error) from exc
    send_event({"type": "schedule", "op": "run", "name": name, "by": user or "unknown"})
    return str(result.id)


def _record_failure(task: str, error: str) -> None:
    now = timezone.now()
    if task.endswith("reclaim_expired"):
        ExpiryRun.objects.create(
            broker="(not queued)", started=now, finished=now, status=JobStatus.FAILED, error=error
        )
    elif task.endswith("roll_log_table"):
        LogRolloverRun.objects.create(
            started=now, finished=now, status=JobStatus.FAILED, error=error
        )


def expiry_runs(limit: int = 20) -> list[ExpiryRun]:
    return list(ExpiryRun.objects.prefetch_related("items")[:limit])


def rollover_runs(limit: int = 20) -> list[LogRolloverRun]:
    return list(LogRolloverRun.objects.all()[:limit])


def log_archives() -> list[Path]:
    return logroll.archives()


def log_archive(name: str) -> Path | None:
    return logroll.archive_path(name)


__all__ = [
    "DEFAULT_SCHEDULES",
    "ScheduleError",
    "expiry_runs",
    "log_archive",
    "log_archives",
    "rollover_runs",
    "run_now",
    "schedules",
    "update_schedule",
]
