"""Protocol details where the engine answers as OpenMQ 6.9's broker does (issue 35 item 4):
FLOW_PAUSED from a client, JMQSize=0 and JMQBytes in flow control, the destination-type
flavour bits in replies, and BROWSE with JMQMetrics.  In process, packet by packet, like
tests/test_engine.py (whose broker fixture and helpers these tests share); the same
expectations are checked over TCP against our broker and the stock one in
tests/interop/test_wire_stock_details.py.
"""

from __future__ import annotations

import pytest

from broker.engine import ConnectionEngine
from broker.protocol.javaser import decode_object
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import Packet, build_packet
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TOPIC,
    FLAG_A,
    FLAG_C,
    FLAG_F,
    DestState,
    DestType,
    PacketType,
    Status,
)
from broker.server.broker import Broker

from .test_engine import (
    _auth_basic,
    _drive,
    _engine,
    _hello,
    _login,
    _message,
    _producer,
    _request,
    _sent,
    _session,
    _status,
    broker,
)

__all__ = ["broker"]  # the fixture, imported for these tests

pytestmark = pytest.mark.fast

MAX_MSG = 70 * 1024 * 1024


def _consumer(e: ConnectionEngine, sid: int, name: str, **props: object) -> Packet:
    e.receive_data(
        _request(
            PacketType.ADD_CONSUMER,
            JMQDestination=name,
            JMQDestType=JInt(DEST_QUEUE),
            JMQSessionID=JLong(sid),
            **props,
        )
    )
    (reply,) = _sent(e)
    assert _status(reply) == Status.OK, reply.properties
    return reply


def _started_consumer(broker: Broker, name: str, hello_size: int = 0, **props: object):
    """A logged-in engine with a started consumer on queue ``name`` (HELLO's JMQSize =
    ``hello_size`` when given) and the consumer id."""
    e = _engine(broker)
    e.receive_data(_hello(JMQSize=JInt(hello_size)) if hello_size else _hello())
    _sent(e)
    _drive(e, e.receive_data(_auth_basic("guest", "guest")))
    _sent(e)
    reply = _consumer(e, _session(e), name, **props)
    e.receive_data(_request(PacketType.START))
    _sent(e)
    return e, int(reply.properties["JMQConsumerID"])  # type: ignore[arg-type]


def _send(broker: Broker, name: str, n: int) -> None:
    sender = _login(broker)
    for _ in range(n):
        sender.receive_data(_message(name))


# -- FLOW_PAUSED -----------------------------------------------------------------------


def test_flow_paused_is_answered_with_resume_flow(broker: Broker) -> None:
    e = _login(broker)
    m = broker.memory
    e.receive_data(build_packet(PacketType.FLOW_PAUSED, props={"JMQSize": JLong(4096)}))
    (resume,) = _sent(e)
    assert resume.type == PacketType.RESUME_FLOW
    assert resume.properties == {
        "JMQSize": m.count,
        "JMQBytes": m.bytes,
        "JMQMaxMsgBytes": MAX_MSG,
    }
    assert type(resume.properties["JMQBytes"]) is JLong and m.count > 0 and m.bytes > 0
    # Without properties, and with the JMQSize an Integer (OpenMQ's broker fails on that
    # one: it casts to Long), the same.
    e.receive_data(build_packet(PacketType.FLOW_PAUSED))
    e.receive_data(build_packet(PacketType.FLOW_PAUSED, props={"JMQSize": JInt(1)}))
    assert [p.type for p in _sent(e)] == [PacketType.RESUME_FLOW] * 2


def test_flow_paused_in_the_red_waits_for_memory(broker: Broker) -> None:
    e = _login(broker)
    broker.memory.hold("the disk is short of space")
    assert broker.memory.count == 0 and broker.memory.bytes == 0
    e.receive_data(build_packet(PacketType.FLOW_PAUSED))
    assert _sent(e) == [] and e in broker.flow_waiting
    broker.memory.hold(None)
    broker._resume_flow_waiting()  # what check_disk and a memory state change call
    (resume,) = _sent(e)
    assert resume.type == PacketType.RESUME_FLOW and resume.properties["JMQSize"] > 0


# -- JMQSize = 0 and JMQBytes --------------------------------------------------------------


