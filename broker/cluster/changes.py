"""The cluster service's shared configuration: destinations and durable subscriptions
made on one broker reach the others, and the master broker's change record (with its
guard on changes while the master is away) brings a returning broker up to date.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.core import queries
from broker.core.destination import TopicDestination
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

from .changerecord import change_event_entry, changes_reply_entries, write_last_sync
from .config import PRIVATE_PREFIXES
from .destattrs import from_wire, to_wire
from .link import BrokerLink
from .remote import RemoteConsumer
from .state import ClusterState

if TYPE_CHECKING:
    pass

log = logging.getLogger("broker.cluster")


class ChangeRules(ClusterState):
    """The destinations, durables and change-record part of
    :class:`~broker.cluster.service.ClusterService` (a mixin)."""

    # The delivery rules' (delivery.py): a local client connection closed; a remote
    # consumer goes.
    _client_closed_out: Callable[[int], None]
    _remove_remote: Callable[[RemoteConsumer], None]

    # -- destinations and durables --------------------------------------------------

    def _admin_destinations(self) -> list:
        router = self.router
        return [
            d
            for d in queries.destinations(router)
            if not d.auto and not d.is_temporary and not d.name.startswith(PRIVATE_PREFIXES)
        ]

    def _destination_packet(self, dest, sync: bool = False) -> gp.GPacket:
        props: dict[str, object] = {"N": dest.name, "DT": dest.dest_type}
        if sync:
            props["M"] = True
        table = to_wire(dest.name, dest.is_queue, dest.attributes)
        try:
            body = encode_properties(table) or empty_properties()
        except PropertyError:
            body = empty_properties()
        return gp.GPacket(gp.G_UPDATE_DESTINATION, props, body)

    def _router_event(self, kind: str, data: dict) -> None:
        if self._applying:
            return
        if kind == "connection.closed":
            self._client_closed_out(data["id"])
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
            for sub in [s for s in self.sub_uids if s.durable_key == key]:
                uid = self.sub_uids.pop(sub)
                self.uid_subs.pop(uid.consumer_id, None)
            w = gp.BodyWriter().utf(data["name"]).utf(data["client_id"] or "")
            props = {"C": 1, "N": data["name"], "I": data["client_id"] or ""}
            pkt = gp.GPacket(gp.G_REM_DURABLE_INTEREST, props, w.bytes())
        if pkt is not None:
            self._record(pkt)
            self._broadcast(pkt)

    # -- the master broker's change record -----------------------------------------------

    def _guard(self, kind: str, name: str) -> None:
        """Refuse a recorded change while the master broker cannot record it."""
        if self._applying or self.record is not None or self.cfg.master is None:
            return
        if self._master_link() is None:
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
            for key, rc in list(self.remotes.items()):
                if key[0] is link and rc.durable_name == name:
                    if (rc.link.client_id or "") == client_id:
                        self._remove_remote(self.remotes.pop(key))
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


__all__ = ["ChangeRules"]
