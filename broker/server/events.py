"""Live events: the broker's once-a-second sample on the Channels layer, and MetricSample rows.

Every second a housekeeping timer (:meth:`EventPublisher.tick`) reads the counters --
off the message path, in one pass over the destinations -- and publishes one message to
the channel layer group :func:`group_name` (``"broker.<instance>"``)::

    {"type": "broker.sample", "instance": "imqbroker", "timestamp": 1767225600.5,
     "interval": 1.0,                           # seconds the rates are measured over
     "msgs_in": 120.0, "msgs_out": 118.0,       # messages per second (all services)
     "bytes_in": 123456.0, "bytes_out": 120000.0,   # message bytes per second
     "messages": 42, "message_bytes": 43008,    # messages held now, and their bytes
     "connections": 3,
     "memory_state": "green", "memory_used": 43008, "memory_limit": 1073741824,
                                                # memory_used: message bodies in memory
     "paged_out": 0.0, "read_back": 0.0,        # messages paged out / read back per second
     "destinations": 10000,                     # how many there are (all of them)
     "loop_lag_max": 0.4, "loop_lag_p99": 0.2,  # event-loop lag, ms (looplag.py)
     "depths": [{"name": "orders", "type": "queue", "messages": 40, "bytes": 40960,
                 "consumers": 1, "producers": 2}, ...],   # the 50 deepest only
     "activity": [{"name": "orders", "type": "queue", "msgs_in": 12.0, "msgs_out": 11.0,
                   "bytes_in": 12288.0, "bytes_out": 11264.0, "messages": 40,
                   "bytes": 40960}, ...]}   # rates of the 200 busiest of the interval

so a broker with 10,000 destinations still publishes a bounded message.  Rates are the
counter deltas over the time since the previous sample (a RESET_BROKER restarts them).

Publishing never holds up the event loop: the send runs as its own task with a timeout,
and while one is still in flight the next sample is skipped.  If the layer (Redis) is
unreachable the broker logs one WARNING, keeps trying every second without logging, and
says once (INFO) when it gets through again; messaging is never affected.  Without a
shared layer (``CHANNEL_LAYERS`` is the in-memory one when ``REDIS_URL`` is unset, see
portal/settings.py) nothing is published: no other process could read it.

Every ``imq.metrics.sample.interval`` seconds (default 10; 0 disables) the same figures
become one ``MetricSample`` row, the rates then averaged over that interval.  A writer
thread does the ORM work (as logsetup's database log handler does); the loop only puts
a small dict on a bounded queue.  The thread also deletes this instance's rows older than
``imq.metrics.sample.retention`` seconds (default 86400; 0 keeps them) every few minutes.

At the same moments the counters of the broker, its services and ALL its destinations
are copied (one tuple each) for the raw metrics store that the Spark rollups read
(broker/server/rawstore.py): a second writer thread makes the rows and writes Parquet
files, ``imq.metrics.raw.url`` (default: the portal's ``METRICS_RAW_URL``, else
``<varhome>/metrics-raw``), every ``imq.metrics.raw.flush.interval`` seconds (default
300); ``imq.metrics.raw.enabled=false`` turns it off.

The same once-a-second pass takes the destinations' averaging samples
(core/metrics.py), which GET_METRICS reports as avgNumMsgs and friends -- for up to
:data:`AVERAGING_BATCH` destinations a tick, round robin beyond that.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from datetime import UTC, datetime
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING

from broker import props
from broker.channel_groups import group_name
from broker.core import queries
from broker.core.message import BODIES
from broker.core.metrics import ServiceCounters, consumer_counts, sample_averages
from broker.protocol.admin_types import ADMIN_QUEUES
from broker.server.queuethread import STOP, QueueThread
from broker.server.rawstore import RawStoreWriter
from broker.server.rawstore import collect as collect_raw

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("broker.events")

__all__ = ["EventPublisher", "SampleWriter", "group_name", "MAX_DEPTHS", "SAMPLE_TYPE"]

SAMPLE_TYPE = "broker.sample"
MAX_DEPTHS = 50
MAX_ACTIVE = 200  # destinations with their own rates in a sample (the busiest)
PUBLISH_TIMEOUT = 5.0
# Destinations given an averaging sample per tick (round robin beyond that), so a broker
# with 10,000 destinations spends about a millisecond a second on it, not ten.
AVERAGING_BATCH = 2000

_BY_DEPTH = attrgetter("msg_count")
_FIRST = itemgetter(0)


def _snapshot(broker: Broker) -> tuple[int, int, int, int]:
    total = ServiceCounters.total(s.metrics for s in broker.services)
    return (
        total.messages_in,
        total.messages_out,
        total.message_bytes_in,
        total.message_bytes_out,
    )


def _rates(
    now: tuple[int, int, int, int], before: tuple[int, int, int, int], seconds: float
) -> list[float]:
    # A counter below its previous value was reset: count from zero.
    return [round((n - b if n >= b else n) / seconds, 2) for n, b in zip(now, before, strict=True)]


def _lag_ms(broker: Broker, which: str) -> float:
    lag = broker.loop_lag
    if lag is None:
        return 0.0
    window = lag.lag
    return round((window.max if which == "max" else window.p99) * 1000.0, 3)


class EventPublisher:
    """The broker's live events and metric samples (see the module docstring)."""

    def __init__(self, broker: Broker) -> None:
        c = broker.config
        self.broker = broker
        self.instance = c.instance
        self.group = group_name(c.instance)
        self.sample_interval = c.get(props.METRICS_SAMPLE_INTERVAL)
        self.retention = c.get(props.METRICS_SAMPLE_RETENTION)
        self.published = 0
        self.last_sample: dict | None = None
        self._layer = None
        self._layer_checked = False
        self._pending: asyncio.Task | None = None
        self._warned = False
        self._averaging_next = 0
        now = time.monotonic()
        counters = _snapshot(broker)
        self._prev = (now, counters)
        self._dest_prev: dict | None = None  # destination -> its counters at the last sample
        self._paged_prev = (0, 0)  # the pager's paged-out and read-back counts then
        self._row_base = (now, counters)
        self._writer = (
            SampleWriter(self.instance, self.retention) if self.sample_interval > 0 else None
        )
        self._raw = _raw_writer(c) if self.sample_interval > 0 else None

    # -- the timer -------------------------------------------------------------------

    def tick(self) -> None:
        """Sample, publish, and every sample interval queue a MetricSample row."""
        sample = self.sample()
        self.last_sample = sample
        self._publish(sample)
        if self._writer is not None:
            mono = time.monotonic()
            base_t, base = self._row_base
            if mono - base_t >= self.sample_interval - 0.01:
                counters = _snapshot(self.broker)
                self._row_base = (mono, counters)
                rates = _rates(counters, base, max(mono - base_t, 0.001))
                self._writer.submit(sample, rates)
                if self._raw is not None:
                    self._raw.submit(collect_raw(self.broker))

    def sample(self) -> dict:
        """Read the broker's figures now (and take the destinations' averaging samples)."""
        broker = self.broker
        router = broker.router
        mono = time.monotonic()
        counters = _snapshot(broker)
        prev_t, prev = self._prev
        seconds = max(mono - prev_t, 0.001)
        self._prev = (mono, counters)
        msgs_in, msgs_out, bytes_in, bytes_out = _rates(counters, prev, seconds)
        paging = broker.paging
        paged = (paging.pager.stats.paged_out, paging.pager.stats.read_back) if paging else (0, 0)
        before, self._paged_prev = self._paged_prev, paged
        paged_out = max(paged[0] - before[0], 0) / seconds
        read_back = max(paged[1] - before[1], 0) / seconds
        # The reply queues of admin tools' connections (the portal's own) are not counted.
        tools = {cid for cid, c in broker.connections.items() if c.service.type == "ADMIN"}
        dests = [
            d
            for d in queries.destinations(router, topics=False)
            if d.name not in ADMIN_QUEUES and d.temporary_owner not in tools
        ]
        dests += queries.destinations(router, queues=False)
        for d in self._averaging_batch(dests):
            sample_averages(d, consumer_counts(d))
        deepest = heapq.nlargest(MAX_DEPTHS, dests, key=_BY_DEPTH)
        activity = self._activity(dests, seconds)
        depths = [
            {
                "name": d.name,
                "type": "queue" if d.is_queue else "topic",
                "messages": d.msg_count,
                "bytes": d.msg_bytes,
                "consumers": consumer_counts(d)[0],
                "producers": len(d.producers),
            }
            for d in deepest
        ]
        totals = router.totals
        return {
            "type": SAMPLE_TYPE,
            "instance": self.instance,
            "timestamp": round(time.time(), 3),
            "interval": round(seconds, 3),
            "msgs_in": msgs_in,
            "msgs_out": msgs_out,
            "bytes_in": bytes_in,
            "bytes_out": bytes_out,
            "messages": totals.count,
            "message_bytes": totals.bytes,
            "connections": len(broker.connections),
            "memory_state": broker.memory.state,
            "memory_used": BODIES.bytes,
            "memory_limit": broker.memory.budget,
            "paged_out": round(paged_out, 3),
            "read_back": round(read_back, 3),
            "destinations": len(dests),
            "loop_lag_max": _lag_ms(broker, "max"),
            "loop_lag_p99": _lag_ms(broker, "p99"),
            "depths": depths,
            "activity": activity,
        }

    def _activity(self, dests: list, seconds: float) -> list[dict]:
        """Per-destination rates (per second) of the MAX_ACTIVE busiest destinations of
        this interval; a destination not listed had no traffic.  The destination pages'
        live charts read them."""
        before = self._dest_prev
        now: dict = {}
        busy = []
        zero = (0, 0, 0, 0)
        for d in dests:
            c = (d.msgs_in, d.msgs_out, d.msg_bytes_in, d.msg_bytes_out)
            now[d] = c
            if before is None:
                continue  # the first sample: what recovery counted is no traffic
            # One created since the last sample counts from zero.
            b = before.get(d, zero)
            if c != b:
                busy.append((c[0] - b[0] + c[1] - b[1], d, c, b))
        self._dest_prev = now
        out = []
        for _, d, c, b in heapq.nlargest(MAX_ACTIVE, busy, key=_FIRST):
            r = _rates(c, b, seconds)
            out.append(
                {
                    "name": d.name,
                    "type": "queue" if d.is_queue else "topic",
                    "msgs_in": r[0],
                    "msgs_out": r[1],
                    "bytes_in": r[2],
                    "bytes_out": r[3],
                    "messages": d.msg_count,
                    "bytes": d.msg_bytes,
                }
            )
        return out

    def _averaging_batch(self, dests: list) -> list:
        n = len(dests)
        if n <= AVERAGING_BATCH:
            return dests
        start = self._averaging_next % n
        batch = dests[start : start + AVERAGING_BATCH]
        if len(batch) < AVERAGING_BATCH:
            batch += dests[: AVERAGING_BATCH - len(batch)]
        self._averaging_next = (start + AVERAGING_BATCH) % n
        return batch

    def counters_reset(self) -> None:
        """RESET_BROKER zeroed the counters: rates continue from zero."""
        zero = (0, 0, 0, 0)
        self._prev = (self._prev[0], zero)
        self._row_base = (self._row_base[0], zero)

    # -- publishing ----------------------------------------------------------------------

    def _channel_layer(self):
        if not self._layer_checked:
            self._layer_checked = True
            try:
                from channels.layers import InMemoryChannelLayer, get_channel_layer

                layer = get_channel_layer()
            except Exception as exc:
                log.warning("live events: no channel layer (%s); not published", exc)
                return None
            if layer is None or isinstance(layer, InMemoryChannelLayer):
                log.info("live events: no shared channel layer (REDIS_URL unset); not published")
                return None
            self._layer = layer
            log.info("live events: publishing to channel layer group %s", self.group)
        return self._layer

    def _publish(self, sample: dict) -> None:
        if self._pending is not None and not self._pending.done():
            return  # the previous send is still under way: skip this sample
        layer = self._channel_layer()
        if layer is None:
            return
        self._pending = asyncio.get_running_loop().create_task(self._send(layer, sample))

    async def _send(self, layer, sample: dict) -> None:
        try:
            await asyncio.wait_for(layer.group_send(self.group, sample), PUBLISH_TIMEOUT)
        except Exception as exc:
            if not self._warned:
                self._warned = True
                log.warning(
                    "live events: cannot publish to the channel layer (%s); "
                    "retrying every second without further warnings",
                    str(exc) or type(exc).__name__,
                )
            return
        self.published += 1
        if self._warned:
            self._warned = False
            log.info("live events: publishing to the channel layer again")

    def close(self) -> None:
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()
        if self._writer is not None:
            self._writer.close()
        if self._raw is not None:
            self._raw.close()


