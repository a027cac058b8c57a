"""Topic subscriptions and client IDs (broker/core/subscriptions.py) on a real in-process
router, as JMS and OpenMQ define them: durable subscriptions are (client ID, name), keep
messages while no consumer is attached, refuse a second unshared consumer (409) and are
made anew when their selector changes; shared subscriptions (JMS 2.0 and OpenMQ's
JMQShare) are joined only the same way, with the same selector and noLocal, within
maxNumSharedConsumers; unsubscribing and SET_CLIENTID follow the protocol's rules."""

from __future__ import annotations

import pytest

from broker.core.errors import RouterError
from broker.core.router import MessageRouter
from broker.core.selector import compile_selector
from broker.protocol.types import DEST_TEMP, DEST_TOPIC, Status

from .routerkit import Conn, send, session

pytestmark = pytest.mark.fast


def _status(fn, *args, **kw) -> int:
    with pytest.raises(RouterError) as refused:
        fn(*args, **kw)
    return refused.value.status


def _conn(r: MessageRouter, cid: int, client_id: str | None = None) -> Conn:
    conn = Conn(cid)
    if client_id is not None:
        r.subs.set_client_id(conn, client_id, False, None)  # type: ignore[arg-type]
    return conn


def _publish(r: MessageRouter, *bodies: int, origin: int = 99) -> None:
    send(r, Conn(origin), "t", *bodies, topic=True, origin=origin)


def test_every_plain_subscriber_gets_every_message() -> None:
    r = MessageRouter()
    a, b = _conn(r, 1), _conn(r, 2)
    r.add_consumer(session(r, a), "t", DEST_TOPIC)
    r.add_consumer(session(r, b), "t", DEST_TOPIC)
    _publish(r, 1, 2)
    assert a.bodies() == b.bodies() == [b"\x01", b"\x02"]
    assert r.topics["t"].msg_count == 4  # a copy per subscription


def test_a_plain_subscription_goes_with_its_consumer() -> None:
    r = MessageRouter()
    a = _conn(r, 1)
    sess = session(r, a)
    cons = r.add_consumer(sess, "t", DEST_TOPIC)
    r.remove_consumer(cons, None, redeliver_all=True)
    assert r.topics["t"].subscriptions == [] and r.totals.count == 0
    _publish(r, 1)
    assert r.topics["t"].msg_count == 0  # nobody to keep it for


def test_a_durable_subscription_needs_a_client_id() -> None:
    r = MessageRouter()
    sess = session(r, _conn(r, 1))
    assert _status(r.add_consumer, sess, "t", DEST_TOPIC, durable_name="d") == (
        Status.PRECONDITION_FAILED
    )


def test_a_durable_subscription_keeps_messages_while_nobody_is_attached() -> None:
    r = MessageRouter()
    first = _conn(r, 1, "client")
    sess = session(r, first)
    cons = r.add_consumer(sess, "t", DEST_TOPIC, durable_name="d")
    _publish(r, 1)
    r.acks.acknowledge(sess, list(sess.unacked))
    r.remove_consumer(cons, None)
    r.connection_closed(first, [sess])
    _publish(r, 2, 3)
    assert r.topics["t"].msg_count == 2
    # The same client ID and name, on a new connection: the same subscription.
    again = _conn(r, 2, "client")
    s2 = session(r, again)
    r.add_consumer(s2, "t", DEST_TOPIC, durable_name="d")
    r.redispatch([s2])
    assert again.bodies() == [b"\x02", b"\x03"]
    # Another client ID's subscription of the same name is another subscription.
    other = _conn(r, 3, "other")
    s3 = session(r, other)
    r.add_consumer(s3, "t", DEST_TOPIC, durable_name="d")
    r.redispatch([s3])
    assert other.bodies() == []


def test_an_unshared_durable_subscription_takes_one_consumer() -> None:
    r = MessageRouter()
    conn = _conn(r, 1, "client")
    sess = session(r, conn)
    r.add_consumer(sess, "t", DEST_TOPIC, durable_name="d")
    assert _status(r.add_consumer, sess, "t", DEST_TOPIC, durable_name="d") == Status.CONFLICT


