"""Local consumers as the other brokers hear of them: interest records (G_NEW_INTEREST)
and, for durable and shared subscriptions, the subscription's own interest followed by
a G_DURABLE_ATTACH per consumer; :class:`LocalInterests` sends them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.core.destination import QueueDestination
from broker.core.session import Consumer
from broker.protocol import gpacket as gp

from .config import PRIVATE_PREFIXES

if TYPE_CHECKING:
    from broker.core.destination import Subscription
    from broker.core.dispatch import DeliveryTarget
    from broker.core.router import MessageRouter

    from .link_driver import BrokerLink
    from .peers import Peers


def shared(cons: Consumer) -> bool:
    """Whether the other brokers hear of ``cons`` (not on a broker-private destination
    or one an administrator made local only)."""
    dest = cons.destination
    return not dest.name.startswith(PRIVATE_PREFIXES) and not dest.attributes.get("isLocalOnly")


def consumer_uid(me: gp.BrokerAddress, cons: Consumer) -> gp.ConsumerUID:
    """A local consumer's ConsumerUID in the cluster."""
    return gp.ConsumerUID(cons.id, cons.link.id, me)


def interest_packet(me: gp.BrokerAddress, consumers: list[Consumer]) -> gp.GPacket:
    """One G_NEW_INTEREST announcing ``consumers`` (plain records)."""
    w = gp.BodyWriter()
    props: dict[str, object] = {"C": len(consumers)}
    for c in consumers:
        dest = c.destination
        sub = c.subscription
        durable = sub.durable_key[1] if sub is not None and sub.durable_key else None
        w.int64(gp.INTEREST_RECORD_VERSION).utf(dest.name)
        w.boolean(True)
        consumer_uid(me, c).write(w)
        client_id = c.link.client_id or None
        w.boolean(client_id is not None)
        if client_id is not None:
            w.utf(client_id)
        w.boolean(durable is not None)
        if durable is not None:
            w.utf(durable)
        selector = c.selector if sub is None else sub.selector
        text = selector.text if selector is not None else None
        w.boolean(text is not None)
        if text is not None:
            w.utf(text)
        w.boolean(dest.is_queue).boolean(c.no_local).boolean(True)
        share = sub.share if sub is not None else None
        shared_name = None
        if share == "jms" and sub is not None and sub.shared_key is not None:
            shared_name = sub.shared_key[2]
        # A subscription's consumer says how many may be active (OpenMQ reads -1 as
        # shared, 1 as a plain durable); a queue consumer's position (core/
        # positions.py), 0 for a topic's; JMS 2.0 shared and its name.
        if share is not None:
            w.boolean(True).int32(-1)
        elif durable is not None:
            w.boolean(True).int32(1)
        else:
            w.boolean(False)
        position = 0
        if isinstance(dest, QueueDestination):
            position = dest.positions.get(c, 0)
            props[f"{c.id}:positions"] = True  # ours: its moves up are announced
        w.int32(position).boolean(share == "jms").boolean(shared_name is not None)
        if shared_name is not None:
            w.utf(shared_name)
        if share == "mq":
            props[f"{c.id}:mqshare"] = True  # ours: OpenMQ's JMQShare
        props[f"{c.id}:prefetch"] = c.prefetch if c.prefetch > 0 else -1
        if dest.is_temporary:
            # Ours: the receiver makes the temporary destination (so it can send to it).
            props[f"{c.id}:temporary"] = True
    return gp.GPacket(gp.G_NEW_INTEREST, props, w.bytes())


# A durable or shared subscription (JMS 2.0, or OpenMQ's JMQShare) is an interest of its
# own (a record with the subscription's ConsumerUID, its names and a maximum of active
# consumers: -1 when shared), and each consumer attaching to it follows in a
# G_DURABLE_ATTACH (naming a JMQShare non-durable one by client ID and topic alone,
# without ``N`` or ``NDN``); the home broker delivers to the subscription and the
# consumer's broker acknowledges in the name of the consumer that got the message.  A
# consumer leaving is G_INTEREST_UPDATE T=2 of its UID; the subscription's own interest
# stays until it is unsubscribed (durable) or loses its last consumer (shared non-durable).


