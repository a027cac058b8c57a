"""The metrics topics' pure parts (broker/core/monitoring.py) on a real in-process router,
and the connection engine's answers for them: which names are metrics topics, how they
come to be (and are refused), the maps and their Java types, the message the broker
publishes, one subscription alone getting a new subscriber's first map, and the log's
metrics report."""

from __future__ import annotations

import asyncio
import re

import pytest

from broker.core import monitoring as mon
from broker.core.errors import RouterError, now_ms
from broker.core.metrics import DEST_METRICS_KEYS, ServiceCounters
from broker.core.router import MessageRouter, RouterSettings
from broker.protocol.javaser import decode_map_body
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import Packet, build_packet
from broker.protocol.sysmsgid import ip_field
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_A,
    FLAG_P,
    PacketType,
    Status,
)
from broker.server.broker import Broker

from .routerkit import Conn, send, session
from .test_engine import _login, _on_dest, _sent, _session, _status
from .test_engine import broker as broker  # noqa: F401 - the engine tests' fixture

pytestmark = pytest.mark.fast

ADDRESS = mon.BrokerAddress("127.0.0.1", "here", 7676)


def _refusal(fn, *args, **kw) -> tuple[int, str]:
    with pytest.raises(RouterError) as refused:
        fn(*args, **kw)
    return refused.value.status, refused.value.reason


def _subscribe(r: MessageRouter, conn: Conn, name: str):
    return r.add_consumer(session(r, conn), name, DEST_TOPIC)


def test_which_names_are_metrics_topics() -> None:
    assert mon.parse_topic("mq.metrics.broker") == mon.MetricsTopic("broker")
    assert mon.parse_topic("mq.metrics.jvm") == mon.MetricsTopic("jvm")
    assert mon.parse_topic("mq.metrics.destination_list") == mon.MetricsTopic("destination_list")
    assert mon.parse_topic("mq.metrics.destination.queue.a.b") == mon.MetricsTopic(
        "destination", "a.b", DEST_QUEUE
    )
    assert mon.parse_topic("mq.metrics.destination.topic.mq.metrics.jvm") == mon.MetricsTopic(
        "destination", "mq.metrics.jvm", DEST_TOPIC
    )
    for name in (
        "mq.metrics",
        "mq.metrics.bogus",
        "mq.metrics.broker.x",
        "mq.metrics.destination",
        "mq.metrics.destination.queue.",
        "mq.metrics.destination.other.x",
        "mq.other",
        "metrics.broker",
    ):
        assert mon.parse_topic(name) is None, name


def test_subscribing_makes_a_metrics_topic_and_nothing_else_under_mq() -> None:
    r = MessageRouter(RouterSettings(autocreate_topic=False, autocreate_queue=False))
    conn = Conn(1)
    # Made for a subscriber whatever auto-creation says, local, producer-less, no DMQ.
    _subscribe(r, conn, "mq.metrics.broker")
    topic = r.topics["mq.metrics.broker"]
    assert topic.auto and mon.is_metrics_topic(topic)
    assert {k: topic.attributes[k] for k in mon.TOPIC_ATTRIBUTES} == mon.TOPIC_ATTRIBUTES
    status, reason = _refusal(r.add_producer, session(r, conn), "mq.metrics.broker", DEST_TOPIC)
    assert status == Status.CONFLICT and "takes no producers" in reason
    # An unknown metrics topic is 400 (as OpenMQ's B2084); a queue under mq. is 500, as
    # OpenMQ's broker answers it.
    assert _refusal(_subscribe, r, conn, "mq.metrics.nosuch")[0] == Status.BAD_REQUEST
    assert _refusal(_subscribe, r, conn, "mq.other")[0] == Status.BAD_REQUEST
    assert (
        _refusal(r.add_consumer, session(r, conn), "mq.metrics.broker", DEST_QUEUE)[0]
        == Status.ERROR
    )
    # A destination's metrics topic for one that may not be auto-created: 403.
    status, _ = _refusal(_subscribe, r, conn, "mq.metrics.destination.queue.q")
    assert status == Status.FORBIDDEN
    r.create_destination("q", DEST_QUEUE, auto=False)
    _subscribe(r, conn, "mq.metrics.destination.queue.q")  # it exists: watched
    # imq.metrics.topic.enabled=false: 500, as OpenMQ's "monitoring is disabled".
    off = MessageRouter(RouterSettings(metrics_topics=False))
    assert _refusal(_subscribe, off, Conn(2), "mq.metrics.jvm")[0] == Status.ERROR
    assert "mq.metrics.jvm" not in off.topics