def test_connection_resume_flow_size_zero_lifts_the_limit(broker: Broker) -> None:
    broker.router.create_destination("czq", DEST_QUEUE, None, auto=False)
    e, _cid = _started_consumer(broker, "czq", hello_size=2)
    _send(broker, "czq", 6)
    got = _sent(e)
    assert [bool(p.flags & FLAG_F) for p in got] == [False, True] and e.flow_paused
    # -1 (and no JMQSize) keeps the limit the connection had: two more, the last with F.
    e.receive_data(build_packet(PacketType.RESUME_FLOW, props={"JMQSize": JInt(-1)}))
    assert [bool(p.flags & FLAG_F) for p in _sent(e)] == [False, True]
    # 0 lifts it, as OpenMQ's broker reads it (the seed says "don't send any message").
    e.receive_data(build_packet(PacketType.RESUME_FLOW, props={"JMQSize": JInt(0)}))
    rest = _sent(e)
    assert len(rest) == 2 and not any(p.flags & FLAG_F for p in rest)
    assert e.flow_limit == -1 and not e.flow_paused


def test_consumer_resume_flow_size_zero_lifts_its_prefetch(broker: Broker) -> None:
    broker.router.create_destination("pzq", DEST_QUEUE, None, auto=False)
    e, cid = _started_consumer(broker, "pzq", JMQSize=JInt(2))
    _send(broker, "pzq", 5)
    assert [bool(p.flags & FLAG_C) for p in _sent(e)] == [False, True]
    e.receive_data(
        build_packet(PacketType.RESUME_FLOW, props={"JMQConsumerID": JLong(cid), "JMQSize": 0})
    )
    rest = _sent(e)
    assert len(rest) == 3 and not any(p.flags & FLAG_C for p in rest)


def test_add_consumer_jmqsize_against_the_flow_limit(broker: Broker) -> None:
    for name in ("lim3", "unlim", "noflow"):
        broker.router.create_destination(
            name, DEST_QUEUE, None, auto=False, attributes={"consumerFlowLimit": 3}
        )
    e = _login(broker)
    sid = _session(e)
    assert _consumer(e, sid, "lim3", JMQSize=JInt(10)).properties["JMQSize"] == 3
    assert _consumer(e, sid, "lim3", JMQSize=JInt(0)).properties["JMQSize"] == 3  # ours
    # -1: no limit, the destination's not applied (the seed and OpenMQ's broker agree);
    # none: a client without consumer flow control, never resumed: no limit either.
    unlimited = _consumer(e, sid, "unlim", JMQSize=JInt(-1))
    assert unlimited.properties["JMQSize"] == -1
    no_flow = _consumer(e, sid, "noflow")
    assert "JMQSize" not in no_flow.properties
    _send(broker, "unlim", 5)
    _send(broker, "noflow", 5)
    e.receive_data(_request(PacketType.START))
    got = [p for p in _sent(e) if p.type == PacketType.TEXT_MESSAGE]
    assert len(got) == 10 and not any(p.flags & FLAG_C for p in got)


def test_hello_reply_and_producer_replies_carry_jmqbytes(broker: Broker) -> None:
    e = _engine(broker)
    e.receive_data(_hello())
    hello_reply, _auth_request = _sent(e)
    props = hello_reply.properties
    assert props["JMQSize"] == broker.memory.count and props["JMQBytes"] == broker.memory.bytes
    assert type(props["JMQBytes"]) is JLong and props["JMQMaxMsgBytes"] == MAX_MSG
    _drive(e, e.receive_data(_auth_basic("guest", "guest")))
    _sent(e)
    sid = _session(e)

    def add_producer(name: str) -> dict:
        e.receive_data(
            _request(
                PacketType.ADD_PRODUCER,
                JMQDestination=name,
                JMQDestType=JInt(DEST_QUEUE),
                JMQSessionID=JLong(sid),
            )
        )
        (reply,) = _sent(e)
        assert _status(reply) == Status.OK
        return reply.properties

    # No byte limit: -1, as OpenMQ's broker answers (a Long beside the Integer count).
    free = add_producer("unlimited")
    assert free["JMQSize"] == 1000 and free["JMQBytes"] == -1 and type(free["JMQBytes"]) is JLong
    # A byte limit with flow control: the credit's bytes (no messages yet: 1 KB each).
    broker.router.create_destination(
        "bq", DEST_QUEUE, None, auto=False,
        attributes={"maxTotalMsgBytes": 10 * 1024 * 1024, "limitBehavior": "FLOW_CONTROL"},
    )  # fmt: skip
    limited = add_producer("bq")
    assert 0 < limited["JMQSize"] and limited["JMQBytes"] == limited["JMQSize"] * 1024
    # A full flow-controlled destination: the producer waits, JMQSize and JMQBytes 0.
    broker.router.create_destination(
        "fullq", DEST_QUEUE, None, auto=False,
        attributes={"maxNumMsgs": 2, "limitBehavior": "FLOW_CONTROL"},
    )  # fmt: skip
    _send(broker, "fullq", 2)
    waiting = add_producer("fullq")
    assert (waiting["JMQSize"], waiting["JMQBytes"]) == (0, 0)


