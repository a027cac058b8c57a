"""Acknowledgements (broker/core/acks.py) on a real in-process router: what ACKNOWLEDGE,
REDELIVER and a closing consumer do to delivered messages, as OpenMQ's broker does --
unknown and repeated acknowledgements settle nothing, a DEAD acknowledgement goes to the
DMQ, a redelivered message comes back first and flagged, maxDeliveryCount sends it to
the DMQ, and prefetched messages the application never saw go back unflagged."""

from __future__ import annotations

import pytest

from broker.core import dmq
from broker.core.router import MessageRouter
from broker.protocol.types import DEST_QUEUE

from .routerkit import Conn, Delivery, dmq_bodies, dmq_reasons, pending, send, session

pytestmark = pytest.mark.fast


def _consuming(r: MessageRouter, queue: str = "q", prefetch: int = -1):
    conn = Conn(1)
    sess = session(r, conn)
    cons = r.add_consumer(sess, queue, DEST_QUEUE, prefetch=prefetch)
    return conn, sess, cons


def test_acknowledge_settles_each_named_message_once() -> None:
    r = MessageRouter()
    conn, sess, cons = _consuming(r)
    send(r, conn, "q", 1, 2, 3)
    q = r.queues["q"]
    assert conn.bodies() == [b"\x01", b"\x02", b"\x03"]
    assert q.msg_count == 3 and r.totals.count == 3
    first, second, third = list(sess.unacked)
    assert r.acks.acknowledge(sess, [first, third]) == 2
    assert list(sess.unacked) == [second]
    assert q.msg_count == 1 and r.totals.count == 1 and q.stats.acked == 2
    # The same ids again, and ids nobody was sent: nothing found, nothing settled twice.
    assert r.acks.acknowledge(sess, [first, third]) == 0
    assert r.acks.acknowledge(sess, [(cons.id, b"\x00" * 16), (cons.id + 99, second[1])]) == 0
    assert q.msg_count == 1 and r.totals.count == 1 and q.stats.acked == 2
    assert r.acks.acknowledge(sess, [second]) == 1
    assert q.msg_count == 0 and r.totals.count == 0 and r.totals.bytes == 0


def test_another_sessions_acknowledgement_does_not_settle_my_messages() -> None:
    r = MessageRouter()
    conn, sess, _cons = _consuming(r)
    other = session(r, Conn(2))
    send(r, conn, "q", 1)
    key = next(iter(sess.unacked))
    assert r.acks.acknowledge(other, [key]) == 0
    assert key in sess.unacked and r.queues["q"].msg_count == 1


def test_a_dead_acknowledgement_goes_to_the_dmq_with_its_reason() -> None:
    r = MessageRouter()
    conn, sess, _cons = _consuming(r)
    send(r, conn, "q", 1, 2, 3)
    k1, k2, k3 = list(sess.unacked)
    assert r.acks.acknowledge(sess, [k1], ack_type=2) == 1  # DEAD, undeliverable
    assert r.acks.acknowledge(sess, [k2], ack_type=2, dead_reason=1) == 1  # DEAD, expired
    # UNDELIVERABLE (1): removed without a DMQ copy.
    assert r.acks.acknowledge(sess, [k3], ack_type=1) == 1
    assert dmq_bodies(r) == [b"\x01", b"\x02"]
    assert dmq_reasons(r) == [dmq.UNDELIVERABLE, dmq.EXPIRED]
    q = r.queues["q"]
    assert q.msg_count == 0 and q.stats.discarded == 1 and q.stats.expired == 1
    assert sess.unacked == {}


def test_no_dmq_copy_where_the_destination_or_the_producer_says_so() -> None:
    r = MessageRouter()
    conn, sess, _cons = _consuming(r)
    r.queues["q"].attributes["useDMQ"] = False
    send(r, conn, "q", 1)
    r.acks.acknowledge(sess, list(sess.unacked), ack_type=2)
    assert dmq_bodies(r) == [] and r.queues["q"].msg_count == 0

    r.queues["q"].attributes["useDMQ"] = True
    send(r, conn, "q", 2, props={"JMS_SUN_PRESERVE_UNDELIVERED": False})
    r.acks.acknowledge(sess, list(sess.unacked), ack_type=2)
    assert dmq_bodies(r) == [] and r.queues["q"].msg_count == 0 and r.totals.count == 0


