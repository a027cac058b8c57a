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
from pathlib import Path

import pytest

from broker.launcher import BrokerProcess, start_broker
from openmq_client import AckMode, Queue, TextMessage
from openmq_client.errors import JMSException
from openmq_client.failover import FailoverConnection, broker_list, connect_any
from tests.pg import database_alias, fresh_database

from .test_client_live import run

pytestmark = pytest.mark.timeout(600)

INTERVAL = 1  # imq.cluster.monitor.interval: a failed broker is taken over in seconds
THRESHOLD = 3


def ha_props(broker_id: str, cluster: str = "hacluster") -> tuple[str, ...]:
    return (
        "imq.persist.store=jdbc",
        "imq.cluster.ha=true",
        f"imq.cluster.clusterid={cluster}",
        f"imq.brokerid={broker_id}",
        f"imq.cluster.monitor.interval={INTERVAL}",
        f"imq.cluster.monitor.threshold={THRESHOLD}",
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
        b = start_broker(d, *ha_props(broker_id), *extra, database_url=self.url, instance=broker_id)
        self.started.append(b)
        return b

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

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
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


@run
async def test_restarted_then_paused_broker_is_fenced_and_cannot_write(cluster: Cluster, rows):
    from broker.models import StoredMessage, StoreOwner

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
    q = Queue("ha_fenced")

    async def send(target: BrokerProcess, first: int, count: int) -> list[int]:
        conn = await connect_any([addr(target)], request_timeout=20)
        sess = await conn.create_session()
        prod = await sess.create_producer(q)
        done = []
        for n in range(first, first + count):
            msg = TextMessage(f"m{n}")
            msg.set_int_property("n", n)
            await prod.send(msg)
            done.append(n)
        await conn.close()
        return done

    def count_rows(broker_id: str) -> int:
        return StoredMessage.objects.using(rows).filter(broker_instance=broker_id).count()

    acked = await send(a, 0, 20)
    os.kill(a.proc.pid, signal.SIGKILL)
    a.proc.wait(10)
    wait_log(b, "took over broker brokerA")
    # The killed broker comes back: its rows are with B now, it starts empty.
    a = cluster.start("brokerA")
    acked += await send(a, 20, 30)
    assert await asyncio.to_thread(count_rows, "brokerA") == 30
    epoch = await asyncio.to_thread(
        lambda: StoreOwner.objects.using(rows).get(broker_instance="brokerA").epoch
    )

    # Paused past the threshold: B takes it over again; sends made to it meanwhile wait
    # in its socket, and when it runs again they reach a store that is no longer its.
    # A consumer connected to A asks for the queue while A is stopped: when A runs again
    # it must not hand it what it still holds in memory (B has those now).
    watcher = await connect_any([addr(a)], request_timeout=60)
    wsess = await watcher.create_session()
    await watcher.start()
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        adding = asyncio.create_task(wsess.create_consumer(q))
        deadline = time.monotonic() + 60
        while b.log_text().count("took over broker brokerA") < 2:
            assert time.monotonic() < deadline, b.log_text()
            await asyncio.sleep(0.2)
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    try:
        from_a = await (await asyncio.wait_for(adding, 30)).receive(5.0)
    except JMSException:
        from_a = None
    assert from_a is None, "the fenced broker delivered a message it no longer owns"
    assert "deliveries held until the store confirms" in a.log_text()
    owner = await asyncio.to_thread(
        lambda: StoreOwner.objects.using(rows).get(broker_instance="brokerA")
    )
    assert owner.epoch == epoch + 1 and owner.taken_over_by == "brokerB"
    # Writes it attempts now find their epoch fenced off; it says so and stops.
    wait_log(a, "fenced off")
    a.proc.wait(30)
    assert a.proc.returncode is not None
    assert await asyncio.to_thread(count_rows, "brokerA") == 0

    # B has all 50, each exactly once (taken over: marked redelivered).
    conn = await connect_any([addr(b)], request_timeout=20)
    sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    cons = await sess.create_consumer(q)
    await conn.start()
    got = []
    while (m := await cons.receive(5.0)) is not None:
        got.append((m.get_property("n"), m.redelivered))
    await conn.close()
    assert sorted(n for n, _ in got) == sorted(acked)
    assert all(r for _, r in got)
    assert await asyncio.to_thread(count_rows, "brokerB") == 0


@run
async def test_paused_broker_with_sends_in_flight_writes_nothing(cluster: Cluster, rows):
    """Sends that reach a paused broker's socket are read after SIGCONT: its store
    refuses them (fenced), the client gets no confirmation, and no row appears."""
    from broker.models import StoredMessage

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
    q = Queue("ha_inflight")
    conn = await connect_any([addr(a)], request_timeout=60)
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    await prod.send(TextMessage("before"))
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        late = asyncio.create_task(prod.send(TextMessage("while paused")))
        wait_log(b, "took over broker brokerA")
        assert not late.done()
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    with pytest.raises(JMSException):
        await asyncio.wait_for(late, 60)
    wait_log(a, "fenced off")
    a.proc.wait(30)
    n = await asyncio.to_thread(
        lambda: list(StoredMessage.objects.using(rows).values_list("broker_instance", flat=True))
    )
    assert n == ["brokerB"]  # "before", taken over; "while paused" nowhere


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


def test_database_going_away_and_back(cluster: Cluster, postgres_url: str) -> None:
    """The database goes away (connections refused and cut) for longer than the
    threshold: both brokers log it and keep running; back, neither takes the other over
    (each waits a threshold of healthy beats first) and both store again."""
    import psycopg

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
    dbname = cluster.url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            [dbname],
        )
        try:
            wait_log(a, "heartbeat failed")
            wait_log(b, "heartbeat failed")
            time.sleep(INTERVAL * THRESHOLD * 2)
        finally:
            admin.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
    time.sleep(INTERVAL * THRESHOLD * 3)
    assert a.proc.poll() is None and b.proc.poll() is None
    assert "took over" not in a.log_text() + b.log_text()

    async def roundtrip() -> str | None:
        conn = await connect_any([addr(a)], request_timeout=20)
        sess = await conn.create_session()
        await (await sess.create_producer(Queue("ha_back"))).send(TextMessage("back"))
        cons = await sess.create_consumer(Queue("ha_back"))
        await conn.start()
        m = await cons.receive(10)
        await conn.close()
        return m.text if m is not None else None

    assert asyncio.run(roundtrip()) == "back"


