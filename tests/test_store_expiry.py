"""The expiry job in the database store: expired rows of a broker that is not running
are reclaimed (DMQ or discarded, counted per destination), a running broker's rows are
never touched, and a broker starting while the job holds an instance waits for it (or
the job backs off when the broker was first).

Real brokers with ``imq.persist.store=jdbc`` on SQLite and on PostgreSQL; the job runs in
its own process (``manage.py shell``) on the same database, as a Celery worker would.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import sqlite3
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from broker import launcher
from broker.launcher import start_broker
from broker.protocol.types import DMQ_NAME
from broker.store.ownership import DEFAULT_STALE_BEATS
from openmq_client import Queue, TextMessage

from .celery_procs import ROOT, wait_for
from .manage_fork import ForkedProcess, _start, run_manage
from .pg import fresh_database
from .test_client_live import name, open_conn
from .test_persistence import receive_all

pytestmark = pytest.mark.timeout(300)

# Short-lived enough for the job to find them expired soon, long enough to be stored
# (a send that arrives expired is not kept).
TTL_MS = 1000
# Half-second beats (the property takes fractions): a killed or frozen broker's
# heartbeat is stale (3 beats) 1.5 s after its last beat.
BEAT_S = 0.5
BEAT = f"imq.persist.jdbc.heartbeat.interval={BEAT_S}"
# A running broker's heartbeat must stay fresh under load: a whole second (stale at 3 s).
LIVE_BEAT_S = 1
# The broker's own sweep is far off: only the job (or a delivery attempt) expires.
NO_SWEEP = "imq.message.expiration.interval=3600"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db.sqlite3'}"
    pg = request.getfixturevalue("postgres_url")
    return fresh_database(pg, f"imq_{uuid.uuid4().hex[:8]}")


def rows(url: str, sql: str, *args: object) -> list[tuple]:
    """``sql`` (``%s`` placeholders) on the database ``url``, with a plain connection."""
    if url.startswith("sqlite:///"):
        con = sqlite3.connect(url[len("sqlite:///") :], timeout=30)
        try:
            return con.execute(sql.replace("%s", "?"), args).fetchall()
        finally:
            con.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        return con.execute(sql, args).fetchall()


def job_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMQ_", "JOBS_"))}
    env["DATABASE_URL"] = url
    return env


def run_job(url: str, times: int = 1, apart: float = 0) -> str:
    """``times`` runs of the store part of the expiry job, in its own process (as a
    Celery worker runs it, again and again), ``apart`` seconds apart; its runs."""
    code = (
        "import time\n"
        "from portal.jobs.expiry import reclaim_stopped\n"
        f"for i in range({times}):\n"
        f"    time.sleep({apart} if i else 0)\n"
        "    print([(r.broker, str(r.status)) for r in reclaim_stopped()])\n"
    )
    done = run_manage(["shell", "-v", "0", "-c", code], env=job_env(url), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def heartbeat_stale(url: str, instance: str) -> bool:
    """The instance's heartbeat is older than the job's default threshold: the job will
    count it as stopped (waited for before the job runs: each run is a process)."""
    [(beat, interval)] = rows(
        url,
        "SELECT heartbeat, interval FROM broker_storeowner WHERE broker_instance = %s",
        instance,
    )
    if isinstance(beat, str):  # SQLite: UTC, as text
        beat = datetime.fromisoformat(beat)
    if beat.tzinfo is None:
        beat = beat.replace(tzinfo=UTC)
    return datetime.now(UTC) - beat > timedelta(seconds=interval * DEFAULT_STALE_BEATS)


def store_runs(url: str, instance: str) -> list[tuple]:
    """(destination, dest_type, to_dmq, discarded) of the job's runs on ``instance``."""
    return rows(
        url,
        "SELECT i.destination, i.dest_type, i.to_dmq, i.discarded FROM jobs_expiryrun r"
        " JOIN jobs_expiryrunitem i ON i.run_id = r.id WHERE r.broker = %s AND r.status = 'ok'"
        " ORDER BY i.destination",
        f"store:{instance}",
    )


def stored(url: str, instance: str, destination: str) -> int:
    return rows(
        url,
        "SELECT count(*) FROM broker_storedmessage WHERE broker_instance = %s AND destination = %s",
        instance,
        destination,
    )[0][0]


