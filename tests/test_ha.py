"""High availability on a shared PostgreSQL store: two real broker processes, one
database; a broker killed (SIGKILL) or paused (SIGSTOP) is taken over by the other, and
a paused one that comes back is fenced off and cannot write over the taker's rows."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker.launcher import BrokerProcess, start_broker
from openmq_client import AckMode, Queue, TextMessage
from openmq_client.failover import FailoverConnection, broker_list, connect_any
from tests.pg import database_alias, fresh_database

from .test_client_live import run

pytestmark = pytest.mark.timeout(600)

INTERVAL = 1  # imq.cluster.monitor.interval: a failed broker is taken over in seconds
THRESHOLD = 3
# This file's and test_ha_fencing's clusters: beats and monitor passes every half second,
# a broker silent for 2 s has failed (taken over in 2-2.5 s, not 3-4 s).  Four beats,
# not three: a live broker under load has 1.5 s of beats to spare before it looks failed.
CLUSTER_INTERVAL = 0.5
CLUSTER_THRESHOLD = 4


def ha_props(
    broker_id: str,
    cluster: str = "hacluster",
    *,
    interval: float = INTERVAL,
    threshold: int = THRESHOLD,
) -> tuple[str, ...]:
    return (
        "imq.persist.store=jdbc",
        "imq.cluster.ha=true",
        f"imq.cluster.clusterid={cluster}",
        f"imq.brokerid={broker_id}",
        f"imq.cluster.monitor.interval={interval}",
        f"imq.cluster.monitor.threshold={threshold}",
    )


class Cluster:
    """Brokers of one HA cluster on one fresh PostgreSQL database."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp = tmp
        self.url = url
        self.started: list[BrokerProcess] = []

    def start(self, broker_id: str, *extra: str) -> BrokerProcess:
        d = self.tmp / f"{broker_id}-{len(self.started)}"
        d.mkdir()
        props = ha_props(broker_id, interval=CLUSTER_INTERVAL, threshold=CLUSTER_THRESHOLD)
        b = start_broker(d, *props, *extra, database_url=self.url, instance=broker_id)
        self.started.append(b)
        return b

    def start_pair(self) -> tuple[BrokerProcess, BrokerProcess]:
        """brokerA and brokerB, started at the same time (each start is mostly waiting
        for its process to be ready)."""
        with ThreadPoolExecutor(2) as pool:
            a, b = pool.map(self.start, ["brokerA", "brokerB"])
        return a, b

    def close(self) -> None:
        for b in self.started:
            if b.proc.poll() is None:
                try:
                    os.kill(b.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            b.stop()


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[Cluster]:
    url = fresh_database(postgres_url, f"ha_{uuid.uuid4().hex[:10]}")
    c = Cluster(tmp_path, url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def rows(cluster: Cluster, db_access) -> Iterator[str]:
    """A Django alias on the cluster's database, to look at the rows themselves."""
    with database_alias("ha_rows", cluster.url, migrate=False) as alias:
        yield alias


def wait_log(b: BrokerProcess, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in b.log_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not in the log of {b.instance}:\n{b.log_text()}")
        time.sleep(0.2)


def addr(b: BrokerProcess) -> str:
    return f"{b.host}:{b.portmapper_port}"


async def list_of(b: BrokerProcess, n: int) -> list[tuple[str, int]]:
    """The broker list ``b`` gives in HELLO_REPLY once it names ``n`` brokers."""
    deadline = time.monotonic() + 30
    while True:
        conn = await connect_any([addr(b)])
        found = broker_list(conn)
        hello = dict(conn.hello_reply)
        await conn.close()
        if len(found) >= n or time.monotonic() > deadline:
            assert hello.get("JMQHA") is True and hello.get("JMQClusterID") == "hacluster"
            return found
        await asyncio.sleep(0.5)


@run
async def test_sigkill_under_load_taken_over_nothing_acknowledged_lost(cluster: Cluster, rows):
    """A producer and an AUTO_ACKNOWLEDGE consumer on broker A, both FailoverConnections
    with A in their address list only; A is killed (SIGKILL) while they run.  They move to
    B (learnt from HELLO_REPLY's broker list), B takes A's rows over, and every message
    sent arrives; a message seen twice is flagged JMSRedelivered."""
    from broker.models import BrokerState, StoredMessage, StoreOwner

    a, b = cluster.start_pair()
    listed = await list_of(a, 2)
    assert sorted(f"{h}:{p}" for h, p in listed) == sorted([addr(a), addr(b)])
    q = Queue("ha_orders")
    total = 400
    acked: list[int] = []  # sends the broker confirmed (SEND_REPLY), maybe after a resend
    received: list[tuple[int, bool, str]] = []  # (n, JMSRedelivered, JMSMessageID)
    done_sending = asyncio.Event()
    pconn = await FailoverConnection.open([addr(a)], request_timeout=20)
    cconn = await FailoverConnection.open([addr(a)], request_timeout=20)

    async def produce() -> None:
        sess = await pconn.create_session()
        prod = await sess.create_producer(q)
        for n in range(total):
            msg = TextMessage(f"m{n}")
            msg.set_int_property("n", n)
            await prod.send(msg)
            acked.append(n)
            await asyncio.sleep(0.005)
        done_sending.set()

    async def consume() -> None:
        sess = await cconn.create_session(AckMode.AUTO_ACKNOWLEDGE)
        cons = await sess.create_consumer(q)
        await cconn.start()
        deadline = None
        while True:
            m = await cons.receive(1.0)
            if m is not None:
                received.append((m.get_property("n"), m.redelivered, m.message_id))
                if not done_sending.is_set():
                    # Slower than the producer: the killed broker has a backlog.
                    await asyncio.sleep(0.02)
            elif done_sending.is_set():
                if set(acked) <= {n for n, _, _ in received}:
                    break
                deadline = deadline or time.monotonic() + 90
                if time.monotonic() > deadline:
                    break

    consumer = asyncio.create_task(consume())
    producer = asyncio.create_task(produce())
    while len(acked) < total // 3:
        await asyncio.sleep(0.05)
    os.kill(a.proc.pid, signal.SIGKILL)
    a.proc.wait(10)
    await asyncio.wait_for(producer, 300)
    await asyncio.wait_for(consumer, 300)
    await pconn.close()
    await cconn.close()

    wait_log(b, "took over broker brokerA")
    assert pconn.reconnects == 1 and cconn.reconnects == 1
    got = [n for n, _, _ in received]
    assert acked == list(range(total))  # every send confirmed, some after a failover
    missing = sorted(set(acked) - set(got))
    assert missing == [], f"sent but never received: {missing}"
    seen: set[int] = set()
    for n, redelivered, _ in received:
        if n in seen:
            assert redelivered, f"message {n} delivered twice without JMSRedelivered"
        seen.add(n)
    assert any(r for _, r, _ in received)  # the backlog came from the taker, redelivered
    print(
        f"sent {total}, acknowledged {len(acked)}, resent after the failover "
        f"{sum(p.resent for s in pconn._sessions for p in s._producers)}, "
        f"received {len(received)} ({len(set(got))} distinct, "
        f"{sum(1 for _, r, _ in received if r)} redelivered)"
    )
    owner = await asyncio.to_thread(
        lambda: StoreOwner.objects.using(rows).get(broker_instance="brokerA")
    )
    assert owner.broker_state == BrokerState.FAILOVER_COMPLETE
    assert owner.taken_over_by == "brokerB" and owner.state == StoreOwner.State.STOPPED
    left = await asyncio.to_thread(
        lambda: StoredMessage.objects.using(rows).filter(broker_instance="brokerA").count()
    )
    assert left == 0  # every row went to the taker (and was consumed there)


def test_same_broker_id_twice_is_refused(cluster: Cluster) -> None:
    a = cluster.start("brokerA")
    with pytest.raises(RuntimeError) as failed:
        cluster.start("brokerA")
    assert "broker id brokerA is in use by the broker at" in str(failed.value)
    assert a.proc.poll() is None  # the first one goes on


def test_ha_needs_broker_and_cluster_ids(cluster: Cluster, tmp_path: Path) -> None:
    d = tmp_path / "noid"
    d.mkdir()
    with pytest.raises(RuntimeError) as failed:
        start_broker(
            d,
            "imq.persist.store=jdbc",
            "imq.cluster.ha=true",
            "imq.cluster.clusterid=x",
            database_url=cluster.url,
        )
    assert "imq.cluster.ha=true needs imq.brokerid" in str(failed.value)


@run
async def test_a_message_sent_again_to_the_taker_is_kept_once(cluster: Cluster, rows):
    """A persistent message stored by A whose reply was lost, sent again to B (with its
    first id and the R bit, as FailoverConnection does) before B takes A over: B keeps
    its own copy and drops A's at the takeover; the consumer gets it once."""
    from broker.models import StoredMessage

    a, b = cluster.start_pair()
    q = Queue("ha_resend")
    conn_a = await connect_any([addr(a)], request_timeout=20)
    m = TextMessage("once")
    await (await (await conn_a.create_session()).create_producer(q)).send(m)
    await conn_a.close()
    conn_b = await connect_any([addr(b)], request_timeout=20)
    sess_b = await conn_b.create_session()
    await (await sess_b.create_producer(q)).send(m, redelivered=True)
    a.stop()  # SIGTERM: handed to B at once
    wait_log(b, "took over broker brokerA")
    wait_log(b, "1 message(s) were sent here again by their producers")

    def stored() -> list[str]:
        return list(
            StoredMessage.objects.using(rows)
            .filter(destination="ha_resend")
            .values_list("broker_instance", flat=True)
        )

    assert await asyncio.to_thread(stored) == ["brokerB"]  # one row: B's own
    key = m.message_id
    cons = await sess_b.create_consumer(q)
    await conn_b.start()
    got = await cons.receive(10)
    assert got is not None and got.text == "once" and got.message_id == key  # type: ignore[attr-defined]
    assert await cons.receive(1) is None
    await conn_b.close()


@run
async def test_durable_subscription_and_its_messages_move_to_the_taker(cluster: Cluster, rows):
    """A durable subscription on A, with messages it has not consumed: after A is killed
    and taken over, the subscriber (same client ID and name) finds it on B with every
    message, redelivered; B's own durable of the same name is not doubled."""
    from broker.models import StoredDurable
    from openmq_client import Topic

    a, b = cluster.start_pair()
    t = Topic("ha_news")

    async def subscribe(target: BrokerProcess) -> None:
        conn = await connect_any([addr(target)], client_id="reader", request_timeout=20)
        sess = await conn.create_session()
        await sess.create_durable_subscriber(t, "daily")
        await conn.close()

    await subscribe(a)
    await subscribe(b)  # B has the same durable subscription (no messages)
    conn = await connect_any([addr(a)], request_timeout=20)
    sess = await conn.create_session()
    prod = await sess.create_producer(t)
    for i in range(5):
        await prod.send(TextMessage(f"n{i}"))
    await conn.close()
    os.kill(a.proc.pid, signal.SIGKILL)
    a.proc.wait(10)
    wait_log(b, "took over broker brokerA")
    assert "0 durable subscriptions, 5 messages" in b.log_text()  # B's own one took them

    from .test_persistence import receive_all

    got = [
        (m.text, m.redelivered)
        for m in await receive_all(b, t, client_id="reader", durable="daily")
    ]
    assert got == [(f"n{i}", True) for i in range(5)]
    durables = await asyncio.to_thread(
        lambda: list(StoredDurable.objects.using(rows).values_list("broker_instance", "name"))
    )
    assert durables == [("brokerB", "daily")]


@run
async def test_prepared_xa_transaction_is_taken_over_in_doubt(cluster: Cluster, rows):
    """A PREPARED XA transaction of the killed broker is in doubt on the taker: a
    transaction manager's recovery finds it there and commits it."""
    from openmq_client.xa import create_xa_session

    from .test_persistence import _prepare_in_doubt, receive_all

    a, b = cluster.start_pair()
    q, src = Queue("ha_xaout"), Queue("ha_xain")
    xid = await _prepare_in_doubt(a, q, src)
    os.kill(a.proc.pid, signal.SIGKILL)
    a.proc.wait(10)
    wait_log(b, "took over broker brokerA")
    assert "1 transactions" in b.log_text() and "PREPARED and in doubt" in b.log_text()
    conn = await connect_any([addr(b)], request_timeout=20)
    _sess, xa = await create_xa_session(conn)
    assert xid in await xa.recover()
    assert await receive_all(b, q, first_timeout=0.5) == []  # held while in doubt
    await xa.commit(xid)
    await conn.close()
    assert [m.text for m in await receive_all(b, q)] == ["prepared send"]
    assert await receive_all(b, src, first_timeout=0.5) == []  # consumed for good
