"""Samples flow from a real broker to the raw store, and ``manage.py rollup`` (a real
PySpark in local mode, in its own process) rolls them up into the broker's database;
Spark failing to start is a failed run, recorded, with the rollups kept."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from openmq_client import BytesMessage, Queue, Topic, connect

from .manage_fork import run_manage

pytestmark = pytest.mark.timeout(240)

SIZE = 100


def wait_for(check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.2)


def raw_rows(store: Path) -> list[dict]:
    if not store.exists():
        return []
    # Hidden temporary files are skipped, as Spark skips them.
    rows = ds.dataset(str(store), format="parquet", partitioning="hive").to_table().to_pylist()
    return sorted(rows, key=lambda r: r["ts"])


def rollup(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``manage.py rollup ARGS`` (forked from tests/manage_fork.py's server)."""
    return run_manage(["rollup", *args], env=env, timeout=200)


def db_rows(db: Path, sql: str, *params: Any) -> list[sqlite3.Row]:
    with sqlite3.connect(db, timeout=20) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()


def test_broker_samples_reach_the_raw_store_and_roll_up(own_broker):
    b = own_broker(
        "imq.metrics.sample.interval=1", "imq.metrics.raw.flush.interval=1", instance="rawbroker"
    )
    store = b.varhome / "metrics-raw"
    q, t = f"rawQ_{uuid.uuid4().hex[:8]}", f"rawT_{uuid.uuid4().hex[:8]}"

    async def traffic() -> None:
        conn = await connect(b.host, b.portmapper_port, request_timeout=20)
        sess = await conn.create_session()
        to_queue = await sess.create_producer(Queue(q))
        to_topic = await sess.create_producer(Topic(t))
        for _ in range(12):
            await to_queue.send(BytesMessage(b"x" * SIZE))
        await to_topic.send(BytesMessage(b"y" * SIZE))
        await conn.close()

    asyncio.run(traffic())

    def queue_counted() -> list[dict]:
        rows = [r for r in raw_rows(store) if r["name"] == q]
        return rows if sum(r["msgs_in"] for r in rows) == 12 and rows[-1]["depth"] == 12 else []

    rows = wait_for(queue_counted)
    assert {r["kind"] for r in rows} == {"destination"} and rows[0]["dest_type"] == "queue"
    assert rows[-1]["bytes"] >= 12 * SIZE
    everything = raw_rows(store)
    kinds = {(r["kind"], r["name"]) for r in everything}
    assert ("broker", "") in kinds and ("service", "jms") in kinds and ("destination", t) in kinds
    broker_rows = [r for r in everything if r["kind"] == "broker"]
    assert sum(r["msgs_in"] for r in broker_rows) >= 13
    assert all(r["memory_state"] == 0 and r["interval"] > 0 for r in broker_rows)
    # Files are complete Parquet files under date=/hour= partitions; no temporary is left
    # once a flush is over.
    files = [p for p in store.rglob("*") if p.is_file()]
    assert files and all(p.parent.name.startswith("hour=") for p in files)

    # One task thread and one shuffle partition: a few dozen samples (the job's results
    # depend on neither).
    env = {**b.extra["env"], "SPARK_MASTER": "local[1]", "SPARK_SHUFFLE_PARTITIONS": "1"}
    done = rollup(env, "--since", "-1h", "--until", "now")
    assert done.returncode == 0, done.stderr
    assert "% compute" in done.stdout and "% replace" in done.stdout and "ok (run" in done.stdout
    db = b.varhome.parent / "db.sqlite3"
    hour = db_rows(
        db,
        "SELECT * FROM pipeline_rollup WHERE broker = ? AND destination = ? "
        "AND granularity = 'hour'",
        "rawbroker",
        q,
    )
    assert len(hour) in (1, 2)  # the samples may straddle an hour boundary
    assert sum(r["msgs_in"] for r in hour) == 12 and max(r["depth_max"] for r in hour) == 12
    assert hour[0]["dest_type"] == "queue"
    minutes = db_rows(
        db,
        "SELECT SUM(msgs_in) AS n FROM pipeline_rollup WHERE broker = ? AND destination = ? "
        "AND granularity = 'minute'",
        "rawbroker",
        q,
    )
    assert minutes[0]["n"] == 12
    runs = db_rows(db, "SELECT * FROM pipeline_pipelinerun ORDER BY id")
    assert (
        runs[-1]["status"] == "ok" and runs[-1]["rows_in"] > 0 and runs[-1]["trigger"] == "manual"
    )

    # Spark cannot start (a wrong JAVA_HOME): a failed run, the error kept, rollups intact.
    before = db_rows(db, "SELECT COUNT(*) AS n FROM pipeline_rollup")[0]["n"]
    failed = rollup({**env, "JAVA_HOME": "/nonexistent/jdk"}, "--since", "-1h")
    assert failed.returncode != 0
    assert "rollup failed" in failed.stderr
    run = db_rows(db, "SELECT * FROM pipeline_pipelinerun ORDER BY id DESC LIMIT 1")[0]
    assert run["status"] == "failed" and run["finished"] is not None
    assert "java" in run["error"].lower()
    assert db_rows(db, "SELECT COUNT(*) AS n FROM pipeline_rollup")[0]["n"] == before
    # The broker went on serving throughout.
    asyncio.run(traffic())
    assert os.path.exists(store)