async def send(b, queue: str, *, expiring: int, discarded: int, kept: int) -> float:
    """Persistent messages: ``expiring`` with a short TTL (to the DMQ), ``discarded``
    short-lived ones the producer does not want kept, ``kept`` with no TTL or an hour's.
    Returns when the short-lived ones expire (epoch seconds)."""
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(Queue(queue))
    for i in range(expiring):
        await prod.send(TextMessage(f"expires {i}"), ttl_ms=TTL_MS)
    for i in range(discarded):
        msg = TextMessage(f"not kept {i}", properties={"JMS_SUN_PRESERVE_UNDELIVERED": False})
        await prod.send(msg, ttl_ms=TTL_MS)
    for i in range(kept):
        await prod.send(TextMessage(f"stays {i}"), ttl_ms=3_600_000 if i % 2 else 0)
    await conn.close()
    return time.time() + TTL_MS / 1000


def wait_until(t: float) -> None:
    """The short-lived messages have expired (the job's precondition, not a check)."""
    while (left := t - time.time()) > -0.05:
        time.sleep(max(left, 0) + 0.1)


def texts(messages) -> list[str]:
    return sorted(m.text for m in messages)


@pytest.mark.parametrize("how", ["clean", "sigkill"])
def test_stopped_brokers_expired_rows_are_reclaimed(
    own_broker, database_url: str, how: str
) -> None:
    b = own_broker("imq.persist.store=jdbc", BEAT, NO_SWEEP, database_url=database_url)
    queue = name("offexp")
    expire_at = asyncio.run(send(b, queue, expiring=3, discarded=2, kept=4))
    if how == "clean":
        b.stop()
    else:
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait(10)
    state = rows(
        database_url,
        "SELECT state, interval FROM broker_storeowner WHERE broker_instance = %s",
        b.instance,
    )
    # It beat every half second (the property takes fractions of a second).
    assert state == [("stopped" if how == "clean" else "running", BEAT_S)]
    assert stored(database_url, b.instance, queue) == 9
    wait_until(expire_at)
    if how == "sigkill":
        # Killed, the instance counts as stopped once its heartbeat is stale (3 beats);
        # stopped cleanly, it is stopped at once.
        wait_for(lambda: heartbeat_stale(database_url, b.instance), what="a stale heartbeat")
    wait_for(
        lambda: store_runs(database_url, b.instance) or run_job(database_url) and False,
        what="the job's run on the stopped instance",
    )
    assert store_runs(database_url, b.instance) == [(queue, "queue", 3, 2)]
    assert stored(database_url, b.instance, queue) == 4
    assert stored(database_url, b.instance, DMQ_NAME) == 3
    # Nothing more to reclaim: no further run.
    run_job(database_url)
    assert len(store_runs(database_url, b.instance)) == 1

    first = f"127.0.0.1:{b.portmapper_port}"  # the broker's name, as it signs DMQ copies
    b = own_broker("imq.persist.store=jdbc", BEAT, NO_SWEEP, database_url=database_url)
    assert texts(asyncio.run(receive_all(b, Queue(queue)))) == [f"stays {i}" for i in range(4)]
    dead = asyncio.run(receive_all(b, Queue(DMQ_NAME)))
    assert texts(dead) == [f"expires {i}" for i in range(3)]
    for m in dead:
        assert m.destination.name == queue
        assert m.properties["JMS_SUN_DMQ_UNDELIVERED_REASON"] == "EXPIRED"
        assert m.properties["JMS_SUN_DMQ_DELIVERY_COUNT"] == 0
        assert m.properties["JMS_SUN_DMQ_DEAD_BROKER"] == first


def test_a_running_brokers_rows_are_never_touched(own_broker, database_url: str) -> None:
    live_beat = f"imq.persist.jdbc.heartbeat.interval={LIVE_BEAT_S}"
    b = own_broker("imq.persist.store=jdbc", live_beat, NO_SWEEP, database_url=database_url)
    queue = name("liveexp")
    expire_at = asyncio.run(send(b, queue, expiring=3, discarded=2, kept=2))
    wait_until(expire_at)
    # A heartbeat interval apart, the heartbeat fresh each time.
    run_job(database_url, times=3, apart=LIVE_BEAT_S)
    assert store_runs(database_url, b.instance) == []
    assert stored(database_url, b.instance, queue) == 7
    # The broker itself expires them, as it always did.
    assert texts(asyncio.run(receive_all(b, Queue(queue)))) == ["stays 0", "stays 1"]
    dead = asyncio.run(receive_all(b, Queue(DMQ_NAME)))
    assert texts(m for m in dead if m.destination.name == queue) == [
        f"expires {i}" for i in range(3)
    ]


