"""The stock OpenMQ Java client's reconnect and failover, as the broker sees it.

Nobody here can run imq.jar, so these tests send what its source says it sends
(eclipse-ee4j/openmq, mq-client .../jmsclient/) after its connection broke:

* ReadChannel.run -> recover2 -> ConnectionRecover.recover: ``connection.hello(true)``
  (ProtocolHandler.hello: HELLO with JMQRBufferSize, JMQProtocolLevel, JMQVersion,
  JMQUserAgent, JMQReconnectable, JMQHAClient, the old JMQConnectionID and, if the
  broker said JMQHA=true, JMQClusterID and JMQStoreSession), AUTHENTICATE,
  resetClientID (SET_CLIENTID), addSessions (CREATE_SESSION), addConsumers
  (CREATE_DESTINATION + ADD_CONSUMER with JMQOldConsumerID), addProducers
  (CREATE_DESTINATION + ADD_PRODUCER), START.
* ReadChannel.checkRedirectStatus: on a reconnect a HELLO_REPLY of 301 sends it to
  JMQStoreOwner, 408 makes it try again later; ReadChannel.updateBrokerVersionInfo keeps
  JMQClusterID / JMQStoreSession / JMQBrokerList only when JMQHA is true.
* Transaction.commitHATransaction (connected to an HA broker): END_TRANSACTION
  (JMQXAFlags=TMSUCCESS, no Xid), PREPARE_TRANSACTION, COMMIT_TRANSACTION, and after a
  failure VERIFY_TRANSACTION (ProtocolHandler.verifyHATransaction: 404 after PREPARE
  means committed, State 6 means prepared: commit it).

The in-process tests drive the sans-IO engine like tests/test_engine.py; the last test
runs two real HA brokers on PostgreSQL and kills one.
"""

from __future__ import annotations

import os
import signal
import struct
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.engine import Close, ConnectionEngine
from broker.models import BrokerState, StoreOwner
from broker.protocol.javaser import decode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import Packet, build_packet
from broker.protocol.types import (
    DEST_QUEUE,
    FLAG_A,
    FLAG_P,
    FLAG_Q,
    FLAG_R,
    AckMode,
    PacketType,
    Status,
)
from broker.server.broker import Broker
from broker.server.hamonitor import HAMonitor, Member, store_session

from .test_engine import _auth_basic, _drive, _engine, _request, _sent, _status


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    """A Broker around the engine, never started (as tests/test_engine.py's)."""
    from broker.config import BrokerConfig
    from broker.security.digest import md5str
    from broker.security.filerepo import FileUserRepository

    passwd = tmp_path / "passwd"
    passwd.write_text(f"guest:{md5str('guest:guest')}:anonymous:1\n")
    config = BrokerConfig(
        {"imq.varhome": str(tmp_path / "var"), "imq.accesscontrol.enabled": "false"}
    )
    b = Broker(config, FileUserRepository(passwd))
    b.router.observers.remove_transaction_observer(b.txn_records)
    yield b
    b.executor.shutdown(wait=False)


TMSUCCESS = 0x04000000  # javax.transaction.xa.XAResource.TMSUCCESS
USER_AGENT = "Message Queue/6.9.0 (JMS; Linux 6.1.0 amd64)"


def java_hello(cid: int = 1, **extra: object) -> bytes:
    """ProtocolHandler.hello's HELLO (a default 6.9 client with imqReconnectEnabled=true)."""
    props: dict[str, object] = {
        "JMQRBufferSize": JInt(100),
        "JMQProtocolLevel": JInt(500),
        "JMQVersion": "6.9.0",
        "JMQUserAgent": USER_AGENT,
        "JMQReconnectable": True,
        "JMQHAClient": True,
    }
    props.update(extra)
    return build_packet(PacketType.HELLO, props=props, flags=FLAG_A, consumer_id=cid)


def hello(e: ConnectionEngine, **extra: object) -> list[Packet]:
    e.receive_data(java_hello(**extra))
    return _sent(e)


def login(e: ConnectionEngine, **extra: object) -> Packet:
    """HELLO + AUTHENTICATE as the Java client; the HELLO_REPLY."""
    reply, auth_req = hello(e, **extra)
    assert auth_req.type == PacketType.AUTHENTICATE_REQUEST
    _drive(e, e.receive_data(_auth_basic("guest", "guest")))
    (auth_reply,) = _sent(e)
    assert _status(auth_reply) == Status.OK
    return reply


def request(e: ConnectionEngine, ptype: int, **props: object) -> Packet:
    e.receive_data(_request(ptype, **props))
    replies = [p for p in _sent(e) if p.type == ptype + 1]
    assert len(replies) == 1
    return replies[0]


