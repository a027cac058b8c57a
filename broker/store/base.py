"""The message store interface shared by the file store and the database store.

The router describes every durable change as a small record and hands records to
the store in batches; the store makes them durable in a background writer thread
and then calls back on the event loop, so the broker can answer SEND_REPLY (and
COMMIT, ACKNOWLEDGE...) only once the data is safe.  Many records share one fsync
(group commit).  On start the store replays what it holds into a
:class:`RecoveredState`.

Records (plain tuples, first item the kind):

=================  ============================================================
``DestAdd``         a destination to re-create on start (name, type, attributes)
``DestRemove``      it is gone (its messages go with it)
``DurableAdd``      a durable subscription (id, client id, name, topic, selector,
                    no_local, share)
``DurableRemove``   it is gone (its interests in messages go with it)
``MsgAdd``          a persistent message: its 32-byte SysMessageID key, the
                    destination, the packet bytes, and the interests that must be
                    settled before it can go (``""`` for a queue, durable ids for a
                    topic)
``MsgDelivered``    an interest's delivery count (so recovery can mark redelivered)
``MsgSettle``       one interest is settled (acknowledged, expired, moved to the
                    DMQ); the message is removable when all of its are
``TxnState``        a transaction's state and description (XA id, flags...)
``TxnSend``         a message held by a transaction (key, destination, bytes)
``TxnAck``          an acknowledgement held by a transaction (key, interest)
``TxnRemove``       the transaction is finished (its held work is applied or
                    dropped by the records that follow/precede it)
=================  ============================================================
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

log = logging.getLogger("broker.store")

QUEUE_INTEREST = ""


class DestAdd(NamedTuple):
    name: str
    dest_type: int
    attributes: dict


class DestRemove(NamedTuple):
    name: str
    dest_type: int


class DurableAdd(NamedTuple):
    sub_id: str
    client_id: str | None
    name: str
    topic: str
    selector: str | None
    no_local: bool
    share: str | None


class DurableRemove(NamedTuple):
    sub_id: str


class MsgAdd(NamedTuple):
    key: bytes
    destination: str
    dest_type: int
    raw: bytes
    interests: tuple[str, ...]


class MsgDelivered(NamedTuple):
    key: bytes
    interest: str
    count: int


class MsgSettle(NamedTuple):
    key: bytes
    interest: str


class TxnState(NamedTuple):
    txn_id: int
    state: int
    info: dict  # xid (hex), session id, auto-rollback, session-less, lifetime, created...


class TxnSend(NamedTuple):
    txn_id: int
    key: bytes
    destination: str
    dest_type: int
    raw: bytes


class TxnAck(NamedTuple):
    txn_id: int
    key: bytes
    interest: str


class TxnRemove(NamedTuple):
    txn_id: int


Record = (
    DestAdd
    | DestRemove
    | DurableAdd
    | DurableRemove
    | MsgAdd
    | MsgDelivered
    | MsgSettle
    | TxnState
    | TxnSend
    | TxnAck
    | TxnRemove
)


@dataclass
class StoredMessage:
    """A persistent message as recovered: its bytes and each open interest's count."""

    key: bytes
    destination: str
    dest_type: int
    raw: bytes
    # interest -> delivery count so far (0 = never delivered); settled ones are absent.
    interests: dict[str, int]


@dataclass
class StoredTransaction:
    txn_id: int
    state: int
    info: dict
    sends: list[TxnSend] = field(default_factory=list)
    acks: list[TxnAck] = field(default_factory=list)


@dataclass
class RecoveredState:
    """Everything a store held at start, in the order it was written."""

    destinations: list[DestAdd] = field(default_factory=list)
    durables: list[DurableAdd] = field(default_factory=list)
    messages: list[StoredMessage] = field(default_factory=list)
    transactions: list[StoredTransaction] = field(default_factory=list)
    # What recovery had to repair (torn tail bytes dropped, bad records...), for the log.
    repairs: list[str] = field(default_factory=list)


