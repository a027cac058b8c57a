"""The client against the real broker (``manage.py runbroker`` via the conftest fixtures)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from openmq_client import (
    AckMode,
    BytesMessage,
    Connection,
    DeliveryMode,
    InvalidClientIDException,
    InvalidSelectorException,
    JByte,
    JFloat,
    JInt,
    JLong,
    JMSSecurityException,
    JShort,
    MapMessage,
    Message,
    ObjectMessage,
    Queue,
    StreamMessage,
    TemporaryQueue,
    TextMessage,
    Topic,
    connect,
)

pytestmark = pytest.mark.timeout(120)


def run(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """Run an async test on a fresh event loop."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


async def open_conn(b: Any, **kw: Any) -> Connection:
    kw.setdefault("request_timeout", 20)
    return await connect(b.host, b.portmapper_port, **kw)


PROPS: dict[str, object] = {
    "pBool": True,
    "pByte": JByte(-7),
    "pShort": JShort(31000),
    "pInt": JInt(-2000000000),
    "pLong": JLong(9000000000000),
    "pFloat": JFloat(1.5),
    "pDouble": -2.25,
    "pString": "red é €",
}


def assert_props(m: Message) -> None:
    got = m.properties
    for k, v in PROPS.items():
        assert got[k] == v, k
        assert type(got[k]) is type(v), k
    assert got["JMSXDeliveryCount"] == 1


def make_messages() -> list[Message]:
    kw = {"properties": PROPS}
    return [
        TextMessage("hello ☃", **kw),
        BytesMessage(bytes(range(256)), **kw),
        MapMessage(
            {
                "b": True,
                "y": JByte(1),
                "s": JShort(2),
                "i": 3,
                "l": JLong(4),
                "f": JFloat(0.5),
                "d": 0.25,
                "t": "x",
                "a": b"\x01\x02",
            },
            **kw,
        ),
        StreamMessage([1, "two", 3.0, True, None, b"\x00"], **kw),
        ObjectMessage.from_value("serialised string", **kw),
        Message(**kw),
    ]


def check_bodies(got: list[Message | None], sent: list[Message]) -> None:
    assert [type(m) for m in got] == [type(m) for m in sent]
    for g, s in zip(got, sent, strict=True):
        assert g is not None
        assert_props(g)
        assert g.message_id == s.message_id
        assert g.timestamp == s.timestamp
        if isinstance(s, TextMessage):
            assert g.text == s.text  # type: ignore[union-attr]
        elif isinstance(s, BytesMessage):
            assert g.data == s.data  # type: ignore[union-attr]
        elif isinstance(s, MapMessage):
            assert g.map == s.map  # type: ignore[union-attr]
            assert {k: type(v) for k, v in g.map.items()} == {  # type: ignore[union-attr]
                k: type(JInt(v)) if type(v) is int else type(v) for k, v in s.map.items()
            }
        elif isinstance(s, StreamMessage):
            assert g.values == s.values  # type: ignore[union-attr]
        elif isinstance(s, ObjectMessage):
            assert g.get_object() == "serialised string"  # type: ignore[union-attr]


# --------------------------------------------------------------------------


@run
async def test_handshake_default(broker: Any) -> None:
    conn = await open_conn(broker)
    assert conn.connection_id
    assert conn.auth_type in ("basic", "digest")
    assert conn.broker_protocol_level >= 500
    await conn.close()
    assert conn.is_closed


@pytest.mark.parametrize("auth", ["basic", "digest"])
def test_handshake_auth_types(own_broker: Any, auth: str) -> None:
    b = own_broker(f"imq.authentication.type={auth}")

    async def go() -> None:
        conn = await connect(b.host, b.jms_port, direct=True, request_timeout=20)
        assert conn.auth_type == auth
        sess = await conn.create_session()
        await sess.close()
        await conn.close()
        with pytest.raises(JMSSecurityException):
            await connect(b.host, b.jms_port, direct=True, password="wrong")

    asyncio.run(go())


@pytest.mark.parametrize("kind", ["queue", "topic"])
@run
async def test_six_message_types_with_properties(broker: Any, kind: str) -> None:
    conn = await open_conn(broker)
    dest = Queue(name("q6")) if kind == "queue" else Topic(name("t6"))
    sess = await conn.create_session()
    cons = await sess.create_consumer(dest)
    prod = await sess.create_producer(dest)
    await conn.start()
    sent = make_messages()
    for m in sent:
        await prod.send(m, persistent=False)
    got = [await cons.receive(10) for _ in sent]
    check_bodies(got, sent)
    assert all(g.destination == dest for g in got if g is not None)
    await conn.close()