def test_producer_resume_flow_carries_jmqbytes(broker: Broker) -> None:
    broker.router.create_destination(
        "rq", DEST_QUEUE, None, auto=False,
        attributes={"maxTotalMsgBytes": 1024 * 1024, "limitBehavior": "FLOW_CONTROL"},
    )  # fmt: skip
    e = _login(broker)
    pid = _producer(e, _session(e), "rq")
    e.receive_data(_message("rq", FLAG_C | FLAG_A, pid, 11))
    _reply, resume = _sent(e)
    assert resume.type == PacketType.RESUME_FLOW and resume.properties["JMQProducerID"] == pid
    size, nbytes = resume.properties["JMQSize"], resume.properties["JMQBytes"]
    assert size > 0 and type(nbytes) is JLong and 0 < nbytes <= 1024 * 1024


def test_paused_producers_are_told_to_stop_and_resumed(broker: Broker) -> None:
    dest = broker.router.create_destination("pauseq", DEST_QUEUE, None, auto=False)
    e = _login(broker)
    pid = _producer(e, _session(e), "pauseq")
    limits = broker.router.limits
    # Paused by an administrator: at once RESUME_FLOW with JMQSize 0 (its credit of 1000
    # is withdrawn), as OpenMQ's broker sends it.
    limits.set_dest_state(dest, DestState.PRODUCERS_PAUSED)
    (stop,) = _sent(e)
    assert stop.type == PacketType.RESUME_FLOW
    assert stop.properties == {"JMQProducerID": pid, "JMQSize": 0, "JMQBytes": 0}
    # Paused further (consumers too): it is not told twice.
    limits.set_dest_state(dest, DestState.PAUSED)
    assert _sent(e) == []
    # A message already under way is taken; its C flag is not answered while paused.
    e.receive_data(_message("pauseq", FLAG_C | FLAG_A, pid, 41))
    assert [(p.type, _status(p)) for p in _sent(e)] == [(PacketType.SEND_REPLY, 200)]
    # Resumed: one RESUME_FLOW with its credit.
    limits.set_dest_state(dest, DestState.RUNNING)
    (go,) = _sent(e)
    assert go.type == PacketType.RESUME_FLOW and go.properties["JMQProducerID"] == pid
    assert (go.properties["JMQSize"], go.properties["JMQBytes"]) == (1000, -1)
    assert dest.waiting_producers == []


# -- destination types in replies ----------------------------------------------------------


def test_reply_dest_types_carry_the_auto_flavour_bit(broker: Broker) -> None:
    e = _login(broker)
    sid = _session(e)

    def verify(name: str, dtype: int) -> int:
        e.receive_data(
            _request(PacketType.VERIFY_DESTINATION, JMQDestination=name, JMQDestType=JInt(dtype))
        )
        (reply,) = _sent(e)
        assert _status(reply) == Status.OK, reply.properties
        return int(reply.properties["JMQDestType"])  # type: ignore[arg-type]

    def create(name: str, dtype: int) -> Packet:
        e.receive_data(
            _request(PacketType.CREATE_DESTINATION, JMQDestination=name, JMQDestType=JInt(dtype))
        )
        (reply,) = _sent(e)
        return reply

    broker.router.create_destination("adminq", DEST_QUEUE, None, auto=False)
    # CREATE_DESTINATION_REPLY repeats the type asked for, flavour bits and all.
    made = create("autoq", DEST_QUEUE | DestType.FLAVOR_SINGLE)
    assert _status(made) == Status.OK and made.properties["JMQDestType"] == 0x101
    assert create("autot", DEST_TOPIC).properties["JMQDestType"] == DEST_TOPIC
    # An existing one: 409 (OpenMQ: 200), naming the destination's own type.
    again = create("autoq", DEST_QUEUE)
    assert _status(again) == Status.CONFLICT and again.properties["JMQDestType"] == 0x121
    # VERIFY_DESTINATION_REPLY: the destination's type, the flavour bits it was made with,
    # AUTO (0x20) when made on demand.
    assert verify("autoq", DEST_QUEUE) == DEST_QUEUE | DestType.FLAVOR_SINGLE | DestType.AUTO
    assert verify("autot", DEST_TOPIC) == DEST_TOPIC | DestType.AUTO
    assert verify("adminq", DEST_QUEUE) == DEST_QUEUE
    assert verify("mq.sys.dmq", DEST_QUEUE) == DEST_QUEUE | DestType.DMQ
    temp = "temporary_destination://queue/127.0.0.1/1/1"
    assert _status(create(temp, DEST_QUEUE | DestType.TEMP)) == Status.OK
    assert verify(temp, DEST_QUEUE | DestType.TEMP) == DEST_QUEUE | DestType.TEMP
    # ADD_CONSUMER_REPLY (OpenMQ sends none) the same as VERIFY_DESTINATION_REPLY.
    assert _consumer(e, sid, "autoq").properties["JMQDestType"] == 0x121
    assert _consumer(e, sid, "adminq").properties["JMQDestType"] == DEST_QUEUE