def test_a_changed_durable_subscription_is_a_new_one() -> None:
    r = MessageRouter()
    conn = _conn(r, 1, "client")
    sess = session(r, conn)
    cons = r.add_consumer(sess, "t", DEST_TOPIC, durable_name="d")
    r.remove_consumer(cons, None, redeliver_all=True)
    _publish(r, 1)
    old = r.topics["t"].durables[("client", "d")]
    # The same selector (none): the same subscription, its message still there.
    same = r.add_consumer(sess, "t", DEST_TOPIC, durable_name="d")
    assert same.subscription is old
    r.remove_consumer(same, None, redeliver_all=True)
    # A selector now: the old subscription and what it held are gone.
    sel = compile_selector("color = 'red'")
    new = r.add_consumer(sess, "t", DEST_TOPIC, durable_name="d", selector=sel)
    assert new.subscription is not old and new.subscription is not None
    assert new.subscription.selector_text == "color = 'red'"
    assert r.topics["t"].msg_count == 0 and r.totals.count == 0


def test_unsubscribe_refuses_unknown_and_active_subscriptions() -> None:
    r = MessageRouter()
    conn = _conn(r, 1, "client")
    sess = session(r, conn)
    cons = r.add_consumer(sess, "t", DEST_TOPIC, durable_name="d")
    assert _status(r.subs.unsubscribe, "client", "nope") == Status.NOT_FOUND
    assert _status(r.subs.unsubscribe, "client", "d") == Status.CONFLICT
    r.remove_consumer(cons, None, redeliver_all=True)
    _publish(r, 1, 2)
    assert r.totals.count == 2
    r.subs.unsubscribe("client", "d")
    assert r.topics["t"].durables == {} and r.totals.count == 0
    assert _status(r.subs.unsubscribe, "client", "d") == Status.NOT_FOUND


def test_a_jms_shared_durable_subscription_spreads_messages_over_its_consumers() -> None:
    r = MessageRouter()
    a, b = _conn(r, 1), _conn(r, 2)  # no client ID: JMS 2.0 allows it here
    ca = r.add_consumer(session(r, a), "t", DEST_TOPIC, durable_name="d", jms_share=True)
    cb = r.add_consumer(session(r, b), "t", DEST_TOPIC, durable_name="d", jms_share=True)
    assert ca.subscription is cb.subscription
    _publish(r, 1, 2, 3, 4)
    assert a.bodies() == [b"\x01", b"\x03"] and b.bodies() == [b"\x02", b"\x04"]


def test_shared_and_unshared_durable_subscriptions_may_not_share_a_name() -> None:
    r = MessageRouter()
    conn = _conn(r, 1, "client")
    sess = session(r, conn)
    cons = r.add_consumer(sess, "t", DEST_TOPIC, durable_name="d")
    r.remove_consumer(cons, None, redeliver_all=True)
    assert (
        _status(r.add_consumer, sess, "t", DEST_TOPIC, durable_name="d", jms_share=True)
        == Status.CONFLICT
    )


def test_joining_a_shared_subscription_needs_the_same_terms() -> None:
    r = MessageRouter()
    a = _conn(r, 1)
    sa = session(r, a)
    sel = compile_selector("n > 1")
    r.add_consumer(sa, "t", DEST_TOPIC, jms_share=True, shared_name="s", selector=sel)
    join = {"jms_share": True, "shared_name": "s"}
    other_sel = compile_selector("n > 2")
    assert _status(r.add_consumer, sa, "t", DEST_TOPIC, **join) == Status.CONFLICT
    assert _status(r.add_consumer, sa, "t", DEST_TOPIC, selector=other_sel, **join) == (
        Status.CONFLICT
    )
    assert (
        _status(r.add_consumer, sa, "t", DEST_TOPIC, selector=sel, no_local=True, **join)
        == Status.CONFLICT
    )
    r.ensure_destination("u", DEST_TOPIC, None)
    assert _status(r.add_consumer, sa, "u", DEST_TOPIC, selector=sel, **join) == (
        Status.CONFLICT  # the name is in use on another topic
    )
    joined = r.add_consumer(sa, "t", DEST_TOPIC, selector=sel, **join)
    assert len(joined.subscription.queue.consumers) == 2  # type: ignore[union-attr]


def test_a_shared_subscription_has_at_most_max_num_shared_consumers() -> None:
    r = MessageRouter()
    r.ensure_destination("t", DEST_TOPIC, None).attributes["maxNumSharedConsumers"] = 2
    sess = session(r, _conn(r, 1))
    join = {"jms_share": True, "shared_name": "s"}
    r.add_consumer(sess, "t", DEST_TOPIC, **join)
    r.add_consumer(sess, "t", DEST_TOPIC, **join)
    assert _status(r.add_consumer, sess, "t", DEST_TOPIC, **join) == Status.CONFLICT


