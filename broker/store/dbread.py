"""Reading the database store's rows back: everything an instance stored, in the order
it was written, as the :class:`~broker.store.base.RecoveredState` the router recovers
from (the store's load, imqdbmgr, a takeover)."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import BinaryField
from django.db.models.functions import Length, Substr

from broker import models as m
from broker.protocol.packet import body_offset

from .base import (
    DestAdd,
    DurableAdd,
    RecoveredState,
    StoredMessage,
    StoredTransaction,
    TxnAck,
    TxnSend,
)
from .dbrows import chunks

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
    for chunk in chunks(keys):
        for key, raw in rows.filter(key__in=chunk).values_list("key", "raw"):
            whole = bytes(raw)
            messages[long_heads[key]].head = whole[: body_offset(whole)]


__all__ = ["read_state"]
