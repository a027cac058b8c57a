"""Queue consumer positions across the cluster (core/positions.py): OpenMQ's
``queue:<name>_<n>`` locks.

A local consumer of a clustered queue with a limit on active consumers gets its
position only after this broker took the position's lock (G_LOCK) from every linked
broker; a backup moving up into a freed active place takes that place's lock first and
then announces its new position (G_INTEREST_UPDATE, G_NEW_PRIMARY_INTEREST with the
position in ``<id>:position``, ours: stock brokers ignore that update).  A lock is held
for as long as a local consumer occupies the position: a request for it is refused.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.core.destination import QueueDestination
from broker.core.errors import now_ms
from broker.core.positions import lock_name
from broker.core.session import Consumer
from broker.protocol import gpacket as gp
from broker.protocol.types import DEST_QUEUE

from .config import PRIVATE_PREFIXES

if TYPE_CHECKING:
    from broker.core.dispatch import DeliveryTarget
    from broker.core.router import MessageRouter

    from .locks import ClusterLocks

log = logging.getLogger("broker.cluster")

# Positions one new consumer tries before it is refused (OpenMQ's brokers try until the
# queue's end; a failover queue has no end).
MAX_TRIES = 64
# An equal-time contention (LOCK_BACKOFF) is tried again after a pause this long at most.
BACKOFF_S = 0.25
BACKOFF_TRIES = 8


def parse_lock(resource: str) -> tuple[str, int] | None:
    """(queue, position) of a ``queue:<name>_<n>`` lock, None for another resource."""
    kind, _, rest = resource.partition(":")
    name, sep, pos = rest.rpartition("_")
    if kind != "queue" or not sep or not pos.isdigit():
        return None
    return name, int(pos)


class QueuePositions:
    """The positions of this broker's own queue consumers, held through cluster locks."""

    def __init__(
        self,
        router: MessageRouter,
        locks: ClusterLocks,
        announce: Callable[[QueueDestination, DeliveryTarget, int], None],
    ) -> None:
        self.router = router
        self.locks = locks
        self.announce = announce
        # Positions locked but not yet taken by a consumer (granted, attach to come).
        self.pending: set[tuple[str, int]] = set()
        self._serial: dict[str, asyncio.Lock] = {}
        locks.holders.append(self._holds)

    # -- the lock responder's side -------------------------------------------------

    def _holds(self, resource: str, _shared: bool) -> bool:
        place = parse_lock(resource)
        if place is None:
            return False
        if place in self.pending:
            return True
        dest = self.router.lookup(place[0], DEST_QUEUE)
        if not isinstance(dest, QueueDestination):
            return False
        return any(p == place[1] and isinstance(t, Consumer) for t, p in dest.positions.items())

    # -- PositionClaims (core/destination.py) ----------------------------------------

    def needed(self, dest: QueueDestination, target: DeliveryTarget) -> bool:
        return isinstance(target, Consumer) and self.governs(dest)

    def governs(self, dest: QueueDestination) -> bool:
        """Are ``dest``'s positions cluster-wide (a limited, clustered queue, linked)?"""
        return (
            self.locks.needed()
            and not dest.is_temporary
            and not dest.name.startswith(PRIVATE_PREFIXES)
            and not dest.attributes.get("isLocalOnly")
            and dest.limit("maxNumActiveConsumers") >= 0
        )

    def claim(self, dest: QueueDestination, target: DeliveryTarget, position: int) -> None:
        asyncio.get_running_loop().create_task(self._claim(dest, target, position))

    async def _claim(self, dest: QueueDestination, target: DeliveryTarget, position: int) -> None:
        async with self._lock(dest.name):
            ok = await self._take(dest.name, position)
            dest.claimed(target, position, ok)
            self.pending.discard((dest.name, position))
        if ok and isinstance(target, Consumer) and dest.positions.get(target) == position:
            log.info("consumer %s of queue %s is active now", target.id, dest.name)
            self.announce(dest, target, position)
            dest.dq.dispatch(now_ms())

    # -- a new local consumer -------------------------------------------------------

    async def first_free(self, dest: QueueDestination) -> int:
        """The first free position whose lock this broker got for a new consumer (kept
        pending until :meth:`settle`), or -1 when every one tried is held elsewhere."""
        async with self._lock(dest.name):
            mine = {p for n, p in self.pending if n == dest.name}
            for tries, position in enumerate(dest.free_positions(mine)):
                if tries >= MAX_TRIES:
                    break
                if await self._take(dest.name, position):
                    return position
            return -1

    def first_free_blocking(self, dest: QueueDestination) -> int:
        """For a worker thread: :meth:`first_free` on the broker's loop."""
        loop = self.locks.peers.loop
        assert loop is not None
        fut = asyncio.run_coroutine_threadsafe(self.first_free(dest), loop)
        return fut.result(BACKOFF_TRIES * (self.locks.timeout + BACKOFF_S) + 5)

    def settle(self, queue: str, position: int) -> None:
        """The consumer a position was locked for took it, or never will."""
        self.pending.discard((queue, position))

    # -- helpers -----------------------------------------------------------------

    def _lock(self, queue: str) -> asyncio.Lock:
        lock = self._serial.get(queue)
        if lock is None:
            lock = self._serial[queue] = asyncio.Lock()
        return lock

    async def _take(self, queue: str, position: int) -> bool:
        """Lock one position (kept pending on success)."""
        resource = lock_name(queue, position)
        for _ in range(BACKOFF_TRIES):
            result = await self.locks.acquire(resource)
            if result == gp.LOCK_SUCCESS:
                self.pending.add((queue, position))
                return True
            if result != gp.LOCK_BACKOFF:
                return False
            await asyncio.sleep(random.uniform(0.02, BACKOFF_S))
        return False


__all__ = ["QueuePositions", "parse_lock"]