def announced_as_subscription(cons: Consumer) -> Subscription | None:
    """The durable or shared subscription ``cons`` is announced under, if any."""
    sub = cons.subscription
    if sub is not None and (sub.durable_key is not None or sub.share is not None):
        return sub
    return None


def subscription_packets(
    me: gp.BrokerAddress, uid: gp.ConsumerUID, sub: Subscription, consumers: list[Consumer]
) -> list[gp.GPacket]:
    """The subscription's interest (under its ``uid``), then one G_DURABLE_ATTACH per
    consumer."""
    durable = sub.durable_key[1] if sub.durable_key is not None else None
    client_id = sub.durable_key[0] if sub.durable_key is not None else None
    if client_id is None and consumers:
        client_id = consumers[0].link.client_id or None
    shared_name = sub.shared_key[2] if sub.share == "jms" and sub.shared_key else None
    if durable is not None:
        shared_name = None  # a shared durable is named by its durable name
    w = gp.BodyWriter()
    write_record(
        w,
        sub.topic.name,
        uid,
        client_id,
        durable,
        sub.selector_text,
        False,
        sub.no_local,
        -1 if sub.share is not None else 1,
        sub.share == "jms",
        shared_name,
    )
    out = [gp.GPacket(gp.G_NEW_INTEREST, {"C": 1, f"{uid.consumer_id}:prefetch": 1}, w.bytes())]
    for c in consumers:
        w = gp.BodyWriter()
        write_record(
            w,
            sub.topic.name,
            consumer_uid(me, c),
            None,
            None,
            None,
            False,
            c.no_local,
            None,
            False,
            None,
        )
        props: dict[str, object] = {
            "I": client_id or "",
            "allowsNonDurable": True,
            f"{c.id}:prefetch": c.prefetch if c.prefetch > 0 else -1,
        }
        if durable is not None:
            props["N"] = durable
        elif sub.share == "jms":
            props["NDN"] = shared_name or ""
        out.append(gp.GPacket(gp.G_DURABLE_ATTACH, props, w.bytes()))
    return out


def write_record(
    w: gp.BodyWriter,
    dest: str,
    uid: gp.ConsumerUID,
    client_id: str | None,
    durable: str | None,
    selector: str | None,
    is_queue: bool,
    no_local: bool,
    max_active: int | None,
    jms_shared: bool,
    shared_name: str | None,
    position: int = -1,
) -> None:
    """One interest record as OpenMQ writes it (lock position -1: none)."""
    w.int64(gp.INTEREST_RECORD_VERSION).utf(dest).boolean(True)
    uid.write(w)
    for text in (client_id, durable, selector):
        w.boolean(text is not None)
        if text is not None:
            w.utf(text)
    w.boolean(is_queue).boolean(no_local).boolean(True)
    w.boolean(max_active is not None)
    if max_active is not None:
        w.int32(max_active)
    w.int32(position).boolean(jms_shared).boolean(shared_name is not None)
    if shared_name is not None:
        w.utf(shared_name)