@run
async def test_persistent_headers_and_correlation(broker: Any) -> None:
    conn = await open_conn(broker)
    q = Queue(name("hdr"))
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    cons = await sess.create_consumer(q)
    await conn.start()
    m = TextMessage("h", correlation_id="corr-9", jms_type="kind", reply_to=Queue("elsewhere"))
    await prod.send(m, priority=7, ttl_ms=60_000)
    g = await cons.receive(10)
    assert g is not None
    assert g.message_id == m.message_id
    assert g.delivery_mode == DeliveryMode.PERSISTENT
    assert g.priority == 7
    assert g.expiration == m.timestamp + 60_000
    assert g.correlation_id == "corr-9" and g.jms_type == "kind"
    assert g.reply_to == Queue("elsewhere")
    assert not g.redelivered and g.delivery_count == 1
    await conn.close()


@run
async def test_a_send_repeated_after_a_lost_reply_is_stored_once(broker: Any) -> None:
    """A persistent send repeated with the R bit (what FailoverConnection does when the
    SEND_REPLY never came) goes with the message's first id: the broker, which stored
    the first, answers 304 and keeps one copy; the send returns as stored.  On another
    connection (as after a failover) too.  A message it never stored is taken."""
    conn = await open_conn(broker)
    q = Queue(name("resend"))
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    m = TextMessage("once")
    await prod.send(m)
    first = m.message_id
    await prod.send(m, redelivered=True)
    assert m.message_id == first
    other = await open_conn(broker)
    oprod = await (await other.create_session()).create_producer(q)
    await oprod.send(m, redelivered=True)
    assert m.message_id == first
    fresh = TextMessage("never stored")
    await oprod.send(fresh, redelivered=True)  # no first id: a new one, taken
    cons = await sess.create_consumer(q)
    await conn.start()
    got = [await cons.receive(10) for _ in range(2)]
    assert [g.text for g in got if g is not None] == ["once", "never stored"]  # type: ignore[attr-defined]
    assert got[0] is not None and got[0].message_id == first
    assert await cons.receive(0.5) is None
    await other.close()
    await conn.close()


@run
async def test_receive_timeout(broker: Any) -> None:
    conn = await open_conn(broker)
    sess = await conn.create_session()
    cons = await sess.create_consumer(Queue(name("empty")))
    await conn.start()
    t0 = time.monotonic()
    assert await cons.receive(0.3) is None
    assert time.monotonic() - t0 >= 0.25
    assert await cons.receive_no_wait() is None
    await conn.close()


@run
async def test_browse(broker: Any) -> None:
    conn = await open_conn(broker)
    q = Queue(name("browse"))
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    for i in range(5):
        await prod.send(TextMessage(f"m{i}", properties={"n": i}), persistent=False)
    browser = await sess.create_browser(q)
    msgs = await browser.messages()
    assert [m.text for m in msgs] == [f"m{i}" for i in range(5)]  # type: ignore[attr-defined]
    selected = await (await sess.create_browser(q, "n >= 3")).messages()
    assert [m.get_property("n") for m in selected] == [3, 4]
    # Browsing does not consume.
    cons = await sess.create_consumer(q)
    await conn.start()
    got = [await cons.receive(10) for _ in range(5)]
    assert [m.text for m in got if m is not None] == [f"m{i}" for i in range(5)]  # type: ignore[attr-defined]
    assert await (await sess.create_browser(q)).messages() == []
    await conn.close()


@run
async def test_temporary_queue_request_reply(broker: Any) -> None:
    svc = Queue(name("svc"))
    server = await open_conn(broker)
    ssess = await server.create_session()
    scons = await ssess.create_consumer(svc)
    sprod = await ssess.create_producer(None)

    async def responder(m: Message) -> None:
        assert isinstance(m.reply_to, TemporaryQueue)
        reply = TextMessage(f"pong:{m.text}", correlation_id=m.message_id)  # type: ignore[attr-defined]
        await sprod.send(reply, destination=m.reply_to, persistent=False)

    scons.set_listener(responder)
    await server.start()

    client = await open_conn(broker)
    csess = await client.create_session()
    await client.start()
    for i in range(3):
        req = TextMessage(f"ping{i}")
        reply = await csess.request(svc, req, timeout=10)
        assert isinstance(reply, TextMessage) and reply.text == f"pong:ping{i}"
        assert reply.correlation_id == req.message_id
    tq = await csess.create_temporary_queue()
    assert tq.name.startswith("temporary_destination://queue/")
    await tq.delete()
    await client.close()
    await server.close()


