"""``manage.py imqdbmgr`` (OpenMQ's database manager) on the database store, SQLite and a
real PostgreSQL: a broker stores messages, a durable subscription and a prepared XA
transaction; stopped, its store is backed up, its tables deleted and restored, and a
broker started on the restored store delivers all of it.  While a broker holds the
store imqdbmgr refuses to change it; the lock a killed broker left is cleared with
``reset lck``.  Real broker and imqdbmgr processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import start_broker
from broker.store.ownership import DEFAULT_STALE_BEATS
from openmq_client import AckMode, Queue, TextMessage, Topic
from openmq_client.xa import create_xa_session
from tests.manage_fork import run_manage
from tests.pg import fresh_database, postgres_url  # noqa: F401

from .test_client_live import name, open_conn
from .test_persistence import receive_all
from .test_transactions import new_xid

pytestmark = pytest.mark.timeout(400)

JDBC = ("imq.persist.store=jdbc", "imq.persist.jdbc.heartbeat.interval=1")


def heartbeat_stale(url: str, instance: str) -> bool:
    """``instance``'s row has had no heartbeat for the stale threshold (3 of its beats)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            'SELECT extract(epoch FROM now() - heartbeat) > "interval" * %s'
            " FROM broker_storeowner WHERE broker_instance = %s",
            [DEFAULT_STALE_BEATS, instance],
        ).fetchone()
    return bool(row and row[0])