def add_consumer(e: ConnectionEngine, sid: int, dest: str, old: int | None = None) -> int:
    """ProtocolHandler.addInterest: CREATE_DESTINATION, then ADD_CONSUMER with exactly the
    properties it sets (JMQOldConsumerID when the consumer had an id: a reconnect)."""
    created = request(
        e, PacketType.CREATE_DESTINATION, JMQDestination=dest, JMQDestType=JInt(DEST_QUEUE)
    )
    assert _status(created) in (Status.OK, Status.CONFLICT)
    props: dict[str, object] = {
        "JMQShare": False,
        "JMQDestination": dest,
        "JMQDestType": JInt(DEST_QUEUE),
        "JMQNoLocal": False,
        "JMQReconnect": False,
        "JMQAckMode": JInt(AckMode.CLIENT_ACKNOWLEDGE),
        "JMQSize": JInt(1000),
        "JMQSessionID": JLong(sid),
    }
    if old is not None:
        props["JMQOldConsumerID"] = JLong(old)
    reply = request(e, PacketType.ADD_CONSUMER, **props)
    assert _status(reply) == Status.OK
    return int(reply.properties["JMQConsumerID"])  # type: ignore[arg-type]


def recreate(e: ConnectionEngine, client_id: str, old_consumer: int) -> int:
    """ConnectionRecover.recover after the HELLO: client id, session, consumer, producer."""
    assert (
        _status(request(e, PacketType.SET_CLIENTID, JMQClientID=client_id, JMQShare=False)) == 200
    )
    sess = request(e, PacketType.CREATE_SESSION, JMQAckMode=JInt(AckMode.CLIENT_ACKNOWLEDGE))
    sid = int(sess.properties["JMQSessionID"])  # type: ignore[arg-type]
    cid = add_consumer(e, sid, "jq", old_consumer)
    request(e, PacketType.CREATE_DESTINATION, JMQDestination="jq", JMQDestType=JInt(DEST_QUEUE))
    prod = request(
        e,
        PacketType.ADD_PRODUCER,
        JMQDestination="jq",
        JMQDestType=JInt(DEST_QUEUE),
        JMQSessionID=JLong(sid),
    )
    assert _status(prod) == 200 and isinstance(prod.properties["JMQProducerID"], int)
    return cid


# -- (a) one broker: the same broker again ----------------------------------------------


def test_reconnect_replaces_the_old_connection_and_redelivers_its_unacked(broker: Broker) -> None:
    """The connection broke but the broker did not notice yet (no SIGKILL: a network cut):
    the HELLO naming the old JMQConnectionID destroys the old connection at once (OpenMQ's
    HelloHandler), so its client id is free for resetClientID and the message it had
    delivered without acknowledgement comes again, flagged redelivered, to the consumer
    addConsumers made."""
    broker.router.create_destination("jq", DEST_QUEUE, None, auto=False)
    old = _engine(broker)
    reply = login(old)
    assert reply.properties.get("JMQHA") is None  # not HA: the client keeps its address list
    old_id = int(reply.properties["JMQConnectionID"])  # type: ignore[arg-type]
    old_cid = recreate(old, "javaclient", None)  # type: ignore[arg-type]
    old.receive_data(build_packet(PacketType.START, props={}))
    sender = _engine(broker)
    login(sender)
    sender.receive_data(
        build_packet(PacketType.TEXT_MESSAGE, flags=FLAG_Q, fields={1: "jq"}, body=b"m")
    )
    (first,) = [p for p in _sent(old) if p.type == PacketType.TEXT_MESSAGE]
    assert first.consumer_id == old_cid and not first.flags & FLAG_R

    new = _engine(broker)
    reply = login(new, JMQConnectionID=JLong(old_id))
    assert _status(reply) == Status.OK and reply.properties["JMQConnectionID"] != old_id
    assert old.state.name == "CLOSED"
    cid = recreate(new, "javaclient", old_cid)
    new.receive_data(build_packet(PacketType.START, props={}))
    (again,) = [p for p in _sent(new) if p.type == PacketType.TEXT_MESSAGE]
    assert again.consumer_id == cid and again.flags & FLAG_R
    assert again.sysmsgid == first.sysmsgid


def test_reconnect_after_a_restart_names_a_connection_nobody_has(broker: Broker) -> None:
    """After a SIGKILL and restart the old JMQConnectionID is unknown: the HELLO is answered
    as a first one (200, a new JMQConnectionID), and JMQOldConsumerID is accepted."""
    e = _engine(broker)
    reply = login(e, JMQConnectionID=JLong(0x1234_5678_9ABC))
    assert _status(reply) == Status.OK
    cid = recreate(e, "afterrestart", 0x0FED_CBA9_8765)
    assert cid != 0x0FED_CBA9_8765


# -- (c) HA: where the client's store session is ----------------------------------------


def _row(broker_id: str, address: str, epoch: int, **kw: object) -> StoreOwner:
    from django.utils import timezone

    kw.setdefault("heartbeat", timezone.now())
    kw.setdefault("interval", 1.0)
    return StoreOwner(
        broker_instance=broker_id, address=address, epoch=epoch, ha=True, cluster_id="hc", **kw
    )


def _a_taken_over_by_b(ha: HAMonitor) -> StoreOwner:
    """The monitor's view: brokerA (epoch 8) stopped, its store taken over by brokerB;
    A's row."""
    a = _row(
        "brokerA",
        "hostA:7676",
        8,
        state=StoreOwner.State.STOPPED,
        broker_state=BrokerState.FAILOVER_COMPLETE,
        taken_over_by="brokerB",
    )
    ha.rows = {"brokerA": Member(a, False)}
    return a


