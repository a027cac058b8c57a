"""The named queries and commands core answers for the layers above it (the admin
service above all): broker/core/queries.py, the router's purge / purge_subscription /
delete_message, Session.unacked_count, the transaction manager's look-ups and the
engine's all_sessions.  Driven through a real in-process MessageRouter; no broker, no
socket."""

from __future__ import annotations

import pytest

from broker.core import queries
from broker.core.message import Entry, Message
from broker.core.observers import MessageObserver
from broker.core.router import MessageRouter
from broker.protocol.packet import VH_DELIVERY_TIME, build_packet, parse_packet
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, FLAG_Q, AckMode, PacketType

pytestmark = pytest.mark.fast

T0 = 1_700_000_000_000  # JMSTimestamps, so "oldest first" is known


class Link:
    """A connection that takes deliveries while ``open`` and keeps what it was sent."""

    render_delivery = None  # JMQ deliveries

    def __init__(self, lid: int, client_id: str | None = None) -> None:
        self.id = lid
        self.client_id = client_id
        self.open = True
        self.sent: list[bytes] = []

    def can_deliver(self) -> bool:
        return self.open

    def send_delivery(self, buf: bytearray) -> None:
        self.sent.append(bytes(buf))


class Consumed(MessageObserver):
    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def consumed(self, entry) -> None:
        self.entries.append(entry)


def message(dest: str, n: int, *, queue: bool = True, delay_until: int = 0) -> Message:
    fields: dict[int, object] = {1: dest}
    if delay_until:
        fields[VH_DELIVERY_TIME] = delay_until
    raw = build_packet(
        PacketType.BYTES_MESSAGE,
        body=bytes([n]) * 10,
        flags=FLAG_Q if queue else 0,
        fields=fields,
        sequence=n,
        timestamp=T0 + n,
    )
    return Message(parse_packet(raw), dest, 0)


def send(r: MessageRouter, link: Link, dest: str, n: int, *, queue: bool = True) -> Message:
    msg = message(dest, n, queue=queue)
    r.route(msg, link, DEST_QUEUE if queue else DEST_TOPIC)
    return msg


def test_destinations_lists_queues_then_topics_with_the_dmq() -> None:
    r = MessageRouter()
    r.create_destination("q1", DEST_QUEUE)
    r.create_destination("t1", DEST_TOPIC)
    names = [d.name for d in queries.destinations(r)]
    assert names == ["mq.sys.dmq", "q1", "t1"]
    assert [d.name for d in queries.destinations(r, queues=False)] == ["t1"]
    assert [d.name for d in queries.destinations(r, topics=False)] == ["mq.sys.dmq", "q1"]


def test_waiting_unacked_and_transacted_messages_of_a_queue() -> None:
    r = MessageRouter()
    link = Link(1)
    dest = r.create_destination("q", DEST_QUEUE)
    sent = [send(r, link, "q", n) for n in range(1, 5)]
    assert queries.waiting_count(dest) == 4

    sess = r.create_session(link, AckMode.CLIENT_ACKNOWLEDGE)
    cons = r.add_consumer(sess, "q", DEST_QUEUE, prefetch=2)
    r.redispatch([sess])
    assert len(link.sent) == 2
    assert queries.waiting_count(dest) == 2
    assert queries.pending_acks(cons) == 2
    assert sess.unacked_count(cons.id) == 2
    assert sess.unacked_count(cons.id + 1000) == 0

    # One of the two delivered is acknowledged in a transaction still open.
    txn_sess = r.create_session(link, AckMode.NONE)
    txn = r.txns.start_transaction(txn_sess, link)
    r.txns.transacted_ack(txn, sess, [(cons.id, sent[0].key)])
    assert queries.pending_acks(cons) == 1
    assert txn.held_ack_count == 1

    held = queries.held_messages(r, dest)
    assert [h.msg.key for h in held] == [m.key for m in sent]  # oldest first, each once
    assert [h.pending for h in held] == [False, False, True, True]
    assert not any(h.redelivered for h in held)


