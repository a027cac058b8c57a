"""Celery tasks of the metrics pipeline."""

from __future__ import annotations

from celery import shared_task

from .rollup import run_rollup, window_for


@shared_task(name="portal.pipeline.tasks.rollup")
def rollup(hours_back: int = 2) -> dict:
    """Roll up the last hours (from ``hours_back`` hours before the last hour boundary to
    now: late samples are folded in); the run is recorded as a PipelineRun."""
    since, until = window_for(hours_back=hours_back)
    run = run_rollup(since, until, trigger="beat")
    return {
        "run": run.pk,
        "status": run.status,
        "rows_in": run.rows_in,
        "rows_out": run.rows_out,
        "error": run.error.split("\n", 1)[0],
    }
