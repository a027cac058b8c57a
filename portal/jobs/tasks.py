"""The Celery tasks of the background jobs (scheduled by beat: portal/jobs/schedules.py).
They are thin: the work is in :mod:`portal.jobs.expiry` and :mod:`portal.jobs.logroll`."""

from __future__ import annotations

from celery import shared_task

from . import expiry, logroll


@shared_task(name="portal.jobs.tasks.reclaim_expired")
def reclaim_expired(
    brokers: list[str] | None = None, stale_beats: float | None = None
) -> list[dict]:
    """Tell every broker (default: settings.JOBS_BROKERS) to sweep expired messages now,
    then reclaim the expired database-store rows of brokers that are not running.

    A broker that cannot be reached (stopped, crashed, restarting) fails soft: its run is
    recorded as failed with the reason (the Jobs page) and logged once as a WARNING by
    :func:`expiry.reclaim_on`; the task itself does not raise, so a broker that is down
    for a while costs one log line per run instead of a task error with a traceback each
    time, and the next run after it is back is ok again."""
    runs = expiry.reclaim_everywhere(brokers, stale_beats)
    return [{"broker": r.broker, "status": r.status, "run": r.id} for r in runs]


@shared_task(name="portal.jobs.tasks.roll_log_table")
def roll_log_table(retention_days: float | None = None, batch: int = 100_000) -> dict:
    """Move log records older than the retention to a compressed archive."""
    run = logroll.roll_log_table(retention_days, batch)
    return {"run": run.id, "records": run.records, "archive": run.archive}