def test_held_messages_of_a_topic_count_a_message_once() -> None:
    r = MessageRouter()
    link = Link(1)
    topic = r.create_destination("t", DEST_TOPIC)
    s1 = r.create_session(link, AckMode.AUTO_ACKNOWLEDGE)
    s2 = r.create_session(link, AckMode.AUTO_ACKNOWLEDGE)
    link.open = False  # the subscribers take nothing yet
    r.add_consumer(s1, "t", DEST_TOPIC)
    r.add_consumer(s2, "t", DEST_TOPIC)
    msg = send(r, link, "t", 1, queue=False)
    assert queries.waiting_count(topic) == 2  # one copy per subscription
    assert [(h.msg.key, h.pending) for h in queries.held_messages(r, topic)] == [(msg.key, True)]


def test_delete_message_settles_a_waiting_message_not_a_delivered_one() -> None:
    r = MessageRouter()
    seen = Consumed()
    r.events.add(seen)
    link = Link(1)
    dest = r.create_destination("q", DEST_QUEUE)
    first, second = send(r, link, "q", 1), send(r, link, "q", 2)
    sess = r.create_session(link, AckMode.CLIENT_ACKNOWLEDGE)
    r.add_consumer(sess, "q", DEST_QUEUE, prefetch=1)
    r.redispatch([sess])  # the first is delivered, the second waits

    assert r.delete_message(dest, first.message_id) == 0
    assert r.delete_message(dest, "ID:no-such-message") == 0
    assert dest.msg_count == 2
    assert r.delete_message(dest, second.message_id) == 1
    assert dest.msg_count == 1 and queries.waiting_count(dest) == 0
    assert [e.msg.key for e in seen.entries] == [second.key]
    assert [h.msg.key for h in queries.held_messages(r, dest)] == [first.key]


def test_purge_drops_the_waiting_messages_and_counts_them() -> None:
    r = MessageRouter()
    link = Link(1)
    dest = r.create_destination("q", DEST_QUEUE)
    for n in range(3):
        send(r, link, "q", n)
    sess = r.create_session(link, AckMode.CLIENT_ACKNOWLEDGE)
    cons = r.add_consumer(sess, "q", DEST_QUEUE, prefetch=1)
    r.redispatch([sess])
    assert r.purge(dest) == 2
    assert dest.msg_count == 1 and dest.stats.purged == 2
    assert queries.pending_acks(cons) == 1  # the delivered one stays
    assert r.purge(dest) == 0


def test_durable_subscriptions_their_consumers_and_messages() -> None:
    r = MessageRouter()
    link = Link(1, client_id="c1")
    other = Link(2)
    r.create_destination("t", DEST_TOPIC)
    r.create_destination("t2", DEST_TOPIC)
    sess = r.create_session(link, AckMode.CLIENT_ACKNOWLEDGE)
    cons = r.add_consumer(sess, "t", DEST_TOPIC, durable_name="d1", prefetch=1)
    shared = r.add_consumer(sess, "t2", DEST_TOPIC, jms_share=True, shared_name="s1")
    plain = r.add_consumer(r.create_session(other, 1), "t", DEST_TOPIC)  # neither
    assert plain.subscription is not None

    rows = queries.subscriptions(r)
    assert [(t.name, s) for t, s in rows] == [
        ("t", cons.subscription),
        ("t2", shared.subscription),
    ]
    assert [s for _t, s in queries.subscriptions(r, "t2")] == [shared.subscription]
    assert queries.subscriptions(r, "nope") == []

    sub = queries.find_durable(r, "c1", "d1")
    assert sub is cons.subscription
    assert queries.find_durable(r, None, "d1") is None
    assert queries.subscription_consumers(sub) == [cons]

    for n in range(3):
        send(r, other, "t", n, queue=False)
    # One delivered (prefetch 1) and unacknowledged, two waiting.
    assert queries.subscription_message_count(sub) == 3
    assert r.purge_subscription(sub) == 2
    assert queries.subscription_message_count(sub) == 1

    r.remove_consumer(cons, None)
    assert queries.subscription_consumers(sub) == []