@run
async def test_listener(broker: Any) -> None:
    conn = await open_conn(broker)
    q = Queue(name("lst"))
    sess = await conn.create_session()
    cons = await sess.create_consumer(q)
    got: list[str] = []
    done = asyncio.Event()

    def on_message(m: Message) -> None:
        got.append(m.text)  # type: ignore[attr-defined]
        if len(got) == 20:
            done.set()

    cons.set_listener(on_message)
    await conn.start()
    psess = await conn.create_session()
    prod = await psess.create_producer(q)
    for i in range(20):
        await prod.send(TextMessage(str(i)), persistent=False)
    await asyncio.wait_for(done.wait(), 10)
    assert got == [str(i) for i in range(20)]
    await conn.close()


@run
async def test_client_ack_and_recover(broker: Any) -> None:
    conn = await open_conn(broker)
    q = Queue(name("cack"))
    sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    prod = await sess.create_producer(q)
    for i in range(4):
        await prod.send(TextMessage(str(i)), persistent=False)
    cons = await sess.create_consumer(q)
    await conn.start()
    m0 = await cons.receive(10)
    assert m0 is not None and m0.text == "0"  # type: ignore[attr-defined]
    await m0.acknowledge()
    m1 = await cons.receive(10)
    assert m1 is not None and m1.text == "1" and not m1.redelivered  # type: ignore[attr-defined]
    await sess.recover()
    again = await cons.receive(10)
    assert again is not None and again.text == "1"  # type: ignore[attr-defined]
    assert again.redelivered and again.delivery_count == 2
    rest = [await cons.receive(10) for _ in range(2)]
    assert [m.text for m in rest if m is not None] == ["2", "3"]  # type: ignore[attr-defined]
    await rest[-1].acknowledge()  # type: ignore[union-attr]
    assert await cons.receive(0.3) is None
    await conn.close()

    # Everything was acknowledged: nothing comes back.
    conn = await open_conn(broker)
    sess = await conn.create_session()
    cons = await sess.create_consumer(q)
    await conn.start()
    assert await cons.receive(0.5) is None
    await conn.close()


@run
async def test_unacked_messages_return_after_close(broker: Any) -> None:
    q = Queue(name("ret"))
    conn = await open_conn(broker)
    sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    prod = await sess.create_producer(q)
    for i in range(3):
        await prod.send(TextMessage(str(i)), persistent=False)
    cons = await sess.create_consumer(q)
    await conn.start()
    assert (await cons.receive(10)) is not None
    await conn.close()

    conn = await open_conn(broker)
    sess = await conn.create_session()
    cons = await sess.create_consumer(q)
    await conn.start()
    got = [await cons.receive(10) for _ in range(3)]
    assert [m.text for m in got if m is not None] == ["0", "1", "2"]  # type: ignore[attr-defined]
    assert got[0].redelivered  # type: ignore[union-attr]
    await conn.close()


@run
async def test_dups_ok_and_no_ack_modes(broker: Any) -> None:
    for mode in (AckMode.DUPS_OK_ACKNOWLEDGE, AckMode.NO_ACKNOWLEDGE):
        q = Queue(name("mode"))
        conn = await open_conn(broker)
        sess = await conn.create_session(mode)
        prod = await sess.create_producer(q)
        cons = await sess.create_consumer(q)
        await conn.start()
        for i in range(150):
            await prod.send(TextMessage(str(i)), persistent=False)
        got = [await cons.receive(10) for _ in range(150)]
        assert [m.text for m in got if m is not None] == [str(i) for i in range(150)]  # type: ignore[attr-defined]
        await conn.close()
        conn = await open_conn(broker)
        sess = await conn.create_session()
        cons = await sess.create_consumer(q)
        await conn.start()
        assert await cons.receive(0.5) is None, mode
        await conn.close()


@run
async def test_selector_and_invalid_selector(broker: Any) -> None:
    conn = await open_conn(broker)
    q = Queue(name("sel"))
    sess = await conn.create_session()
    with pytest.raises(InvalidSelectorException):
        await sess.create_consumer(q, "n >>> 1")
    cons = await sess.create_consumer(q, "color = 'red' AND n > 1")
    prod = await sess.create_producer(q)
    await conn.start()
    for i, color in enumerate(["red", "blue", "red", "red"]):
        await prod.send(TextMessage(str(i), properties={"color": color, "n": i}), persistent=False)
    got = [await cons.receive(5) for _ in range(2)]
    assert [m.text for m in got if m is not None] == ["2", "3"]  # type: ignore[attr-defined]
    assert await cons.receive(0.3) is None
    await conn.close()


