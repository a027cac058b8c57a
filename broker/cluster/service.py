"""The cluster service: this broker's links to the others and what travels on them.

:class:`ClusterService` listens on the cluster port (published in the port mapper as
``cluster tcp CLUSTER``), dials the peers of ``imq.cluster.brokerlist`` it is the
initiator for (the lower ``host:port`` of a pair dials; both accept), and keeps
re-dialling a peer that is down -- this broker serves its own clients meanwhile.

Over an up link it announces local consumers (G_NEW_INTEREST, G_INTEREST_UPDATE),
forwards messages to remote consumers (G_MESSAGE_DATA, see remote.py), carries the
acknowledgements home (G_MESSAGE_ACK), answers PING, says GOODBYE when it stops, and
tells a peer that left cleanly from one that crashed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from broker.core import dmq
from broker.core.destination import QueueDestination, TopicDestination
from broker.core.errors import RouterError, now_ms
from broker.core.message import Entry, Message
from broker.core.selector import SelectorError, compile_selector
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong
from broker.protocol.packet import Packet
from broker.protocol.portmapper import PortMapperError, encode_request, parse_table
from broker.protocol.properties import (
    PropertyError,
    decode_properties,
    empty_properties,
    encode_properties,
)
from broker.protocol.sysmsgid import SYSMSGID_SIZE
from broker.protocol.types import (
    BROKER_PREFIX,
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    DMQ_NAME,
    Status,
)

from .changerecord import RECORDED, ChangeRecord, read_last_sync, write_last_sync
from .config import ClusterConfig, ClusterConfigError, same_host
from .link import BrokerLink, LinkRefused, broker_info_body
from .locks import ClusterLocks
from .remote import InboundOrigin, RemoteConsumer

_DEAD_REASONS = frozenset(
    (dmq.EXPIRED, dmq.UNDELIVERABLE, dmq.REMOVED_OLDEST, dmq.REMOVED_LOW_PRIORITY, dmq.ERROR)
)

if TYPE_CHECKING:
    from broker.core.router import MessageRouter
    from broker.core.session import Consumer

log = logging.getLogger("broker.cluster")

# Replies whose only use is to say (WARNING) that a peer could not do what we asked.
_REFUSALS_LOGGED = {
    gp.G_CONFIG_CHANGE_EVENT_REPLY: "master broker %s did not record a change: %s",
    gp.G_RELOAD_CLUSTER_REPLY: "broker %s could not reload the cluster configuration: %s",
}
RECONNECT_INTERVAL = 1.0
RECONNECT_MAX = 5.0
# Destinations that never leave their broker.
_PRIVATE_PREFIXES = (BROKER_PREFIX, DMQ_NAME)


class ClusterService:
    """One broker's membership of a conventional cluster."""

    def __init__(
        self,
        cfg: ClusterConfig,
        router: MessageRouter,
        session_id: int,
        instance_dir: Path | None = None,
        *,
        server_ssl: ssl.SSLContext | None = None,
        client_ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.cfg = cfg
        # imq.cluster.transport=ssl: the listener's and the dialler's TLS contexts.
        self.server_ssl = server_ssl
        self.client_ssl = client_ssl
        self.instance_dir = instance_dir
        # The configuration change record, when this broker is the master broker.
        self.record: ChangeRecord | None = None
        if cfg.is_master() and instance_dir is not None:
            self.record = ChangeRecord(instance_dir)
        self._known_durables: set[tuple[str | None, str]] = set()
        self.router = router
        self.session_id = session_id
        self.start_ms = int(time.time() * 1000)
        self.server: asyncio.Server | None = None
        self.links: dict[gp.BrokerAddress, BrokerLink] = {}
        self.all_links: set[BrokerLink] = set()
        self.remotes: dict[tuple[BrokerLink, int], RemoteConsumer] = {}
        self.inbound: dict[tuple[BrokerLink, int], InboundOrigin] = {}
        self._dialling: set[tuple[str, int]] = set()
        # The reason a link to a peer last closed before its handshake (logged once).
        self._unreachable: dict[tuple[str, int], str | None] = {}
        self._tasks: list[asyncio.Task] = []
        self._acks: dict[tuple, tuple[BrokerLink, list]] = {}
        self._acks_scheduled = False
        self._pending: set[InboundOrigin] = set()
        self._pending_timer: asyncio.TimerHandle | None = None
        self.extra_info: dict[str, object] = {}
        self.locks = ClusterLocks(self)
        self.locks.timeout = cfg.lock_timeout
        self.stopping = False
        # Whether this broker asked the others to stop sending it messages (memory red).
        self.flow_stopped = False
        # Set while applying a peer's change, so it is not sent back out.
        self._applying = False
        self.loop: asyncio.AbstractEventLoop | None = None
        # Where RELOAD_CLUSTER reads the configuration again (set by the broker): a fresh
        # BrokerConfig from the instance's files and command line.
        self.reread_config: Callable[[], object] | None = None

    # -- life cycle ------------------------------------------------------------------

    async def start(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        host = self.cfg.cluster_host or None
        self.server = await loop.create_server(
            lambda: BrokerLink(self),
            host=host,
            port=self.cfg.cluster_port,
            reuse_address=True,
            ssl=self.server_ssl,
        )
        log.info(
            "cluster service (%s CLUSTER) listening on %s:%s; brokers: %s",
            self.cfg.transport,
            host or "*",
            self.port,
            ", ".join(f"{h}:{p}" for h, p in self.cfg.peers),
        )
        self.router.consumer_listeners.append(self._consumer_event)
        self.router.listeners.append(self._router_event)
        for topic in self.router.topics.values():
            self._known_durables.update(topic.durables)
        if self.cfg.master is not None:
            self.router.change_guard = self._guard
            role = "this broker" if self.record is not None else "{}:{}".format(*self.cfg.master)
            log.info("master broker: %s", role)
        self._tasks = [
            asyncio.create_task(self._dial_loop()),
            asyncio.create_task(self._ping_loop()),
        ]

    @property
    def port(self) -> int:
        if self.server is not None and self.server.sockets:
            return self.server.sockets[0].getsockname()[1]
        return self.cfg.cluster_port

    async def stop(self) -> None:
        """Leave the cluster cleanly: GOODBYE on every link, then close."""
        self.stopping = True
        for t in self._tasks:
            t.cancel()
        for link in list(self.links.values()):
            link.leave()
        if self.server is not None:
            self.server.close()
        for link in list(self.all_links):
            link.close()
        await asyncio.sleep(0)

    # -- identity and handshake -----------------------------------------------------

    def link_init(self) -> gp.LinkInit:
        me = self.cfg.me
        master = None
        if self.cfg.master is not None:
            master = gp.BrokerAddress(self.cfg.master[0], "", self.cfg.master[1])
        return gp.LinkInit(
            gp.CLUSTER_VERSION,
            me.host,
            me.instance,
            me.port,
            master,
            dict(self.cfg.match),
            session_uid=self.session_id,
        )

    def broker_info(self) -> bytes:
        extra = {"clusterPort": self.port, **self.extra_info}
        me = self.cfg.me
        return broker_info_body(me.instance, me.host, me.port, self.start_ms, extra)

    def check_peer(self, link: BrokerLink, init: gp.LinkInit) -> None:
        """Refuse a LINK_INIT whose sender may not join (raises LinkRefused with why)."""
        if init.version != gp.CLUSTER_VERSION:
            raise LinkRefused(
                f"cluster protocol version {init.version}, this broker speaks {gp.CLUSTER_VERSION}"
            )
        if self.cfg.is_me(init.host, init.port) or init.session_uid == self.session_id:
            raise LinkRefused(f"peer claims to be this broker ({init.address})")
        if not any(p == init.port and same_host(h, init.host) for h, p in self.cfg.peers):
            raise LinkRefused(f"{init.address} is not in imq.cluster.brokerlist")
        if link.expected is not None:
            h, p = link.expected
            if (
                p != init.port
                or not same_host(h, init.host)
                or (link.expected_instance and link.expected_instance != init.instance)
            ):
                raise LinkRefused(
                    f"dialled {link.expected_instance or ''}@{h}:{p} but the peer says it is "
                    f"{init.address}"
                )
        differ = sorted(
            k
            for k in set(init.match) | set(self.cfg.match)
            if init.match.get(k) != self.cfg.match.get(k)
        )
        if differ:
            raise LinkRefused("cluster properties differ: " + ", ".join(differ))
        old = self.links.get(init.address)
        if old is not None and not old.closed:
            raise LinkRefused(f"broker {init.address} is already linked (a second claim)")

    def link_up(self, link: BrokerLink) -> None:
        addr = link.address
        assert addr is not None
        old = self.links.get(addr)
        if old is not None and old is not link:
            # A dropped link is closed at once, but its connection_lost can come after
            # the peer's redial is up: what it brought goes now, before the new link's
            # interests arrive.  A remote consumer left attached would hold its durable
            # subscription "in use" (refusing the peer's consumer as it comes back) and
            # draw messages into a dead link.
            self._forget_link(old)
        self.links[addr] = link
        self.all_links.add(link)
        self._unreachable.pop((addr.host, addr.port), None)
        log.info(
            "cluster link to broker %s up (%s)",
            addr,
            "dialled" if link.expected else "accepted",
        )
        for dest in self._admin_destinations():
            link.send(self._destination_packet(dest, sync=True))
        cons = [c for c in self.router.consumers.values() if self._shared(c)]
        if cons:
            link.send(self._interest_packet(cons))
        self.locks.link_up(link)
        if self.flow_stopped:
            link.send(gp.GPacket(gp.G_STOP_MESSAGE_FLOW, {}))
        if self.record is None and link is self._master_link() and self.instance_dir is not None:
            since = read_last_sync(self.instance_dir)
            link.send(
                gp.GPacket(gp.G_GET_CONFIG_CHANGES_REQUEST, {"TS": JLong(since)}, flags=gp.A_BIT)
            )

    def _forget_link(self, link: BrokerLink) -> None:
        """What came over ``link`` goes: its remote consumers (their messages back to
        their queues) and the origins of what it delivered here."""
        for key in [k for k in self.remotes if k[0] is link]:
            self._remove_remote(self.remotes.pop(key))
        for key in [k for k in self.inbound if k[0] is link]:
            origin = self.inbound.pop(key)
            origin.pending.clear()
            self._pending.discard(origin)

    def link_closed(self, link: BrokerLink) -> None:
        self.all_links.discard(link)
        # What came over this link goes with it even when a newer link to the same broker
        # already took its place (see link_up).
        self._forget_link(link)
        self.locks.link_down(link)
        addr = link.address
        if addr is None or self.links.get(addr) is not link:
            if not link.logged and not self.stopping:
                # A peer that keeps refusing us (e.g. one whose list no longer names this
                # broker) is re-dialled every few seconds: said once per reason.
                peer = link.expected
                if peer is not None and self._unreachable.get(peer) == link.reason:
                    log.debug("cluster link %s closed again: %s", link.describe(), link.reason)
                    return
                if peer is not None:
                    self._unreachable[peer] = link.reason
                log.warning(
                    "cluster link %s closed before the handshake finished: %s",
                    link.describe(),
                    link.reason,
                )
            return
        del self.links[addr]
        if link.goodbye:
            log.info("broker %s left the cluster (GOODBYE)", addr)
        elif not self.stopping:
            log.warning("cluster link to broker %s lost: %s", addr, link.reason)

    # -- reloading the configuration ------------------------------------------------

    async def reload(
        self, *, propagate: bool
    ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """``imqcmd reload cls``: read the broker list again (``imq.cluster.brokerlist``
        of the instance's files, or the file or web page of ``imq.cluster.url``), link to
        the brokers added, say GOODBYE to those removed.  With ``propagate`` every linked
        broker is told to do the same (G_RELOAD_CLUSTER), before any link is dropped.
        Returns (added, removed); raises ClusterConfigError when the list cannot be read
        (then nothing changes)."""
        if self.reread_config is None:
            raise ClusterConfigError("this broker's cluster configuration cannot be re-read")
        reread = self.reread_config
        loop = asyncio.get_running_loop()
        # A cluster file may be on a web server: read it off the event loop.
        peers = await loop.run_in_executor(
            None, lambda: ClusterConfig.read_peers(reread(), self.cfg.me)
        )
        if propagate:
            self._broadcast(gp.GPacket(gp.G_RELOAD_CLUSTER, {}, flags=gp.A_BIT))
        added = [p for p in peers if p not in self.cfg.peers]
        removed = [p for p in self.cfg.peers if p not in peers]
        self.cfg.peers = peers
        for host, port in removed:
            self._unreachable.pop((host, port), None)
            link = self._link_to(host, port)
            if link is not None:
                link.leave()
        log.info(
            "cluster configuration reloaded: %d other broker(s)%s%s",
            len(peers),
            "; added " + ", ".join(f"{h}:{p}" for h, p in added) if added else "",
            "; removed " + ", ".join(f"{h}:{p}" for h, p in removed) if removed else "",
        )
        return added, removed

    def _reload_requested(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """G_RELOAD_CLUSTER from a peer whose administrator ran ``reload cls``."""

        async def run() -> None:
            reply: dict[str, object]
            try:
                await self.reload(propagate=False)
                reply = {"S": 200}
            except ClusterConfigError as exc:
                log.warning("cluster reload asked by %s failed: %s", link.address, exc)
                reply = {"S": 500, "reason": str(exc)}
            if pkt.wants_reply and not link.closed:
                link.send(gp.GPacket(gp.G_RELOAD_CLUSTER_REPLY, reply))

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    # -- dialling ------------------------------------------------------------------

    def _initiates(self, peer: tuple[str, int]) -> bool:
        me = self.cfg.me
        return (me.port, me.host) < (peer[1], peer[0])

    def _link_to(self, host: str, port: int) -> BrokerLink | None:
        """The link up to the broker whose port mapper is ``host:port``, if any."""
        return next(
            (lk for a, lk in self.links.items() if a.port == port and same_host(a.host, host)),
            None,
        )

    def _linked(self, host: str, port: int) -> bool:
        return self._link_to(host, port) is not None

    async def _dial_loop(self) -> None:
        delay = RECONNECT_INTERVAL
        while True:
            missing = [
                p
                for p in self.cfg.peers
                if self._initiates(p) and not self._linked(*p) and p not in self._dialling
            ]
            for peer in missing:
                self._dialling.add(peer)
                asyncio.create_task(self._dial(peer))
            await asyncio.sleep(delay if missing else RECONNECT_INTERVAL)
            delay = min(delay * 1.5, RECONNECT_MAX) if missing else RECONNECT_INTERVAL

    async def _dial(self, peer: tuple[str, int]) -> None:
        host, pm_port = peer
        try:
            instance, port, chost = await self._lookup(host, pm_port)
            loop = asyncio.get_running_loop()
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: BrokerLink(self, expected=peer, expected_instance=instance),
                    chost or host,
                    port,
                    ssl=self.client_ssl,
                ),
                5,
            )
        except (OSError, TimeoutError, PortMapperError, LookupError, ssl.SSLError) as exc:
            reason = str(exc) or type(exc).__name__
            if self._unreachable.get(peer) != reason:
                # Said once per reason, not on every retry.
                log.warning(
                    "cannot reach cluster broker %s:%s (%s); retrying", host, pm_port, reason
                )
                self._unreachable[peer] = reason
        finally:
            self._dialling.discard(peer)

    async def _lookup(self, host: str, pm_port: int) -> tuple[str, int, str | None]:
        """The peer's instance name and cluster port, from its port mapper."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, pm_port), 5)
        try:
            writer.write(encode_request())
            data = b""
            while not data.endswith(b".\n"):
                chunk = await asyncio.wait_for(reader.read(4096), 5)
                if not chunk:
                    break
                data += chunk
        finally:
            writer.close()
        table = parse_table(data)
        entry = table.find("CLUSTER", self.cfg.transport)
        if entry is None:
            raise LookupError("its port mapper lists no cluster service (not clustered?)")
        return table.instance, entry.port, entry.properties.get("hostname")

    async def _ping_loop(self) -> None:
        interval = self.cfg.ping_interval
        while True:
            await asyncio.sleep(interval / 2)
            now = time.monotonic()
            for link in list(self.links.values()):
                if now - link.last_heard > 3 * interval:
                    link.drop(f"nothing heard from the peer for {now - link.last_heard:.0f} s")
                elif now - link.last_sent >= interval / 2:
                    link.send(
                        gp.GPacket(gp.G_PING, {"X": JLong(int(time.time() * 1000))}, flags=gp.A_BIT)
                    )

    # -- destinations and durables --------------------------------------------------

    def _admin_destinations(self) -> list:
        router = self.router
        return [
            d
            for table in (router.queues, router.topics)
            for d in table.values()
            if not d.auto and not d.is_temporary and not d.name.startswith(_PRIVATE_PREFIXES)
        ]

    def _destination_packet(self, dest, sync: bool = False) -> gp.GPacket:
        props: dict[str, object] = {"N": dest.name, "DT": dest.dest_type}
        if sync:
            props["M"] = True
        attrs = {k: v for k, v in dest.attributes.items() if v is not None}
        try:
            body = encode_properties(attrs) or empty_properties()
        except PropertyError:
            body = empty_properties()
        return gp.GPacket(gp.G_UPDATE_DESTINATION, props, body)

    def _broadcast(self, pkt: gp.GPacket) -> None:
        for link in self.links.values():
            link.send(pkt)

    def _router_event(self, kind: str, data: dict) -> None:
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
            if not name.startswith(_PRIVATE_PREFIXES) and not dtype & DEST_TEMP:
                pkt = gp.GPacket(gp.G_REM_DESTINATION, {"N": name, "DT": dtype})
        elif kind == "durable.removed":
            self._known_durables.discard((data["client_id"], data["name"]))
            w = gp.BodyWriter().utf(data["name"]).utf(data["client_id"] or "")
            props = {"C": 1, "N": data["name"], "I": data["client_id"] or ""}
            pkt = gp.GPacket(gp.G_REM_DURABLE_INTEREST, props, w.bytes())
        if pkt is not None:
            self._record(pkt)
            self._broadcast(pkt)

    # -- the master broker's change record -----------------------------------------------

    def _master_link(self) -> BrokerLink | None:
        master = self.cfg.master
        if master is None:
            return None
        for addr, link in self.links.items():
            if addr.port == master[1] and same_host(addr.host, master[0]):
                return link
        return None

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

    def _record(self, pkt: gp.GPacket) -> None:
        """A local change goes into the master's change record."""
        if self.record is not None:
            self.record.append(pkt)
            return
        link = self._master_link()
        if link is not None:
            xid = JLong(int(time.time() * 1000))
            link.send(gp.GPacket(gp.G_CONFIG_CHANGE_EVENT, {"X": xid}, gp.encode(pkt), gp.A_BIT))

    def _config_change_event(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        reply: dict[str, object] = {"X": pkt.props.get("X", 0)}
        if self.record is None:
            reply.update(S=Status.BAD_REQUEST, reason="this broker is not the master broker")
        else:
            inner = gp.decode(pkt.payload)
            if inner.type not in RECORDED:
                raise gp.GPacketError(f"{inner.name} is not a change record entry")
            self.record.append(inner)
            reply["S"] = 200
        link.send(gp.GPacket(gp.G_CONFIG_CHANGE_EVENT_REPLY, reply))

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
        records = gp.split_concatenated(pkt.payload)
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
            rec = self._read_interest(r)
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
                attrs = decode_properties(pkt.payload) if pkt.payload else {}
            except PropertyError as exc:
                raise gp.GPacketError(f"destination attributes: {exc}") from None
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
        if not isinstance(name, str) or not isinstance(client_id, str):
            raise gp.GPacketError("G_REM_DURABLE_INTEREST without N and I")
        self._applying = True
        try:
            self.router.unsubscribe(client_id or None, name)
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

    # -- interests -------------------------------------------------------------------

    @staticmethod
    def _shared(cons: Consumer) -> bool:
        dest = cons.destination
        return not dest.name.startswith(_PRIVATE_PREFIXES) and not dest.attributes.get(
            "isLocalOnly"
        )

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
            # No max active count, lock position 0; JMS 2.0 shared and its name.
            w.boolean(False).int32(0).boolean(share == "jms").boolean(shared_name is not None)
            if shared_name is not None:
                w.utf(shared_name)
            if share == "mq":
                props[f"{c.id}:mqshare"] = True  # ours: OpenMQ's JMQShare
            props[f"{c.id}:prefetch"] = c.prefetch if c.prefetch > 0 else -1
            if dest.is_temporary:
                # Ours: the receiver makes the temporary destination (so it can send to it).
                props[f"{c.id}:temporary"] = True
        return gp.GPacket(gp.G_NEW_INTEREST, props, w.bytes())

    def _consumer_event(self, what: str, cons: Consumer) -> None:
        if not self._shared(cons):
            return
        sub = cons.subscription
        if what == "added" and sub is not None and sub.durable_key is not None:
            if sub.durable_key not in self._known_durables:
                self._known_durables.add(sub.durable_key)
                rec = self._interest_packet([cons])
                rec.props.update(N=sub.durable_key[1], I=sub.durable_key[0] or "")
                self._record(rec)
        if not self.links:
            return
        if what == "added":
            pkt = self._interest_packet([cons])
        else:
            w = gp.BodyWriter()
            self._uid(cons).write(w)
            sub = cons.subscription
            detach = sub is not None and sub.durable_key is not None
            kind = gp.INTEREST_DURABLE_DETACH if detach else gp.INTEREST_REM
            pkt = gp.GPacket(gp.G_INTEREST_UPDATE, {"C": 1, "T": kind}, w.bytes())
        for link in self.links.values():
            link.send(pkt)

    def _read_interest(self, r: gp.BodyReader) -> dict:
        version = r.int64()
        if version != gp.INTEREST_RECORD_VERSION:
            raise gp.GPacketError(f"interest record version {version}")
        rec: dict = {"dest": r.utf()}
        rec["uid"] = gp.ConsumerUID.read(r) if r.boolean() else None
        rec["client_id"] = r.utf() if r.boolean() else None
        rec["durable"] = r.utf() if r.boolean() else None
        rec["selector"] = r.utf() if r.boolean() else None
        rec["queue"] = r.boolean()
        rec["no_local"] = r.boolean()
        rec["ready"] = r.boolean()
        rec["jms_shared"] = False
        rec["shared_name"] = None
        # Older brokers end a record after "ready" (read here when it is the last one).
        if not r.at_end and r.boolean():
            r.int32()
        if not r.at_end:
            r.int32()
            rec["jms_shared"] = r.boolean()
            if r.boolean():
                rec["shared_name"] = r.utf()
        return rec

    def _new_interest(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        count = pkt.props.get("C", 0)
        if not isinstance(count, int) or count < 0 or count > 100000:
            raise gp.GPacketError(f"G_NEW_INTEREST count {count!r}")
        r = gp.BodyReader(pkt.payload)
        for _ in range(count):
            rec = self._read_interest(r)
            uid = rec["uid"]
            rec["temporary"] = uid is not None and bool(
                pkt.props.get(f"{uid.consumer_id}:temporary")
            )
            rec["mq_share"] = uid is not None and bool(pkt.props.get(f"{uid.consumer_id}:mqshare"))
            if uid is None or uid.broker != link.address:
                raise gp.GPacketError("interest whose consumer is not the sending broker's")
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
            if not dest.attach(rc):
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
            sub.attach(rc)
        self.remotes[key] = rc
        rc.queue.dispatch(now_ms())

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
        for _ in range(count):
            uid = gp.ConsumerUID.read(r)
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
        for uid in uids:
            if uid.broker != self.cfg.me:
                continue
            key = (link, uid.consumer_id)
            origin = self.inbound.get(key)
            if origin is None:
                origin = self.inbound[key] = InboundOrigin(self, link, uid, dest)
            entry = Entry(msg, origin, origin)
            dct = pkt.props.get(f"CUID-DCT:{uid.consumer_id}", 1)
            entry.count = max((dct if isinstance(dct, int) else 1) - 1, 0)
            entry.redelivered = redelivered
            origin.offer(entry)
            if origin.pending:
                self._pending.add(origin)
        if self._pending and self._pending_timer is None:
            self._pending_timer = asyncio.get_running_loop().call_later(0.005, self._flush_pending)

    def _flush_pending(self) -> None:
        self._pending_timer = None
        for origin in list(self._pending):
            origin.dispatch(now_ms())
            if not origin.pending:
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
        slot_key = (id(link), ack_type, redelivered, dead)
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
        for (_lid, ack_type, redelivered, dead), (link, items) in acks.items():
            w = gp.BodyWriter()
            for key, uid in items:
                w.raw(key)
                uid.write(w)
            props: dict[str, object] = {"T": ack_type, "C": len(items)}
            if redelivered:
                props["redelivered"] = True
            if dead[0] is not None:
                props["deadReason"] = dead[0]
            if dead[1] is not None:
                props["deadComment"] = dead[1]
            link.send(gp.GPacket(gp.G_MESSAGE_ACK, props, w.bytes()))

    def _message_ack(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        r = gp.BodyReader(pkt.payload)
        count = pkt.props.get("C", 0)
        ack_type = pkt.props.get("T")
        if not isinstance(count, int) or count < 0 or count > 1000000:
            raise gp.GPacketError(f"G_MESSAGE_ACK count {count!r}")
        redelivered = bool(pkt.props.get("redelivered"))
        dead_reason = pkt.props.get("deadReason")
        if dead_reason not in _DEAD_REASONS:
            dead_reason = dmq.UNDELIVERABLE  # a peer that does not say (or says nonsense)
        comment = pkt.props.get("deadComment")
        dead_comment = comment if isinstance(comment, str) else None
        router = self.router
        back: list[Entry] = []
        touched: dict[int, RemoteConsumer] = {}
        for _ in range(count):
            key = r.raw(SYSMSGID_SIZE)
            uid = gp.ConsumerUID.read(r)
            rc = self.remotes.get((link, uid.consumer_id))
            if rc is None:
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
            else:
                if not redelivered:
                    entry.count = max(entry.count - 1, 0)
                back.append(entry)
        if back:
            router.acks.return_unacked(None, back, redelivered=redelivered)
        t = now_ms()
        for rc in touched.values():
            rc.queue.dispatch(t)

    # -- the packet switch ----------------------------------------------------------------

    def on_packet(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        t = pkt.type
        if t == gp.G_MESSAGE_DATA:
            self._message_data(link, pkt)
        elif t == gp.G_MESSAGE_ACK:
            self._message_ack(link, pkt)
        elif t == gp.G_NEW_INTEREST:
            self._new_interest(link, pkt)
        elif t == gp.G_INTEREST_UPDATE:
            self._interest_update(link, pkt)
        elif t == gp.G_PING:
            if pkt.wants_reply:
                link.send(gp.GPacket(gp.G_PING_REPLY, {"S": 200, "X": pkt.props.get("X", 0)}))
        elif t == gp.G_GOODBYE:
            link.heard_goodbye()
            link.send(gp.GPacket(gp.G_GOODBYE_REPLY, {"S": 200}))
        elif t == gp.G_STOP_MESSAGE_FLOW:
            if not link.flow_stopped:
                log.info("broker %s asked to stop message flow to it", link.address)
            link.flow_stopped = True
            if pkt.wants_reply:
                link.send(gp.GPacket(gp.G_STOP_MESSAGE_FLOW_REPLY, {"S": 200}))
        elif t == gp.G_RESUME_MESSAGE_FLOW:
            if link.flow_stopped:
                log.info("broker %s resumed message flow to it", link.address)
            link.flow_stopped = False
            if pkt.wants_reply:
                link.send(gp.GPacket(gp.G_RESUME_MESSAGE_FLOW_REPLY, {"S": 200}))
            stamp = now_ms()
            for (rlink, _cid), rc in list(self.remotes.items()):
                if rlink is link:
                    rc.queue.dispatch(stamp)
        elif t in (gp.G_UPDATE_DESTINATION, gp.G_REM_DESTINATION):
            self._apply_destination(link, pkt)
        elif t == gp.G_REM_DURABLE_INTEREST:
            self._remove_durable(link, pkt)
        elif t == gp.G_CONFIG_CHANGE_EVENT:
            self._config_change_event(link, pkt)
        elif t == gp.G_GET_CONFIG_CHANGES_REQUEST:
            self._config_changes_request(link, pkt)
        elif t == gp.G_GET_CONFIG_CHANGES_REPLY:
            self._config_changes_reply(link, pkt)
        elif t in _REFUSALS_LOGGED:
            if pkt.props.get("S") != 200:
                log.warning(_REFUSALS_LOGGED[t], link.address, pkt.props.get("reason"))
        elif t in (gp.G_LOCK, gp.G_LOCK_REPLY):
            self.locks.on_packet(link, pkt)
        elif t == gp.G_RELOAD_CLUSTER:
            self._reload_requested(link, pkt)
        elif t in (gp.G_PING_REPLY, gp.G_GOODBYE_REPLY):
            pass
        elif pkt.wants_reply:
            link.send(gp.GPacket(t + 1, {"S": 501, "reason": f"{pkt.name} is not supported here"}))
        else:
            log.debug("cluster packet %s from %s ignored", pkt.name, link.describe())

    def set_flow_stopped(self, stopped: bool, why: str) -> None:
        """Cluster flow control: ask every broker to stop (or resume) sending us messages."""
        if stopped == self.flow_stopped:
            return
        self.flow_stopped = stopped
        log.warning(
            "cluster message flow to this broker %s (%s)", "stopped" if stopped else "resumed", why
        )
        kind = gp.G_STOP_MESSAGE_FLOW if stopped else gp.G_RESUME_MESSAGE_FLOW
        self._broadcast(gp.GPacket(kind, {}))

    # -- what others ask about the cluster --------------------------------------------

    def brokers(self) -> list[dict]:
        """Every broker of the cluster with its state (this one first)."""
        me = self.cfg.me
        out = [
            {
                "address": f"{me.host}:{me.port}",
                "instance": me.instance,
                "state": "RUNNING",
                "self": True,
            }
        ]
        for host, port in self.cfg.peers:
            link = self._link_to(host, port)
            out.append(
                {
                    "address": f"{host}:{port}",
                    "instance": link.address.instance if link and link.address else "",
                    "state": "RUNNING" if link is not None else "UNREACHABLE",
                    "self": False,
                }
            )
        return out

    def broker_list(self) -> str:
        """HELLO_REPLY's JMQBrokerList: the URLs of the brokers running in the cluster."""
        return ",".join(f"mq://{b['address']}/" for b in self.brokers() if b["state"] == "RUNNING")


__all__ = ["ClusterService"]
