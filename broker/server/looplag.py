"""The event-loop lag probe: how long the broker's loop takes to answer a wake-up.

Every ``interval`` (100 ms) a daemon thread hands the loop a callback with
``call_soon_threadsafe``, the same way a socket becoming readable wakes it; the callback
records how long after the probe was due it ran.  That is what any packet arriving at
that moment waited before the broker could look at it: the rest of a long loop turn, a
blocking call, a garbage collection (which holds the GIL and so delays the thread as
well: that is why the probe is timed from when it was due), the process not getting a
core.  A thread is the clock because the loop's own timers are rounded to the
millisecond (uvloop) and would hide the sub-millisecond lag this is meant to show.

The samples are grouped in windows of ``imq.loop.lag.window`` seconds (default 10); the
last closed window's max and 99th percentile are reported (:class:`LagWindow`): in the
broker's properties (``imq.loop.lag.max``, ``imq.loop.lag.p99``, milliseconds), in the
total GET_METRICS reply (``JMQLoopLagMax``/``JMQLoopLagP99``, microseconds, with
``JMQGCPauseMax``, the window's longest garbage collection), in the live
sample and on ``/metrics``.  A window whose max exceeds ``imq.loop.lag.warn`` ms
(default 100; 0: never) is logged once as a WARNING.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time

from broker.core.metrics import LagWindow

log = logging.getLogger("broker.looplag")

__all__ = ["FullCollections", "LoopLagMonitor", "freeze_startup_heap"]

PROBE_INTERVAL = 0.1


def freeze_startup_heap() -> None:
    """Keep the start-up heap out of the garbage collector's full collections.

    The broker process holds Django, its models, the protocol tables and pyarrow: about
    100,000 long-lived objects that every generation-2 collection walks (45 ms at best on
    this machine, several hundred under load), in the middle of message traffic (the
    steady-rate latency tail, issue 12).  ``gc.freeze()`` moves everything alive now to a
    permanent generation that collections skip; reference counting still frees those
    objects.  Called before the store is opened, so recovered messages and everything
    made later stay collectable; pyarrow (the raw metrics writer's, imported in its
    thread otherwise) is imported first so that it is frozen too.
    """
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        pass
    gc.collect()
    gc.freeze()


# A generation-2 threshold no count reaches: the interpreter never starts one itself.
_NEVER = 2**31 - 1


class FullCollections:
    """Full (generation-2) garbage collections deferred while a backlog is queued.

    Each queued message is a few objects the cyclic collector tracks, and the interpreter
    starts a full collection whenever the long-lived objects have grown by a quarter: a
    growing backlog of 100,000 messages pays 200-300 ms on the event loop's thread again
    and again (issue 23's steady-rate tail; bench/gc_backlog.py).  Messages are freed by
    reference counting, not by the collector, so while more than ``max_backlog`` messages
    are queued the broker keeps the young collections and defers the full ones, for at most
    ``max_wait`` seconds (the bound on cyclic garbage kept meanwhile); once the backlog is
    back under the mark, the interpreter's own rule applies again.
    """

    def __init__(self, max_backlog: int, max_wait: float, clock=time.monotonic) -> None:
        self.max_backlog = max_backlog
        self.max_wait = max_wait
        self.clock = clock
        self.deferring = False
        self.deferred_since = 0.0
        self.forced = 0  # full collections run because max_wait was over

    def tick(self, backlog: int) -> None:
        """Called every few seconds with the number of messages queued broker-wide."""
        if self.max_backlog <= 0:
            return
        t0, t1, t2 = gc.get_threshold()
        if backlog > self.max_backlog:
            if not self.deferring:
                self.deferring, self.deferred_since = True, self.clock()
                self._normal = t2
                gc.set_threshold(t0, t1, _NEVER)
            elif self.clock() - self.deferred_since >= self.max_wait:
                self.forced += 1
                gc.collect()
                self.deferred_since = self.clock()
        elif self.deferring:
            self.deferring = False
            gc.set_threshold(t0, t1, self._normal)

    def close(self) -> None:
        """Give the interpreter its own rule back."""
        if self.deferring:
            self.deferring = False
            t0, t1, _ = gc.get_threshold()
            gc.set_threshold(t0, t1, self._normal)


class LoopLagMonitor:
    """Measures the loop's wake-up lag from a thread (see the module docstring)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        window: float = 10.0,
        warn_ms: int = 100,
        interval: float = PROBE_INTERVAL,
    ) -> None:
        self.loop = loop
        self.interval = interval
        self.per_window = max(1, round(window / interval))
        self.warn = warn_ms / 1000.0 if warn_ms > 0 else 0.0
        self.window_seconds = window
        self.lag = LagWindow()
        self.warnings = 0
        self._seen = 0
        # Garbage collections in the window: the longest pause and how many, so a lag
        # can be told apart from a collection (gc.callbacks run in the collecting thread).
        self.gc_max = 0.0  # of the last closed window, seconds
        self.gc_count = 0
        self._gc_started = 0.0
        self._gc_window_max = 0.0
        self._gc_window_count = 0
        self.gc_generation = -1  # of the window's longest collection
        self._gc_window_generation = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="imq-loop-lag", daemon=True)

    def start(self) -> None:
        gc.callbacks.append(self._gc)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        pause = time.perf_counter() - self._gc_started
        self._gc_window_count += 1
        if pause > self._gc_window_max:
            self._gc_window_max = pause
            self._gc_window_generation = info.get("generation", -1)

    @property
    def max_ms(self) -> float:
        return self.lag.max * 1000.0

    @property
    def p99_ms(self) -> float:
        return self.lag.p99 * 1000.0

    def _run(self) -> None:
        clock = time.perf_counter
        due = clock() + self.interval
        while not self._stop.wait(max(0.0, due - clock())):
            try:
                # Timed from when the probe was due, not from when this thread got to
                # run: a pause that holds the GIL (a garbage collection, a long Python
                # stretch) or stops the whole process delays this thread too.
                self.loop.call_soon_threadsafe(self._arrived, due)
            except RuntimeError:  # the loop is closed: the broker has stopped
                return
            due += self.interval
            now = clock()
            if due <= now:  # a long stall: one late probe for it, then on schedule
                due = now + self.interval

    def _arrived(self, stamped: float) -> None:
        self.lag.add(time.perf_counter() - stamped)
        self._seen += 1
        if self._seen < self.per_window:
            return
        self._seen = 0
        worst, p99, count = self.lag.roll()
        self.gc_max, self._gc_window_max = self._gc_window_max, 0.0
        self.gc_count, self._gc_window_count = self._gc_window_count, 0
        self.gc_generation, self._gc_window_generation = self._gc_window_generation, -1
        if self.warn and worst > self.warn:
            self.warnings += 1
            log.warning(
                "event loop lag: max %.1f ms, p99 %.1f ms over the last %g s (%d probes; "
                "imq.loop.lag.warn is %d ms; longest of %d garbage collections %.1f ms, "
                "generation %d): "
                "the broker answered late",
                worst * 1000,
                p99 * 1000,
                self.window_seconds,
                count,
                round(self.warn * 1000),
                self.gc_count,
                self.gc_max * 1000,
                self.gc_generation,
            )