@pytest.fixture
def ha(broker: Broker) -> HAMonitor:
    """``broker`` as member brokerB of HA cluster hc (epoch 4), with a view of the others."""
    store = SimpleNamespace(broker_instance="brokerB", address="hostB:7677", epoch=4)
    monitor = HAMonitor(broker, store, cluster_id="hc", interval=1.0, threshold=3)  # type: ignore[arg-type]
    monitor.rows_read = True  # as after its first pass (the tests set ``rows``)
    broker.ha = monitor
    return monitor


def test_ha_hello_reply_and_own_session(broker: Broker, ha: HAMonitor) -> None:
    """HELLO_REPLY carries what ReadChannel.updateBrokerVersionInfo reads for HA; a client
    coming back with this broker's own session is let in."""
    e = _engine(broker)
    reply = login(e)
    props = reply.properties
    assert props["JMQHA"] is True and props["JMQClusterID"] == "hc"
    assert props["JMQStoreSession"] == store_session("brokerB", 4) == ha.session
    assert type(props["JMQStoreSession"]) is JLong
    assert store_session("brokerA", 4) != ha.session  # unique in the cluster, unlike epochs
    e2 = _engine(broker)
    reply = login(e2, JMQClusterID="hc", JMQStoreSession=JLong(ha.session))
    assert _status(reply) == Status.OK


def test_ha_hello_other_cluster_is_400_and_closed(broker: Broker, ha: HAMonitor) -> None:
    e = _engine(broker)
    effects = e.receive_data(java_hello(JMQClusterID="other", JMQStoreSession=JLong(1)))
    (reply,) = _sent(e)  # HelloHandler: no AUTHENTICATE_REQUEST after a 400
    assert reply.type == PacketType.HELLO_REPLY and _status(reply) == Status.BAD_REQUEST
    assert any(type(x) is Close for x in effects)


def _verdict(broker: Broker, session: int) -> tuple[Packet, Packet]:
    e = _engine(broker)
    reply, auth_req = hello(e, JMQClusterID="hc", JMQStoreSession=JLong(session))
    # 301/408 go on to AUTHENTICATE_REQUEST as OpenMQ's do; the client closes itself.
    assert auth_req.type == PacketType.AUTHENTICATE_REQUEST
    assert isinstance(reply.properties["JMQConnectionID"], int)
    return reply, auth_req


def test_ha_session_of_a_live_member_is_moved_there(broker: Broker, ha: HAMonitor) -> None:
    a = _row("brokerA", "hostA:7676", 7)
    ha.rows = {"brokerA": Member(a, False)}
    reply, _ = _verdict(broker, store_session("brokerA", 7))
    assert _status(reply) == Status.MOVED_PERMANENTLY
    assert reply.properties["JMQStoreOwner"] == "mq://hostA:7676/"


def test_ha_session_of_a_failed_member_waits_for_the_takeover(
    broker: Broker,
    ha: HAMonitor,
) -> None:
    """Failed (by the monitor, or silent since the last pass): 408, the client tries again
    (ReadChannel.checkRedirectStatus); during this broker's own takeover too."""
    from datetime import timedelta

    from django.utils import timezone

    a = _row("brokerA", "hostA:7676", 7)
    ha.rows = {"brokerA": Member(a, True)}
    assert _status(_verdict(broker, store_session("brokerA", 7))[0]) == Status.TIMEOUT
    a.heartbeat = timezone.now() - timedelta(seconds=2.5)
    ha.rows = {"brokerA": Member(a, False)}
    assert _status(_verdict(broker, store_session("brokerA", 7))[0]) == Status.TIMEOUT
    a.heartbeat = timezone.now()
    ha.in_takeover = True
    assert _status(_verdict(broker, store_session("brokerA", 7))[0]) == Status.TIMEOUT


def test_ha_session_taken_over_here_or_elsewhere(broker: Broker, ha: HAMonitor) -> None:
    """Taken over by this broker: 200 (JMQStoreOwner is this broker).  By another, live
    member: 301 to the taker, which is where the client's messages are now."""
    a = _a_taken_over_by_b(ha)
    reply, _ = _verdict(broker, store_session("brokerA", 7))
    assert _status(reply) == Status.OK
    assert reply.properties["JMQStoreOwner"] == "mq://hostB:7677/"
    a.taken_over_by = "brokerC"
    c = _row("brokerC", "hostC:7678", 2)
    ha.rows = {"brokerA": Member(a, False), "brokerC": Member(c, False)}
    reply, _ = _verdict(broker, store_session("brokerA", 7))
    assert _status(reply) == Status.MOVED_PERMANENTLY
    assert reply.properties["JMQStoreOwner"] == "mq://hostC:7678/"


def test_ha_unknown_session_is_let_in(broker: Broker, ha: HAMonitor) -> None:
    """OpenMQ answers 404 here, and the Java client then retries that HELLO forever.  Not
    before the broker's first monitor pass has read the members, though: the session may
    be a member's this broker is about to take over (408 until then)."""
    ha.rows_read = False
    assert _status(_verdict(broker, store_session("nobody", 3))[0]) == Status.TIMEOUT
    ha.rows_read = True
    assert _status(_verdict(broker, store_session("nobody", 3))[0]) == Status.OK


