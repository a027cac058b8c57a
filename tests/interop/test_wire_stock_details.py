"""Protocol details no stock client exercises, checked on the wire against a live broker:
ours, or OpenMQ 6.9's with ``--interop-broker=stock`` (the same expectations hold for
both).  Raw packets (tests/wire.py), since the stock clients never send FLOW_PAUSED,
JMQSize=0 on a connection RESUME_FLOW or JMQMetrics on BROWSE, and ignore JMQBytes and
the flavour bits they are sent.  The same rules, packet by packet in process:
tests/test_engine_stock_details.py; what they mean: docs/developers/protocol.md
("Flow control", "Destination types in replies").

Where the two brokers differ deliberately the test says which answers what
(``broker_kind_name``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import read_portmapper
from broker.protocol.javaser import decode_object
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import Packet, build_packet
from broker.protocol.portmapper import parse_table
from broker.protocol.types import FLAG_A, FLAG_C, FLAG_F, FLAG_Q, PacketType

from ..wire import Peer, control, login
from .imqcmd_stock import StockImqcmd, missing

# Auto-created queues let a consumer prefetch 3 messages at most (the default is 1000).
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.broker_props("imq.autocreate.queue.consumerFlowLimit=3"),
]

Q, T = 1, 2
MAX_MSG = 70 * 1024 * 1024  # imq.message.max_size's default on both brokers
_ids = itertools.count(100)


def jms_port(b: Any) -> int:
    entry = parse_table(read_portmapper(b.host, b.portmapper_port)).find(name="jms")
    assert entry is not None
    return entry.port


def request(peer: Peer, ptype: int, **props: object) -> Packet:
    """Send ``ptype`` with the A flag and return its reply (deliveries before it kept)."""
    cid = next(_ids)
    peer.send(control(ptype, cid, **props))
    reply = peer.expect(ptype + 1)
    assert reply.consumer_id == cid
    return reply


def session(peer: Peer) -> JLong:
    reply = request(peer, PacketType.CREATE_SESSION, JMQAckMode=JInt(1))
    return reply.properties["JMQSessionID"]  # type: ignore[return-value]


def send(peer: Peer, queue: str, n: int) -> None:
    """``n`` acknowledged messages to ``queue`` (made first: OpenMQ's broker answers 500
    to a send that would have to make it)."""
    request(peer, PacketType.CREATE_DESTINATION, JMQDestination=queue, JMQDestType=JInt(Q))
    for i in range(n):
        peer.send(
            build_packet(
                PacketType.TEXT_MESSAGE,
                flags=FLAG_Q | FLAG_A,
                consumer_id=next(_ids),
                sequence=next(_ids),  # a SysMessageID of its own (else a resend: 304)
                fields={1: queue},
                body=b"m%d" % i,
            )
        )
        assert peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"] == 200


def deliveries(peer: Peer, n: int) -> list[Packet]:
    """The next ``n`` messages the broker pushes (nothing else is expected between)."""
    got = [peer.recv() for _ in range(n)]
    assert all(p.type == PacketType.TEXT_MESSAGE for p in got), [p.type for p in got]
    return got


def hello(peer: Peer, **props: object) -> Packet:
    """HELLO as the stock Java client writes it (level 500), plus ``props``; returns the
    HELLO_REPLY and completes a basic or digest login as guest."""
    from broker.protocol.auth import encode_auth_body, encode_basic_password
    from broker.security.digest import digest_response, md5str

    peer.send(
        build_packet(
            PacketType.HELLO,
            props={"JMQProtocolLevel": JInt(500), "JMQVersion": "6.9.0", **props},
            flags=FLAG_A,
            consumer_id=1,
        )
    )
    reply = peer.expect(PacketType.HELLO_REPLY)
    req = peer.expect(PacketType.AUTHENTICATE_REQUEST)
    kind = req.properties["JMQAuthType"]
    if kind == "basic":
        cred = encode_basic_password("guest")
    else:
        cred = digest_response(md5str("guest:guest"), req.body.decode("ascii"))
    auth = build_packet(
        PacketType.AUTHENTICATE,
        props={"JMQAuthType": kind},
        body=encode_auth_body("guest", cred),
        flags=FLAG_A,
        consumer_id=2,
    )
    peer.request(auth, PacketType.AUTHENTICATE_REPLY)
    return reply


@pytest.fixture
def peer(interop_broker: Any):
    p = login(interop_broker.host, jms_port(interop_broker))
    yield p
    p.close()


def test_flow_paused_is_answered_with_resume_flow(peer: Peer) -> None:
    # No JMQSize, and the Long OpenMQ's broker reads (an Integer makes it answer 500).
    for props in ({}, {"JMQSize": JLong(4096)}):
        peer.send(build_packet(PacketType.FLOW_PAUSED, props=props))
        resume = peer.expect(PacketType.RESUME_FLOW)
        p = resume.properties
        assert set(p) == {"JMQSize", "JMQBytes", "JMQMaxMsgBytes"}, p
        assert type(p["JMQSize"]) is JInt and p["JMQSize"] > 0
        assert type(p["JMQBytes"]) is JLong and p["JMQBytes"] > 0
        assert p["JMQMaxMsgBytes"] == MAX_MSG


def test_hello_reply_and_add_producer_reply_carry_jmqbytes(interop_broker: Any) -> None:
    peer = Peer(interop_broker.host, jms_port(interop_broker))
    try:
        p = hello(peer).properties
        assert type(p["JMQSize"]) is JInt and p["JMQSize"] > 0
        assert type(p["JMQBytes"]) is JLong and p["JMQBytes"] > 0
        assert p["JMQMaxMsgBytes"] == MAX_MSG
        sid = session(peer)
        # An auto-created queue: REJECT_NEWEST, so a count and no byte limit.
        reply = request(
            peer,
            PacketType.ADD_PRODUCER,
            JMQDestination="wireBytesQ",
            JMQDestType=JInt(Q),
            JMQSessionID=sid,
        ).properties
        assert reply["JMQSize"] == 1000 and type(reply["JMQSize"]) is JInt
        assert reply["JMQBytes"] == -1 and type(reply["JMQBytes"]) is JLong
        assert reply["JMQDestinationID"] == "Q:wireBytesQ"
    finally:
        peer.close()


def test_connection_resume_flow_jmqsize_zero_and_minus_one(interop_broker: Any) -> None:
    peer = Peer(interop_broker.host, jms_port(interop_broker))
    try:
        # The connection may take 2 messages per RESUME_FLOW (the Java client's
        # imqConnectionFlowCount travels as JMQRBufferSize).
        hello(peer, JMQRBufferSize=JInt(2))
        sid = session(peer)
        send(peer, "wireConnFlowQ", 6)
        # No JMQSize: no consumer flow control, only the connection's.
        request(
            peer,
            PacketType.ADD_CONSUMER,
            JMQDestination="wireConnFlowQ",
            JMQDestType=JInt(Q),
            JMQSessionID=sid,
        )
        peer.send(build_packet(PacketType.START))
        assert [bool(p.flags & FLAG_F) for p in deliveries(peer, 2)] == [False, True]
        # -1 keeps the limit: two more, the last with F again.
        peer.send(build_packet(PacketType.RESUME_FLOW, props={"JMQSize": JInt(-1)}))
        assert [bool(p.flags & FLAG_F) for p in deliveries(peer, 2)] == [False, True]
        # 0 lifts it (the seed: "don't send any message"; both brokers: no limit).
        peer.send(build_packet(PacketType.RESUME_FLOW, props={"JMQSize": JInt(0)}))
        assert [bool(p.flags & FLAG_F) for p in deliveries(peer, 2)] == [False, False]
    finally:
        peer.close()


def test_consumer_resume_flow_jmqsize_zero(peer: Peer) -> None:
    sid = session(peer)
    send(peer, "wireConsFlowQ", 5)
    reply = request(
        peer,
        PacketType.ADD_CONSUMER,
        JMQDestination="wireConsFlowQ",
        JMQDestType=JInt(Q),
        JMQSessionID=sid,
        JMQSize=JInt(2),
    )
    assert reply.properties["JMQSize"] == 2
    peer.send(build_packet(PacketType.START))
    assert [bool(p.flags & FLAG_C) for p in deliveries(peer, 2)] == [False, True]
    peer.send(
        build_packet(
            PacketType.RESUME_FLOW,
            props={"JMQConsumerID": reply.properties["JMQConsumerID"], "JMQSize": JInt(0)},
        )
    )
    assert [bool(p.flags & FLAG_C) for p in deliveries(peer, 3)] == [False] * 3


def test_add_consumer_jmqsize(peer: Peer, broker_kind_name: str) -> None:
    """The prefetch a consumer asks for, against a consumerFlowLimit of 3."""
    sid = session(peer)

    def add(queue: str, **size: object) -> dict:
        return request(
            peer,
            PacketType.ADD_CONSUMER,
            JMQDestination=queue,
            JMQDestType=JInt(Q),
            JMQSessionID=sid,
            **size,
        ).properties

    request(
        peer, PacketType.CREATE_DESTINATION, JMQDestination="wirePrefetchQ", JMQDestType=JInt(Q)
    )
    # More than the limit: cut to it.
    assert add("wirePrefetchQ", JMQSize=JInt(10))["JMQSize"] == 3
    # 0: the destination's limit here; OpenMQ's broker answers 0 (and then stalls).
    zero = add("wirePrefetchQ", JMQSize=JInt(0))["JMQSize"]
    assert zero == (0 if broker_kind_name == "stock" else 3)
    # -1: no limit, the destination's not applied; none: no consumer flow control at all,
    # nothing said.  Either way all 5 messages come, none with C.
    send(peer, "wireUnlimitedQ", 5)
    send(peer, "wireNoFlowQ", 5)
    unlimited = add("wireUnlimitedQ", JMQSize=JInt(-1))
    assert unlimited["JMQSize"] == -1
    no_flow = add("wireNoFlowQ")
    assert "JMQSize" not in no_flow
    peer.send(build_packet(PacketType.START))
    got = deliveries(peer, 10)
    assert not any(p.flags & FLAG_C for p in got)
    ids = (unlimited["JMQConsumerID"], no_flow["JMQConsumerID"])
    assert sorted(p.consumer_id for p in got) == sorted([int(i) for i in ids] * 5)


def test_paused_producers_are_told_to_stop(interop_broker: Any, peer: Peer, tmp_path: Path) -> None:
    """The stock imqcmd pauses a queue's producers: the producer gets RESUME_FLOW with
    JMQSize 0 at once (a stock client's next send blocks), and its credit on resume."""
    lacking = missing()
    if lacking:
        pytest.fail("the stock imqcmd cannot run; missing: " + "; ".join(lacking), pytrace=False)
    sid = session(peer)
    request(peer, PacketType.CREATE_DESTINATION, JMQDestination="wirePauseQ", JMQDestType=JInt(Q))
    pid = request(
        peer,
        PacketType.ADD_PRODUCER,
        JMQDestination="wirePauseQ",
        JMQDestType=JInt(Q),
        JMQSessionID=sid,
    ).properties["JMQProducerID"]
    imqcmd = StockImqcmd(tmp_path)
    where = f"{interop_broker.host}:{interop_broker.portmapper_port}"
    dst = ("dst", "-t", "q", "-n", "wirePauseQ")
    done = imqcmd.run(where, "pause", *dst, "-pst", "PRODUCERS")
    assert done.returncode == 0, done.output
    stop = peer.expect(PacketType.RESUME_FLOW).properties
    assert (stop["JMQProducerID"], stop["JMQSize"], stop["JMQBytes"]) == (pid, 0, 0)
    done = imqcmd.run(where, "resume", *dst)
    assert done.returncode == 0, done.output
    go = peer.expect(PacketType.RESUME_FLOW).properties
    assert (go["JMQProducerID"], go["JMQSize"], go["JMQBytes"]) == (pid, 1000, -1)


def test_destination_types_in_replies(peer: Peer, broker_kind_name: str) -> None:
    def create(name: str, dtype: int) -> dict:
        return request(
            peer, PacketType.CREATE_DESTINATION, JMQDestination=name, JMQDestType=JInt(dtype)
        ).properties

    def verify(name: str, dtype: int) -> int:
        reply = request(
            peer, PacketType.VERIFY_DESTINATION, JMQDestination=name, JMQDestType=JInt(dtype)
        ).properties
        assert reply["JMQStatus"] == 200, reply
        return int(reply["JMQDestType"])  # type: ignore[arg-type]

    # CREATE_DESTINATION_REPLY: the type asked for, the single-flavour bit (0x100) too.
    made = create("wireFlavourQ", Q | 0x100)
    assert (made["JMQStatus"], made["JMQDestType"]) == (200, 0x101)
    assert create("wireFlavourT", T)["JMQDestType"] == T
    # VERIFY_DESTINATION_REPLY: the destination's own type: the flavour bits it was made
    # with and AUTO (0x20) for one made on demand; the DMQ's bit (0x1000); a temporary
    # queue's (0x10).
    assert verify("wireFlavourQ", Q) == 0x121
    assert verify("wireFlavourT", T) == 0x22
    assert verify("mq.sys.dmq", Q) == 0x1001
    temp = "temporary_destination://queue/127.0.0.1/1/1"
    assert create(temp, Q | 0x10)["JMQStatus"] == 200
    assert verify(temp, Q | 0x10) == 0x11
    # Asked again: OpenMQ's broker answers 200, ours 409 (the stock clients take both
    # as "it exists"), each with the type.
    again = create("wireFlavourQ", Q)
    if broker_kind_name == "stock":
        assert (again["JMQStatus"], again["JMQDestType"]) == (200, Q)
    else:
        assert (again["JMQStatus"], again["JMQDestType"]) == (409, 0x121)


def test_browse_with_jmqmetrics(peer: Peer) -> None:
    send(peer, "wireMetricsQ", 4)
    reply = request(
        peer,
        PacketType.BROWSE,
        JMQDestination="wireMetricsQ",
        JMQDestType=JInt(Q),
        JMQMetrics=True,
    )
    p = reply.properties
    assert p["JMQStatus"] == 200 and p["JMQMetrics"] is True
    assert type(p["JMQConsumerID"]) is JLong
    counters = decode_object(reply.body, generic=True)
    assert isinstance(counters, dict)
    assert counters["__class__"] == "com.sun.messaging.jmq.util.DestMetricsCounters"
    assert counters["numMsgs"] == counters["numMsgsIn"] == 4
    assert counters["numMsgsOut"] == 0 and counters["timeStamp"] > 0
    # Without JMQMetrics, the queue's SysMessageIDs.
    listing = request(peer, PacketType.BROWSE, JMQDestination="wireMetricsQ", JMQDestType=JInt(Q))
    assert "JMQMetrics" not in listing.properties and len(listing.body) == 4 * 32


def test_no_asynchronous_error_packet(peer: Peer, broker_kind_name: str) -> None:
    """Failed requests are answered by their reply's JMQStatus: neither broker sends
    ERROR (30), and the connection goes on."""
    sid = session(peer)
    peer.send(build_packet(PacketType.ACKNOWLEDGE, body=b"odd"))  # no A flag
    peer.send(build_packet(PacketType.DELETE_PRODUCER, props={"JMQProducerID": JLong(1)}))
    peer.send(
        control(
            PacketType.ADD_CONSUMER,
            501,
            JMQDestination="wireErrQ",
            JMQDestType=JInt(Q),
            JMQSessionID=JLong(int(sid) + 12345),
        )
    )
    peer.send(control(PacketType.DELETE_CONSUMER, 502, JMQConsumerID=JLong(12345)))
    peer.send(control(PacketType.PING, 503))
    got = [peer.recv()]
    while got[-1].type != PacketType.PING_REPLY:
        got.append(peer.recv())
    answers = {p.type: int(p.properties["JMQStatus"]) for p in got}  # type: ignore[arg-type]
    assert PacketType.ERROR not in answers
    want = {
        PacketType.ADD_CONSUMER_REPLY: answers.get(PacketType.ADD_CONSUMER_REPLY, 0),
        PacketType.DELETE_CONSUMER_REPLY: 404,
        PacketType.PING_REPLY: 200,
    }
    if broker_kind_name == "stock":
        # Its DELETE_PRODUCER answers even without the A flag.
        want[PacketType.DELETE_PRODUCER_REPLY] = 500
    assert answers == want and answers[PacketType.ADD_CONSUMER_REPLY] >= 400
