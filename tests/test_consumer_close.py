"""A closed consumer's prefetched messages go back to their queue at once, not when its
session closes (OpenMQ's SessionOp.detachConsumer): the broker pushed them ahead, the
application never saw them, so another consumer gets them, not marked redelivered.

The client names the last message the application saw in DELETE_CONSUMER; when that one
is already acknowledged (AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE after acknowledge(), a
transacted receive) the broker no longer holds it, and everything the consumer still
holds was pushed after it.  Against a real broker (the conftest ``broker`` fixture).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from openmq_client import AckMode, Connection, Queue, TextMessage, connect

pytestmark = pytest.mark.timeout(120)

N = 5


async def _open(b: Any) -> Connection:
    conn = await connect(b.host, b.portmapper_port, request_timeout=20)
    await conn.start()
    return conn


async def _fill(conn: Connection, q: Queue) -> None:
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    for i in range(N):
        await prod.send(TextMessage(f"m{i}"))
    await sess.close()


async def _rest_elsewhere(conn: Connection, q: Queue, first_taken: int) -> None:
    """A second session of the same connection (the first stays open) gets the rest, in
    order, as first deliveries."""
    other = await conn.create_session()
    cons = await other.create_consumer(q)
    for i in range(first_taken, N):
        m = await cons.receive(10)
        assert isinstance(m, TextMessage), f"m{i} stayed with the closed consumer's session"
        assert m.text == f"m{i}"
        assert not m.redelivered
        assert m.properties["JMSXDeliveryCount"] == 1
    assert await cons.receive(0.3) is None
    await other.close()


async def _prefetched(cons: Any) -> None:
    # The broker pushes the consumer's prefetch right after creating it; wait until all
    # of it is in the client so the close has something to give back.
    for _ in range(200):
        if len(cons._queue) >= N - 1:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"only {len(cons._queue)} messages prefetched")


@pytest.mark.parametrize("mode", ["auto", "client", "transacted"])
def test_close_returns_prefetched(broker: Any, mode: str) -> None:
    async def go() -> None:
        conn = await _open(broker)
        try:
            q = Queue(f"close_{mode}_{uuid.uuid4().hex[:8]}")
            await _fill(conn, q)
            if mode == "transacted":
                sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE, True)
            elif mode == "client":
                sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
            else:
                sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
            cons = await sess.create_consumer(q, prefetch=N)
            first = await cons.receive(10)
            assert isinstance(first, TextMessage) and first.text == "m0"
            if mode == "client":
                await sess.acknowledge()
            await _prefetched(cons)
            await cons.close()
            await _rest_elsewhere(conn, q, 1)
            if mode == "transacted":
                await sess.commit()
            await sess.close()
            # m0 was consumed (acknowledged or committed): nobody gets it again.
            check = await conn.create_session()
            again = await check.create_consumer(q)
            assert await again.receive(0.3) is None
        finally:
            await conn.close()

    asyncio.run(go())


def test_close_of_unacknowledged_keeps_the_seen(broker: Any) -> None:
    """CLIENT_ACKNOWLEDGE without acknowledge(): the message the application saw stays with
    the session (to be acknowledged or recovered), the ones after it go back."""

    async def go() -> None:
        conn = await _open(broker)
        try:
            q = Queue(f"close_seen_{uuid.uuid4().hex[:8]}")
            await _fill(conn, q)
            sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
            cons = await sess.create_consumer(q, prefetch=N)
            first = await cons.receive(10)
            assert isinstance(first, TextMessage) and first.text == "m0"
            await _prefetched(cons)
            await cons.close()
            await _rest_elsewhere(conn, q, 1)
            await sess.close()  # m0 unacknowledged: back, redelivered
            check = await conn.create_session()
            again = await check.create_consumer(q)
            m = await again.receive(10)
            assert isinstance(m, TextMessage) and m.text == "m0" and m.redelivered
        finally:
            await conn.close()

    asyncio.run(go())
