"""The raw metrics store's format, shared by the broker's writer
(broker/server/rawstore.py) and the portal's pipeline (portal/pipeline/): the columns and
their pyarrow schema, the date/hour partition layout, and writing Parquet files into the
store.  No import of the broker's server or of Django; pyarrow is imported where used.

Layout under the store URL (``METRICS_RAW_URL``; a local directory by default, or any
URL pyarrow's filesystems know, e.g. ``s3://bucket/metrics-raw``)::

    date=2026-01-01/hour=07/<prefix>-<unix ms>-<seq>.parquet

A file is written under a name starting with ``.`` (which Spark and pyarrow skip) and
renamed when complete, so a reader never sees half a file.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import defaultdict
from datetime import UTC, datetime

__all__ = [
    "COLUMNS",
    "filesystem",
    "partition_path",
    "partitions",
    "schema",
    "write_rows",
    "write_table",
]


# (name, arrow type name); the order is the files' column order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "string"),
    ("broker", "string"),
    ("ts", "timestamp"),
    ("interval", "float64"),
    ("name", "string"),
    ("dest_type", "string"),
    ("msgs_in", "int64"),
    ("msgs_out", "int64"),
    ("bytes_in", "int64"),
    ("bytes_out", "int64"),
    ("rate_in", "float64"),
    ("rate_out", "float64"),
    ("depth", "int64"),
    ("bytes", "int64"),
    ("producers", "int32"),
    ("consumers", "int32"),
    ("connections", "int32"),
    ("memory_state", "int32"),
    ("memory_bytes", "int64"),
    ("latency_ms", "float64"),
)


def schema():
    """The raw files' pyarrow schema (timestamps in ms, UTC)."""
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "timestamp": pa.timestamp("ms", tz="UTC"),
        "float64": pa.float64(),
        "int64": pa.int64(),
        "int32": pa.int32(),
    }
    return pa.schema([(name, types[t]) for name, t in COLUMNS])


def partition_path(ts: datetime) -> str:
    """The partition directory (relative to the store) a sample taken at ``ts`` goes to."""
    ts = ts.astimezone(UTC)
    return f"date={ts:%Y-%m-%d}/hour={ts:%H}"


def partitions(stamps: list[datetime]) -> list[str]:
    """The partition of each time stamp (:func:`partition_path`, memoised by hour)."""
    seen: dict[tuple[int, int, int, int], str] = {}
    out = []
    for ts in stamps:
        key = (ts.year, ts.month, ts.day, ts.hour)
        part = seen.get(key)
        if part is None:
            part = seen[key] = partition_path(ts)
        out.append(part)
    return out


def filesystem(url: str):
    """(pyarrow filesystem, root path) of a store URL or local directory."""
    from pyarrow import fs

    if "://" in url:
        # Spark's s3a:// is pyarrow's s3://.
        return fs.FileSystem.from_uri("s3://" + url[6:] if url.startswith("s3a://") else url)
    return fs.LocalFileSystem(), os.path.abspath(url)


_seq = itertools.count(1)


def write_table(url: str, part: str, table, prefix: str) -> str:
    """Write one file of rows (all of partition ``part``) into the store; returns its path.
    Locally under a hidden temporary name, renamed when complete."""
    import pyarrow.parquet as pq
    from pyarrow import fs

    filesystem_, root = filesystem(url)
    directory = f"{root.rstrip('/')}/{part}"
    filesystem_.create_dir(directory, recursive=True)
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in prefix)
    name = f"{safe}-{int(time.time() * 1000)}-{next(_seq)}.parquet"
    final = f"{directory}/{name}"
    if isinstance(filesystem_, fs.LocalFileSystem):
        temp = f"{directory}/.{name}.tmp"
        pq.write_table(table, temp, filesystem=filesystem_, compression="zstd")
        filesystem_.move(temp, final)
    else:
        # Object stores make an object visible only once it is complete.
        pq.write_table(table, final, filesystem=filesystem_, compression="zstd")
    return final


def write_rows(
    url: str, cols: dict[str, list], prefix: str, written: set[str] | None = None
) -> int:
    """Write rows given as columns (:data:`COLUMNS`, ``ts`` aware datetimes) into the
    store, one file per hour partition; adds each partition done to ``written``.
    Returns the number of files written."""
    import pyarrow as pa

    table = pa.table(cols, schema=schema())
    groups: dict[str, list[int]] = defaultdict(list)
    for i, part in enumerate(partitions(cols["ts"])):
        groups[part].append(i)
    for part, rows in sorted(groups.items()):
        piece = table if len(rows) == len(table) else table.take(rows)
        write_table(url, part, piece, prefix)
        if written is not None:
            written.add(part)
    return len(groups)
