"""The broker answering the stock OpenMQ Java and C clients' own packets, replayed.

Each test sends the bytes captured from the real client (third_party/openmq/vectors), only
substituting the session/producer ids our broker handed out, and checks every reply
the client would read.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from broker.protocol.auth import decode_auth_body
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import VH_DELIVERY_COUNT, parse_packet
from broker.protocol.types import FLAG_A, FLAG_R, PacketType
from broker.security.digest import digest_response, md5str

from .conftest import start_broker
from .vectors import one_vector
from .wire import Peer, control, rewrite, vector


@pytest.fixture(scope="module")
def basic_broker():
    tmp = Path(tempfile.mkdtemp(prefix="imq-basic-"))
    b = start_broker(tmp, "imq.authentication.type=basic")
    yield b
    b.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def handshake(peer: Peer, prefix: str) -> tuple[int, parse_packet]:
    """HELLO + basic AUTHENTICATE from the capture; returns the connection id."""
    hello = vector(f"{prefix}/c2b-01-HELLO.hex")
    peer.send(hello)
    reply = peer.expect(PacketType.HELLO_REPLY)
    props = reply.properties
    assert type(props["JMQStatus"]) is JInt and props["JMQStatus"] == 200
    assert type(props["JMQConnectionID"]) is JLong and props["JMQConnectionID"] > 0
    assert props["JMQProtocolLevel"] == 500
    assert props["JMQSize"] != 0
    assert reply.consumer_id == parse_packet(hello).consumer_id
    req = peer.expect(PacketType.AUTHENTICATE_REQUEST)
    assert req.consumer_id == reply.consumer_id
    assert req.properties["JMQChallenge"] is True
    return props["JMQConnectionID"], req


@pytest.mark.parametrize("prefix", ["connect-close-basic", "cclient/connect-close-basic"])
def test_connect_close_sequence(basic_broker, prefix):
    peer = Peer(basic_broker.host, basic_broker.jms_port)
    conn_id, req = handshake(peer, prefix)
    assert req.properties["JMQAuthType"] == "basic"
    peer.request(vector(f"{prefix}/c2b-04-AUTHENTICATE.hex"), PacketType.AUTHENTICATE_REPLY)
    c = "cclient/" in prefix
    # Java: START before CREATE_SESSION; the C client too (its file numbers say so).
    peer.send(vector(f"{prefix}/c2b-06-START.hex"))
    reply = peer.request(
        vector(f"{prefix}/c2b-07-CREATE_SESSION.hex"), PacketType.CREATE_SESSION_REPLY
    )
    sid = reply.properties["JMQSessionID"]
    assert type(sid) is JLong
    ids = {1001: sid, 4242424242: conn_id}
    peer.request(
        rewrite(vector(f"{prefix}/c2b-09-DESTROY_SESSION.hex"), ids),
        PacketType.DESTROY_SESSION_REPLY,
    )
    peer.request(vector(f"{prefix}/c2b-11-STOP.hex"), PacketType.STOP_REPLY)
    peer.request(rewrite(vector(f"{prefix}/c2b-13-GOODBYE.hex"), ids), PacketType.GOODBYE_REPLY)
    assert peer.closed_by_peer()
    _ = c


def test_digest_handshake(broker):
    """The Java and the C client's captures.  A refused login's close comes after the
    broker's linger (REFUSED_LOGIN_LINGER): both refused connections are held and their
    closes checked together at the end, one linger for the two."""
    from broker.protocol.auth import encode_auth_body

    refused = []
    for prefix in ("connect-close-digest", "cclient/connect-close-digest"):
        peer = Peer(broker.host, broker.jms_port)
        _conn_id, req = handshake(peer, prefix)
        assert req.properties["JMQAuthType"] == "digest", prefix
        nonce = req.body.decode("ascii")
        assert nonce, prefix
        captured = vector(f"{prefix}/c2b-04-AUTHENTICATE.hex")
        user, _ = decode_auth_body(parse_packet(captured).body)
        cred = digest_response(md5str("guest:guest"), nonce)
        peer.request(
            rewrite(captured, {}, body=encode_auth_body(user, cred)),
            PacketType.AUTHENTICATE_REPLY,
        )
        # The captured credential answered another nonce: replaying it must fail.
        peer2 = Peer(broker.host, broker.jms_port)
        handshake(peer2, prefix)
        peer2.send(captured)
        reply = peer2.expect(PacketType.AUTHENTICATE_REPLY)
        # A failed login is 413 INVALID_LOGIN, as OpenMQ's broker answers it.
        assert reply.properties["JMQStatus"] == 413, prefix
        refused.append((prefix, peer2))
    for prefix, peer2 in refused:
        assert peer2.closed_by_peer(), prefix


def _login_basic(b, prefix="send-messages"):
    peer = Peer(b.host, b.jms_port)
    conn_id, _ = handshake(peer, prefix)
    peer.request(vector(f"{prefix}/c2b-04-AUTHENTICATE.hex"), PacketType.AUTHENTICATE_REPLY)
    return peer, conn_id


def _consume_all(b, queue: str, n: int, prefix="send-messages"):
    """A consumer built from the C client's ADD_CONSUMER capture on another connection."""
    peer, conn_id = _login_basic(b, "cclient/queue-text")
    sess = peer.request(
        vector("cclient/queue-text/c2b-06-CREATE_SESSION.hex"), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    add = parse_packet(vector("cclient/queue-text/c2b-16-ADD_CONSUMER.hex"))
    props = dict(add.properties)
    props["JMQDestination"] = queue
    props["JMQSessionID"] = JLong(sess)
    reply = peer.request(
        control(PacketType.ADD_CONSUMER, 77, **props), PacketType.ADD_CONSUMER_REPLY
    )
    cons_id = reply.properties["JMQConsumerID"]
    assert type(cons_id) is JLong
    peer.send(vector("cclient/queue-text/c2b-18-START.hex"))
    msgs = [peer.recv() for _ in range(n)]
    for m in msgs:
        assert m.consumer_id == cons_id
    return peer, cons_id, msgs


def test_java_client_sends_all_six_message_types(basic_broker):
    peer, conn_id = _login_basic(basic_broker)
    prefix = "send-messages"
    sid = peer.request(
        vector(f"{prefix}/c2b-06-CREATE_SESSION.hex"), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    # A fresh queue name, so reruns of the session broker do not see old messages.
    peer.request(
        vector(f"{prefix}/c2b-08-CREATE_DESTINATION.hex"), PacketType.CREATE_DESTINATION_REPLY
    )
    ids = {1001: sid, 4242424242: conn_id}
    prod = peer.request(
        rewrite(vector(f"{prefix}/c2b-10-ADD_PRODUCER.hex"), ids), PacketType.ADD_PRODUCER_REPLY
    ).properties
    assert type(prod["JMQProducerID"]) is JLong and prod["JMQSize"] != 0
    ids[1002] = prod["JMQProducerID"]
    sent = []
    for n in range(12, 18):
        raw = rewrite(vector(f"{prefix}/c2b-{n}-{_name(prefix, n)}.hex"), ids)
        sent.append(parse_packet(raw))
        peer.send(raw)
        if sent[-1].flags & FLAG_A:
            reply = peer.expect(PacketType.SEND_REPLY)
            assert reply.properties["JMQStatus"] == 200
            assert reply.consumer_id == sent[-1].consumer_id
    # The persistent one was captured with a 60 s time to live long ago: it has expired
    # and must never be delivered.
    import time

    live = [s for s in sent if not (0 < s.expiration < time.time() * 1000)]
    assert len(live) == 5
    consumer, cons_id, got = _consume_all(basic_broker, "vectors_q", 5)
    consumer.sock.settimeout(1.0)
    assert not consumer.closed_by_peer() and not consumer.pending
    for s, g in zip(live, got, strict=True):
        assert g.type == s.type
        assert g.raw[20:52] == s.raw[20:52]  # the message id is the producer's
        assert g.body == s.body
        assert g.properties == s.properties
        assert g.fields[1] == "vectors_q" and g.fields[VH_DELIVERY_COUNT] == 1
        assert g.priority == s.priority and g.expiration == s.expiration
        assert not g.flags & FLAG_R
    peer.request(
        rewrite(vector(f"{prefix}/c2b-19-DELETE_PRODUCER.hex"), ids),
        PacketType.DELETE_PRODUCER_REPLY,
    )
    peer.request(
        rewrite(vector(f"{prefix}/c2b-21-DESTROY_SESSION.hex"), ids),
        PacketType.DESTROY_SESSION_REPLY,
    )
    peer.request(rewrite(vector(f"{prefix}/c2b-23-GOODBYE.hex"), ids), PacketType.GOODBYE_REPLY)
    consumer.close()


def _name(prefix: str, n: int) -> str:
    p = one_vector(f"c2b-{n:02d}-*.hex", under=prefix)
    return p.name.split("-", 2)[2][: -len(".hex")]


@pytest.mark.parametrize("case", ["queue-text", "bytes-properties"])
def test_c_client_persistent_send_and_receive(basic_broker, case):
    prefix = f"cclient/{case}"
    peer, conn_id = _login_basic(basic_broker, prefix)
    sid = peer.request(
        vector(f"{prefix}/c2b-06-CREATE_SESSION.hex"), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    ids = {1001: sid, 4242424242: conn_id}
    peer.request(
        vector(f"{prefix}/c2b-08-CREATE_DESTINATION.hex"), PacketType.CREATE_DESTINATION_REPLY
    )
    prod = peer.request(
        rewrite(vector(f"{prefix}/c2b-10-ADD_PRODUCER.hex"), ids), PacketType.ADD_PRODUCER_REPLY
    ).properties
    ids[1002] = prod["JMQProducerID"]
    msg_file = one_vector("c2b-12-*.hex", under=prefix)
    raw = vector(f"{prefix}/{msg_file.name}")
    sent = parse_packet(raw)
    assert sent.flags & FLAG_A  # the C client sends persistent messages by default
    reply = peer.request(raw, PacketType.SEND_REPLY)
    assert reply.consumer_id == sent.consumer_id
    # Its own consumer (ADD_CONSUMER from the capture, session id substituted) gets it.
    peer.request(
        vector(f"{prefix}/c2b-14-CREATE_DESTINATION.hex"),
        PacketType.CREATE_DESTINATION_REPLY,
        status=409,
    )
    add = peer.request(
        rewrite(vector(f"{prefix}/c2b-16-ADD_CONSUMER.hex"), ids), PacketType.ADD_CONSUMER_REPLY
    )
    cons_id = add.properties["JMQConsumerID"]
    peer.send(vector(f"{prefix}/c2b-18-START.hex"))
    got = peer.recv()
    assert got.consumer_id == cons_id
    assert got.raw[20:52] == sent.raw[20:52]
    assert got.body == sent.body and got.properties == sent.properties
    assert got.fields[1] == sent.fields[1]
    peer.request(vector(f"{prefix}/c2b-19-STOP.hex"), PacketType.STOP_REPLY)
    peer.request(
        rewrite(vector(f"{prefix}/c2b-21-DELETE_PRODUCER.hex"), ids),
        PacketType.DELETE_PRODUCER_REPLY,
    )
    # Closing the session unacknowledged: the message goes back, marked redelivered.
    peer.request(
        rewrite(vector(f"{prefix}/c2b-23-DESTROY_SESSION.hex"), ids),
        PacketType.DESTROY_SESSION_REPLY,
    )
    peer.request(rewrite(vector(f"{prefix}/c2b-25-GOODBYE.hex"), ids), PacketType.GOODBYE_REPLY)
    other, _cid, again = _consume_all(basic_broker, sent.fields[1], 1)
    assert again[0].raw[20:52] == sent.raw[20:52]
    assert again[0].flags & FLAG_R and again[0].fields[VH_DELIVERY_COUNT] == 2
    other.close()


def test_imqcmd_admin_connection_sequence(basic_broker):
    """imqcmd's first steps on the admin service: temp queue, __JMQAdmin producer, consumer."""
    prefix = "imqcmd/query-bkr"
    peer = Peer(basic_broker.host, basic_broker.admin_port)
    hello = vector(f"{prefix}/c2b-01-HELLO.hex")
    peer.send(hello)
    conn_id = peer.expect(PacketType.HELLO_REPLY).properties["JMQConnectionID"]
    peer.expect(PacketType.AUTHENTICATE_REQUEST)
    # imqcmd logged in as admin/admin; the capture holds guest's credentials for basic.
    from broker.protocol.auth import encode_auth_body, encode_basic_password

    auth = rewrite(
        vector(f"{prefix}/c2b-04-AUTHENTICATE.hex"),
        {},
        body=encode_auth_body("admin", encode_basic_password("admin")),
    )
    peer.request(auth, PacketType.AUTHENTICATE_REPLY)
    peer.send(vector(f"{prefix}/c2b-06-START.hex"))
    sid = peer.request(
        vector(f"{prefix}/c2b-07-CREATE_SESSION.hex"), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    ids = {1001: sid, 4242424242: conn_id}
    peer.request(
        vector(f"{prefix}/c2b-09-CREATE_DESTINATION.hex"), PacketType.CREATE_DESTINATION_REPLY
    )
    peer.request(
        vector(f"{prefix}/c2b-11-CREATE_DESTINATION.hex"), PacketType.CREATE_DESTINATION_REPLY
    )
    peer.request(
        rewrite(vector(f"{prefix}/c2b-13-ADD_PRODUCER.hex"), ids), PacketType.ADD_PRODUCER_REPLY
    )
    peer.request(
        vector(f"{prefix}/c2b-15-CREATE_DESTINATION.hex"),
        PacketType.CREATE_DESTINATION_REPLY,
        status=409,
    )
    reply = peer.request(
        rewrite(vector(f"{prefix}/c2b-17-ADD_CONSUMER.hex"), ids), PacketType.ADD_CONSUMER_REPLY
    )
    assert reply.properties["JMQDestType"] & 0x10  # temporary queue
    peer.close()


def test_admin_service_refuses_non_admin(basic_broker):
    peer = Peer(basic_broker.host, basic_broker.admin_port)
    peer.send(vector("connect-close-basic/c2b-01-HELLO.hex"))
    peer.expect(PacketType.HELLO_REPLY)
    peer.expect(PacketType.AUTHENTICATE_REQUEST)
    peer.send(vector("connect-close-basic/c2b-04-AUTHENTICATE.hex"))  # guest
    assert peer.expect(PacketType.AUTHENTICATE_REPLY).properties["JMQStatus"] == 403
    assert peer.closed_by_peer()


def test_c_client_transacted_session(basic_broker):
    """The C client starts a transaction as soon as a transacted session exists and needs
    JMQTransactionID back; sends in it appear only on COMMIT and never after ROLLBACK."""
    prefix = "cclient/transacted"
    peer, conn_id = _login_basic(basic_broker, prefix)
    sid = peer.request(
        vector(f"{prefix}/c2b-06-CREATE_SESSION.hex"), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    ids = {1001: sid, 4242424242: conn_id}
    reply = peer.request(
        rewrite(vector(f"{prefix}/c2b-08-START_TRANSACTION.hex"), ids),
        PacketType.START_TRANSACTION_REPLY,
    )
    txn = reply.properties["JMQTransactionID"]
    assert type(txn) is JLong and txn > 0
    ids[1002] = peer.request(
        control(
            PacketType.ADD_PRODUCER,
            50,
            JMQDestination="txq",
            JMQDestType=JInt(1),
            JMQSessionID=JLong(sid),
        ),
        PacketType.ADD_PRODUCER_REPLY,
    ).properties["JMQProducerID"]
    base = parse_packet(vector("cclient/queue-text/c2b-12-TEXT_MESSAGE.hex"))

    def send(body: bytes, cid: int, txn_id: int) -> None:
        from broker.protocol.packet import build_packet

        raw = build_packet(
            PacketType.TEXT_MESSAGE,
            body=body,
            flags=base.flags,
            consumer_id=cid,
            priority=4,
            fields={1: "txq", 8: txn_id},
            sequence=cid,
        )
        peer.request(raw, PacketType.SEND_REPLY)

    send(b"rolled back", 60, txn)
    peer.request(
        control(PacketType.ROLLBACK_TRANSACTION, 61, JMQTransactionID=JLong(txn)),
        PacketType.ROLLBACK_TRANSACTION_REPLY,
    )
    txn2 = peer.request(
        rewrite(vector(f"{prefix}/c2b-08-START_TRANSACTION.hex"), ids),
        PacketType.START_TRANSACTION_REPLY,
    ).properties["JMQTransactionID"]
    send(b"committed", 62, txn2)
    # A send naming a transaction that is gone gets 410.
    from broker.protocol.packet import build_packet

    gone = build_packet(
        PacketType.TEXT_MESSAGE,
        body=b"x",
        flags=base.flags,
        consumer_id=63,
        fields={1: "txq", 8: txn},
        sequence=63,
    )
    peer.request(gone, PacketType.SEND_REPLY, status=410)
    consumer, _cid, got = _consume_all(basic_broker, "txq", 0)
    consumer.sock.settimeout(0.5)
    assert not consumer.closed_by_peer() and not consumer.pending  # nothing before COMMIT
    peer.request(
        control(PacketType.COMMIT_TRANSACTION, 64, JMQTransactionID=JLong(txn2)),
        PacketType.COMMIT_TRANSACTION_REPLY,
    )
    consumer.sock.settimeout(10)
    assert consumer.recv().body == b"committed"
    consumer.sock.settimeout(0.5)
    assert not consumer.closed_by_peer() and not consumer.pending  # the rolled-back one never
