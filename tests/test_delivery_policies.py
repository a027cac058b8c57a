"""Delivery to several consumers, over TCP against a real broker.

Queues: OpenMQ's maxNumActiveConsumers / maxNumBackupConsumers model and the
administrator guide's delivery policies (single, failover, round-robin) as presets
of it (``imq.queue.deliverypolicy``).  Topics: durable subscriptions, OpenMQ's
JMQShare sharing, JMS 2.0 shared subscriptions, unsubscribe, and the SET_CLIENTID
sharing and namespace rules.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openmq_client import (
    AckMode,
    Connection,
    InvalidClientIDException,
    InvalidDestinationException,
    JMSException,
    MessageConsumer,
    Queue,
    ResourceAllocationException,
    TextMessage,
    Topic,
)

from .test_client_live import name, open_conn, run

pytestmark = pytest.mark.timeout(120)


CONFLICT = 409


async def send(conn: Connection, dest: Queue | Topic, *texts: str) -> None:
    sess = await conn.create_session()
    prod = await sess.create_producer(dest)
    for t in texts:
        await prod.send(TextMessage(t), persistent=False)
    await sess.close()


async def drain(cons: MessageConsumer, quiet: float = 0.5, first: float = 5.0) -> list[str]:
    """Texts received until nothing comes for ``quiet`` seconds (``first`` for the first)."""
    got: list[str] = []
    timeout = first
    while True:
        m = await cons.receive(timeout)
        if m is None:
            return got
        got.append(m.text)  # type: ignore[attr-defined]
        timeout = quiet


async def collect(consumers: list[MessageConsumer], total: int, timeout: float = 10) -> list[list]:
    """Messages per consumer until ``total`` have arrived, then a short check for extras."""
    got: list[list] = [[] for _ in consumers]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while sum(map(len, got)) < total and loop.time() < deadline:
        for i, c in enumerate(consumers):
            m = await c.receive(0.05)
            if m is not None:
                got[i].append(m)
    for i, c in enumerate(consumers):
        m = await c.receive(0.3)
        if m is not None:
            got[i].append(m)
    return got


def texts(msgs: list) -> list[str]:
    return [m.text for m in msgs]


# -- queues ------------------------------------------------------------------------


@run
async def test_round_robin_is_the_default(broker: Any) -> None:
    q = Queue(name("rr"))
    conn = await open_conn(broker)
    consumers = []
    for _ in range(3):
        sess = await conn.create_session()
        consumers.append(await sess.create_consumer(q))
    await conn.start()
    await send(conn, q, *(str(i) for i in range(9)))
    got = await collect(consumers, 9)
    assert [len(g) for g in got] == [3, 3, 3]
    assert sorted(int(t) for g in got for t in texts(g)) == list(range(9))
    await conn.close()


@run
async def test_single_refuses_a_second_consumer(own_broker: Any) -> None:
    # The policy wins over the autocreate counts.
    b = own_broker(
        "imq.queue.deliverypolicy=single", "imq.autocreate.queue.maxNumActiveConsumers=5"
    )
    q = Queue(name("single"))
    a = await open_conn(b)
    first = await (await a.create_session()).create_consumer(q)
    other = await open_conn(b)
    osess = await other.create_session()
    with pytest.raises(ResourceAllocationException) as info:
        await osess.create_consumer(q)
    assert info.value.status == CONFLICT
    assert isinstance(info.value, JMSException)

    await a.start()
    await send(a, q, "one")
    m = await first.receive(5)
    assert m is not None and m.text == "one"  # type: ignore[attr-defined]
    await first.close()

    # With the first one gone there is room again.
    second = await osess.create_consumer(q)
    await other.start()
    await send(a, q, "two")
    m = await second.receive(5)
    assert m is not None and m.text == "two"  # type: ignore[attr-defined]
    await a.close()
    await other.close()


@run
async def test_failover_backup_takes_over(own_broker: Any) -> None:
    b = own_broker("imq.queue.deliverypolicy=failover")
    q = Queue(name("fo"))
    a = await open_conn(b)
    primary = await (await a.create_session(AckMode.CLIENT_ACKNOWLEDGE)).create_consumer(q)
    bconn = await open_conn(b)
    backup = await (await bconn.create_session()).create_consumer(q)
    # Backups are unlimited under failover.
    cconn = await open_conn(b)
    third = await (await cconn.create_session()).create_consumer(q)
    await a.start()
    await bconn.start()
    await cconn.start()

    await send(bconn, q, "m1", "m2", "m3")
    got = [await primary.receive(5) for _ in range(3)]
    assert [m.text for m in got if m is not None] == ["m1", "m2", "m3"]  # type: ignore[attr-defined]
    assert await backup.receive(0.5) is None
    assert await third.receive(0.2) is None

    # The primary goes without acknowledging: its messages come back, redelivered,
    # to the oldest backup, and everything after that goes there too.
    await a.close()
    again = [await backup.receive(5) for _ in range(3)]
    assert [m.text for m in again if m is not None] == ["m1", "m2", "m3"]  # type: ignore[attr-defined]
    assert all(m is not None and m.redelivered for m in again)
    await send(bconn, q, "m4")
    m = await backup.receive(5)
    assert m is not None and m.text == "m4" and not m.redelivered  # type: ignore[attr-defined]
    assert await third.receive(0.5) is None

    # And when that one goes, the next backup.
    await bconn.close()
    await send(cconn, q, "m5")
    m = await third.receive(5)
    assert m is not None and m.text == "m5"  # type: ignore[attr-defined]
    await cconn.close()


@run
async def test_active_and_backup_counts(own_broker: Any) -> None:
    b = own_broker(
        "imq.autocreate.queue.maxNumActiveConsumers=2",
        "imq.autocreate.queue.maxNumBackupConsumers=1",
    )
    q = Queue(name("ab"))
    conn = await open_conn(b)
    sessions = [await conn.create_session() for _ in range(4)]
    c1 = await sessions[0].create_consumer(q)
    c2 = await sessions[1].create_consumer(q)
    c3 = await sessions[2].create_consumer(q)  # backup
    with pytest.raises(JMSException) as info:
        await sessions[3].create_consumer(q)
    assert info.value.status == CONFLICT
    assert "backup" in (info.value.reason or "")
    await conn.start()

    await send(conn, q, "a", "b", "c", "d")
    got = await collect([c1, c2, c3], 4)
    assert [len(g) for g in got] == [2, 2, 0]

    await c1.close()
    # c3 is active now, and there is room for a backup again.
    c4 = await sessions[3].create_consumer(q)
    await send(conn, q, "e", "f")
    got = await collect([c2, c3, c4], 2)
    assert [len(g) for g in got] == [1, 1, 0]
    assert sorted(texts(got[0] + got[1])) == ["e", "f"]
    await conn.close()


# -- topics: durable and shared subscriptions ------------------------------------


@run
async def test_durable_kept_while_away_and_unsubscribe_conflict(broker: Any) -> None:
    cid = name("dur")
    t = Topic(name("dt"))
    conn = await open_conn(broker, client_id=cid)
    sess = await conn.create_session()
    sub = await sess.create_durable_subscriber(t, "d1")
    # Unsubscribe while the consumer is attached: 409.
    with pytest.raises(JMSException) as info:
        await sess.unsubscribe("d1")
    assert info.value.status == CONFLICT
    # A second, unshared consumer on the in-use durable: 409.
    with pytest.raises(JMSException) as info:
        await sess.create_durable_subscriber(t, "d1")
    assert info.value.status == CONFLICT
    await sub.close()
    await send(conn, t, "x", "y")
    await conn.close()

    conn = await open_conn(broker, client_id=cid)
    sess = await conn.create_session()
    sub = await sess.create_durable_subscriber(t, "d1")
    await conn.start()
    assert await drain(sub) == ["x", "y"]
    await sub.close()
    await sess.unsubscribe("d1")
    with pytest.raises(InvalidDestinationException):
        await sess.unsubscribe("d1")
    await conn.close()


@run
async def test_classic_shared_durable(broker: Any) -> None:
    cid = name("shcid")
    t = Topic(name("sdt"))
    a = await open_conn(broker, client_id=cid, enable_shared_client_id=True)
    b = await open_conn(broker, client_id=cid, enable_shared_client_id=True)
    sa = await (await a.create_session()).create_durable_subscriber(t, "shared")
    sb = await (await b.create_session()).create_durable_subscriber(t, "shared")
    # Same client ID (shared), but this consumer does not say JMQShare: refused.
    c = await open_conn(broker)
    await c.set_client_id(cid, shared=True)
    csess = await c.create_session()
    with pytest.raises(JMSException) as info:
        await csess.create_durable_subscriber(t, "shared")
    assert info.value.status == CONFLICT
    await a.start()
    await b.start()

    await send(c, t, *(str(i) for i in range(6)))
    got = await collect([sa, sb], 6)
    assert all(got), "both sharers get messages"
    assert sorted(int(x) for g in got for x in texts(g)) == list(range(6))

    # Kept while every sharer is away.
    await a.close()
    await b.close()
    await send(c, t, "later")
    a = await open_conn(broker, client_id=cid, enable_shared_client_id=True)
    sa = await (await a.create_session()).create_durable_subscriber(t, "shared")
    await a.start()
    assert await drain(sa) == ["later"]
    await sa.close()

    # An unshared durable in use refuses a sharing joiner as well.
    s1 = await csess.create_durable_subscriber(t, "alone")
    asess = await a.create_session()
    with pytest.raises(JMSException) as info:
        await asess.create_durable_subscriber(t, "alone")
    assert info.value.status == CONFLICT
    await s1.close()
    await csess.unsubscribe("alone")
    await (await a.create_session()).unsubscribe("shared")
    await a.close()
    await c.close()


@run
async def test_classic_shared_non_durable(broker: Any) -> None:
    cid = name("ndcid")
    t = Topic(name("snt"))
    kw = {"client_id": cid, "enable_shared_client_id": True, "enable_shared_subscriptions": True}
    a = await open_conn(broker, **kw)
    b = await open_conn(broker, **kw)
    ca = await (await a.create_session()).create_consumer(t, "n > 0")
    cb = await (await b.create_session()).create_consumer(t, "n > 0")
    # A different selector is another subscription; noLocal must match the sharers.
    cc = await (await b.create_session()).create_consumer(t)
    with pytest.raises(JMSException) as info:
        await (await b.create_session()).create_consumer(t, "n > 0", no_local=True)
    assert info.value.status == CONFLICT
    await a.start()
    await b.start()

    p = await open_conn(broker)
    psess = await p.create_session()
    prod = await psess.create_producer(t)
    for i in range(6):
        m = TextMessage(str(i))
        m.set_property("n", i)
        await prod.send(m, persistent=False)
    got = await collect([ca, cb], 5)
    assert all(got)
    assert sorted(int(x) for g in got for x in texts(g)) == [1, 2, 3, 4, 5]
    assert len(await drain(cc)) == 6
    for conn in (a, b, p):
        await conn.close()


@run
async def test_jms2_shared_non_durable(broker: Any) -> None:
    t = Topic(name("jt"))
    a = await open_conn(broker)
    b = await open_conn(broker)
    ca = await (await a.create_session()).create_shared_consumer(t, "work")
    cb = await (await b.create_session()).create_shared_consumer(t, "work")
    # sharedConsumerFlowLimit (default 5) caps a shared consumer's prefetch.
    assert ca.prefetch == 5
    plain = await (await a.create_session()).create_consumer(t)
    # Joining with another selector while it has consumers: 409.
    with pytest.raises(JMSException) as info:
        await (await b.create_session()).create_shared_consumer(t, "work", "x = 1")
    assert info.value.status == CONFLICT
    await a.start()
    await b.start()

    await send(a, t, *(str(i) for i in range(10)))
    got = await collect([ca, cb], 10)
    assert all(got), "both sharers get messages"
    assert sorted(int(x) for g in got for x in texts(g)) == list(range(10))
    assert sorted(int(x) for x in await drain(plain)) == list(range(10))

    # With its last consumer gone the subscription is gone: nothing is kept, and
    # the name can be used again with another selector.
    await ca.close()
    await cb.close()
    await send(a, t, "lost")
    again = await (await b.create_session()).create_shared_consumer(t, "work", "x = 1")
    m = TextMessage("kept")
    m.set_property("x", 1)
    sess = await a.create_session()
    await (await sess.create_producer(t)).send(m, persistent=False)
    assert await drain(again) == ["kept"]
    await a.close()
    await b.close()


@run
async def test_jms2_shared_durable(broker: Any) -> None:
    t = Topic(name("jdt"))
    sub = name("jsd")
    a = await open_conn(broker)
    b = await open_conn(broker)
    ca = await (await a.create_session()).create_shared_durable_consumer(t, sub)
    bsess = await b.create_session()
    cb = await bsess.create_shared_durable_consumer(t, sub)
    with pytest.raises(JMSException) as info:
        await bsess.unsubscribe(sub)
    assert info.value.status == CONFLICT
    with pytest.raises(JMSException) as info:
        await bsess.create_shared_durable_consumer(t, sub, "x = 1")
    assert info.value.status == CONFLICT
    await a.start()
    await b.start()
    await send(a, t, *(str(i) for i in range(6)))
    got = await collect([ca, cb], 6)
    assert sorted(int(x) for g in got for x in texts(g)) == list(range(6))

    # Kept while all sharers are away, delivered when one comes back.
    await a.close()
    await cb.close()
    # An unshared durable subscriber needs a client ID: 412 PRECONDITION_FAILED.
    with pytest.raises(JMSException) as info:
        await bsess.create_durable_subscriber(t, sub)
    assert info.value.status == 412
    await send(b, t, "p", "q")
    cb = await bsess.create_shared_durable_consumer(t, sub)
    assert await drain(cb) == ["p", "q"]
    await cb.close()
    await bsess.unsubscribe(sub)
    with pytest.raises(InvalidDestinationException):
        await bsess.unsubscribe(sub)
    await b.close()


@run
async def test_max_shared_consumers(own_broker: Any) -> None:
    b = own_broker("imq.autocreate.topic.maxNumSharedConsumers=2")
    t = Topic(name("mt"))
    conn = await open_conn(b)
    sess = await conn.create_session()
    first = await sess.create_shared_consumer(t, "s")
    await sess.create_shared_consumer(t, "s")
    with pytest.raises(JMSException) as info:
        await sess.create_shared_consumer(t, "s")
    assert info.value.status == CONFLICT
    await first.close()
    await sess.create_shared_consumer(t, "s")
    await conn.close()


# -- SET_CLIENTID ------------------------------------------------------------------


@run
async def test_client_id_sharing_rules(broker: Any) -> None:
    conns: list[Connection] = []

    async def claim(cid: str, **kw: Any) -> Connection:
        c = await open_conn(broker)
        conns.append(c)
        await c.set_client_id(cid, **kw)
        return c

    async def refused(cid: str, **kw: Any) -> None:
        c = await open_conn(broker)
        conns.append(c)
        with pytest.raises(InvalidClientIDException) as info:
            await c.set_client_id(cid, **kw)
        assert info.value.status == CONFLICT

    # Unshared: a second claim is refused, shared or not.
    cid = name("u")
    await claim(cid)
    await refused(cid)
    await refused(cid, shared=True)

    # Shared: any number of shared claims; an unshared one is refused.
    cid = name("s")
    await claim(cid, shared=True)
    await claim(cid, shared=True)
    await refused(cid)

    # Namespaces: unique within one, shared across different ones.
    cid = name("ns")
    await claim(cid, shared=True, namespace="n1")
    await claim(cid, shared=True, namespace="n2")
    await refused(cid, shared=True, namespace="n1")
    await claim(cid, shared=True)

    # Claimed without a namespace: a request naming one is refused.
    cid = name("nn")
    await claim(cid, shared=True)
    await refused(cid, shared=True, namespace="n1")

    # Released when the connection goes.
    cid = name("r")
    first = await claim(cid)
    await first.close()
    await claim(cid)

    for c in conns:
        await c.close()
