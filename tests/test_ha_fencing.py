"""High availability on a shared PostgreSQL store, continued from tests/test_ha.py (a
file of its own so that the suite's workers share the HA tests): a paused broker
(SIGSTOP) that comes back is fenced off and cannot write over the taker's rows; the
database going away and back takes nobody over; a clean shutdown hands the rows over
unless ``-nofailover``; ``imqcmd takeover bkr``."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from broker.launcher import BrokerProcess
from openmq_client import Queue, TextMessage
from openmq_client.errors import JMSException
from openmq_client.failover import connect_any

from . import test_ha
from .test_client_live import run
from .test_ha import CLUSTER_INTERVAL as INTERVAL
from .test_ha import CLUSTER_THRESHOLD as THRESHOLD
from .test_ha import Cluster, addr, wait_log
from .test_persistence import receive_all

# tests/test_ha.py's fixtures: an HA cluster's brokers on a fresh database, and its rows.
cluster, rows = test_ha.cluster, test_ha.rows

pytestmark = pytest.mark.timeout(600)


@run
async def test_restarted_then_paused_broker_is_fenced_and_cannot_write(cluster: Cluster, rows):
    from broker.models import StoredMessage, StoreOwner

    a, b = cluster.start_pair()
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
    got = [(m.get_property("n"), m.redelivered) for m in await receive_all(b, q)]
    assert sorted(n for n, _ in got) == sorted(acked)
    assert all(r for _, r in got)
    assert await asyncio.to_thread(count_rows, "brokerB") == 0


@run
async def test_paused_broker_with_sends_in_flight_writes_nothing(cluster: Cluster, rows):
    """Sends that reach a paused broker's socket are read after SIGCONT: its store
    refuses them (fenced), the client gets no confirmation, and no row appears."""
    from broker.models import StoredMessage

    a, b = cluster.start_pair()
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


def test_database_going_away_and_back(cluster: Cluster, postgres_url: str) -> None:
    """The database goes away (connections refused and cut) for longer than the
    threshold: both brokers log it and keep running; back, neither takes the other over
    (each waits a threshold of healthy beats first) and both store again."""
    import psycopg

    a, b = cluster.start_pair()
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
            # Nothing may happen: away a threshold and an interval more than the beats
            # already missed, long enough for a broker that gave up to have done so.
            time.sleep(INTERVAL * (THRESHOLD + 1))
        finally:
            admin.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
    # Nothing may happen: a wrong takeover comes at a monitor's first pass once the
    # database is back, when the other's last beat is older than the threshold; each
    # waits a threshold of healthy passes first, so twice the threshold shows it.
    time.sleep(INTERVAL * THRESHOLD * 2)
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

    a, b = cluster.start_pair()
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
async def test_imqcmd_takeover_bkr(cluster: Cluster, rows):
    """``imqcmd takeover bkr -n BROKERID``: refused for a running broker or an unknown
    id; a broker stopped with -nofailover is taken over on request."""
    from broker.models import BrokerState, StoredMessage, StoreOwner

    from .test_imqcmd import run_imqcmd

    a, b = cluster.start_pair()
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
