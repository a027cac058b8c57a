"""Client connections (server/admin_service/connections.py's requests)."""

from __future__ import annotations

from typing import Any

from ..broker_handle import BrokerAdmin
from .common import as_int, as_str, java_long, record_change


def _connection(row: dict[str, Any]) -> dict[str, Any]:
    host = as_str(row.get("host"))
    port = as_int(row.get("port"))
    return {
        "id": as_int(row.get("cxnid")),
        "user": as_str(row.get("user")),
        "host": host,
        "port": port,
        "address": f"{host}:{port}" if host else "",
        "service": as_str(row.get("service")),
        "client_id": as_str(row.get("clientid")),
        "platform": as_str(row.get("clientplatform")),
        "sessions": as_int(row.get("nsessions")),
        "producers": as_int(row.get("nproducers")),
        "consumers": as_int(row.get("nconsumers")),
    }


def list_connections(admin: BrokerAdmin, service: str | None = None) -> list[dict[str, Any]]:
    rows = [_connection(r) for r in admin.connections(service or None)]
    rows.sort(key=lambda r: r["id"])
    return rows


def query_connection(admin: BrokerAdmin, cxn_id: int) -> dict[str, Any]:
    return _connection(admin.connection(java_long(cxn_id)))


def destroy_connection(admin: BrokerAdmin, actor: str, cxn_id: int) -> None:
    """Close a client connection (it is sent GOODBYE first)."""
    cid = java_long(cxn_id)
    admin.destroy_connection(cid)
    record_change(
        actor, f"destroyed connection {cid}", {"type": "connection", "op": "destroy", "id": cid}
    )