def test_the_maps_and_their_java_types() -> None:
    r = MessageRouter()
    conn, tool = Conn(1), Conn(2)
    send(r, conn, "q", 1, 2)
    _subscribe(r, conn, "t")
    send(r, conn, "t", 1, topic=True)
    r.create_destination("temporary_destination://queue/x/1/1", DEST_QUEUE | DEST_TEMP, conn)
    r.create_destination("temporary_destination://queue/x/2/1", DEST_QUEUE | DEST_TEMP, tool)
    _subscribe(r, conn, "mq.metrics.broker")
    _subscribe(r, conn, "mq.metrics.destination.queue.q")
    counters = ServiceCounters()
    counters.messages_in, counters.packet_bytes_out = 3, 999

    listed = mon.destination_list_map(r, hidden_owners={tool.id})
    # Neither the metrics topics nor an administration tool's reply queue.
    assert listed == {
        "mq.metrics.destination.queue.mq.sys.dmq": {
            "type": "queue",
            "name": "mq.sys.dmq",
            "isTemporary": False,
        },
        "mq.metrics.destination.queue.q": {"type": "queue", "name": "q", "isTemporary": False},
        "mq.metrics.destination.queue.temporary_destination://queue/x/1/1": {
            "type": "queue",
            "name": "temporary_destination://queue/x/1/1",
            "isTemporary": True,
        },
        "mq.metrics.destination.topic.t": {"type": "topic", "name": "t", "isTemporary": False},
    }

    m = mon.broker_map(r, counters, 2, hidden_owners={tool.id})
    assert all(type(v) is JLong for v in m.values())
    assert m["numMsgsIn"] == 3 and m["pktBytesOut"] == 999 and m["numConnections"] == 2
    assert m["numDestinations"] == len(listed) == 4
    assert m["numMsgs"] == r.totals.count == 3  # two in q, one for t's subscriber

    d = mon.destination_map(r.queues["q"])
    assert list(d) == [k for k, _ in DEST_METRICS_KEYS]
    assert all(type(d[k]) is (JLong if c == "J" else JInt) for k, c in DEST_METRICS_KEYS)
    assert d["numMsgs"] == 2 and d["numMsgsIn"] == 2

    assert mon.jvm_map(mon.ProcessMemory(100, 40, 1000)) == {
        "freeMemory": JLong(40),
        "maxMemory": JLong(1000),
        "totalMemory": JLong(100),
    }
    memory = mon.ProcessMemory(1, 1, 1)
    # A destination's map only while the destination exists.
    gone = mon.MetricsTopic("destination", "nowhere", DEST_QUEUE)
    assert mon.topic_map(r, gone, counters, 0, memory) is None
    queue = mon.MetricsTopic("destination", "q", DEST_QUEUE)
    assert mon.topic_map(r, queue, counters, 0, memory) == d


def test_the_message_the_broker_publishes() -> None:
    values = {"numMsgs": JLong(5), "q": {"type": "queue", "name": "q", "isTemporary": False}}
    msg = mon.metrics_message(
        "mq.metrics.destination_list",
        values,
        ADDRESS,
        now=1_000_000,
        sequence=7,
        ip_field=ip_field("127.0.0.1"),
    )
    pkt = Packet(msg.raw)
    assert pkt.type == PacketType.MAP_MESSAGE and not pkt.flags & FLAG_P
    assert (pkt.priority, pkt.timestamp, pkt.expiration) == (5, 1_000_000, 1_300_000)
    assert pkt.properties == {
        "type": "mq.metrics.destination_list",
        "timestamp": JLong(1_000_000),
        "brokerAddress": "mq://127.0.0.1:7676/",
        "brokerHost": "here",
        "brokerPort": JInt(7676),
    }
    assert decode_map_body(pkt.body, nested=True) == values
    assert msg.message_id == "ID:7-127.0.0.1-0-1000000"
    assert not msg.is_queue and msg.destination == "mq.metrics.destination_list"
    kept = mon.metrics_message(
        "mq.metrics.jvm", {}, ADDRESS, now=5, sequence=1, ip_field=b"\0" * 16,
        persistent=True, ttl_ms=0,
    )  # fmt: skip
    assert kept.persistent and kept.expiration == 0


