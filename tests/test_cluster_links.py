"""The cluster service's bookkeeping of links, in process (no sockets): what a link brought
goes with it, whatever order its close and a redial's arrival come in."""

from __future__ import annotations

import pytest

from broker.cluster.config import ClusterConfig
from broker.cluster.interests import write_record
from broker.cluster.link_driver import BrokerLink
from broker.cluster.service import ClusterService
from broker.core.message import Message
from broker.core.router import MessageRouter
from broker.core.subscriptions import ClientIDClaim
from broker.core.transaction_record import Transaction
from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo
from broker.protocol.jtypes import JLong
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, FLAG_Q, PacketType, TransactionState

pytestmark = pytest.mark.fast

ME = gp.BrokerAddress("127.0.0.1", "A", 7676)
PEER = gp.BrokerAddress("127.0.0.1", "B", 7677)
# A consumer's record in G_DURABLE_ATTACH: no names, no selector, a topic, not noLocal.
_PLAIN = (None, None, None, False, False, None, False, None)


def _interest(dest: str, **fields: object) -> dict:
    """An interest record as the link's reader gives it (a plain queue consumer unless
    ``fields`` say otherwise)."""
    rec: dict = {
        "dest": dest,
        "client_id": None,
        "durable": None,
        "selector": None,
        "queue": True,
        "no_local": False,
        "temporary": False,
        "jms_shared": False,
        "mq_share": False,
        "shared_name": None,
        "max_active": 1,
    }
    return {**rec, **fields}


def _service() -> ClusterService:
    cfg = ClusterConfig(me=ME, peers=[(PEER.host, PEER.port)])
    return ClusterService(cfg, MessageRouter(), session_id=1)


def _up_link(svc: ClusterService) -> BrokerLink:
    # The peer's half of the handshake, fed to the link's engine.  No transport: what
    # the service writes to the link goes nowhere, which is all this needs.
    link = BrokerLink(svc)
    init = gp.LinkInit(gp.CLUSTER_VERSION, PEER.host, PEER.instance, PEER.port)
    link.engine.receive_data(
        gp.encode_link(gp.LinkPacket(gp.LINK_INIT, init.encode()))
        + gp.encode_link(
            gp.LinkPacket(
                gp.LINK_BROKER_INFO, BrokerInfo(PEER.host, PEER.instance, PEER.port, 2, 0).encode()
            )
        )
        + gp.encode(gp.GPacket(gp.G_BROKER_INFO_REPLY, {"S": 0}, b""))
    )
    assert link.up and svc.links[PEER] is link
    return link


