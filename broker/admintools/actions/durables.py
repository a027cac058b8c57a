"""Durable and shared topic subscriptions (server/admin_service/durables.py's requests)."""

from __future__ import annotations

from typing import Any

from ..broker_handle import BrokerAdmin
from .common import ActionError, as_int, as_str, record_change


def _durable(info: dict[str, Any]) -> dict[str, Any]:
    consumer = info.get("consumer") if isinstance(info.get("consumer"), dict) else {}
    topic = ""
    if consumer:
        dest = (
            consumer.get("destination")  # ConsumerInfo.destination, what the broker sends
            or consumer.get("destName")
            or consumer.get("destinationName")
            or consumer.get("dest")
        )
        topic = as_str(dest)
    return {
        "name": as_str(info.get("name")),
        "client_id": as_str(info.get("clientID")),
        "topic": topic or as_str(info.get("topic")),
        "messages": as_int(info.get("nMessages")),
        "active": bool(info.get("isActive")),
        "durable": bool(info.get("isDurable", True)),
        "shared": bool(info.get("isShared")) or bool(info.get("isJMSShared")),
        "active_consumers": as_int(info.get("activeCount")),
        "selector": as_str(consumer.get("selector")) if consumer else "",
        "uid": as_str(info.get("uidString")),
    }


def list_durables(admin: BrokerAdmin, topic: str | None = None) -> list[dict[str, Any]]:
    rows = [_durable(d) for d in admin.durables(topic or None)]
    rows.sort(key=lambda r: (r["client_id"], r["name"]))
    return rows


def purge_durable(admin: BrokerAdmin, actor: str, name: str, client_id: str | None) -> None:
    if not name:
        raise ActionError("a subscription name is required")
    admin.purge_durable(name, client_id or None)
    record_change(
        actor,
        f"purged durable subscription {name} (client ID {client_id or '-'})",
        {"type": "durable", "op": "purge", "name": name, "client_id": client_id or ""},
    )


def destroy_durable(admin: BrokerAdmin, actor: str, name: str, client_id: str | None) -> None:
    if not name:
        raise ActionError("a subscription name is required")
    admin.destroy_durable(name, client_id or None)
    record_change(
        actor,
        f"destroyed durable subscription {name} (client ID {client_id or '-'})",
        {"type": "durable", "op": "destroy", "name": name, "client_id": client_id or ""},
    )