def test_ha_transaction_that_died_with_the_failed_broker(broker: Broker, ha: HAMonitor) -> None:
    """The stock client's commit() during its failover sends END (TMSUCCESS, no Xid) of
    the old transaction to the taker once reconnected (ConnectionImpl.isAllowedToFailover
    lets END and COMMIT wait out a reconnect).  Not prepared, it was never stored: the
    END is accepted and the PREPARE answered 408, which the client turns into
    TransactionRolledBackException.  Only for a client that failed over here, and only
    for another broker run's id made before it came."""
    _a_taken_over_by_b(ha)
    mine = broker.router.uids.prefix
    other = (mine % 0x7FFF) + 1
    ms = (int(time.time() * 1000) - 5000) & 0xFF_FFFF_FFFF  # broker/core/ids.py's layout
    old_tid = (other << 48) | (ms << 8) | 3

    def end(e: ConnectionEngine, tid: int) -> Packet:
        return request(
            e, PacketType.END_TRANSACTION, JMQTransactionID=JLong(tid), JMQXAFlags=JInt(TMSUCCESS)
        )

    # A client that was not failing over: an unknown transaction is 404.
    plain = _engine(broker)
    login(plain)
    assert _status(end(plain, old_tid)) == Status.NOT_FOUND

    e = _engine(broker)
    assert (
        _status(login(e, JMQClusterID="hc", JMQStoreSession=JLong(store_session("brokerA", 7))))
        == Status.OK
    )
    # This broker run's own ids, and ids made after the client came, are not the failed
    # broker's.
    assert _status(end(e, (mine << 48) | (ms << 8) | 3)) == Status.NOT_FOUND
    later = (int(time.time() * 1000) + 60000) & 0xFF_FFFF_FFFF
    assert _status(end(e, (other << 48) | (later << 8))) == Status.NOT_FOUND
    reply = end(e, old_tid)
    assert _status(reply) == Status.OK and reply.properties["JMQTransactionID"] == old_tid
    prep = request(e, PacketType.PREPARE_TRANSACTION, JMQTransactionID=JLong(old_tid))
    assert _status(prep) == Status.TIMEOUT
    assert "rolled back" in str(prep.properties["JMQReason"])
    # Said once: it is gone now.
    prep = request(e, PacketType.PREPARE_TRANSACTION, JMQTransactionID=JLong(old_tid))
    assert _status(prep) == Status.NOT_FOUND
    # A ROLLBACK after the END (the application's, on the JMSException) is done.
    assert _status(end(e, old_tid + 1)) == Status.OK
    rb = request(e, PacketType.ROLLBACK_TRANSACTION, JMQTransactionID=JLong(old_tid + 1))
    assert _status(rb) == Status.OK
    assert broker.router.txns.all_transactions() == []


# -- transactions of a client connected to an HA broker ---------------------------------


def test_ha_client_commit_sequence_and_verify(broker: Broker) -> None:
    """Transaction.commitHATransaction: START with JMQAutoRollback=2 (NOT_PREPARED),
    END (TMSUCCESS, no Xid), PREPARE, COMMIT, all by JMQTransactionID; VERIFY_TRANSACTION
    of a PREPARED one says State 6, of a finished one 404 (which the client takes as
    committed after PREPARE, rolled back after END)."""
    e = _engine(broker)
    login(e)
    sid = int(
        request(e, PacketType.CREATE_SESSION, JMQAckMode=JInt(0)).properties["JMQSessionID"]  # type: ignore[arg-type]
    )

    def txn() -> int:
        r = request(
            e, PacketType.START_TRANSACTION, JMQSessionID=JLong(sid), JMQAutoRollback=JInt(2)
        )
        assert _status(r) == Status.OK
        tid = int(r.properties["JMQTransactionID"])  # type: ignore[arg-type]
        e.receive_data(
            build_packet(
                PacketType.TEXT_MESSAGE,
                flags=FLAG_Q | FLAG_A,
                fields={1: "hq"},
                body=b"t",
                props={"JMQTransactionID": JLong(tid)},
            )
        )
        assert [_status(p) for p in _sent(e)] == [200]
        end = request(
            e, PacketType.END_TRANSACTION, JMQTransactionID=JLong(tid), JMQXAFlags=JInt(TMSUCCESS)
        )
        assert _status(end) == Status.OK
        prep = request(e, PacketType.PREPARE_TRANSACTION, JMQTransactionID=JLong(tid))
        assert _status(prep) == Status.OK
        return tid

    first = txn()
    verify = request(e, PacketType.VERIFY_TRANSACTION, JMQTransactionID=JLong(first))
    assert _status(verify) == Status.OK
    assert decode_hashtable(verify.body)["State"] == 6  # PREPARED: the client commits it
    assert _status(request(e, PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(first))) == 200
    assert broker.router.lookup("hq", DEST_QUEUE).msg_count == 1  # type: ignore[union-attr]
    verify = request(e, PacketType.VERIFY_TRANSACTION, JMQTransactionID=JLong(first))
    assert _status(verify) == Status.NOT_FOUND

    # The connection breaks after PREPARE (the broker keeps the PREPARED transaction, as
    # a taker does after recovering it): Transaction.verifyTransaction on the new
    # connection finds State 6 and commits it with commitHATransaction.
    second = txn()
    e.close("connection broken")
    e2 = _engine(broker)
    login(e2)
    verify = request(e2, PacketType.VERIFY_TRANSACTION, JMQTransactionID=JLong(second))
    assert _status(verify) == Status.OK and decode_hashtable(verify.body)["State"] == 6
    assert (
        _status(request(e2, PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(second))) == 200
    )
    assert broker.router.lookup("hq", DEST_QUEUE).msg_count == 2  # type: ignore[union-attr]