class _Wire:
    """A link's transport that keeps what is written (no socket)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def writelines(self, data: list[bytes]) -> None:
        self.written.extend(data)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def _durable_interest(svc: ClusterService, link: BrokerLink, consumer_id: int) -> None:
    rec = _interest("prices", client_id="cid", durable="d1", queue=False)
    # The subscription's own interest, then its consumer attaching (as OpenMQ does).
    svc.delivery._add_remote(link, gp.ConsumerUID(consumer_id, 9, PEER), rec, 1)
    w = gp.BodyWriter()
    write_record(w, "prices", gp.ConsumerUID(consumer_id + 1000, 9, PEER), *_PLAIN)
    props = {"N": "d1", "I": "cid", f"{consumer_id + 1000}:prefetch": 100}
    svc.on_packet(link, gp.GPacket(gp.G_DURABLE_ATTACH, props, w.bytes()))


def test_a_dropped_link_closing_after_the_redial_is_up_takes_its_consumers_along():
    svc = _service()
    old = _up_link(svc)
    _durable_interest(svc, old, 5)
    topic = svc.router.lookup("prices", DEST_TOPIC)
    sub = topic.durables[("cid", "d1")]
    assert len(sub.queue.consumers) == 1

    # drop() marks the link closed at once; its connection_lost comes later, and the
    # peer's redial may be up in between.
    old.drop("silent for too long")
    new = _up_link(svc)
    _durable_interest(svc, new, 6)
    svc.link_closed(old)

    assert svc.links[PEER] is new
    assert len(sub.queue.consumers) == 1
    assert all(k[0] is new for k in svc.delivery.consumers.remotes)
    # The peer's consumer goes away and its unsubscribe is applied, not refused as in use.
    svc.delivery._remove_remote(svc.delivery.consumers.remotes.pop((new, 6)))
    svc.router.subs.unsubscribe("cid", "d1")
    assert ("cid", "d1") not in topic.durables


def test_remote_consumers_are_keyed_by_the_link_not_its_id():
    svc = _service()
    first = _up_link(svc)
    _durable_interest(svc, first, 5)
    svc.link_closed(first)
    assert svc.delivery.consumers.remotes == {}
    second = _up_link(svc)
    _durable_interest(svc, second, 5)
    assert list(svc.delivery.consumers.remotes) == [(second, 5)]


def test_acks_go_home_one_message_a_packet_naming_the_home_session():
    """OpenMQ's broker refuses a non-transacted G_MESSAGE_ACK of more than one message
    (B2136, "Unexpected remote ack count") and one without ``messageBrokerSession``; a
    refused ack leaves its window for the consumer full, and delivery stops."""
    import asyncio

    svc = _service()
    link = _up_link(svc)
    link.engine.data_to_send()
    wire = link.transport = _Wire()  # type: ignore[assignment]
    uid = gp.ConsumerUID(5, 9, ME)
    keys = [bytes([n]) * 32 for n in (1, 2, 3)]

    async def ack() -> None:
        svc.delivery.send_ack(link, uid, keys[:2], gp.ACK_ACKNOWLEDGED)
        svc.delivery.send_ack(link, uid, keys[2:], gp.ACK_ACKNOWLEDGED)
        await asyncio.sleep(0)  # the turn's acks are flushed together

    asyncio.run(ack())
    sent = gp.GPacketReader().feed(b"".join(wire.written))
    assert [p.type for p in sent] == [gp.G_MESSAGE_ACK] * 3
    for p, key in zip(sent, keys, strict=True):
        assert isinstance(p, gp.GPacket)
        assert p.props["C"] == 1 and p.props["T"] == gp.ACK_ACKNOWLEDGED
        assert p.props["messageBrokerSession"] == 2  # the peer's BrokerInfo session
        assert p.props["instanceName"] == ME.instance and p.props["port"] == ME.port
        r = gp.BodyReader(p.payload)
        assert r.raw(32) == key and gp.ConsumerUID.read(r) == uid


def test_only_an_administrators_destination_is_removed_cluster_wide():
    """An auto-created destination reaped here may hold messages on another broker: its
    removal is not broadcast (OpenMQ sends G_REM_DESTINATION for administered ones only)."""
    import asyncio

    from broker.protocol.types import DEST_QUEUE

    svc = _service()
    link = _up_link(svc)
    wire = link.transport = _Wire()  # type: ignore[assignment]
    svc.router.observers.add_router_event_observer(svc.changes)

    async def churn() -> None:
        for name, auto in (("reaped.q", True), ("admin.q", False)):
            svc.router.create_destination(name, DEST_QUEUE, auto=auto)
            svc.router.destroy_destination(name, DEST_QUEUE)
        await asyncio.sleep(0)

    asyncio.run(churn())
    sent = [p for p in gp.GPacketReader().feed(b"".join(wire.written)) if isinstance(p, gp.GPacket)]
    removed = [p.props["N"] for p in sent if p.type == gp.G_REM_DESTINATION]
    assert removed == ["admin.q"]


def _vector(label: str) -> bytes:
    from pathlib import Path

    path = Path(__file__).parent / "vectors_cluster" / "stock_flow.txt"
    for line in path.read_text().splitlines():
        name, _, hexed = line.partition(" ")
        if name == label:
            return bytes.fromhex(hexed)
    raise AssertionError(f"no {label} in {path}")


def test_the_stock_brokers_stop_message_flow_holds_message_data_until_resume():
    """A stock broker whose memory goes RED sends G_STOP_MESSAGE_FLOW (no A bit, no
    properties: the captured bytes), and G_RESUME_MESSAGE_FLOW alike when it leaves RED;
    it waits for no reply.  Ours sends its consumers there no G_MESSAGE_DATA meanwhile,
    then what waited; and when its own memory goes RED it sends the same packet."""
    import asyncio

    from tests.routerkit import Conn, send

    stop = _vector("G_STOP_MESSAGE_FLOW")
    # RaptorProtocol.sendFlowControlUpdate builds RESUME as STOP with the other type.
    resume = stop[:2] + gp.G_RESUME_MESSAGE_FLOW.to_bytes(2, "big") + stop[4:]
    svc = _service()
    link = _up_link(svc)
    link.engine.data_to_send()
    wire = link.transport = _Wire()  # type: ignore[assignment]
    rec = _interest("flow.q")

    def sent() -> list[gp.GPacket]:
        out = gp.GPacketReader().feed(b"".join(wire.written))
        wire.written.clear()
        return [p for p in out if isinstance(p, gp.GPacket)]

    async def run() -> None:
        svc.delivery._add_remote(link, gp.ConsumerUID(5, 9, PEER), rec, 100)
        link.engine.receive_data(stop)
        assert link.flow_stopped
        send(svc.router, Conn(1), "flow.q", 1, 2, 3)
        await asyncio.sleep(0)
        assert sent() == []  # no G_MESSAGE_DATA, and no reply to the STOP
        link.engine.receive_data(resume)
        await asyncio.sleep(0)
        assert [p.type for p in sent()] == [gp.G_MESSAGE_DATA] * 3
        assert not link.flow_stopped

        svc.set_flow_stopped(True, "memory state RED")
        await asyncio.sleep(0)
        (ours,) = sent()
        theirs = gp.decode(stop)
        assert (ours.type, ours.props, ours.wants_reply) == (theirs.type, {}, False)

    asyncio.run(run())


def _queue_interest(svc: ClusterService, link: BrokerLink, consumer_id: int) -> None:
    w = gp.BodyWriter()
    write_record(
        w,
        "orders",
        gp.ConsumerUID(consumer_id, 9, PEER),
        *_PLAIN[:3],
        True,
        False,
        None,
        False,
        None,
    )
    svc.on_packet(link, gp.GPacket(gp.G_NEW_INTEREST, {"C": 1}, w.bytes()))


def _txn_ack(t: int, tid: int, keys: list[bytes], consumer_id: int) -> gp.GPacket:
    w = gp.BodyWriter()
    for k in keys:
        w.raw(k)
        gp.ConsumerUID(consumer_id, 9, PEER).write(w)
    props = {"T": t, "C": len(keys), "transactionID": JLong(tid), "X": JLong(1)}
    return gp.GPacket(gp.G_MESSAGE_ACK, props, w.bytes(), flags=gp.A_BIT)


async def _sent(wire: _Wire) -> list[gp.GPacket]:
    import asyncio

    await asyncio.sleep(0.01)  # what a link sends goes out at the end of the loop's turn
    out = [p for p in gp.GPacketReader().feed(b"".join(wire.written)) if isinstance(p, gp.GPacket)]
    wire.written.clear()
    return out


def test_a_remote_transaction_is_held_from_prepare_to_commit_or_rollback():
    """OpenMQ's consumer broker commits messages homed here in two phases (G_MESSAGE_ACK
    T=ACK_TXN_PREPARE, then T=ACK_ACKNOWLEDGED, both with ``transactionID``): prepared, the
    messages are neither delivered again nor removed; the commit removes them; a rollback
    leaves them with the consumer that has them; a transaction in doubt when the link
    came back is asked about (G_TRANSACTION_INQUIRY) and settled as G_TRANSACTION_INFO says."""
    import asyncio

    async def run() -> None:
        svc = _service()
        link = _up_link(svc)
        link.engine.data_to_send()
        wire = link.transport = _Wire()  # type: ignore[assignment]
        _queue_interest(svc, link, 5)
        rc = svc.delivery.consumers.remotes[link, 5]
        msgs = [send_to(svc, "orders", n) for n in range(4)]
        keys = [m.key for m in msgs]
        assert [p.type for p in await _sent(wire)] == [gp.G_MESSAGE_DATA] * 4
        queue = svc.router.lookup("orders", DEST_QUEUE)

        # Prepare two: held, answered S=200 with the ack's properties; nothing resent.
        svc.on_packet(link, _txn_ack(gp.ACK_TXN_PREPARE, 77, keys[:2], 5))
        (reply,) = await _sent(wire)
        assert reply.type == gp.G_MESSAGE_ACK_REPLY and reply.props["S"] == 200
        assert reply.props["transactionID"] == 77 and reply.props["T"] == gp.ACK_TXN_PREPARE
        assert set(rc.inflight) == set(keys[2:])
        (txn,) = svc.router.txns.all_transactions()
        assert txn.state == TransactionState.PREPARED and txn.remote == ("127.0.0.1:7677", 77)
        # The commit names one message; the whole transaction goes.
        svc.on_packet(link, _txn_ack(gp.ACK_ACKNOWLEDGED, 77, keys[:1], 5))
        assert [p.props["S"] for p in await _sent(wire)] == [200]
        assert svc.router.txns.all_transactions() == [] and queue.dq.count == 0
        # Preparing a message not delivered to that consumer is refused, nothing held.
        svc.on_packet(link, _txn_ack(gp.ACK_TXN_PREPARE, 78, [keys[2], b"x" * 32], 5))
        (refused,) = await _sent(wire)
        assert refused.props["S"] == 404 and refused.props["notfound"] == 1
        assert svc.router.txns.all_transactions() == []
        # Rolled back after the prepare: back with the consumer that has them.
        svc.on_packet(link, _txn_ack(gp.ACK_TXN_PREPARE, 79, keys[2:], 5))
        svc.on_packet(link, _txn_ack(gp.ACK_TXN_ROLLEDBACK, 79, [], 5))
        assert [p.props["S"] for p in await _sent(wire)] == [200, 200]
        assert set(rc.inflight) == set(keys[2:]) and svc.router.txns.all_transactions() == []

        # Prepared, then the link drops: held (not given back with the consumer); the
        # redial's link asks about it and commits it when told it committed.
        svc.on_packet(link, _txn_ack(gp.ACK_TXN_PREPARE, 80, keys[2:3], 5))
        link.drop("gone")
        svc.link_closed(link)
        assert queue.dq.count == 1  # keys[3], given back with the consumer
        again = _up_link(svc)
        wire = again.transport = _Wire()  # type: ignore[assignment]
        (ask,) = [p for p in await _sent(wire) if p.type == gp.G_TRANSACTION_INQUIRY]
        assert ask.props["transactionID"] == 80 and ask.wants_reply
        info = {"transactionID": JLong(80), "transactionState": int(TransactionState.COMMITTED)}
        svc.on_packet(again, gp.GPacket(gp.G_TRANSACTION_INFO, info))
        assert svc.router.txns.all_transactions() == [] and queue.dq.count == 1

        # One its home broker rolled back (or no longer knows): back, marked redelivered.
        _queue_interest(svc, again, 6)
        await asyncio.sleep(0.01)
        (entry,) = svc.delivery.consumers.remotes[again, 6].inflight.values()
        svc.on_packet(again, _txn_ack(gp.ACK_TXN_PREPARE, 81, [entry.msg.key], 6))
        svc.delivery._remove_remote(svc.delivery.consumers.remotes.pop((again, 6)))
        info = {"transactionID": JLong(81), "transactionState": int(TransactionState.NULL)}
        svc.on_packet(again, gp.GPacket(gp.G_TRANSACTION_INFO, info))
        assert svc.router.txns.all_transactions() == [] and queue.dq.count == 1
        assert entry.redelivered

    asyncio.run(run())


def send_to(svc: ClusterService, dest: str, n: int) -> Message:
    raw = build_packet(
        PacketType.TEXT_MESSAGE, body=b"m%d" % n, flags=FLAG_Q, fields={1: dest}, sequence=n + 1
    )
    msg = Message(parse_packet(raw), dest, 0)
    svc.router.route(msg, None, DEST_QUEUE)
    return msg


def test_a_remote_transaction_prepared_before_a_restart_is_asked_about(tmp_path):
    """The store keeps a prepared remote transaction's home and id: after a restart its
    messages are held again (neither lost nor delivered) until its home broker, asked
    when its link is up, says it committed."""
    import asyncio

    from broker.store.base import (
        QUEUE_INTEREST,
        RecoveredState,
        StoredMessage,
        StoredTransaction,
        TxnAck,
    )
    from broker.store.filestore import FileStore

    async def run() -> None:
        svc = _service()
        store = FileStore(tmp_path / "fs", sync=False)
        store.load()
        store.start(asyncio.get_running_loop())
        svc.router.attach_store(store)
        raw = build_packet(
            PacketType.TEXT_MESSAGE, body=b"m", flags=FLAG_Q | 4, fields={1: "orders"}, sequence=1
        )
        key = parse_packet(raw).sysmsgid
        info = Transaction(5, None, state=TransactionState.PREPARED).info()
        info["remote"] = ["127.0.0.1:7677", 90]
        state = RecoveredState(
            messages=[StoredMessage(key, "orders", DEST_QUEUE, raw, {QUEUE_INTEREST: 1})],
            transactions=[
                StoredTransaction(5, TransactionState.PREPARED, info, [], [TxnAck(5, key, "")])
            ],
        )
        svc.router.recover(state)
        queue = svc.router.lookup("orders", DEST_QUEUE)
        (txn,) = svc.router.txns.all_transactions()
        assert txn.remote == ("127.0.0.1:7677", 90) and queue.dq.count == 0
        link = _up_link(svc)
        link.engine.data_to_send()
        wire = link.transport = _Wire()  # type: ignore[assignment]
        svc.txns.inquire_remote_txns(link)
        (ask,) = await _sent(wire)
        assert ask.type == gp.G_TRANSACTION_INQUIRY and ask.props["transactionID"] == 90
        done = {"transactionID": JLong(90), "transactionState": int(TransactionState.COMMITTED)}
        svc.on_packet(link, gp.GPacket(gp.G_TRANSACTION_INFO, done))
        assert svc.router.txns.all_transactions() == [] and queue.dq.count == 0
        store.close()

    asyncio.run(run())


def test_jmqshare_subscription_and_client_id_lock_as_a_stock_broker_sends_them():
    """OpenMQ announces a JMQShare non-durable subscription (one client ID shared by
    connections on several brokers) as an interest of its own (maximum of active
    consumers -1) and its consumer in a G_DURABLE_ATTACH naming only the client ID; the
    client ID lock comes with SH=true, and first, with a namespace, the pair unshared."""
    svc = _service()
    link = _up_link(svc)
    w = gp.BodyWriter()
    write_record(
        w, "prices", gp.ConsumerUID(7, 0, PEER), "cid", None, None, False, False, -1, False, None
    )
    svc.on_packet(link, gp.GPacket(gp.G_NEW_INTEREST, {"C": 1, "7:prefetch": 1}, w.bytes()))
    topic = svc.router.lookup("prices", DEST_TOPIC)
    sub = topic.shared[("mq", "cid", "prices", None)]
    assert sub.queue.consumers == []  # nobody attached yet: what is published waits
    w = gp.BodyWriter()
    write_record(w, "prices", gp.ConsumerUID(8, 9, PEER), *_PLAIN)
    props = {"I": "cid", "allowsNonDurable": True, "8:prefetch": 2}
    svc.on_packet(link, gp.GPacket(gp.G_DURABLE_ATTACH, props, w.bytes()))
    assert len(sub.queue.consumers) == 1

    # A connection here holds the client ID shared, with a namespace of its own.
    svc.router.subs.client_ids["cid"] = [ClientIDClaim(1, True, "ns1")]
    answer = svc.locks._answer
    assert answer("clientid:cid", 0, True) == gp.LOCK_SUCCESS
    assert answer("clientid:cid", 0, False) == gp.LOCK_FAILURE
    assert answer("clientid:ns1${%%}cid", 0, False) == gp.LOCK_FAILURE
    assert answer("clientid:ns2${%%}cid", 0, False) == gp.LOCK_SUCCESS
    svc.router.subs.client_ids["cid"] = [ClientIDClaim(1, False, None)]
    assert answer("clientid:cid", 0, True) == gp.LOCK_FAILURE


def test_an_xa_prepare_here_asks_the_home_broker_first():
    """As a stock consumer's broker does: the XA PREPARE of a transaction holding
    messages homed on another broker sends that broker one G_MESSAGE_ACK T=ACK_TXN_PREPARE
    (A bit, ``transactionID``, X) naming them, and the client's reply waits for its 200;
    the commit is T=ACK_ACKNOWLEDGED with the same ``transactionID`` (no plain acks), a
    rollback T=ACK_TXN_ROLLEDBACK; a refusal or a lost link fails the prepare; an outcome
    the home could not hear is told (G_TRANSACTION_INFO) when its link is up, and its
    G_TRANSACTION_INQUIRY is answered with the transaction's state."""
    import asyncio

    from broker.protocol.types import XAFlag
    from broker.protocol.xid import Xid
    from tests.routerkit import Conn, session

    async def run() -> None:
        svc = _service()
        svc.hook_transactions()
        r = svc.router
        link = _up_link(svc)
        link.engine.data_to_send()
        wire = link.transport = _Wire()  # type: ignore[assignment]
        conn = Conn(1)
        sess = session(r, conn, ack_mode=0)
        cons = r.add_consumer(sess, "orders", DEST_QUEUE)
        uid = gp.ConsumerUID(cons.id, conn.id, ME)
        seq = iter(range(1, 100))

        def from_home(n: int) -> list[bytes]:
            keys = []
            for _ in range(n):
                raw = build_packet(
                    PacketType.TEXT_MESSAGE,
                    body=b"m",
                    flags=FLAG_Q,
                    fields={1: "orders"},
                    sequence=next(seq),
                )
                w = gp.BodyWriter()
                uid.write(w)
                w.raw(raw)
                svc.on_packet(link, gp.GPacket(gp.G_MESSAGE_DATA, {"C": 1}, w.bytes()))
                keys.append(parse_packet(raw).sysmsgid)
            return keys

        async def prepared(n: int, xid: Xid) -> tuple[Transaction, list, gp.GPacket]:
            keys = from_home(n)
            txn = r.txns.xa_start(conn, sess, xid, XAFlag.TMNOFLAGS)
            r.txns.transacted_ack(txn, sess, [k for k in sess.unacked if k[1] in keys])
            r.txns.end_transaction(txn, XAFlag.TMSUCCESS)
            r.txns.prepare(txn)
            answers: list = []
            assert svc.prepare_remote(txn, lambda s, why: answers.append((s, why)))
            (ask,) = await _sent(wire)
            assert ask.type == gp.G_MESSAGE_ACK and ask.wants_reply and answers == []
            assert ask.props["T"] == gp.ACK_TXN_PREPARE and ask.props["C"] == n
            assert ask.props["transactionID"] == txn.id and ask.props["messageBrokerSession"] == 2
            assert ask.props["instanceName"] == ME.instance
            rd = gp.BodyReader(ask.payload)
            assert [(rd.raw(32), gp.ConsumerUID.read(rd))[0] for _ in keys] == keys
            assert txn.remote_homes == ("127.0.0.1:7677",)
            return txn, answers, ask

        def reply(ask: gp.GPacket, status: int) -> None:
            props = {"X": ask.props["X"], "T": ask.props["T"], "S": status}
            svc.on_packet(link, gp.GPacket(gp.G_MESSAGE_ACK_REPLY, props))

        # Prepared once the home said 200; the commit: T=3 with the transaction's id.
        txn, answers, ask = await prepared(2, Xid(1, b"g", b"1"))
        reply(ask, 200)
        assert answers == [(200, None)]
        r.txns.commit(txn, conn)
        (done,) = await _sent(wire)
        assert done.props["T"] == gp.ACK_ACKNOWLEDGED and done.props["C"] == 2
        assert done.props["transactionID"] == txn.id and done.wants_reply

        # Rolled back after the prepare: T=10 (C=0), the messages come again here.
        txn, answers, ask = await prepared(1, Xid(1, b"g", b"2"))
        reply(ask, 200)
        before = len(conn.sent)
        r.txns.rollback(txn)
        (undo,) = await _sent(wire)
        assert (undo.props["T"], undo.props["C"]) == (gp.ACK_TXN_ROLLEDBACK, 0)
        assert undo.props["transactionID"] == txn.id
        assert len(conn.sent) == before + 1 and conn.deliveries()[-1].redelivered
        # Given back, a message is acknowledged home the plain way again.
        assert not svc.txns._held and not svc.txns._two_phase

        # The home refuses (404: redelivered elsewhere): the prepare fails, FAILED here.
        txn, answers, ask = await prepared(1, Xid(1, b"g", b"3"))
        reply(ask, 404)
        ((status, why),) = answers
        assert status == 500 and "refused: 404" in why
        r.txns.prepare_failed(txn, why)
        assert txn.state == TransactionState.FAILED
        r.txns.rollback(txn)
        assert [p.props["T"] for p in await _sent(wire)] == [gp.ACK_TXN_ROLLEDBACK]

        # The link goes before the home answered: the prepare fails; the rollback is
        # told when the link is up again, and asked about, answered ROLLEDBACK.
        txn, answers, ask = await prepared(1, Xid(1, b"g", b"4"))
        inquiry = {"transactionID": JLong(txn.id), "X": JLong(7)}
        svc.on_packet(link, gp.GPacket(gp.G_TRANSACTION_INQUIRY, inquiry))
        (info,) = await _sent(wire)
        assert info.props["transactionState"] == TransactionState.PREPARED
        assert info.props["owner"] is True and info.props["X"] == 7
        link.drop("gone")
        svc.link_closed(link)
        assert answers[0][0] == 500 and "lost" in answers[0][1]
        r.txns.prepare_failed(txn, answers[0][1])
        r.txns.rollback(txn)
        again = _up_link(svc)
        wire = again.transport = _Wire()  # type: ignore[assignment]
        await asyncio.sleep(0)
        told = [p for p in await _sent(wire) if p.type == gp.G_TRANSACTION_INFO]
        assert [(p.props["transactionID"], p.props["transactionState"]) for p in told] == [
            (txn.id, TransactionState.ROLLEDBACK)
        ]
        link = again
        svc.on_packet(again, gp.GPacket(gp.G_TRANSACTION_INQUIRY, inquiry))
        (info,) = await _sent(wire)
        assert info.props["transactionState"] == TransactionState.ROLLEDBACK
        assert not svc.txns._held and not svc.txns._two_phase and not svc.txns._prepares

    asyncio.run(run())


