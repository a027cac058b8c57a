"""The rollup job: raw samples (broker/rawmetrics.py) to the Rollup table, on Spark.

:func:`run_rollup` is what ``manage.py rollup`` and the Celery task
``portal.pipeline.tasks.rollup`` both call.  For a window [since, until) it

1. lists the raw store's hour partitions it needs: the window's hours, widened to whole
   days, since a day bucket is computed from all of its day's samples;
2. computes, in one Spark pass, the minute and hour buckets of the window's hours and the
   day buckets of its days, per broker, service and destination (see :func:`_aggregate`);
   the results go to a local temporary Parquet file, not yet to the database;
3. only then replaces those buckets in the Rollup table: one transaction deletes them and
   inserts the new ones, so re-running a window is idempotent and late samples (new files
   in old partitions) are folded in.

Every run is a PipelineRun row (duration, rows in/out, status, error).  Any failure --
Spark not starting, a corrupted file, the store missing, the database -- marks the run
failed with the error, logs it, and changes no rollup.  An hour whose partition is gone
while its rollups exist fails the run too: replacing would lose them.

Buckets are in UTC.  The raw store URL and the Spark master come from settings
(``METRICS_RAW_URL``, ``SPARK_MASTER``); any Spark-readable URL works for the store.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from broker.commandlines import java_problem

log = logging.getLogger("portal.pipeline")

__all__ = ["RollupError", "Window", "run_rollup", "spark_session", "window_for"]

# Progress callback: (stage, done, total) -- the management command draws a bar of it.
Progress = Callable[[str, int, int], None]

OUT_COLUMNS = (
    "broker",
    "destination",
    "dest_type",
    "granularity",
    "bucket_start",
    "samples",
    "depth_min",
    "depth_avg",
    "depth_max",
    "bytes_max",
    "msgs_in",
    "msgs_out",
    "bytes_in",
    "bytes_out",
    "rate_in_avg",
    "rate_in_max",
    "rate_out_avg",
    "rate_out_max",
    "producers_max",
    "consumers_max",
    "connections_max",
    "memory_state_peak",
    "memory_bytes_max",
    "latency_p50",
    "latency_p95",
    "latency_max",
)
INSERT_BATCH = 5000


class RollupError(Exception):
    """The job cannot (or must not) replace the window's rollups."""


class Window:
    """A run's window, and the bucket ranges it replaces and reads."""

    def __init__(self, since: datetime, until: datetime) -> None:
        since, until = _utc(since), _utc(until)
        if until <= since:
            raise ValueError(
                f"until ({until.isoformat()}) must be after since ({since.isoformat()})"
            )
        self.since, self.until = since, until
        # Minute and hour buckets of the window's hours; day buckets of its days.
        self.hour_start = since.replace(minute=0, second=0, microsecond=0)
        self.hour_end = _ceil(until, timedelta(hours=1))
        self.day_start = since.replace(hour=0, minute=0, second=0, microsecond=0)
        self.day_end = _ceil(until, timedelta(days=1))

    def read_hours(self, now: datetime) -> list[datetime]:
        """The hour partitions the window needs (not past ``now``'s hour)."""
        last = min(self.day_end, _ceil(now, timedelta(hours=1)))
        hours, h = [], self.day_start
        while h < last:
            hours.append(h)
            h += timedelta(hours=1)
        return hours


def _utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def _ceil(ts: datetime, step: timedelta) -> datetime:
    base = datetime(2000, 1, 1, tzinfo=UTC)
    n = -((base - ts) // step)
    return base + n * step


def window_for(now: datetime | None = None, hours_back: int = 2) -> tuple[datetime, datetime]:
    """The beat task's window: from ``hours_back`` hours before the last hour boundary to
    now, so samples that arrive late (the brokers flush every few minutes) are folded in."""
    now = _utc(now or datetime.now(UTC))
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours_back)
    return start, now