@run
async def test_client_id_conflict(broker: Any) -> None:
    cid = name("cid")
    a = await open_conn(broker, client_id=cid)
    assert a.client_id == cid
    b = await open_conn(broker)
    with pytest.raises(InvalidClientIDException):
        await b.set_client_id(cid)
    await b.close()
    await a.close()


@run
async def test_durable_subscription(broker: Any) -> None:
    cid = name("dur")
    t = Topic(name("dt"))
    conn = await open_conn(broker, client_id=cid)
    sess = await conn.create_session()
    sub = await sess.create_durable_subscriber(t, "sub1")
    await sub.close()
    prod = await sess.create_producer(t)
    await prod.send(TextMessage("while away"))
    await conn.close()

    conn = await open_conn(broker, client_id=cid)
    sess = await conn.create_session()
    sub = await sess.create_durable_subscriber(t, "sub1")
    await conn.start()
    m = await sub.receive(10)
    assert m is not None and m.text == "while away"  # type: ignore[attr-defined]
    await sub.close()
    await sess.unsubscribe("sub1")
    await conn.close()


@run
async def test_transactions(broker: Any) -> None:
    q = Queue(name("tx"))
    conn = await open_conn(broker)
    tsess = await conn.create_session(transacted=True)
    prod = await tsess.create_producer(q)
    rsess = await conn.create_session()
    cons = await rsess.create_consumer(q)
    await conn.start()
    await prod.send(TextMessage("a"), persistent=False)
    assert await cons.receive(0.3) is None  # not visible before commit
    await tsess.commit()
    m = await cons.receive(10)
    assert m is not None and m.text == "a"  # type: ignore[attr-defined]
    await prod.send(TextMessage("b"), persistent=False)
    await tsess.rollback()
    assert await cons.receive(0.3) is None
    await conn.close()

    # Consuming in a transaction: rollback gives the message back, commit consumes it.
    q2 = Queue(name("txc"))
    conn = await open_conn(broker)
    tsess = await conn.create_session(transacted=True)
    tcons = await tsess.create_consumer(q2)
    psess = await conn.create_session()
    await (await psess.create_producer(q2)).send(TextMessage("c"), persistent=False)
    await conn.start()
    got = await tcons.receive(10)
    assert got is not None and got.text == "c"  # type: ignore[attr-defined]
    await tsess.rollback()
    again = await tcons.receive(10)
    assert again is not None and again.text == "c" and again.redelivered  # type: ignore[attr-defined]
    await tsess.commit()
    assert await tcons.receive(0.3) is None
    await conn.close()
    conn = await open_conn(broker)
    sess = await conn.create_session()
    cons = await sess.create_consumer(q2)
    await conn.start()
    assert await cons.receive(0.5) is None
    await conn.close()


@run
async def test_consumer_added_to_started_connection_gets_waiting_messages(broker: Any) -> None:
    """A consumer created after start() must get messages already in the queue.

    The broker has to send ADD_CONSUMER_REPLY before the first delivery: the client
    (like the Java client) learns the consumer id from that reply and drops
    deliveries for ids it does not know.
    """
    q = Queue(name("late"))
    conn = await open_conn(broker)
    sess = await conn.create_session()
    await (await sess.create_producer(q)).send(TextMessage("waiting"), persistent=False)
    await conn.start()
    cons = await sess.create_consumer(q)
    m = await cons.receive(5)
    assert m is not None and m.text == "waiting"  # type: ignore[attr-defined]
    await conn.close()


@run
async def test_many_messages_through_flow_control(broker: Any) -> None:
    """More messages than the prefetch and the connection flow count: RESUME_FLOWs work."""
    q = Queue(name("flow"))
    conn = await open_conn(broker, flow_count=50)
    sess = await conn.create_session(AckMode.DUPS_OK_ACKNOWLEDGE)
    cons = await sess.create_consumer(q, prefetch=20)
    psess = await conn.create_session()
    prod = await psess.create_producer(q)
    await conn.start()
    n = 3000

    async def produce() -> None:
        for i in range(n):
            await prod.send(BytesMessage(i.to_bytes(4, "big") * 256), persistent=False)

    task = asyncio.ensure_future(produce())
    for i in range(n):
        m = await cons.receive(20)
        assert m is not None, i
        assert m.data[:4] == i.to_bytes(4, "big")  # type: ignore[attr-defined]
    await task
    await conn.close()