def test_an_xa_transaction_prepared_at_its_homes_outlives_a_restart_here(tmp_path):
    """The store keeps which brokers prepared an XA transaction's messages: after a
    restart, their inquiry is answered PREPARED, and the transaction manager's commit
    is told them (G_TRANSACTION_INFO COMMITTED, as the transaction's owner)."""
    import asyncio

    from broker.store.base import RecoveredState, StoredTransaction
    from broker.store.filestore import FileStore

    async def run() -> None:
        svc = _service()
        svc.hook_transactions()
        store = FileStore(tmp_path / "fs", sync=False)
        store.load()
        store.start(asyncio.get_running_loop())
        svc.router.attach_store(store)
        info = Transaction(5, None, state=TransactionState.PREPARED).info()
        info["remote_homes"] = ["127.0.0.1:7677"]
        svc.router.recover(
            RecoveredState(
                transactions=[StoredTransaction(5, TransactionState.PREPARED, info, [], [])]
            )
        )
        (txn,) = svc.router.txns.all_transactions()
        assert txn.remote_homes == ("127.0.0.1:7677",)
        link = _up_link(svc)
        link.engine.data_to_send()
        wire = link.transport = _Wire()  # type: ignore[assignment]
        ask = {"transactionID": JLong(5), "X": JLong(3)}
        svc.on_packet(link, gp.GPacket(gp.G_TRANSACTION_INQUIRY, ask))
        (info_pkt,) = await _sent(wire)
        assert info_pkt.props["transactionState"] == TransactionState.PREPARED
        svc.router.txns.commit(txn, None)
        (told,) = await _sent(wire)
        assert told.type == gp.G_TRANSACTION_INFO and told.props["transactionID"] == 5
        assert told.props["transactionState"] == TransactionState.COMMITTED
        assert told.props["owner"] is True
        store.close()

    asyncio.run(run())


