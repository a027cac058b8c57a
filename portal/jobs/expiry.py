"""Expiry reclamation: tell every running broker to sweep its expired messages now
(admin RECLAIM_EXPIRED, our extension) and record what each one reclaimed; then, in the
database store, reclaim the expired rows of broker instances that are not running
(broker/store/ownership.py, broker/jobs/dbexpiry.py), recorded as "store:<instance>"."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from broker.admintools.broker_handle import BrokerAdmin, settings_ssl_context
from broker.admintools.credentials import broker_credentials
from broker.jobs.dbexpiry import reclaim_expired_rows
from broker.store import ownership

from .models import ExpiryRun, ExpiryRunItem, JobStatus

log = logging.getLogger(__name__)


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return (host or "localhost"), int(port or 7676)


def reclaim_on(address: str, *, timeout: float = 10.0) -> ExpiryRun:
    """Ask the broker at ``address`` (host:port of its port mapper) to sweep now; the
    run recorded, ``failed`` with the error when the broker could not be asked."""
    run = ExpiryRun.objects.create(broker=address, started=timezone.now())
    host, port = _host_port(address)
    admin: BrokerAdmin | None = None
    try:
        creds = broker_credentials()
        admin = BrokerAdmin(
            host,
            port,
            creds.user,
            creds.password,
            timeout=timeout,
            source=creds.source,
            ssl=settings_ssl_context(),
        )
        instance = admin.hello()
        rows = admin.reclaim_expired()
    except Exception as exc:
        log.warning("expiry reclamation on %s failed: %s", address, exc)
        run.status, run.error, run.finished = JobStatus.FAILED, str(exc), timezone.now()
        run.save(update_fields=["status", "error", "finished"])
        return run
    finally:
        if admin is not None:
            admin.close()
    with transaction.atomic():
        ExpiryRunItem.objects.bulk_create(
            ExpiryRunItem(
                run=run,
                destination=str(row.get("DestinationName", "")),
                dest_type="topic" if row.get("DestinationType") == 2 else "queue",
                to_dmq=int(row.get("ToDMQ", 0)),
                discarded=int(row.get("Discarded", 0)),
            )
            for row in rows
        )
        run.broker = f"{instance} ({address})" if instance else address
        run.status, run.finished = JobStatus.OK, timezone.now()
        run.save(update_fields=["broker", "status", "finished"])
    return run


def reclaim_stopped(stale_beats: float | None = None) -> list[ExpiryRun]:
    """Reclaim the expired database-store rows of every broker instance whose row is
    released or whose heartbeat is older than ``stale_beats`` (default
    ``settings.JOBS_STORE_STALE_BEATS``) of its intervals; one run per instance where
    something was reclaimed or that failed.  An instance a broker claims meanwhile is
    left alone (see :func:`broker.store.ownership.held_if_unowned`)."""
    beats = stale_beats if stale_beats is not None else settings.JOBS_STORE_STALE_BEATS
    runs = []
    for seen in ownership.candidates(stale_beats=beats):
        started = timezone.now()
        try:
            with ownership.held_if_unowned(
                seen.broker_instance, seen.epoch, stale_beats=beats
            ) as owner:
                if owner is None:
                    log.info("store expiry: %s was claimed meanwhile, left alone", seen)
                    continue
                rows = reclaim_expired_rows(owner, now_ms=int(time.time() * 1000))
                if not rows:
                    continue
                run = ExpiryRun.objects.create(
                    broker=f"store:{owner.broker_instance}",
                    started=started,
                    finished=timezone.now(),
                    status=JobStatus.OK,
                )
                ExpiryRunItem.objects.bulk_create(
                    ExpiryRunItem(
                        run=run,
                        destination=r.destination,
                        dest_type="topic" if r.is_topic else "queue",
                        to_dmq=r.to_dmq,
                        discarded=r.discarded,
                    )
                    for r in rows
                )
                # Committed with the rows' changes and the epoch bump, or not at all.
        except Exception as exc:
            log.warning("store expiry of %s failed: %s", seen.broker_instance, exc)
            run = ExpiryRun.objects.create(
                broker=f"store:{seen.broker_instance}",
                started=started,
                finished=timezone.now(),
                status=JobStatus.FAILED,
                error=str(exc),
            )
        log.info("store expiry: %s: %s", run.broker, run.status)
        runs.append(run)
    return runs


def reclaim_everywhere(
    brokers: list[str] | None = None, stale_beats: float | None = None
) -> list[ExpiryRun]:
    """One :func:`reclaim_on` per broker (default: ``settings.JOBS_BROKERS``), then
    :func:`reclaim_stopped`."""
    runs = [reclaim_on(address) for address in (brokers or settings.JOBS_BROKERS)]
    return runs + reclaim_stopped(stale_beats)
