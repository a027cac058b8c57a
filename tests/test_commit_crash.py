"""A transaction's messages reach consumers only once its commit is in the store.

Found by the crash soak (bench/crash_soak.py) on the database store: a producer's COMMIT
was in flight when the broker was SIGKILLed; consumers had already received four of its
five messages, the database commit had not happened, and after the restart the fifth was
gone: the transaction arrived in part.  Here the database write is held back by a table
lock, so the window the soak hit by chance is open for as long as the test needs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from contextlib import suppress

import pytest

from broker.client import AckMode, Queue, TextMessage

from .pg import fresh_database
from .test_client_live import name, open_conn, run
from .test_persistence import receive_all

pytestmark = pytest.mark.timeout(120)

JDBC = "imq.persist.store=jdbc"


@run
async def test_commit_in_flight_at_a_crash_is_all_or_nothing(own_broker, postgres_url) -> None:
    import psycopg

    url = fresh_database(postgres_url, f"imq_{uuid.uuid4().hex[:8]}")
    b = own_broker(JDBC, database_url=url)
    q = Queue(name("txcrash"))
    sent = [f"m{i}" for i in range(5)]
    cconn = await open_conn(b)
    csess = await cconn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    cons = await csess.create_consumer(q)
    await cconn.start()
    pconn = await open_conn(b)
    psess = await pconn.create_session(transacted=True)
    prod = await psess.create_producer(q)
    for text in sent:
        await prod.send(TextMessage(text), persistent=True)
    # Another session holds the transaction tables: the broker's write of the commit
    # waits for it, so the commit is not stored when the broker dies.
    with psycopg.connect(url) as lock:
        lock.execute("LOCK TABLE broker_storedtransaction, broker_storedtxnwork")
        commit = asyncio.ensure_future(psess.commit())
        seen: list[str] = []
        while len(seen) < len(sent) and (m := await cons.receive(3.0)) is not None:
            seen.append(m.text)  # never acknowledged: a committed copy must survive
        assert not commit.done()  # its reply waits for the database, which is held
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait(10)
        lock.rollback()
    await asyncio.gather(commit, return_exceptions=True)
    for conn in (cconn, pconn):  # their broker is gone
        with suppress(Exception):
            await asyncio.wait_for(conn.close(), 5)
    b = own_broker(JDBC, database_url=url)
    after = [m.text for m in await receive_all(b, q)]
    # The commit did not reach the store, so it never happened: nobody may have seen
    # any of it; had it reached the store, all of it would be there again.
    assert after in ([], sent), after
    assert set(seen) <= set(after), f"consumer saw {seen} of a commit that was lost: {after}"
