"""The raw metrics store: every broker's samples as Parquet, partitioned by date and hour.

Layout under the store URL (``METRICS_RAW_URL``; a local directory by default, or any
URL pyarrow's filesystems know, e.g. ``s3://bucket/metrics-raw``)::

    date=2026-01-01/hour=07/<instance>-<unix ms>-<seq>.parquet

The format (columns, schema, partitions, writing a file) is broker/rawmetrics.py's,
which the portal's pipeline shares; this module is the broker's writer.

One row per broker, per connection service and per destination, every sample interval
(``imq.metrics.sample.interval``), all with the columns of :data:`COLUMNS`.  ``kind`` says
which: ``"broker"`` (``name`` and ``dest_type`` empty), ``"service"`` (the service's name,
``dest_type`` ``"service"``) or ``"destination"`` (``dest_type`` ``"queue"``/``"topic"``).
Counts (``msgs_in`` .. ``bytes_out``) are over the interval, rates per second over it;
``depth``/``bytes`` are the messages and bytes held at the sample time.  ``latency_ms`` is
a latency-like figure where one exists (none of the broker's own samples carry one yet).

The broker side is two pieces, so that the event loop only copies integers:
:func:`collect` runs on the loop (one pass over the destinations, a tuple each) and
:class:`RawStoreWriter` (a daemon thread) turns snapshots into counts, rates and rows,
buffers them and writes one file per hour partition per flush
(``imq.metrics.raw.flush.interval``, 300 s by default, and on shutdown).  A file is
written under a name starting with ``.`` (which Spark and pyarrow skip) and renamed when
complete, so a reader never sees half a file.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from broker.core import queries
from broker.core.memory import LEVELS
from broker.core.message import BODIES
from broker.core.metrics import consumer_counts
from broker.protocol.admin_types import ADMIN_QUEUES
from broker.rawmetrics import COLUMNS, partition_path, schema, write_table
from broker.server.queuethread import STOP, QueueThread

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger("broker.rawstore")

__all__ = ["COLUMNS", "RawStoreWriter", "Snapshot", "collect", "partition_path", "schema"]


# What the loop hands over: wall time, monotonic time, the broker's figures, per-service
# (name, msgs in, msgs out, bytes in, bytes out, connections) and per-destination
# (name, is queue, depth, bytes, msgs in, msgs out, bytes in, bytes out, producers,
# consumers) tuples.
Snapshot = tuple[float, float, tuple, list[tuple], list[tuple]]


def collect(broker: Broker) -> Snapshot:
    """Copy the counters the raw rows are made of (runs on the event loop: no I/O)."""
    router = broker.router
    totals = router.totals
    services = [
        (
            s.name,
            s.metrics.messages_in,
            s.metrics.messages_out,
            s.metrics.message_bytes_in,
            s.metrics.message_bytes_out,
            len(s.connections),
        )
        for s in broker.services
    ]
    dests = [
        (
            d.name,
            True,
            d.msg_count,
            d.msg_bytes,
            d.msgs_in,
            d.msgs_out,
            d.msg_bytes_in,
            d.msg_bytes_out,
            len(d.producers),
            len(d.dq.consumers) + len(d.backups),
        )
        for d in queries.destinations(router, topics=False)
        if d.name not in ADMIN_QUEUES
    ]
    dests += [
        (
            d.name,
            False,
            d.msg_count,
            d.msg_bytes,
            d.msgs_in,
            d.msgs_out,
            d.msg_bytes_in,
            d.msg_bytes_out,
            len(d.producers),
            consumer_counts(d)[0],
        )
        for d in queries.destinations(router, queues=False)
    ]
    state = broker.memory.state
    figures = (
        totals.count,
        totals.bytes,
        len(broker.connections),
        LEVELS.index(state) if state in LEVELS else 0,
        BODIES.bytes,  # memory: the bodies in memory, not the paged-out backlog
    )
    return (time.time(), time.monotonic(), figures, services, dests)


def _delta(now: int, before: int) -> int:
    # A counter below its previous value was reset (RESET_BROKER): count from zero.
    return now - before if now >= before else now


class RawStoreWriter(QueueThread):
    """Turns snapshots into raw rows and writes them to the store, in a daemon thread.

    :meth:`submit` never blocks: with the queue full (the store is stuck) the snapshot is
    dropped and counted.  Write errors are logged once (WARNING) until a write succeeds;
    rows that could not be written are kept (up to ``max_rows``) and tried again."""

    def __init__(
        self,
        instance: str,
        url: str,
        flush_interval: float = 300.0,
        max_queue: int = 32,
        max_rows: int = 2_000_000,
    ) -> None:
        self.instance = instance
        self.url = url
        self.flush_interval = max(0.0, flush_interval)
        self.max_rows = max_rows
        self.written_rows = 0
        self.written_files = 0
        # Each sample's rows become one arrow table as they come (so a flush only
        # concatenates and writes, mostly without the GIL), kept by hour partition.
        self._pending: dict[str, list[Any]] = defaultdict(list)
        self._pending_rows = 0
        self._prev_services: dict[str, tuple] = {}
        self._prev_dests: dict[tuple[str, bool], tuple] = {}
        # The counters start from zero with the broker, when this writer is made.
        self._prev_mono = time.monotonic()
        self._failing = False
        super().__init__("imq-raw-writer", max_queue)

    # -- the loop's side -------------------------------------------------------------

    def submit(self, snapshot: Snapshot) -> None:
        self.offer(snapshot)

    def close(self, timeout: float = 10.0) -> None:
        """Flush what is buffered and stop the thread."""
        super().close(timeout)

    # -- the thread ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            # Importing pyarrow holds the GIL for a moment: do it at start-up, not in the
            # middle of traffic at the first flush.
            import pyarrow.parquet  # noqa: F401
        except Exception as exc:
            log.warning("raw metrics: pyarrow is not usable (%s); not written", exc)
        last_flush = time.monotonic()
        while True:
            wait = max(0.05, self.flush_interval - (time.monotonic() - last_flush))
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                item = None
            if item is STOP:
                self._flush()
                return
            if item is not None:
                try:
                    self._add(item)  # type: ignore[arg-type]
                except Exception:
                    log.exception("raw metrics: cannot make rows of a sample")
            if time.monotonic() - last_flush >= self.flush_interval:
                self._flush()
                last_flush = time.monotonic()

    def _add(self, snap: Snapshot) -> None:
        wall, mono, figures, services, dests = snap
        seconds = max(mono - self._prev_mono, 0.001)
        self._prev_mono = mono
        ts = datetime.fromtimestamp(wall, UTC)
        cols: dict[str, list[Any]] = {name: [] for name, _ in COLUMNS}
        depth, held_bytes, connections, memory_state, memory_bytes = figures
        total = [0, 0, 0, 0]
        prev_services, self._prev_services = self._prev_services, {}
        for s in services:
            before = prev_services.get(s[0], (s[0], 0, 0, 0, 0, 0))
            counts = [_delta(s[i], before[i]) for i in range(1, 5)]
            for i in range(4):
                total[i] += counts[i]
            self._row(cols, "service", ts, seconds, s[0], "service", counts)
            cols["connections"].append(s[5])
            for name in ("depth", "bytes", "producers", "consumers"):
                cols[name].append(None)
            cols["memory_state"].append(None)
            cols["memory_bytes"].append(None)
            self._prev_services[s[0]] = s
        self._row(cols, "broker", ts, seconds, "", "", total)
        cols["depth"].append(depth)
        cols["bytes"].append(held_bytes)
        cols["producers"].append(None)
        cols["consumers"].append(None)
        cols["connections"].append(connections)
        cols["memory_state"].append(memory_state)
        cols["memory_bytes"].append(memory_bytes)
        prev_dests, self._prev_dests = self._prev_dests, {}
        zero = (None, None, 0, 0, 0, 0, 0, 0, 0, 0)
        for d in dests:
            key = (d[0], d[1])
            before = prev_dests.get(key, zero)
            counts = [_delta(d[i], before[i]) for i in range(4, 8)]
            self._row(cols, "destination", ts, seconds, d[0], "queue" if d[1] else "topic", counts)
            cols["depth"].append(d[2])
            cols["bytes"].append(d[3])
            cols["producers"].append(d[8])
            cols["consumers"].append(d[9])
            cols["connections"].append(None)
            cols["memory_state"].append(None)
            cols["memory_bytes"].append(None)
            self._prev_dests[key] = d
        import pyarrow as pa

        self._pending[partition_path(ts)].append(pa.table(cols, schema=schema()))
        self._pending_rows += len(cols["ts"])
        while self._pending_rows > self.max_rows:
            # The store has been failing for long: drop the oldest sample.
            oldest = min(self._pending)
            table = self._pending[oldest].pop(0)
            if not self._pending[oldest]:
                del self._pending[oldest]
            self._pending_rows -= len(table)
            self.dropped += len(table)

    def _row(self, cols, kind, ts, seconds, name, dest_type, counts) -> None:
        cols["kind"].append(kind)
        cols["broker"].append(self.instance)
        cols["ts"].append(ts)
        cols["interval"].append(round(seconds, 3))
        cols["name"].append(name)
        cols["dest_type"].append(dest_type)
        cols["msgs_in"].append(counts[0])
        cols["msgs_out"].append(counts[1])
        cols["bytes_in"].append(counts[2])
        cols["bytes_out"].append(counts[3])
        cols["rate_in"].append(round(counts[0] / seconds, 3))
        cols["rate_out"].append(round(counts[1] / seconds, 3))
        cols["latency_ms"].append(None)

    def _flush(self) -> None:
        import pyarrow as pa

        try:
            for part in sorted(self._pending):
                tables = self._pending[part]
                write_table(self.url, part, pa.concat_tables(tables), self.instance)
                rows = sum(len(t) for t in tables)
                # Written: never again (a failure on a later partition keeps only the rest).
                del self._pending[part]
                self._pending_rows -= rows
                self.written_rows += rows
                self.written_files += 1
        except Exception as exc:
            if not self._failing:
                self._failing = True
                log.warning("raw metrics: cannot write to %s (%s); will retry", self.url, exc)
            return
        if self._failing:
            self._failing = False
            log.info("raw metrics: writing to %s again", self.url)
