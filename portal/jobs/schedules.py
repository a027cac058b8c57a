"""The default schedules of the background jobs, created in django-celery-beat's tables
when missing (after ``migrate``, which ``manage.py up`` runs).  An administrator edits
them afterwards (interval, enabled) on the portal's Jobs page; existing rows are never
overwritten here.

Each entry: (name, task dotted path, interval in seconds, kwargs).
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_SCHEDULES: list[tuple[str, str, int, dict[str, Any]]] = [
    # imq.message.expiration.interval (60 s): tell every broker to sweep expired messages.
    ("expiry-reclamation", "portal.jobs.tasks.reclaim_expired", 60, {}),
    # The database log table rolls like the log file: old records go to archives.
    ("log-table-rollover", "portal.jobs.tasks.roll_log_table", 3600, {}),
    # The metrics rollups on Spark (portal/pipeline/rollup.py): the last 2 hours and this
    # one, so samples flushed late are folded in.
    ("metrics-rollup", "portal.pipeline.tasks.rollup", 3600, {"hours_back": 2}),
]


def ensure_schedules() -> list[str]:
    """Create the DEFAULT_SCHEDULES missing from django-celery-beat's tables; return
    the names created."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    created: list[str] = []
    for name, task, seconds, kwargs in DEFAULT_SCHEDULES:
        if PeriodicTask.objects.filter(name=name).exists():
            continue
        interval, _ = IntervalSchedule.objects.get_or_create(
            every=seconds, period=IntervalSchedule.SECONDS
        )
        PeriodicTask.objects.create(
            name=name, task=task, interval=interval, kwargs=json.dumps(kwargs), enabled=True
        )
        created.append(name)
    return created


def ensure_schedules_after_migrate(sender, **kwargs) -> None:
    """post_migrate handler: once django-celery-beat's tables exist, fill in defaults."""
    from django.db import connections

    using = kwargs.get("using", "default")
    if using != "default":
        # Another alias (tests migrate their own): django-celery-beat writes its change
        # marker on the default database whatever the alias, so leave those alone.
        return
    tables = connections[using].introspection.table_names()
    if "django_celery_beat_periodictask" in tables and sender.label == "jobs":
        ensure_schedules()
