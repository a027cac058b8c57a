"""The broker's side of paging: the swap area and the pager made from the properties,
and the free-space watch that holds producers when the disk runs short.

``imq.swap.enabled`` (true), ``imq.swap.threshold`` (60: percent of the memory budget),
``imq.swap.dirpath`` (unset: ``<instance>/swap``), ``imq.swap.readahead`` (256 messages
per queue), ``imq.swap.minFreeSpace`` and ``imq.persist.minFreeSpace`` (64m each).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from broker import props
from broker.config import BrokerConfig
from broker.core.paging import Pager
from broker.core.router import MessageRouter
from broker.store.base import Store
from broker.store.swap import SwapArea

log = logging.getLogger("broker.paging")

# What imqcmd update bkr may change at run time (Paging.configure reads them).
RUNTIME = frozenset(
    p.name for p in (props.SWAP_THRESHOLD, props.SWAP_MIN_FREE, props.PERSIST_MIN_FREE)
)


class Paging:
    """The pager, its swap area and the disks they and the message store write to."""

    def __init__(
        self, pager: Pager, swap: SwapArea, store_dir: Path | None, c: BrokerConfig, budget: int
    ) -> None:
        self.pager = pager
        self.swap = swap
        self.store_dir = store_dir
        self.configure(c, budget)

    def configure(self, c: BrokerConfig, budget: int) -> None:
        """Read the properties that may change at run time (:data:`RUNTIME`): the
        free-space minimums and the threshold, a percent of the memory ``budget``."""
        self.swap_min_free = c.get(props.SWAP_MIN_FREE)
        self.store_min_free = c.get(props.PERSIST_MIN_FREE)
        self.threshold_percent = c.get(props.SWAP_THRESHOLD)
        self.set_budget(budget)

    def set_budget(self, budget: int) -> None:
        """The memory budget changed: the threshold follows it."""
        self.pager.threshold = budget * self.threshold_percent // 100

    def disk_short(self) -> str | None:
        """Why producers must be held for lack of disk space (None: there is room)."""
        problems = []
        checks = [(self.swap.directory, self.swap_min_free, props.SWAP_MIN_FREE.name)]
        if self.store_dir is not None:
            checks.append((self.store_dir, self.store_min_free, props.PERSIST_MIN_FREE.name))
        for where, minimum, name in checks:
            if minimum < 0:
                continue
            try:
                free = shutil.disk_usage(where).free
            except OSError as exc:
                problems.append(f"{where}: {exc.strerror or exc}")
                continue
            if free < minimum:
                problems.append(f"{where} has {free} bytes free, less than {name}={minimum}")
        return "; ".join(problems) or None

    def recovered(self, router: MessageRouter) -> None:
        """After recovery: what a store that loads bodies brought into memory past the
        threshold leaves it again."""
        n = self.pager.page_out_recovered(router.delivery_queues())
        if n:
            log.info("paging: %d recovered messages paged out", n)

    def close(self) -> None:
        st = self.pager.stats
        if st.paged_out or st.read_back:
            log.info(
                "paging: %d messages (%d bytes) paged out, %d (%d bytes) read back, %d lost",
                st.paged_out,
                st.paged_out_bytes,
                st.read_back,
                st.read_back_bytes,
                st.lost,
            )
        self.pager.close()
        self.swap.close()


def open_paging(
    c: BrokerConfig, router: MessageRouter, store: Store | None, budget: int
) -> Paging | None:
    """The pager the properties ask for, attached to ``router`` (None when disabled)."""
    if not c.get(props.SWAP_ENABLED):
        log.info("paging to disk is off (imq.swap.enabled=false): a backlog stays in memory")
        return None
    where = c.get(props.SWAP_DIRPATH)
    swap = SwapArea(Path(where) if where else c.instance_dir / "swap")
    removed = swap.open()
    if removed:
        log.info("swap area %s: %d file(s) of the previous run removed", swap.directory, removed)
    pager = Pager(0, swap=swap, store=store, readahead=c.get(props.SWAP_READAHEAD))
    paging = Paging(pager, swap, store.data_directory() if store is not None else None, c, budget)
    router.attach_pager(pager)
    log.info(
        "paging: message bodies leave memory past %d%% of the budget (%d bytes); swap area %s",
        paging.threshold_percent,
        pager.threshold,
        swap.directory,
    )
    return paging
