"""Transactions the broker tracks (server/admin_service/transactions.py's requests)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..broker_handle import BrokerAdmin
from ..client import AdminError
from .common import as_int, as_str, java_long, record_change

# com.sun.messaging.jmq.jmsserver.data.TransactionState (docs/developers/protocol.md)
TXN_STATES = {
    -1: "TIMED_OUT",
    0: "CREATED",
    1: "STARTED",
    2: "FAILED",
    3: "INCOMPLETE",
    4: "COMPLETE",
    5: "PREPARED",
    6: "COMMITTED",
    7: "ROLLEDBACK",
}


def _id(value: object) -> int:
    """A Long id sent as a number or as its decimal string (0 when neither)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def _transaction(row: dict[str, Any]) -> dict[str, Any]:
    state = row.get("state")
    ts = as_int(row.get("timestamp"))
    return {
        "id": _id(row.get("txnid")),  # OpenMQ sends the id as a String
        "xid": as_str(row.get("xid")),
        "state": TXN_STATES.get(state, as_str(state)) if isinstance(state, int) else as_str(state),
        "user": as_str(row.get("user")),
        "client_id": as_str(row.get("clientid")),
        "connection": as_str(row.get("connection")),
        "connection_id": as_int(row.get("connectionid")),
        "messages": as_int(row.get("nmsgs")),
        "acks": as_int(row.get("nacks")),
        "created": datetime.fromtimestamp(ts / 1000, UTC).isoformat() if ts else "",
    }


def list_transactions(admin: BrokerAdmin) -> list[dict[str, Any]]:
    rows = [_transaction(t) for t in admin.transactions()]
    rows.sort(key=lambda r: r["id"])
    return rows


def query_transaction(admin: BrokerAdmin, txn_id: int) -> dict[str, Any]:
    """One transaction the broker tracks (AdminError 404 when it does not)."""
    tid = java_long(txn_id)
    for row in list_transactions(admin):
        if row["id"] == tid:
            return row
    raise AdminError(404, f"transaction {tid} not found")


def commit_transaction(admin: BrokerAdmin, actor: str, txn_id: int) -> None:
    tid = java_long(txn_id)
    admin.commit_transaction(tid)
    record_change(
        actor, f"committed transaction {tid}", {"type": "transaction", "op": "commit", "id": tid}
    )


def rollback_transaction(admin: BrokerAdmin, actor: str, txn_id: int) -> None:
    tid = java_long(txn_id)
    admin.rollback_transaction(tid)
    record_change(
        actor,
        f"rolled back transaction {tid}",
        {"type": "transaction", "op": "rollback", "id": tid},
    )