def test_redeliver_puts_messages_back_first_in_order_flagged_or_not() -> None:
    r = MessageRouter()
    conn, sess, cons = _consuming(r)
    send(r, conn, "q", 1, 2, 3)
    k1, k2, _k3 = list(sess.unacked)
    r.acks.redeliver(sess, [k1, k2], set_redelivered=True)  # in delivery order, as clients do
    # Back at the head of the queue, straight to the consumer, flagged.
    assert conn.deliveries()[3:] == [
        Delivery(cons.id, b"\x01", True),
        Delivery(cons.id, b"\x02", True),
    ]
    assert [e.count for e in sess.unacked.values()] == [1, 2, 2]
    # JMQSetRedelivered false (the application never saw them): not flagged.
    conn.sent.clear()
    r.acks.redeliver(sess, list(sess.unacked), set_redelivered=False)
    assert conn.deliveries() == [
        Delivery(cons.id, b"\x03", False),
        Delivery(cons.id, b"\x01", True),  # once flagged, a message stays redelivered
        Delivery(cons.id, b"\x02", True),
    ]
    assert r.queues["q"].msg_count == 3  # nothing settled by a redelivery


def test_redelivered_messages_wait_at_the_head_while_no_consumer_can_take_them() -> None:
    r = MessageRouter()
    conn, sess, cons = _consuming(r)
    send(r, conn, "q", 1, 2)
    k1, _k2 = list(sess.unacked)
    r.remove_consumer(cons, None)  # the application saw both: they stay with the session
    assert len(sess.unacked) == 2
    send(r, conn, "q", 3)
    r.acks.redeliver(sess, [k1], set_redelivered=True)
    assert pending(r, "q") == [b"\x01", b"\x03"]


def test_over_max_delivery_count_a_message_goes_to_the_dmq() -> None:
    r = MessageRouter()
    conn, sess, cons = _consuming(r)
    r.queues["q"].attributes["maxDeliveryCount"] = 2
    send(r, conn, "q", 7)
    r.acks.redeliver(sess, list(sess.unacked), set_redelivered=True)  # second delivery
    assert conn.bodies() == [b"\x07", b"\x07"]
    r.acks.redeliver(sess, list(sess.unacked), set_redelivered=True)  # a third: too many
    assert conn.bodies() == [b"\x07", b"\x07"] and sess.unacked == {}
    assert dmq_bodies(r) == [b"\x07"] and dmq_reasons(r) == [dmq.UNDELIVERABLE]
    assert r.queues["q"].msg_count == 0 and r.queues["q"].stats.discarded == 1
    assert cons.delivered == 2


def test_a_closing_consumer_returns_what_the_application_never_saw() -> None:
    r = MessageRouter()
    conn, sess, cons = _consuming(r)
    send(r, conn, "q", 1, 2, 3, 4)
    keys = list(sess.unacked)
    # The application saw 1 and 2; 3 and 4 were prefetched.
    r.remove_consumer(cons, keys[1][1])
    assert list(sess.unacked) == keys[:2]  # seen: still the session's to acknowledge
    assert pending(r, "q") == [b"\x03", b"\x04"]
    q = r.queues["q"]
    assert [e.count for e in q.dq] == [0, 0]  # never delivered, as far as anyone knows
    # The next consumer gets them unflagged.
    conn2 = Conn(2)
    cons2 = r.add_consumer(session(r, conn2), "q", DEST_QUEUE)
    r.redispatch(list(r.sessions.values()))
    assert conn2.deliveries() == [
        Delivery(cons2.id, b"\x03", False),
        Delivery(cons2.id, b"\x04", False),
    ]


def test_a_closing_consumer_with_redeliver_all_returns_everything_flagged() -> None:
    r = MessageRouter()
    conn, sess, cons = _consuming(r)
    send(r, conn, "q", 1, 2)
    r.remove_consumer(cons, None, redeliver_all=True)
    assert sess.unacked == {}
    q = r.queues["q"]
    assert pending(r, "q") == [b"\x01", b"\x02"]
    assert [e.redelivered for e in q.dq] == [True, True]
    assert [e.count for e in q.dq] == [1, 1]


def test_a_closing_consumer_whose_last_seen_message_was_acknowledged_returns_the_rest() -> None:
    r = MessageRouter()
    conn, sess, cons = _consuming(r)
    send(r, conn, "q", 1, 2, 3)
    keys = list(sess.unacked)
    r.acks.acknowledge(sess, keys[:1])
    r.remove_consumer(cons, keys[0][1])  # the last one seen is no longer held
    assert sess.unacked == {}
    assert pending(r, "q") == [b"\x02", b"\x03"]


def test_messages_of_a_destroyed_queue_are_settled_not_returned() -> None:
    r = MessageRouter()
    conn, sess, cons = _consuming(r)
    send(r, conn, "q", 1, 2)
    r.remove_consumer(cons, None)
    held = list(sess.unacked.values())
    r.destroy_destination("q", DEST_QUEUE)
    r.acks.return_unacked(sess, held, redelivered=True)
    assert r.totals.count == 0 and r.totals.bytes == 0
    assert "q" not in r.queues and dmq_bodies(r) == []
