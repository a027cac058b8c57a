"""The database store's rows as a batch changes them: the messages and their interests
(plain SQL, the hot path), the transactions and their work, the destinations and durable
subscriptions (the ORM), each run of a folded batch (broker/store/dbfold.py) written with
bulk statements inside the caller's database transaction.

The writer thread of :class:`~broker.store.dbstore.DatabaseStore` owns the transaction,
the fencing and the retries; this module only says what the rows become.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

from django.db import connections

from broker import models as m

from .base import DestRemove, DurableRemove, Record, TxnSend, TxnState
from .dbfold import Folded, runs

# Rows per INSERT statement and keys per IN (...) list: below SQLite's 32,766 bound
# variables and PostgreSQL's 65,535 even for the widest row.
CHUNK = 500


def marks(items: list) -> str:
    """``%s, %s, ...``: one placeholder per item of an IN list."""
    return ", ".join(["%s"] * len(items))


def joined(statements: list[tuple[str, list[object]]]) -> list[object]:
    """The parameters of several statements sent as one string."""
    return [arg for _, args in statements for arg in args]


def chunks(items: list, size: int = CHUNK) -> Iterator[list]:
    """``items`` in lists of at most ``size``."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


class RowWriter:
    """What records do to the rows of ``broker_instance`` in the Django database
    ``using``, inside the caller's transaction."""

    def __init__(self, broker_instance: str, using: str) -> None:
        self.broker_instance = broker_instance
        self.using = using

    def apply(
        self,
        records: Iterable[Record],
        *,
        replacing: bool,
        write: Callable[..., None] | None = None,
    ) -> None:
        """Fold ``records`` and write them (``write``, default :meth:`write`) in order;
        ``replacing``: some added keys may be stored already (see dbstore.py)."""
        write = write or self.write
        for run in runs(records):
            if isinstance(run, Folded):
                write(run, replacing=replacing)
            elif isinstance(run, DestRemove):
                self.remove_destination(run)
            else:
                self.remove_durable(run)

    def write(self, fold: Folded, *, replacing: bool) -> None:
        """Write one folded run with bulk statements (inside the batch's transaction)."""
        if not fold:
            return
        db = self.using
        inst = self.broker_instance
        if fold.txn_removed:
            for chunk in chunks(list(fold.txn_removed)):
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
        self.execute(self.message_statements(fold, replacing=replacing))
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
            m.StoredTxnWork.objects.using(db).bulk_create(rows, batch_size=CHUNK)

    def _tables(self) -> tuple[str, str]:
        """The quoted names of the message and interest tables."""
        q = connections[self.using].ops.quote_name
        return q(m.StoredMessage._meta.db_table), q(m.StoredInterest._meta.db_table)

    def unheld_deletes(self, keys: list[str]) -> list[tuple[str, list[object]]]:
        """DELETEs of those of these messages that have no open interest left."""
        msg_t, int_t = self._tables()
        return [
            (f"DELETE FROM {msg_t} WHERE broker_instance = %s AND key IN ({marks(part)})"
             f" AND NOT EXISTS (SELECT 1 FROM {int_t} WHERE {int_t}.broker_instance"
             f" = {msg_t}.broker_instance AND {int_t}.key = {msg_t}.key)",
             [self.broker_instance, *part])
            for part in chunks(keys)
        ]  # fmt: skip

    def execute(self, statements: list[tuple[str, list[object]]]) -> None:
        """Run ``statements`` in order: on PostgreSQL as one string, one round trip to
        the server instead of one each (its client-side-binding cursor takes several)."""
        if not statements:
            return
        conn = connections[self.using]
        with conn.cursor() as cursor:
            if conn.vendor == "postgresql":
                cursor.execute("; ".join(sql for sql, _ in statements), joined(statements))
            else:
                for sql, args in statements:
                    cursor.execute(sql, args)

    def message_statements(
        self, fold: Folded, *, replacing: bool
    ) -> list[tuple[str, list[object]]]:
        """The SQL of a run's message records (adds, settles, delivery counts), with
        parameters, at most ``CHUNK`` keys or rows per statement.  Plain SQL rather than
        the ORM: this is the hot path, and the ORM's query building cost more than the
        database.  ``replacing``: some added keys may be stored already (see the module
        docstring)."""
        msg_t, int_t = self._tables()
        inst = self.broker_instance
        out: list[tuple[str, list[object]]] = []
        # Deletes before inserts: a key dropped and added again goes to the end.
        for keys in chunks(list(fold.dropped)):
            out.append(
                (f"DELETE FROM {int_t} WHERE broker_instance = %s AND key IN ({marks(keys)})",
                 [inst, *keys])
            )  # fmt: skip
        # One DELETE per interest: a queue's messages all have the same one ("").
        by_interest: dict[str, list[str]] = defaultdict(list)
        for key, interests in fold.settled.items():
            for interest in interests:
                by_interest[interest].append(key)
        for interest, all_keys in by_interest.items():
            for keys in chunks(all_keys):
                out.append(
                    (f"DELETE FROM {int_t} WHERE broker_instance = %s AND interest = %s"
                     f" AND key IN ({marks(keys)})", [inst, interest, *keys])
                )  # fmt: skip
        # Then the messages among them that have no open interest left.
        out += self.unheld_deletes(list(fold.dropped.union(fold.settled)))
        added = list(fold.added.items())
        for part in chunks(added):
            if replacing:
                # A stored key is replaced in place (the row, so the order, stays) and its
                # interests start again.
                keys = [key for key, _ in part]
                out.append(
                    (f"DELETE FROM {int_t} WHERE broker_instance = %s"
                     f" AND key IN ({marks(keys)})", [inst, *keys])
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
        for part in chunks(interests):
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
            for keys in chunks(all_keys):
                out.append(
                    (f"UPDATE {int_t} SET delivery_count = %s WHERE broker_instance = %s"
                     f" AND interest = %s AND key IN ({marks(keys)})",
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

    def remove_destination(self, rec: DestRemove) -> None:
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

    def remove_durable(self, rec: DurableRemove) -> None:
        """The subscription is gone: its interest in every message is settled."""
        db = self.using
        inst = self.broker_instance
        m.StoredDurable.objects.using(db).filter(broker_instance=inst, sub_id=rec.sub_id).delete()
        interests = m.StoredInterest.objects.using(db).filter(
            broker_instance=inst, interest=rec.sub_id
        )
        keys = list(interests.values_list("key", flat=True))
        interests.delete()
        self.execute(self.unheld_deletes(keys))


__all__ = ["CHUNK", "RowWriter", "chunks", "joined", "marks"]