@run
async def test_clean_shutdown_fails_over_and_nofailover_keeps_the_rows(cluster: Cluster, rows):
    """As OpenMQ's: an HA broker that is shut down hands its data to another broker at
    once (FAILOVER_PENDING); ``imqcmd shutdown bkr -nofailover`` keeps it for its restart."""
    from broker.models import BrokerState, StoredMessage, StoreOwner

    from .test_imqcmd import run_imqcmd

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
    q = Queue("ha_shutdown")

    async def send(target: BrokerProcess, texts: list[str]) -> None:
        conn = await connect_any([addr(target)], request_timeout=20)
        sess = await conn.create_session()
        prod = await sess.create_producer(q)
        for t in texts:
            await prod.send(TextMessage(t))
        await conn.close()

    def state(broker_id: str) -> tuple[str, str, int]:
        o = StoreOwner.objects.using(rows).get(broker_instance=broker_id)
        held = StoredMessage.objects.using(rows).filter(broker_instance=broker_id).count()
        return o.broker_state, o.taken_over_by, held

    await send(a, ["a1", "a2"])
    a.stop()  # SIGTERM: a clean shutdown
    wait_log(b, "brokerA (127.0.0.1:")
    wait_log(b, "took over broker brokerA")
    assert "it was shut down for failover" in b.log_text()
    assert await asyncio.to_thread(state, "brokerA") == (
        BrokerState.FAILOVER_COMPLETE,
        "brokerB",
        0,
    )

    # Restarted, then shut down with -nofailover: its new rows stay its own.
    a = cluster.start("brokerA")
    await send(a, ["a3"])
    done = await asyncio.to_thread(
        run_imqcmd, a, "shutdown", "bkr", "-nofailover", answer="admin\n"
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    a.proc.wait(60)
    assert await asyncio.to_thread(state, "brokerA") == (BrokerState.SHUTDOWN_COMPLETE, "", 1)
    # B's monitor passes over it; restarted, A has its message.
    time.sleep(INTERVAL * (THRESHOLD + 2))
    assert b.log_text().count("took over broker brokerA") == 1
    a = cluster.start("brokerA")
    conn = await connect_any([addr(a)], request_timeout=20)
    sess = await conn.create_session()
    cons = await sess.create_consumer(q)
    await conn.start()
    m = await cons.receive(10)
    await conn.close()
    assert m is not None and m.text == "a3"


@run
async def test_a_message_sent_again_to_the_taker_is_kept_once(cluster: Cluster, rows):
    """A persistent message stored by A whose reply was lost, sent again to B (with its
    first id and the R bit, as FailoverConnection does) before B takes A over: B keeps
    its own copy and drops A's at the takeover; the consumer gets it once."""
    from broker.models import StoredMessage

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
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

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
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

    conn = await connect_any([addr(b)], client_id="reader", request_timeout=20)
    sess = await conn.create_session()
    sub = await sess.create_durable_subscriber(t, "daily")
    await conn.start()
    got = []
    while (m := await sub.receive(5.0)) is not None:
        got.append((m.text, m.redelivered))
    await conn.close()
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

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
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


@run
async def test_imqcmd_takeover_bkr(cluster: Cluster, rows):
    """``imqcmd takeover bkr -n BROKERID``: refused for a running broker or an unknown
    id; a broker stopped with -nofailover is taken over on request."""
    from broker.models import BrokerState, StoredMessage, StoreOwner

    from .test_imqcmd import run_imqcmd

    a = cluster.start("brokerA")
    b = cluster.start("brokerB")
    q = Queue("ha_manual")
    conn = await connect_any([addr(a)], request_timeout=20)
    prod = await (await conn.create_session()).create_producer(q)
    for t in ("m1", "m2"):
        await prod.send(TextMessage(t))
    await conn.close()

    def imqcmd(target: BrokerProcess, *args: str):
        return run_imqcmd(target, *args, answer="admin\n")

    running = await asyncio.to_thread(imqcmd, b, "takeover", "bkr", "-n", "brokerA")
    assert running.returncode != 0 and "broker brokerA is running" in running.stderr
    unknown = await asyncio.to_thread(imqcmd, b, "takeover", "bkr", "-n", "nosuch")
    assert unknown.returncode != 0 and "no broker nosuch in HA cluster" in unknown.stderr
    stopped = await asyncio.to_thread(imqcmd, a, "shutdown", "bkr", "-nofailover")
    assert stopped.returncode == 0, stopped.stderr
    a.proc.wait(60)
    done = await asyncio.to_thread(imqcmd, b, "takeover", "bkr", "-n", "brokerA")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "taking over broker brokerA on request" in b.log_text()
    assert "took over broker brokerA" in b.log_text()

    def state() -> tuple[str, str, int]:
        o = StoreOwner.objects.using(rows).get(broker_instance="brokerA")
        held = StoredMessage.objects.using(rows).filter(broker_instance="brokerA").count()
        return o.broker_state, o.taken_over_by, held

    assert await asyncio.to_thread(state) == (BrokerState.FAILOVER_COMPLETE, "brokerB", 0)
    conn = await connect_any([addr(b)], request_timeout=20)
    cons = await (await conn.create_session()).create_consumer(q)
    await conn.start()
    got = [(await cons.receive(10)).text for _ in range(2)]
    await conn.close()
    assert got == ["m1", "m2"]
