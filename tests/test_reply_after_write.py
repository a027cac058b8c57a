"""Without sync, the file store still writes a persistent message before saying "stored".

Found by the crash soak (``bench/crash_soak.py --size 20000``, file store, default
settings): the SEND_REPLY went out at once while the record waited in the writer thread
behind a compaction, so a SIGKILL lost every message confirmed meanwhile (thousands per
round).  Here a compaction of a few hundred MB keeps the writer busy while a producer
sends; whatever it was told is stored must be there after a SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import suppress

import pytest

from broker.admintools.client import AdminClient
from openmq_client import Queue, TextMessage

from .test_client_live import name, open_conn, run
from .test_persistence import receive_all

pytestmark = pytest.mark.timeout(180)


@run
async def test_sends_confirmed_during_a_compaction_survive_sigkill(own_broker) -> None:
    b = own_broker()  # the file store, sync off: the defaults
    bulk, q = Queue(name("bulk")), Queue(name("confirmed"))
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(bulk)
    body = "x" * 100_000
    for _ in range(2500):  # ~250 MB of live messages: the rewrite takes a while
        await prod.send(TextMessage(body), persistent=True)
    admin = await AdminClient.open(b.host, b.portmapper_port)
    compaction = asyncio.ensure_future(admin.compact())
    await asyncio.sleep(0)  # the request goes out first
    confirmed = []
    prod2 = await sess.create_producer(q)
    for i in range(20):
        await prod2.send(TextMessage(f"c{i}"), persistent=True)
        confirmed.append(f"c{i}")
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)
    await asyncio.gather(compaction, return_exceptions=True)
    for c in (conn, admin):
        with suppress(Exception):
            await asyncio.wait_for(c.close(), 5)
    b = own_broker()
    assert [m.text for m in await receive_all(b, q)] == confirmed
