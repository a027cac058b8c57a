"""The Spark rollup job (portal/pipeline/rollup.py) on generated raw samples, with the real
PySpark in local mode (one session for the module): the aggregates equal a plain-Python
computation of the same samples; re-running is idempotent; late samples are folded in;
a corrupted or missing partition fails the run and keeps the rollups."""

from __future__ import annotations

import math
import shutil
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from portal.pipeline.rollup import OUT_COLUMNS, run_rollup, spark_session
from portal.pipeline.synthetic import generate_rows, write_samples

DAY1 = datetime(2026, 3, 9, tzinfo=UTC)
SINCE = DAY1 + timedelta(hours=22)  # the window crosses midnight
UNTIL = DAY1 + timedelta(hours=26)
NOW = DAY1 + timedelta(days=3)
BROKERS = ("alpha", "beta")


@pytest.fixture(scope="module")
def spark():
    """One driver for the module, with one task thread and one shuffle partition: the
    samples are a few thousand rows, and more threads or partitions only add tasks for the
    two cores the suite shares (the job's results do not depend on either)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARK_SHUFFLE_PARTITIONS", "1")
        session = spark_session("local[1]")
    yield session
    session.stop()


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, list[dict]]:
    """A raw store with samples from 20:00 on day 1 to 03:00 on day 2, every minute."""
    rows = generate_rows(
        BROKERS, 4, DAY1 + timedelta(hours=20), DAY1 + timedelta(hours=27), timedelta(minutes=1)
    )
    url = str(tmp_path / "raw")
    write_samples(url, rows)
    return url, rows


def _trunc(ts: datetime, granularity: str) -> datetime:
    if granularity == "minute":
        return ts.replace(second=0, microsecond=0)
    if granularity == "hour":
        return ts.replace(minute=0, second=0, microsecond=0)
    return ts.replace(hour=0, minute=0, second=0, microsecond=0)


def _percentile(values: list[float], p: float) -> float:
    # Spark's percentile: the smallest value with at least p of the values at or below it.
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def expected(rows: list[dict], since: datetime, until: datetime) -> dict[tuple, dict]:
    """The rollups of [since, until), computed in plain Python."""
    hour_start = _trunc(since, "hour")
    hour_end = _trunc(until - timedelta(microseconds=1), "hour") + timedelta(hours=1)
    day_start = _trunc(since, "day")
    day_end = _trunc(until - timedelta(microseconds=1), "day") + timedelta(days=1)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        for g in ("minute", "hour", "day"):
            inside = (
                day_start <= r["ts"] < day_end if g == "day" else hour_start <= r["ts"] < hour_end
            )
            if inside:
                groups[(r["broker"], r["name"], r["dest_type"], g, _trunc(r["ts"], g))].append(r)

    def agg(values, fn):
        present = [v for v in values if v is not None]
        return fn(present) if present else None

    out = {}
    for key, rs in groups.items():
        col = {c: [r[c] for r in rs] for c in rs[0]}
        lat = [v for v in col["latency_ms"] if v is not None]
        out[key] = {
            "samples": len(rs),
            "depth_min": agg(col["depth"], min),
            "depth_avg": agg(col["depth"], lambda v: sum(v) / len(v)),
            "depth_max": agg(col["depth"], max),
            "bytes_max": agg(col["bytes"], max),
            "msgs_in": sum(col["msgs_in"]),
            "msgs_out": sum(col["msgs_out"]),
            "bytes_in": sum(col["bytes_in"]),
            "bytes_out": sum(col["bytes_out"]),
            "rate_in_avg": sum(col["rate_in"]) / len(rs),
            "rate_in_max": max(col["rate_in"]),
            "rate_out_avg": sum(col["rate_out"]) / len(rs),
            "rate_out_max": max(col["rate_out"]),
            "producers_max": agg(col["producers"], max),
            "consumers_max": agg(col["consumers"], max),
            "connections_max": agg(col["connections"], max),
            "memory_state_peak": agg(col["memory_state"], max),
            "memory_bytes_max": agg(col["memory_bytes"], max),
            "latency_p50": _percentile(lat, 0.5) if lat else None,
            "latency_p95": _percentile(lat, 0.95) if lat else None,
            "latency_max": max(lat) if lat else None,
        }
    return out


def stored() -> dict[tuple, dict]:
    from portal.pipeline.models import Rollup

    out = {}
    for r in Rollup.objects.values(*OUT_COLUMNS):
        key = (r["broker"], r["destination"], r["dest_type"], r["granularity"], r["bucket_start"])
        assert key not in out
        out[key] = {c: r[c] for c in OUT_COLUMNS[5:]}
    return out


def assert_same(got: dict[tuple, dict], want: dict[tuple, dict]) -> None:
    assert set(got) == set(want)
    for key, values in want.items():
        for name, value in values.items():
            actual = got[key][name]
            if isinstance(value, float):
                assert actual == pytest.approx(value, rel=1e-9), (key, name)
            else:
                assert actual == value, (key, name)


@pytest.mark.django_db
def test_rollups_equal_a_plain_python_computation(spark, store):
    url, rows = store
    stages: list[str] = []
    run = run_rollup(
        SINCE, UNTIL, raw_url=url, spark=spark, now=NOW, progress=lambda s, d, t: stages.append(s)
    )
    assert run.status == "ok", run.error
    want = expected(rows, SINCE, UNTIL)
    got = stored()
    assert_same(got, want)
    # Every kind and granularity is there, latencies where samples have them.
    kinds = {(k[2], k[3]) for k in got}
    for g in ("minute", "hour", "day"):
        assert {("", g), ("service", g), ("queue", g), ("topic", g)} <= kinds
    assert any(v["latency_p95"] is not None for v in got.values())
    assert all(v["latency_p50"] is None for k, v in got.items() if k[2] == "")
    # The day buckets hold whole days, the minute ones only the window's hours.
    assert {k[4] for k in got if k[3] == "day"} == {DAY1, DAY1 + timedelta(days=1)}
    minutes = [k[4] for k in got if k[3] == "minute"]
    assert min(minutes) == SINCE and max(minutes) == UNTIL - timedelta(minutes=1)
    day_samples = sum(v["samples"] for k, v in got.items() if k[3] == "day")
    assert run.rows_in == day_samples == len(rows)
    assert run.rows_out == len(got)
    assert run.finished is not None and run.trigger == "manual"
    assert stages[0] == "spark" and "compute" in stages and stages[-1] == "replace"


@pytest.mark.django_db
def test_rerun_is_idempotent_and_late_samples_are_folded_in(spark, store):
    url, rows = store
    assert run_rollup(SINCE, UNTIL, raw_url=url, spark=spark, now=NOW).status == "ok"
    first = stored()
    assert run_rollup(SINCE, UNTIL, raw_url=url, spark=spark, now=NOW).status == "ok"
    assert stored() == first

    # Late samples: a broker's flush arrives after the run, as a new file in old hours.
    late = generate_rows(
        ("alpha", "gamma"),
        6,
        DAY1 + timedelta(hours=23, minutes=30),
        DAY1 + timedelta(hours=24, minutes=30),
        timedelta(minutes=5),
        seed=7,
    )
    write_samples(url, late, prefix="late")
    run = run_rollup(SINCE, UNTIL, raw_url=url, spark=spark, now=NOW)
    assert run.status == "ok", run.error
    after = stored()
    assert_same(after, expected(rows + late, SINCE, UNTIL))
    assert len(after) > len(first)
    assert ("gamma", "d5", "topic", "hour", DAY1 + timedelta(hours=23)) in after

    # A later, narrower window replaces only its own minute/hour buckets.
    narrow_since = DAY1 + timedelta(hours=25)
    run = run_rollup(narrow_since, UNTIL, raw_url=url, spark=spark, now=NOW)
    assert run.status == "ok", run.error
    assert_same(stored(), after)


@pytest.mark.django_db
def test_corrupted_partition_fails_the_run_and_keeps_the_rollups(spark, store):
    from portal.pipeline.models import PipelineRun

    url, _ = store
    assert run_rollup(SINCE, UNTIL, raw_url=url, spark=spark, now=NOW).status == "ok"
    before = stored()
    part = Path(url) / "date=2026-03-09" / "hour=23"
    (part / "broken.parquet").write_bytes(b"PAR1 this is not a parquet file")
    run = run_rollup(SINCE, UNTIL, raw_url=url, spark=spark, now=NOW)
    assert run.status == "failed"
    assert "broken.parquet" in run.error
    assert run.finished is not None
    assert PipelineRun.objects.get(pk=run.pk).status == "failed"
    assert stored() == before


@pytest.mark.django_db
def test_missing_partition_fails_the_run_and_keeps_the_rollups(spark, store, tmp_path):
    url, _ = store
    assert run_rollup(SINCE, UNTIL, raw_url=url, spark=spark, now=NOW).status == "ok"
    before = stored()
    part = Path(url) / "date=2026-03-10" / "hour=01"
    shutil.move(part, tmp_path / "moved-away")
    run = run_rollup(SINCE, UNTIL, raw_url=url, spark=spark, now=NOW)
    assert run.status == "failed"
    assert "date=2026-03-10/hour=01" in run.error and "missing" in run.error
    assert stored() == before

    # The whole store gone: failed too, nothing lost.
    run = run_rollup(SINCE, UNTIL, raw_url=str(tmp_path / "nowhere"), spark=spark, now=NOW)
    assert run.status == "failed" and "does not exist" in run.error
    assert stored() == before


@pytest.mark.django_db
def test_hours_without_samples_and_without_rollups_are_no_error(spark, store):
    url, rows = store
    # Two days later: no partitions, no rollups -- nothing to do, nothing to lose.
    since = DAY1 + timedelta(days=2, hours=5)
    run = run_rollup(since, since + timedelta(hours=2), raw_url=url, spark=spark, now=NOW)
    assert run.status == "ok", run.error
    assert run.rows_in == 0 and run.rows_out == 0
