"""The router's plug-in points: a delivery target that is not a client's consumer (what
a cluster link will attach) and message observers (what report generators will add),
driven through a real in-process MessageRouter."""

from __future__ import annotations

import time

import pytest

from broker.core import dmq
from broker.core.dispatch import DeliveryTarget
from broker.core.errors import RouterError
from broker.core.message import Entry, Message
from broker.core.observers import MessageObserver
from broker.core.router import MessageRouter
from broker.core.session import Session
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, FLAG_Q, PacketType, Status

pytestmark = pytest.mark.fast


class Link:
    """A connection that can always take deliveries and keeps what it was sent."""

    render_delivery = None  # JMQ deliveries

    def __init__(self, lid: int) -> None:
        self.id = lid
        self.client_id: str | None = None
        self.sent: list[bytes] = []

    def can_deliver(self) -> bool:
        return True

    def send_delivery(self, buf: bytearray) -> None:
        self.sent.append(bytes(buf))


class RemoteConsumer:
    """A consumer on another broker, as a cluster link would present it: it takes
    entries while it has credit and keeps them as forwarded."""

    def __init__(self, link: Link, credit: int) -> None:
        self.link = link
        self.selector = None
        self.credit = credit
        self.forwarded: list[Entry] = []

    def ready(self) -> bool:
        return self.credit > 0

    def deliver(self, entry: Entry) -> None:
        entry.count += 1
        entry.consumer = self
        self.credit -= 1
        self.forwarded.append(entry)


