"""The cluster service's remote delivery: local consumers announced to the peers
(interests.py), remote consumers attached here (remote_delivery.py), messages forwarded to them,
messages received for local consumers, the acknowledgements going home, and message flow
control between brokers.
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

from .handlers import Handlers, ignore
from .interests import announced_as_subscription, shared
from .remote_delivery import InboundOrigin, RemoteConsumer, RemoteConsumers, RemoteLinkRef
from .remote_transactions import ack_payload, ack_props, ack_reply

if TYPE_CHECKING:
    from broker.core.router import MessageRouter

    from .interests import LocalInterests
    from .link_driver import BrokerLink
    from .peers import Peers
    from .remote_transactions import RemoteTransactions

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


class RemoteDelivery:
    """Messages between this broker's consumers and the other brokers (a part of
    :class:`~broker.cluster.service.ClusterService`)."""

    def __init__(
        self,
        router: MessageRouter,
        peers: Peers,
        interests: LocalInterests,
        consumers: RemoteConsumers,
        txns: RemoteTransactions,
    ) -> None:
        self.router = router
        self.peers = peers
        self.me = peers.cfg.me
        # The local consumers as the peers know them (the subscriptions' UIDs).
        self.interests = interests
        # The peers' consumers attached here (the remote transactions read them too).
        self.consumers = consumers
        self.txns = txns
        # The origins of what home brokers sent for local consumers, by (link, the
        # consumer's or subscription's id).
        self.inbound: dict[tuple[BrokerLink, int], InboundOrigin] = {}
        # Acknowledgements going home this loop turn, by (link, kind, redelivered, dead).
        self._acks: dict[tuple, tuple[BrokerLink, list]] = {}
        self._acks_scheduled = False
        # Origins whose entries wait for their consumer, retried on a short timer.
        self._pending: set[InboundOrigin] = set()
        self._pending_timer: asyncio.TimerHandle | None = None
        # Whether this broker asked the others to stop sending it messages (memory red).
        self.flow_stopped = False
        # The temporary destinations made here for the peers' consumers, by (name, type):
        # each goes with its last remote consumer, since its owner's connection is
        # elsewhere and no local close would ever remove it.
        self._temp_replicas: set[tuple[str, int]] = set()

    def handlers(self) -> Handlers:
        return {
            gp.G_NEW_INTEREST: self._new_interest,
            gp.G_INTEREST_UPDATE: self._interest_update,
            gp.G_DURABLE_ATTACH: self._durable_attach,
            gp.G_MESSAGE_DATA: self._message_data,
            gp.G_MESSAGE_ACK: self._message_ack,
            gp.G_CLIENT_CLOSED: self._client_closed,
            gp.G_CLIENT_CLOSED_REPLY: ignore,
            gp.G_STOP_MESSAGE_FLOW: self._stop_flow,
            gp.G_RESUME_MESSAGE_FLOW: self._resume_flow,
        }

    def consumer_event(self, what: str, cons: Consumer) -> None:
        """A router consumer listener: messages home brokers sent a subscription while
        it had no consumer go to the one that joined, on the next turn, after its
        ADD_CONSUMER_REPLY (a client drops a delivery for a consumer ID its reply has
        not told it yet)."""
        if what != "added" or not shared(cons):
            return
        announced = announced_as_subscription(cons)
        if announced is not None:
            sub_id = self.interests.sub_uid(announced).consumer_id
            for (_link, cid), origin in list(self.inbound.items()):
                if cid == sub_id and origin.pending:
                    self.retry_pending(origin)

    # -- the peers' interests -------------------------------------------------------

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
        if key in self.consumers.remotes:
            return
        router = self.router
        dtype = DEST_QUEUE if rec["queue"] else DEST_TOPIC
        selector = compile_selector(rec["selector"]) if rec["selector"] else None
        dest = router.lookup(rec["dest"], dtype)
        # The remote consumer's connection as the destination sees it (a temporary
        # destination's owner, noLocal), before the consumer itself has its queue.
        ref = RemoteLinkRef(rec["client_id"])
        if dest is None:
            if rec["temporary"]:
                dest = router.create_destination(rec["dest"], dtype | DEST_TEMP, ref)
                self._temp_replicas.add((dest.name, dest.dest_type))
            else:
                dest = router.ensure_destination(rec["dest"], dtype, None)
        if dest.attributes.get("isLocalOnly"):
            log.info(
                "interest of %s on %s not taken: the destination is local only",
                uid.broker,
                dest.name,
            )
            return
        if isinstance(dest, QueueDestination):
            rc = RemoteConsumer(
                self, link, uid, dest, dest.dq, selector, window, ref, rec["durable"]
            )
            rc.shared_name = rec["shared_name"]
            # At the position its broker locked for it (a stock broker's too).
            if not dest.attach(rc, rec.get("position"), told=bool(rec.get("told"))):
                raise RouterError(500, "queue has its maximum of active consumers")
        else:
            assert isinstance(dest, TopicDestination)
            mode = "jms" if rec["jms_shared"] else "mq" if rec["mq_share"] else None
            # A shared or durable subscription is one per cluster: the remote consumer
            # joins it, under the rules a local consumer joins by.
            sub = router.subs.remote_subscription(
                ref,
                dest,
                selector,
                rec["no_local"],
                rec["durable"],
                mode,
                rec["shared_name"] if mode == "jms" else None,
            )
            rc = RemoteConsumer(
                self, link, uid, dest, sub.queue, selector, window, ref, rec["durable"], sub
            )
            rc.shared_name = rec["shared_name"]
            if (rec["durable"] is not None or mode is not None) and not rec.get("attach"):
                # The subscription's own interest: it takes messages only while a
                # consumer is attached to it (G_DURABLE_ATTACH); meanwhile they wait here.
                rc.announced = True
                self.consumers.remotes[key] = rc
                return
            sub.attach(rc)
        self.consumers.remotes[key] = rc
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
        for key, rc in self.consumers.remotes.items():
            if key[0] is link and name in (rc.durable_name, rc.shared_name):
                if rc.durable_name is not None and rc.link.client_id != client_id:
                    continue
                self.consumers.attached[link, uid.consumer_id] = key
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
        if local is None or local not in self.interests.sub_uids:
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
        for key, rc in self.consumers.remotes.items():
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
                self.consumers.attached[link, uid.consumer_id] = key
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
                    if key[:3] == ("mq", client_id, topic) and sub in self.interests.sub_uids
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
        dest = rc.destination
        key = (dest.name, dest.dest_type)
        if key in self._temp_replicas and not dest.consumers():
            # A client's address, local port and counter name its temporary
            # destinations, so a later connection here may well make the same name: a
            # replica kept past its owner would refuse it that name's consumer.
            self._temp_replicas.discard(key)
            if router.lookup(dest.name, dest.dest_type) is dest:
                router.destroy_destination(dest.name, dest.dest_type)

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
                rc = self.consumers.remotes.get((link, uid.consumer_id))
                if (
                    isinstance(position, int)
                    and rc is not None
                    and isinstance(rc.destination, QueueDestination)
                ):
                    rc.destination.moved(rc, position)
                    rc.queue.dispatch(now_ms())
                continue
            sub_key = self.consumers.attached.get((link, uid.consumer_id))
            if sub_key is not None:
                # A consumer left a subscription the peer announced: the subscription
                # stays its interest (its broker keeps what it is sent for the next
                # consumer), within its own window again.  The consumer's UID stays
                # known: acknowledgements in its name may still come.
                sub_rc = self.consumers.remotes.get(sub_key)
                if sub_rc is not None:
                    sub_rc.set_attached(uid.consumer_id, None)
                    if not sub_rc.attached and sub_rc.subscription is not None:
                        # No consumer left: what is published waits here again (what
                        # it was sent and did not acknowledge is acknowledged later).
                        sub_rc.subscription.detach(sub_rc)
                continue
            rc = self.consumers.remotes.pop((link, uid.consumer_id), None)
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
            if uid.broker != self.me:
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
            props = ack_props(self.peers.address_props(), link, ack_type, 1)
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
            # A consumer's transaction at its broker, in two phases (remote_transactions.py).
            self.txns.txn_ack(link, pkt, int(ack_type), int(tid), items)
            return
        if ack_type not in _PLAIN_ACKS:
            log.warning("G_MESSAGE_ACK type %r from %s refused", ack_type, link.address)
            ack_reply(link, pkt, 400, f"ack type {ack_type!r} without a transactionID")
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
            rc = self.consumers.remote_for(link, uid.consumer_id)
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
        ack_reply(link, pkt)

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
            for k, rc in self.consumers.remotes.items()
            if k[0] is link and rc.uid.connection_id == conn and not rc.announced
        ]:
            self._remove_remote(self.consumers.remotes.pop(key))

    def router_event(self, kind: str, data: dict) -> None:
        """A router listener: a local client connection closed; tell every broker (as
        OpenMQ's do, without asking for a reply), so none keeps a consumer of it."""
        if kind == "connection.closed" and self.peers.links:
            self.peers.broadcast(gp.GPacket(gp.G_CLIENT_CLOSED, {"I": JLong(data["id"])}))

    def drop_durable_interest(self, link: BrokerLink, name: str, client_id: str) -> None:
        """The peer's own interest in its durable subscription ``name`` goes (before the
        subscription is removed: OpenMQ announces a durable subscription as one)."""
        for key, rc in list(self.consumers.remotes.items()):
            if key[0] is link and rc.durable_name == name:
                if (rc.link.client_id or "") == client_id:
                    self._remove_remote(self.consumers.remotes.pop(key))

    # -- flow control ----------------------------------------------------------------

    def set_flow_stopped(self, stopped: bool, why: str) -> None:
        """Cluster flow control: ask every broker to stop (or resume) sending us messages."""
        if stopped == self.flow_stopped:
            return
        self.flow_stopped = stopped
        log.warning(
            "cluster message flow to this broker %s (%s)", "stopped" if stopped else "resumed", why
        )
        kind = gp.G_STOP_MESSAGE_FLOW if stopped else gp.G_RESUME_MESSAGE_FLOW
        self.peers.broadcast(gp.GPacket(kind, {}))

    def tell_flow(self, link: BrokerLink) -> None:
        """A broker that just linked hears that this one stopped its message flow."""
        if self.flow_stopped:
            link.send(gp.GPacket(gp.G_STOP_MESSAGE_FLOW, {}))

    def _stop_flow(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        if not link.flow_stopped:
            log.info("broker %s asked to stop message flow to it", link.address)
        link.flow_stopped = True
        if pkt.wants_reply:
            link.send(gp.GPacket(gp.G_STOP_MESSAGE_FLOW_REPLY, {"S": 200}))

    def _resume_flow(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        if link.flow_stopped:
            log.info("broker %s resumed message flow to it", link.address)
        link.flow_stopped = False
        if pkt.wants_reply:
            link.send(gp.GPacket(gp.G_RESUME_MESSAGE_FLOW_REPLY, {"S": 200}))
        stamp = now_ms()
        for (rlink, _cid), rc in list(self.consumers.remotes.items()):
            if rlink is link:
                rc.queue.dispatch(stamp)

    # -- a link goes -------------------------------------------------------------------

    def forget_link(self, link: BrokerLink) -> None:
        """What came over ``link`` goes: its remote consumers (their messages back to
        their queues) and the origins of what it delivered here."""
        for key in [k for k in self.consumers.remotes if k[0] is link]:
            self._remove_remote(self.consumers.remotes.pop(key))
        for key in [k for k in self.consumers.attached if k[0] is link]:
            del self.consumers.attached[key]
        for key in [k for k in self.inbound if k[0] is link]:
            origin = self.inbound.pop(key)
            origin.pending.clear()
            self._pending.discard(origin)


__all__ = ["RemoteDelivery"]
