"""Selectors through a real broker: queues keep what a consumer's selector refuses for
the others, topics filter per subscriber, browsers filter, headers can be selected."""

from __future__ import annotations

from typing import Any

import pytest

from broker.protocol.jtypes import JInt
from openmq_client import AckMode, InvalidSelectorException, Queue, TextMessage, Topic

from .test_client_live import name, open_conn, run
from .wire import control, login

pytestmark = pytest.mark.timeout(120)


async def texts(cons, n: int) -> list[str]:
    out = []
    for _ in range(n):
        m = await cons.receive(5)
        assert m is not None, f"only {out}"
        out.append(m.text)
    assert await cons.receive(0.3) is None
    return out


@run
async def test_queue_messages_wait_for_a_matching_consumer(broker: Any) -> None:
    q = Queue(name("qsel"))
    conn = await open_conn(broker)
    sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    prod = await sess.create_producer(q)
    for i, region in enumerate(["eu", "us", "eu", "ap", "us"]):
        await prod.send(TextMessage(f"{region}{i}", properties={"region": region, "n": i}))
    eu = await sess.create_consumer(q, "region = 'eu'")
    us = await sess.create_consumer(q, "region IN ('us') AND n >= 1")
    await conn.start()
    assert await texts(eu, 2) == ["eu0", "eu2"]
    assert await texts(us, 2) == ["us1", "us4"]
    # "ap3" matched nobody: still queued for a later consumer.
    rest = await sess.create_consumer(q)
    assert await texts(rest, 1) == ["ap3"]
    await conn.close()


@run
async def test_topic_subscribers_filter_independently(broker: Any) -> None:
    t = Topic(name("tsel"))
    conn = await open_conn(broker)
    sess = await conn.create_session()
    hot = await sess.create_consumer(t, "temp > 30")
    cold = await sess.create_consumer(t, "temp < 0 OR alert IS NOT NULL")
    everyone = await sess.create_consumer(t)
    await conn.start()
    prod = await sess.create_producer(t)
    await prod.send(TextMessage("35", properties={"temp": 35}))
    await prod.send(TextMessage("-5", properties={"temp": -5}))
    await prod.send(TextMessage("10!", properties={"temp": 10, "alert": True}))
    assert await texts(hot, 1) == ["35"]
    assert await texts(cold, 2) == ["-5", "10!"]
    assert await texts(everyone, 3) == ["35", "-5", "10!"]
    await conn.close()


@run
async def test_header_fields_in_selectors(broker: Any) -> None:
    q = Queue(name("hsel"))
    conn = await open_conn(broker)
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    m1 = TextMessage("urgent")
    m1.jms_type = "alarm"
    await prod.send(m1, priority=8, persistent=True)
    m2 = TextMessage("routine")
    m2.correlation_id = "c-42"
    await prod.send(m2, priority=2, persistent=False)
    cons = await sess.create_consumer(
        q, "JMSPriority > 4 AND JMSType = 'alarm' AND JMSDeliveryMode = 'PERSISTENT'"
    )
    other = await sess.create_consumer(q, "JMSCorrelationID LIKE 'c-%' AND JMSPriority < 4")
    await conn.start()
    assert await texts(cons, 1) == ["urgent"]
    assert await texts(other, 1) == ["routine"]
    await conn.close()


@run
async def test_browse_with_selector_and_bad_selectors(broker: Any) -> None:
    q = Queue(name("bsel"))
    conn = await open_conn(broker)
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    for i in range(6):
        await prod.send(TextMessage(str(i), properties={"n": i}))
    browser = await sess.create_browser(q, "n BETWEEN 2 AND 4")
    assert [m.text for m in await browser.messages()] == ["2", "3", "4"]
    with pytest.raises(InvalidSelectorException):
        await sess.create_consumer(q, "n = ")
    with pytest.raises(InvalidSelectorException):
        await (await sess.create_browser(q, "n LIKE 5")).messages()
    await conn.close()


def test_bad_selector_statuses_on_the_wire(broker: Any) -> None:
    """400 with the reason in JMQReason on ADD_CONSUMER and BROWSE (VERIFY is in test_broker_misc)."""
    from broker.protocol.jtypes import JLong
    from broker.protocol.types import PacketType

    peer = login(broker.host, broker.jms_port)
    sid = peer.request(
        control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(1)), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    r = peer.request(
        control(
            PacketType.ADD_CONSUMER,
            4,
            JMQDestination="s",
            JMQDestType=JInt(1),
            JMQSessionID=JLong(sid),
            JMQSelector="a =",
        ),
        PacketType.ADD_CONSUMER_REPLY,
        400,
    )
    assert "selector" in r.properties["JMQReason"]
    r = peer.request(
        control(PacketType.BROWSE, 5, JMQDestination="s", JMQSelector="'x' < 'y'"),
        PacketType.BROWSE_REPLY,
        400,
    )
    assert "selector" in r.properties["JMQReason"]