# -- (c) for real: two HA brokers on PostgreSQL, one killed ---------------------------------


def _durable_props(sid: object) -> dict[str, object]:
    """ProtocolHandler.addInterest for TopicSession.createDurableSubscriber("had")."""
    return {
        "JMQDurableName": "had",
        "JMQShare": False,
        "JMQDestination": "hat",
        "JMQDestType": JInt(2),
        "JMQNoLocal": False,
        "JMQReconnect": False,
        "JMQAckMode": JInt(AckMode.CLIENT_ACKNOWLEDGE),
        "JMQSize": JInt(1000),
        "JMQSessionID": sid,
    }


def _raw_login(peer, **extra: object) -> Packet:
    """HELLO as the Java client, then, if the broker lets it in, AUTHENTICATE with the type
    it asks for (guest/guest); the HELLO_REPLY."""
    from broker.protocol.auth import encode_auth_body, encode_basic_password
    from broker.security.digest import digest_response, md5str

    peer.send(java_hello(**extra))
    reply = peer.expect(PacketType.HELLO_REPLY)
    areq = peer.expect(PacketType.AUTHENTICATE_REQUEST)
    if _status(reply) != Status.OK:
        return reply  # ReadChannel.checkRedirectStatus: the client closes this connection
    kind = areq.properties["JMQAuthType"]
    cred = (
        encode_basic_password("guest")
        if kind == "basic"
        else digest_response(md5str("guest:guest"), areq.body.decode("ascii"))
    )
    auth = build_packet(
        PacketType.AUTHENTICATE,
        props={"JMQAuthType": kind},
        body=encode_auth_body("guest", cred),
        flags=FLAG_A,
        consumer_id=2,
    )
    peer.request(auth, PacketType.AUTHENTICATE_REPLY)
    return reply


