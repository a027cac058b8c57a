"""Metrics and live events: counters, GET_METRICS/RESET_BROKER, samples on Redis, rows.

Every broker here is a real ``manage.py runbroker`` process; the channel layer is a real
redis-server (tests/redis.py), the portal's WebSocket consumer runs under Channels'
``WebsocketCommunicator``.  Waits are bounded polls for a condition, never sleeps that a
slow machine could outrun.

The javaser test compares with what OpenJDK 17's ObjectOutputStream wrote for
same-shaped copies of OpenMQ's classes (package, serialVersionUIDs, fields, superclass):
``com.sun.messaging.jmq.util.MetricCounters`` (a plain Serializable) and
``DestMetricsCounters`` (a ``HashMap`` subclass with ``long timeStamp``, filled with its
27 constructor keys, then set as ``Destination.getMetrics()`` does, adding
``avgNumActiveConsumers`` and ``avgNumBackupConsumers``)::

    new MetricCounters()                                  // JDK_MC_DEFAULT (nConnections 1)
    m.messagesIn = 1000; m.messagesOut = 998; m.messageBytesIn = 1234567;
    m.messageBytesOut = 1200000; m.packetsIn = 2050; m.packetsOut = 2100;
    m.packetBytesIn = 1300000; m.packetBytesOut = 1250000; m.totalMemory = 1073741824L;
    m.freeMemory = 1000000000L; m.threadsActive = 3; m.threadsHighWater = 1010;
    m.threadsLowWater = 14; m.timeStamp = 1767225600123L; m.nConnections = 3;  // JDK_MC_FULL
    d.timeStamp = 1767225600456L; ... DEST_VALUES below ...               // JDK_DMC_FULL
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from broker.admintools.client import AdminClient, AdminError
from broker.launcher import free_port
from broker.protocol.javaser import decode_object
from broker.server.admin_service.metrics import encode_dest_metrics, encode_metric_counters
from openmq_client import AckMode, BytesMessage, Queue, connect

from .redis import RedisServer, redis_binary

pytestmark = pytest.mark.timeout(180)

JDK_MC_DEFAULT = bytes.fromhex(
    "aced000573720029636f6d2e73756e2e6d6573736167696e672e6a6d712e7574696c2e4d6574726963436f75"
    "6e74657273a832aa5062df1f2f02000f4a000a667265654d656d6f72794a000e6d6573736167654279746573"
    "496e4a000f6d65737361676542797465734f75744a000a6d65737361676573496e4a000b6d65737361676573"
    "4f757449000c6e436f6e6e656374696f6e734a000d7061636b65744279746573496e4a000e7061636b657442"
    "797465734f75744a00097061636b657473496e4a000a7061636b6574734f757449000d746872656164734163"
    "746976654900107468726561647348696768576174657249000f746872656164734c6f7757617465724a0009"
    "74696d655374616d704a000b746f74616c4d656d6f7279787000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000100000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
)
JDK_MC_FULL = bytes.fromhex(
    "aced000573720029636f6d2e73756e2e6d6573736167696e672e6a6d712e7574696c2e4d6574726963436f75"
    "6e74657273a832aa5062df1f2f02000f4a000a667265654d656d6f72794a000e6d6573736167654279746573"
    "496e4a000f6d65737361676542797465734f75744a000a6d65737361676573496e4a000b6d65737361676573"
    "4f757449000c6e436f6e6e656374696f6e734a000d7061636b65744279746573496e4a000e7061636b657442"
    "797465734f75744a00097061636b657473496e4a000a7061636b6574734f757449000d746872656164734163"
    "746976654900107468726561647348696768576174657249000f746872656164734c6f7757617465724a0009"
    "74696d655374616d704a000b746f74616c4d656d6f72797870000000003b9aca00000000000012d687000000"
    "0000124f8000000000000003e800000000000003e600000003000000000013d62000000000001312d0000000"
    "0000000802000000000000083400000003000003f20000000e0000019b76daa87b0000000040000000"
)
JDK_DMC_FULL = bytes.fromhex(
    "aced00057372002e636f6d2e73756e2e6d6573736167696e672e6a6d712e7574696c2e446573744d65747269"
    "6373436f756e7465727373c7fd45d332ace00200014a000974696d655374616d70787200116a6176612e7574"
    "696c2e486173684d61700507dac1c31660d103000246000a6c6f6164466163746f724900097468726573686f"
    "6c6478703f400000000000307708000000400000001d7400126e756d4261636b7570436f6e73756d65727373"
    "7200116a6176612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200106a"
    "6176612e6c616e672e4e756d62657286ac951d0b94e08b0200007870000000017400076e756d4d7367737371"
    "007e00040000000a74000e6e756d457870697265644d7367737371007e0004000000007400146469736b5574"
    "696c697a6174696f6e526174696f71007e000a74000f6e756d52656a65637465644d7367737371007e000400"
    "0000c874000c7065616b4d736742797465737372000e6a6176612e6c616e672e4c6f6e673b8be490cc8f23df"
    "0200014a000576616c75657871007e0005000000000000044c74000d6e756d5075726765644d73677371007e"
    "000a7400126e756d416374697665436f6e73756d6572737371007e00040000000274000f6176674e756d436f"
    "6e73756d65727371007e00137400086469736b557365647371007e000f00000000000000007400106e756d44"
    "69736361726465644d7367737371007e00040000000574000b7065616b4e756d4d7367737371007e00040000"
    "00fa740010617667546f74616c4d736742797465737371007e000f00000000000030007400107065616b4e75"
    "6d436f6e73756d6572737371007e0004000000037400116e756d526f6c6c65646261636b4d73677371007e00"
    "067400156176674e756d416374697665436f6e73756d65727371007e001374000a6e756d4d7367734f757473"
    "71007e000f000000000000137e74000c6469736b526573657276656471007e00167400167065616b4e756d42"
    "61636b7570436f6e73756d65727371007e000674000a6d73674279746573496e7371007e000f00000000004e"
    "200074000c6e756d436f6e73756d65727371007e001e74000a6176674e756d4d7367737371007e0004000000"
    "0c74000d746f74616c4d736742797465737371007e000f00000000000028007400156176674e756d4261636b"
    "7570436f6e73756d65727371007e000a7400167065616b4e756d416374697665436f6e73756d65727371007e"
    "001374000b6d736742797465734f75747371007e000f00000000004df80074000c6e756d41636b65644d7367"
    "737371007e0004000013797400117065616b546f74616c4d736742797465737371007e000f000000000003e8"
    "007400096e756d4d736773496e7371007e000f0000000000001388780000019b76daa9c8"
)

MC_FULL = dict(
    messagesIn=1000, messagesOut=998, messageBytesIn=1234567, messageBytesOut=1200000,
    packetsIn=2050, packetsOut=2100, packetBytesIn=1300000, packetBytesOut=1250000,
    totalMemory=1073741824, freeMemory=1000000000, threadsActive=3, threadsHighWater=1010,
    threadsLowWater=14, timeStamp=1767225600123, nConnections=3,
)  # fmt: skip
DEST_VALUES = dict(
    numMsgsIn=5000, numMsgsOut=4990, peakNumMsgs=250, peakTotalMsgBytes=256000,
    peakMsgBytes=1100, numActiveConsumers=2, numConsumers=3, numBackupConsumers=1,
    peakNumActiveConsumers=2, peakNumConsumers=3, peakNumBackupConsumers=1,
    avgNumActiveConsumers=2, avgNumConsumers=2, avgNumBackupConsumers=0, msgBytesIn=5120000,
    msgBytesOut=5109760, numMsgs=10, totalMsgBytes=10240, avgNumMsgs=12,
    avgTotalMsgBytes=12288, numAckedMsgs=4985, numDiscardedMsgs=5, numRejectedMsgs=200,
    numRolledbackMsgs=1,
)  # fmt: skip

SAMPLE_KEYS = {
    "type", "instance", "timestamp", "interval", "msgs_in", "msgs_out", "bytes_in",
    "bytes_out", "messages", "message_bytes", "connections", "memory_state", "memory_used",
    "memory_limit", "destinations", "depths", "loop_lag_max", "loop_lag_p99", "activity",
    "paged_out", "read_back",
}  # fmt: skip
ACTIVITY_KEYS = {
    "name", "type", "msgs_in", "msgs_out", "bytes_in", "bytes_out", "messages", "bytes",
}  # fmt: skip
DEPTH_KEYS = {"name", "type", "messages", "bytes", "consumers", "producers"}
SIZE = 1000


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


async def until(
    probe: Callable[[], Awaitable[Any]], ok: Callable[[Any], bool], timeout: float = 60
) -> Any:
    """Poll ``probe`` until ``ok(result)``; the last result, or AssertionError at timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s; last value: {value!r}")
        await asyncio.sleep(0.1)


