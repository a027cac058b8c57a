"""Takeover in an HA cluster on a shared database store (imq.cluster.ha=true).

Every broker of the cluster beats into its :class:`~broker.models.StoreOwner` row (the
store's heartbeat, every imq.cluster.monitor.interval seconds).  A broker whose row is
still *running* but whose heartbeat is older than imq.cluster.monitor.threshold of its
intervals has failed; :func:`take_over` moves its rows to the broker that noticed, in one
database transaction that holds the failed broker's row (``SELECT ... FOR UPDATE``) and
checks again that it is still running, still stale and still at the epoch seen: of
several brokers trying at once, one wins and the others find the row changed and back
off.  The same transaction bumps the failed broker's epoch, which fences it: every batch
of its store checks the epoch under a share lock of that row (``DatabaseStore._fence``),
so if it was only paused, its next write fails and it stops.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import connections, transaction
from django.utils import timezone

from broker import models as m
from broker.models import BrokerState, StoreOwner

from .base import RecoveredState
from .dbread import read_state

log = logging.getLogger("broker.store")

# Seconds the taker waits for the failed broker's row lock before trying again later.
LOCK_TIMEOUT = 10.0


@dataclass
class TakenOver:
    """What :func:`take_over` moved: the failed broker's id and its rows as they were."""

    broker_id: str
    address: str
    epoch: int  # the failed broker's epoch after the takeover (its writes fail below it)
    state: RecoveredState
    left: int  # transactions that stayed with the failed broker (a clash of ids, logged)


def to_take_over(row: StoreOwner, *, threshold: float, now=None) -> bool:
    """Running by its row but silent for ``threshold`` of its intervals (failed), or
    shut down asking for failover (FAILOVER_PENDING)."""
    if row.state == StoreOwner.State.STOPPED:
        return row.broker_state == BrokerState.FAILOVER_PENDING
    if row.heartbeat is None:
        return True
    now = now or timezone.now()
    return now - row.heartbeat > timedelta(seconds=row.interval * threshold)


def failed_peers(
    me: str, cluster_id: str, *, threshold: float, using: str = "default"
) -> list[StoreOwner]:
    """Members of ``cluster_id`` other than ``me`` to take over (:func:`to_take_over`;
    checked again under the lock by :func:`take_over`)."""
    now = timezone.now()
    rows = StoreOwner.objects.using(using).filter(ha=True, cluster_id=cluster_id)
    return [
        o
        for o in rows.exclude(broker_instance=me).order_by("broker_instance")
        if to_take_over(o, threshold=threshold, now=now)
    ]


def members(cluster_id: str, *, using: str = "default") -> list[StoreOwner]:
    """Every broker row of the HA cluster, operating or not."""
    return list(
        StoreOwner.objects.using(using)
        .filter(ha=True, cluster_id=cluster_id)
        .order_by("broker_instance")
    )


def take_over(
    victim: str,
    epoch: int,
    me: str,
    *,
    threshold: float,
    using: str = "default",
    stopped_too: bool = False,
) -> TakenOver | None:
    """Move ``victim``'s rows to ``me`` if it is still to be taken over at ``epoch``; None when
    another broker took it first, it came back, or its row is locked (tried again on
    the next monitor pass)."""
    conn = connections[using]
    with transaction.atomic(using=using):
        if conn.vendor == "postgresql":
            with conn.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {int(LOCK_TIMEOUT * 1000)}")
        row = (
            StoreOwner.objects.using(using)
            .select_for_update()
            .filter(broker_instance=victim)
            .first()
        )
        now = timezone.now()
        if row is None or row.epoch != epoch:
            return None
        # ``stopped_too``: an administrator's takeover (imqcmd takeover bkr) also takes the
        # data of a broker shut down with -nofailover.
        stopped = stopped_too and row.state == StoreOwner.State.STOPPED
        if not stopped and not to_take_over(row, threshold=threshold, now=now):
            return None
        state = read_state(victim, using=using)
        clash_txns, clash_keys = _clear_clashes(victim, me, state, using=using)
        for model in _MOVED:
            rows = model.objects.using(using).filter(broker_instance=victim)
            if clash_txns and model in (m.StoredTransaction, m.StoredTxnWork):
                rows = rows.exclude(txn_id__in=clash_txns)
            if clash_keys and model in (m.StoredMessage, m.StoredInterest):
                rows = rows.exclude(key__in=clash_keys)
            rows.update(broker_instance=me)
        row.epoch += 1
        row.state = StoreOwner.State.STOPPED
        row.broker_state = BrokerState.FAILOVER_COMPLETE
        row.taken_over_by = me
        row.taken_over_at = now
        row.save(using=using)
        return TakenOver(victim, row.address, row.epoch, state, len(clash_txns))