# -- BROWSE with JMQMetrics ----------------------------------------------------------------


def test_browse_with_jmqmetrics_answers_the_queue_counters(broker: Broker) -> None:
    broker.router.create_destination("mq1", DEST_QUEUE, None, auto=False)
    _send(broker, "mq1", 3)
    e = _login(broker)
    e.receive_data(
        _request(PacketType.BROWSE, 21, JMQDestination="mq1", JMQDestType=JInt(1), JMQMetrics=True)
    )
    (reply,) = _sent(e)
    assert (reply.type, _status(reply), reply.consumer_id) == (PacketType.BROWSE_REPLY, 200, 21)
    assert reply.properties["JMQMetrics"] is True
    assert type(reply.properties["JMQConsumerID"]) is JLong
    counters = decode_object(reply.body, generic=True)
    assert isinstance(counters, dict)
    assert counters["__class__"] == "com.sun.messaging.jmq.util.DestMetricsCounters"
    assert counters["numMsgs"] == counters["numMsgsIn"] == 3 and counters["timeStamp"] > 0
    # It names no browser: DELIVER with its id finds nothing.
    bid = reply.properties["JMQConsumerID"]
    e.receive_data(
        build_packet(PacketType.DELIVER, props={"JMQConsumerID": bid}, body=bytes(32), flags=FLAG_A)
    )
    assert _status(_sent(e)[0]) == Status.NOT_FOUND
    # JMQMetrics false: the usual list of SysMessageIDs.
    e.receive_data(
        _request(PacketType.BROWSE, JMQDestination="mq1", JMQDestType=JInt(1), JMQMetrics=False)
    )
    (listing,) = _sent(e)
    assert "JMQMetrics" not in listing.properties and len(listing.body) == 3 * 32
    # An unknown queue: 404 with JMQCanCreate, as any BROWSE.
    e.receive_data(_request(PacketType.BROWSE, JMQDestination="nosuch", JMQMetrics=True))
    (missing,) = _sent(e)
    assert _status(missing) == Status.NOT_FOUND and "JMQCanCreate" in missing.properties


# -- the asynchronous ERROR packet ---------------------------------------------------------


def test_failed_requests_are_answered_by_replies_never_by_error(broker: Broker) -> None:
    """OpenMQ 6.9's broker never sends ERROR (30): a failed request is answered by its
    reply's JMQStatus, or, without the A flag, not at all.  Neither does ours."""
    e = _login(broker)
    sid = _session(e)
    bad = [
        _request(PacketType.ADD_CONSUMER, JMQDestination="q", JMQSessionID=JLong(sid + 99)),
        _request(PacketType.DELETE_CONSUMER, JMQConsumerID=JLong(12345)),
        _request(PacketType.BROWSE),
        build_packet(PacketType.ACKNOWLEDGE, body=b"odd"),  # no A flag: no answer at all
        build_packet(PacketType.DELETE_PRODUCER, props={"JMQProducerID": JLong(1)}),
    ]
    for raw in bad:
        e.receive_data(raw)
    replies = _sent(e)
    assert [p.type for p in replies] == [
        PacketType.ADD_CONSUMER_REPLY,
        PacketType.DELETE_CONSUMER_REPLY,
        PacketType.BROWSE_REPLY,
    ]
    assert all(_status(p) >= 400 for p in replies)
    assert e.state.name == "READY"
