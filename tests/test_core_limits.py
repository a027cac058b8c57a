"""Destination and broker limits (broker/core/limits.py) on a real in-process router, as
OpenMQ's limitBehavior defines them: at maxNumMsgs / maxTotalMsgBytes REJECT_NEWEST
refuses the send (414), REMOVE_OLDEST and REMOVE_LOW_PRIORITY make room by sending a
pending message to the DMQ, FLOW_CONTROL accepts and holds the producer's next credit
until the queue drains; maxBytesPerMsg and imq.message.max_size refuse a message (423);
the DMQ has limits of its own; expired messages are reclaimed to the DMQ."""

from __future__ import annotations

import pytest

from broker.core import dmq
from broker.core.errors import RouterError
from broker.core.observers import RouterObservers
from broker.core.router import MessageRouter, RouterSettings
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, DestState, Status

from .routerkit import Conn, dmq_bodies, dmq_reasons, msg, pending, send, session

pytestmark = pytest.mark.fast


class _Resumed:
    """A ProducerFlow that writes down who was given room."""

    def __init__(self, resumed: list[tuple[object, int]]) -> None:
        self.resumed = resumed

    def producer_room(self, link: object, producer_id: int) -> None:
        self.resumed.append((link, producer_id))

    def producer_pause(self, link: object, producer_id: int) -> None:
        pass


def _queue(r: MessageRouter, name: str, **attributes: object):
    q = r.ensure_destination(name, DEST_QUEUE, None)
    q.attributes.update(attributes)
    return q


def _refused(r: MessageRouter, conn: Conn, dest: str, body: int, **kw: object) -> RouterError:
    with pytest.raises(RouterError) as refused:
        send(r, conn, dest, body, **kw)
    return refused.value


@pytest.mark.parametrize("by", ["maxNumMsgs", "maxTotalMsgBytes"])
def test_reject_newest_refuses_the_send_at_the_limit(by: str) -> None:
    r = MessageRouter()
    conn = Conn(1)
    size = msg("q", 1).size
    _queue(r, "q", limitBehavior="REJECT_NEWEST", **{by: 2 if by == "maxNumMsgs" else 2 * size})
    send(r, conn, "q", 1, 2)
    err = _refused(r, conn, "q", 3)
    assert err.status == Status.RESOURCE_FULL
    q = r.queues["q"]
    assert pending(r, "q") == [b"\x01", b"\x02"] and q.stats.rejected == 1
    assert dmq_bodies(r) == []  # the refused message is the producer's, not the DMQ's
    # Room again once one is consumed.
    conn2 = Conn(2)
    sess = session(r, conn2)
    r.add_consumer(sess, "q", DEST_QUEUE)
    r.redispatch([sess])
    r.acks.acknowledge(sess, list(sess.unacked)[:1])
    send(r, conn, "q", 3)
    assert q.msg_count == 2


def test_reject_newest_is_the_default_behaviour() -> None:
    r = MessageRouter()
    conn = Conn(1)
    _queue(r, "q", maxNumMsgs=1)
    send(r, conn, "q", 1)
    assert _refused(r, conn, "q", 2).status == Status.RESOURCE_FULL


def test_remove_oldest_sends_the_oldest_pending_message_to_the_dmq() -> None:
    r = MessageRouter()
    conn = Conn(1)
    _queue(r, "q", maxNumMsgs=2, limitBehavior="REMOVE_OLDEST")
    send(r, conn, "q", 1, 2, 3, 4)
    assert pending(r, "q") == [b"\x03", b"\x04"]
    assert dmq_bodies(r) == [b"\x01", b"\x02"]
    assert dmq_reasons(r) == [dmq.REMOVED_OLDEST, dmq.REMOVED_OLDEST]
    q = r.queues["q"]
    assert q.msg_count == 2 and q.stats.discarded == 2 and q.stats.rejected == 0
    assert r.totals.count == 4  # two in the queue, two in the DMQ


def test_remove_oldest_by_bytes_and_without_the_dmq() -> None:
    r = MessageRouter()
    conn = Conn(1)
    size = msg("q", 1).size
    _queue(r, "q", maxTotalMsgBytes=2 * size, limitBehavior="REMOVE_OLDEST", useDMQ=False)
    send(r, conn, "q", 1, 2, 3)
    assert pending(r, "q") == [b"\x02", b"\x03"]
    assert dmq_bodies(r) == [] and r.totals.count == 2 and r.totals.bytes == 2 * size


