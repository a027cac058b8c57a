"""The database message store (``imq.persist.store=jdbc``): the file store's data in
Django models, for setups that want a shared or managed database.

Every row carries the broker instance name, so several brokers can share one database
and ``reset`` only deletes this broker's rows.  Records are applied by the writer thread,
one database transaction per batch: the commit is the durability point, so the batch is
either all there after a crash or not there at all.

A batch is first folded in memory into its net effect (a message added and settled in
the same batch never reaches the database; delivery counts keep the latest), then written
with bulk statements: one INSERT for the messages, one for their interests, one DELETE per
interest for the settles.  ``DestRemove`` and ``DurableRemove`` act on rows the batch
cannot see, so they write out what was folded so far and run in place, which keeps the
records' order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.db import connections, transaction
from django.db.models import Exists, OuterRef

from broker import models as m

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
)

# Rows per INSERT statement and keys per IN (...) list: below SQLite's 32,766 bound
# variables and PostgreSQL's 65,535 even for the widest row.
_CHUNK = 500


def _chunks(items: list, size: int = _CHUNK) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass
class _Folded:
    """The net effect of a run of records, before it is written."""

    # key (hex) -> (record, open interests -> delivery count); dict order = write order.
    added: dict[str, tuple[MsgAdd, dict[str, int]]] = field(default_factory=dict)
    # Keys re-added in this run: their earlier rows go first.
    replaced: set[str] = field(default_factory=set)
    # For messages already in the database, by key: interests settled / delivery counts.
    settled: dict[str, set[str]] = field(default_factory=dict)
    delivered: dict[str, dict[str, int]] = field(default_factory=dict)
    destinations: dict[tuple[str, int], DestAdd] = field(default_factory=dict)
    durables: dict[str, DurableAdd] = field(default_factory=dict)
    txn_removed: set[int] = field(default_factory=set)
    txn_states: dict[int, TxnState] = field(default_factory=dict)
    txn_work: list[TxnSend | TxnAck] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.added
            or self.replaced
            or self.settled
            or self.delivered
            or self.destinations
            or self.durables
            or self.txn_removed
            or self.txn_states
            or self.txn_work
        )


class DatabaseStore(Store):
    """The message store in the Django database ``using`` (``imq.persist.store=jdbc``).

    ``sync`` is accepted for the common interface but has no separate meaning here: the
    database transaction's commit is the durability point (with PostgreSQL, as durable as
    its ``synchronous_commit`` and ``fsync`` settings make it), and callbacks run only
    after it.
    """

    def __init__(self, broker_instance: str, *, sync: bool, using: str = "default") -> None:
        super().__init__(sync=sync)
        self.broker_instance = broker_instance
        self.using = using
        self._writer_connection = None  # the writer thread's own Django connection

    # -- reading ---------------------------------------------------------------------

    def load(self) -> RecoveredState:
        """Rebuild what this broker instance stored, in the order it was written."""
        inst = self.broker_instance
        db = self.using
        state = RecoveredState()
        with transaction.atomic(using=db):  # one consistent snapshot
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
                .values_list(
                    "sub_id", "client_id", "name", "topic", "selector", "no_local", "share"
                )
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
            for key, destination, dest_type, raw in (
                m.StoredMessage.objects.using(db)
                .filter(broker_instance=inst)
                .order_by("id")
                .values_list("key", "destination", "dest_type", "raw")
                .iterator(chunk_size=2000)
            ):
                open_ = interests.get(key)
                if not open_:  # every interest settled: the message is gone
                    continue
                state.messages.append(
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
                if txn is None:  # work without a TxnState: nothing to resume it with
                    state.repairs.append(f"dropped work of unknown transaction {txn_id}")
                    continue
                if kind == m.StoredTxnWork.Kind.SEND:
                    txn.sends.append(
                        TxnSend(txn_id, bytes.fromhex(key), destination, dest_type, bytes(raw))
                    )
                else:
                    txn.acks.append(TxnAck(txn_id, bytes.fromhex(key), interest))
            state.transactions.extend(txns.values())
        return state

    def reset(self) -> None:
        """Delete every row of this broker instance (``-reset store``)."""
        with transaction.atomic(using=self.using):
            for model in _MODELS:
                model.objects.using(self.using).filter(
                    broker_instance=self.broker_instance
                ).delete()

    # -- writing (writer thread) -----------------------------------------------------------

    def _run(self) -> None:
        # Django connections are per thread: this thread gets its own, opened on first
        # use; keep a handle so _close_backend can close it once the thread has stopped.
        self._writer_connection = connections[self.using]
        super()._run()

    def _write_batch(self, records: list[Record]) -> None:
        """Apply ``records`` in one database transaction (all or nothing)."""
        try:
            with transaction.atomic(using=self.using):
                self._apply(records)
        except BaseException:
            # A broken connection (database restarted...) stays broken in Django until
            # closed; close it so the next batch reconnects.
            connections[self.using].close()
            raise

    def _close_backend(self) -> None:
        conn, self._writer_connection = self._writer_connection, None
        if conn is None:
            return
        # The connection belongs to the writer thread, which has ended by now.
        conn.inc_thread_sharing()
        try:
            conn.close()
        finally:
            conn.dec_thread_sharing()

    def _apply(self, records: Iterable[Record]) -> None:
        fold = _Folded()
        for rec in records:
            if isinstance(rec, MsgSettle):
                key = rec.key.hex()
                pending = fold.added.get(key)
                if pending is not None:
                    pending[1].pop(rec.interest, None)
                    if not pending[1]:  # added and settled in the same batch: never written
                        del fold.added[key]
                else:
                    fold.settled.setdefault(key, set()).add(rec.interest)
                    counts = fold.delivered.get(key)
                    if counts:
                        counts.pop(rec.interest, None)
            elif isinstance(rec, MsgAdd):
                key = rec.key.hex()
                # A key stored again replaces the earlier message (and moves to the end).
                fold.added.pop(key, None)
                fold.replaced.add(key)
                fold.settled.pop(key, None)
                fold.delivered.pop(key, None)
                if rec.interests:  # no interest: nothing will ever need it
                    fold.added[key] = (rec, dict.fromkeys(rec.interests, 0))
            elif isinstance(rec, MsgDelivered):
                key = rec.key.hex()
                pending = fold.added.get(key)
                if pending is not None:
                    if rec.interest in pending[1]:
                        pending[1][rec.interest] = rec.count
                elif rec.interest not in fold.settled.get(key, ()):
                    fold.delivered.setdefault(key, {})[rec.interest] = rec.count
            elif isinstance(rec, TxnState):
                fold.txn_states[rec.txn_id] = rec
            elif isinstance(rec, TxnSend | TxnAck):
                fold.txn_work.append(rec)
            elif isinstance(rec, TxnRemove):
                fold.txn_states.pop(rec.txn_id, None)
                fold.txn_work = [w for w in fold.txn_work if w.txn_id != rec.txn_id]
                fold.txn_removed.add(rec.txn_id)
            elif isinstance(rec, DestAdd):
                fold.destinations[(rec.name, rec.dest_type)] = rec
            elif isinstance(rec, DurableAdd):
                fold.durables[rec.sub_id] = rec
            elif isinstance(rec, DestRemove):
                self._write(fold)
                fold = _Folded()
                self._remove_destination(rec)
            elif isinstance(rec, DurableRemove):
                self._write(fold)
                fold = _Folded()
                self._remove_durable(rec)
            else:
                raise TypeError(f"not a store record: {rec!r}")
        self._write(fold)

    def _write(self, fold: _Folded) -> None:
        """Write one folded run with bulk statements (inside the batch's transaction)."""
        if not fold:
            return
        db = self.using
        inst = self.broker_instance
        if fold.txn_removed:
            ids = list(fold.txn_removed)
            for chunk in _chunks(ids):
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
        if fold.replaced:
            self._delete_messages(list(fold.replaced))
        if fold.added:
            messages = []
            interests = []
            for key, (rec, open_) in fold.added.items():
                messages.append(
                    m.StoredMessage(
                        broker_instance=inst,
                        key=key,
                        destination=rec.destination,
                        dest_type=rec.dest_type,
                        raw=rec.raw,
                    )
                )
                for interest, count in open_.items():
                    interests.append(
                        m.StoredInterest(
                            broker_instance=inst,
                            key=key,
                            interest=interest,
                            delivery_count=count,
                        )
                    )
            m.StoredMessage.objects.using(db).bulk_create(messages, batch_size=_CHUNK)
            m.StoredInterest.objects.using(db).bulk_create(interests, batch_size=_CHUNK)
        if fold.settled:
            # One DELETE per interest: a queue's messages all have the same one ("").
            by_interest: dict[str, list[str]] = defaultdict(list)
            for key, interests in fold.settled.items():
                for interest in interests:
                    by_interest[interest].append(key)
            for interest, keys in by_interest.items():
                for chunk in _chunks(keys):
                    m.StoredInterest.objects.using(db).filter(
                        broker_instance=inst, interest=interest, key__in=chunk
                    ).delete()
            self._drop_settled_messages(list(fold.settled))
        if fold.delivered:
            # One UPDATE per (interest, count): nearly all share count 1, so few statements.
            groups: dict[tuple[str, int], list[str]] = defaultdict(list)
            for key, counts in fold.delivered.items():
                for interest, count in counts.items():
                    groups[(interest, count)].append(key)
            for (interest, count), keys in groups.items():
                for chunk in _chunks(keys):
                    m.StoredInterest.objects.using(db).filter(
                        broker_instance=inst, interest=interest, key__in=chunk
                    ).update(delivery_count=count)
        if fold.txn_states:
            m.StoredTransaction.objects.using(db).bulk_create(
                [
                    m.StoredTransaction(
                        broker_instance=inst, txn_id=t.txn_id, state=t.state, info=t.info
                    )
                    for t in fold.txn_states.values()
                ],
                update_conflicts=True,
                unique_fields=["broker_instance", "txn_id"],
                update_fields=["state", "info"],
            )
        if fold.txn_work:
            rows = []
            for w in fold.txn_work:
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

    def _delete_messages(self, keys: list[str]) -> None:
        """Delete these messages and their interests."""
        db = self.using
        inst = self.broker_instance
        for chunk in _chunks(keys):
            m.StoredInterest.objects.using(db).filter(broker_instance=inst, key__in=chunk).delete()
            m.StoredMessage.objects.using(db).filter(broker_instance=inst, key__in=chunk).delete()

    def _drop_settled_messages(self, keys: list[str]) -> None:
        """Delete those of these messages that have no open interest left."""
        db = self.using
        inst = self.broker_instance
        open_interest = m.StoredInterest.objects.using(db).filter(
            broker_instance=OuterRef("broker_instance"), key=OuterRef("key")
        )
        for chunk in _chunks(keys):
            m.StoredMessage.objects.using(db).filter(broker_instance=inst, key__in=chunk).exclude(
                Exists(open_interest)
            ).delete()

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
        if keys:
            self._drop_settled_messages(keys)


_MODELS = (
    m.StoredInterest,
    m.StoredMessage,
    m.StoredTxnWork,
    m.StoredTransaction,
    m.StoredDurable,
    m.StoredDestination,
)

__all__ = ["DatabaseStore"]
