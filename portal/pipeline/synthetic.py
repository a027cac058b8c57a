"""Generated raw samples (the tests' and bench/rollup.py's input), in the raw store's
columns (broker/rawmetrics.py)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from broker.rawmetrics import COLUMNS, schema, write_rows, write_table

__all__ = ["as_columns", "generate_rows", "write_bench_store", "write_samples"]


def generate_rows(
    brokers: Iterable[str],
    destinations: int,
    since: datetime,
    until: datetime,
    step: timedelta,
    seed: int = 1,
    latency: bool = True,
) -> list[dict]:
    """Rows of every kind (broker, a service, ``destinations`` queues and topics) for each
    broker every ``step`` (with a few seconds of jitter) in [since, until)."""
    rnd = random.Random(seed)
    rows: list[dict] = []
    for broker in brokers:
        t = since
        while t < until:
            ts = min(t + timedelta(seconds=rnd.randint(0, 5)), until - timedelta(seconds=1))
            interval = step.total_seconds()
            rows.append(_row(rnd, "broker", broker, ts, interval, "", "", latency))
            rows.append(_row(rnd, "service", broker, ts, interval, "jms", "service", latency))
            for d in range(destinations):
                kind = "queue" if d % 2 == 0 else "topic"
                rows.append(_row(rnd, "destination", broker, ts, interval, f"d{d}", kind, latency))
            t += step
    return rows


def _row(rnd, kind, broker, ts, interval, name, dest_type, latency) -> dict:
    msgs_in, msgs_out = rnd.randint(0, 500), rnd.randint(0, 500)
    row = {c: None for c, _ in COLUMNS}
    row.update(
        kind=kind,
        broker=broker,
        ts=ts.astimezone(UTC),
        interval=interval,
        name=name,
        dest_type=dest_type,
        msgs_in=msgs_in,
        msgs_out=msgs_out,
        bytes_in=msgs_in * rnd.randint(100, 2000),
        bytes_out=msgs_out * rnd.randint(100, 2000),
        rate_in=round(msgs_in / interval, 3),
        rate_out=round(msgs_out / interval, 3),
    )
    if kind != "service":
        row.update(depth=rnd.randint(0, 10_000), bytes=rnd.randint(0, 10_000_000))
    if kind == "destination":
        row.update(producers=rnd.randint(0, 5), consumers=rnd.randint(0, 5))
        if latency and rnd.random() < 0.8:
            row["latency_ms"] = round(rnd.uniform(0.1, 250.0), 2)
    else:
        row["connections"] = rnd.randint(0, 50)
    if kind == "broker":
        row.update(memory_state=rnd.choice((0, 0, 0, 1, 2, 3)), memory_bytes=rnd.randint(0, 10**9))
    return row


def as_columns(rows: list[dict]) -> dict[str, list]:
    """Rows to the column lists :func:`write_rows` takes."""
    return {c: [r[c] for r in rows] for c, _ in COLUMNS}


def write_bench_store(
    url: str, destinations: int, since: datetime, hours: int, per_hour: int
) -> int:
    """``destinations`` destinations of one broker sampled ``per_hour`` times an hour for
    ``hours`` hours from ``since``, one file per hour (built with pyarrow's vectorized
    functions: 10 million rows in about a minute).  Returns the rows written."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = destinations * per_hour
    idx = pa.array(range(n), pa.int64())
    slot = pc.divide(idx, destinations)  # integer division
    dest = pc.subtract(idx, pc.multiply(slot, destinations))
    step_ms = 3_600_000 // per_hour
    names = pc.binary_join_element_wise("d", pc.cast(dest, pa.string()), "")
    is_queue = pc.equal(pc.bit_wise_and(dest, 1), 0)
    dest_type = pc.if_else(is_queue, "queue", "topic")
    total = 0
    for h in range(hours):
        start = since + timedelta(hours=h)
        base_ms = int(start.timestamp() * 1000)
        ts = pc.cast(pc.add(pc.multiply(slot, step_ms), base_ms), pa.timestamp("ms", tz="UTC"))
        mix = pc.add(pc.multiply(dest, 7919), pc.multiply(slot, 104729))
        mix = pc.add(mix, h * 15485863)
        msgs_in = pc.bit_wise_and(mix, 255)
        msgs_out = pc.bit_wise_and(pc.shift_right(mix, 3), 255)
        depth = pc.bit_wise_and(pc.shift_right(mix, 5), 4095)
        cols = {
            "kind": pa.array(["destination"] * n, pa.string()),
            "broker": pa.array(["benchbroker"] * n, pa.string()),
            "ts": ts,
            "interval": pa.array([step_ms / 1000] * n, pa.float64()),
            "name": names,
            "dest_type": dest_type,
            "msgs_in": msgs_in,
            "msgs_out": msgs_out,
            "bytes_in": pc.multiply(msgs_in, 1024),
            "bytes_out": pc.multiply(msgs_out, 1024),
            "rate_in": pc.divide(pc.cast(msgs_in, pa.float64()), step_ms / 1000),
            "rate_out": pc.divide(pc.cast(msgs_out, pa.float64()), step_ms / 1000),
            "depth": depth,
            "bytes": pc.multiply(depth, 1024),
            "producers": pc.cast(pc.bit_wise_and(mix, 3), pa.int32()),
            "consumers": pc.cast(pc.bit_wise_and(pc.shift_right(mix, 2), 3), pa.int32()),
            "connections": pa.nulls(n, pa.int32()),
            "memory_state": pa.nulls(n, pa.int32()),
            "memory_bytes": pa.nulls(n, pa.int64()),
            "latency_ms": pc.divide(pc.cast(pc.bit_wise_and(mix, 1023), pa.float64()), 4.0),
        }
        table = pa.table(cols, schema=schema())
        write_table(url, f"date={start:%Y-%m-%d}/hour={start:%H}", table, "bench")
        total += n
    return total


def write_samples(url: str, rows: list[dict], prefix: str = "gen") -> int:
    """Write generated rows into the store (one file per hour partition)."""
    return write_rows(url, as_columns(rows), prefix)
