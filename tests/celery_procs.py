"""A real Celery worker and beat for tests, as child processes on a given database and
Redis (``python -m celery -A portal worker|beat``), and helpers to reach that database
(its migrations are applied by ``start_broker`` or :func:`migrate`)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from broker.commandlines import celery_beat_command, celery_worker_command

from .manage_fork import popen, run_manage

ROOT = Path(__file__).resolve().parent.parent


def env_for(database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMQ_", "JOBS_"))}
    env.update(DATABASE_URL=database_url, REDIS_URL=redis_url, **extra)
    return env


def manage(env: dict[str, str], *args: str, code: str | None = None) -> str:
    """``manage.py <args>`` (or ``shell -c code``) with ``env``; its stdout."""
    cmd = [*args]
    if code is not None:
        cmd += ["shell", "-v", "0", "-c", code]
    # Forked from tests/manage_fork.py's server, which has the libraries imported.
    done = run_manage(cmd, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


class CeleryProc:
    """``celery -A portal worker`` or ``beat``, its output in a file."""

    def __init__(self, kind: str, env: dict[str, str], log: Path, *extra: str) -> None:
        self.log = log
        if kind == "worker":
            # Production's command (broker/commandlines.py) with a solo pool and a name of
            # its own (why: celery_worker_command's docstring).
            hostname = f"test-{os.getpid()}-{time.time_ns()}@h"
            args = celery_worker_command(hostname, *extra, concurrency=None, pool="solo")
        else:
            # No pid file: the tests wait for beat's output.
            args = celery_beat_command(*extra)
        with open(log, "wb") as out:
            # Forked from tests/manage_fork.py's server (Django and Celery imported): a
            # second of CPU less than a fresh `python -m celery`.
            self.proc = popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_output(self, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.proc.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.2)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def query(db: Path, sql: str, *args: object) -> list[tuple]:
    """Rows of ``sql`` on the SQLite database ``db`` (read with a plain connection)."""
    con = sqlite3.connect(db, timeout=20)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def wait_for(fn, timeout: float = 90, what: str = "") -> object:
    """Poll ``fn`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what or fn}"
        time.sleep(0.3)