def imqdbmgr(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run_manage(["imqdbmgr", *args], env=env, timeout=120)


def ok(env: dict[str, str], *args: str) -> str:
    r = imqdbmgr(env, *args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def refused(env: dict[str, str], *args: str) -> str:
    r = imqdbmgr(env, *args)
    assert r.returncode == 1, (args, r.stdout, r.stderr)
    return r.stderr


async def fill(b: Any, q: Queue, t: Topic, cid: str, src: Queue, xa_out: Queue):
    """Persistent messages on a queue (one delivered and not acknowledged), a durable
    subscription holding topic messages, and a PREPARED XA transaction."""
    conn = await open_conn(b, client_id=cid)
    sess = await conn.create_session()
    await (await sess.create_durable_subscriber(t, "keep")).close()
    await conn.close()
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(None)
    for i in range(20):
        await prod.send(TextMessage(f"q{i}", properties={"i": i}), destination=q)
    for i in range(3):
        await prod.send(TextMessage(f"t{i}"), destination=t)
    await prod.send(TextMessage("consume me"), destination=src)
    # Delivered, never acknowledged: it comes back marked redelivered.
    held = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    consumer = await held.create_consumer(q)
    await conn.start()
    first = await consumer.receive(5)
    assert first is not None and first.text == "q0"
    xsess, xa = await create_xa_session(conn)
    xid = new_xid()
    await xa.start(xid)
    await (await xsess.create_producer(xa_out)).send(TextMessage("prepared send"))
    got = await (await xsess.create_consumer(src)).receive(5)
    assert got is not None and got.text == "consume me"
    await xa.end(xid)
    await xa.prepare(xid)
    return conn, xid


async def check_everything(b: Any, q: Queue, t: Topic, cid: str, src: Queue, xa_out: Queue, xid):
    got = await receive_all(b, q)
    assert [m.text for m in got] == [f"q{i}" for i in range(20)]
    assert got[0].redelivered  # (and those prefetched with it: delivered too)
    assert [m.properties["i"] for m in got] == list(range(20))
    got = await receive_all(b, t, client_id=cid, durable="keep")
    assert [m.text for m in got] == ["t0", "t1", "t2"]
    conn = await open_conn(b)
    _sess, xa = await create_xa_session(conn)
    assert xid in await xa.recover()
    assert await receive_all(b, xa_out, first_timeout=0.5) == []
    await xa.commit(xid)
    await conn.close()
    assert [m.text for m in await receive_all(b, xa_out)] == ["prepared send"]
    assert await receive_all(b, src, first_timeout=0.5) == []


def round_trip(tmp_path: Path, database_url: str | None, *, every_check: bool) -> None:
    """Fill a broker's store, stop it, back up, delete the tables, restore, start a
    broker on it and receive everything; ``every_check``: also what each step says."""
    instance = "dbmgr"
    q, t, src, xa_out = Queue(name("bq")), Topic(name("bt")), Queue(name("bs")), Queue(name("bx"))
    cid = name("cid")

    b = start_broker(tmp_path, *JDBC, instance=instance, database_url=database_url)
    env = b.extra["env"]
    try:
        _conn, xid = asyncio_run(fill(b, q, t, cid, src, xa_out))
        # A running broker holds the store: nothing that changes or copies it is done.
        said = refused(env, "delete", "tbl")
        assert "currently locked by the broker running on 127.0.0.1:" in said, said
        assert f"instance {instance}," in said and "Stop that broker first." in said
        if every_check:
            held = ok(env, "query")
            assert f"Broker instance {instance}: " in held and "held by the broker at" in held
    finally:
        b.stop()  # a clean stop releases the store (the XA connection just drops)

    if every_check:
        out = ok(env, "query", "-b", instance)
        assert "Running in standalone mode." in out
        assert "Database tables have already been created." in out
        assert f"Broker instance {instance}: 4 destinations, 1 durables" in out, out
        assert "not held by a broker" in out

    backup_dir = tmp_path / "backup"
    out = ok(env, "backup", "-dir", str(backup_dir))
    assert f"Backed up broker instance {instance}: " in out
    assert "Persistent store backed up to" in out
    assert (backup_dir / "imqdbmgr-backup.properties").exists()

    assert ok(env, "delete", "tbl").strip() == "Database tables deleted."

    out = ok(env, "restore", "-dir", str(backup_dir))
    counts = "4 destinations, 1 durables, 24 messages, 1 transactions"
    assert f"Restored broker instance {instance}: {counts}" in out

    b = start_broker(tmp_path, *JDBC, instance=instance, database_url=database_url)
    try:
        asyncio_run(check_everything(b, q, t, cid, src, xa_out, xid))
    finally:
        b.stop()


def asyncio_run(coro):
    import asyncio

    return asyncio.run(coro)


def test_round_trip_and_missing_tables_on_sqlite(tmp_path: Path) -> None:
    round_trip(tmp_path, None, every_check=False)

    # Tables deleted: a broker creates them (imq.persist.storecreate.all, the default)
    # unless told not to, then it refuses to start with OpenMQ's words.
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    ok(env, "delete", "tbl")
    with pytest.raises(RuntimeError, match="No database table exists"):
        start_broker(tmp_path, *JDBC, "imq.persist.storecreate.all=false", instance="dbmgr")
    b = start_broker(tmp_path, *JDBC, instance="dbmgr")
    try:
        assert "database store: created its tables" in b.log_text()
    finally:
        b.stop()


def test_round_trip_and_stale_lock_on_postgresql(tmp_path: Path, postgres_url: str) -> None:  # noqa: F811
    url = fresh_database(postgres_url, "imqdbmgr_rt")
    round_trip(tmp_path, url, every_check=True)

    # A broker that is killed leaves the store locked; once its heartbeat is stale,
    # reset lck releases it (a live one is never unlocked).  It beats every half second
    # (the property takes fractions): stale 1.5 s after it is killed.
    b = start_broker(
        tmp_path,
        "imq.persist.store=jdbc",
        "imq.persist.jdbc.heartbeat.interval=0.5",
        instance="crashed",
        database_url=url,
    )
    env = b.extra["env"]
    said = refused(env, "reset", "lck", "-b", "crashed")
    assert "Stop that broker first." in said
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)
    # Waited for on the row itself (an imqdbmgr process a poll cost a third of a second
    # of CPU), then imqdbmgr says what to do.
    deadline = time.monotonic() + 30
    while not heartbeat_stale(url, "crashed"):
        assert time.monotonic() < deadline, "the killed broker's heartbeat never went stale"
        time.sleep(0.1)
    while "reset lck -b crashed" not in (said := refused(env, "delete", "tbl")):
        assert time.monotonic() < deadline, said
        time.sleep(0.3)
    out = ok(env, "reset", "lck", "-b", "crashed")
    assert "The lock of broker instance crashed" in out and "has been reset" in out
    assert ok(env, "delete", "tbl").strip() == "Database tables deleted."