def _positioned_interest(queue: str, consumer_id: int, position: int, ours: bool) -> gp.GPacket:
    w = gp.BodyWriter()
    uid = gp.ConsumerUID(consumer_id, 9, PEER)
    write_record(w, queue, uid, None, None, None, True, False, None, False, None, position)
    props: dict[str, object] = {"C": 1, f"{consumer_id}:prefetch": 10}
    if ours:
        props[f"{consumer_id}:positions"] = True
    return gp.GPacket(gp.G_NEW_INTEREST, props, w.bytes())


def test_a_remote_queue_consumer_takes_the_position_its_broker_locked():
    """A peer's consumer comes with its position (OpenMQ's lock position): active below
    maxNumActiveConsumers, a backup above; ours moves it up when its broker says so
    (G_INTEREST_UPDATE NEW_PRIMARY with ``<id>:position``); a stock broker's
    NEW_PRIMARY, sent for every consumer, changes nothing."""
    svc = _service()
    svc.router.settings.queue_attributes = {
        "maxNumActiveConsumers": 1,
        "maxNumBackupConsumers": -1,
    }
    link = _up_link(svc)
    svc.on_packet(link, _positioned_interest("orders", 5, 1, ours=True))
    svc.on_packet(link, _positioned_interest("orders", 6, 0, ours=False))
    q = svc.router.lookup("orders", DEST_QUEUE)
    (backup,) = q.backups
    (active,) = q.dq.consumers
    assert (backup.id, active.id) == (5, 6)
    w = gp.BodyWriter()
    gp.ConsumerUID(5, 9, PEER).write(w)
    primary = {"C": 1, "T": gp.INTEREST_NEW_PRIMARY}
    svc.on_packet(link, gp.GPacket(gp.G_INTEREST_UPDATE, primary, w.bytes()))
    assert q.backups == [backup], "a NEW_PRIMARY without a position is OpenMQ's formality"
    gone = gp.BodyWriter()
    gp.ConsumerUID(6, 9, PEER).write(gone)
    svc.on_packet(link, gp.GPacket(gp.G_INTEREST_UPDATE, {"C": 1}, gone.bytes()))
    assert q.backups == [backup], "a backup of ours waits for its broker's word"
    moved = {**primary, "5:position": 0}
    svc.on_packet(link, gp.GPacket(gp.G_INTEREST_UPDATE, moved, w.bytes()))
    assert q.dq.consumers == [backup] and q.positions[backup] == 0