def spark_session(master: str | None = None, app_name: str = "imq-rollup"):
    """A SparkSession for the job: UTC, no UI, few shuffle partitions in local mode."""
    from django.conf import settings
    from pyspark.sql import SparkSession

    master = master or getattr(settings, "SPARK_MASTER", "") or "local[*]"
    local = master.startswith("local")
    problem = java_problem()
    if problem is not None:
        # Else PySpark fails with "Java gateway process exited", which says nothing.
        raise RuntimeError(problem)
    shuffle = os.environ.get("SPARK_SHUFFLE_PARTITIONS") or ("4" if local else "64")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", shuffle)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if os.environ.get("SPARK_DRIVER_MEMORY"):
        builder = builder.config("spark.driver.memory", os.environ["SPARK_DRIVER_MEMORY"])
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _raw_schema():
    from pyspark.sql import types as T

    spark_types = {
        "string": T.StringType(),
        "timestamp": T.TimestampType(),
        "float64": T.DoubleType(),
        "int64": T.LongType(),
        "int32": T.IntegerType(),
    }
    from broker.rawmetrics import COLUMNS

    return T.StructType([T.StructField(n, spark_types[t], True) for n, t in COLUMNS])


def _store_root(url: str) -> str:
    return url if "://" in url else os.path.abspath(url)


def _list_partitions(spark, url: str, hours: list[datetime]) -> dict[datetime, str]:
    """The existing partition directories among ``hours`` (through Hadoop's FileSystem,
    so any Spark-readable URL works)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    root = _store_root(url).rstrip("/")
    root_path = jvm.org.apache.hadoop.fs.Path(root)
    fs = root_path.getFileSystem(conf)
    if not fs.exists(root_path):
        raise RollupError(f"raw store {url} does not exist (no broker has written samples?)")
    found: dict[datetime, str] = {}
    for day in sorted({h.date() for h in hours}):
        day_path = jvm.org.apache.hadoop.fs.Path(f"{root}/date={day:%Y-%m-%d}")
        if not fs.exists(day_path):
            continue
        for status in fs.listStatus(day_path):
            name = status.getPath().getName()
            if status.isDirectory() and name.startswith("hour="):
                try:
                    hour = int(name[5:])
                except ValueError:
                    continue
                found[datetime(day.year, day.month, day.day, hour, tzinfo=UTC)] = (
                    f"{root}/date={day:%Y-%m-%d}/{name}"
                )
    return {h: found[h] for h in hours if h in found}


def _aggregate(spark, paths: list[str], window: Window):
    """Minute, hour and day buckets in one pass over the raw rows: each row is counted in
    its minute and hour (inside the window's hours) and its day, then one grouping."""
    from pyspark.sql import functions as F

    raw = spark.read.schema(_raw_schema()).parquet(*paths)
    raw = raw.where((F.col("ts") >= window.day_start) & (F.col("ts") < window.day_end))
    in_hours = (F.col("ts") >= window.hour_start) & (F.col("ts") < window.hour_end)
    buckets = F.array(
        *[
            F.struct(F.lit(g).alias("granularity"), F.date_trunc(g, "ts").alias("bucket_start"))
            for g in ("minute", "hour", "day")
        ]
    )
    rows = raw.withColumn("b", F.explode(buckets)).where(
        (F.col("b.granularity") == "day") | in_hours
    )
    latency = F.percentile_approx("latency_ms", F.array(F.lit(0.5), F.lit(0.95)), 10000)
    grouped = rows.groupBy(
        "broker",
        F.col("name").alias("destination"),
        "dest_type",
        F.col("b.granularity").alias("granularity"),
        F.col("b.bucket_start").alias("bucket_start"),
    ).agg(
        F.count(F.lit(1)).alias("samples"),
        F.min("depth").alias("depth_min"),
        F.avg("depth").alias("depth_avg"),
        F.max("depth").alias("depth_max"),
        F.max("bytes").alias("bytes_max"),
        F.sum("msgs_in").alias("msgs_in"),
        F.sum("msgs_out").alias("msgs_out"),
        F.sum("bytes_in").alias("bytes_in"),
        F.sum("bytes_out").alias("bytes_out"),
        F.avg("rate_in").alias("rate_in_avg"),
        F.max("rate_in").alias("rate_in_max"),
        F.avg("rate_out").alias("rate_out_avg"),
        F.max("rate_out").alias("rate_out_max"),
        F.max("producers").alias("producers_max"),
        F.max("consumers").alias("consumers_max"),
        F.max("connections").alias("connections_max"),
        F.max("memory_state").alias("memory_state_peak"),
        F.max("memory_bytes").alias("memory_bytes_max"),
        latency.alias("latency"),
        F.max("latency_ms").alias("latency_max"),
    )
    return grouped.select(
        *[
            F.col("latency")[0].alias(c)
            if c == "latency_p50"
            else F.col("latency")[1].alias(c)
            if c == "latency_p95"
            else F.col(c)
            for c in OUT_COLUMNS
        ]
    )


def _materialize(spark, result, workdir: Path, local: bool) -> Path:
    """Compute the result into a local Parquet directory the driver reads back."""
    out = workdir / "result"
    if local:
        # Executors share the driver's disk: let Spark write it (no rows through Python).
        result.coalesce(4).write.mode("overwrite").parquet(str(out))
        return out
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True)
    writer = None
    batch: list[tuple] = []

    def flush() -> None:
        nonlocal writer
        table = pa.Table.from_pylist([dict(zip(OUT_COLUMNS, r, strict=True)) for r in batch])
        if writer is None:
            writer = pq.ParquetWriter(str(out / "part-0.parquet"), table.schema)
        writer.write_table(table.cast(writer.schema))
        batch.clear()

    for row in result.toLocalIterator(prefetchPartitions=True):
        batch.append(tuple(row))
        if len(batch) >= 50_000:
            flush()
    if batch:
        flush()
    if writer is not None:
        writer.close()
    return out