def _clear_clashes(
    victim: str, me: str, state: RecoveredState, *, using: str
) -> tuple[set[int], set[str]]:
    """Rows of ``victim`` that ``me`` has already: destinations, durable subscriptions
    and messages (one id, one message: sent here again by its producer) are the same
    thing in both (the victim's go); a transaction with the same id is not, and stays
    with the victim (counted, logged)."""
    db = using
    mine = set(
        m.StoredDestination.objects.using(db)
        .filter(broker_instance=me)
        .values_list("name", "dest_type")
    )
    for d in state.destinations:
        if (d.name, d.dest_type) in mine:
            m.StoredDestination.objects.using(db).filter(
                broker_instance=victim, name=d.name, dest_type=d.dest_type
            ).delete()
    my_subs = set(
        m.StoredDurable.objects.using(db)
        .filter(broker_instance=me)
        .values_list("sub_id", flat=True)
    )
    m.StoredDurable.objects.using(db).filter(broker_instance=victim, sub_id__in=my_subs).delete()
    # The taker has these already: its own subscription takes the messages.
    state.durables = [d for d in state.durables if d.sub_id not in my_subs]
    clash_txns = set(
        m.StoredTransaction.objects.using(db)
        .filter(broker_instance=me, txn_id__in=[t.txn_id for t in state.transactions])
        .values_list("txn_id", flat=True)
    )
    keys = [sm.key.hex() for sm in state.messages]
    clash_keys: set[str] = set()
    for i in range(0, len(keys), 500):
        clash_keys.update(
            m.StoredMessage.objects.using(db)
            .filter(broker_instance=me, key__in=keys[i : i + 500])
            .values_list("key", flat=True)
        )
    if clash_keys:
        # A message id is one message: its producer sent it here again after its broker
        # went (a send whose reply was lost, repeated with its first id) before this
        # takeover.  This broker's copy is the one kept; the failed broker's goes.
        clash = sorted(clash_keys)
        for i in range(0, len(clash), 500):
            for model in (m.StoredInterest, m.StoredMessage):
                model.objects.using(db).filter(
                    broker_instance=victim, key__in=clash[i : i + 500]
                ).delete()
        log.info(
            "takeover of %s: %d message(s) were sent here again by their producers before "
            "it; this broker's copies are kept, one each",
            victim,
            len(clash_keys),
        )
        state.messages = [sm for sm in state.messages if sm.key.hex() not in clash_keys]
    if clash_txns:
        log.error(
            "takeover of %s: %d transactions have ids this broker uses already; they stay with %s",
            victim,
            len(clash_txns),
            victim,
        )
        state.transactions = [t for t in state.transactions if t.txn_id not in clash_txns]
    return clash_txns, clash_keys


_MOVED = (
    m.StoredDestination,
    m.StoredDurable,
    m.StoredMessage,
    m.StoredInterest,
    m.StoredTransaction,
    m.StoredTxnWork,
)

__all__ = ["LOCK_TIMEOUT", "TakenOver", "failed_peers", "members", "take_over", "to_take_over"]
