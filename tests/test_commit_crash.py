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
from typing import Any

import pytest

from openmq_client import AckMode, Queue, TextMessage

from .pg import fresh_database
from .test_client_live import name, open_conn, run
from .test_persistence import receive_all

pytestmark = pytest.mark.timeout(120)

JDBC = "imq.persist.store=jdbc"


def end_dead_broker_sessions(lock: Any) -> None:
    """End the killed broker's database sessions, then release the lock.

    A server session waiting for a lock notices its client is gone only when it next
    talks to it, so once the lock is released it could still finish the dead broker's
    write: ended first, its transaction rolls back as the crash would have it."""
    lock.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    lock.rollback()


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
        end_dead_broker_sessions(lock)
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


@run
async def test_acknowledged_message_never_comes_back_unflagged(own_broker, postgres_url) -> None:
    """Found by the crash soak on the database store: a CLIENT_ACKNOWLEDGE consumer's
    acknowledgement returned OK, the broker was SIGKILLed before the settle (and the
    delivery count) reached the database, and after the restart the message was delivered
    again without the redelivered flag.  The reply now waits for the store, so an
    acknowledgement the client was told of is never taken back."""
    import psycopg

    url = fresh_database(postgres_url, f"imq_{uuid.uuid4().hex[:8]}")
    b = own_broker(JDBC, database_url=url)
    q = Queue(name("ackcrash"))
    pconn = await open_conn(b)
    psess = await pconn.create_session()
    prod = await psess.create_producer(q)
    await prod.send(TextMessage("once"), persistent=True)  # stored: its reply says so
    await pconn.close()
    with psycopg.connect(url) as lock:
        # The broker's writes of the delivery count and of the settle wait for this.
        lock.execute("LOCK TABLE broker_storedmessage, broker_storedinterest")
        cconn = await open_conn(b)
        csess = await cconn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        cons = await csess.create_consumer(q)
        await cconn.start()
        m = await cons.receive(10.0)
        assert m is not None and m.text == "once" and not m.redelivered
        ack = asyncio.ensure_future(m.acknowledge())
        await asyncio.wait([ack], timeout=3.0)
        confirmed = ack.done() and ack.exception() is None
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait(10)
        end_dead_broker_sessions(lock)
    await asyncio.gather(ack, return_exceptions=True)
    with suppress(Exception):
        await asyncio.wait_for(cconn.close(), 5)
    b = own_broker(JDBC, database_url=url)
    again = await receive_all(b, q)
    if confirmed:
        assert again == [], "a message whose acknowledgement returned OK came back"
    else:  # the acknowledgement was never confirmed: it comes back, marked delivered
        assert [x.text for x in again] == ["once"]
