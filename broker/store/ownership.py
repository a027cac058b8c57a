"""Who owns a broker instance's rows of the database store (:class:`StoreOwner`).

A broker *claims* its instance's row when it loads the store: in one transaction it
takes the row (waiting for whoever holds it), bumps ``epoch`` and marks it running with a
fresh heartbeat.  It then *beats* from the store's writer thread, an UPDATE that matches
only its own epoch, and *releases* the row (state stopped) on a clean shutdown.

The expiry job may touch an instance's rows only while :func:`held_if_unowned` holds
that row: stopped, or its heartbeat older than ``stale_beats`` of its intervals.  The
check is made again under the lock (``SELECT ... FOR UPDATE`` on PostgreSQL; on SQLite
the transaction is a write transaction from its BEGIN, ``transaction_mode`` IMMEDIATE, so
it holds the database's write lock), so:

* a broker starting while the job holds the row waits for the job's commit and then
  loads what the job left;
* a broker that claimed first has bumped epoch and heartbeat: the job's re-check fails
  and it backs off;
* a broker that was only stalled (not dead) past the threshold finds on its next beat
  that the job bumped the epoch: it has lost its rows and must stop (``on_lost``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import OperationalError, connections, transaction
from django.utils import timezone

from broker.models import BrokerState, StoreOwner

log = logging.getLogger("broker.store")

DEFAULT_STALE_BEATS = 3


class InstanceInUse(Exception):
    """Another live broker beats for this instance (HA: the same imq.brokerid twice)."""


def claim(
    instance: str,
    *,
    using: str,
    interval: float,
    address: str,
    wait: float,
    ha: bool = False,
    cluster_id: str = "",
    stale_beats: float = DEFAULT_STALE_BEATS,
) -> int:
    """Take ``instance``'s rows for this process; returns the new epoch.

    Waits while the expiry job holds the row (on SQLite, "database is locked" is retried
    for up to ``wait`` seconds; PostgreSQL's row lock just waits).  In an HA cluster
    (``ha``) a row another broker still beats for is not taken: the claim waits up to
    ``wait`` for its heartbeat to go stale, then raises :class:`InstanceInUse`."""
    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            with transaction.atomic(using=using):
                now = timezone.now()
                owner, _ = (
                    StoreOwner.objects.using(using)
                    .select_for_update()
                    .get_or_create(broker_instance=instance)
                )
                if owner.state == StoreOwner.State.RUNNING and owner.heartbeat is not None:
                    age = (now - owner.heartbeat).total_seconds()
                    if ha and age < owner.interval * stale_beats:
                        raise _Busy(
                            f"broker id {instance} is in use by the broker at {owner.address}"
                            f" (pid {owner.pid}), which beat {age:.1f} s ago"
                        )
                    if age < owner.interval * DEFAULT_STALE_BEATS:
                        # Another process may still be running this instance: the same
                        # rows written by two brokers would be lost work.  Taken anyway,
                        # as the file store's lock would be broken after a crash, but said.
                        log.warning(
                            "database store: instance %s was running at %s (pid %s) %.1f s "
                            "ago; if that broker still runs, stop it: both write the same rows",
                            instance,
                            owner.address,
                            owner.pid,
                            age,
                        )
                owner.epoch += 1
                owner.state = StoreOwner.State.RUNNING
                owner.heartbeat = owner.started = now
                owner.interval = interval
                owner.address = address
                owner.pid = os.getpid()
                owner.ha = ha
                owner.cluster_id = cluster_id
                owner.broker_state = BrokerState.OPERATING
                owner.taken_over_by = ""
                owner.taken_over_at = None
                owner.save(using=using)
                return owner.epoch
        except _Busy as exc:
            if time.monotonic() > deadline:
                raise InstanceInUse(str(exc)) from None
            if not told:
                log.warning("database store: %s; waiting for it to stop", exc)
                told = True
            time.sleep(min(1.0, interval))
        except OperationalError as exc:
            # SQLite: the expiry job holds the write lock longer than the busy timeout.
            connections[using].close()
            if time.monotonic() > deadline:
                raise
            if not told:
                log.info("database store: waiting to claim instance %s (%s)", instance, exc)
                told = True
            time.sleep(0.5)


class _Busy(Exception):
    pass


def beat(instance: str, epoch: int, *, using: str) -> bool:
    """Refresh the heartbeat; False when the row is no longer this epoch's (taken)."""
    return bool(
        StoreOwner.objects.using(using)
        .filter(broker_instance=instance, epoch=epoch)
        .update(heartbeat=timezone.now(), state=StoreOwner.State.RUNNING)
    )


def release(instance: str, epoch: int, *, using: str, failover: bool = False) -> bool:
    """Mark the rows unowned (clean shutdown, everything written); False if taken.

    ``failover`` (an HA broker shut down without -nofailover): its state says
    FAILOVER_PENDING, and another broker of the cluster takes its rows over at once."""
    return bool(
        StoreOwner.objects.using(using)
        .filter(broker_instance=instance, epoch=epoch)
        .update(
            heartbeat=timezone.now(),
            state=StoreOwner.State.STOPPED,
            broker_state=BrokerState.FAILOVER_PENDING
            if failover
            else BrokerState.SHUTDOWN_COMPLETE,
        )
    )


def unowned(owner: StoreOwner, *, stale_beats: float, now=None) -> bool:
    """Stopped, or no heartbeat for ``stale_beats`` of its intervals."""
    if owner.state == StoreOwner.State.STOPPED:
        return True
    if owner.heartbeat is None:
        return True
    now = now or timezone.now()
    return now - owner.heartbeat > timedelta(seconds=owner.interval * stale_beats)


def candidates(*, stale_beats: float, using: str = "default") -> list[StoreOwner]:
    """Instances whose rows look unowned (to be checked again under the lock)."""
    now = timezone.now()
    return [
        o
        for o in StoreOwner.objects.using(using).order_by("broker_instance")
        if unowned(o, stale_beats=stale_beats, now=now)
    ]


@contextmanager
def held_if_unowned(
    instance: str, epoch: int, *, stale_beats: float, using: str = "default"
) -> Iterator[StoreOwner | None]:
    """A transaction holding ``instance``'s row, yielding it if it is still unowned and
    still at ``epoch`` (seen before), else None (back off).  Whatever the block does to
    the rows commits with the epoch bumped, so a stalled broker learns of it."""
    with transaction.atomic(using=using):
        owner = (
            StoreOwner.objects.using(using)
            .select_for_update()
            .filter(broker_instance=instance)
            .first()
        )
        if owner is None or owner.epoch != epoch or not unowned(owner, stale_beats=stale_beats):
            yield None
            return
        yield owner
        owner.epoch += 1
        owner.save(using=using, update_fields=["epoch"])


__all__ = [
    "DEFAULT_STALE_BEATS",
    "InstanceInUse",
    "beat",
    "candidates",
    "claim",
    "held_if_unowned",
    "release",
    "unowned",
]
