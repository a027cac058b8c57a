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
    original's producer may not send to (access control) go to the DMQ instead, and a
    send that asks for reports without a JMSReplyTo fails (ReportGenerator.check_put)."""

    def may_send(connection_id: int, name: str, dest_type: int) -> str | None:
        conn = broker.connections.get(connection_id)
        if conn is None:
            return None  # the producer is gone: its rights cannot be asked any more
        # The producer's own rights, as its messages are checked (engine/resources.py).
        return conn.send_denied(name, dest_type)

    reports = ReportGenerator(broker.router, schedule=_schedule, may_send=may_send)
    broker.router.events.add(reports)
    broker.router.observers.put_check = reports
    return reports


__all__ = ["attach_reports"]
