"""The broker's periodic jobs: memory and disk checks, reaping idle auto-created
destinations, the drop log, access control reloads, the expiry sweep and pings."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker import props
from broker.protocol.packet import build_packet
from broker.protocol.types import FLAG_A, PacketType

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("broker")


async def every(seconds: float | Callable[[], float], job: Callable[[], Any]) -> None:
    """Run ``job`` every ``seconds`` (or as many as ``seconds()`` says each time) for
    ever; a failure is logged, not fatal."""
    while True:
        await asyncio.sleep(seconds() if callable(seconds) else seconds)
        try:
            job()
        except Exception:  # a failed sweep must not stop the next one
            log.exception("periodic job %s failed", getattr(job, "__name__", job))


class Housekeeping:
    """The periodic jobs of one broker, as tasks on its event loop."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._tasks: list[asyncio.Task] = []
        self._ping_task: asyncio.Task | None = None
        self._expiry_task: asyncio.Task | None = None
        self._access_polling = False

    def start(self) -> None:
        """The pings (imq.ping.enabled) and the broker's own sweeps."""
        b = self.broker
        if b.config.get(props.PING_ENABLED):
            self._ping_task = asyncio.create_task(self._ping_loop())
        self.add(0.5, b.check_memory)
        self.add(1, b.check_disk)
        self.add(self._reap_interval, self._reap)
        self.add(5, b.router.drops.flush)
        self.add(2, self._poll_access)

    def add(self, seconds: float | Callable[[], float], job: Callable[[], Any]) -> None:
        """Run ``job`` every ``seconds`` until :meth:`close`."""
        self._tasks.append(asyncio.create_task(every(seconds, job)))

    def restart_expiry_job(self) -> None:
        """(Re)start the periodic expiry sweep (imq.message.expiration.interval)."""
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        b = self.broker
        interval = max(b.config.get(props.EXPIRATION_INTERVAL), 1)
        self._expiry_task = asyncio.create_task(every(interval, b.router.reclaim_expired))

    def close(self) -> None:
        if self._ping_task:
            self._ping_task.cancel()
        for task in self._tasks:
            task.cancel()
        if self._expiry_task is not None:
            self._expiry_task.cancel()

    def _poll_access(self) -> None:
        """Re-read changed access control rules (file mtime, database rows) in the pool."""
        if self._access_polling:
            return
        self._access_polling = True

        def done(fut) -> None:
            self._access_polling = False
            if not fut.cancelled() and fut.exception() is not None:
                log.error("access control reload failed: %s", fut.exception())

        b = self.broker
        loop = asyncio.get_running_loop()
        loop.run_in_executor(b.executor, b.access.poll).add_done_callback(done)

    def _reap_interval(self) -> float:
        """Seconds to the next reaping pass: 5, or imq.autocreate.reaptime when shorter
        (read live: it changes at run time).  A destination is reaped a reaptime after
        the pass that found it unused, so a reaptime of a second or two is kept to
        within one more of it, not up to two passes of 5 s."""
        reaptime = self.broker.config.get(props.AUTOCREATE_REAPTIME)
        return min(5.0, max(1.0, float(reaptime)))

    def _reap(self) -> None:
        b = self.broker
        reaptime = b.config.get(props.AUTOCREATE_REAPTIME)
        for name in b.router.reap_idle(time.monotonic(), reaptime):
            log.info("auto-created destination %s removed: unused for %s s", name, reaptime)

    async def _ping_loop(self) -> None:
        b = self.broker
        c = b.config
        interval = max(c.get(props.PING_INTERVAL), 1)
        want_reply = c.get(props.PING_REPLY_ENABLE)
        close_after = c.get(props.PING_CLOSE_INTERVAL)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(b.connections.values()):
                if now - conn.last_read < interval:
                    continue
                if want_reply and conn.ping_outstanding > close_after:
                    conn.fatal(f"no answer to {conn.ping_outstanding} pings")
                    continue
                flags = FLAG_A if want_reply and conn.protocol_level >= 364 else 0
                if flags:
                    conn.ping_outstanding += 1
                conn.write(build_packet(PacketType.PING, flags=flags))


__all__ = ["Housekeeping", "every"]
