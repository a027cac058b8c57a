"""Messages a destination's limits drop are counted and told to the administrator: one
WARNING per destination and interval with the count, never one per message."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.core.drops import DropLog
from openmq_client import Queue, TextMessage

from .test_client_live import name, open_conn, run
from .test_metrics_events import open_admin

pytestmark = pytest.mark.timeout(120)


def test_drop_log_sums_a_burst_into_one_line_per_interval(caplog) -> None:
    now = [100.0]
    drops = DropLog(interval=30, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="broker.limits"):
        for _ in range(500):
            drops.note("queue q", "rejected: destination full")
        drops.note("topic t", "rejected: too big")
        # The first drop of each destination is told at once, the rest are held back.
        assert [r.getMessage() for r in caplog.records] == [
            "queue q: 1 message(s) dropped in the last 0 s: rejected: destination full",
            "topic t: 1 message(s) dropped in the last 0 s: rejected: too big",
        ]
        now[0] += 10
        drops.flush()
        assert len(caplog.records) == 2
        now[0] += 25
        drops.flush()
    assert caplog.records[2].getMessage() == (
        "queue q: 499 message(s) dropped in the last 35 s: rejected: destination full"
    )
    assert len(caplog.records) == 3


@run
async def test_silent_non_persistent_drops_are_counted_and_logged(own_broker) -> None:
    b = own_broker(
        "imq.autocreate.destination.maxNumMsgs=2", "imq.destination.limit.log.interval=1"
    )
    q = name("dropped")
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(Queue(q))
    # Non-persistent sends do not wait for a reply: the producer is never told.
    for i in range(10):
        await prod.send(TextMessage(str(i)), persistent=False)
    admin = await open_admin(b)
    try:
        deadline = time.monotonic() + 20
        while (d := await admin.metrics(destination=q))["numRejectedMsgs"] < 8:
            assert time.monotonic() < deadline, d
            await _sleep()
        assert d["numMsgs"] == 2 and d["numRejectedMsgs"] == 8
    finally:
        await admin.close()
    await conn.close()
    expected = f"queue {q}: 7 message(s) dropped"
    deadline = time.monotonic() + 20
    while expected not in b.log_text():
        assert time.monotonic() < deadline, b.log_text()[-2000:]
        await _sleep()
    text = b.log_text()
    first = f"queue {q}: 1 message(s) dropped in the last 0 s: rejected: destination full"
    assert first in text and "WARNING" in text.split(first)[0].rsplit("\n", 1)[-1]
    assert "limitBehavior REJECT_NEWEST" in text and "without imqAckOnProduce" in text
    # Two lines for ten sends: the count, not a line per message.
    assert text.count(f"queue {q}: ") == 2


async def _sleep() -> None:
    await asyncio.sleep(0.2)