def wait_for(check: Callable[[], Any], timeout: float = 60) -> Any:
    """Synchronous twin of :func:`until` for checks outside an event loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.1)


async def send(b: Any, queue: str, count: int, conn=None) -> None:
    own = conn is None
    conn = conn or await connect(b.host, b.portmapper_port, request_timeout=20)
    sess = await conn.create_session()
    producer = await sess.create_producer(Queue(queue))
    for _ in range(count):
        await producer.send(BytesMessage(b"x" * SIZE))
    if own:
        await conn.close()


async def open_admin(b: Any) -> AdminClient:
    return await AdminClient.open(b.host, b.portmapper_port, "admin", "admin")


def sample_rows(db, instance: str, where: str = "1=1") -> list[sqlite3.Row]:
    with sqlite3.connect(db, timeout=20) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(
            f"SELECT * FROM broker_metricsample WHERE broker_instance = ? AND {where}",
            (instance,),
        ).fetchall()


# --------------------------------------------------------------------------------------
# The Java shapes
# --------------------------------------------------------------------------------------


def test_metric_objects_bytes_match_jdk17():
    assert encode_metric_counters({"nConnections": 1}) == JDK_MC_DEFAULT
    assert encode_metric_counters(MC_FULL) == JDK_MC_FULL
    assert encode_dest_metrics(DEST_VALUES, 1767225600456) == JDK_DMC_FULL
    fields = decode_object(JDK_MC_FULL, generic=True)
    assert fields["__class__"] == "com.sun.messaging.jmq.util.MetricCounters"  # type: ignore[index]
    assert {k: fields[k] for k in MC_FULL} == MC_FULL  # type: ignore[index]


# --------------------------------------------------------------------------------------
# Counters, GET_METRICS (52), RESET_BROKER (84)
# --------------------------------------------------------------------------------------


def test_counters_get_metrics_and_reset(own_broker, redis_url):
    b = own_broker(env={"REDIS_URL": redis_url}, instance=name("metrics"))
    q = name("metricsQ")
    n = 25

    async def go() -> None:
        admin = await open_admin(b)
        try:
            await send(b, q, n)
            d = await until(lambda: admin.metrics(destination=q), lambda d: d["numMsgs"] == n)
            assert d["__class__"] == "com.sun.messaging.jmq.util.DestMetricsCounters"
            assert d["numMsgsIn"] == n and d["numMsgsOut"] == 0 and d["peakNumMsgs"] == n
            assert d["msgBytesIn"] == d["totalMsgBytes"] == d["peakTotalMsgBytes"] >= n * SIZE
            assert SIZE < d["peakMsgBytes"] < 2 * SIZE and d["numConsumers"] == 0
            assert d["timeStamp"] > 0 and "loadFactor" not in d

            conn = await connect(b.host, b.portmapper_port, request_timeout=20)
            sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
            consumer = await sess.create_consumer(Queue(q))
            await conn.start()
            for _ in range(n):
                assert await consumer.receive(timeout=20) is not None
            d = await until(lambda: admin.metrics(destination=q), lambda d: d["numAckedMsgs"] == n)
            assert d["numMsgsOut"] == n and d["numMsgs"] == 0 and d["totalMsgBytes"] == 0
            assert d["msgBytesOut"] == d["msgBytesIn"] and d["peakNumMsgs"] == n
            assert d["numConsumers"] == d["numActiveConsumers"] == d["peakNumConsumers"] == 1
            assert d["numBackupConsumers"] == 0 and d["numRejectedMsgs"] == 0

            jms = await admin.metrics(service="jms")
            assert jms["__class__"] == "com.sun.messaging.jmq.util.MetricCounters"
            assert jms["messagesIn"] == n and jms["messagesOut"] == n
            assert jms["messageBytesIn"] >= n * SIZE and jms["messageBytesOut"] >= n * SIZE
            assert jms["packetsIn"] > n and jms["packetBytesIn"] > jms["messageBytesIn"]
            assert jms["packetsOut"] > n and jms["packetBytesOut"] > jms["messageBytesOut"]
            assert jms["nConnections"] == 1  # the producer's connection is closed
            assert jms["threadsLowWater"] <= jms["threadsHighWater"]
            adm = await admin.metrics(service="admin")
            assert adm["nConnections"] == 1 and adm["messagesIn"] >= 3  # our requests
            total = await admin.metrics()
            assert total["nConnections"] == 2
            assert total["messagesIn"] >= jms["messagesIn"] + adm["messagesIn"]
            assert total["packetsIn"] >= jms["packetsIn"] + adm["packetsIn"]
            assert 0 <= total["freeMemory"] <= total["totalMemory"] and total["timeStamp"] > 0

            # JMQBodyType as OpenMQ's GetMetricsHandler sets it (none for the broker).
            props, _ = await admin.request(52, {"JMQDestination": q, "JMQDestType": 1})
            assert props["JMQBodyType"] == "DESTINATION"
            props, _ = await admin.request(52, {"JMQServiceName": "jms"})
            assert props["JMQBodyType"] == "SERVICE"
            props, _ = await admin.request(52)
            assert "JMQBodyType" not in props
            for where in ({"destination": "noSuchQ"}, {"service": "nosuch"}):
                with pytest.raises(AdminError) as err:
                    await admin.metrics(**where)  # type: ignore[arg-type]
                assert err.value.status == 404

            await admin.reset_metrics()
            d = await admin.metrics(destination=q)
            assert d["numMsgsIn"] == d["numMsgsOut"] == d["numAckedMsgs"] == 0
            assert d["msgBytesIn"] == d["msgBytesOut"] == 0 and d["peakNumMsgs"] == 0
            assert d["numConsumers"] == d["peakNumConsumers"] == 1  # still attached
            jms = await admin.metrics(service="jms")
            assert jms["messagesIn"] == jms["messagesOut"] == 0
            assert jms["messageBytesIn"] == jms["messageBytesOut"] == 0
            with pytest.raises(AdminError) as err:
                await admin.request(84, {"JMQResetType": "bogus"})
            assert err.value.status == 500
            await conn.close()
        finally:
            await admin.close()

    asyncio.run(go())


def test_purged_messages_are_counted(own_broker):
    b = own_broker(instance=name("purged"))
    q = name("purgedQ")

    async def go() -> None:
        admin = await open_admin(b)
        try:
            await send(b, q, 7)
            await until(lambda: admin.metrics(destination=q), lambda d: d["numMsgs"] == 7)
            await admin.purge(q, 1)
            d = await admin.metrics(destination=q)
            assert d["numPurgedMsgs"] == 7 and d["numMsgs"] == 0 and d["totalMsgBytes"] == 0
            assert d["numAckedMsgs"] == 0 and d["numExpiredMsgs"] == 0
        finally:
            await admin.close()

    asyncio.run(go())


# --------------------------------------------------------------------------------------
# Live events on the channel layer (Redis)
# --------------------------------------------------------------------------------------


def test_broker_publishes_samples_to_its_group(own_broker, redis_url):
    from channels_redis.pubsub import RedisPubSubChannelLayer

    from broker.server.events import group_name

    instance = name("events")
    b = own_broker(env={"REDIS_URL": redis_url}, instance=instance)
    deep = name("deepQ")
    others = [name(f"q{i}") for i in range(60)]

    async def go() -> None:
        layer = RedisPubSubChannelLayer(hosts=[redis_url])
        channel = await layer.new_channel()
        await layer.group_add(group_name(instance), channel)
        assert group_name(instance) == f"broker.{instance}"
        try:
            first = await asyncio.wait_for(layer.receive(channel), 30)
            assert first["type"] == "broker.sample" and set(first) == SAMPLE_KEYS
            assert first["instance"] == instance and first["memory_state"] == "green"
            assert first["memory_limit"] > 0 and first["interval"] > 0

            conn = await connect(b.host, b.portmapper_port, request_timeout=20)
            for q in others:
                await send(b, q, 1, conn)
            await send(b, deep, 7, conn)
            busiest = 0.0
            deep_active: list[dict] = []

            async def next_sample() -> dict:
                nonlocal busiest
                sample = await asyncio.wait_for(layer.receive(channel), 30)
                busiest = max(busiest, sample["msgs_in"])
                deep_active.extend(a for a in sample["activity"] if a["name"] == deep)
                return sample

            sample = await until(
                next_sample,
                lambda s: s["destinations"] >= 61 and s["messages"] >= 67 and s["depths"],
            )
            await conn.close()
            assert set(sample) == SAMPLE_KEYS and busiest > 0
            depths = sample["depths"]
            assert len(depths) == 50  # the 50 deepest of the 62 (with the DMQ)
            assert all(set(d) == DEPTH_KEYS for d in depths)
            assert [d["messages"] for d in depths] == sorted(
                (d["messages"] for d in depths), reverse=True
            )
            assert depths[0] == {
                "name": deep,
                "type": "queue",
                "messages": 7,
                "bytes": depths[0]["bytes"],
                "consumers": 0,
                "producers": 1,
            }
            assert depths[0]["bytes"] >= 7 * SIZE
            # Every body is in memory (memory_used counts bodies, the backlog is far below
            # the paging threshold): nothing was paged out or read back.
            assert sample["message_bytes"] >= 67 * SIZE and sample["memory_used"] >= 67 * SIZE
            assert sample["paged_out"] == sample["read_back"] == 0
            assert sample["connections"] >= 1
            # The destination's own rates: in the activity of the samples while it was sent to.
            await until(next_sample, lambda s: deep_active)
            assert all(set(a) == ACTIVITY_KEYS for a in deep_active)
            assert any(a["msgs_in"] > 0 for a in deep_active)
            assert deep_active[0]["type"] == "queue" and deep_active[-1]["msgs_out"] == 0
        finally:
            await layer.flush()

    asyncio.run(go())


def test_metric_sample_rows_and_retention(own_broker, tmp_path):
    # No REDIS_URL: nothing is published, but the rows are written all the same.
    instance = name("samples")
    b = own_broker(
        "imq.metrics.sample.interval=1",
        "imq.metrics.sample.retention=2",
        "imq.loop.lag.window=1",
        instance=instance,
    )
    db = tmp_path / "db.sqlite3"
    with sqlite3.connect(db, timeout=20) as conn:
        for who in (instance, "someotherbroker"):
            conn.execute(
                "INSERT INTO broker_metricsample (broker_instance, timestamp, msgs_in, "
                "msgs_out, bytes_in, bytes_out, connections, memory_state, memory_used, "
                "memory_limit, destinations, depths) "
                "VALUES (?, '2020-01-01 00:00:00', 0, 0, 0, 0, 0, 'green', 0, 0, 0, '[]')",
                (who,),
            )
    q = name("rowsQ")
    asyncio.run(send(b, q, 10))
    rows = wait_for(lambda: sample_rows(db, instance, "msgs_in > 0"))
    row = rows[-1]
    assert row["memory_state"] == "green" and row["memory_limit"] > 0
    assert row["destinations"] >= 2 and row["bytes_in"] > 0
    assert '"name": "' + q + '"' in row["depths"] or q in row["depths"]
    # The event loop's lag (looplag.py) is stored too, once the first 1 s window closed.
    lagged = wait_for(lambda: sample_rows(db, instance, "loop_lag_max > 0"))[-1]
    assert 0 < lagged["loop_lag_p99"] <= lagged["loop_lag_max"]
    # A row inserted without it, as a broker of the previous release writes: the default.
    assert sample_rows(db, "someotherbroker")[0]["loop_lag_max"] == 0
    # Retention: this instance's old row goes, another broker's stays.
    wait_for(lambda: not sample_rows(db, instance, "timestamp < '2021-01-01'"))
    assert sample_rows(db, "someotherbroker")
    assert "no shared channel layer" in b.log_text()


def test_redis_outage_is_one_warning_and_messaging_goes_on(own_broker):
    from channels_redis.pubsub import RedisPubSubChannelLayer

    from broker.server.events import group_name

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    instance = name("outage")
    b = own_broker("imq.metrics.sample.interval=1", env={"REDIS_URL": url}, instance=instance)
    db = b.varhome.parent / "db.sqlite3"
    warning = "live events: cannot publish to the channel layer"
    q = name("outageQ")

    async def round_trip() -> None:
        conn = await connect(b.host, b.portmapper_port, request_timeout=20)
        await send(b, q, 5, conn)
        sess = await conn.create_session()
        consumer = await sess.create_consumer(Queue(q))
        await conn.start()
        for _ in range(5):
            assert await consumer.receive(timeout=20) is not None
        await conn.close()

    asyncio.run(round_trip())
    wait_for(lambda: warning in b.log_text())
    seen = len(sample_rows(db, instance))
    wait_for(lambda: len(sample_rows(db, instance)) >= seen + 3)  # three more ticks
    asyncio.run(round_trip())
    assert b.log_text().count(warning) == 1

    server = RedisServer(redis_binary(), port)
    server.start()
    try:

        async def listen() -> dict:
            layer = RedisPubSubChannelLayer(hosts=[url])
            channel = await layer.new_channel()
            await layer.group_add(group_name(instance), channel)
            try:
                return await asyncio.wait_for(layer.receive(channel), 60)
            finally:
                await layer.flush()

        sample = asyncio.run(listen())
        assert sample["type"] == "broker.sample" and sample["instance"] == instance
        wait_for(lambda: "publishing to the channel layer again" in b.log_text())
    finally:
        server.stop()


# --------------------------------------------------------------------------------------
# The portal's live overview (WebSocket)
# --------------------------------------------------------------------------------------


def _history_row(instance: str, seconds_ago: float, msgs_in: float):
    from datetime import UTC, datetime, timedelta

    from broker.models import MetricSample

    return MetricSample.objects.create(
        broker_instance=instance,
        timestamp=datetime.now(UTC) - timedelta(seconds=seconds_ago),
        msgs_in=msgs_in,
        msgs_out=msgs_in,
        bytes_in=msgs_in * SIZE,
        bytes_out=msgs_in * SIZE,
        connections=1,
        memory_state="green",
        memory_used=0,
        memory_limit=1 << 30,
        destinations=3,
        loop_lag_max=msgs_in * 2,
        loop_lag_p99=msgs_in,
        depths=[{"name": "histQ", "type": "queue", "messages": 2, "bytes": 2048}],
    )


@pytest.mark.django_db(transaction=True)
def test_overview_refuses_anonymous_and_non_staff_users():
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth import get_user_model

    from portal.asgi import application
    from portal.consumers import FORBIDDEN, OverviewConsumer

    plain = get_user_model().objects.create_user("plainuser", is_staff=False)

    async def go() -> None:
        anonymous = WebsocketCommunicator(
            application, "/ws/overview/", headers=[(b"origin", b"http://localhost")]
        )
        connected, _ = await anonymous.connect()
        assert not connected
        comm = WebsocketCommunicator(OverviewConsumer.as_asgi(), "/ws/overview/")
        comm.scope["user"] = plain
        connected, code = await comm.connect()
        assert not connected and code == FORBIDDEN

    asyncio.run(go())


@pytest.mark.django_db(transaction=True)
def test_overview_sends_history_then_live_samples(own_broker, redis_url, settings):
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth import get_user_model
    from django.test import Client

    from portal.asgi import application

    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [redis_url]},
        }
    }
    instance = name("overview")
    b = own_broker(env={"REDIS_URL": redis_url}, instance=instance)
    for seconds_ago, rate in ((120, 1.5), (60, 2.5)):
        _history_row(instance, seconds_ago, rate)
    _history_row(instance, 3600, 99.0)  # older than ten minutes: not history
    _history_row(name("elsewhere"), 30, 42.0)  # another broker's
    admin_user = get_user_model().objects.create_user("portaladmin", is_staff=True)
    # The portal asks the broker's user repository whether the user administers.
    from broker.admintools import security_actions

    security_actions.create_user("test", "portaladmin", "portaladmin-pw", ["admin"])
    client = Client()
    client.force_login(admin_user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    q = name("liveQ")

    async def go() -> None:
        comm = WebsocketCommunicator(
            application,
            f"/ws/overview/?instance={instance}",
            headers=[(b"origin", b"http://localhost"), (b"cookie", cookie)],
        )
        connected, _ = await comm.connect(timeout=10)
        assert connected
        try:
            history = await comm.receive_json_from(timeout=10)
            assert history["type"] == "history" and history["instance"] == instance
            assert [s["msgs_in"] for s in history["samples"]] == [1.5, 2.5]
            assert [s["loop_lag_max"] for s in history["samples"]] == [3.0, 5.0]
            assert [s["loop_lag_p99"] for s in history["samples"]] == [1.5, 2.5]
            assert history["depths"][0]["name"] == "histQ"
            assert "depths" not in history["samples"][0]
            assert history["samples"][0]["timestamp"] < history["samples"][1]["timestamp"]

            await send(b, q, 12)

            async def next_sample() -> dict:
                event = await comm.receive_json_from(timeout=30)
                assert event["type"] == "sample" and event["instance"] == instance
                return event

            # All 12 (a sample can fall between two of the sends).
            live = await until(
                next_sample,
                lambda s: any(d["name"] == q and d["messages"] == 12 for d in s["depths"]),
            )
            assert set(live) == SAMPLE_KEYS
            (row,) = [d for d in live["depths"] if d["name"] == q]
            assert row["messages"] == 12 and row["type"] == "queue"
        finally:
            await comm.disconnect()

    asyncio.run(go())
