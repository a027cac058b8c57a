"""A batch of store records folded into its net effect before the database store
writes it (broker/store/dbrows.py): a message added and settled in the same batch never
reaches the database, delivery counts keep the latest, a destination or durable added
again keeps its last attributes.  No database here: records in, runs out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .base import (
    DestAdd,
    DestRemove,
    DurableAdd,
    DurableRemove,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)


@dataclass
class Folded:
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


def runs(records: Iterable[Record]) -> Iterator[Folded | DestRemove | DurableRemove]:
    """``records`` folded, in order: a run's net effect (a :class:`Folded`, perhaps
    empty), then each ``DestRemove`` or ``DurableRemove``, which act on rows a run cannot
    see, followed by the next run; the last run always comes."""
    fold = Folded()
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
            # Settles of the stored message stay: dbrows.py applies them before it inserts,
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
            # These act on rows the batch cannot see: what came before is written
            # first, then they are applied in place.
            yield fold
            yield rec
            fold = Folded()
        else:
            raise TypeError(f"not a store record: {rec!r}")
    yield fold


__all__ = ["Folded", "runs"]