class _Job(ForkedProcess):
    """The job's process (tests/manage_fork.py) with pipes to its stdin and stdout."""

    stdin: io.TextIOWrapper
    stdout: io.TextIOWrapper


def _job_process(url: str, pause_after: str) -> _Job:
    """The job in its own process, stopping (until a line on its stdin) right after
    ``pause_after``: "reclaim" (inside its transaction, rows reclaimed, not committed)
    or "candidates" (it has seen the instance stopped, before taking its row)."""
    code = (
        "import sys\n"
        "from portal.jobs import expiry\n"
        "from broker.store import ownership\n"
        "def pausing(fn, tag):\n"
        "    def wrapper(*a, **kw):\n"
        "        out = fn(*a, **kw)\n"
        "        print(tag, flush=True)\n"
        "        sys.stdin.readline()\n"
        "        return out\n"
        "    return wrapper\n"
        f"if {pause_after!r} == 'reclaim':\n"
        "    expiry.reclaim_expired_rows = pausing(expiry.reclaim_expired_rows, 'PAUSED')\n"
        "else:\n"
        "    ownership.candidates = pausing(ownership.candidates, 'PAUSED')\n"
        "runs = expiry.reclaim_stopped()\n"
        "print('RUNS', [(r.broker, str(r.status)) for r in runs], flush=True)\n"
    )
    argv = ["manage.py", "shell", "-v", "0", "-c", code]
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    try:
        sock, pid = _start(argv, job_env(url), ROOT, [stdin_r, stdout_w, 2])
    finally:
        os.close(stdin_r)
        os.close(stdout_w)
    job = _Job(sock, pid, argv)
    job.stdin = open(stdin_w, "w")  # noqa: SIM115 - as long as the process
    job.stdout = open(stdout_r)  # noqa: SIM115
    return job


def _start_in_background(
    tmp_path: Path, url: str, started: list, procs: list, monkeypatch: pytest.MonkeyPatch
) -> threading.Thread:
    """``start_broker`` on a thread: what it returns (or raises) goes to ``started``; the
    broker's process, as soon as it is made, to ``procs``."""
    spawned = launcher.spawn

    def spawn(*args, **kw):
        proc = spawned(*args, **kw)
        procs.append(proc)
        return proc

    monkeypatch.setattr(launcher, "spawn", spawn)

    def start() -> None:
        try:
            started.append(
                start_broker(tmp_path, "imq.persist.store=jdbc", BEAT, NO_SWEEP, database_url=url)
            )
        except Exception as exc:  # reported by the test
            started.append(exc)

    t = threading.Thread(target=start, daemon=True)
    t.start()
    return t


# What /proc/PID/task/TID/wchan says of a thread in nanosleep (the names vary by kernel).
_SLEEPING = {"hrtimer_nanosleep", "do_nanosleep", "common_nsleep", "clock_nanosleep"}


def _sqlite_waiter(pid: int, db: str) -> bool:
    """Process ``pid`` has the SQLite file ``db`` open and a thread of it sleeps: SQLite
    waits for another connection's lock in its busy handler, sleeps of 1 to 100 ms."""
    try:
        opened = any(
            os.path.realpath(f"/proc/{pid}/fd/{fd}") == db for fd in os.listdir(f"/proc/{pid}/fd")
        )
        return opened and any(
            Path(f"/proc/{pid}/task/{tid}/wchan").read_text() in _SLEEPING
            for tid in os.listdir(f"/proc/{pid}/task")
        )
    except OSError:  # not started yet, or gone
        return False


def _broker_waits_for_the_job(url: str, procs: list, seen: list[bool], since: float) -> bool:
    """The starting broker is blocked by the job's transaction.

    PostgreSQL: a backend waits for the lock on the instance's row.  SQLite: the job
    holds the database's write lock, which a starting Django process waits for already
    in its system checks (Django probes JSON support in a transaction, and the settings
    make every transaction take the write lock at BEGIN), for at most the busy timeout
    (20 s) and then fails to start: the broker's process has the database open and
    sleeps in SQLite's busy handler, seen on two polls in a row (``seen``); where /proc
    does not say (another kernel), it is given 5 s from ``since`` to get there."""
    if url.startswith("sqlite:"):
        db = os.path.realpath(url[len("sqlite:///") :])
        seen.append(bool(procs) and _sqlite_waiter(procs[0].pid, db))
        return seen[-2:] == [True, True] or time.monotonic() - since > 5
    return bool(
        rows(
            url,
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
            "%broker_storeowner%",
        )
    )