class LocalInterests:
    """What the other brokers hear of this broker's consumers (a part of
    :class:`~broker.cluster.service.ClusterService`): every local consumer when a link
    comes up, each one coming and going, a backup's move up, and the ConsumerUIDs of
    the durable and shared subscriptions announced as interests of their own."""

    def __init__(self, router: MessageRouter, peers: Peers) -> None:
        self.router = router
        self.peers = peers
        self.me = peers.cfg.me
        # Local durable and shared subscriptions' ConsumerUIDs and the way back from a
        # UID's id (InboundOrigin: what a home broker sent for a subscription).
        self.sub_uids: dict[Subscription, gp.ConsumerUID] = {}
        self.uid_subs: dict[int, Subscription] = {}

    def announce_all(self, link: BrokerLink) -> None:
        """Every local consumer the others hear of, to a broker that just linked."""
        cons = [c for c in self.router.local_consumers() if shared(c)]
        if cons:
            self._announce(link, cons)

    def sub_uid(self, sub: Subscription) -> gp.ConsumerUID:
        """The subscription's ConsumerUID in the cluster (made the first time it is asked)."""
        uid = self.sub_uids.get(sub)
        if uid is None:
            uid = gp.ConsumerUID(self.router.uids.next(), 0, self.me)
            self.sub_uids[sub] = uid
            self.uid_subs[uid.consumer_id] = sub
        return uid

    def _forget_sub(self, sub: Subscription) -> gp.ConsumerUID | None:
        uid = self.sub_uids.pop(sub, None)
        if uid is not None:
            self.uid_subs.pop(uid.consumer_id, None)
        return uid

    def forget_durable(self, key: tuple[str | None, str]) -> None:
        """A local durable subscription was removed: its UID as an announced
        subscription goes with it."""
        for sub in [s for s in self.sub_uids if s.durable_key == key]:
            uid = self.sub_uids.pop(sub)
            self.uid_subs.pop(uid.consumer_id, None)

    def _announce(self, link: BrokerLink, consumers: list[Consumer]) -> None:
        """Every consumer of ``consumers`` to ``link``: plain ones in one G_NEW_INTEREST,
        subscriptions' consumers under their subscription."""
        plain = []
        by_sub: dict[Subscription, list[Consumer]] = {}
        for c in consumers:
            sub = announced_as_subscription(c)
            if sub is None:
                plain.append(c)
            else:
                by_sub.setdefault(sub, []).append(c)
        if plain:
            link.send(interest_packet(self.me, plain))
        for sub, cons in by_sub.items():
            for pkt in subscription_packets(self.me, self.sub_uid(sub), sub, cons):
                link.send(pkt)

    def announce_position(
        self, dest: QueueDestination, target: DeliveryTarget, position: int
    ) -> None:
        """A local backup moved up to ``position`` (its lock taken): tell every broker."""
        if not isinstance(target, Consumer) or not self.peers.links:
            return
        w = gp.BodyWriter()
        consumer_uid(self.me, target).write(w)
        props: dict[str, object] = {
            "C": 1,
            "T": gp.INTEREST_NEW_PRIMARY,
            f"{target.id}:position": position,
        }
        self.peers.broadcast(gp.GPacket(gp.G_INTEREST_UPDATE, props, w.bytes()))

    def consumer_event(self, what: str, cons: Consumer) -> None:
        """A router consumer listener: a local consumer came or went; the other brokers
        hear of it."""
        if not shared(cons):
            return
        sub = cons.subscription
        announced = announced_as_subscription(cons)
        if not self.peers.links:
            if what != "added" and announced is not None and announced.durable_key is None:
                if not announced.queue.consumers:
                    self._forget_sub(announced)
            return
        if what == "added":
            for link in self.peers.links.values():
                self._announce(link, [cons])
            return
        w = gp.BodyWriter()
        consumer_uid(self.me, cons).write(w)
        count = 1
        if announced is not None:
            kind = gp.INTEREST_REM
            if announced.durable_key is None and not announced.queue.consumers:
                # A shared non-durable subscription goes with its last consumer.
                gone = self._forget_sub(announced)
                if gone is not None:
                    gone.write(w)
                    count = 2
        else:
            detach = sub is not None and sub.durable_key is not None
            kind = gp.INTEREST_DURABLE_DETACH if detach else gp.INTEREST_REM
        self.peers.broadcast(gp.GPacket(gp.G_INTEREST_UPDATE, {"C": count, "T": kind}, w.bytes()))


__all__ = [
    "LocalInterests",
    "announced_as_subscription",
    "consumer_uid",
    "interest_packet",
    "shared",
    "subscription_packets",
    "write_record",
]