def test_sync_wrapper(broker: Any) -> None:
    from openmq_client.sync import connect as sync_connect

    q = Queue(name("sync"))
    with sync_connect(broker.host, broker.portmapper_port, request_timeout=20) as conn:
        sess = conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        prod = sess.create_producer(q)
        cons = sess.create_consumer(q)
        conn.start()
        prod.send(TextMessage("one"), persistent=False)
        m = cons.receive(10)
        assert isinstance(m, TextMessage) and m.text == "one"
        m.acknowledge()
        assert cons.receive(0.2) is None
        q2 = Queue(name("sync_browse"))
        sess.create_producer(q2).send(TextMessage("kept"))
        browser = sess.create_browser(q2)
        assert [x.text for x in browser.messages()] == ["kept"]  # type: ignore[attr-defined]
        browser.close()
        prod.send(TextMessage("two"))
        got: list[str] = []
        ev = threading.Event()

        def listener(msg: Message) -> None:
            got.append(msg.text)  # type: ignore[attr-defined]
            msg.acknowledge()
            if len(got) == 2:
                ev.set()

        cons.set_listener(listener)
        prod.send(TextMessage("three"), persistent=False)
        assert ev.wait(10)
        assert got == ["two", "three"]
        tq = sess.create_temporary_queue()
        tq.delete()


def test_sync_request_reply(broker: Any) -> None:
    from openmq_client.sync import connect as sync_connect

    svc = Queue(name("ssvc"))
    with sync_connect(broker.host, broker.portmapper_port) as server:
        ssess = server.create_session()
        scons = ssess.create_consumer(svc)
        sprod = ssess.create_producer()

        def serve(m: Message) -> None:
            sprod.send(TextMessage(m.text.upper()), destination=m.reply_to, persistent=False)  # type: ignore[attr-defined]

        scons.set_listener(serve)
        server.start()
        with sync_connect(broker.host, broker.portmapper_port) as client:
            csess = client.create_session()
            client.start()
            r = csess.request(svc, TextMessage("abc"), timeout=10)
            assert isinstance(r, TextMessage) and r.text == "ABC"


@run
async def test_expiration_priority_and_large_messages(broker: Any) -> None:
    q = Queue(name("prio"))
    conn = await open_conn(broker)
    sess = await conn.create_session()
    prod = await sess.create_producer(q)
    await prod.send(TextMessage("expires"), persistent=False, ttl_ms=100)
    await prod.send(TextMessage("low"), persistent=False, priority=1)
    await prod.send(TextMessage("high"), persistent=False, priority=9)
    big = BytesMessage(bytes(range(256)) * 4096)  # 1 MiB
    await prod.send(big, persistent=False, priority=1)
    await asyncio.sleep(0.3)
    cons = await sess.create_consumer(q)
    await conn.start()
    got = [await cons.receive(5) for _ in range(3)]
    assert [type(m).__name__ for m in got] == ["TextMessage", "TextMessage", "BytesMessage"]
    assert [m.text for m in got[:2]] == ["high", "low"]  # type: ignore[union-attr]
    assert got[2].data == big.data  # type: ignore[union-attr]
    assert await cons.receive(0.3) is None  # the expired one was never delivered
    await conn.close()


@run
async def test_no_local_and_temporary_topic(broker: Any) -> None:
    conn = await open_conn(broker)
    sess = await conn.create_session()
    tt = await sess.create_temporary_topic()
    assert tt.name.startswith("temporary_destination://topic/")
    local = await sess.create_consumer(tt, no_local=True)
    everyone = await sess.create_consumer(tt)
    await conn.start()
    await (await sess.create_producer(tt)).send(TextMessage("mine"), persistent=False)
    m = await everyone.receive(5)
    assert m is not None and m.text == "mine"  # type: ignore[attr-defined]
    assert await local.receive(0.3) is None

    other = await open_conn(broker)
    osess = await other.create_session()
    await (await osess.create_producer(tt)).send(TextMessage("theirs"), persistent=False)
    m = await local.receive(5)
    assert m is not None and m.text == "theirs"  # type: ignore[attr-defined]
    # Only the creating connection may consume from a temporary destination.
    from openmq_client import JMSException

    with pytest.raises(JMSException):
        await osess.create_consumer(tt)
    await other.close()
    await conn.close()


@run
async def test_delivery_delay(broker: Any) -> None:
    q = Queue(name("delay"))
    conn = await open_conn(broker)
    sess = await conn.create_session()
    cons = await sess.create_consumer(q)
    await conn.start()
    m = TextMessage("later")
    await (await sess.create_producer(q)).send(m, persistent=False, delivery_delay_ms=500)
    assert m.delivery_time >= m.timestamp + 500
    assert await cons.receive(0.2) is None
    got = await cons.receive(5)
    assert got is not None and got.delivery_time == m.delivery_time
    await conn.close()
