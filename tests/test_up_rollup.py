"""The Spark rollup as ``make run`` runs it: ``manage.py up`` on a fresh instance
directory, its own broker writing raw samples, its own Celery beat and worker running the
metrics-rollup job on PySpark (a Java runtime is needed: ``make install`` installs one).
A run that ends ``ok`` with rollup rows is what fills the portal's History page."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .celery_procs import manage, query
from .test_up import Up

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("needs_redis_server")]


def test_up_runs_the_metrics_rollup_on_spark(tmp_path: Path) -> None:
    # The broker flushes its raw samples every 2 s instead of every 5 minutes.
    up = Up(tmp_path, "-Dimq.metrics.raw.flush.interval=2")
    try:
        up.wait_running()
        db = tmp_path / "db.sqlite3"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IMQ_", "REDIS_URL"))}
        env.update(DATABASE_URL=f"sqlite:///{db}", IMQ_VARHOME=str(tmp_path / "var"))
        raw = tmp_path / "var" / "metrics-raw"
        deadline = time.monotonic() + 60
        while not any(raw.rglob("*.parquet")):
            assert up.proc.poll() is None, up.output()
            assert time.monotonic() < deadline, f"no raw samples under {raw}\n{up.output()}"
            time.sleep(0.5)
        # Beat's DatabaseScheduler notices the changed schedule at its next sync.
        manage(env, code="from portal.jobs.actions import update_schedule as u; "
               "u('metrics-rollup', 5, True)")  # fmt: skip
        deadline = time.monotonic() + 200
        while True:
            done = query(
                db,
                "SELECT status, rows_in, rows_out, error, trigger FROM pipeline_pipelinerun"
                " WHERE status != 'running' ORDER BY id",
            )
            if done:
                break
            assert up.proc.poll() is None, up.output()
            assert time.monotonic() < deadline, f"no rollup run ended\n{up.output()[-6000:]}"
            time.sleep(1)
        status, rows_in, rows_out, error, trigger = done[0]
        assert (status, trigger) == ("ok", "beat"), (error, up.output()[-6000:])
        assert rows_in > 0 and rows_out > 0
        assert query(db, "SELECT count(*) FROM pipeline_rollup")[0][0] == rows_out
    finally:
        up.kill()
