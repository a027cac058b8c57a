"""The database message store (``imq.persist.store=jdbc``): the file store's data in
Django models, for setups that want a shared or managed database.

Every row carries the broker instance name, so several brokers can share one database
and ``reset`` only deletes this broker's rows.  Records are applied by the writer thread,
one database transaction per batch: the commit is the durability point, so the batch is
either all there after a crash or not there at all.

A batch is first folded in memory into its net effect (broker/store/dbfold.py: a message
added and settled in the same batch never reaches the database; delivery counts keep the
latest), then written with bulk statements (broker/store/dbrows.py): one INSERT for the
messages, one for their interests, one DELETE per interest for the settles.  Message
records (the hot path) are written in plain SQL, not through the ORM; on PostgreSQL those
statements go as one string, and a batch of message records only goes BEGIN to COMMIT in
one round trip.  ``DestRemove`` and ``DurableRemove`` act on rows the batch cannot see, so
they write out what was folded so far and run in place, which keeps the records' order.
The semantics are those of ``tests/store_contract.replay``; the one that costs something is "a MsgAdd for a stored key replaces it in place": keys are inserted
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from django.db import DataError, IntegrityError, connections, transaction

from broker import models as m

from . import dbtables, ownership
from .base import (
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    RecoveredState,
    Store,
    records_of,
)
from .dbfold import Folded
from .dbread import read_state
from .dbrows import RowWriter, chunks, joined

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper

log = logging.getLogger("broker.store")

_T = TypeVar("_T")

_MESSAGE_RECORDS = (MsgAdd, MsgSettle, MsgDelivered)


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
        # What a batch does to the rows (broker/store/dbrows.py).
        self.rows = RowWriter(broker_instance, using)
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
        for chunk in chunks(hexes):
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
        self.rows.apply(records_of(state), replacing=False)

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
                    self.rows.execute(self._fence_statements())
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
                        self.rows.apply(records, replacing=False)
            except IntegrityError:
                # Keys are nearly always new, so the batch inserts them blindly rather than
                # looking each one up first; a key that is stored already (a MsgAdd that
                # replaces) fails it, and it is redone, nothing of it having been applied.
                with transaction.atomic(using=self.using):
                    self._fence()
                    self.rows.apply(records, replacing=True)
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
        folds: list[Folded] = []
        self.rows.apply(records, replacing=False, write=lambda fold, replacing: folds.append(fold))
        (fold,) = folds  # only DestRemove and DurableRemove split a batch into runs
        statements = self.rows.message_statements(fold, replacing=False)
        if not statements:
            return False
        if self.epoch is not None:
            statements = self._fence_statements() + statements
        sql = "; ".join(sql for sql, _ in statements)
        try:
            with conn.cursor() as cursor:
                cursor.execute(f"BEGIN; {sql}; COMMIT", joined(statements))
        except BaseException as exc:
            # The server's transaction stopped at the failing statement: end it.
            with conn.cursor() as cursor:
                cursor.execute("ROLLBACK")
            if isinstance(exc, DataError) and not self._still_ours():
                self._fenced()
            raise
        self.one_trip_writes += 1
        return True


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

__all__ = ["DatabaseStore", "StoreFenced"]