def _raw_writer(config) -> RawStoreWriter | None:
    """The raw store's writer (broker/server/rawstore.py), unless turned off."""
    if not config.get(props.METRICS_RAW_ENABLED):
        return None
    url = config.get(props.METRICS_RAW_URL) or ""
    if not url:
        try:
            from django.conf import settings

            url = getattr(settings, "METRICS_RAW_URL", "") or ""
        except Exception:
            url = ""
    url = url or str(config.varhome / "metrics-raw")
    flush = config.get(props.METRICS_RAW_FLUSH_INTERVAL)
    log.info("raw metrics: samples to %s every %d s", url, flush)
    return RawStoreWriter(config.instance, url, flush_interval=flush)


# --------------------------------------------------------------------------------------
# MetricSample rows
# --------------------------------------------------------------------------------------


class SampleWriter(QueueThread):
    """Writes MetricSample rows and applies the retention, in a daemon thread.

    :meth:`submit` never blocks: a full queue (the database is stuck) drops the sample.
    Database errors are reported once (WARNING) until a write succeeds again."""

    def __init__(self, instance: str, retention: int, max_queue: int = 100) -> None:
        self.instance = instance[:255]
        self.retention = retention
        # Delete old rows at most this often (and on the first write).
        self.purge_every = max(1, min(600, retention)) if retention > 0 else 0
        self.written = 0
        self._failing = False
        self._last_purge = 0.0
        super().__init__("imq-metric-writer", max_queue)

    def submit(self, sample: dict, rates: list[float]) -> None:
        row = {
            "broker_instance": self.instance,
            "timestamp": datetime.fromtimestamp(sample["timestamp"], UTC),
            "msgs_in": rates[0],
            "msgs_out": rates[1],
            "bytes_in": rates[2],
            "bytes_out": rates[3],
            "connections": sample["connections"],
            "memory_state": sample["memory_state"],
            "memory_used": sample["memory_used"],
            "memory_limit": sample["memory_limit"],
            "destinations": sample["destinations"],
            "loop_lag_max": sample.get("loop_lag_max", 0.0),
            "loop_lag_p99": sample.get("loop_lag_p99", 0.0),
            "depths": sample["depths"],
        }
        self.offer(row)

    def _run(self) -> None:
        try:
            while True:
                item = self._queue.get()
                if item is STOP:
                    return
                self._write(item)  # type: ignore[arg-type]
        finally:
            try:
                from django.db import connections

                connections.close_all()
            except Exception:
                pass

    def _write(self, row: dict) -> None:
        try:
            from broker.models import MetricSample

            MetricSample.objects.create(**row)
            now = time.time()
            if self.purge_every and now - self._last_purge >= self.purge_every:
                self._last_purge = now
                cutoff = datetime.fromtimestamp(now - self.retention, UTC)
                MetricSample.objects.filter(
                    broker_instance=self.instance, timestamp__lt=cutoff
                ).delete()
        except Exception as exc:
            self.dropped += 1
            if not self._failing:
                self._failing = True
                log.warning("metric samples: cannot write to the database (%s)", exc)
            try:
                from django.db import close_old_connections

                close_old_connections()
            except Exception:
                pass
            return
        self.written += 1
        if self._failing:
            self._failing = False
            log.info("metric samples: writing to the database again")
