"""The event-loop lag probe (broker/server/looplag.py): its window figures, its WARNING
when the loop is held up, and the figures a real broker reports in its admin metrics
reply, its properties (the portal overview's source) and on ``/metrics``."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import weakref
from typing import Any

import pytest

from broker import props
from broker.admintools.actions.broker_info import query_broker
from broker.admintools.broker_handle import BrokerAdmin
from broker.core.metrics import LagWindow
from broker.server.looplag import FullCollections, LoopLagMonitor

from .portal_server import start_stack
from .test_client_live import run
from .test_metrics_events import open_admin
from .test_prometheus import fetch, samples

pytestmark = pytest.mark.timeout(180)


def test_lag_window_reports_max_and_p99_of_the_closed_window() -> None:
    w = LagWindow()
    assert (w.max, w.p99, w.count) == (0.0, 0.0, 0)
    for i in range(1, 201):  # 1..200 ms
        w.add(i / 1000)
    assert w.roll() == (0.2, 0.198, 200)
    # The next window starts empty; the worst ever stays.
    w.add(0.003)
    assert w.roll() == (0.003, 0.003, 1)
    assert w.worst == 0.2
    assert w.roll() == (0.0, 0.0, 0)


def test_a_blocked_loop_is_measured_and_warned_once_per_window(caplog) -> None:
    async def main() -> LoopLagMonitor:
        mon = LoopLagMonitor(asyncio.get_running_loop(), window=0.5, warn_ms=50)
        mon.start()
        try:
            await asyncio.sleep(0.3)
            time.sleep(0.4)  # what a blocking call in the broker would do
            deadline = time.monotonic() + 30
            while mon.lag.count == 0 or mon.warnings == 0:
                assert time.monotonic() < deadline, "no window closed"
                await asyncio.sleep(0.05)
        finally:
            mon.close()
        return mon

    with caplog.at_level(logging.WARNING, logger="broker.looplag"):
        mon = asyncio.run(main())
    # A probe waited for most of the 400 ms block.
    assert mon.lag.worst > 0.2
    assert mon.warnings == 1
    (record,) = caplog.records
    assert record.getMessage().startswith("event loop lag: max ")
    assert "imq.loop.lag.warn is 50 ms" in record.getMessage()


async def _reported(admin: Any) -> dict[str, Any]:
    """The broker's total metrics once a lag window has closed (a probe waits > 0 µs)."""
    deadline = time.monotonic() + 60
    while True:
        m = await admin.metrics()
        if m.get("loopLagMax", 0) > 0:
            return m
        assert time.monotonic() < deadline, m
        await asyncio.sleep(0.2)


@run
async def test_broker_reports_its_loop_lag(own_broker) -> None:
    b = own_broker("imq.loop.lag.window=1")
    admin = await open_admin(b)
    try:
        m = await _reported(admin)
    finally:
        await admin.close()
    assert 0 < m["loopLagP99"] <= m["loopLagMax"]
    # Still the stock MetricCounters beside it.
    assert m["__class__"] == "com.sun.messaging.jmq.util.MetricCounters"

    sync = BrokerAdmin(b.host, b.portmapper_port)
    try:
        info = query_broker(sync)
        reported = sync.broker_props()
    finally:
        sync.close()
    assert float(reported[props.LOOP_LAG_MAX]) > 0
    assert float(reported[props.LOOP_LAG_P99]) <= float(reported[props.LOOP_LAG_MAX])
    # What the portal's overview shows.
    assert info["loop_lag_max"] == float(reported[props.LOOP_LAG_MAX])
    assert info["loop_lag_p99"] == float(reported[props.LOOP_LAG_P99])


def test_metrics_endpoint_exports_the_loop_lag() -> None:
    stack = start_stack(None, "imq.loop.lag.window=1")
    try:
        deadline = time.monotonic() + 60
        while True:
            status, _, text = fetch(stack.url + "/metrics")
            assert status == 200, text
            got = samples(text)
            lag_max = got[("openmq_broker_loop_lag_seconds", (("stat", "max"),))]
            lag_p99 = got[("openmq_broker_loop_lag_seconds", (("stat", "p99"),))]
            if lag_max > 0:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.3)
    finally:
        stack.stop()
    assert 0 < lag_p99 <= lag_max < 60


def test_full_collections_deferred_while_a_backlog_is_queued() -> None:
    """Above the mark the interpreter starts no full collection; one is forced after
    max_wait; under the mark its own threshold is back."""
    now = [0.0]
    fc = FullCollections(max_backlog=1000, max_wait=60, clock=lambda: now[0])
    before = gc.get_threshold()
    try:
        fc.tick(10)
        assert gc.get_threshold() == before and not fc.deferring
        fc.tick(5000)
        assert fc.deferring and gc.get_threshold()[2] > 10**9
        assert gc.get_threshold()[:2] == before[:2]
        # Cyclic garbage made meanwhile is still freed by the forced collection.
        ref = weakref.ref(_cycle())
        now[0] = 30.0
        fc.tick(5000)
        assert fc.forced == 0 and ref() is not None
        now[0] = 61.0
        fc.tick(5000)
        assert fc.forced == 1 and ref() is None
        fc.tick(999)
        assert gc.get_threshold() == before and not fc.deferring
    finally:
        fc.close()
    assert gc.get_threshold() == before


def test_full_collections_off_with_zero() -> None:
    fc = FullCollections(max_backlog=0, max_wait=60)
    before = gc.get_threshold()
    fc.tick(10**6)
    assert gc.get_threshold() == before and not fc.deferring


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> _Node:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return a
