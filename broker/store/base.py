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

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

_T = TypeVar("_T")
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


@dataclass(slots=True)  # a restart may hold millions at once
class StoredMessage:
    """A persistent message as recovered: its bytes and each open interest's count."""

    key: bytes
    destination: str
    dest_type: int
    raw: bytes | None
    # interest -> delivery count so far (0 = never delivered); settled ones are absent.
    # Read only: a store may give many messages the same dict.
    interests: dict[str, int]
    # Loaded without its body (``Store.lazy_bodies``): ``raw`` is None, ``head`` is the
    # packet up to its body (the header fields routing needs, and the properties) and
    # ``size`` the length of the whole, which ``Store.read_bodies`` gives back.
    head: bytes | None = None
    size: int = 0


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
    # (A store may read them as they are iterated, in order, rather than hold them.)
    messages: Sequence[StoredMessage] = field(default_factory=list)
    transactions: list[StoredTransaction] = field(default_factory=list)
    # What recovery had to repair (torn tail bytes dropped, bad records...), for the log.
    repairs: list[str] = field(default_factory=list)
    # The (destination, type) of every message, when the store knows them without
    # reading the messages (else None: recovery reads them from ``messages``).
    message_destinations: set[tuple[str, int]] | None = field(default=None, compare=False)


def records_of(state: RecoveredState) -> list[Record]:
    """The records that rebuild ``state`` in an empty store, in its order (imqdbmgr's
    backup and restore move a store's content this way)."""
    out: list[Record] = [*state.destinations, *state.durables]
    for msg in state.messages:
        if msg.raw is None:
            raise ValueError("records_of needs a state loaded with its message bodies")
        out.append(MsgAdd(msg.key, msg.destination, msg.dest_type, msg.raw, tuple(msg.interests)))
        out.extend(MsgDelivered(msg.key, i, n) for i, n in msg.interests.items() if n)
    for txn in state.transactions:
        out.append(TxnState(txn.txn_id, txn.state, txn.info))
        out.extend(txn.sends)
        out.extend(txn.acks)
    return out


