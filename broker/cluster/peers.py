"""The cluster service's peers: who may link (the handshake's checks), the links up and
their coming and going, dialling the peers and keeping links alive, reaching the other
brokers (broadcast, the master broker's link), leaving, and the cluster configuration's
reload.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Protocol

from broker.config import BrokerConfig, ConfigError
from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo
from broker.protocol.jtypes import JLong
from broker.protocol.portmapper import PortMapperError, encode_request, parse_table
from broker.security.tlsaccept import TlsListener, listening_socket, serve

from .config import ClusterConfig, ClusterConfigError, same_host
from .handlers import Handlers, ignore
from .link_driver import LinkRefused

if TYPE_CHECKING:
    from .link_driver import BrokerLink

log = logging.getLogger("broker.cluster")
RECONNECT_INTERVAL = 1.0
RECONNECT_MAX = 5.0
# asyncio's create_server default, which the cluster listener had before.
CLUSTER_BACKLOG = 100


class LinkFactory(Protocol):
    """Makes a link this broker dials (``expected``: the peer it looked up) or accepts."""

    def __call__(
        self, expected: tuple[str, int] | None = None, expected_instance: str | None = None
    ) -> BrokerLink: ...


class Peers:
    """This broker's links to the other brokers of its cluster (a part of
    :class:`~broker.cluster.service.ClusterService`, which makes the links)."""

    def __init__(
        self,
        cfg: ClusterConfig,
        session_id: int,
        new_link: LinkFactory,
        *,
        server_ssl: ssl.SSLContext | None = None,
        client_ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.cfg = cfg
        self.session_id = session_id
        self.start_ms = int(time.time() * 1000)
        # A new link to or from another broker (the service's: a link talks to all parts).
        self.new_link = new_link
        # imq.cluster.transport=ssl: the listener's and the dialler's TLS contexts.
        self.server_ssl = server_ssl
        self.client_ssl = client_ssl
        self.server: asyncio.Server | TlsListener | None = None
        # The links up, by the peer's address, and every link open (up or not).
        self.links: dict[gp.BrokerAddress, BrokerLink] = {}
        self.all_links: set[BrokerLink] = set()
        self._dialling: set[tuple[str, int]] = set()
        # The reason a link to a peer last closed before its handshake (logged once).
        self._unreachable: dict[tuple[str, int], str | None] = {}
        self.tasks: list[asyncio.Task] = []
        self.stopping = False
        self.loop: asyncio.AbstractEventLoop | None = None
        # Where RELOAD_CLUSTER reads the configuration again (set by the broker): a fresh
        # BrokerConfig from the instance's files and command line.
        self.reread_config: Callable[[], BrokerConfig] | None = None
        self._address_props: dict[str, object] | None = None

    def handlers(self) -> Handlers:
        return {
            gp.G_PING: self._ping,
            gp.G_PING_REPLY: ignore,
            gp.G_GOODBYE: self._goodbye,
            gp.G_GOODBYE_REPLY: ignore,
            gp.G_RELOAD_CLUSTER: self._reload_requested,
            gp.G_RELOAD_CLUSTER_REPLY: self._reload_reply,
        }

    # -- identity and handshake -----------------------------------------------------

    def address_props(self) -> dict[str, object]:
        """This broker's address as OpenMQ attaches it to G_GOODBYE and other packets
        (one dict, made once: callers copy it)."""
        if self._address_props is None:
            me = self.cfg.me
            self._address_props = {
                "instanceName": me.instance,
                "HA": False,
                "port": me.port,
                "brokerSession": JLong(self.session_id),
                "host": me.host,
            }
        return self._address_props

    def link_init(self, master_here: bool) -> gp.LinkInit:
        """This broker's LINK_INIT (``master_here``: it is the master broker)."""
        me = self.cfg.me
        master = None
        if self.cfg.master is not None:
            # OpenMQ names the master's instance once it knows it: its own when it is
            # the master, "???" otherwise.
            instance = me.instance if master_here else "???"
            master = gp.BrokerAddress(self.cfg.master[0], instance, self.cfg.master[1])
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
        me = self.cfg.me
        return BrokerInfo(me.host, me.instance, me.port, self.session_id, self.start_ms).encode()

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

    # -- life cycle ------------------------------------------------------------------

    async def listen(self) -> None:
        """Open the cluster port."""
        self.loop = asyncio.get_running_loop()
        host = self.cfg.cluster_host or None
        self.server = await serve(
            self.new_link,
            listening_socket(host, self.cfg.cluster_port, CLUSTER_BACKLOG),
            self.server_ssl,
            "cluster",
        )
        log.info(
            "cluster service (%s CLUSTER) listening on %s:%s; brokers: %s",
            self.cfg.transport,
            host or "*",
            self.port,
            ", ".join(f"{h}:{p}" for h, p in self.cfg.peers),
        )

    def keep_linked(self) -> None:
        """Start dialling the peers this broker initiates for, and the keep-alive."""
        self.tasks += [
            asyncio.create_task(self._dial_loop()),
            asyncio.create_task(self._ping_loop()),
        ]

    def spawn(self, coro: Coroutine[object, object, None]) -> None:
        """Run ``coro`` as a task that goes with the service (cancelled at stop)."""
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.append(task)
        task.add_done_callback(lambda t: self.tasks.remove(t) if t in self.tasks else None)

    @property
    def port(self) -> int:
        if self.server is not None and self.server.sockets:
            return self.server.sockets[0].getsockname()[1]
        return self.cfg.cluster_port

    async def stop(self) -> None:
        """Leave the cluster cleanly: GOODBYE on every link, then close."""
        self.stopping = True
        for t in self.tasks:
            t.cancel()
        for link in list(self.links.values()):
            link.leave()
        if self.server is not None:
            self.server.close()
        for link in list(self.all_links):
            link.close()
        await asyncio.sleep(0)

    # -- a link comes and goes --------------------------------------------------------

    def replaced(self, link: BrokerLink) -> BrokerLink | None:
        """The older link to the broker ``link`` (up now) links to, if there is one."""
        assert link.address is not None
        old = self.links.get(link.address)
        return old if old is not None and old is not link else None

    def add(self, link: BrokerLink) -> None:
        addr = link.address
        assert addr is not None
        self.links[addr] = link
        self.all_links.add(link)
        self._unreachable.pop((addr.host, addr.port), None)
        log.info(
            "cluster link to broker %s up (%s)",
            addr,
            "dialled" if link.expected else "accepted",
        )

    def closed(self, link: BrokerLink) -> None:
        self.all_links.discard(link)
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
            if not self.stopping:  # a stock peer answers our GOODBYE with its own
                log.info("broker %s left the cluster (GOODBYE)", addr)
        elif not self.stopping:
            # A link this broker dropped had its reason logged by the drop.
            why = "dropped (reason above)" if link.logged else link.reason
            log.warning("cluster link to broker %s lost: %s", addr, why)

    # -- reaching the other brokers ---------------------------------------------------

    def broadcast(self, pkt: gp.GPacket) -> None:
        for link in self.links.values():
            link.send(pkt)

    def master_link(self) -> BrokerLink | None:
        """The link up to the master broker (imq.cluster.masterbroker), if any."""
        master = self.cfg.master
        if master is None:
            return None
        for addr, link in self.links.items():
            if addr.port == master[1] and same_host(addr.host, master[0]):
                return link
        return None

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

    # -- packets -----------------------------------------------------------------------

    def _ping(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        if pkt.wants_reply:
            link.send(gp.GPacket(gp.G_PING_REPLY, {"S": 200, "X": pkt.props.get("X", 0)}))

    def _goodbye(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        link.heard_goodbye()
        link.send(gp.GPacket(gp.G_GOODBYE_REPLY, {"S": 200}))
        # OpenMQ closes the link once its reply has gone, and a stock broker that is
        # shutting down waits for every peer to do so (imq.cluster.shutdownTimeout, 30 s)
        # before it exits.
        link.close()

    def _reload_reply(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        # Its only use is to say that a peer could not do what we asked.
        if pkt.props.get("S") != 200:
            log.warning(
                "broker %s could not reload the cluster configuration: %s",
                link.address,
                pkt.props.get("reason"),
            )

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
        peers = await loop.run_in_executor(None, lambda: self._reread_peers(reread))
        if propagate:
            self.broadcast(gp.GPacket(gp.G_RELOAD_CLUSTER, {}, flags=gp.A_BIT))
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

    def _reread_peers(self, reread: Callable[[], BrokerConfig]) -> list[tuple[str, int]]:
        """The broker list of the configuration read again (a thread of its own)."""
        try:
            config = reread()
        except ConfigError as exc:  # the cluster file cannot be read: nothing changes
            raise ClusterConfigError(str(exc)) from None
        return ClusterConfig.read_peers(config, self.cfg.me)

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

        self.spawn(run())

    # -- dialling ------------------------------------------------------------------

    def _initiates(self, peer: tuple[str, int]) -> bool:
        me = self.cfg.me
        return (me.port, me.host) < (peer[1], peer[0])

    def link_to(self, host: str, port: int) -> BrokerLink | None:
        """The link up to the broker whose port mapper is ``host:port``, if any."""
        return self._link_to(host, port)

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
                    lambda: self.new_link(peer, instance),
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


__all__ = ["Peers"]