def _check_missing(window: Window, hours: list[datetime], found: dict[datetime, str]) -> None:
    """Fail when an hour's partition is gone but its rollups exist (replacing loses them)."""
    from .models import Rollup

    missing = [h for h in hours if h not in found]
    if not missing:
        return
    lost = sorted(
        set(
            Rollup.objects.filter(granularity="hour", bucket_start__in=missing).values_list(
                "bucket_start", flat=True
            )
        )
    )
    if lost:
        names = ", ".join(f"date={h:%Y-%m-%d}/hour={h:%H}" for h in lost[:10])
        more = f" and {len(lost) - 10} more" if len(lost) > 10 else ""
        raise RollupError(
            f"raw partitions missing for hours that have rollups: {names}{more} "
            "(removed or unreadable); the window was not replaced"
        )


def _replace(window: Window, result_dir: Path, progress: Progress) -> tuple[int, int]:
    """Delete the window's buckets and insert the new ones, in one transaction; returns
    (rows inserted, raw rows they summarize)."""
    import pyarrow.dataset as ds
    from django.db import connection, transaction

    from .models import Rollup

    dataset = ds.dataset(str(result_dir), format="parquet")
    total = dataset.count_rows()
    table = Rollup._meta.db_table
    quote = connection.ops.quote_name
    columns = ", ".join(quote(c) for c in OUT_COLUMNS)
    marks = ", ".join(["%s"] * len(OUT_COLUMNS))
    sql = f"INSERT INTO {quote(table)} ({columns}) VALUES ({marks})"
    done = raw_rows = 0
    progress("replace", 0, total)
    with transaction.atomic():
        Rollup.objects.filter(
            granularity__in=("minute", "hour"),
            bucket_start__gte=window.hour_start,
            bucket_start__lt=window.hour_end,
        ).delete()
        Rollup.objects.filter(
            granularity="day", bucket_start__gte=window.day_start, bucket_start__lt=window.day_end
        ).delete()
        with connection.cursor() as cursor:
            for batch in dataset.to_batches(columns=list(OUT_COLUMNS), batch_size=INSERT_BATCH):
                data = batch.to_pydict()
                for i, g in enumerate(data["granularity"]):
                    if g == "day":
                        raw_rows += data["samples"][i]
                stamps = data["bucket_start"]
                # As the ORM stores them (SQLite: naive UTC text), so lookups match.
                adapt = connection.ops.adapt_datetimefield_value
                data["bucket_start"] = [adapt(_utc(t)) for t in stamps]
                rows = list(zip(*(data[c] for c in OUT_COLUMNS), strict=True))
                cursor.executemany(sql, rows)
                done += len(rows)
                progress("replace", done, total)
    return done, raw_rows


