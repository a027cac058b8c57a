"""Expiry reclamation: tell every running broker to sweep its expired messages now
(admin RECLAIM_EXPIRED, our extension) and record what each one reclaimed."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from broker.admin.remote import BrokerAdmin

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
    admin = BrokerAdmin(
        host, port, settings.IMQ_ADMIN_USER, settings.IMQ_ADMIN_PASSWORD, timeout=timeout
    )
    try:
        instance = admin.call("hello")
        rows = admin.call("reclaim_expired")
    except Exception as exc:
        log.warning("expiry reclamation on %s failed: %s", address, exc)
        run.status, run.error, run.finished = JobStatus.FAILED, str(exc), timezone.now()
        run.save(update_fields=["status", "error", "finished"])
        return run
    finally:
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


def reclaim_everywhere(brokers: list[str] | None = None) -> list[ExpiryRun]:
    """One :func:`reclaim_on` per broker (default: ``settings.JOBS_BROKERS``)."""
    return [reclaim_on(address) for address in (brokers or settings.JOBS_BROKERS)]
