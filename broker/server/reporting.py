"""The broker's report generator (broker/core/reports.py) wired to the event loop and
to access control."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.core.reports import ReportGenerator

if TYPE_CHECKING:
    from .broker import Broker


def _schedule(fn: Callable[[], None]) -> None:
    # Reports are sent just after the router's current operation, never inside it.
    asyncio.get_running_loop().call_soon(fn)


def attach_reports(broker: Broker) -> ReportGenerator:
    """Add a report generator to ``broker``'s router; reports to a destination the
    original's producer may not send to (access control) go to the DMQ instead."""

    def may_send(connection_id: int, name: str, dest_type: int) -> str | None:
        conn = broker.connections.get(connection_id)
        if conn is None:
            return None  # the producer is gone: its rights cannot be asked any more
        # The connection's own cache of send decisions (engine/resources.py), so a
        # stream of reports costs one rule look-up per reply-to and rule generation.
        gen = broker.access.generation
        if gen != conn._acl_gen:
            conn._acl_sends.clear()
            conn._acl_gen = gen
        key = (name, dest_type)
        why = conn._acl_sends.get(key)
        if why is None:
            why = conn._acl_sends[key] = conn._denied(name, dest_type, "produce") or ""
        return why or None

    reports = ReportGenerator(broker.router, schedule=_schedule, may_send=may_send)
    broker.router.events.add(reports)
    return reports


__all__ = ["attach_reports"]
