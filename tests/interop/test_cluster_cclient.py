"""The stock OpenMQ C client (libmqcrt) in a cluster of two real brokers: what it sends on
one broker is received on the other, and it receives on one broker what was sent on the
other (tests/interop/c/probe.c's send-props and recv-props modes)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from openmq_client import Queue, TextMessage, connect
from tests.cluster_procs import start_cluster

from .conftest import CProbe

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    brokers = start_cluster(tmp_path_factory.mktemp("ccluster"), 2, names=("A", "B"))
    yield brokers
    for b in brokers:
        b.stop()


def test_c_client_sends_on_a_python_receives_on_b(pair, c_probe: CProbe) -> None:
    a, b = pair
    q = f"cclu{uuid.uuid4().hex[:8]}"
    r = c_probe.run(a, "send-props", q)
    assert r.checks == {"send_props": "ok"}, r.explain()

    async def receive() -> set:
        conn = await connect(b.host, b.portmapper_port, request_timeout=20)
        try:
            sess = await conn.create_session()
            await conn.start()
            cons = await sess.create_consumer(Queue(q))
            got = [await cons.receive(20) for _ in range(2)]
            assert all(m is not None for m in got)
            return {m.correlation_id for m in got if m is not None}
        finally:
            await conn.close()

    assert asyncio.run(receive()) == {"corr-text", "corr-bytes"}


def test_python_sends_on_a_c_client_receives_on_b(pair, c_probe: CProbe) -> None:
    a, b = pair
    q = f"pclu{uuid.uuid4().hex[:8]}"

    async def send() -> None:
        conn = await connect(a.host, a.portmapper_port, request_timeout=20)
        try:
            prod = await (await conn.create_session()).create_producer(Queue(q))
            for corr in ("py-text", "py-bytes"):
                await prod.send(TextMessage(corr, correlation_id=corr), persistent=True)
        finally:
            await conn.close()

    asyncio.run(send())
    # The messages wait in A's queue until the C consumer's interest (on B) reaches A.
    r = c_probe.run(b, "recv-props", q)
    assert r.checks == {"recv_props": "ok"}, r.explain()
    assert "py-text" in r.stdout and "py-bytes" in r.stdout, r.explain()
