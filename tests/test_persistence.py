"""Persistence through restarts and SIGKILL: nothing a client was told is stored is lost.

Brokers made by ``own_broker`` in one test share a var home (and database), so a
second ``own_broker(...)`` call is the same broker instance started again.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

from broker.admintools.client import AdminClient, AdminError
from broker.protocol.types import DEST_QUEUE
from openmq_client import AckMode, Queue, TextMessage, Topic

from .test_client_live import name, open_conn, run

pytestmark = pytest.mark.timeout(300)

SYNC = "imq.persist.file.sync.enabled=true"


async def receive_all(
    b: Any,
    dest,
    *,
    client_id: str | None = None,
    durable: str | None = None,
    first_timeout: float = 5.0,
) -> list:
    """Every message ``dest`` (or the durable subscription) delivers, acknowledged.

    Done once the broker holds no message for it that this consumer has not received
    (its admin count, :func:`held_for`), else once nothing came for ``first_timeout``
    (nothing received yet) or a second: the count ends the common case at once, the
    wait stays for what the broker holds back (messages of a transaction in doubt)."""
    conn = await open_conn(b, client_id=client_id) if client_id else await open_conn(b)
    sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    if durable:
        cons = await sess.create_durable_subscriber(dest, durable)
    else:
        cons = await sess.create_consumer(dest)
    await conn.start()
    got = []
    async with await AdminClient.open(b.host, b.portmapper_port, connect_timeout=20) as admin:
        while True:
            # What has arrived already, then the broker's count once none is waiting.
            m = await cons.receive(0.05)
            if m is None and await held_for(admin, dest, client_id, durable) != len(got):
                m = await cons.receive(first_timeout if not got else 1.0)
            if m is None:
                break
            got.append(m)
    if got:
        await got[-1].acknowledge()
    await conn.close()
    return got


async def held_for(
    admin: AdminClient, dest, client_id: str | None, durable: str | None
) -> int | None:
    """The messages the broker holds for the queue ``dest`` (delivered and unacknowledged
    ones included, and those sent to it in open or prepared transactions) or for the
    durable subscription; None when it cannot say."""
    try:
        if durable:
            rows = await admin.durables(dest.name)
            mine = [r for r in rows if r.get("name") == durable and r.get("clientID") == client_id]
        else:
            rows = await admin.destinations(dest.name, DEST_QUEUE)
            mine = [r for r in rows if r.get("name") == dest.name]
    except AdminError:
        return None
    return int(mine[0].get("nMessages") or 0) if len(mine) == 1 else None


def store_props(kind: str) -> tuple[str, ...]:
    return ("imq.persist.store=jdbc",) if kind == "jdbc" else ()


@pytest.mark.parametrize("kind", ["file", "jdbc"])
@run
async def test_restart_between_send_and_receive(own_broker, kind: str) -> None:
    b = own_broker(*store_props(kind))
    q, t = Queue(name("pq")), Topic(name("pt"))
    cid, dur = name("cid"), "keep"
    # A durable subscription must exist before the topic messages are published.
    conn = await open_conn(b, client_id=cid)
    sess = await conn.create_session()
    sub = await sess.create_durable_subscriber(t, dur)
    await sub.close()
    await conn.close()
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(None)
    for i in range(5):
        await prod.send(TextMessage(f"p{i}", properties={"i": i}), destination=q, priority=i)
    await prod.send(TextMessage("not kept"), destination=q, persistent=False)
    await prod.send(TextMessage("topic kept"), destination=t)
    await conn.close()
    b.stop()

    b = own_broker(*store_props(kind))
    got = await receive_all(b, q)
    assert [m.text for m in got] == ["p4", "p3", "p2", "p1", "p0"]  # priority order survives
    assert all(not m.redelivered for m in got)
    assert [m.properties["i"] for m in got] == [4, 3, 2, 1, 0]
    got = await receive_all(b, t, client_id=cid, durable=dur)
    assert [m.text for m in got] == ["topic kept"]
    b.stop()
    # Acknowledged before the restart: gone after it.
    b = own_broker(*store_props(kind))
    assert await receive_all(b, q, first_timeout=1.0) == []
    assert await receive_all(b, t, client_id=cid, durable=dur, first_timeout=1.0) == []


@run
async def test_delivered_but_unacknowledged_come_back_redelivered(own_broker) -> None:
    b = own_broker(SYNC)
    q = Queue(name("unacked"))
    conn = await open_conn(b)
    sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    prod = await sess.create_producer(q)
    for i in range(3):
        await prod.send(TextMessage(str(i)))
    cons = await sess.create_consumer(q)
    await conn.start()
    got = [await cons.receive(5) for _ in range(3)]
    assert [m.text for m in got] == ["0", "1", "2"]
    await asyncio.sleep(0.3)  # let the delivery records reach the disk
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)
    b = own_broker(SYNC)
    again = await receive_all(b, q)
    assert [m.text for m in again] == ["0", "1", "2"]
    assert all(m.redelivered and m.delivery_count >= 2 for m in again)


@run
async def test_auto_created_destinations_come_back_only_with_messages(own_broker) -> None:
    b = own_broker()
    full, empty = Queue(name("full")), Queue(name("empty"))
    conn = await open_conn(b)
    sess = await conn.create_session()
    await (await sess.create_producer(full)).send(TextMessage("x"))
    await (await sess.create_producer(empty)).send(TextMessage("y"), persistent=False)
    await conn.close()
    b.stop()
    b = own_broker()
    log = b.log_text()
    assert "recovered" in log
    from broker.protocol.jtypes import JInt
    from broker.protocol.types import PacketType

    from .wire import control, login

    peer = login(b.host, b.jms_port)
    peer.request(
        control(PacketType.VERIFY_DESTINATION, 3, JMQDestination=full.name, JMQDestType=JInt(1)),
        PacketType.VERIFY_DESTINATION_REPLY,
        200,
    )
    peer.request(
        control(PacketType.VERIFY_DESTINATION, 4, JMQDestination=empty.name, JMQDestType=JInt(1)),
        PacketType.VERIFY_DESTINATION_REPLY,
        404,
    )


def test_sigkill_loses_no_confirmed_message(own_broker) -> None:
    """A producer counts every SEND_REPLY OK while the broker is SIGKILLed three times;
    afterwards each confirmed message is there exactly once."""
    q = Queue(name("crash"))
    confirmed: list[str] = []

    async def produce_until_killed(b: Any, round_no: int) -> None:
        conn = await open_conn(b)
        sess = await conn.create_session()
        prod = await sess.create_producer(q)
        i = 0
        try:
            while True:
                text = f"{round_no}-{i}"
                await prod.send(TextMessage(text), persistent=True)
                confirmed.append(text)
                i += 1
                if i == 400:
                    os.kill(b.proc.pid, signal.SIGKILL)
        except Exception:
            pass  # the broker died under us: what was confirmed must survive

    for round_no in range(3):
        b = own_broker(SYNC)
        asyncio.run(asyncio.wait_for(produce_until_killed(b, round_no), 60))
        b.proc.wait(10)
        assert len(confirmed) >= 400 * (round_no + 1)
    b = own_broker(SYNC)
    got = asyncio.run(receive_all(b, q))
    texts = [m.text for m in got]
    assert len(texts) == len(set(texts)), "a message was delivered twice"
    missing = set(confirmed) - set(texts)
    assert not missing, f"{len(missing)} confirmed messages lost, e.g. {sorted(missing)[:5]}"


@run
async def test_transactions_across_sigkill(own_broker) -> None:
    b = own_broker(SYNC)
    q = Queue(name("txcrash"))
    conn = await open_conn(b)
    committed = await conn.create_session(transacted=True)
    pending = await conn.create_session(transacted=True)
    p1 = await committed.create_producer(q)
    p2 = await pending.create_producer(q)
    for i in range(50):
        await p1.send(TextMessage(f"c{i}"))
        await p2.send(TextMessage(f"u{i}"))
    await committed.commit()  # its reply comes once the commit is on disk
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)
    b = own_broker(SYNC)
    texts = [m.text for m in await receive_all(b, q)]
    assert texts == [f"c{i}" for i in range(50)]  # all of the committed one, none of the other


async def _prepare_in_doubt(b: Any, q: Queue, consumed_from: Queue):
    """An XA transaction that sends to ``q`` and consumes one message of
    ``consumed_from``, ended and PREPARED; returns its Xid."""
    from openmq_client.xa import create_xa_session

    from .test_transactions import new_xid

    conn = await open_conn(b)
    seed = await conn.create_session()
    await (await seed.create_producer(consumed_from)).send(TextMessage("consume me"))
    sess, xa = await create_xa_session(conn)
    prod = await sess.create_producer(q)
    cons = await sess.create_consumer(consumed_from)
    await conn.start()
    xid = new_xid()
    await xa.start(xid)
    await prod.send(TextMessage("prepared send"))
    got = await cons.receive(5)
    assert got is not None and got.text == "consume me"
    await xa.end(xid)
    await xa.prepare(xid)
    return xid


@run
async def test_prepared_xa_transaction_survives_a_crash(own_broker) -> None:
    from openmq_client.xa import create_xa_session

    b = own_broker(SYNC)
    q, src = Queue(name("xaout")), Queue(name("xain"))
    xid = await _prepare_in_doubt(b, q, src)
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)
    b = own_broker(SYNC)
    assert "PREPARED and in doubt after restart" in b.log_text()
    conn = await open_conn(b)
    _sess, xa = await create_xa_session(conn)
    assert xid in await xa.recover()  # a transaction manager's recovery finds it
    # Held while in doubt: neither its send nor the message it consumed is visible.
    assert await receive_all(b, q, first_timeout=0.5) == []
    assert await receive_all(b, src, first_timeout=0.5) == []
    await xa.commit(xid)
    await conn.close()
    assert [m.text for m in await receive_all(b, q)] == ["prepared send"]
    assert await receive_all(b, src, first_timeout=0.5) == []  # consumed for good
    b.stop()
    b = own_broker(SYNC)
    assert "in doubt" not in b.log_text().split("broker testbroker ready")[-1]


@run
async def test_prepared_transactions_roll_back_at_start_with_autorollback(own_broker) -> None:
    b = own_broker(SYNC)
    q, src = Queue(name("arout")), Queue(name("arin"))
    await _prepare_in_doubt(b, q, src)
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)
    b = own_broker(SYNC, "imq.transaction.autorollback=true")
    assert await receive_all(b, q, first_timeout=0.5) == []
    back = await receive_all(b, src)
    assert [m.text for m in back] == ["consume me"] and back[0].redelivered


@run
async def test_database_store_on_postgresql(own_broker, postgres_url) -> None:
    """imq.persist.store=jdbc with the whole broker on a real PostgreSQL."""
    import uuid

    from .pg import fresh_database

    url = fresh_database(postgres_url, f"imq_{uuid.uuid4().hex[:8]}")
    b = own_broker("imq.persist.store=jdbc", database_url=url)
    q = Queue(name("pgq"))
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    for i in range(20):
        await prod.send(TextMessage(f"pg{i}"))
    await conn.close()
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)
    b = own_broker("imq.persist.store=jdbc", database_url=url)
    assert [m.text for m in await receive_all(b, q)] == [f"pg{i}" for i in range(20)]