@pytest.mark.timeout(300)
def test_ha_java_client_is_sent_to_the_taker_after_a_sigkill(tmp_path: Path, postgres_url: str):
    """Brokers A and B of an HA cluster.  A Java client's HELLO to B naming A's store
    session is sent to A while A runs (301, JMQStoreOwner), waits (408) or is sent on
    while A is dead and not taken over yet, and is let in (200, JMQStoreOwner B) once B
    took A over; then the persistent message A held arrives through B, redelivered, to
    the consumer the client re-creates there (ConnectionRecover.recover)."""
    from broker.launcher import start_broker
    from tests.pg import fresh_database

    from .test_ha import addr, ha_props, wait_log
    from .wire import Peer, control

    url = fresh_database(postgres_url, f"jr_{uuid.uuid4().hex[:10]}")
    started = []
    try:
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
        a = start_broker(tmp_path / "a", *ha_props("brokerA"), database_url=url, instance="brokerA")
        started.append(a)
        b = start_broker(tmp_path / "b", *ha_props("brokerB"), database_url=url, instance="brokerB")
        started.append(b)

        # The client on A, and a persistent message for it in A's store.
        pa = Peer(a.host, a.jms_port)
        hello_a = _raw_login(pa)
        assert hello_a.properties["JMQHA"] is True
        a_session = hello_a.properties["JMQStoreSession"]
        cluster_id = hello_a.properties["JMQClusterID"]
        pa.request(
            build_packet(
                PacketType.TEXT_MESSAGE,
                flags=FLAG_Q | FLAG_A | FLAG_P,
                fields={1: "haq"},
                body=b"held by A",
                consumer_id=3,
            ),
            PacketType.SEND_REPLY,
        )
        # A transacted session of an HA client: committed in two phases, and A is killed
        # after PREPARE's reply, before COMMIT (Transaction.commitHATransaction).
        tsess = pa.request(control(PacketType.CREATE_SESSION, 4), PacketType.CREATE_SESSION_REPLY)
        started_txn = pa.request(
            control(
                PacketType.START_TRANSACTION,
                5,
                JMQSessionID=tsess.properties["JMQSessionID"],
                JMQAutoRollback=JInt(2),
            ),
            PacketType.START_TRANSACTION_REPLY,
        )
        tid = started_txn.properties["JMQTransactionID"]
        pa.request(
            build_packet(
                PacketType.TEXT_MESSAGE,
                flags=FLAG_Q | FLAG_A | FLAG_P,
                fields={1: "haq", 8: tid},  # TRANSACTIONID in the variable header
                body=b"prepared on A",
                consumer_id=6,
            ),
            PacketType.SEND_REPLY,
        )
        pa.request(
            control(
                PacketType.END_TRANSACTION, 7, JMQTransactionID=tid, JMQXAFlags=JInt(TMSUCCESS)
            ),
            PacketType.END_TRANSACTION_REPLY,
        )
        pa.request(
            control(PacketType.PREPARE_TRANSACTION, 8, JMQTransactionID=tid),
            PacketType.PREPARE_TRANSACTION_REPLY,
        )
        # A durable subscriber of the same client holds a persistent publication it has
        # not acknowledged when A dies (the client stays connected until then).
        pa.request(
            control(PacketType.SET_CLIENTID, 9, JMQClientID="hajc", JMQShare=False),
            PacketType.SET_CLIENTID_REPLY,
        )
        dsess = pa.request(
            control(PacketType.CREATE_SESSION, 10, JMQAckMode=JInt(AckMode.CLIENT_ACKNOWLEDGE)),
            PacketType.CREATE_SESSION_REPLY,
        )
        durable = _durable_props(dsess.properties["JMQSessionID"])
        pa.send(
            control(PacketType.CREATE_DESTINATION, 11, JMQDestination="hat", JMQDestType=JInt(2))
        )
        assert _status(pa.expect(PacketType.CREATE_DESTINATION_REPLY)) in (200, 409)
        pa.request(control(PacketType.ADD_CONSUMER, 12, **durable), PacketType.ADD_CONSUMER_REPLY)
        pa.send(build_packet(PacketType.START, props={}))
        pa.send(
            build_packet(
                PacketType.TEXT_MESSAGE,
                flags=FLAG_A | FLAG_P,
                fields={1: "hat"},
                body=b"to the durable",
                consumer_id=13,
            )
        )
        got = {}
        while not {PacketType.SEND_REPLY, PacketType.TEXT_MESSAGE} <= got.keys():
            # In either order, and a cluster INFO (B joined) may come between them.
            p = pa.recv()
            got[p.type] = p
        assert _status(got[PacketType.SEND_REPLY]) == Status.OK
        assert got[PacketType.TEXT_MESSAGE].body == b"to the durable"

        # B while A runs: the client's rows are A's, so B sends it there.
        pb = Peer(b.host, b.jms_port)
        moved = _raw_login(pb, JMQClusterID=cluster_id, JMQStoreSession=a_session)
        pb.close()
        assert _status(moved) == Status.MOVED_PERMANENTLY
        assert moved.properties["JMQStoreOwner"] == f"mq://{addr(a)}/"

        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait(10)
        pa.close()
        seen = []
        deadline = time.monotonic() + 120
        while True:
            pb = Peer(b.host, b.jms_port)
            reply = _raw_login(pb, JMQClusterID=cluster_id, JMQStoreSession=a_session)
            seen.append(_status(reply))
            if seen[-1] == Status.OK:
                break
            pb.close()
            assert time.monotonic() < deadline, seen
            time.sleep(0.3)
        # 301 (A looked alive), then 408 (in doubt, being taken over), then 200: never back.
        order = [Status.MOVED_PERMANENTLY, Status.TIMEOUT, Status.OK]
        assert [order.index(s) for s in seen] == sorted(order.index(s) for s in seen), seen
        wait_log(b, "took over broker brokerA")
        assert reply.properties["JMQStoreOwner"] == f"mq://{addr(b)}/"
        assert reply.properties["JMQStoreSession"] != a_session  # B's own from now on

        # The rest of ConnectionRecover.recover on B: client id, sessions, consumers, START.
        pb.request(
            control(PacketType.SET_CLIENTID, 9, JMQClientID="hajc", JMQShare=False),
            PacketType.SET_CLIENTID_REPLY,
        )
        dsess = pb.request(
            control(PacketType.CREATE_SESSION, 10, JMQAckMode=JInt(AckMode.CLIENT_ACKNOWLEDGE)),
            PacketType.CREATE_SESSION_REPLY,
        )
        pb.send(
            control(PacketType.CREATE_DESTINATION, 11, JMQDestination="hat", JMQDestType=JInt(2))
        )
        assert _status(pb.expect(PacketType.CREATE_DESTINATION_REPLY)) in (200, 409)
        dcons = pb.request(
            control(
                PacketType.ADD_CONSUMER,
                12,
                **_durable_props(dsess.properties["JMQSessionID"]),
                JMQOldConsumerID=JLong(98),
            ),
            PacketType.ADD_CONSUMER_REPLY,
        )
        sess = pb.request(
            control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(AckMode.CLIENT_ACKNOWLEDGE)),
            PacketType.CREATE_SESSION_REPLY,
        )
        pb.send(
            control(
                PacketType.CREATE_DESTINATION, 4, JMQDestination="haq", JMQDestType=JInt(DEST_QUEUE)
            )
        )
        assert _status(pb.expect(PacketType.CREATE_DESTINATION_REPLY)) in (200, 409)
        cons = pb.request(
            control(
                PacketType.ADD_CONSUMER,
                5,
                JMQShare=False,
                JMQDestination="haq",
                JMQDestType=JInt(DEST_QUEUE),
                JMQNoLocal=False,
                JMQReconnect=False,
                JMQAckMode=JInt(AckMode.CLIENT_ACKNOWLEDGE),
                JMQSize=JInt(1000),
                JMQSessionID=sess.properties["JMQSessionID"],
                JMQOldConsumerID=JLong(99),
            ),
            PacketType.ADD_CONSUMER_REPLY,
        )
        pb.send(build_packet(PacketType.START, props={}))
        by_consumer = {}
        while len(by_consumer) < 2:
            p = pb.expect(PacketType.TEXT_MESSAGE)
            by_consumer[p.consumer_id] = p
        dmsg = by_consumer[dcons.properties["JMQConsumerID"]]
        assert dmsg.body == b"to the durable" and dmsg.flags & FLAG_R
        msg = by_consumer[cons.properties["JMQConsumerID"]]
        assert msg.body == b"held by A" and msg.flags & FLAG_R
        pb.request(
            build_packet(
                PacketType.ACKNOWLEDGE,
                body=struct.pack(">q", msg.consumer_id) + msg.sysmsgid,
                flags=FLAG_A,
                consumer_id=6,
            ),
            PacketType.ACKNOWLEDGE_REPLY,
        )
        # Transaction.verifyTransaction on the taker: PREPARED (6), so it commits it there.
        verify = pb.request(
            control(PacketType.VERIFY_TRANSACTION, 7, JMQTransactionID=tid),
            PacketType.VERIFY_TRANSACTION_REPLY,
        )
        assert decode_hashtable(verify.body)["State"] == 6
        pb.send(control(PacketType.COMMIT_TRANSACTION, 8, JMQTransactionID=tid))
        got = {}
        # The delivery may come before the reply, and a cluster INFO between them.
        while not {PacketType.COMMIT_TRANSACTION_REPLY, PacketType.TEXT_MESSAGE} <= got.keys():
            p = pb.recv()
            got[p.type] = p
        assert _status(got[PacketType.COMMIT_TRANSACTION_REPLY]) == Status.OK
        assert got[PacketType.TEXT_MESSAGE].body == b"prepared on A"
        pb.close()
    finally:
        for p in started:
            p.stop()


