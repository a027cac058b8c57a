"""The broker's, a service's and a destination's metrics (admin GET_METRICS) and their
reset (RESET_BROKER): server/admin_service/metrics.py's requests."""

from __future__ import annotations

from typing import Any

from ..broker_handle import BrokerAdmin
from .common import dest_type_code, record_change, required_dest_name


def broker_metrics(admin: BrokerAdmin) -> dict[str, Any]:
    return dict(admin.metrics())


def reset_metrics(admin: BrokerAdmin, actor: str) -> None:
    admin.reset_metrics()
    record_change(actor, "reset the broker's metrics", {"type": "broker", "op": "reset_metrics"})


def service_metrics(admin: BrokerAdmin, name: str) -> dict[str, Any]:
    return dict(admin.metrics(service=name))


def destination_metrics(admin: BrokerAdmin, kind: str | int, name: str) -> dict[str, Any]:
    return dict(admin.metrics(destination=required_dest_name(name), dest_type=dest_type_code(kind)))
