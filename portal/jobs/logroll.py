"""The database log table rolls like the log file: records older than the retention go
to a gzip-compressed archive (JSON lines, one file per run), then leave the table.

Nothing is lost if the worker dies at any point: the archive is written to a temporary
file, fsynced and renamed into place (with its directory fsynced) before a single
transaction deletes exactly the archived records.  A kill before the rename leaves a
temporary file (removed by the next run) and every record still in the table; a kill
after it leaves an archive whose records are still in the table, which the next run
finds and deletes (the archive lists every id) instead of archiving them again.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from broker.models import LogRecord

from .models import JobStatus, LogRolloverRun

log = logging.getLogger(__name__)

ARCHIVE_RE = re.compile(r"^logrecords-(\d+)-(\d+)-(\d{8}T\d{6}Z)\.jsonl\.gz$")
# Test hook: seconds to sleep between the archive's rename and the delete (a test kills
# the worker there).
PAUSE_ENV = "IMQ_JOBS_TEST_PAUSE_AFTER_ARCHIVE"
_DELETE_CHUNK = 500


def archive_dir() -> Path:
    return Path(settings.LOG_ARCHIVE_DIR)


def archives() -> list[Path]:
    """The archive files, newest first."""
    folder = archive_dir()
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if ARCHIVE_RE.match(p.name)]
    return sorted(found, key=lambda p: archive_ids(p)[1], reverse=True)


def archive_ids(path: Path) -> tuple[int, int]:
    """The first and last record ids an archive holds (its name says them)."""
    m = ARCHIVE_RE.match(path.name)
    if m is None:
        raise ValueError(f"not a log records archive: {path.name}")
    return int(m.group(1)), int(m.group(2))


def archive_path(name: str) -> Path | None:
    """The archive called ``name`` (only names this module writes), or None."""
    if not ARCHIVE_RE.match(name):
        return None
    path = archive_dir() / name
    return path if path.is_file() else None


def read_archive(path: Path) -> Iterator[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


@contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """One rollover at a time on this machine (two workers must not archive twice)."""
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _delete_ids(ids: list[int]) -> int:
    """Delete these records in one transaction; how many were still there."""
    deleted = 0
    with transaction.atomic():
        for i in range(0, len(ids), _DELETE_CHUNK):
            deleted += LogRecord.objects.filter(id__in=ids[i : i + _DELETE_CHUNK]).delete()[0]
    return deleted


def _recover(folder: Path) -> int:
    """Finish what a killed run left: drop temporary files, and delete the records of
    archives that are still in the table.  How many records that deleted."""
    for tmp in folder.glob(".logrecords-*.tmp"):
        tmp.unlink(missing_ok=True)
    finished = 0
    for path in archives():
        first, last = archive_ids(path)
        if not LogRecord.objects.filter(id__gte=first, id__lte=last).exists():
            continue
        ids = [int(rec["id"]) for rec in read_archive(path)]
        n = _delete_ids(ids)
        if n:
            log.warning("log rollover: %d record(s) of %s were still in the table", n, path.name)
            finished += n
    LogRolloverRun.objects.filter(status=JobStatus.RUNNING).update(
        status=JobStatus.FAILED, error="interrupted (the worker stopped during the run)"
    )
    return finished


def _record(rec: LogRecord) -> dict:
    return {
        "id": rec.id,
        "timestamp": rec.timestamp.isoformat(),
        "level": rec.level,
        "logger": rec.logger,
        "broker_instance": rec.broker_instance,
        "message": rec.message,
    }


def roll_log_table(retention_days: float | None = None, batch: int = 100_000) -> LogRolloverRun:
    """Archive and delete the log records older than ``retention_days`` (default
    ``settings.LOG_DB_RETENTION_DAYS``), at most ``batch`` per run (the oldest first)."""
    days = settings.LOG_DB_RETENTION_DAYS if retention_days is None else float(retention_days)
    folder = archive_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with _exclusive(folder):
        _recover(folder)
        now = timezone.now()
        cutoff = now - timedelta(days=days)
        run = LogRolloverRun.objects.create(started=now, cutoff=cutoff)
        try:
            _roll(run, folder, cutoff, batch)
        except Exception as exc:
            log.error("log rollover failed: %s", exc)
            run.status, run.error, run.finished = JobStatus.FAILED, str(exc), timezone.now()
            run.save(update_fields=["status", "error", "finished"])
            raise
    return run


def _roll(run: LogRolloverRun, folder: Path, cutoff, batch: int) -> None:
    rows = list(LogRecord.objects.filter(timestamp__lt=cutoff).order_by("id")[:batch])
    if rows:
        first, last = rows[0].id, rows[-1].id
        stamp = run.started.strftime("%Y%m%dT%H%M%SZ")
        name = f"logrecords-{first}-{last}-{stamp}.jsonl.gz"
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        with open(tmp, "wb") as raw:
            with gzip.GzipFile(filename=name[: -len(".gz")], mode="wb", fileobj=raw) as gz:
                for rec in rows:
                    gz.write(json.dumps(_record(rec), ensure_ascii=False).encode() + b"\n")
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, folder / name)
        _fsync_dir(folder)
        run.archive, run.first_id, run.last_id = name, first, last
        run.save(update_fields=["archive", "first_id", "last_id"])
        pause = float(os.environ.get(PAUSE_ENV) or 0)
        if pause:
            time.sleep(pause)
        run.records = _delete_ids([rec.id for rec in rows])
    run.status, run.finished = JobStatus.OK, timezone.now()
    run.save(update_fields=["records", "status", "finished"])