class Recorder(MessageObserver):
    """Records every message event with the message's body."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def arrived(self, dest, msg) -> None:
        self.seen.append(("arrived", dest.name, body(msg)))

    def delivered(self, entry) -> None:
        self.seen.append(("delivered", entry.owner.name, body(entry.msg), entry.count))

    def consumed(self, entry) -> None:
        self.seen.append(("consumed", entry.owner.name, body(entry.msg)))

    def expired(self, entry, to_dmq) -> None:
        self.seen.append(("expired", entry.owner.name, body(entry.msg), to_dmq))

    def dead(self, entry, reason, to_dmq) -> None:
        self.seen.append(("dead", entry.owner.name, body(entry.msg), reason, to_dmq))

    def rejected(self, dest, msg, why) -> None:
        self.seen.append(("rejected", dest.name, body(msg), why))


def body(msg: Message) -> bytes:
    return parse_packet(msg.raw).body


def message(dest: str, n: int, *, queue: bool = True, expiration: int = 0) -> Message:
    raw = build_packet(
        PacketType.BYTES_MESSAGE,
        body=bytes([n]),
        flags=FLAG_Q if queue else 0,
        fields={1: dest},
        sequence=n,
        timestamp=int(time.time() * 1000),
        expiration=expiration,
    )
    return Message(parse_packet(raw), dest, 0)


def test_a_remote_consumer_takes_queue_messages_while_it_has_credit() -> None:
    r = MessageRouter()
    link = Link(7)
    q = r.ensure_destination("orders", DEST_QUEUE, None)
    remote = RemoteConsumer(link, credit=2)
    target: DeliveryTarget = remote
    assert q.attach(target)
    for n in range(3):
        r.route(message("orders", n), link, DEST_QUEUE)  # type: ignore[arg-type]
    assert [body(e.msg) for e in remote.forwarded] == [b"\x00", b"\x01"]
    assert [e.count for e in remote.forwarded] == [1, 1]
    assert q.msg_count == 3 and q.dq.count == 1
    # The remote broker's acknowledgement settles the copy like a local consumer's.
    r.consumed(remote.forwarded[0])
    assert q.msg_count == 2 and r.totals.count == 2
    # Detached, it gets nothing more; the pending message waits for the next consumer.
    remote.credit = 5
    q.detach(target)
    r.route(message("orders", 3), link, DEST_QUEUE)  # type: ignore[arg-type]
    assert len(remote.forwarded) == 2 and q.dq.count == 2


def test_a_remote_consumer_shares_a_topic_subscription_with_a_local_one() -> None:
    r = MessageRouter()
    link = Link(1)
    r.subs.set_client_id(link, "c1", False, None)  # type: ignore[arg-type]
    sess: Session = r.create_session(link, 2)  # type: ignore[arg-type]
    local = r.add_consumer(sess, "prices", DEST_TOPIC, share=True, durable_name="d")
    remote = RemoteConsumer(Link(2), credit=10)
    assert local.subscription is not None
    local.subscription.attach(remote)
    for n in range(4):
        r.route(message("prices", n, queue=False), link, DEST_TOPIC)  # type: ignore[arg-type]
    # Round-robin between the two consumers of the one subscription.
    assert [body(e.msg) for e in remote.forwarded] == [b"\x01", b"\x03"]
    assert len(link.sent) == 2 and len(sess.unacked) == 2


def test_observers_hear_arrival_delivery_consumption_expiry_and_death() -> None:
    r = MessageRouter()
    rec = Recorder()
    r.events.add(rec)
    link = Link(3)
    sess: Session = r.create_session(link, 2)  # type: ignore[arg-type]
    r.route(message("q", 1), link, DEST_QUEUE)  # type: ignore[arg-type]
    cons = r.add_consumer(sess, "q", DEST_QUEUE)
    r.redispatch([sess])
    assert rec.seen == [("arrived", "q", b"\x01"), ("delivered", "q", b"\x01", 1)]
    r.acks.acknowledge(sess, [(cons.id, k[1]) for k in sess.unacked])
    assert rec.seen[-1] == ("consumed", "q", b"\x01")

    rec.seen.clear()
    r.route(message("q", 2), link, DEST_QUEUE)  # type: ignore[arg-type]
    key = next(iter(sess.unacked))
    r.acks.acknowledge(sess, [key], ack_type=2)  # the client says: dead
    assert rec.seen[-1] == ("dead", "q", b"\x02", dmq.UNDELIVERABLE, True)
    assert r.dmq.msg_count == 1

    rec.seen.clear()
    r.remove_consumer(cons, None)
    r.route(message("q", 3, expiration=1), link, DEST_QUEUE)  # type: ignore[arg-type]
    report = r.limits.reclaim_expired_report()
    assert report == [("q", False, 1, 0)]
    assert rec.seen == [("arrived", "q", b"\x03"), ("expired", "q", b"\x03", True)]


def test_a_limit_rejection_and_an_eviction_reach_observers_and_the_drop_log() -> None:
    r = MessageRouter()
    rec = Recorder()
    r.events.add(rec)
    link = Link(4)
    full = r.ensure_destination("full", DEST_QUEUE, None)
    full.attributes.update(maxNumMsgs=1, limitBehavior="REJECT_NEWEST")
    r.route(message("full", 1), link, DEST_QUEUE)  # type: ignore[arg-type]
    with pytest.raises(RouterError) as refused:
        r.route(message("full", 2), link, DEST_QUEUE)  # type: ignore[arg-type]
    assert refused.value.status == Status.RESOURCE_FULL
    assert rec.seen[-1][:3] == ("rejected", "full", b"\x02")
    assert full.stats.rejected == 1
    oldest = r.ensure_destination("oldest", DEST_QUEUE, None)
    oldest.attributes.update(maxNumMsgs=1, limitBehavior="REMOVE_OLDEST")
    r.route(message("oldest", 1), link, DEST_QUEUE)  # type: ignore[arg-type]
    r.route(message("oldest", 2), link, DEST_QUEUE)  # type: ignore[arg-type]
    assert rec.seen[-2] == ("dead", "oldest", b"\x01", dmq.REMOVED_OLDEST, True)
    assert rec.seen[-1] == ("arrived", "oldest", b"\x02")
    # The drop log is itself an observer: both destinations' drops are pending or logged.
    assert set(r.drops._last) == {"queue full", "queue oldest"}


def test_an_observer_registers_only_the_events_it_defines_and_can_leave() -> None:
    r = MessageRouter()
    # The drop log listens to rejections and deaths only: deliveries cost one check.
    assert not r.events.arrived and not r.events.delivered and not r.events.consumed
    assert len(r.events.rejected) == 1 and len(r.events.dead) == 1

    class Expiries:
        def __init__(self) -> None:
            self.n = 0

        def expired(self, entry, to_dmq) -> None:
            self.n += 1

    obs = Expiries()  # duck-typed, no subclassing
    r.events.add(obs)
    assert len(r.events.expired) == 1 and not r.events.delivered
    r.route(message("q", 1, expiration=1), Link(5), DEST_QUEUE)  # type: ignore[arg-type]
    r.reclaim_expired()
    assert obs.n == 1
    r.events.remove(obs)
    assert not r.events.expired
    r.route(message("q", 2, expiration=1), Link(5), DEST_QUEUE)  # type: ignore[arg-type]
    r.reclaim_expired()
    assert obs.n == 1


def test_a_failing_observer_does_not_stop_routing() -> None:
    r = MessageRouter()

    class Broken(MessageObserver):
        def arrived(self, dest, msg) -> None:
            raise RuntimeError("report generator bug")

    r.events.add(Broken())
    link = Link(6)
    sess: Session = r.create_session(link, 2)  # type: ignore[arg-type]
    r.add_consumer(sess, "q", DEST_QUEUE)
    r.route(message("q", 1), link, DEST_QUEUE)  # type: ignore[arg-type]
    assert len(link.sent) == 1 and len(sess.unacked) == 1
