"""``python manage.py up``: the supervisor brings up redis, the broker, the portal, the UMS
gateway and Celery (whose beat runs the metrics rollup on Spark), and takes every one of
them down again on SIGTERM.  When one of them dies, and ``--daemon``:
tests/test_up_deaths.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker import props
from broker.launcher import free_port, fresh_sqlite
from broker.management.commands.up import portmapper_answers, redis_answers

from .celery_procs import query
from .manage_fork import run_manage

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.timeout(240),
    # manage.py up starts a redis-server: without one the tests fail naming it.
    pytest.mark.usefixtures("needs_redis_server"),
]


def children_of(pid: int) -> dict[int, str]:
    """The live child processes of ``pid`` and their command lines (from /proc)."""
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ")".
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out[int(entry.name)] = cmdline
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def kind(cmdline: str) -> str:
    """Which of ``up``'s children a command line is."""
    if "redis-server" in cmdline:
        return "redis"
    if "runbroker" in cmdline:
        return "broker"
    if "celery" in cmdline:
        return "beat" if " beat " in cmdline else "worker"
    if "uvicorn" in cmdline:
        return "ums"
    return "portal"


def portal_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            return r.status == 200 and r.read() == b"ok"
    except OSError:
        return False


def refuses(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


class Up:
    """``manage.py up`` as a child process on free ports, its output in a file."""

    def __init__(
        self,
        tmp: Path,
        *extra: str,
        migrated: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        """``migrated``: the database is a copy of one migrated before (up's own migrate
        then has nothing to do); False: an empty file, which up migrates.  ``extra_env``:
        more variables of up's environment (its children inherit them)."""
        self.pm, self.portal, self.ums = free_port(), free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IMQ_", "REDIS_URL"))}
        env.update(extra_env or {})
        self.db = tmp / "db.sqlite3"
        if migrated:
            fresh_sqlite(self.db)
        env["DATABASE_URL"] = f"sqlite:///{self.db}"
        env["IMQ_VARHOME"] = str(tmp / "var")
        self.log = tmp / "up.log"
        cmd = [
            sys.executable, "manage.py", "up",
            "--portal-port", str(self.portal),
            "--ums-port", str(self.ums),
            "-port", str(self.pm),
            f"-Dimq.jms.tcp.port={free_port()}",
            f"-Dimq.admin.tcp.port={free_port()}",
            *extra,
        ]  # fmt: skip
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_running(self) -> dict[int, str]:
        deadline = time.monotonic() + 150
        while not (
            "up: running" in self.output()
            and portal_answers(self.portal)
            and portal_answers(self.ums)
            and portmapper_answers("127.0.0.1", self.pm)
        ):
            assert self.proc.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.1)
        kids = children_of(self.proc.pid)
        kinds = sorted(kind(c) for c in kids.values())
        assert kinds == ["beat", "broker", "portal", "redis", "ums", "worker"], kids
        assert any("portal.serve" in c and "portal.asgi:application" in c for c in kids.values())
        assert any("uvicorn" in c and "portal.asgi:application" in c for c in kids.values())
        return kids

    def redis_port(self) -> int:
        line = next(ln for ln in self.output().splitlines() if ln.startswith("up: redis"))
        return int(line.split("redis://127.0.0.1:", 1)[1].split("/", 1)[0])

    def wait_exit(self) -> int:
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in children_of(self.proc.pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def shared_up(tmp_path_factory) -> Iterator[Callable[[], Up]]:
    """One ``manage.py up`` for the tests of this module that need no up of their own
    (a whole-system start is a minute of a loaded machine): ``shared_up()`` is the
    running one, started again if a test has stopped it, so the tests pass in any
    order.  Its database starts empty: up's own migrate is what makes it.  Its broker
    flushes its raw samples every 2 s instead of every 5 minutes, and its Celery worker's
    rollup runs Spark with one task thread and one shuffle partition instead of a thread
    per core and four (the rollup test: a few hundred samples, the same job)."""
    started: list[Up] = []

    def running() -> Up:
        if not started or started[-1].proc.poll() is not None:
            tmp = tmp_path_factory.mktemp("up")
            spark = {"SPARK_MASTER": "local[1]", "SPARK_SHUFFLE_PARTITIONS": "1"}
            started.append(
                Up(tmp, "-Dimq.metrics.raw.flush.interval=2", migrated=False, extra_env=spark)
            )
        return started[-1]

    yield running
    for up in started:
        up.kill()


@pytest.mark.timeout(300)
def test_up_runs_the_metrics_rollup_on_spark(shared_up) -> None:
    """The Spark rollup as ``make run`` runs it: up's own broker writing raw samples, its
    own Celery beat and worker running the metrics-rollup job on PySpark (a Java runtime
    is needed: ``make install`` installs one).  A run that ends ``ok`` with rollup rows
    is what fills the portal's History page."""
    up = shared_up()
    up.wait_running()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMQ_", "REDIS_URL"))}
    env.update(DATABASE_URL=f"sqlite:///{up.db}", IMQ_VARHOME=str(up.db.parent / "var"))
    raw = up.db.parent / "var" / "metrics-raw"
    deadline = time.monotonic() + 60
    while not any(raw.rglob("*.parquet")):
        assert up.proc.poll() is None, up.output()
        assert time.monotonic() < deadline, f"no raw samples under {raw}\n{up.output()}"
        time.sleep(0.2)
    # Beat's DatabaseScheduler notices the changed schedule at its next sync.
    schedule(env, "u('metrics-rollup', 5, True)")
    hourly = False
    try:
        deadline = time.monotonic() + 200
        while True:
            runs = query(
                up.db,
                "SELECT status, rows_in, rows_out, error, trigger FROM pipeline_pipelinerun"
                " ORDER BY id",
            )
            if runs and not hourly:
                # Hourly again as soon as beat's run has begun (its row is made before Spark
                # starts): the up is shared, and a rollup every 5 s is a Spark JVM every
                # 5 s, queued behind this one's while it runs (each ~10 s of CPU, and one
                # under way holds up the worker's stop in the next test).
                schedule(env, "u('metrics-rollup', 3600, True)")
                hourly = True
            done = [r for r in runs if r[0] != "running"]
            if done:
                break
            assert up.proc.poll() is None, up.output()
            assert time.monotonic() < deadline, f"no rollup run ended\n{up.output()[-6000:]}"
            time.sleep(0.2)
    finally:
        if not hourly:
            schedule(env, "u('metrics-rollup', 3600, True)")
    status, rows_in, rows_out, error, trigger = done[0]
    assert (status, trigger) == ("ok", "beat"), (error, up.output()[-6000:])
    assert rows_in > 0 and rows_out > 0
    assert query(up.db, "SELECT count(*) FROM pipeline_rollup")[0][0] == rows_out


def schedule(env: dict[str, str], call: str) -> None:
    """``call`` of portal.jobs.actions.update_schedule (as ``u``) in a manage.py shell."""
    code = f"from portal.jobs.actions import update_schedule as u; {call}"
    done = run_manage(["shell", "-v", "0", "-c", code], env=env, timeout=120)
    assert done.returncode == 0, done.stderr


def test_up_serves_and_stops_everything_on_sigterm(shared_up):
    up = shared_up()
    kids = up.wait_running()
    out = up.output()
    assert f"http://127.0.0.1:{up.portal}/" in out
    assert f"http://127.0.0.1:{up.ums}/ums/ (UMS gateway)" in out
    assert f"127.0.0.1:{up.pm}" in out
    # Loopback by default (no imq.hostname given), and the broker says where it listens.
    assert f"port mapper listening on 127.0.0.1:{up.pm}" in out
    assert "service jms (tcp NORMAL) listening on 127.0.0.1:" in out
    # The HTTP tunnel as well, and up prints its URL.
    assert "service httpjms (http NORMAL) listening on 127.0.0.1:" in out
    assert "HTTP tunnel http://127.0.0.1:" in out
    assert f"celery worker on redis://127.0.0.1:{up.redis_port()}/0" in out
    assert "celery beat on redis://" in out
    assert redis_answers(up.redis_port())
    # The worker's pool processes are its children, not up's: all of them must go too.
    workers = [pid for pid, c in kids.items() if kind(c) == "worker"]
    pool = [pid for w in workers for pid in children_of(w)]

    up.proc.send_signal(signal.SIGTERM)
    assert up.wait_exit() == 0, up.output()
    assert "up: stopped" in up.output()
    assert not [pid for pid in kids if alive(pid)], (kids, up.output())
    assert not [pid for pid in pool if alive(pid)], (pool, up.output())
    assert refuses(up.portal) and refuses(up.ums) and refuses(up.pm)
    assert refuses(up.redis_port())


def test_up_binds_loopback_unless_told_otherwise(tmp_path):
    from broker.management.commands.up import Command

    def broker_config(*defines: str):
        cmd = Command()
        cmd.opts = {
            "instance": "bindtest", "pm_port": None, "varhome": str(tmp_path),
            "reset": None, "loglevel": None, "defines": list(defines),
        }  # fmt: skip
        return cmd._broker_config()

    config, args = broker_config()
    assert config.get("imq.hostname") == "127.0.0.1" and "-Dimq.hostname=127.0.0.1" in args
    assert config.get(props.SERVICE_ACTIVELIST) == ["jms", "admin", "httpjms"]
    config, args = broker_config("imq.hostname=0.0.0.0")
    assert config.get("imq.hostname") == "0.0.0.0"
    assert not [a for a in args if a.startswith("-Dimq.hostname=127")]
    # Services chosen by the administrator are left as they are.
    config, args = broker_config("imq.service.activelist=jms,admin,ssljms")
    assert config.get(props.SERVICE_ACTIVELIST) == ["jms", "admin", "ssljms"]


def test_up_daemon_needs_a_log_dir(tmp_path: Path):
    # It stops before the database and before it starts anything, so the command is forked
    # from tests/manage_fork.py's server (as a fresh process runs it) rather than started.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMQ_", "REDIS_URL"))}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", IMQ_VARHOME=str(tmp_path))
    done = run_manage(["up", "--daemon", "--portal-port", str(free_port())], env=env, timeout=60)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "--daemon needs --log-dir DIR" in done.stdout + done.stderr
    assert not (tmp_path / "db.sqlite3").exists()
