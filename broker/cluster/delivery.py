"""The cluster service's remote delivery: local consumers announced to the peers
(interests), remote consumers attached here (remote.py), messages forwarded to them,
messages received for local consumers, and the acknowledgements going home.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.core import dmq
from broker.core.destination import QueueDestination, TopicDestination
from broker.core.errors import RouterError, now_ms
from broker.core.message import Entry, Message
from broker.core.selector import SelectorError, compile_selector
from broker.core.session import Consumer
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong
from broker.protocol.packet import Packet
from broker.protocol.properties import encode_properties
from broker.protocol.sysmsgid import SYSMSGID_SIZE
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
)

from .config import PRIVATE_PREFIXES
from .link import BrokerLink
from .remote import InboundOrigin, RemoteConsumer
from .remotetxn import RemoteTxnRules, ack_payload

if TYPE_CHECKING:
    from broker.core.destination import Subscription
    from broker.core.dispatch import DeliveryTarget

log = logging.getLogger("broker.cluster")
_DEAD_REASONS = frozenset(
    (dmq.EXPIRED, dmq.UNDELIVERABLE, dmq.REMOVED_OLDEST, dmq.REMOVED_LOW_PRIORITY, dmq.ERROR)
)

# The acknowledgements that need no transaction.
_PLAIN_ACKS = frozenset(
    (
        gp.ACK_SENT,
        gp.ACK_IGNORED,
        gp.ACK_DELIVERED,
        gp.ACK_ACKNOWLEDGED,
        gp.ACK_UNDELIVERABLE,
        gp.ACK_DEAD,
    )
)


class DeliveryRules(RemoteTxnRules):
    """The interests and remote-delivery part of
    :class:`~broker.cluster.service.ClusterService` (a mixin)."""

    # Its state, made in ClusterService.__init__ (declared here for the type checker).
    _acks: dict[tuple, tuple[BrokerLink, list]]
    _acks_scheduled: bool
    _pending_timer: asyncio.TimerHandle | None

    # -- interests -------------------------------------------------------------------

    @staticmethod
    def _shared(cons: Consumer) -> bool:
        dest = cons.destination
        return not dest.name.startswith(PRIVATE_PREFIXES) and not dest.attributes.get("isLocalOnly")

    def _uid(self, cons: Consumer) -> gp.ConsumerUID:
        return gp.ConsumerUID(cons.id, cons.link.id, self.cfg.me)

    def _interest_packet(self, consumers: list[Consumer]) -> gp.GPacket:
        w = gp.BodyWriter()
        props: dict[str, object] = {"C": len(consumers)}
        for c in consumers:
            dest = c.destination
            sub = c.subscription
            durable = sub.durable_key[1] if sub is not None and sub.durable_key else None
            w.int64(gp.INTEREST_RECORD_VERSION).utf(dest.name)
            w.boolean(True)
            self._uid(c).write(w)
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

    # -- subscriptions as OpenMQ announces them ---------------------------------------
    #
    # A durable or shared subscription (JMS 2.0, or OpenMQ's JMQShare) is an interest of
    # its own (a record with the subscription's ConsumerUID, its names and a maximum of
    # active consumers: -1 when shared), and each consumer attaching to it follows in a
    # G_DURABLE_ATTACH (naming a JMQShare non-durable one by client ID and topic alone,
    # without ``N`` or ``NDN``); the home broker
    # delivers to the subscription and the consumer's broker acknowledges in the name of
    # the consumer that got the message.  A consumer leaving is G_INTEREST_UPDATE T=2 of
    # its UID; the subscription's own interest stays until it is unsubscribed (durable)
    # or loses its last consumer (shared non-durable).

    @staticmethod
    def _announced_as_subscription(cons: Consumer) -> Subscription | None:
        sub = cons.subscription
        if sub is not None and (sub.durable_key is not None or sub.share is not None):
            return sub
        return None

    def _sub_uid(self, sub: Subscription) -> gp.ConsumerUID:
        """The subscription's ConsumerUID in the cluster (made the first time it is asked)."""
        uid = self.sub_uids.get(sub)
        if uid is None:
            uid = gp.ConsumerUID(self.router.uids.next(), 0, self.cfg.me)
            self.sub_uids[sub] = uid
            self.uid_subs[uid.consumer_id] = sub
        return uid

    def _forget_sub(self, sub: Subscription) -> gp.ConsumerUID | None:
        uid = self.sub_uids.pop(sub, None)
        if uid is not None:
            self.uid_subs.pop(uid.consumer_id, None)
        return uid

    def _subscription_packets(
        self, sub: Subscription, consumers: list[Consumer]
    ) -> list[gp.GPacket]:
        """The subscription's interest, then one G_DURABLE_ATTACH per consumer."""
        uid = self._sub_uid(sub)
        durable = sub.durable_key[1] if sub.durable_key is not None else None
        client_id = sub.durable_key[0] if sub.durable_key is not None else None
        if client_id is None and consumers:
            client_id = consumers[0].link.client_id or None
        shared_name = sub.shared_key[2] if sub.share == "jms" and sub.shared_key else None
        if durable is not None:
            shared_name = None  # a shared durable is named by its durable name
        w = gp.BodyWriter()
        _write_record(
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
            _write_record(
                w,
                sub.topic.name,
                self._uid(c),
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

    def _announce(self, link: BrokerLink, consumers: list[Consumer]) -> None:
        """Every consumer of ``consumers`` to ``link``: plain ones in one G_NEW_INTEREST,
        subscriptions' consumers under their subscription."""
        plain = []
        by_sub: dict[Subscription, list[Consumer]] = {}
        for c in consumers:
            sub = self._announced_as_subscription(c)
            if sub is None:
                plain.append(c)
            else:
                by_sub.setdefault(sub, []).append(c)
        if plain:
            link.send(self._interest_packet(plain))
        for sub, cons in by_sub.items():
            for pkt in self._subscription_packets(sub, cons):
                link.send(pkt)

    def _announce_position(
        self, dest: QueueDestination, target: DeliveryTarget, position: int
    ) -> None:
        """A local backup moved up to ``position`` (its lock taken): tell every broker."""
        if not isinstance(target, Consumer) or not self.links:
            return
        w = gp.BodyWriter()
        self._uid(target).write(w)
        props: dict[str, object] = {
            "C": 1,
            "T": gp.INTEREST_NEW_PRIMARY,
            f"{target.id}:position": position,
        }
        self._broadcast(gp.GPacket(gp.G_INTEREST_UPDATE, props, w.bytes()))

    def _consumer_event(self, what: str, cons: Consumer) -> None:
        if not self._shared(cons):
            return
        sub = cons.subscription
        if what == "added" and sub is not None and sub.durable_key is not None:
            if sub.durable_key not in self._known_durables:
                self._known_durables.add(sub.durable_key)
                rec = self._interest_packet([cons])
                rec.props.update(
                    N=sub.durable_key[1],
                    I=sub.durable_key[0] or "",
                    shared=sub.share is not None,
                    jmsshared=sub.share == "jms",
                )
                self._record(rec)
        announced = self._announced_as_subscription(cons)
        if what == "added" and announced is not None:
            # Messages its home brokers sent the subscription while it had no consumer:
            # on the next turn, after the consumer's ADD_CONSUMER_REPLY (a client drops a
            # delivery for a consumer ID its reply has not told it yet).
            sub_id = self._sub_uid(announced).consumer_id
            for (_link, cid), origin in list(self.inbound.items()):
                if cid == sub_id and origin.pending:
                    self.retry_pending(origin)
        if not self.links:
            if what != "added" and announced is not None and announced.durable_key is None:
                if not announced.queue.consumers:
                    self._forget_sub(announced)
            return
        if what == "added":
            for link in self.links.values():
                self._announce(link, [cons])
            return
        w = gp.BodyWriter()
        self._uid(cons).write(w)
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
        self._broadcast(gp.GPacket(gp.G_INTEREST_UPDATE, {"C": count, "T": kind}, w.bytes()))

    def _new_interest(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        count = pkt.props.get("C", 0)
        if not isinstance(count, int) or count < 0 or count > 100000:
            raise gp.GPacketError(f"G_NEW_INTEREST count {count!r}")
        r = gp.BodyReader(pkt.payload)
        for _ in range(count):
            rec = gp.read_interest(r)
            uid = rec["uid"]
            rec["temporary"] = uid is not None and bool(
                pkt.props.get(f"{uid.consumer_id}:temporary")
            )
            rec["mq_share"] = uid is not None and bool(pkt.props.get(f"{uid.consumer_id}:mqshare"))
            rec["told"] = uid is not None and bool(pkt.props.get(f"{uid.consumer_id}:positions"))
            if rec["max_active"] not in (None, 1) and not rec["jms_shared"]:
                rec["mq_share"] = True
            if uid is None:
                raise gp.GPacketError("interest without a consumer")
            if uid.broker != link.address:
                # OpenMQ announces a subscription it knows under another broker's consumer
                # (ours, when one of our consumers made it): that broker's own interest
                # stands for it already.
                log.debug("interest of %s relayed by %s not taken", uid.broker, link.address)
                continue
            window = pkt.props.get(f"{uid.consumer_id}:prefetch", -1)
            try:
                self._add_remote(link, uid, rec, window if isinstance(window, int) else -1)
            except (RouterError, SelectorError) as exc:
                log.warning(
                    "interest of %s on %s %s not taken: %s",
                    uid.broker,
                    "queue" if rec["queue"] else "topic",
                    rec["dest"],
                    exc,
                )

    def _add_remote(self, link: BrokerLink, uid: gp.ConsumerUID, rec: dict, window: int) -> None:
        key = (link, uid.consumer_id)
        if key in self.remotes:
            return
        router = self.router
        dtype = DEST_QUEUE if rec["queue"] else DEST_TOPIC
        selector = compile_selector(rec["selector"]) if rec["selector"] else None
        dest = router.lookup(rec["dest"], dtype)
        rc_probe = RemoteConsumer(
            self, link, uid, None, None, selector, window, rec["client_id"], rec["durable"]
        )
        rc_probe.shared_name = rec["shared_name"]
        if dest is None:
            if rec["temporary"]:
                dest = router.create_destination(rec["dest"], dtype | DEST_TEMP, rc_probe.link)
            else:
                dest = router.ensure_destination(rec["dest"], dtype, None)
        if dest.attributes.get("isLocalOnly"):
            log.info(
                "interest of %s on %s not taken: the destination is local only",
                uid.broker,
                dest.name,
            )
            return
        rc = rc_probe
        rc.destination = dest
        if isinstance(dest, QueueDestination):
            rc.queue = dest.dq
            # At the position its broker locked for it (a stock broker's too).
            if not dest.attach(rc, rec.get("position"), told=bool(rec.get("told"))):
                raise RouterError(500, "queue has its maximum of active consumers")
        else:
            assert isinstance(dest, TopicDestination)
            mode = "jms" if rec["jms_shared"] else "mq" if rec["mq_share"] else None
            # A shared or durable subscription is one per cluster: the remote consumer
            # joins it, under the rules a local consumer joins by.
            sub = router.subs.remote_subscription(
                rc.link,
                dest,
                selector,
                rec["no_local"],
                rec["durable"],
                mode,
                rec["shared_name"] if mode == "jms" else None,
            )
            rc.subscription = sub
            rc.queue = sub.queue
            if (rec["durable"] is not None or mode is not None) and not rec.get("attach"):
                # The subscription's own interest: it takes messages only while a
                # consumer is attached to it (G_DURABLE_ATTACH); meanwhile they wait here.
                rc.announced = True
                self.remotes[key] = rc
                return
            sub.attach(rc)
        self.remotes[key] = rc
        rc.queue.dispatch(now_ms())

    def _durable_attach(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """G_DURABLE_ATTACH: OpenMQ announces a durable or shared subscription as an
        interest of its own (G_NEW_INTEREST), then each consumer that attaches to it
        with this packet; its acknowledgements name the consumer, not the subscription."""
        name = pkt.props.get("N") or pkt.props.get("NDN")
        cid = pkt.props.get("I")
        client_id = cid if isinstance(cid, str) and cid else None
        rec = gp.read_interest(gp.BodyReader(pkt.payload))
        uid = rec["uid"]
        if uid is None:
            raise gp.GPacketError("G_DURABLE_ATTACH without a consumer")
        if not isinstance(name, str):
            if client_id is None:
                raise gp.GPacketError("G_DURABLE_ATTACH without a subscription name or client ID")
            self._mq_share_attach(link, pkt, uid, rec, client_id)
            return
        for key, rc in self.remotes.items():
            if key[0] is link and name in (rc.durable_name, rc.shared_name):
                if rc.durable_name is not None and rc.link.client_id != client_id:
                    continue
                self.attached[link, uid.consumer_id] = key
                window = pkt.props.get(f"{uid.consumer_id}:prefetch")
                rc.set_attached(uid.consumer_id, window if isinstance(window, int) else -1)
                sub = rc.subscription
                if sub is not None and rc not in sub.queue.consumers:
                    sub.attach(rc)
                rc.queue.dispatch(now_ms())
                return
        # A subscription this broker announced first, which the peer relays under our
        # UID: its consumer joins our subscription as a consumer of its own.
        durable = pkt.props.get("N")
        if isinstance(durable, str):
            local = self.router.subs.find_durable((client_id, durable))
        else:
            local = self.router.subs.find_shared(("jms", client_id, name))
        if local is None or local not in self.sub_uids:
            log.warning(
                "consumer of %s attached to subscription %s, which it never announced",
                link.address,
                name,
            )
            return
        rec.update(
            client_id=client_id,
            durable=durable if isinstance(durable, str) else None,
            selector=local.selector_text,
            jms_shared=local.share == "jms",
            mq_share=local.share == "mq",
            shared_name=name if local.share == "jms" else None,
            temporary=False,
            attach=True,
        )
        window = pkt.props.get(f"{uid.consumer_id}:prefetch", -1)
        try:
            self._add_remote(link, uid, rec, window if isinstance(window, int) else -1)
        except (RouterError, SelectorError) as exc:
            log.warning("consumer of %s not attached to %s: %s", link.address, name, exc)

    def _mq_share_attach(
        self, link: BrokerLink, pkt: gp.GPacket, uid: gp.ConsumerUID, rec: dict, client_id: str
    ) -> None:
        """A consumer attaching to a JMQShare non-durable subscription: known by client ID
        and topic (the attach names no selector: the first such subscription is it)."""
        topic = rec["dest"]
        window = pkt.props.get(f"{uid.consumer_id}:prefetch", -1)
        window = window if isinstance(window, int) else -1
        for key, rc in self.remotes.items():
            sub = rc.subscription
            if (
                key[0] is link
                and rc.announced
                and sub is not None
                and sub.share == "mq"
                and sub.durable_key is None
                and rc.link.client_id == client_id
                and sub.topic.name == topic
            ):
                self.attached[link, uid.consumer_id] = key
                rc.set_attached(uid.consumer_id, window)
                if rc not in sub.queue.consumers:
                    sub.attach(rc)
                rc.queue.dispatch(now_ms())
                return
        # Ours, relayed by the peer under our UID: its consumer joins as one of its own.
        dest = self.router.lookup(topic, DEST_TOPIC)
        local = None
        if isinstance(dest, TopicDestination):
            local = next(
                (
                    sub
                    for key, sub in dest.shared.items()
                    if key[:3] == ("mq", client_id, topic) and sub in self.sub_uids
                ),
                None,
            )
        if local is None:
            log.warning(
                "consumer of %s attached to the shared subscription of %s on %s, which it "
                "never announced",
                link.address,
                client_id,
                topic,
            )
            return
        rec.update(
            client_id=client_id,
            durable=None,
            selector=local.selector_text,
            jms_shared=False,
            mq_share=True,
            shared_name=None,
            temporary=False,
            attach=True,
        )
        try:
            self._add_remote(link, uid, rec, window)
        except (RouterError, SelectorError) as exc:
            log.warning("consumer of %s not attached to %s: %s", link.address, topic, exc)

    def _remote_for(self, link: BrokerLink, consumer_id: int) -> RemoteConsumer | None:
        """The remote consumer a peer's acknowledgement names: one announced by its
        interest, or the subscription an attached consumer of it belongs to."""
        rc = self.remotes.get((link, consumer_id))
        if rc is None:
            key = self.attached.get((link, consumer_id))
            if key is not None:
                rc = self.remotes.get(key)
        return rc

    def _remove_remote(self, rc: RemoteConsumer) -> None:
        rc.closed = True
        router = self.router
        sub = rc.subscription
        if sub is not None:
            sub.detach(rc)
        elif isinstance(rc.destination, QueueDestination):
            rc.destination.detach(rc)
        entries = rc.take_inflight()
        if sub is not None and sub.durable_key is None and not sub.queue.consumers:
            router.subs.remove(sub)
        if entries:
            router.acks.return_unacked(None, entries, redelivered=True)
        elif sub is None:
            rc.queue.dispatch(now_ms())

    def _interest_update(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        r = gp.BodyReader(pkt.payload)
        count = pkt.props.get("C", 0)
        if not isinstance(count, int) or count < 0 or count > 100000:
            raise gp.GPacketError(f"G_INTEREST_UPDATE count {count!r}")
        kind = pkt.props.get("T", gp.INTEREST_REM)
        for _ in range(count):
            uid = gp.ConsumerUID.read(r)
            if kind == gp.INTEREST_NEW_PRIMARY:
                # OpenMQ announces every queue consumer, then says it is "primary" (it
                # means nothing: its position says whether it is active).  Ours adds the
                # position a backup moved up to, after taking its lock.
                position = pkt.props.get(f"{uid.consumer_id}:position")
                rc = self.remotes.get((link, uid.consumer_id))
                if (
                    isinstance(position, int)
                    and rc is not None
                    and isinstance(rc.destination, QueueDestination)
                ):
                    rc.destination.moved(rc, position)
                    rc.queue.dispatch(now_ms())
                continue
            sub_key = self.attached.get((link, uid.consumer_id))
            if sub_key is not None:
                # A consumer left a subscription the peer announced: the subscription
                # stays its interest (its broker keeps what it is sent for the next
                # consumer), within its own window again.  The consumer's UID stays
                # known: acknowledgements in its name may still come.
                sub_rc = self.remotes.get(sub_key)
                if sub_rc is not None:
                    sub_rc.set_attached(uid.consumer_id, None)
                    if not sub_rc.attached and sub_rc.subscription is not None:
                        # No consumer left: what is published waits here again (what
                        # it was sent and did not acknowledge is acknowledged later).
                        sub_rc.subscription.detach(sub_rc)
                continue
            rc = self.remotes.pop((link, uid.consumer_id), None)
            if rc is not None:
                self._remove_remote(rc)

    # -- messages ------------------------------------------------------------------

    def _message_data(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        r = gp.BodyReader(pkt.payload)
        count = pkt.props.get("C", 1)
        if not isinstance(count, int) or not 0 < count <= 100000:
            raise gp.GPacketError(f"G_MESSAGE_DATA count {count!r}")
        uids = [gp.ConsumerUID.read(r) for _ in range(count)]
        cpkt = Packet(r.rest())
        dest = cpkt.destination or ""
        msg = Message(cpkt, dest, 0)
        redelivered = bool(pkt.props.get("redelivered"))
        # D: the home broker waits for a "delivered" ack before it sends this consumer
        # more (OpenMQ asks for it on the last message of a consumer's prefetch window).
        notify = pkt.props.get("D") is True
        for uid in uids:
            if uid.broker != self.cfg.me:
                continue
            key = (link, uid.consumer_id)
            origin = self.inbound.get(key)
            if origin is None:
                origin = self.inbound[key] = InboundOrigin(self, link, uid, dest)
            entry = Entry(msg, origin, origin)
            dct = pkt.props.get(f"CUID-DCT:{uid.consumer_id}", 0)  # deliveries before
            entry.count = max(dct if isinstance(dct, int) else 0, 0)
            entry.redelivered = redelivered
            if notify:
                origin.notify.add(msg.key)
            origin.offer(entry)
            if origin.pending:
                self._pending.add(origin)
        if self._pending and self._pending_timer is None:
            self._pending_timer = asyncio.get_running_loop().call_later(0.005, self._flush_pending)

    def retry_pending(self, origin: InboundOrigin) -> None:
        """Hand ``origin``'s pending entries to its consumer as soon as it can take them
        (and home, if it goes first)."""
        self._pending.add(origin)
        if self._pending_timer is None:
            self._pending_timer = asyncio.get_running_loop().call_later(0.005, self._flush_pending)

    def _flush_pending(self) -> None:
        self._pending_timer = None
        for origin in list(self._pending):
            origin.dispatch(now_ms())
            if not origin.pending or origin.waiting:
                self._pending.discard(origin)
        if self._pending:
            self._pending_timer = asyncio.get_running_loop().call_later(0.005, self._flush_pending)

    def send_ack(
        self,
        link: BrokerLink,
        uid: gp.ConsumerUID,
        keys: list[bytes],
        ack_type: int,
        extra: dict | None = None,
    ) -> None:
        """Queue acknowledgements home; one G_MESSAGE_ACK per link and kind per loop turn."""
        if link.closed:
            return
        redelivered = bool(extra and extra.get("redelivered"))
        # A DEAD ack says why (dmq.py's reason and comment), so those split packets too.
        dead = (extra.get("deadReason"), extra.get("deadComment")) if extra else (None, None)
        slot_key = (link, ack_type, redelivered, dead)
        slot = self._acks.get(slot_key)
        if slot is None:
            slot = self._acks[slot_key] = (link, [])
        slot[1].extend((k, uid) for k in keys)
        if not self._acks_scheduled:
            self._acks_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_acks)

    def _flush_acks(self) -> None:
        self._acks_scheduled = False
        acks, self._acks = self._acks, {}
        for (_link, ack_type, redelivered, dead), (link, items) in acks.items():
            # One message per G_MESSAGE_ACK: OpenMQ's broker refuses a non-transacted ack
            # of more ("Unexpected remote ack count", B2136) and then never delivers past
            # the consumer's prefetch.  The packets of a turn share one property table.
            props = self.ack_props(link, ack_type, 1)
            if redelivered:
                props["redelivered"] = True
            if dead[0] is not None:
                props["deadReason"] = dead[0]
            if dead[1] is not None:
                props["deadComment"] = dead[1]
            table = encode_properties(props)
            for item in items:
                link.write(gp.encode_parts(gp.G_MESSAGE_ACK, table, ack_payload([item])))

    def _message_ack(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        r = gp.BodyReader(pkt.payload)
        count = pkt.props.get("C", 0)
        ack_type = pkt.props.get("T")
        if not isinstance(count, int) or count < 0 or count > 1000000:
            raise gp.GPacketError(f"G_MESSAGE_ACK count {count!r}")
        items = [(r.raw(SYSMSGID_SIZE), gp.ConsumerUID.read(r)) for _ in range(count)]
        tid = pkt.props.get("transactionID")
        if isinstance(tid, int) and isinstance(ack_type, int):
            # A consumer's transaction at its broker, in two phases (remotetxn.py).
            self.txn_ack(link, pkt, int(ack_type), int(tid), items)
            return
        if ack_type not in _PLAIN_ACKS:
            log.warning("G_MESSAGE_ACK type %r from %s refused", ack_type, link.address)
            self.ack_reply(link, pkt, 400, f"ack type {ack_type!r} without a transactionID")
            return
        redelivered = bool(pkt.props.get("redelivered"))
        dead_reason = pkt.props.get("deadReason")
        if dead_reason not in _DEAD_REASONS:
            dead_reason = dmq.UNDELIVERABLE  # a peer that does not say (or says nonsense)
        comment = pkt.props.get("deadComment")
        dead_comment = comment if isinstance(comment, str) else None
        router = self.router
        back: list[Entry] = []
        touched: dict[int, RemoteConsumer] = {}
        for key, uid in items:
            rc = self._remote_for(link, uid.consumer_id)
            if rc is None:
                continue
            if ack_type in (gp.ACK_DELIVERED, gp.ACK_SENT):
                # The message reached the client (OpenMQ says so for the last of a
                # consumer's window, and of its own accord): it stays unacknowledged.
                continue
            entry = rc.inflight.pop(key, None)
            if entry is None:
                continue
            touched[id(rc)] = rc
            if ack_type == gp.ACK_DEAD:
                # Expired or given up at the consumer's broker: the DMQ and the reports
                # are this (home) broker's.
                router.limits.dead(entry, dead_reason, dead_comment)
            elif ack_type in (gp.ACK_ACKNOWLEDGED, gp.ACK_UNDELIVERABLE):
                router.acks.settle(entry)
            else:  # ACK_IGNORED: ours put it back (OpenMQ's brokers redeliver their copy)
                if not redelivered:
                    entry.count = max(entry.count - 1, 0)
                back.append(entry)
        if back:
            router.acks.return_unacked(None, back, redelivered=redelivered)
        t = now_ms()
        for rc in touched.values():
            rc.queue.dispatch(t)
        # OpenMQ's consumer broker waits for this before it answers its client.
        self.ack_reply(link, pkt)

    def _client_closed(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """G_CLIENT_CLOSED: a client connection of the sending broker closed; its
        consumers go (OpenMQ's receiver removes the remote consumers of that connection,
        their unacknowledged messages going back to their queues)."""
        conn = pkt.props.get("I")
        if not isinstance(conn, int):
            raise gp.GPacketError("G_CLIENT_CLOSED without a connection id (I)")
        # A subscription's own interest outlives the connection that made it.
        for key in [
            k
            for k, rc in self.remotes.items()
            if k[0] is link and rc.uid.connection_id == conn and not rc.announced
        ]:
            self._remove_remote(self.remotes.pop(key))

    def _client_closed_out(self, conn_id: int) -> None:
        """A local client connection closed: tell every broker (as OpenMQ's do, without
        asking for a reply), so none keeps a consumer of it."""
        if self.links:
            self._broadcast(gp.GPacket(gp.G_CLIENT_CLOSED, {"I": JLong(conn_id)}))

    def _forget_link(self, link: BrokerLink) -> None:
        """What came over ``link`` goes: its remote consumers (their messages back to
        their queues) and the origins of what it delivered here."""
        for key in [k for k in self.remotes if k[0] is link]:
            self._remove_remote(self.remotes.pop(key))
        for key in [k for k in self.attached if k[0] is link]:
            del self.attached[key]
        for key in [k for k in self.inbound if k[0] is link]:
            origin = self.inbound.pop(key)
            origin.pending.clear()
            self._pending.discard(origin)


def _write_record(
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


__all__ = ["DeliveryRules"]
