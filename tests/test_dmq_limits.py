"""The dead message queue, expiry reclaim, delivery-count limit, destination limit
behaviours, memory states and reaping, against a real broker process."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import pytest

from broker.core.message import Message
from broker.core.router import MessageRouter
from broker.protocol.javaser import decode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import DMQ_NAME, FLAG_Q, PacketType
from openmq_client import AckMode, Queue, ResourceAllocationException, TextMessage

from .test_client_live import name, open_conn, run
from .wire import Peer, control, login, vector

pytestmark = pytest.mark.timeout(120)

DMQ = Queue(DMQ_NAME)


async def drain(b: Any, queue: Queue, timeout: float = 5.0, ack: bool = True) -> list:
    conn = await open_conn(b)
    sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    cons = await sess.create_consumer(queue)
    await conn.start()
    got = []
    while (m := await cons.receive(timeout if not got else 0.5)) is not None:
        got.append(m)
    if got and ack:
        await got[-1].acknowledge()
    await conn.close()
    return got


async def dmq_messages_for(b: Any, queue: str, timeout: float = 5.0) -> list:
    return [
        m for m in await drain(b, DMQ, timeout) if m.destination and m.destination.name == queue
    ]


@run
async def test_expired_messages_are_reclaimed_into_the_dmq(own_broker) -> None:
    b = own_broker("imq.message.expiration.interval=1")
    q = name("exp")
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(Queue(q))
    await prod.send(TextMessage("short-lived", properties={"k": 1}), ttl_ms=200)
    await prod.send(TextMessage("long-lived"))
    await conn.close()
    deadline = time.monotonic() + 20
    dead: list = []
    while not dead and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        dead = await dmq_messages_for(b, q)
    assert len(dead) == 1
    m = dead[0]
    assert m.text == "short-lived" and m.properties["k"] == 1
    assert m.properties["JMS_SUN_DMQ_UNDELIVERED_REASON"] == "EXPIRED"
    assert type(m.properties["JMS_SUN_DMQ_UNDELIVERED_TIMESTAMP"]) is JLong
    assert m.properties["JMS_SUN_DMQ_DEAD_BROKER"]
    assert m.expiration == 0  # readable from the DMQ
    assert "reclaimed 1 expired message" in b.log_text()
    left = await drain(b, Queue(q))
    assert [x.text for x in left] == ["long-lived"]


@run
async def test_use_dmq_false_discards(own_broker) -> None:
    b = own_broker("imq.message.expiration.interval=1", "imq.autocreate.destination.useDMQ=false")
    q = name("nodmq")
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(Queue(q))
    await prod.send(TextMessage("gone"), ttl_ms=100)
    await conn.close()
    deadline = time.monotonic() + 20
    while "reclaimed 1 expired" not in b.log_text() and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    # Reclaimed: nothing of it reaches the DMQ in the next two sweeps (1 s apart).
    assert await dmq_messages_for(b, q, timeout=2.0) == []


@run
async def test_delivery_count_limit_sends_to_dmq(own_broker) -> None:
    b = own_broker("imq.autocreate.destination.maxDeliveryCount=2")
    q = Queue(name("maxdel"))
    conn = await open_conn(b)
    sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    prod = await sess.create_producer(q)
    await prod.send(TextMessage("poison"))
    cons = await sess.create_consumer(q)
    await conn.start()
    first = await cons.receive(5)
    assert first.delivery_count == 1
    await sess.recover()
    second = await cons.receive(5)
    assert second.redelivered and second.delivery_count == 2
    await sess.recover()
    assert await cons.receive(1) is None  # delivered twice: now dead
    await conn.close()
    dead = await dmq_messages_for(b, q.name)
    assert [d.text for d in dead] == ["poison"]
    assert dead[0].properties["JMS_SUN_DMQ_UNDELIVERED_REASON"] == "UNDELIVERABLE"
    assert dead[0].properties["JMS_SUN_DMQ_DELIVERY_COUNT"] == 2
    assert "delivered 2 times" in dead[0].properties["JMS_SUN_DMQ_UNDELIVERED_COMMENT"]


def test_client_marks_a_message_dead(broker) -> None:
    q = name("dead")
    peer = login(broker.host, broker.jms_port)
    sid = peer.request(
        control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(2)), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    peer.send(
        build_packet(
            PacketType.TEXT_MESSAGE, body=b"bad", flags=FLAG_Q | 0x10, consumer_id=4, fields={1: q}
        )
    )
    peer.expect(PacketType.SEND_REPLY)
    cid = peer.request(
        control(
            PacketType.ADD_CONSUMER,
            5,
            JMQDestination=q,
            JMQDestType=JInt(1),
            JMQSessionID=JLong(sid),
            JMQSize=JInt(10),
        ),
        PacketType.ADD_CONSUMER_REPLY,
    ).properties["JMQConsumerID"]
    peer.send(build_packet(PacketType.START))
    msg = peer.expect(PacketType.TEXT_MESSAGE)
    ack = build_packet(
        PacketType.ACKNOWLEDGE,
        flags=0x10,
        consumer_id=6,
        props={"JMQAckType": JInt(2), "JMQDeadReason": JInt(0), "JMQComment": "cannot parse"},
        body=struct.pack(">q", cid) + msg.raw[20:52],
    )
    peer.request(ack, PacketType.ACKNOWLEDGE_REPLY)
    dead = asyncio.run(dmq_messages_for(broker, q))
    assert len(dead) == 1 and dead[0].text == "bad"
    assert dead[0].properties["JMS_SUN_DMQ_UNDELIVERED_REASON"] == "UNDELIVERABLE"
    assert dead[0].properties["JMS_SUN_DMQ_UNDELIVERED_COMMENT"] == "cannot parse"
    assert dead[0].message_id == "ID:" + str(
        __import__("broker.protocol.sysmsgid", fromlist=["x"]).SysMessageID.from_bytes(
            msg.raw[20:52]
        )
    )


@run
async def test_reject_newest(own_broker) -> None:
    b = own_broker("imq.autocreate.destination.maxNumMsgs=2")
    q = Queue(name("full"))
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    await prod.send(TextMessage("1"))
    await prod.send(TextMessage("2"))
    with pytest.raises(ResourceAllocationException) as exc:
        await prod.send(TextMessage("3"))
    assert exc.value.status == 414
    await conn.close()
    assert [m.text for m in await drain(b, q)] == ["1", "2"]


@run
async def test_message_too_large(own_broker) -> None:
    b = own_broker("imq.autocreate.destination.maxBytesPerMsg=2k")
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(Queue(name("big")))
    with pytest.raises(ResourceAllocationException) as exc:
        await prod.send(TextMessage("x" * 5000))
    assert exc.value.status == 423
    await conn.close()


@run
async def test_remove_oldest_and_remove_low_priority(own_broker) -> None:
    b = own_broker(
        "imq.autocreate.destination.maxNumMsgs=2",
        "imq.autocreate.destination.limitBehavior=REMOVE_OLDEST",
    )
    q = Queue(name("oldest"))
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    for text in ("a", "b", "c"):
        await prod.send(TextMessage(text))
    await conn.close()
    assert [m.text for m in await drain(b, q)] == ["b", "c"]
    dead = await dmq_messages_for(b, q.name)
    assert [(d.text, d.properties["JMS_SUN_DMQ_UNDELIVERED_REASON"]) for d in dead] == [
        ("a", "REMOVED_OLDEST")
    ]

    b2 = own_broker(
        "imq.autocreate.destination.maxNumMsgs=2",
        "imq.autocreate.destination.limitBehavior=REMOVE_LOW_PRIORITY",
    )
    q2 = Queue(name("lowprio"))
    conn = await open_conn(b2)
    sess = await conn.create_session()
    prod = await sess.create_producer(q2)
    await prod.send(TextMessage("p5"), priority=5)
    await prod.send(TextMessage("p1"), priority=1)
    await prod.send(TextMessage("p7"), priority=7)
    await conn.close()
    assert [m.text for m in await drain(b2, q2)] == ["p7", "p5"]
    dead = await dmq_messages_for(b2, q2.name)
    assert [(d.text, d.properties["JMS_SUN_DMQ_UNDELIVERED_REASON"]) for d in dead] == [
        ("p1", "REMOVED_LOW_PRIORITY")
    ]


@run
async def test_flow_control_limit_slows_producer_until_consumed(own_broker) -> None:
    b = own_broker(
        "imq.autocreate.destination.maxNumMsgs=3",
        "imq.autocreate.destination.limitBehavior=FLOW_CONTROL",
        "imq.producer.maxBatch=2",
    )
    q = Queue(name("fc"))
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(q)

    async def produce() -> None:
        for i in range(12):
            await prod.send(TextMessage(str(i)), persistent=False)

    task = asyncio.create_task(produce())
    # Nothing may happen: unheld, the twelve sends are done in milliseconds.
    await asyncio.sleep(0.5)
    assert not task.done()  # held: the destination is full and nobody consumes
    got = []
    cconn = await open_conn(b)
    csess = await cconn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    cons = await csess.create_consumer(q)
    await cconn.start()
    while len(got) < 12:
        m = await cons.receive(10)
        assert m is not None, f"stalled after {len(got)}"
        got.append(m.text)
    await asyncio.wait_for(task, 10)
    assert got == [str(i) for i in range(12)]
    await cconn.close()
    await conn.close()


def test_memory_states_change_flow_counts(own_broker) -> None:
    b = own_broker(
        "imq.memory.limit=40k",
        "imq.yellow.threshold=25",
        "imq.orange.threshold=50",
        "imq.red.threshold=200",
    )
    q = name("mem")
    hello = parse_packet(vector("hello.hex"))

    def hello_size() -> int:
        p = Peer(b.host, b.jms_port)
        p.send(build_packet(PacketType.HELLO, props=hello.properties, flags=0x10, consumer_id=1))
        size = p.expect(PacketType.HELLO_REPLY).properties["JMQSize"]
        p.close()
        return size

    def state(peer: Peer) -> str:
        peer.send(build_packet(PacketType.INFO_REQUEST, props={"JMQRequestType": JInt(1)}))
        return decode_hashtable(peer.expect(PacketType.INFO).body)["JMQMemoryState"]

    peer = login(b.host, b.jms_port)
    assert hello_size() == 5000 and state(peer) == "green"
    for i in range(12):  # ~1.1 KB each, past 25% of 40 KB
        peer.send(
            build_packet(
                PacketType.TEXT_MESSAGE,
                body=b"x" * 1000,
                flags=FLAG_Q | 0x10,
                consumer_id=10 + i,
                sequence=10 + i,
                fields={1: q},
            )
        )
        peer.expect(PacketType.SEND_REPLY)
    assert state(peer) == "yellow" and hello_size() == 500
    for i in range(12):
        peer.send(
            build_packet(
                PacketType.TEXT_MESSAGE,
                body=b"x" * 1000,
                flags=FLAG_Q | 0x10,
                consumer_id=30 + i,
                sequence=30 + i,
                fields={1: q},
            )
        )
        peer.expect(PacketType.SEND_REPLY)
    assert state(peer) == "orange" and hello_size() == 50
    assert "memory state ORANGE" in b.log_text()
    asyncio.run(drain(b, Queue(q)))
    deadline = time.monotonic() + 10
    while state(peer) != "green" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert state(peer) == "green" and hello_size() == 5000


def test_red_state_holds_senders_until_memory_recovers(own_broker) -> None:
    b = own_broker(
        "imq.memory.limit=20k",
        "imq.yellow.threshold=10",
        "imq.orange.threshold=20",
        "imq.red.threshold=50",
        "imq.green.count=2",
    )
    q = name("red")
    peer = login(b.host, b.jms_port)
    for i in range(9):  # > 10 KB: red
        peer.send(
            build_packet(
                PacketType.TEXT_MESSAGE,
                body=b"x" * 1200,
                flags=FLAG_Q | 0x10,
                consumer_id=10 + i,
                sequence=10 + i,
                fields={1: q},
            )
        )
        peer.expect(PacketType.SEND_REPLY)
    # The client's last message before its allowance ends carries F: in red, no resume.
    peer.send(
        build_packet(
            PacketType.TEXT_MESSAGE, body=b"y", flags=FLAG_Q | 0x40, sequence=99, fields={1: q}
        )
    )
    peer.sock.settimeout(1.0)
    assert not peer.closed_by_peer() and not peer.pending
    peer.sock.settimeout(10)
    asyncio.run(drain(b, Queue(q)))
    resume = peer.expect(PacketType.RESUME_FLOW)
    assert resume.properties["JMQSize"] == 2 and "JMQProducerID" not in resume.properties


def test_unused_auto_created_destinations_are_reaped(own_broker) -> None:
    b = own_broker("imq.autocreate.reaptime=1")
    q = name("reap")
    peer = login(b.host, b.jms_port)
    peer.request(
        control(PacketType.CREATE_DESTINATION, 3, JMQDestination=q, JMQDestType=JInt(1)),
        PacketType.CREATE_DESTINATION_REPLY,
    )
    deadline = time.monotonic() + 30
    status = 200
    while status == 200 and time.monotonic() < deadline:
        time.sleep(0.2)
        peer.send(control(PacketType.VERIFY_DESTINATION, 4, JMQDestination=q, JMQDestType=JInt(1)))
        status = peer.expect(PacketType.VERIFY_DESTINATION_REPLY).properties["JMQStatus"]
    assert status == 404
    assert f"auto-created destination {q} removed" in b.log_text()


def test_dmq_limit_removes_its_oldest() -> None:
    from broker.core.session import Session

    class Link:
        id = 1
        client_id = None
        render_delivery = None

        def can_deliver(self) -> bool:
            return False

        def send_delivery(self, buf) -> None:  # pragma: no cover - never deliverable
            raise AssertionError

    r = MessageRouter()
    r.dmq.attributes["maxNumMsgs"] = 2
    link = Link()
    sess: Session = r.create_session(link, 2)
    base = parse_packet(vector("send-messages/c2b-13-BYTES_MESSAGE.hex"))
    for n in range(4):
        raw = build_packet(
            PacketType.BYTES_MESSAGE,
            body=bytes([n]),
            flags=FLAG_Q,
            fields={1: "q"},
            sequence=n,
            timestamp=base.timestamp + n,
        )
        r.route(Message(parse_packet(raw), "q", 1), link, 1)
    q = r.queues["q"]
    entries = list(q.dq)
    for e in entries:
        q.dq.remove_where(lambda x, e=e: x is e)
        r.limits.dead(e, "UNDELIVERABLE")
    kept = [parse_packet(e.msg.raw).body for e in r.dmq.dq]
    assert kept == [b"\x02", b"\x03"] and r.dmq.msg_count == 2
    assert q.msg_count == 0 and r.totals.count == 2
    assert r.dmq.dest_type == 0x1001
    _ = sess
