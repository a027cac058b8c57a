"""The database message store (``imq.persist.store=jdbc``): the file store's data in
Django models, for setups that want a shared or managed database.

Every row carries the broker instance name, so several brokers can share one database
and ``reset`` only deletes this broker's rows.  Records are applied by the writer thread,
one database transaction per batch: the commit is the durability point, so the batch is
either all there after a crash or not there at all.

A batch is first folded in memory into its net effect (a message added and settled in
the same batch never reaches the database; delivery counts keep the latest), then written
with bulk statements: one INSERT for the messages, one for their interests, one DELETE per
interest for the settles.  Message records (the hot path) are written in plain SQL, not
through the ORM; on PostgreSQL those statements go as one string, and a batch of message
records only goes BEGIN to COMMIT in one round trip.  ``DestRemove`` and ``DurableRemove``
act on rows the batch cannot see, so they write out what was folded so far and run in
place, which keeps the records' order.  The semantics are those of ``tests/store_contract.replay``; the one that
costs something is "a MsgAdd for a stored key replaces it in place": keys are inserted
without a look-up, and a batch that meets a stored key is redone, replacing.

``sync`` has no separate meaning here: the database's commit is the durability point
(with PostgreSQL, as durable as its ``fsync`` and ``synchronous_commit`` make it), and
``after_durable`` callbacks run only after it.  The broker decides from ``sync`` whether
to wait for them before replying.

The instance's rows are owned (:mod:`.ownership`): ``load`` claims them, the writer
thread beats every ``heartbeat_interval`` seconds (queued by a loop timer, run in order
with the batches, never on the loop) and ``close`` releases them after the last batch, so
the expiry job can tell a stopped instance from a running one and reclaim only the
former's expired rows (:mod:`.dbexpiry`).  A beat that finds its epoch gone (the job took
the rows of a broker that was stalled past the threshold) calls ``on_lost``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from django.db import DataError, IntegrityError, connections, transaction
from django.db.models import BinaryField
from django.db.models.functions import Length, Substr

from broker import models as m

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

from broker.protocol.packet import body_offset

from . import dbtables, ownership
from .base import (
    DestAdd,
    DestRemove,
    DurableAdd,
    DurableRemove,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    RecoveredState,
    Store,
    StoredMessage,
    StoredTransaction,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
    records_of,
)

log = logging.getLogger("broker.store")

_T = TypeVar("_T")

_MESSAGE_RECORDS = (MsgAdd, MsgSettle, MsgDelivered)

# Rows per INSERT statement and keys per IN (...) list: below SQLite's 32,766 bound
# variables and PostgreSQL's 65,535 even for the widest row.
_CHUNK = 500


def _marks(items: list) -> str:
    """``%s, %s, ...``: one placeholder per item of an IN list."""
    return ", ".join(["%s"] * len(items))


def _joined(statements: list[tuple[str, list[object]]]) -> list[object]:
    """The parameters of several statements sent as one string."""
    return [arg for _, args in statements for arg in args]


def _chunks(items: list, size: int = _CHUNK) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass
class _Folded:
    """The net effect of a run of records, before it is written."""

    # key (hex) -> (record, open interests -> delivery count), in MsgAdd order.
    added: dict[str, tuple[MsgAdd, dict[str, int]]] = field(default_factory=dict)
    # Keys whose stored message (if any) goes: re-added with no interest, or re-added and
    # settled within the run.
    dropped: set[str] = field(default_factory=set)
    # For messages already in the database, by key: interests settled / delivery counts.
    settled: dict[str, set[str]] = field(default_factory=dict)
    delivered: dict[str, dict[str, int]] = field(default_factory=dict)
    destinations: dict[tuple[str, int], DestAdd] = field(default_factory=dict)
    durables: dict[str, DurableAdd] = field(default_factory=dict)
    txn_removed: set[int] = field(default_factory=set)
    # txn id -> its latest state, or None when only work was seen (a row must exist),
    # in the order of each transaction's first record.
    txns: dict[int, TxnState | None] = field(default_factory=dict)
    # txn id -> its sends and acks in order (only the order within a transaction matters).
    txn_work: dict[int, list[TxnSend | TxnAck]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(
            self.added
            or self.dropped
            or self.settled
            or self.delivered
            or self.destinations
            or self.durables
            or self.txn_removed
            or self.txns
            or self.txn_work
        )


# Loading heads only: the first bytes of each message read at load.  A head (header,
# variable header, properties) longer than that is read whole, once.
_HEAD_PREFIX = 1024


def read_state(inst: str, *, using: str, heads_only: bool = False) -> RecoveredState:
    """Everything ``inst``'s rows hold, in the order it was written (the caller holds a
    transaction, so it is one consistent snapshot).  ``heads_only``: messages come back
    without their bodies (``StoredMessage.head`` and ``size``; see Store.lazy_bodies)."""
    db = using
    state = RecoveredState()
    for name, dest_type, attributes in (
        m.StoredDestination.objects.using(db)
        .filter(broker_instance=inst)
        .order_by("id")
        .values_list("name", "dest_type", "attributes")
    ):
        state.destinations.append(DestAdd(name, dest_type, attributes))
    for row in (
        m.StoredDurable.objects.using(db)
        .filter(broker_instance=inst)
        .order_by("id")
        .values_list("sub_id", "client_id", "name", "topic", "selector", "no_local", "share")
    ):
        state.durables.append(DurableAdd(*row))

    interests: dict[str, dict[str, int]] = defaultdict(dict)
    for key, interest, count in (
        m.StoredInterest.objects.using(db)
        .filter(broker_instance=inst)
        .order_by("id")
        .values_list("key", "interest", "delivery_count")
        .iterator(chunk_size=2000)
    ):
        interests[key][interest] = count
    rows = m.StoredMessage.objects.using(db).filter(broker_instance=inst).order_by("id")
    messages: list[StoredMessage] = []
    state.messages = messages
    if heads_only:
        _read_heads(rows, interests, messages)
    else:
        for key, destination, dest_type, raw in rows.values_list(
            "key", "destination", "dest_type", "raw"
        ).iterator(chunk_size=2000):
            open_ = interests.get(key)
            if not open_:  # every interest settled: the message is gone
                continue
            messages.append(
                StoredMessage(bytes.fromhex(key), destination, dest_type, bytes(raw), open_)
            )

    txns: dict[int, StoredTransaction] = {}
    for txn_id, txn_state, info in (
        m.StoredTransaction.objects.using(db)
        .filter(broker_instance=inst)
        .order_by("id")
        .values_list("txn_id", "state", "info")
    ):
        txns[txn_id] = StoredTransaction(txn_id, txn_state, info)
    for txn_id, kind, key, destination, dest_type, raw, interest in (
        m.StoredTxnWork.objects.using(db)
        .filter(broker_instance=inst)
        .order_by("id")
        .values_list("txn_id", "kind", "key", "destination", "dest_type", "raw", "interest")
        .iterator(chunk_size=2000)
    ):
        txn = txns.get(txn_id)
        if txn is None:  # (the writer always creates the row; as replay would)
            txn = txns[txn_id] = StoredTransaction(txn_id, 0, {})
        if kind == m.StoredTxnWork.Kind.SEND:
            txn.sends.append(
                TxnSend(txn_id, bytes.fromhex(key), destination, dest_type, bytes(raw))
            )
        else:
            txn.acks.append(TxnAck(txn_id, bytes.fromhex(key), interest))
    state.transactions.extend(txns.values())
    return state


def _read_heads(rows, interests: dict[str, dict[str, int]], messages: list[StoredMessage]) -> None:
    """Messages of ``rows`` as their heads and lengths (the database cuts them)."""
    long_heads: dict[str, int] = {}  # key -> index in messages
    for key, destination, dest_type, prefix, size in rows.values_list(
        "key",
        "destination",
        "dest_type",
        Substr("raw", 1, _HEAD_PREFIX, output_field=BinaryField()),
        Length("raw"),
    ).iterator(chunk_size=2000):
        open_ = interests.get(key)
        if not open_:
            continue
        head = bytes(prefix)
        off = body_offset(head)
        if off == len(head) and len(head) < size:
            long_heads[key] = len(messages)  # its head runs past the prefix
        messages.append(
            StoredMessage(bytes.fromhex(key), destination, dest_type, None, open_, head[:off], size)
        )
    keys = list(long_heads)
    for chunk in _chunks(keys):
        for key, raw in rows.filter(key__in=chunk).values_list("key", "raw"):
            whole = bytes(raw)
            messages[long_heads[key]].head = whole[: body_offset(whole)]


class DatabaseStore(Store):
    """The message store in the Django database ``using`` (``imq.persist.store=jdbc``).

    Rows are this ``broker_instance``'s.  ``sync`` is kept for the common interface only:
    the commit is the durability point either way (see the module docstring).
    """

    def __init__(
        self,
        broker_instance: str,
        *,
        sync: bool,
        using: str = "default",
        heartbeat_interval: float = 5.0,
        address: str = "",
        claim_wait: float = 120.0,
        ha: bool = False,
        cluster_id: str = "",
        stale_beats: float = ownership.DEFAULT_STALE_BEATS,
        create_tables: bool = True,
    ) -> None:
        super().__init__(sync=sync)
        # imq.persist.storecreate.all: create the store's tables at load if none exists.
        self.create_tables = create_tables
        self.broker_instance = broker_instance
        self.using = using
        # The writer thread's own Django connection, once it runs.
        self._writer_connection: BaseDatabaseWrapper | None = None
        self.one_trip_writes = 0  # batches sent as one round trip (PostgreSQL, messages only)
        # Ownership of the instance's rows (broker/store/ownership.py): claimed by load.
        self.heartbeat_interval = heartbeat_interval
        self.address = address
        self.claim_wait = claim_wait
        self.epoch: int | None = None
        self.lost = False  # another party took the rows (see ownership.py)
        self._beat_timer: asyncio.TimerHandle | None = None
        self._beat_queued = False
        # HA cluster member (imq.cluster.ha): its row says so, and a live broker with the
        # same id keeps this one from starting (ownership.claim).
        self.ha = ha
        self.cluster_id = cluster_id
        self.stale_beats = stale_beats
        self.fenced_writes = 0  # batches refused because the epoch had moved on
        # Set by the broker before close(): an HA broker's rows go to another broker.
        self.failover_on_release = False
        # Reads on behalf of the event loop (read_bodies), made when first needed.
        self._loop_reader: ThreadPoolExecutor | None = None

    # -- reading ---------------------------------------------------------------------

    def load(self) -> RecoveredState:
        """Claim this broker instance's rows (see :mod:`.ownership`), then rebuild what
        it stored, in the order it was written."""
        inst = self.broker_instance
        db = self.using
        created = dbtables.ensure(db, create=self.create_tables)
        if created:
            log.info("database store: created its tables (%s)", ", ".join(created))
        self.epoch = ownership.claim(
            inst,
            using=db,
            interval=self.heartbeat_interval,
            address=self.address,
            wait=self.claim_wait,
            ha=self.ha,
            cluster_id=self.cluster_id,
            stale_beats=self.stale_beats,
        )
        with transaction.atomic(using=db):  # one consistent snapshot
            return read_state(inst, using=db, heads_only=self.lazy_bodies)

    # Bodies are read back by key from the database, on the pager's reader thread (its
    # own connection): a paged backlog keeps no bodies in memory or in the swap area.
    reads_bodies = True

    def read_bodies(self, keys: list[bytes]) -> list[bytes | None]:
        """The stored bytes of ``keys`` (see Store.read_bodies): a committed row is all
        there is to read, so no writer is waited for."""
        return self._off_loop(lambda: self._read_bodies(keys))

    def holds(self, key: bytes) -> bool:
        """See Store.holds: one query."""
        return self._off_loop(
            lambda: (
                m.StoredMessage.objects.using(self.using)
                .filter(broker_instance=self.broker_instance, key=key.hex())
                .exists()
            )
        )

    def _off_loop(self, query: Callable[[], _T]) -> _T:
        """``query``'s result, run here, or, on the event loop (a browser, an
        administrator's listing, the DMQ copy, a send checked for being a repeat), on a
        thread of the store's own while the loop waits (the ORM refuses async contexts),
        as it waits for a file store's read."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # the pager's reader thread
            return query()
        if self._loop_reader is None:  # (only the loop's thread gets here)
            self._loop_reader = ThreadPoolExecutor(1, thread_name_prefix="store-read")
        return self._loop_reader.submit(query).result()

    def _read_bodies(self, keys: list[bytes]) -> list[bytes | None]:
        hexes = [k.hex() for k in keys]
        found: dict[str, bytes] = {}
        rows = m.StoredMessage.objects.using(self.using).filter(
            broker_instance=self.broker_instance
        )
        # A DatabaseError goes to the caller: the database failed, the messages are not
        # lost (None would say they were: the pager then gives up on them).
        for chunk in _chunks(hexes):
            for key, raw in rows.filter(key__in=chunk).values_list("key", "raw"):
                found[key] = bytes(raw)
        for h in hexes:
            if h not in found:
                log.error("database store: message %s is not stored (any more)", h)
        return [found.get(h) for h in hexes]

    def reset(self) -> None:
        """Delete every row of this broker instance (``-reset store``)."""
        dbtables.ensure(self.using, create=self.create_tables)
        with transaction.atomic(using=self.using):
            self._delete_rows()

    def _delete_rows(self) -> None:
        for model in _MODELS:
            model.objects.using(self.using).filter(broker_instance=self.broker_instance).delete()

    def replace_rows(self, state: RecoveredState) -> None:
        """Make this instance's rows hold ``state`` and nothing else, in the caller's
        transaction (``imqdbmgr restore``; the store is not loaded nor started)."""
        self._delete_rows()
        self._apply(records_of(state), replacing=False)

    # -- ownership: heartbeat and release ---------------------------------------------

    def start(self, loop) -> None:
        super().start(loop)
        if self.epoch is not None and self.heartbeat_interval > 0:
            self._beat_timer = loop.call_later(self.heartbeat_interval, self._beat_due)

    def _beat_due(self) -> None:
        # On the loop: only queue the beat; the database is touched in the writer thread.
        self._beat_timer = self._loop.call_later(self.heartbeat_interval, self._beat_due)
        if not self._beat_queued:  # a writer busy longer than an interval: one is enough
            self._beat_queued = True
            self.run_in_writer(self._beat)

    def _beat(self) -> None:
        """Writer thread: refresh the heartbeat, or learn that the rows were taken."""
        self._beat_queued = False
        if self.lost or self.epoch is None:
            return
        try:
            ours = ownership.beat(self.broker_instance, self.epoch, using=self.using)
        except Exception as exc:  # the database is away: the next beat tries again
            log.warning("database store heartbeat failed: %s", exc)
            connections[self.using].close()
            return
        if not ours:
            self._lose("its heartbeat found the instance's rows taken (epoch changed)")

    def _lose(self, why: str) -> None:
        self.lost = True
        log.error(
            "database store: instance %s lost its rows: %s; the broker must stop",
            self.broker_instance,
            why,
        )
        loop, on_lost = self._loop, self.on_lost
        if loop is not None and on_lost is not None:
            try:
                loop.call_soon_threadsafe(on_lost)
            except RuntimeError:  # loop closed during shutdown
                pass

    def _release(self) -> None:
        """Writer thread, after the last write: the rows are unowned now."""
        if self.lost or self.epoch is None:
            return
        try:
            if not ownership.release(
                self.broker_instance,
                self.epoch,
                using=self.using,
                failover=self.ha and self.failover_on_release,
            ):
                self._lose("at shutdown the instance's rows were found taken")
        except Exception:
            log.exception("database store: releasing instance %s failed", self.broker_instance)

    def close(self) -> None:
        if self._beat_timer is not None:
            self._beat_timer.cancel()
            self._beat_timer = None
        if self._thread is not None:
            self.flush()
            self.run_in_writer(self._release)  # after every record, before the stop
        if self._loop_reader is not None:
            # Its thread's own connection is closed by that thread.
            self._loop_reader.submit(connections[self.using].close).result()
            self._loop_reader.shutdown()
            self._loop_reader = None
        super().close()

    # -- writing (writer thread) -----------------------------------------------------------

    def _run(self) -> None:
        # Django connections are per thread: this thread gets its own, opened on first use.
        conn = self._writer_connection = connections[self.using]
        try:
            super()._run()
        finally:
            # Closed here, by its own thread: close() runs on the broker's event loop,
            # where Django refuses to touch a connection (SynchronousOnlyOperation).
            conn.close()

    # -- fencing: every batch checks, in its own transaction, that the rows are still ours

    def _fence_statements(self) -> list[tuple[str, list[object]]]:
        """PostgreSQL: statements that fail the transaction (division by zero) unless the
        owner row still has this store's epoch, and keep that row share-locked until the
        commit.  A takeover (``SELECT ... FOR UPDATE`` of that row, then epoch + 1) thus
        waits for a batch in progress, and a batch after it fails: a broker that was
        paused past the heartbeat threshold cannot write over the broker that took its
        rows.  Its session is ended by the server if it stalls inside a transaction, so a
        paused broker cannot hold the lock either."""
        owner_t = connections[self.using].ops.quote_name(m.StoreOwner._meta.db_table)
        idle_ms = max(1000, int(self.heartbeat_interval * self.stale_beats * 1000))
        return [
            (f"SET LOCAL idle_in_transaction_session_timeout = {idle_ms}", []),
            (f"SELECT 1 / (SELECT count(*) FROM (SELECT 1 FROM {owner_t} WHERE broker_instance"
             f" = %s AND epoch = %s FOR SHARE) AS owned)::int",
             [self.broker_instance, self.epoch]),
        ]  # fmt: skip

    def _fence(self) -> None:
        """Inside the batch's transaction: raise :class:`StoreFenced` unless still ours."""
        if self.epoch is None:
            return
        conn = connections[self.using]
        if conn.vendor == "postgresql":
            try:
                with transaction.atomic(using=self.using):  # a savepoint to fail in
                    self._execute(self._fence_statements())
            except DataError:
                self._fenced()
            return
        with conn.cursor() as cursor:  # SQLite: the write transaction holds the database
            cursor.execute(
                f"SELECT 1 FROM {conn.ops.quote_name(m.StoreOwner._meta.db_table)}"
                " WHERE broker_instance = %s AND epoch = %s",
                [self.broker_instance, self.epoch],
            )
            if cursor.fetchone() is None:
                self._fenced()

    def _still_ours(self) -> bool:
        return (
            m.StoreOwner.objects.using(self.using)
            .filter(broker_instance=self.broker_instance, epoch=self.epoch)
            .exists()
        )

    def _fenced(self) -> None:
        self.fenced_writes += 1
        if not self.lost:
            self._lose(
                f"a write found epoch {self.epoch} fenced off (another broker took the rows)"
            )
        raise StoreFenced(f"instance {self.broker_instance}: epoch {self.epoch} is fenced off")

    def _write_batch(self, records: list[Record]) -> None:
        """Apply ``records`` in one database transaction (all or nothing), if the
        instance's rows are still this store's (see :meth:`_fence_statements`)."""
        if self.lost:
            raise StoreFenced(f"instance {self.broker_instance}: its rows were taken")
        try:
            try:
                if not self._whole_batch_in_one_trip(records):
                    with transaction.atomic(using=self.using):
                        self._fence()
                        self._apply(records, replacing=False)
            except IntegrityError:
                # Keys are nearly always new, so the batch inserts them blindly rather than
                # looking each one up first; a key that is stored already (a MsgAdd that
                # replaces) fails it, and it is redone, nothing of it having been applied.
                with transaction.atomic(using=self.using):
                    self._fence()
                    self._apply(records, replacing=True)
        except StoreFenced:
            raise
        except BaseException:
            # A broken connection (database restarted...) stays broken in Django until
            # closed; close it so the next batch reconnects.
            connections[self.using].close()
            raise

    def _close_backend(self) -> None:
        """Close the writer thread's connection if that thread could not (it is stuck)."""
        conn, self._writer_connection = self._writer_connection, None
        if conn is None or conn.connection is None:
            return

        def close() -> None:
            # Another thread's connection: allowed once it is marked shared.  A thread of
            # its own, since the caller may be the event loop (see _run).
            conn.inc_thread_sharing()
            try:
                conn.close()
            finally:
                conn.dec_thread_sharing()

        closer = threading.Thread(target=close, name="store-close", daemon=True)
        closer.start()
        closer.join(10)

    def _whole_batch_in_one_trip(self, records: list[Record]) -> bool:
        """PostgreSQL, a batch of message records only: BEGIN, its statements and COMMIT
        in one round trip.  False (nothing done) when that does not apply; raises
        IntegrityError, nothing applied, when a key is stored already."""
        conn = connections[self.using]
        if conn.vendor != "postgresql" or not all(type(r) in _MESSAGE_RECORDS for r in records):
            return False
        folds: list[_Folded] = []
        self._apply(records, replacing=False, write=lambda fold, replacing: folds.append(fold))
        (fold,) = folds  # only DestRemove and DurableRemove split a batch into runs
        statements = self._message_statements(fold, replacing=False)
        if not statements:
            return False
        if self.epoch is not None:
            statements = self._fence_statements() + statements
        sql = "; ".join(sql for sql, _ in statements)
        try:
            with conn.cursor() as cursor:
                cursor.execute(f"BEGIN; {sql}; COMMIT", _joined(statements))
        except BaseException as exc:
            # The server's transaction stopped at the failing statement: end it.
            with conn.cursor() as cursor:
                cursor.execute("ROLLBACK")
            if isinstance(exc, DataError) and not self._still_ours():
                self._fenced()
            raise
        self.one_trip_writes += 1
        return True

    def _apply(self, records: Iterable[Record], *, replacing: bool, write=None) -> None:
        """Fold ``records`` and write them (``write``, default ``_write``) in order."""
        write = write or self._write
        fold = _Folded()
        for rec in records:
            if isinstance(rec, MsgSettle):
                key = rec.key.hex()
                pending = fold.added.get(key)
                if pending is not None:
                    pending[1].pop(rec.interest, None)
                    if not pending[1]:
                        # Added and settled in the same batch: never written; but it may
                        # have replaced a stored message of the same key, which goes too.
                        del fold.added[key]
                        fold.dropped.add(key)
                else:
                    fold.settled.setdefault(key, set()).add(rec.interest)
                    counts = fold.delivered.get(key)
                    if counts:
                        counts.pop(rec.interest, None)
            elif isinstance(rec, MsgAdd):
                key = rec.key.hex()
                # Settles of the stored message stay: _write applies them before it inserts,
                # which decides whether this one takes its place or goes to the end.
                fold.delivered.pop(key, None)  # counts of the message being replaced
                if rec.interests:
                    # Replaces a message of the same key, keeping its place.
                    fold.added[key] = (rec, dict.fromkeys(rec.interests, 0))
                else:  # nothing will ever need it: whatever had that key goes
                    fold.added.pop(key, None)
                    fold.dropped.add(key)
            elif isinstance(rec, MsgDelivered):
                key = rec.key.hex()
                pending = fold.added.get(key)
                if pending is not None:
                    if rec.interest in pending[1]:
                        pending[1][rec.interest] = rec.count
                elif rec.interest not in fold.settled.get(key, ()):
                    fold.delivered.setdefault(key, {})[rec.interest] = rec.count
            elif isinstance(rec, TxnState):
                fold.txns[rec.txn_id] = rec
            elif isinstance(rec, TxnSend | TxnAck):
                fold.txns.setdefault(rec.txn_id, None)
                fold.txn_work.setdefault(rec.txn_id, []).append(rec)
            elif isinstance(rec, TxnRemove):
                fold.txns.pop(rec.txn_id, None)
                fold.txn_work.pop(rec.txn_id, None)
                fold.txn_removed.add(rec.txn_id)
            elif isinstance(rec, DestAdd):
                fold.destinations[(rec.name, rec.dest_type)] = rec
            elif isinstance(rec, DurableAdd):
                fold.durables[rec.sub_id] = rec
            elif isinstance(rec, DestRemove | DurableRemove):
                # These act on rows the batch cannot see: write what came before, then
                # apply them in place.
                write(fold, replacing=replacing)
                fold = _Folded()
                if isinstance(rec, DestRemove):
                    self._remove_destination(rec)
                else:
                    self._remove_durable(rec)
            else:
                raise TypeError(f"not a store record: {rec!r}")
        write(fold, replacing=replacing)

    def _write(self, fold: _Folded, *, replacing: bool) -> None:
        """Write one folded run with bulk statements (inside the batch's transaction)."""
        if not fold:
            return
        db = self.using
        inst = self.broker_instance
        if fold.txn_removed:
            for chunk in _chunks(list(fold.txn_removed)):
                m.StoredTxnWork.objects.using(db).filter(
                    broker_instance=inst, txn_id__in=chunk
                ).delete()
                m.StoredTransaction.objects.using(db).filter(
                    broker_instance=inst, txn_id__in=chunk
                ).delete()
        if fold.destinations:
            # Upsert: a destination added again keeps its place, with the new attributes.
            m.StoredDestination.objects.using(db).bulk_create(
                [
                    m.StoredDestination(
                        broker_instance=inst,
                        name=d.name,
                        dest_type=d.dest_type,
                        attributes=d.attributes,
                    )
                    for d in fold.destinations.values()
                ],
                update_conflicts=True,
                unique_fields=["broker_instance", "name", "dest_type"],
                update_fields=["attributes"],
            )
        if fold.durables:
            m.StoredDurable.objects.using(db).bulk_create(
                [
                    m.StoredDurable(
                        broker_instance=inst,
                        sub_id=d.sub_id,
                        client_id=d.client_id,
                        name=d.name,
                        topic=d.topic,
                        selector=d.selector,
                        no_local=d.no_local,
                        share=d.share,
                    )
                    for d in fold.durables.values()
                ],
                update_conflicts=True,
                unique_fields=["broker_instance", "sub_id"],
                update_fields=["client_id", "name", "topic", "selector", "no_local", "share"],
            )
        self._execute(self._message_statements(fold, replacing=replacing))
        if fold.txns:
            self._upsert_transactions(fold.txns)
        if fold.txn_work:
            rows = []
            for w in (w for work in fold.txn_work.values() for w in work):
                if isinstance(w, TxnSend):
                    rows.append(
                        m.StoredTxnWork(
                            broker_instance=inst,
                            txn_id=w.txn_id,
                            kind=m.StoredTxnWork.Kind.SEND,
                            key=w.key.hex(),
                            destination=w.destination,
                            dest_type=w.dest_type,
                            raw=w.raw,
                        )
                    )
                else:
                    rows.append(
                        m.StoredTxnWork(
                            broker_instance=inst,
                            txn_id=w.txn_id,
                            kind=m.StoredTxnWork.Kind.ACK,
                            key=w.key.hex(),
                            interest=w.interest,
                        )
                    )
            m.StoredTxnWork.objects.using(db).bulk_create(rows, batch_size=_CHUNK)

    def _tables(self) -> tuple[str, str]:
        """The quoted names of the message and interest tables."""
        q = connections[self.using].ops.quote_name
        return q(m.StoredMessage._meta.db_table), q(m.StoredInterest._meta.db_table)

    def _unheld_deletes(self, keys: list[str]) -> list[tuple[str, list[object]]]:
        """DELETEs of those of these messages that have no open interest left."""
        msg_t, int_t = self._tables()
        return [
            (f"DELETE FROM {msg_t} WHERE broker_instance = %s AND key IN ({_marks(part)})"
             f" AND NOT EXISTS (SELECT 1 FROM {int_t} WHERE {int_t}.broker_instance"
             f" = {msg_t}.broker_instance AND {int_t}.key = {msg_t}.key)",
             [self.broker_instance, *part])
            for part in _chunks(keys)
        ]  # fmt: skip

    def _execute(self, statements: list[tuple[str, list[object]]]) -> None:
        """Run ``statements`` in order: on PostgreSQL as one string, one round trip to
        the server instead of one each (its client-side-binding cursor takes several)."""
        if not statements:
            return
        conn = connections[self.using]
        with conn.cursor() as cursor:
            if conn.vendor == "postgresql":
                cursor.execute("; ".join(sql for sql, _ in statements), _joined(statements))
            else:
                for sql, args in statements:
                    cursor.execute(sql, args)

    def _message_statements(
        self, fold: _Folded, *, replacing: bool
    ) -> list[tuple[str, list[object]]]:
        """The SQL of a run's message records (adds, settles, delivery counts), with
        parameters, at most ``_CHUNK`` keys or rows per statement.  Plain SQL rather than
        the ORM: this is the hot path, and the ORM's query building cost more than the
        database.  ``replacing``: some added keys may be stored already (see the module
        docstring)."""
        msg_t, int_t = self._tables()
        inst = self.broker_instance
        out: list[tuple[str, list[object]]] = []
        # Deletes before inserts: a key dropped and added again goes to the end.
        for keys in _chunks(list(fold.dropped)):
            out.append(
                (f"DELETE FROM {int_t} WHERE broker_instance = %s AND key IN ({_marks(keys)})",
                 [inst, *keys])
            )  # fmt: skip
        # One DELETE per interest: a queue's messages all have the same one ("").
        by_interest: dict[str, list[str]] = defaultdict(list)
        for key, interests in fold.settled.items():
            for interest in interests:
                by_interest[interest].append(key)
        for interest, all_keys in by_interest.items():
            for keys in _chunks(all_keys):
                out.append(
                    (f"DELETE FROM {int_t} WHERE broker_instance = %s AND interest = %s"
                     f" AND key IN ({_marks(keys)})", [inst, interest, *keys])
                )  # fmt: skip
        # Then the messages among them that have no open interest left.
        out += self._unheld_deletes(list(fold.dropped.union(fold.settled)))
        added = list(fold.added.items())
        for part in _chunks(added):
            if replacing:
                # A stored key is replaced in place (the row, so the order, stays) and its
                # interests start again.
                keys = [key for key, _ in part]
                out.append(
                    (f"DELETE FROM {int_t} WHERE broker_instance = %s"
                     f" AND key IN ({_marks(keys)})", [inst, *keys])
                )  # fmt: skip
            args: list[object] = []
            for key, (rec, _) in part:
                args += (inst, key, rec.destination, rec.dest_type, bytes(rec.raw))
            rows = ", ".join(["(%s, %s, %s, %s, %s)"] * len(part))
            upsert = (
                " ON CONFLICT (key, broker_instance) DO UPDATE SET destination ="
                " excluded.destination, dest_type = excluded.dest_type, raw = excluded.raw"
                if replacing
                else ""  # a stored key fails the batch, which is redone replacing
            )
            out.append(
                (f"INSERT INTO {msg_t} (broker_instance, key, destination, dest_type, raw)"
                 f" VALUES {rows}{upsert}", args)
            )  # fmt: skip
        interests = [
            (key, interest, n) for key, (_, open_) in added for interest, n in open_.items()
        ]
        for part in _chunks(interests):
            args = []
            for key, interest, n in part:
                args += (inst, key, interest, n)
            rows = ", ".join(["(%s, %s, %s, %s)"] * len(part))
            out.append(
                (f"INSERT INTO {int_t} (broker_instance, key, interest, delivery_count)"
                 f" VALUES {rows}", args)
            )  # fmt: skip
        # One UPDATE per (interest, count): nearly all share count 1, so few statements.
        groups: dict[tuple[str, int], list[str]] = defaultdict(list)
        for key, counts in fold.delivered.items():
            for interest, count in counts.items():
                groups[(interest, count)].append(key)
        for (interest, count), all_keys in groups.items():
            for keys in _chunks(all_keys):
                out.append(
                    (f"UPDATE {int_t} SET delivery_count = %s WHERE broker_instance = %s"
                     f" AND interest = %s AND key IN ({_marks(keys)})",
                     [count, inst, interest, *keys])
                )  # fmt: skip
        return out

    def _upsert_transactions(self, txns: dict[int, TxnState | None]) -> None:
        """Create or update transaction rows, keeping the order of first appearance."""
        db = self.using
        inst = self.broker_instance
        items = list(txns.items())
        i = 0
        while i < len(items):
            # A run of the same kind is one statement; ids follow the run order.
            with_state = items[i][1] is not None
            j = i
            while j < len(items) and (items[j][1] is not None) == with_state:
                j += 1
            rows = [
                m.StoredTransaction(
                    broker_instance=inst,
                    txn_id=txn_id,
                    state=t.state if t is not None else 0,
                    info=t.info if t is not None else {},
                )
                for txn_id, t in items[i:j]
            ]
            if with_state:
                m.StoredTransaction.objects.using(db).bulk_create(
                    rows,
                    update_conflicts=True,
                    unique_fields=["broker_instance", "txn_id"],
                    update_fields=["state", "info"],
                )
            else:  # work for a transaction with no state yet: a row with state 0
                m.StoredTransaction.objects.using(db).bulk_create(rows, ignore_conflicts=True)
            i = j

    def _remove_destination(self, rec: DestRemove) -> None:
        """The destination is gone, and its messages with it."""
        db = self.using
        inst = self.broker_instance
        msgs = m.StoredMessage.objects.using(db).filter(
            broker_instance=inst, destination=rec.name, dest_type=rec.dest_type
        )
        m.StoredInterest.objects.using(db).filter(
            broker_instance=inst, key__in=msgs.values("key")
        ).delete()
        msgs.delete()
        m.StoredDestination.objects.using(db).filter(
            broker_instance=inst, name=rec.name, dest_type=rec.dest_type
        ).delete()

    def _remove_durable(self, rec: DurableRemove) -> None:
        """The subscription is gone: its interest in every message is settled."""
        db = self.using
        inst = self.broker_instance
        m.StoredDurable.objects.using(db).filter(broker_instance=inst, sub_id=rec.sub_id).delete()
        interests = m.StoredInterest.objects.using(db).filter(
            broker_instance=inst, interest=rec.sub_id
        )
        keys = list(interests.values_list("key", flat=True))
        interests.delete()
        self._execute(self._unheld_deletes(keys))


class StoreFenced(Exception):
    """A write of a broker whose rows another broker took over (its epoch moved on)."""


_MODELS = (
    m.StoredInterest,
    m.StoredMessage,
    m.StoredTxnWork,
    m.StoredTransaction,
    m.StoredDurable,
    m.StoredDestination,
)

__all__ = ["DatabaseStore", "StoreFenced", "read_state"]