def test_reconnect_keeps_using_its_temporary_queue(broker: Broker) -> None:
    """A consumer on the connection's TemporaryQueue: addInterest re-creates it after the
    reconnect (CREATE_DESTINATION with the same temporary name, then ADD_CONSUMER), and a
    reply sent to it afterwards arrives."""
    from broker.protocol.types import DEST_TEMP

    name = "temporary_destination://queue/127.0.0.1/40000/1"
    tq = JInt(DEST_QUEUE | DEST_TEMP)
    old = _engine(broker)
    old_id = int(login(old).properties["JMQConnectionID"])  # type: ignore[arg-type]
    sid = int(
        request(old, PacketType.CREATE_SESSION, JMQAckMode=JInt(1)).properties["JMQSessionID"]
    )  # type: ignore[arg-type]
    assert (
        _status(request(old, PacketType.CREATE_DESTINATION, JMQDestination=name, JMQDestType=tq))
        == 200
    )

    def consume(e: ConnectionEngine, sid: int, old_cid: int | None) -> int:
        props: dict[str, object] = {
            "JMQShare": False,
            "JMQDestination": name,
            "JMQDestType": tq,
            "JMQNoLocal": False,
            "JMQReconnect": False,
            "JMQAckMode": JInt(1),
            "JMQSize": JInt(1000),
            "JMQSessionID": JLong(sid),
        }
        if old_cid is not None:
            props["JMQOldConsumerID"] = JLong(old_cid)
        reply = request(e, PacketType.ADD_CONSUMER, **props)
        assert _status(reply) == Status.OK, reply.properties
        return int(reply.properties["JMQConsumerID"])  # type: ignore[arg-type]

    old_cid = consume(old, sid, None)
    new = _engine(broker)
    login(new, JMQConnectionID=JLong(old_id))
    sid = int(
        request(new, PacketType.CREATE_SESSION, JMQAckMode=JInt(1)).properties["JMQSessionID"]
    )  # type: ignore[arg-type]
    created = request(new, PacketType.CREATE_DESTINATION, JMQDestination=name, JMQDestType=tq)
    assert _status(created) in (Status.OK, Status.CONFLICT)
    cid = consume(new, sid, old_cid)
    new.receive_data(build_packet(PacketType.START, props={}))
    replier = _engine(broker)
    login(replier)
    replier.receive_data(
        build_packet(
            PacketType.TEXT_MESSAGE,
            flags=FLAG_Q | FLAG_A,
            fields={1: name, 6: "com.sun.messaging.jmq.jmsclient.TemporaryQueueImpl"},
            body=b"r",
        )
    )
    assert [_status(p) for p in _sent(replier)] == [200]
    (msg,) = [p for p in _sent(new) if p.type == PacketType.TEXT_MESSAGE]
    assert msg.consumer_id == cid


# -- (b) conventional cluster: the client's broker killed, the next of imqAddressList ----


