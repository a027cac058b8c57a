"""The transactions an administrator must see, kept in the shared data model.

Every XA transaction and any PREPARED or in-doubt one is a ``BrokerTransaction`` row
while it is open; the row goes when the transaction is finished (committed, rolled
back, timed out).  ``imqtxn list`` and the portal read these rows.

The router tells :meth:`TransactionRecords.transaction_changed` about every change on the event
loop; that only takes a snapshot.  The ORM work runs in the broker's thread pool, one
drain at a time (so the writes for one transaction stay in order) and coalesced (only
the latest state of a transaction is written).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Executor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from broker.protocol.types import TransactionState

if TYPE_CHECKING:
    from broker.core.transaction_record import Transaction

log = logging.getLogger("broker.transactions")

_GONE = frozenset(
    {TransactionState.COMMITTED, TransactionState.ROLLEDBACK, TransactionState.TIMED_OUT}
)


def admin_visible(txn: Transaction) -> bool:
    """XA, PREPARED or in doubt, and not finished."""
    if txn.state in _GONE:
        return False
    return txn.xid is not None or txn.state == TransactionState.PREPARED or txn.in_doubt


def snapshot(txn: Transaction) -> dict:
    """The row's fields (taken on the event loop; plain values only)."""
    x = txn.xid
    return {
        "state": txn.state.name,
        "xid": str(x) if x is not None else "",
        "xid_format_id": x.format_id if x is not None else None,
        "xid_gtrid": x.gtrid.hex() if x is not None else "",
        "xid_bqual": x.bqual.hex() if x is not None else "",
        "client_id": txn.client_id or "",
        "user": txn.user or "",
        "connection_id": txn.connection_id,
        "is_xa": x is not None,
        "in_doubt": txn.in_doubt,
        "created": datetime.fromtimestamp(txn.created / 1000, tz=UTC),
    }


class TransactionRecords:
    """Writes ``BrokerTransaction`` rows for one broker instance."""

    def __init__(self, instance: str, executor: Executor) -> None:
        self.instance = instance
        self.executor = executor
        self._lock = threading.Lock()
        # txn id -> fields to write, or None to delete the row.
        self._pending: dict[int, dict | None] = {}
        # The first drain removes what a previous run of this instance left.
        self._clear = True
        self._running = False
        # Ids that have a row (event loop thread only).
        self._recorded: set[int] = set()
        self.failed = 0

    def start(self) -> None:
        """Clear the rows of a previous run now (transactions the message store brings
        back are recorded again as the router restores them)."""
        self._kick()

    def transaction_changed(self, txn: Transaction) -> None:
        """A transaction observer (core/observers.py; event loop): record, update or drop."""
        if admin_visible(txn):
            self._recorded.add(txn.id)
            row: dict | None = snapshot(txn)
        elif txn.id in self._recorded:
            self._recorded.discard(txn.id)
            row = None
        else:
            return
        with self._lock:
            self._pending[txn.id] = row
        self._kick()

    def _kick(self) -> None:
        with self._lock:
            if self._running:
                return
            self._running = True
        try:
            self.executor.submit(self._drain)
        except RuntimeError:  # the pool is shut down: the broker is stopping
            with self._lock:
                self._running = False

    def _drain(self) -> None:
        from django.db import close_old_connections

        close_old_connections()
        while True:
            with self._lock:
                clear, self._clear = self._clear, False
                batch, self._pending = self._pending, {}
                if not clear and not batch:
                    self._running = False
                    return
            for attempt in range(1, self.ATTEMPTS + 1):
                try:
                    self._write(clear, batch)
                    break
                except Exception:
                    if attempt == self.ATTEMPTS:
                        self.failed += 1
                        log.exception("could not record transactions for administrators")
                    else:
                        time.sleep(0.05 * attempt)  # e.g. SQLite busy with another writer

    # Tries per batch before it is given up (and logged).
    ATTEMPTS = 5

    def _write(self, clear: bool, batch: dict[int, dict | None]) -> None:
        """Plain write statements, no read-then-write transaction: with SQLite a reader
        that must become a writer fails at once while another writer holds the lock,
        where a writer waits.  Only this drain writes these rows, so no race."""
        from django.utils import timezone

        from broker.models import BrokerTransaction

        rows = BrokerTransaction.objects.filter(broker_instance=self.instance)
        if clear:
            rows.delete()
        for txn_id, fields in batch.items():
            if fields is None:
                rows.filter(txn_id=txn_id).delete()
            elif not rows.filter(txn_id=txn_id).update(updated=timezone.now(), **fields):
                BrokerTransaction.objects.create(
                    broker_instance=self.instance, txn_id=txn_id, **fields
                )

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until everything queued is written (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running and not self._pending and not self._clear:
                    return True
            time.sleep(0.01)
        return False


__all__ = ["TransactionRecords", "admin_visible", "snapshot"]