def test_a_new_subscriber_s_first_map_goes_to_it_alone() -> None:
    r = MessageRouter()
    old, new = Conn(1), Conn(2)
    _subscribe(r, old, "mq.metrics.jvm")
    cons = _subscribe(r, new, "mq.metrics.jvm")
    msg = mon.metrics_message(
        "mq.metrics.jvm", {}, ADDRESS, now=now_ms(), sequence=1, ip_field=b"\0" * 16
    )
    assert cons.subscription is not None
    r.deliver_to(cons.subscription, msg)
    assert (len(old.sent), len(new.sent)) == (0, 1)
    assert r.topics["mq.metrics.jvm"].msgs_in == 1


REPORT = re.compile(
    r"\nConnections: 3    Memory: 100 bytes \(40 free\) Threads: 6 \(14-1010\)\n"
    r"      In: 30 msgs \(3000 bytes\)  60 pkts \(6000 bytes\)\n"
    r"     Out: 0 msgs \(0 bytes\)  0 pkts \(0 bytes\)\n"
    r" Rate In: 10 msgs/sec \(1000 bytes/sec\)  20 pkts/sec \(2000 bytes/sec\)\n"
    r"Rate Out: 0 msgs/sec \(0 bytes/sec\)  0 pkts/sec \(0 bytes/sec\)$"
)


def test_the_log_report_is_laid_out_as_openmq_s() -> None:
    now = ServiceCounters()
    now.messages_in, now.message_bytes_in, now.packets_in, now.packet_bytes_in = 30, 3000, 60, 6000
    text = mon.report_text(
        now, ServiceCounters(), 3.0, 3, mon.ProcessMemory(100, 40, 1000), (6, 14, 1010)
    )
    assert REPORT.fullmatch(text), text


def test_the_engine_refuses_producers_and_sends_on_metrics_topics(broker: Broker) -> None:  # noqa: F811
    e = _login(broker)
    sid = _session(e)
    name = "mq.metrics.broker"
    assert _status(_on_dest(e, PacketType.VERIFY_DESTINATION, name, DEST_TOPIC, sid)) == 404
    assert _status(_on_dest(e, PacketType.ADD_CONSUMER, name, DEST_TOPIC, sid)) == Status.OK
    assert _status(_on_dest(e, PacketType.ADD_PRODUCER, name, DEST_TOPIC, sid)) == (Status.CONFLICT)
    # A send without a producer (as the C client may) is refused too.
    e.receive_data(
        build_packet(PacketType.TEXT_MESSAGE, flags=FLAG_A, fields={1: name}, body=b"fake")
    )
    (reply,) = _sent(e)
    assert (reply.type, _status(reply)) == (PacketType.SEND_REPLY, Status.FORBIDDEN)
    assert broker.router.topics[name].msgs_in == 0
    reply = _on_dest(e, PacketType.ADD_CONSUMER, "mq.metrics.nosuch", DEST_TOPIC, sid)
    assert _status(reply) == Status.BAD_REQUEST


def test_the_publisher_works_only_while_someone_subscribes(broker: Broker) -> None:  # noqa: F811
    """The server's publisher, driven on an event loop in process: no timer before a
    subscriber; the first map of a big destination list (serialised in the thread pool)
    reaches the new subscriber; once it left, the next tick forgets the topic and stops."""
    from broker.server.metrics_topics import INLINE_ENTRIES, MetricsTopics

    broker.config.set("imq.hostname", "127.0.0.1")
    r = broker.router
    for i in range(INLINE_ENTRIES + 10):
        r.create_destination(f"q{i}", DEST_QUEUE, auto=False)

    async def run() -> None:
        topics = MetricsTopics(broker)
        assert topics._timer is None and topics.watched == {}
        conn = Conn(1)
        cons = _subscribe(r, conn, "mq.metrics.destination_list")
        assert topics._timer is not None
        for _ in range(1000):
            if conn.sent:
                break
            await asyncio.sleep(0.01)
        (raw,) = conn.sent
        listed = decode_map_body(Packet(raw).body, nested=True)
        assert len(listed) == INLINE_ENTRIES + 11  # and the DMQ
        r.remove_consumer(cons, None)
        topics._tick()
        assert topics.watched == {} and topics._timer is None
        topics.close()

    asyncio.run(run())


def test_the_report_interval(broker: Broker) -> None:  # noqa: F811
    from broker.server.metrics_topics import report_interval

    assert report_interval(broker) == 0  # OpenMQ's default: no report
    broker.config.set("imq.metrics.interval", "5")
    assert report_interval(broker) == 5
    broker.config.set("imq.metrics.enabled", "false")
    assert report_interval(broker) == 0
