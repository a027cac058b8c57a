"""Log rollover: the broker's log file by size and by age (log_1.txt .. log_9.txt, the
oldest dropped), and the database log table by a real Celery worker, without losing a
record even when the worker is SIGKILLed between writing the archive and deleting."""

from __future__ import annotations

import logging
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from broker.launcher import fresh_sqlite
from broker.logsetup import BACKUP_COUNT, RolloverFileHandler
from portal.jobs.logroll import ARCHIVE_RE, PAUSE_ENV, read_archive

from .celery_procs import CeleryProc, env_for, manage, query, wait_for

pytestmark = pytest.mark.timeout(240)


def emit(handler: RolloverFileHandler, text: str, created: float | None = None) -> None:
    record = logging.LogRecord("test.roll", logging.WARNING, __file__, 1, text, None, None)
    if created is not None:
        record.created = created
    handler.handle(record)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_log_file_rolls_by_size_keeping_nine_archives(tmp_path: Path) -> None:
    handler = RolloverFileHandler(tmp_path / "log.txt", max_bytes=100)
    try:
        for i in range(40):
            emit(handler, f"line {i:03d} " + "x" * 40)  # two lines fill a file
    finally:
        handler.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["log.txt"] + [f"log_{n}.txt" for n in range(1, BACKUP_COUNT + 1)]
    # Newest in log.txt, then log_1 .. log_9; older lines were dropped with log_10.
    files = [tmp_path / "log.txt"] + [tmp_path / f"log_{n}.txt" for n in range(1, 10)]
    numbers = [int(ln.split()[1]) for f in reversed(files) for ln in lines(f)]
    assert numbers == list(range(40 - len(numbers), 40))
    assert len(numbers) < 40  # something was dropped


def test_log_file_rolls_by_age(tmp_path: Path) -> None:
    handler = RolloverFileHandler(tmp_path / "log.txt", rollover_secs=60)
    now = time.time()
    try:
        emit(handler, "first", now)
        emit(handler, "still young", now + 30)
        emit(handler, "a minute later", now + 61)
    finally:
        handler.close()
    assert lines(tmp_path / "log_1.txt") == ["first", "still young"]
    assert lines(tmp_path / "log.txt") == ["a minute later"]


def test_an_old_log_continued_after_a_restart_rolls_by_age(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("from the last run\n")
    old = time.time() - 120
    os.utime(log, (old, old))
    handler = RolloverFileHandler(log, rollover_secs=60)
    try:
        emit(handler, "after the restart")
    finally:
        handler.close()
    assert lines(tmp_path / "log_1.txt") == ["from the last run"]
    assert lines(log) == ["after the restart"]


def test_broker_log_rolls_by_rolloverbytes(own_broker) -> None:
    b = own_broker("imq.log.file.rolloverbytes=600")
    logdir = b.varhome / "instances" / b.instance / "log"
    wait_for(lambda: (logdir / "log_1.txt").exists(), 30, "log_1.txt")
    b.stop()
    for p in logdir.glob("log*.txt"):
        assert p.stat().st_size <= 600 + 400, p  # one line may overshoot the limit


# -- the database log table ---------------------------------------------------------------


def insert_records(db: Path, days_old: float, count: int, tag: str) -> None:
    import sqlite3

    when = (datetime.now(UTC) - timedelta(days=days_old)).strftime("%Y-%m-%d %H:%M:%S.%f")
    con = sqlite3.connect(db, timeout=20)
    with con:
        con.executemany(
            "INSERT INTO broker_logrecord (timestamp, level, logger, message, broker_instance)"
            " VALUES (?, 'WARNING', 'test', ?, 'imqbroker')",
            [(when, f"{tag} {i} ünïcode") for i in range(count)],
        )
    con.close()


def archived_ids(folder: Path) -> list[int]:
    return [
        int(rec["id"])
        for p in folder.iterdir()
        if ARCHIVE_RE.match(p.name)
        for rec in read_archive(p)
    ]


def test_log_table_rolls_over_and_survives_a_killed_worker(redis_url, tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    archive = tmp_path / "archives"
    env = env_for(f"sqlite:///{db}", redis_url, LOG_ARCHIVE_DIR=str(archive))
    fresh_sqlite(db, env)
    insert_records(db, 10, 300, "old")
    insert_records(db, 1, 50, "recent")
    all_ids = {r[0] for r in query(db, "SELECT id FROM broker_logrecord")}
    assert len(all_ids) == 350
    run_now = "from portal.jobs.actions import run_now; run_now('log-table-rollover')"

    # The first worker stops for a minute between the archive's rename and the delete:
    # it is killed there.
    worker = CeleryProc("worker", {**env, PAUSE_ENV: "60"}, tmp_path / "worker1.log")
    try:
        worker.wait_output("ready")
        manage(env, code=run_now)
        wait_for(lambda: [p for p in archive.iterdir() if ARCHIVE_RE.match(p.name)])
        wait_for(lambda: query(db, "SELECT archive FROM jobs_logrolloverrun WHERE archive != ''"))
    finally:
        worker.kill()
    assert {r[0] for r in query(db, "SELECT id FROM broker_logrecord")} == all_ids
    assert len(archived_ids(archive)) == 300
    assert query(db, "SELECT status FROM jobs_logrolloverrun") == [("running",)]

    insert_records(db, 9, 20, "older, after the kill")
    all_ids |= {r[0] for r in query(db, "SELECT id FROM broker_logrecord")}
    worker = CeleryProc("worker", env, tmp_path / "worker2.log")
    try:
        worker.wait_output("ready")
        manage(env, code=run_now)
        wait_for(lambda: query(db, "SELECT id FROM jobs_logrolloverrun WHERE status = 'ok'"))
    finally:
        worker.stop()

    in_table = [r[0] for r in query(db, "SELECT id FROM broker_logrecord")]
    in_archives = archived_ids(archive)
    assert len(in_archives) == len(set(in_archives)), "a record archived twice"
    assert sorted(in_table + in_archives) == sorted(all_ids), "a record lost or duplicated"
    assert len(in_table) == 50  # the recent ones stay
    assert len(in_archives) == 320
    statuses = sorted(r[0] for r in query(db, "SELECT status FROM jobs_logrolloverrun"))
    assert statuses == ["failed", "ok"]
    messages = [rec["message"] for p in archive.iterdir() if ARCHIVE_RE.match(p.name)
                for rec in read_archive(p)]  # fmt: skip
    assert "old 0 ünïcode" in messages and "older, after the kill 19 ünïcode" in messages
    assert not list(archive.glob(".*.tmp"))
