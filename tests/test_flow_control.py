"""Flow control on the wire: producer (C bit), connection (F bit) both ways, consumer prefetch."""

from __future__ import annotations

import struct

from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import FLAG_A, FLAG_C, FLAG_F, FLAG_Q, PacketType

from .wire import Peer, control, login, vector


def _session(peer: Peer, queue: str) -> tuple[int, int]:
    sid = peer.request(
        control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(1)), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    reply = peer.request(
        control(
            PacketType.ADD_PRODUCER,
            4,
            JMQDestination=queue,
            JMQDestType=JInt(1),
            JMQSessionID=JLong(sid),
        ),
        PacketType.ADD_PRODUCER_REPLY,
    )
    return sid, reply.properties


def _msg(queue: str, pid: int, n: int, flags: int = 0) -> bytes:
    return build_packet(
        PacketType.TEXT_MESSAGE,
        body=f"m{n}".encode(),
        flags=FLAG_Q | flags,
        consumer_id=n,
        priority=4,
        sequence=n,
        fields={1: queue, 9: pid},
    )


def test_producer_flow_c_bit_gets_resume_flow(own_broker):
    b = own_broker("imq.producer.maxBatch=5")
    peer = login(b.host, b.jms_port)
    _sid, prod = _session(peer, "flowq")
    assert prod["JMQSize"] == 5 and type(prod["JMQSize"]) is JInt
    pid = prod["JMQProducerID"]
    for n in range(1, 5):
        peer.send(_msg("flowq", pid, n))
    # The fifth uses up the allowance: the client sets C and waits for RESUME_FLOW.
    peer.send(_msg("flowq", pid, 5, FLAG_C))
    resume = peer.expect(PacketType.RESUME_FLOW)
    assert resume.properties["JMQProducerID"] == pid
    assert type(resume.properties["JMQProducerID"]) is JLong
    assert resume.properties["JMQSize"] == 5


def test_connection_flow_from_client_f_bit(own_broker):
    b = own_broker("imq.green.count=3")
    peer = Peer(b.host, b.jms_port)
    peer.send(vector("hello.hex"))
    assert peer.expect(PacketType.HELLO_REPLY).properties["JMQSize"] == 3
    peer.close()
    peer = login(b.host, b.jms_port)
    _sid, prod = _session(peer, "flowf")
    peer.send(_msg("flowf", prod["JMQProducerID"], 1))
    peer.send(_msg("flowf", prod["JMQProducerID"], 2))
    peer.send(_msg("flowf", prod["JMQProducerID"], 3, FLAG_F))
    resume = peer.expect(PacketType.RESUME_FLOW)
    assert "JMQProducerID" not in resume.properties and "JMQConsumerID" not in resume.properties
    assert resume.properties["JMQSize"] == 3


def test_connection_flow_to_client_and_consumer_prefetch(broker):
    """HELLO's JMQRBufferSize=3: F on the 3rd delivery, nothing more until RESUME_FLOW;
    JMQSize=2 prefetch: C on the consumer's 2nd, nothing more until its RESUME_FLOW."""
    prod = login(broker.host, broker.jms_port)
    _sid, p = _session(prod, "flowc")
    pid = p["JMQProducerID"]
    for n in range(1, 11):
        prod.send(_msg("flowc", pid, n, FLAG_A))
        prod.expect(PacketType.SEND_REPLY)

    hello = parse_packet(vector("hello.hex"))
    props = dict(hello.properties)
    props["JMQRBufferSize"] = JInt(3)
    cons = Peer(broker.host, broker.jms_port)
    cons.send(build_packet(PacketType.HELLO, props=props, flags=0x10, consumer_id=1))
    cons.expect(PacketType.HELLO_REPLY)
    req = cons.expect(PacketType.AUTHENTICATE_REQUEST)
    from broker.protocol.auth import encode_auth_body
    from broker.security.digest import digest_response, md5str

    cred = digest_response(md5str("guest:guest"), req.body.decode())
    cons.request(
        build_packet(
            PacketType.AUTHENTICATE,
            props={"JMQAuthType": "digest"},
            body=encode_auth_body("guest", cred),
            flags=0x10,
            consumer_id=2,
        ),
        PacketType.AUTHENTICATE_REPLY,
    )
    sid = cons.request(
        control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(2)), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    cid = cons.request(
        control(
            PacketType.ADD_CONSUMER,
            4,
            JMQDestination="flowc",
            JMQDestType=JInt(1),
            JMQSessionID=JLong(sid),
            JMQSize=JInt(2),
        ),
        PacketType.ADD_CONSUMER_REPLY,
    ).properties["JMQConsumerID"]
    cons.send(build_packet(PacketType.START))
    first = [cons.recv(), cons.recv()]
    assert [m.body for m in first] == [b"m1", b"m2"]
    assert not first[0].flags & FLAG_C and first[1].flags & FLAG_C  # prefetch reached
    cons.sock.settimeout(0.5)
    assert not cons.closed_by_peer() and not cons.pending
    cons.sock.settimeout(10)
    # Resume the consumer with a larger window: connection flow (3) now stops it at m3.
    cons.send(
        build_packet(
            PacketType.RESUME_FLOW, props={"JMQConsumerID": JLong(cid), "JMQSize": JInt(100)}
        )
    )
    third = cons.recv()
    assert third.body == b"m3" and third.flags & FLAG_F
    cons.sock.settimeout(0.5)
    assert not cons.closed_by_peer() and not cons.pending
    cons.sock.settimeout(10)
    cons.send(build_packet(PacketType.RESUME_FLOW, props={"JMQSize": JInt(3)}))
    nxt = [cons.recv() for _ in range(3)]
    assert [m.body for m in nxt] == [b"m4", b"m5", b"m6"] and nxt[2].flags & FLAG_F
    # Acknowledge everything received (CLIENT mode: one block per message).
    blocks = b"".join(struct.pack(">q", cid) + m.raw[20:52] for m in first + [third] + nxt)
    cons.request(
        build_packet(PacketType.ACKNOWLEDGE, body=blocks, flags=0x10, consumer_id=9),
        PacketType.ACKNOWLEDGE_REPLY,
    )
