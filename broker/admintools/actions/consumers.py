"""A destination's consumers and producers (admin GET_CONSUMERS:
server/admin_service/consumers.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..broker_handle import BrokerAdmin
from .common import as_int, as_str, dest_type_code, required_dest_name

ACK_MODES = {
    1: "AUTO_ACKNOWLEDGE",
    2: "CLIENT_ACKNOWLEDGE",
    3: "DUPS_OK_ACKNOWLEDGE",
    32768: "NO_ACKNOWLEDGE",
}


def _consumer(row: dict[str, Any]) -> dict[str, Any]:
    """A GET_CONSUMERS row (OpenMQ's keys, see AdminClient.consumers), snake_case."""
    last_ack = as_int(row.get("LastAckTime"))
    ack = row.get("AcknowledgeMode")
    return {
        "id": as_str(row.get("ConsumerID")),
        "connection_id": as_str(row.get("ConnectionID")),
        "client_id": as_str(row.get("ClientID")),
        "user": as_str(row.get("User")),
        "host": as_str(row.get("Host")),
        "service": as_str(row.get("ServiceName")),
        "ack_mode": ACK_MODES.get(as_int(ack), as_str(ack)),
        "selector": as_str(row.get("Selector")),
        "durable": bool(row.get("Durable")),
        "durable_name": as_str(row.get("DurableName")),
        "durable_active": bool(row.get("DurableActive")),
        "flow_paused": bool(row.get("FlowPaused")),
        "delivered": as_int(row.get("NumMsgs")),
        "pending_acks": as_int(row.get("NumMsgsPendingAcks")),
        "last_ack": datetime.fromtimestamp(last_ack / 1000, UTC).isoformat()
        if last_ack > 0
        else "",
        "destination": as_str(row.get("DestinationName")),
    }


def _producer(row: dict[str, Any]) -> dict[str, Any]:
    """A producer row (OpenMQ's keys, see AdminClient.producers), snake_case."""
    return {
        "id": as_str(row.get("ProducerID")),
        "connection_id": as_str(row.get("ConnectionID")),
        "session_id": as_str(row.get("SessionID")),
        "user": as_str(row.get("User")),
        "host": as_str(row.get("Host")),
        "service": as_str(row.get("ServiceName")),
        "flow_paused": bool(row.get("FlowPaused")),
        "destination": as_str(row.get("DestinationName")),
    }


def list_consumers(admin: BrokerAdmin, kind: str | int, name: str) -> list[dict[str, Any]]:
    """The consumers of a destination."""
    rows = admin.consumers(required_dest_name(name), dest_type_code(kind))
    return [_consumer(c) for c in rows]


def list_producers(admin: BrokerAdmin, kind: str | int, name: str) -> list[dict[str, Any]]:
    """The producers of a destination."""
    rows = admin.producers(required_dest_name(name), dest_type_code(kind))
    return [_producer(p) for p in rows]