class Store:
    """Base class: batching, the writer thread and the callbacks; subclasses persist.

    Thread model: ``submit`` and ``after_durable`` are called on the event loop thread;
    ``_write_batch`` runs on the writer thread (or, for a store with ``inline`` set, on
    the loop when the writer has nothing in hand: see below).  ``after_durable``
    callbacks run on the loop once the batch that contained everything submitted
    before them is durable (written, and synced when ``sync`` is true).

    With sync, records nobody waits for yet (a turn with no ``after_durable``: settles,
    delivery counts) are held back to share the next batch's sync, for at most
    ``defer_delay`` seconds (``flush`` and ``close`` write them at once).

    Hand-off: the records of one loop turn go to the writer as one list at the end of
    the turn (a ``call_soon``), and the writer is woken only if it sleeps (one lock
    release); whatever piled up while it was writing is taken in one go, written with
    one write and one sync, and reported back to the loop with one
    ``call_soon_threadsafe`` carrying how many records are now durable.  Callbacks wait
    on the loop in a deque, each with the count of records submitted before it, so the
    writer never touches them.

    ``inline``: when the writer has nothing in hand, the loop writes and syncs the
    turn's batch itself at the end of the turn and answers at once: no wake-up of the
    writer thread and none of the loop afterwards (two thread switches, tens of
    microseconds on a virtual machine, saved per batch).  That is for a lone waiting
    producer: with sync on it is done only while batches have on average fewer than
    ``inline_max_waiters`` ``after_durable`` callbacks, since with several producers the
    loop had better go on reading and routing while the writer thread syncs (group
    commit); without sync (a write to the page cache) it is always done.  Inline
    writing is also given up (for ``inline_backoff`` seconds) when
    ``inline_slow`` batches in a row took longer than ``inline_max_sync`` each: a slow
    disk must not stall the loop (batches that had to start or grow a file, which the
    subclass marks by setting ``_slow_ok``, and batches of more than
    ``inline_judged_max`` records, don't count).
    """

    defer_delay = 0.01
    defer_max = 1000
    inline = False  # subclasses whose _write_batch may run on the loop thread set it
    inline_max_waiters = 1.5
    inline_max_sync = 0.002
    inline_slow = 5
    inline_backoff = 1.0
    # Only batches of up to this many records say whether the disk is slow: a consumer's
    # thousand acknowledgements take milliseconds to encode whatever the disk does.
    inline_judged_max = 64

    def __init__(self, *, sync: bool) -> None:
        self.sync = sync
        self._pending: list[Record] = []  # submitted, not handed over yet (loop thread)
        self._submitted = 0  # records submitted so far (loop thread)
        self._reported = 0  # of which the writer has reported on (loop thread)
        self._outstanding = 0  # hand-overs not reported yet (loop thread)
        self._waiting: deque[tuple[int, Callable[[], None]]] = deque()
        # Work for the writer thread: lists of records, _Job and _STOP (appended by the
        # loop, swapped out whole by the writer; list operations are atomic in CPython).
        self._inbox: list = []
        self._wake = threading.Lock()
        self._wake.acquire()
        self._sleeping = False
        self._io = threading.Lock()  # held while writing (either thread) or running a job
        self._written = 0  # records written or failed (writer side, under _io)
        self._thread: threading.Thread | None = None
        self._loop = None
        self._scheduled = False
        self._inline_until = 0.0
        self._inline_slow = 0  # inline batches in a row slower than inline_max_sync
        self._slow_ok = False  # set by _write_batch: this one did more than append
        self._cb_count = 0  # after_durable calls this turn
        self._defer_timer = None  # flushes records nobody waits for (with sync)
        self._waiters = 0.0  # moving average of after_durable calls per batch
        self.batches = 0
        self.records_written = 0
        self.inline_batches = 0
        self.failed: BaseException | None = None
        # Called on the loop when the store learns that another party took what it
        # stores (the database store's ownership, broker/store/ownership.py): the broker
        # must stop, as its memory no longer matches the store.
        self.on_lost: Callable[[], None] | None = None

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

    def data_directory(self):
        """The directory the store writes into, for the free-space watch (None: not
        a local directory, or not one of its own)."""
        return None

    # Set before ``load`` (by a broker that pages): messages are recovered without their
    # bodies (StoredMessage.head), which stay on disk until read back.  Only for stores
    # with ``reads_bodies``.
    lazy_bodies = False

    # Whether ``read_bodies`` gives back stored messages' bytes (the pager then keeps
    # only their keys in memory; without it, it swaps the bodies to its own area).
    reads_bodies = False

    def read_bodies(self, keys: list[bytes]) -> list[bytes | None]:
        """The bytes of the stored messages ``keys`` (None for one that is not, or no
        longer, stored or does not read back intact), from any thread, without waiting
        for the writer; raises when the store itself fails (the messages are then not
        lost: the caller tries again).  Only for stores with ``reads_bodies``."""
        raise NotImplementedError

    def holds(self, key: bytes) -> bool:
        """Is a message stored under ``key`` now?  (Asked for a send that says it is
        sent again, OpenMQ's R or I bit: a store that cannot tell answers False.)"""
        return False

    def write_now(self, records: Iterable[Record]) -> None:
        """Write ``records`` at once on this thread, outside a broker (tools: after
        ``load()``, without ``start()``)."""
        if self._thread is not None:
            raise RuntimeError("write_now is for a store no broker runs")
        self._write_batch(list(records))

    # -- event-loop side ------------------------------------------------------------

    @property
    def submitted(self) -> int:
        """How many records have been submitted so far: a caller compares two readings
        to learn whether something it did wrote to the store."""
        return self._submitted

    def start(self, loop) -> None:
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)
        self._thread.start()
        # Records submitted during recovery (before there was a loop) go out now.
        self._schedule()

    def submit(self, records: Iterable[Record]) -> None:
        """Queue records; they are written at the end of this event-loop turn."""
        n = len(self._pending)
        self._pending.extend(records)
        self._submitted += len(self._pending) - n
        if not self._scheduled:
            self._schedule()

    def after_durable(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the loop once everything submitted so far is durable."""
        self._cb_count += 1
        if self._pending and not self._scheduled:
            self._schedule()  # records held back as nobody waited for them: now someone does
        target = self._submitted
        if target <= self._reported and not self._waiting:
            # Nothing of it is still being written: on the next turn, not re-entrantly.
            loop = self._loop
            if loop is not None:
                loop.call_soon(callback)
                return
        self._waiting.append((target, callback))

    def _schedule(self) -> None:
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._hand_over)

    def _hand_over(self, inline: bool = True, defer: bool = True) -> None:
        # One batch per loop turn: everything submitted this turn shares one write/sync.
        self._scheduled = False
        records = self._pending
        if not records:
            return
        waiters = self._cb_count
        self._cb_count = 0
        if waiters:
            self._waiters += (waiters - self._waiters) * 0.2
        elif defer and self.sync and len(records) < self.defer_max and self._loop is not None:
            # Nobody waits for these (settles, delivery counts): they share the sync of
            # the next batch someone waits for, or go within defer_delay.
            if self._defer_timer is None:
                self._defer_timer = self._loop.call_later(self.defer_delay, self._undefer)
            return
        if self._defer_timer is not None:
            self._defer_timer.cancel()
            self._defer_timer = None
        self._pending = []
        if (
            inline
            and self.inline
            and self._outstanding == 0
            and (self._waiters < self.inline_max_waiters or not self.sync)
            and time.monotonic() >= self._inline_until
            and self._io.acquire(blocking=False)
        ):
            # The writer has nothing in hand: write here, answer now.
            try:
                self._slow_ok = False
                began = time.monotonic()
                ok = self._write_locked(records)
                upto = self._written
                took = time.monotonic() - began
            finally:
                self._io.release()
            if took <= self.inline_max_sync:
                self._inline_slow = 0
            elif not self._slow_ok and len(records) <= self.inline_judged_max:
                self._inline_slow += 1
                if self._inline_slow >= self.inline_slow:
                    self._inline_slow = 0
                    self._inline_until = began + took + self.inline_backoff
                    log.info(
                        "store syncs are slow (%.1f ms): syncing in the writer thread", took * 1e3
                    )
            self.inline_batches += 1
            self._report(upto, ok)
            return
        self._outstanding += 1
        self._give(records)

    def _undefer(self) -> None:
        self._defer_timer = None
        self._hand_over(inline=False, defer=False)

    def _give(self, item: object) -> None:
        """Hand ``item`` to the writer thread, waking it if it sleeps."""
        self._inbox.append(item)
        if self._sleeping:
            self._sleeping = False
            try:
                self._wake.release()
            except RuntimeError:  # released already (both sides saw it asleep)
                pass

    def _report(self, upto: int, ok: bool) -> None:
        """Records up to ``upto`` are durable (``ok``) or failed: settle their callbacks."""
        if upto > self._reported:
            self._reported = upto
        waiting = self._waiting
        while waiting and waiting[0][0] <= upto:
            _, cb = waiting.popleft()
            if ok:
                try:
                    cb()
                except Exception:  # one failing reply must not keep the others back
                    log.exception("store callback failed")
        # Nothing is confirmed for a failed batch: its callbacks are dropped.

    def run_in_writer(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` in the writer thread after everything handed to it so far."""
        self._give(_Job(fn))

    def call_in_writer(self, fn: Callable[[], _T]) -> asyncio.Future[_T]:
        """``fn()`` in the writer thread (the ORM off the event loop, after everything
        handed over so far); its result or exception arrives in the returned future."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[_T] = loop.create_future()

        def settle(result: object, exc: BaseException | None) -> None:
            if fut.done():  # the caller gave up waiting
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)  # type: ignore[arg-type]

        def job() -> None:
            try:
                result, exc = fn(), None
            except Exception as e:
                result, exc = None, e
            try:
                loop.call_soon_threadsafe(settle, result, exc)
            except RuntimeError:  # the loop is gone: the broker is stopping
                pass

        self.run_in_writer(job)
        return fut

    def flush(self, timeout: float = 30.0) -> None:
        """Block until everything submitted is written (shutdown, tests)."""
        if self._thread is None:
            return
        self._hand_over(inline=False, defer=False)
        done = threading.Event()
        self.run_in_writer(done.set)
        done.wait(timeout)

    def close(self) -> None:
        if self._thread is not None:
            self.flush()
            self._give(_STOP)
            self._thread.join(10)
            self._thread = None
            log.info(
                "%s: %d records written in %d batches (%d of them on the event loop)",
                type(self).__name__,
                self.records_written,
                self.batches,
                self.inline_batches,
            )
        self._close_backend()

    # -- writer thread ----------------------------------------------------------------

    def _write_locked(self, records: list[Record]) -> bool:
        """Write one batch (``_io`` held); False if it failed (then nothing is confirmed)."""
        try:
            self._write_batch(records)
        except BaseException as exc:  # the broker must learn of it, not the thread die
            self.failed = exc
            log.exception("message store write failed")
            self._written += len(records)
            return False
        self._written += len(records)
        self.batches += 1
        self.records_written += len(records)
        return True

    def _run(self) -> None:
        while True:
            if not self._inbox:
                self._sleeping = True
                if not self._inbox:
                    self._wake.acquire()
                self._sleeping = False
                continue
            items, self._inbox = self._inbox, []
            records: list[Record] = []
            handed = 0
            for item in items:
                if type(item) is list:
                    records.extend(item)
                    handed += 1
                    continue
                # A job or the stop marker: what came before it is written first.
                if handed:
                    self._write_and_report(records, handed)
                    records, handed = [], 0
                if item is _STOP:
                    return
                with self._io:
                    try:
                        item.fn()
                    except Exception:
                        log.exception("store job failed")
            if handed:
                self._write_and_report(records, handed)

    def _write_and_report(self, records: list[Record], handed: int) -> None:
        with self._io:
            ok = self._write_locked(records)
            upto = self._written
        loop = self._loop
        if loop is None:
            return
        try:
            # One wake-up of the loop for the whole batch, not one per callback.
            loop.call_soon_threadsafe(self._reported_by_writer, upto, ok, handed)
        except RuntimeError:  # loop closed during shutdown
            pass

    def _reported_by_writer(self, upto: int, ok: bool, handed: int) -> None:
        self._outstanding -= handed
        self._report(upto, ok)


class _Job:
    """Something the writer thread runs itself, in order with the records (flush, jobs)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn


_STOP = _Job(lambda: None)
