"""What the actions share: :class:`ActionError`, the audit trail (:func:`record_change`)
and the small conversions of request values and reply fields."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from broker.protocol.types import DEST_QUEUE, DEST_TOPIC

from ..events import send_event

log = logging.getLogger("broker.audit")


class ActionError(ValueError):
    """Bad input to an action; nothing was changed."""


def record_change(
    actor: str, what: str, event: dict[str, Any], *, instance: str | None = None
) -> None:
    """Record in the log (and the LogRecord table the portal shows) that ``actor`` did
    ``what``, and send ``event`` (Zulip's shape: ``type``, ``op``, which one; ``by`` is
    added) to the live pages; called after the change succeeded."""
    from django.conf import settings

    from broker.models import LogRecord

    message = f"{actor or 'unknown'}: {what}"
    log.info("admin change by %s", message)
    LogRecord.objects.create(
        timestamp=datetime.now(UTC),
        level=LogRecord.Level.INFO,
        logger="broker.audit",
        message=message,
        broker_instance=instance or settings.IMQ_INSTANCE,
    )
    # Inside a transaction (an import applies many changes in one) the live pages hear
    # of it once it is committed: a change rolled back was never made.
    from django.db import transaction

    transaction.on_commit(lambda: send_event({**event, "by": actor or "unknown"}, instance))


def dest_type_code(kind: str | int) -> int:
    """``q``/``queue``/1 -> 1, ``t``/``topic``/2 -> 2 (imqcmd's -t values)."""
    if isinstance(kind, int):
        if kind & (DEST_QUEUE | DEST_TOPIC):
            return kind
        raise ActionError(f"unknown destination type {kind}")
    value = str(kind).strip().lower()
    if value in ("q", "queue"):
        return DEST_QUEUE
    if value in ("t", "topic"):
        return DEST_TOPIC
    raise ActionError(f"destination type must be q (queue) or t (topic), not {kind!r}")


def dest_kind(code: int) -> str:
    return "queue" if code & DEST_QUEUE else "topic"


def required_dest_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise ActionError("a destination name is required")
    return name


def as_str(value: object) -> str:
    """A reply field as text ("" for None)."""
    return "" if value is None else str(value)


def as_int(value: object, default: int = 0) -> int:
    """A reply field as an int (``default`` when it is not one)."""
    return int(value) if isinstance(value, int) else default  # type: ignore[arg-type]


def java_long(value: object) -> int:
    """A connection or transaction ID: a Java long (ActionError otherwise)."""
    try:
        number = int(str(value))
    except ValueError:
        raise ActionError(f"connection ID must be a number, not {value!r}") from None
    if not -(2**63) <= number < 2**63:
        raise ActionError(f"ID {value} is out of range (a 64-bit number)")
    return number
