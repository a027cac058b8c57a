"""The cluster service's shared configuration: destinations and durable subscriptions
made on one broker reach the others, and the master broker's change record (with its
guard on changes while the master is away) brings a returning broker up to date.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.core import queries
from broker.core.destination import Destination, TopicDestination
from broker.core.errors import RouterError
from broker.core.selector import SelectorError, compile_selector
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong
from broker.protocol.properties import (
    PropertyError,
    decode_properties,
    empty_properties,
    encode_properties,
)
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    Status,
)

from .changerecord import (
    ChangeRecord,
    change_event_entry,
    changes_reply_entries,
    read_last_sync,
    write_last_sync,
)
from .config import PRIVATE_PREFIXES, ClusterConfig
from .destattrs import from_wire, to_wire
from .handlers import Handlers
from .interests import interest_packet, shared

if TYPE_CHECKING:
    from pathlib import Path

    from broker.core.router import MessageRouter
    from broker.core.session import Consumer

    from .delivery import RemoteDelivery
    from .interests import LocalInterests
    from .link_driver import BrokerLink
    from .peers import Peers

log = logging.getLogger("broker.cluster")


class ConfigChanges:
    """What the brokers of a cluster share of their configuration, and the master
    broker's change record (a part of :class:`~broker.cluster.service.ClusterService`)."""

    def __init__(
        self,
        cfg: ClusterConfig,
        router: MessageRouter,
        peers: Peers,
        interests: LocalInterests,
        delivery: RemoteDelivery,
        instance_dir: Path | None = None,
    ) -> None:
        self.cfg = cfg
        self.router = router
        self.peers = peers
        self.interests = interests
        self.delivery = delivery
        self.instance_dir = instance_dir
        # The configuration change record, when this broker is the master broker.
        self.record: ChangeRecord | None = None
        if cfg.is_master() and instance_dir is not None:
            self.record = ChangeRecord(instance_dir)
        # The durable subscriptions the change record has (or this broker sent it).
        self._known_durables: set[tuple[str | None, str]] = set()
        # Set while applying a peer's change, so it is not sent back out.
        self._applying = False

    def handlers(self) -> Handlers:
        return {
            gp.G_UPDATE_DESTINATION: self._apply_destination,
            gp.G_REM_DESTINATION: self._apply_destination,
            gp.G_REM_DURABLE_INTEREST: self._remove_durable,
            gp.G_CONFIG_CHANGE_EVENT: self._config_change_event,
            gp.G_CONFIG_CHANGE_EVENT_REPLY: self._config_change_event_reply,
            gp.G_GET_CONFIG_CHANGES_REQUEST: self._config_changes_request,
            gp.G_GET_CONFIG_CHANGES_REPLY: self._config_changes_reply,
        }

    def start(self) -> None:
        """Know the durable subscriptions there are, and guard changes while the master
        broker is away."""
        for _topic, sub in queries.subscriptions(self.router):
            if sub.durable_key is not None:
                self._known_durables.add(sub.durable_key)
        if self.cfg.master is not None:
            role = "this broker" if self.record is not None else "{}:{}".format(*self.cfg.master)
            log.info("master broker: %s", role)

    # -- a link comes up ----------------------------------------------------------------

    def send_destinations(self, link: BrokerLink) -> None:
        """The administrators' destinations, to a broker that just linked."""
        for dest in self._admin_destinations():
            link.send(self._destination_packet(dest, sync=True))

    def ask_master(self, link: BrokerLink) -> None:
        """The master broker's link is up: ask for the changes made since the last time."""
        if (
            self.record is None
            and link is self.peers.master_link()
            and self.instance_dir is not None
        ):
            # -1: never synchronised (OpenMQ's brokers ask so, without the A bit).
            since = read_last_sync(self.instance_dir) or -1
            link.send(gp.GPacket(gp.G_GET_CONFIG_CHANGES_REQUEST, {"TS": JLong(since)}))

    def _record(self, pkt: gp.GPacket) -> None:
        """A local change goes into the master's change record (as OpenMQ's brokers
        record it: the packet marked ``M``, sent without the A bit; the master answers
        anyway)."""
        entry = gp.GPacket(pkt.type, {**pkt.props, "M": True}, pkt.payload)
        if self.record is not None:
            self.record.append(entry)
            return
        link = self.peers.master_link()
        if link is not None:
            xid = JLong(int(time.time() * 1000))
            link.send(gp.GPacket(gp.G_CONFIG_CHANGE_EVENT, {"X": xid}, gp.encode(entry)))

    def consumer_event(self, what: str, cons: Consumer) -> None:
        """A router consumer listener: a new durable subscription goes into the change
        record (announced as OpenMQ's brokers record it: its consumer's interest)."""
        sub = cons.subscription
        if what != "added" or sub is None or sub.durable_key is None or not shared(cons):
            return
        if sub.durable_key not in self._known_durables:
            self._known_durables.add(sub.durable_key)
            rec = interest_packet(self.cfg.me, [cons])
            rec.props.update(
                N=sub.durable_key[1],
                I=sub.durable_key[0] or "",
                shared=sub.share is not None,
                jmsshared=sub.share == "jms",
            )
            self._record(rec)

    # -- destinations and durables --------------------------------------------------

    def _admin_destinations(self) -> list:
        router = self.router
        return [
            d
            for d in queries.destinations(router)
            if not d.auto and not d.is_temporary and not d.name.startswith(PRIVATE_PREFIXES)
        ]

    def _destination_packet(self, dest: Destination, sync: bool = False) -> gp.GPacket:
        props: dict[str, object] = {"N": dest.name, "DT": dest.dest_type}
        if sync:
            props["M"] = True
        table = to_wire(dest.name, dest.is_queue, dest.attributes)
        try:
            body = encode_properties(table) or empty_properties()
        except PropertyError:
            body = empty_properties()
        return gp.GPacket(gp.G_UPDATE_DESTINATION, props, body)

    def router_event(self, kind: str, data: dict) -> None:
        """A router listener: an administrator's change here goes to every broker."""
        if self._applying:
            return
        router = self.router
        pkt = None
        if kind in ("destination.created", "destination.updated"):
            dest = router.lookup(data["name"], data["type"])
            if dest is not None and dest in self._admin_destinations():
                pkt = self._destination_packet(dest)
        elif kind == "destination.destroyed":
            name, dtype = data["name"], data.get("type", DEST_QUEUE)
            # Only an administrator's destination is the cluster's: an auto-created one
            # reaped here (unused here for imq.autocreate.reaptime) may hold messages on
            # another broker, which a G_REM_DESTINATION would destroy with them.  OpenMQ
            # sends it for administered destinations only.
            if (
                not data.get("auto")
                and not name.startswith(PRIVATE_PREFIXES)
                and not dtype & DEST_TEMP
            ):
                pkt = gp.GPacket(gp.G_REM_DESTINATION, {"N": name, "DT": dtype})
        elif kind == "durable.removed":
            key = (data["client_id"], data["name"])
            self._known_durables.discard(key)
            # Its UID as an announced subscription goes with it.
            self.interests.forget_durable(key)
            w = gp.BodyWriter().utf(data["name"]).utf(data["client_id"] or "")
            props = {"C": 1, "N": data["name"], "I": data["client_id"] or ""}
            pkt = gp.GPacket(gp.G_REM_DURABLE_INTEREST, props, w.bytes())
        if pkt is not None:
            self._record(pkt)
            self.peers.broadcast(pkt)

    # -- the master broker's change record -----------------------------------------------

    def check_change(self, kind: str, name: str) -> None:
        """Refuse a recorded change while the master broker cannot record it (the
        router asks, through the service: core/observers.ClusterRules)."""
        if self._applying or self.record is not None or self.cfg.master is None:
            return
        if self.peers.master_link() is None:
            host, port = self.cfg.master
            raise RouterError(
                Status.UNAVAILABLE,
                f"the master broker {host}:{port} is not reachable: {kind} {name} cannot be "
                "created, changed or removed until it is back",
            )

    def _config_change_event(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        # OpenMQ answers with G_EVENT_LOG_SUCCESS (1) or _FAILURE (2), A bit or not.
        reply: dict[str, object] = {"X": pkt.props.get("X", JLong(0))}
        if self.record is None:
            reply.update(S=gp.EVENT_LOG_FAILURE, reason="this broker is not the master broker")
        else:
            self.record.append(change_event_entry(pkt))
            reply["S"] = gp.EVENT_LOG_SUCCESS
        link.send(gp.GPacket(gp.G_CONFIG_CHANGE_EVENT_REPLY, reply))

    def _config_change_event_reply(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        # 200: what our brokers answered before they answered as OpenMQ's do.
        if pkt.props.get("S") not in (gp.EVENT_LOG_SUCCESS, 200):
            log.warning(
                "master broker %s did not record a change: %s (status %s)",
                link.address,
                pkt.props.get("reason"),
                pkt.props.get("S"),
            )

    def _config_changes_request(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        if self.record is None:
            link.send(
                gp.GPacket(
                    gp.G_GET_CONFIG_CHANGES_REPLY,
                    {"S": Status.BAD_REQUEST, "reason": "this broker is not the master broker"},
                )
            )
            return
        since = pkt.props.get("TS", 0)
        records = self.record.since(since if isinstance(since, int) else 0)
        body = b"".join(gp.encode(r, stamp=False) for r in records)
        props: dict[str, object] = {
            "TS": JLong(int(time.time() * 1000)),
            "S": 200,
            "C": len(records),
        }
        link.send(gp.GPacket(gp.G_GET_CONFIG_CHANGES_REPLY, props, body))

    def _config_changes_reply(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        if pkt.props.get("S") != 200:
            log.warning(
                "master broker %s refused the change record request: %s",
                link.address,
                pkt.props.get("reason"),
            )
            return
        records = changes_reply_entries(pkt)
        for rec in records:
            if rec.type in (gp.G_UPDATE_DESTINATION, gp.G_REM_DESTINATION):
                self._apply_destination(link, rec)
            elif rec.type == gp.G_REM_DURABLE_INTEREST:
                self._remove_durable(link, rec)
            elif rec.type == gp.G_NEW_INTEREST:
                self._apply_durable(rec)
        ts = pkt.props.get("TS")
        if isinstance(ts, int) and self.instance_dir is not None:
            write_last_sync(self.instance_dir, ts)
        log.info(
            "synchronised with master broker %s: %d change record(s) applied",
            link.address,
            len(records),
        )

    def _apply_durable(self, rec_pkt: gp.GPacket) -> None:
        """A durable subscription from the change record: this broker keeps messages for it."""
        r = gp.BodyReader(rec_pkt.payload)
        count = rec_pkt.props.get("C", 0)
        for _ in range(count if isinstance(count, int) and 0 <= count < 100000 else 0):
            rec = gp.read_interest(r)
            if not rec["durable"] or rec["queue"]:
                continue
            key = (rec["client_id"], rec["durable"])
            if self.router.subs.find_durable(key) is not None:
                continue
            self._applying = True
            try:
                topic = self.router.ensure_destination(rec["dest"], DEST_TOPIC, None)
                selector = compile_selector(rec["selector"]) if rec["selector"] else None
                assert isinstance(topic, TopicDestination)
                self.router.subs.add(topic, selector, rec["no_local"], 0, key)
                self._known_durables.add(key)
            except (RouterError, SelectorError) as exc:
                log.warning("durable %s from the change record not made: %s", rec["durable"], exc)
            finally:
                self._applying = False

    def _apply_destination(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        name, dtype = pkt.props.get("N"), pkt.props.get("DT")
        if not isinstance(name, str) or not isinstance(dtype, int) or not name:
            raise gp.GPacketError(f"{pkt.name} without a destination name (N) and type (DT)")
        router = self.router
        self._applying = True
        try:
            dest = router.lookup(name, dtype)
            if pkt.type == gp.G_REM_DESTINATION:
                if dest is not None:
                    router.destroy_destination(name, dtype)
                return
            try:
                table = decode_properties(pkt.payload) if pkt.payload else {}
            except PropertyError as exc:
                raise gp.GPacketError(
                    f"{pkt.name} {name}: destination attributes do not deserialise: {exc}"
                ) from None
            attrs, problems = from_wire(table)
            if problems:
                log.warning(
                    "destination %s from broker %s: attribute(s) not applied: %s",
                    name,
                    link.address,
                    "; ".join(problems),
                )
            if dest is None:
                router.create_destination(name, dtype, auto=False, attributes=attrs)
            elif not pkt.props.get("M"):
                router.update_destination(dest, attrs)
            elif dest.auto:
                # Auto-created here, created by an administrator elsewhere: it stays.
                dest.auto = False
        except RouterError as exc:
            log.warning(
                "change to %s %s from broker %s not applied: %s",
                "topic" if dtype & DEST_TOPIC else "queue",
                name,
                link.address,
                exc.reason,
            )
        finally:
            self._applying = False

    def _remove_durable(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        name, client_id = pkt.props.get("N"), pkt.props.get("I")
        if isinstance(name, str) and isinstance(client_id, str):
            pairs = [(name, client_id)]
        else:
            # OpenMQ's broadcast names them in the body only.
            pairs = gp.read_durable_names(pkt.payload, pkt.props.get("C", 0))
        for name, client_id in pairs:
            # The sender's own interest in it (OpenMQ announces a durable subscription
            # as one) goes first, or the subscription would be in use.
            self.delivery.drop_durable_interest(link, name, client_id)
            self._applying = True
            try:
                self.router.subs.unsubscribe(client_id or None, name)
            except RouterError as exc:
                if exc.status != 404:
                    log.warning(
                        "unsubscribe of %s from broker %s not applied: %s",
                        name,
                        link.address,
                        exc.reason,
                    )
            finally:
                self._applying = False


__all__ = ["ConfigChanges"]
