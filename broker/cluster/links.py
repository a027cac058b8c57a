"""The cluster service's links: who may link (the handshake's checks), what a link brings
and takes when it comes up or goes, dialling the peers and keeping links alive, and the
cluster configuration's reload.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.config import BrokerConfig, ConfigError
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong
from broker.protocol.portmapper import PortMapperError, encode_request, parse_table

from .config import ClusterConfig, ClusterConfigError, same_host
from .link import BrokerLink, LinkRefused
from .state import ClusterState

if TYPE_CHECKING:
    pass

log = logging.getLogger("broker.cluster")
RECONNECT_INTERVAL = 1.0
RECONNECT_MAX = 5.0


class LinkRules(ClusterState):
    """The links part of :class:`~broker.cluster.service.ClusterService` (a mixin, as
    the connection engine's rule sets are)."""

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


__all__ = ["LinkRules"]
