"""Actions on the connection services (server/admin_service/services.py's requests)."""

from __future__ import annotations

from typing import Any

from broker.protocol.types import ServiceState

from ..broker_handle import BrokerAdmin
from ..client import AdminError
from .common import ActionError, as_int, as_str, record_change

SERVICE_STATES = {s.value: s.name for s in ServiceState}


def _service(info: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": as_str(info.get("name")),
        "protocol": as_str(info.get("protocol")),
        "type": "ADMIN" if as_int(info.get("type")) == 1 else "NORMAL",
        "state": SERVICE_STATES.get(as_int(info.get("state"), -1), "UNKNOWN"),
        "port": as_int(info.get("port")),
        "dynamic_port": bool(info.get("dynamicPort")),
        "connections": as_int(info.get("nConnections")),
        "min_threads": as_int(info.get("minThreads")),
        "max_threads": as_int(info.get("maxThreads")),
    }


def list_services(admin: BrokerAdmin) -> list[dict[str, Any]]:
    return [_service(s) for s in admin.services()]


def query_service(admin: BrokerAdmin, name: str) -> dict[str, Any]:
    found = admin.services(name)
    if not found:
        raise AdminError(404, f"service {name} not found")
    return _service(found[0])


def pause_service(admin: BrokerAdmin, actor: str, name: str) -> None:
    admin.pause_service(name)
    record_change(actor, f"paused service {name}", {"type": "service", "op": "pause", "name": name})


def resume_service(admin: BrokerAdmin, actor: str, name: str) -> None:
    admin.resume_service(name)
    record_change(
        actor, f"resumed service {name}", {"type": "service", "op": "resume", "name": name}
    )


def update_service(
    admin: BrokerAdmin,
    actor: str,
    name: str,
    *,
    port: int | None = None,
    min_threads: int | None = None,
    max_threads: int | None = None,
) -> None:
    """Change a service's port or connection limit (maxThreads: OpenMQ's name for it)."""
    if port is None and min_threads is None and max_threads is None:
        raise ActionError("nothing to update: give port, min_threads or max_threads")
    for label, value, low in (
        ("port", port, 0),
        ("minThreads", min_threads, 0),
        ("maxThreads", max_threads, 1),
    ):
        if value is not None and (
            not isinstance(value, int) or value < low or value > 65535 and label == "port"
        ):
            raise ActionError(
                f"{label} must be a whole number >= {low}"
                + (" and <= 65535" if label == "port" else "")
            )
    admin.update_service(name, port=port, min_threads=min_threads, max_threads=max_threads)
    changes = ", ".join(
        f"{k}={v}"
        for k, v in (("port", port), ("minThreads", min_threads), ("maxThreads", max_threads))
        if v is not None
    )
    record_change(
        actor,
        f"updated service {name}: {changes}",
        {
            "type": "service",
            "op": "update",
            "name": name,
            "port": port,
            "min_threads": min_threads,
            "max_threads": max_threads,
        },
    )