def test_a_queue_position_lock_is_refused_while_held_here_or_just_granted():
    """``queue:<name>_<n>``: refused while a position is locked for a consumer about to
    attach, or granted to this broker but not yet recorded by its taker (a race two
    brokers both won before)."""
    import asyncio

    from broker.cluster.locks import _Attempt

    svc = _service()
    answer = svc.locks._answer
    assert answer("queue:orders_0", 5, False) == gp.LOCK_SUCCESS
    svc.positions.pending.add(("orders", 0))
    assert answer("queue:orders_0", 5, False) == gp.LOCK_FAILURE
    assert answer("queue:orders_1", 5, False) == gp.LOCK_SUCCESS
    assert answer("queue:my_queue_0", 5, False) == gp.LOCK_SUCCESS  # "_" in the name

    async def granted_not_yet_taken() -> None:
        attempt = _Attempt("queue:orders_1", 10, 1, set(), False)
        svc.locks.attempts["queue:orders_1"] = attempt
        assert answer("queue:orders_1", 5, False) == gp.LOCK_SUCCESS  # older asker wins
        attempt = _Attempt("queue:orders_1", 10, 2, set(), False)
        svc.locks.attempts["queue:orders_1"] = attempt
        attempt.done.set_result(gp.LOCK_SUCCESS)
        assert answer("queue:orders_1", 5, False) == gp.LOCK_FAILURE

    asyncio.run(granted_not_yet_taken())


def test_an_unsupported_request_is_answered_501_only_where_a_reply_type_exists():
    """G_TAKEOVER_ME_PREPARE (57) has a reply type (58): 501.  G_REPLICATION_GROUP_INFO
    (55) has none in OpenMQ's table -- 56 is no packet type -- so it gets no answer (the
    link fuzzer found 56 written)."""
    import asyncio

    svc = _service()
    link = _up_link(svc)
    wire = link.transport = _Wire()  # type: ignore[assignment]

    async def ask() -> None:
        for t in (gp.G_TAKEOVER_ME_PREPARE, gp.G_REPLICATION_GROUP_INFO):
            svc.on_packet(link, gp.GPacket(t, {}, b"", flags=gp.A_BIT))
        await asyncio.sleep(0)

    asyncio.run(ask())
    sent = [p for p in gp.GPacketReader().feed(b"".join(wire.written)) if isinstance(p, gp.GPacket)]
    replies = [(p.type, p.props.get("S")) for p in sent if p.props.get("S") == 501]
    assert replies == [(gp.G_TAKEOVER_ME_PREPARE_REPLY, 501)]
    assert all(p.type in gp.KNOWN_TYPES for p in sent)