class Store:
    """Base class: batching, the writer thread and the callbacks; subclasses persist.

    Thread model: ``submit`` and ``after_durable`` are called on the event loop thread;
    ``_write_batch`` runs on the writer thread only.  Callbacks are run on the loop via
    ``call_soon_threadsafe`` once the batch that contained everything submitted
    before them is durable (written, and fsynced when ``sync`` is true).
    """

    def __init__(self, *, sync: bool) -> None:
        self.sync = sync
        self._pending: list[Record] = []
        self._callbacks: list[Callable[[], None]] = []
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._loop = None
        self._scheduled = False
        self.batches = 0
        self.records_written = 0
        self.failed: BaseException | None = None

    # -- subclass API ---------------------------------------------------------------

    def load(self) -> RecoveredState:
        """Read what is stored (called once, before ``start``)."""
        raise NotImplementedError

    def _write_batch(self, records: list[Record]) -> None:
        """Make ``records`` durable, in order (writer thread)."""
        raise NotImplementedError

    def _close_backend(self) -> None:
        """Release files / connections (writer thread stopped)."""

    def reset(self) -> None:
        """Delete everything stored (``-reset store``)."""
        raise NotImplementedError

    # -- event-loop side ------------------------------------------------------------

    def start(self, loop) -> None:
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)
        self._thread.start()
        # Records submitted during recovery (before there was a loop) go out now.
        self._schedule()

    def submit(self, records: Iterable[Record]) -> None:
        """Queue records; they are written at the end of this event-loop turn."""
        self._pending.extend(records)
        self._schedule()

    def after_durable(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the loop once everything submitted so far is durable."""
        self._callbacks.append(callback)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        # One batch per loop turn: everything submitted this turn shares one write/fsync.
        self._scheduled = False
        records, self._pending = self._pending, []
        callbacks, self._callbacks = self._callbacks, []
        if records or callbacks:
            self._queue.put((records, callbacks))

    def flush(self, timeout: float = 30.0) -> None:
        """Block until everything submitted is written (shutdown, tests)."""
        self._hand_over()
        done = threading.Event()
        self._queue.put(([], [_InThread(done.set)]))
        done.wait(timeout)

    def close(self) -> None:
        if self._thread is not None:
            self.flush()
            self._queue.put(None)
            self._thread.join(10)
            self._thread = None
        self._close_backend()

    # -- writer thread ----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            records, callbacks = item
            # Take whatever else is already waiting: one fsync for all of it.
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)
                    break
                records.extend(more[0])
                callbacks.extend(more[1])
            if records:
                try:
                    self._write_batch(records)
                    self.batches += 1
                    self.records_written += len(records)
                except BaseException as exc:  # the broker must learn of it, not the thread die
                    self.failed = exc
                    log.exception("message store write failed")
                    # Nothing is confirmed as stored; only flush() waiters are released.
                    for cb in callbacks:
                        if isinstance(cb, _InThread):
                            cb()
                    continue
            self._deliver(callbacks)

    def _deliver(self, callbacks: list[Callable[[], None]]) -> None:
        loop = self._loop
        on_loop = []
        for cb in callbacks:
            if loop is None or isinstance(cb, _InThread):
                cb()
            else:
                on_loop.append(cb)
        if on_loop:
            # One wake-up of the loop for the whole batch, not one per callback.
            try:
                loop.call_soon_threadsafe(_run_all, on_loop)  # type: ignore[union-attr]
            except RuntimeError:  # loop closed during shutdown
                pass


def _run_all(callbacks: list[Callable[[], None]]) -> None:
    for cb in callbacks:
        try:
            cb()
        except Exception:  # one failing reply must not keep the others back
            log.exception("store callback failed")


class _InThread:
    """A callback the writer thread runs itself (used by ``flush``, which blocks the loop)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def __call__(self) -> None:
        self.fn()