def test_remove_low_priority_evicts_the_lowest_priority_then_the_oldest() -> None:
    r = MessageRouter()
    conn = Conn(1)
    _queue(r, "q", maxNumMsgs=3, limitBehavior="REMOVE_LOW_PRIORITY")
    send(r, conn, "q", 1, priority=6)
    send(r, conn, "q", 2, priority=2)
    send(r, conn, "q", 3, priority=2)
    send(r, conn, "q", 4, priority=5)  # full: the oldest of priority 2 makes way
    assert sorted(pending(r, "q")) == [b"\x01", b"\x03", b"\x04"]
    send(r, conn, "q", 5, priority=5)  # then the other priority-2 one
    assert sorted(pending(r, "q")) == [b"\x01", b"\x04", b"\x05"]
    assert dmq_bodies(r) == [b"\x02", b"\x03"]
    assert dmq_reasons(r) == [dmq.REMOVED_LOW_PRIORITY] * 2
    # Delivery order is still priority first.
    assert pending(r, "q") == [b"\x01", b"\x04", b"\x05"]


def test_remove_low_priority_refuses_a_message_lower_than_all_pending() -> None:
    r = MessageRouter()
    conn = Conn(1)
    _queue(r, "q", maxNumMsgs=2, limitBehavior="REMOVE_LOW_PRIORITY")
    send(r, conn, "q", 1, priority=7)
    send(r, conn, "q", 2, priority=8)
    assert _refused(r, conn, "q", 3, priority=3).status == Status.RESOURCE_FULL
    assert pending(r, "q") == [b"\x02", b"\x01"] and dmq_bodies(r) == []


def test_flow_control_accepts_at_the_limit_and_holds_the_producer_until_it_drains() -> None:
    resumed: list[tuple[object, int]] = []
    r = MessageRouter(observers=RouterObservers(producer_flow=_Resumed(resumed)))
    conn = Conn(1)
    sess = session(r, conn)
    q = _queue(r, "fc", maxNumMsgs=10, limitBehavior="FLOW_CONTROL")
    prod = r.add_producer(sess, "fc", DEST_QUEUE)
    assert r.limits.producer_credit(prod, conn) == 10  # room for ten
    send(r, conn, "fc", *range(10))
    assert r.limits.producer_credit(prod, conn) == 0  # full: the RESUME_FLOW is held
    assert q.waiting_producers == [(conn, prod.id)]
    # A send beyond the limit (a client without flow control) is still accepted.
    send(r, conn, "fc", 10)
    assert q.msg_count == 11 and q.stats.rejected == 0 and dmq_bodies(r) == []
    # Consumers drain it: the held producer is given another look once there is room.
    csess = session(r, Conn(2))
    r.add_consumer(csess, "fc", DEST_QUEUE)
    r.redispatch([csess])
    keys = list(csess.unacked)
    r.acks.acknowledge(csess, keys[:1])
    assert resumed == []  # ten still there: no room yet
    r.acks.acknowledge(csess, keys[1:3])
    assert resumed == [(conn, prod.id)] and q.waiting_producers == []
    assert r.limits.producer_credit(prod, conn) >= 1


def test_a_paused_destination_holds_producers_until_resumed() -> None:
    resumed: list[tuple[object, int]] = []
    r = MessageRouter(observers=RouterObservers(producer_flow=_Resumed(resumed)))
    conn = Conn(1)
    prod = r.add_producer(session(r, conn), "q", DEST_QUEUE)
    q = r.queues["q"]
    r.limits.set_dest_state(q, DestState.PRODUCERS_PAUSED)
    assert r.limits.producer_credit(prod, conn) == 0
    r.limits.set_dest_state(q, DestState.RUNNING)
    assert resumed == [(conn, prod.id)]
    assert r.limits.producer_credit(prod, conn) == r.settings.producer_batch


def test_a_consumers_paused_queue_keeps_its_messages_until_resumed() -> None:
    r = MessageRouter()
    conn = Conn(1)
    sess = session(r, conn)
    r.add_consumer(sess, "q", DEST_QUEUE)
    q = r.queues["q"]
    r.limits.set_dest_state(q, DestState.CONSUMERS_PAUSED)
    send(r, conn, "q", 1, 2)
    assert conn.sent == [] and pending(r, "q") == [b"\x01", b"\x02"]
    r.limits.set_dest_state(q, DestState.RUNNING)
    assert conn.bodies() == [b"\x01", b"\x02"]