@pytest.mark.parametrize("first", ["job", "broker"])
def test_broker_starting_while_the_job_runs(
    own_broker, database_url: str, tmp_path: Path, first: str, monkeypatch
) -> None:
    b = own_broker("imq.persist.store=jdbc", BEAT, NO_SWEEP, database_url=database_url)
    queue = name("raceexp")
    expire_at = asyncio.run(send(b, queue, expiring=3, discarded=1, kept=3))
    b.stop()
    wait_until(expire_at)
    job = _job_process(database_url, "reclaim" if first == "job" else "candidates")
    started: list = []
    procs: list = []
    try:
        assert job.stdout is not None and job.stdin is not None
        assert job.stdout.readline().strip() == "PAUSED"
        starter = _start_in_background(tmp_path, database_url, started, procs, monkeypatch)
        if first == "job":
            # The job holds the instance, its rows reclaimed but not committed: the
            # broker must wait for it, not load the rows as they were.
            seen: list[bool] = []
            since = time.monotonic()
            wait_for(
                lambda: _broker_waits_for_the_job(database_url, procs, seen, since),
                what="the broker waiting for the job's transaction",
            )
            assert not started  # not serving (nor failed) while the job holds the rows
        else:
            starter.join(90)  # the broker claimed and serves; then the job goes on
        job.stdin.write("\n")
        job.stdin.flush()
        out = job.stdout.readline()
        assert job.wait(60) == 0
        starter.join(90)
        (b2,) = started
        assert not isinstance(b2, Exception), b2
        live = texts(asyncio.run(receive_all(b2, Queue(queue))))
        dead = [
            m for m in asyncio.run(receive_all(b2, Queue(DMQ_NAME))) if m.destination.name == queue
        ]
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(10)
        for pipe in (job.stdin, job.stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        for s in started:
            if not isinstance(s, Exception):
                s.stop()
    # Whoever reclaimed them, each expired message is in the DMQ exactly once (or was
    # discarded) and each live one is delivered exactly once.
    assert live == [f"stays {i}" for i in range(3)]
    assert texts(dead) == [f"expires {i}" for i in range(3)]
    if first == "job":
        assert out.startswith("RUNS") and "'ok'" in out, out
        assert store_runs(database_url, b.instance) == [(queue, "queue", 3, 1)]
    else:
        assert out == "RUNS []\n", out  # it backed off: the broker had claimed the rows
        assert store_runs(database_url, b.instance) == []


def test_a_stalled_broker_whose_rows_were_reclaimed_stops(own_broker, database_url: str) -> None:
    """A broker frozen (SIGSTOP) past the threshold counts as stopped; once the job has
    reclaimed its expired rows (and bumped the epoch), the broker's next heartbeat finds
    the rows taken and it stops instead of going on with what it holds in memory; a
    restart delivers the rest once."""
    b = own_broker("imq.persist.store=jdbc", BEAT, NO_SWEEP, database_url=database_url)
    queue = name("stallexp")
    expire_at = asyncio.run(send(b, queue, expiring=2, discarded=0, kept=2))
    os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        # Frozen while its short-lived messages expire: both before the job runs.
        wait_until(expire_at)
        wait_for(lambda: heartbeat_stale(database_url, b.instance), what="a stale heartbeat")
        wait_for(
            lambda: store_runs(database_url, b.instance) or run_job(database_url) and False,
            what="the job's run on the frozen broker's rows",
        )
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    assert b.proc.wait(60) == 0
    assert "lost its rows" in b.log_text()
    assert store_runs(database_url, b.instance) == [(queue, "queue", 2, 0)]
    b = own_broker("imq.persist.store=jdbc", BEAT, NO_SWEEP, database_url=database_url)
    assert texts(asyncio.run(receive_all(b, Queue(queue)))) == ["stays 0", "stays 1"]
    dead = asyncio.run(receive_all(b, Queue(DMQ_NAME)))
    assert texts(m for m in dead if m.destination.name == queue) == ["expires 0", "expires 1"]