@pytest.mark.timeout(300)
def test_conventional_cluster_java_client_moves_to_the_next_broker(tmp_path: Path) -> None:
    """Brokers A and B linked (imq.cluster.brokerlist).  A Java client on B with a client
    id, a durable subscriber and a queue consumer holding an unacknowledged message whose
    home is A.  B is SIGKILLed; the client's ConnectionInitiator takes the next address of
    imqAddressList (A: JMQBrokerList is only used when HELLO_REPLY says JMQHA=true,
    ReadChannel.updateBrokerVersionInfo) and ConnectionRecover.recover re-creates
    everything there: the client id and durable name are free again, the message comes
    again flagged redelivered, and the durable subscriber gets what A publishes."""
    from broker.protocol.types import DEST_TOPIC

    from .cluster_procs import start_cluster, wait_for
    from .wire import Peer, control

    a, b = start_cluster(tmp_path, 2, names=("A", "B"))
    try:
        tag = uuid.uuid4().hex[:8]
        client_id, durable, queue, topic = f"jc{tag}", f"d{tag}", f"q{tag}", f"t{tag}"

        def recover(peer, old_ids: tuple[int, int] | None) -> tuple[int, int]:
            """resetClientID, addSessions, addConsumers, START; (durable, queue) consumer ids.
            A refusal (the other broker not yet known gone) is retried, as the client's
            ConnectionRecover does after a failed recover."""
            deadline = time.monotonic() + 60
            while True:
                peer.send(
                    control(PacketType.SET_CLIENTID, 3, JMQClientID=client_id, JMQShare=False)
                )
                if _status(peer.expect(PacketType.SET_CLIENTID_REPLY)) == Status.OK:
                    break
                assert time.monotonic() < deadline, "client id never free"
                time.sleep(0.5)
            sess = peer.request(
                control(PacketType.CREATE_SESSION, 4, JMQAckMode=JInt(AckMode.CLIENT_ACKNOWLEDGE)),
                PacketType.CREATE_SESSION_REPLY,
            )
            sid = sess.properties["JMQSessionID"]
            ids = []
            for n, (dest, dtype, extra) in enumerate(
                ((topic, DEST_TOPIC, {"JMQDurableName": durable}), (queue, DEST_QUEUE, {}))
            ):
                peer.send(
                    control(
                        PacketType.CREATE_DESTINATION,
                        10 + n,
                        JMQDestination=dest,
                        JMQDestType=JInt(dtype),
                    )
                )
                assert _status(peer.expect(PacketType.CREATE_DESTINATION_REPLY)) in (200, 409)
                props: dict[str, object] = {
                    **extra,
                    "JMQShare": False,
                    "JMQDestination": dest,
                    "JMQDestType": JInt(dtype),
                    "JMQNoLocal": False,
                    "JMQReconnect": False,
                    "JMQAckMode": JInt(AckMode.CLIENT_ACKNOWLEDGE),
                    "JMQSize": JInt(1000),
                    "JMQSessionID": sid,
                }
                if old_ids is not None:
                    props["JMQOldConsumerID"] = JLong(old_ids[n])
                while True:
                    peer.send(control(PacketType.ADD_CONSUMER, 20 + n, **props))
                    reply = peer.expect(PacketType.ADD_CONSUMER_REPLY)
                    if _status(reply) == Status.OK:
                        break
                    assert time.monotonic() < deadline, reply.properties
                    time.sleep(0.5)
                ids.append(int(reply.properties["JMQConsumerID"]))  # type: ignore[arg-type]
            peer.send(build_packet(PacketType.START, props={}))
            return ids[0], ids[1]

        pb = Peer(b.host, b.jms_port)
        hello_b = _raw_login(pb)
        assert hello_b.properties.get("JMQHA") is not True
        old_conn = hello_b.properties["JMQConnectionID"]
        old_ids = recover(pb, None)

        # A message whose home is A, delivered to the consumer on B and not acknowledged.
        pa = Peer(a.host, a.jms_port)
        _raw_login(pa)

        def send_on_a(dest: str, flags: int, body: bytes, cid: int) -> None:
            pa.request(
                build_packet(
                    PacketType.TEXT_MESSAGE,
                    flags=flags | FLAG_A | FLAG_P,
                    fields={1: dest},
                    body=body,
                    consumer_id=cid,
                ),
                PacketType.SEND_REPLY,
            )

        send_on_a(queue, FLAG_Q, b"home A", 30)
        first = pb.expect(PacketType.TEXT_MESSAGE)
        assert first.body == b"home A" and first.consumer_id == old_ids[1]
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait(10)

        pr = Peer(a.host, a.jms_port)
        reply = _raw_login(pr, JMQConnectionID=old_conn)
        assert _status(reply) == Status.OK
        durable_id, queue_id = recover(pr, old_ids)
        again = pr.expect(PacketType.TEXT_MESSAGE)
        assert again.consumer_id == queue_id and again.body == b"home A"
        assert again.flags & FLAG_R and again.sysmsgid == first.sysmsgid

        # The durable subscription is attached on A now: what A publishes reaches it.
        def published() -> bool:
            send_on_a(topic, 0, b"to the durable", 31)
            try:
                pr.sock.settimeout(1.0)
                msg = pr.expect(PacketType.TEXT_MESSAGE)
            except TimeoutError:
                return False
            finally:
                pr.sock.settimeout(10.0)
            assert msg.consumer_id == durable_id and msg.body == b"to the durable"
            return True

        wait_for(published, 30, "a publication reaching the re-attached durable subscriber")
        for p in (pa, pr, pb):
            p.close()
    finally:
        a.stop()
        b.stop()
