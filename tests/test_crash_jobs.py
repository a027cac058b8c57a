"""Celery's jobs while the broker they talk to is SIGKILLed and started again: a real
redis-server, broker, worker and beat (the expiry-reclamation schedule every second).

While the broker is down each run of the job fails soft: recorded as failed on the Jobs
page (an ExpiryRun with the reason), one log line in the worker per failure and no
traceback, worker and beat keep running; once the broker is back the next run is ok
again, with nobody restarting anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.launcher import start_broker

from .celery_procs import CeleryProc, env_for, manage, query, wait_for
from .crash_stack import kill_broker, restart_broker
from .redis import RedisServer, redis_binary

pytestmark = pytest.mark.timeout(240)


def runs(db: Path, status: str, after: int = 0) -> list[tuple]:
    return query(
        db,
        "SELECT id, error FROM jobs_expiryrun WHERE status = ? AND id > ? AND broker NOT LIKE"
        " 'store:%' ORDER BY id",
        status,
        after,
    )


def test_expiry_job_fails_soft_while_the_broker_is_down(tmp_path: Path) -> None:
    redis = RedisServer(redis_binary())
    redis.start()
    broker = start_broker(tmp_path)
    worker = beat = None
    try:
        db = tmp_path / "db.sqlite3"
        env = env_for(f"sqlite:///{db}", redis.url)
        address = f"127.0.0.1:{broker.portmapper_port}"
        manage(
            env,
            code="from portal.jobs.actions import update_schedule as u; "
            f"u('expiry-reclamation', 1, True, kwargs={{'brokers': [{address!r}]}}); "
            "u('log-table-rollover', 3600, False); u('metrics-rollup', 3600, False)",
        )
        worker = CeleryProc("worker", env, tmp_path / "worker.log")
        beat = CeleryProc("beat", env, tmp_path / "beat.log")
        wait_for(lambda: runs(db, "ok"), what="an ok run before the crash")

        kill_broker(broker)
        last_ok = runs(db, "ok")[-1][0]
        failed = wait_for(
            lambda: len(runs(db, "failed", last_ok)) >= 3 and runs(db, "failed", last_ok),
            what="failed runs while the broker is down",
        )
        # A run under way when the broker died may say its connection closed before the
        # reply; every later one cannot reach the broker.
        assert all(address in (error or "") for _, error in failed), failed
        assert all("reach" in (error or "") for _, error in failed[1:]), failed
        assert worker.proc.poll() is None and beat.proc.poll() is None

        restart_broker(broker)
        last_failed = runs(db, "failed")[-1][0]
        ok_run = wait_for(lambda: runs(db, "ok", last_failed), what="an ok run after the restart")
        # The worker's log caught up with the database: the task that made that ok run has
        # logged its end (its result names the run), so every failed run's lines are there.
        ok_id = ok_run[0][0]  # type: ignore[index]
        wait_for(
            lambda: any(
                "succeeded" in ln and f"'run': {ok_id}}}" in ln
                for ln in worker.output().splitlines()
            ),
            what="the worker's log of the ok run's task",
        )
        assert worker.proc.poll() is None and beat.proc.poll() is None
        out = worker.output()
        # One line per failed run, no traceback, no task marked as crashed.
        assert "Traceback" not in out, out[-4000:]
        assert not re.search(r"raised unexpected|Task .* raised", out), out[-4000:]
        lines = [ln for ln in out.splitlines() if "expiry reclamation on" in ln and "failed" in ln]
        assert len(lines) >= 3 and all("reach" in ln for ln in lines[1:]), lines
    finally:
        for proc in (beat, worker):
            if proc is not None:
                proc.stop()
        broker.stop()
        redis.stop()