def test_message_size_limits_refuse_with_entity_too_large() -> None:
    size = msg("q", 1).size
    r = MessageRouter(RouterSettings(max_message_size=size - 1))
    conn = Conn(1)
    assert _refused(r, conn, "q", 1).status == Status.ENTITY_TOO_LARGE
    r = MessageRouter()
    _queue(r, "q", maxBytesPerMsg=size - 1)
    err = _refused(r, conn, "q", 1)
    assert err.status == Status.ENTITY_TOO_LARGE and r.queues["q"].stats.rejected == 1
    assert r.totals.count == 0


def test_the_broker_wide_message_count_limit_spans_destinations() -> None:
    r = MessageRouter(RouterSettings(system_max_count=2))
    conn = Conn(1)
    send(r, conn, "a", 1)
    send(r, conn, "b", 2)
    assert _refused(r, conn, "c", 3).status == Status.RESOURCE_FULL
    # The broker's own admin replies pass it (an administrator can work on a full broker).
    r.route(msg("c", 4), conn, DEST_QUEUE, internal=True)  # type: ignore[arg-type]
    assert r.totals.count == 3


def test_the_dmq_makes_room_for_a_dead_message_by_dropping_its_oldest() -> None:
    r = MessageRouter()
    conn = Conn(1)
    r.dmq.attributes["maxNumMsgs"] = 2
    _queue(r, "q", maxNumMsgs=1, limitBehavior="REMOVE_OLDEST")
    send(r, conn, "q", 1, 2, 3, 4)
    assert pending(r, "q") == [b"\x04"]
    assert dmq_bodies(r) == [b"\x02", b"\x03"]  # 1 was pushed out of the DMQ
    assert r.totals.count == 3


def test_expired_messages_are_reclaimed_to_the_dmq_or_dropped() -> None:
    r = MessageRouter()
    conn = Conn(1)
    _queue(r, "keep")
    _queue(r, "drop", useDMQ=False)
    send(r, conn, "keep", 1, expiration=1)
    send(r, conn, "keep", 2)
    send(r, conn, "drop", 3, expiration=1)
    report = sorted(r.limits.reclaim_expired_report())
    assert report == [("drop", False, 0, 1), ("keep", False, 1, 0)]
    assert pending(r, "keep") == [b"\x02"] and pending(r, "drop") == []
    assert dmq_bodies(r) == [b"\x01"] and dmq_reasons(r) == [dmq.EXPIRED]
    assert r.queues["keep"].stats.expired == 1


def test_topic_limits_count_a_copy_per_subscription() -> None:
    r = MessageRouter()
    conn = Conn(1)
    t = r.ensure_destination("t", DEST_TOPIC, None)
    t.attributes.update(maxNumMsgs=3)
    s1, s2 = session(r, Conn(2)), session(r, Conn(3))
    for s in (s1, s2):
        r.add_consumer(s, "t", DEST_TOPIC)
        s.stopped = True  # nothing delivered: the copies wait
    send(r, conn, "t", 1, topic=True)
    assert t.msg_count == 2
    send(r, conn, "t", 2, topic=True)
    assert _refused(r, conn, "t", 3, topic=True).status == Status.RESOURCE_FULL


def test_a_limit_changed_any_way_holds_for_the_next_send() -> None:
    # The limits every send reads are kept between changes of the attributes
    # (Destination.send_limits): each way of changing them must count as a change.
    r = MessageRouter(RouterSettings())
    conn = Conn(1)
    q = _queue(r, "changing")
    send(r, conn, "changing", 1)
    q.attributes["maxNumMsgs"] = 1
    assert _refused(r, conn, "changing", 2).status == Status.RESOURCE_FULL
    del q.attributes["maxNumMsgs"]
    send(r, conn, "changing", 3)
    q.attributes.update(maxBytesPerMsg=1)
    assert _refused(r, conn, "changing", 4).status == Status.ENTITY_TOO_LARGE
    q.attributes.pop("maxBytesPerMsg")
    send(r, conn, "changing", 5)
    q.attributes |= {"maxTotalMsgBytes": 1}
    assert _refused(r, conn, "changing", 6).status == Status.RESOURCE_FULL
    q.attributes.clear()
    q.attributes.setdefault("maxNumMsgs", 3)
    assert _refused(r, conn, "changing", 7).status == Status.RESOURCE_FULL
    q.attributes.popitem()
    send(r, conn, "changing", 8)
    assert pending(r, "changing") == [b"\x01", b"\x03", b"\x05", b"\x08"]