def test_transactions_their_sends_and_look_up_by_id() -> None:
    r = MessageRouter()
    link = Link(1)
    r.create_destination("q", DEST_QUEUE)
    r.create_destination("t", DEST_TOPIC)
    sess = r.create_session(link, AckMode.NONE)
    a = r.txns.start_transaction(sess, link)
    b = r.txns.start_transaction(r.create_session(link, AckMode.NONE), link)
    r.txns.transacted_send(a, message("q", 1), DEST_QUEUE, link)
    r.txns.transacted_send(a, message("q", 2), DEST_QUEUE, link)
    r.txns.transacted_send(b, message("t", 3, queue=False), DEST_TOPIC, link)

    assert queries.transactions(r) == [a, b]
    assert queries.transaction_by_id(r, b.id) is b
    assert queries.transaction_by_id(r, 999_999) is None
    held = queries.held_in_transactions(r)
    size = message("q", 1).size
    assert held == {("q", False): [2, 2 * size], ("t", True): [1, size]}

    r.txns.commit(a, link)
    assert queries.held_in_transactions(r) == {("t", True): [1, size]}
    assert queries.transactions(r) == [b]


def test_delayed_messages_by_destination() -> None:
    r = MessageRouter()
    link = Link(1)
    r.create_destination("q", DEST_QUEUE)
    far = T0 * 2
    for n in (1, 2):
        r.route(message("q", n, delay_until=far), link, DEST_QUEUE)
    r.route(message("t", 3, queue=False, delay_until=far), link, DEST_TOPIC)
    size = message("q", 1, delay_until=far).size
    assert queries.delayed_by_destination(r) == {
        ("q", False): [2, 2 * size],
        ("t", True): [1, size],
    }


def test_producers_and_consumers_per_connection() -> None:
    r = MessageRouter()
    one, two = Link(1), Link(2)
    r.create_destination("q", DEST_QUEUE)
    s1 = r.create_session(one, 1)
    s2 = r.create_session(one, 1)
    s3 = r.create_session(two, 1)
    r.add_producer(s1, "q", DEST_QUEUE)
    r.add_producer(s2, "q", DEST_QUEUE)
    prod = r.add_producer(s3, "q", DEST_QUEUE)
    r.add_consumer(s1, "q", DEST_QUEUE)
    r.add_consumer(s2, "q", DEST_QUEUE)
    assert queries.producers_per_connection(r) == {1: 2, 2: 1}
    assert queries.consumer_count([s1, s2]) == 2
    assert queries.consumer_count([s3]) == 0

    dest = prod.destination
    assert not queries.producer_waiting(dest, prod.id)
    dest.waiting_producers.append((two, prod.id))
    assert queries.producer_waiting(dest, prod.id)


def test_the_engine_names_its_sessions(tmp_path) -> None:
    from broker.config import BrokerConfig
    from broker.engine import ConnectionEngine
    from broker.security.filerepo import FileUserRepository
    from broker.server.broker import Broker
    from broker.server.services import Service

    passwd = tmp_path / "passwd"
    passwd.write_text("")
    b = Broker(
        BrokerConfig({"imq.varhome": str(tmp_path / "var"), "imq.accesscontrol.enabled": "false"}),
        FileUserRepository(passwd),
    )
    try:
        engine = ConnectionEngine(b, Service("jms", "NORMAL", "tcp", None, 0, "basic", -1))
        assert engine.all_sessions() == []
        sess = b.router.create_session(engine, 1)
        engine.sessions[sess.id] = sess
        implicit = b.router.create_session(engine, 1)
        engine.implicit_session = implicit
        assert engine.all_sessions() == [sess, implicit]
    finally:
        b.executor.shutdown(wait=False)