def run_rollup(
    since: datetime,
    until: datetime,
    *,
    trigger: str = "manual",
    raw_url: str | None = None,
    master: str | None = None,
    spark: Any = None,
    progress: Progress | None = None,
    now: datetime | None = None,
):
    """Roll the window [since, until) up (see the module docstring); returns its
    PipelineRun (status ``ok`` or ``failed``).  ``spark``: an existing session to use
    (kept open); otherwise one is started for the run and stopped after it."""
    from django.conf import settings
    from django.utils import timezone

    from .models import PipelineRun

    progress = progress or (lambda stage, done, total: None)
    window = Window(since, until)
    raw_url = raw_url or settings.METRICS_RAW_URL
    try:
        run = PipelineRun.objects.create(
            started=timezone.now(),
            status="running",
            since=window.since,
            until=window.until,
            trigger=trigger,
        )
    except Exception as exc:
        # No database: the run cannot even be recorded, and nothing is rolled up.
        log.error("rollup %s..%s: cannot record the run (%s)", since, until, exc)
        raise
    t0 = time.monotonic()
    own_session = spark is None
    workdir = Path(tempfile.mkdtemp(prefix="imq-rollup-"))
    try:
        progress("spark", 0, 1)
        if own_session:
            spark = spark_session(master)
        progress("spark", 1, 1)
        hours = window.read_hours(_utc(now or datetime.now(UTC)))
        progress("partitions", 0, len(hours))
        found = _list_partitions(spark, raw_url, hours)
        progress("partitions", len(hours), len(hours))
        _check_missing(window, hours, found)
        if found:
            progress("compute", 0, 1)
            result = _aggregate(spark, list(found.values()), window)
            local = spark.sparkContext.master.startswith("local")
            result_dir = _materialize(spark, result, workdir, local)
            progress("compute", 1, 1)
        else:
            result_dir = None
        if result_dir is None:
            rows_out, rows_in = _replace_empty(window, progress)
        else:
            rows_out, rows_in = _replace(window, result_dir, progress)
        run.status = "ok"
        run.rows_in, run.rows_out = rows_in, rows_out
        log.info(
            "rollup %s..%s: %d samples -> %d rollups in %.1f s",
            window.since.isoformat(),
            window.until.isoformat(),
            rows_in,
            rows_out,
            time.monotonic() - t0,
        )
    except Exception as exc:
        run.status = "failed"
        run.error = f"{type(exc).__name__}: {_first_lines(exc)}\n\n{traceback.format_exc()}"
        log.error(
            "rollup %s..%s failed: %s", window.since.isoformat(), window.until.isoformat(), exc
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if own_session and spark is not None:
            try:
                spark.stop()
            except Exception:
                pass
    run.finished = timezone.now()
    try:
        run.save()
    except Exception as exc:
        log.error("rollup: cannot record the run (%s)", exc)
    return run


def _replace_empty(window: Window, progress: Progress) -> tuple[int, int]:
    # No partition in the window and (checked) no rollups to lose: nothing to replace.
    progress("replace", 0, 0)
    return 0, 0


def _first_lines(exc: BaseException, limit: int = 2000) -> str:
    text = str(exc).strip()
    return text if len(text) <= limit else text[:limit] + " ..."
