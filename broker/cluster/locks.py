"""Cluster-wide locks (docs/developers/protocol.md): two brokers never grant the same resource.

A broker that wants ``clientid:<id>`` or ``durable:<clientid>:<name>`` broadcasts G_LOCK
and holds the resource only when every linked broker answered SUCCESS.  A broker
answers FAILURE when it holds the resource itself, and while it is acquiring the same
resource the older attempt (smaller ``TS``) wins; equal times answer BACKOFF.  A peer
that goes away is no longer waited for.  Locks live in memory: a broker's resources
are free again when it leaves the cluster.

A shared lock (``SH``=true: a client ID set with OpenMQ's JMQShare) is granted alongside
other shared holders and attempts, and refused by an unshared one (and the other way
round).  A client ID set with a namespace (JMQNamespace, OpenMQ's resource adapter) is
first locked unshared as ``clientid:<namespace>${%%}<id>``, then ``clientid:<id>`` itself,
as OpenMQ's brokers do.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.core.subscriptions import client_id_lock
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong

from .handlers import Handlers

if TYPE_CHECKING:
    from broker.core.subscriptions import Subscriptions

    from .link_driver import BrokerLink
    from .peers import Peers

log = logging.getLogger("broker.cluster")

LOCK_TIMEOUT = 60.0
_ids = itertools.count(int(time.time() * 1000))


class _Attempt:
    __slots__ = ("resource", "ts", "xid", "waiting", "shared", "result", "done")

    def __init__(self, resource: str, ts: int, xid: int, waiting: set[int], shared: bool) -> None:
        self.resource = resource
        self.ts = ts
        self.xid = xid
        self.waiting = waiting
        self.shared = shared
        self.result: int | None = None
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()


class ClusterLocks:
    """The lock requester and responder of one broker."""

    def __init__(self, peers: Peers, subs: Subscriptions, timeout: float = LOCK_TIMEOUT) -> None:
        self.peers = peers
        self.attempts: dict[str, _Attempt] = {}
        # (resource, shared) -> does this broker hold it so that a request of that kind
        # must be refused (asked by the responder side): client IDs by core's rule.
        self.holders: list[Callable[[str, bool], bool]] = [subs.holds_client_id_lock]
        self.timeout = timeout

    def handlers(self) -> Handlers:
        return {gp.G_LOCK: self.on_packet, gp.G_LOCK_REPLY: self.on_packet}

    def needed(self) -> bool:
        return bool(self.peers.links)

    async def acquire_client_id(self, cid: str, shared: bool, namespace: str | None) -> int:
        """The cluster's locks for a connection's client ID (SET_CLIENTID)."""
        if namespace is not None:
            result = await self.acquire(client_id_lock(cid, namespace))
            if result != gp.LOCK_SUCCESS:
                return result
        return await self.acquire(client_id_lock(cid), shared)

    def acquire_client_id_blocking(self, cid: str, shared: bool, namespace: str | None) -> int:
        """For a worker thread: :meth:`acquire_client_id` on the broker's loop."""
        loop = self.peers.loop
        assert loop is not None
        coro = self.acquire_client_id(cid, shared, namespace)
        return asyncio.run_coroutine_threadsafe(coro, loop).result(2 * self.timeout + 5)

    async def acquire(self, resource: str, shared: bool = False) -> int:
        """LOCK_SUCCESS, LOCK_FAILURE or LOCK_BACKOFF (TIMEOUT counts as FAILURE)."""
        links = list(self.peers.links.values())
        if not links:
            return gp.LOCK_SUCCESS
        attempt = _Attempt(
            resource, int(time.time() * 1000), next(_ids), {id(lk) for lk in links}, shared
        )
        self.attempts[resource] = attempt
        pkt = gp.GPacket(
            gp.G_LOCK,
            {"I": resource, "TS": JLong(attempt.ts), "X": JLong(attempt.xid), "SH": shared},
            flags=gp.A_BIT,
        )
        for link in links:
            link.send(pkt)
        try:
            return await asyncio.wait_for(asyncio.shield(attempt.done), self.timeout)
        except TimeoutError:
            log.warning(
                "cluster lock %s: no answer from every broker in %g s", resource, self.timeout
            )
            return gp.LOCK_FAILURE
        finally:
            if self.attempts.get(resource) is attempt:
                del self.attempts[resource]

    def acquire_blocking(self, resource: str) -> int:
        """For a worker thread: wait for :meth:`acquire` running on the broker's loop."""
        loop = self.peers.loop
        assert loop is not None
        fut = asyncio.run_coroutine_threadsafe(self.acquire(resource), loop)
        return fut.result(self.timeout + 5)

    def _finish(self, attempt: _Attempt, result: int) -> None:
        if not attempt.done.done():
            attempt.done.set_result(result)

    def on_packet(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        resource = pkt.props.get("I")
        xid = pkt.props.get("X")
        if not isinstance(resource, str) or not isinstance(xid, int):
            raise gp.GPacketError(f"{pkt.name} without a resource (I) or request id (X)")
        if pkt.type == gp.G_LOCK:
            ts = pkt.props.get("TS", 0)
            shared = pkt.props.get("SH") is True
            link.send(
                gp.GPacket(
                    gp.G_LOCK_REPLY,
                    {
                        "I": resource,
                        "X": xid,
                        "S": self._answer(resource, ts if isinstance(ts, int) else 0, shared),
                    },
                )
            )
            return
        attempt = self.attempts.get(resource)
        if attempt is None or attempt.xid != xid:
            return  # a stale reply
        status = pkt.props.get("S")
        if status != gp.LOCK_SUCCESS:
            self._finish(
                attempt, status if status in (gp.LOCK_FAILURE, gp.LOCK_BACKOFF) else gp.LOCK_FAILURE
            )
            return
        attempt.waiting.discard(id(link))
        if not attempt.waiting:
            self._finish(attempt, gp.LOCK_SUCCESS)

    def _answer(self, resource: str, ts: int, shared: bool = False) -> int:
        mine = self.attempts.get(resource)
        if mine is not None and not (shared and mine.shared):
            if not mine.done.done():
                if ts < mine.ts:
                    self._finish(mine, gp.LOCK_FAILURE)
                    return gp.LOCK_SUCCESS
                return gp.LOCK_FAILURE if ts > mine.ts else gp.LOCK_BACKOFF
            if mine.done.result() == gp.LOCK_SUCCESS:
                # Granted, and its taker has not run yet to record the holding.
                return gp.LOCK_FAILURE
        if any(h(resource, shared) for h in self.holders):
            return gp.LOCK_FAILURE
        return gp.LOCK_SUCCESS

    def link_up(self, link: BrokerLink) -> None:
        """A broker that joins while an attempt waits is asked too, so it cannot miss it."""
        for attempt in self.attempts.values():
            if attempt.done.done():
                continue
            attempt.waiting.add(id(link))
            props = {
                "I": attempt.resource,
                "TS": JLong(attempt.ts),
                "X": JLong(attempt.xid),
                "SH": attempt.shared,
            }
            link.send(gp.GPacket(gp.G_LOCK, props, flags=gp.A_BIT))

    def link_down(self, link: BrokerLink) -> None:
        for attempt in list(self.attempts.values()):
            attempt.waiting.discard(id(link))
            if not attempt.waiting:
                self._finish(attempt, gp.LOCK_SUCCESS)