def test_a_shared_non_durable_subscription_needs_a_name_and_goes_with_its_last_consumer() -> None:
    r = MessageRouter()
    sess = session(r, _conn(r, 1))
    assert _status(r.add_consumer, sess, "t", DEST_TOPIC, jms_share=True) == (
        Status.PRECONDITION_FAILED
    )
    c1 = r.add_consumer(sess, "t", DEST_TOPIC, jms_share=True, shared_name="s")
    c2 = r.add_consumer(sess, "t", DEST_TOPIC, jms_share=True, shared_name="s")
    r.remove_consumer(c1, None, redeliver_all=True)
    assert r.topics["t"].shared  # one consumer left
    r.remove_consumer(c2, None, redeliver_all=True)
    assert r.topics["t"].shared == {} and r.topics["t"].subscriptions == []


def test_jmqshare_needs_a_client_id_and_shares_per_selector() -> None:
    r = MessageRouter()
    plain = session(r, _conn(r, 1))
    assert _status(r.add_consumer, plain, "t", DEST_TOPIC, share=True) == (
        Status.PRECONDITION_FAILED
    )
    sess = session(r, _conn(r, 2, "client"))
    c1 = r.add_consumer(sess, "t", DEST_TOPIC, share=True)
    c2 = r.add_consumer(sess, "t", DEST_TOPIC, share=True)
    sel = compile_selector("n = 1")
    c3 = r.add_consumer(sess, "t", DEST_TOPIC, share=True, selector=sel)
    assert c1.subscription is c2.subscription is not c3.subscription
    assert _status(r.add_consumer, sess, "t", DEST_TOPIC, share=True, jms_share=True) == (
        Status.BAD_REQUEST
    )


def test_no_local_subscribers_miss_their_own_connections_messages() -> None:
    r = MessageRouter()
    a = _conn(r, 1)
    r.add_consumer(session(r, a), "t", DEST_TOPIC, no_local=True)
    _publish(r, 1, origin=1)  # from a's own connection
    _publish(r, 2, origin=2)
    assert a.bodies() == [b"\x02"]


def test_a_temporary_topic_has_no_durable_or_shared_subscriptions() -> None:
    r = MessageRouter()
    conn = _conn(r, 1, "client")
    sess = session(r, conn)
    r.create_destination("temp", DEST_TOPIC | DEST_TEMP, conn)  # type: ignore[arg-type]
    kind = DEST_TOPIC | DEST_TEMP
    assert _status(r.add_consumer, sess, "temp", kind, durable_name="d") == (
        Status.PRECONDITION_FAILED
    )
    assert _status(r.add_consumer, sess, "temp", kind, jms_share=True, shared_name="s") == (
        Status.PRECONDITION_FAILED
    )
    other = session(r, _conn(r, 2))
    assert _status(r.add_consumer, other, "temp", kind) == Status.NOT_ALLOWED


def test_client_ids_are_exclusive_unless_shared_in_other_namespaces() -> None:
    r = MessageRouter()
    a, b, c = Conn(1), Conn(2), Conn(3)
    r.subs.set_client_id(a, "id", False, None)  # type: ignore[arg-type]
    assert _status(r.subs.set_client_id, b, "id", False, None) == Status.CONFLICT
    assert _status(r.subs.set_client_id, b, "   ", False, None) == Status.BAD_REQUEST
    r.subs.release_client_id(a)  # type: ignore[arg-type]
    r.subs.set_client_id(b, "id", True, "ns1")  # type: ignore[arg-type]
    r.subs.set_client_id(c, "id", True, "ns2")  # type: ignore[arg-type]
    assert _status(r.subs.set_client_id, a, "id", True, "ns1") == Status.CONFLICT
    assert _status(r.subs.set_client_id, a, "id", False, None) == Status.CONFLICT
    # A closing connection gives its claim back.
    r.connection_closed(b, [])  # type: ignore[arg-type]
    r.subs.set_client_id(a, "id", True, "ns1")  # type: ignore[arg-type]
    assert [cl.link_id for cl in r.subs.client_ids["id"]] == [3, 1]
