"""The log records the portal shows (the database; no broker round trip)."""

from __future__ import annotations

from datetime import datetime

from broker.loglevels import RECORD_LEVELS

from .common import ActionError


def log_records(
    *,
    level: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    text: str | None = None,
    instance: str | None = None,
):
    """A queryset of log records, newest first, filtered by minimum level, time and text."""
    from broker.models import LogRecord

    order = list(RECORD_LEVELS)
    qs = LogRecord.objects.all()
    if level:
        lv = level.strip().upper()
        if lv not in order:
            raise ActionError(f"unknown log level {level!r}: one of {', '.join(order)}")
        below = order[: order.index(lv)]
        if below:
            # Written as "not the lower levels" (the levels are always these names): the
            # database then walks the timestamp index newest first and stops at a page,
            # instead of sorting every record of the wanted levels.
            qs = qs.exclude(level__in=below)
    if since:
        qs = qs.filter(timestamp__gte=since)
    if until:
        qs = qs.filter(timestamp__lte=until)
    if text:
        qs = qs.filter(message__icontains=text)
    if instance:
        qs = qs.filter(broker_instance=instance)
    return qs.order_by("-timestamp", "-id")
