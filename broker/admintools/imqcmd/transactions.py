"""imqcmd's subcommands about transactions: list, query, commit and roll back txn."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..actions.transactions import (
    commit_transaction,
    list_transactions,
    query_transaction,
    rollback_transaction,
)
from .output import Table
from .session import Handler, Run, Spec, change, one


def created(txn: dict[str, Any]) -> str:
    if not txn["created"]:
        return "-"
    when = datetime.fromisoformat(txn["created"]).astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def list_txn(run: Run) -> None:
    rows = list_transactions(run.admin)
    run.say("Listing all the transactions on the broker specified by:")
    run.say()
    run.broker_info()
    if not rows:
        run.say("There are no transactions.")
        run.done()
        return
    table = Table(5, 3).title(
        ("Transaction ID", "State", "User name", "# Msgs/# Acks", "Creation time")
    )
    for t in rows:
        table.add(
            (
                t["id"],
                t["state"],
                t["user"] or "-",
                f"{t['messages']}/{t['acks']}",
                created(t),
            )
        )
    run.show(table)
    run.done()


def txn_header(run: Run, doing: str) -> None:
    run.about(doing, "transaction", one("Transaction ID", run.opts["name"]))


def query_txn(run: Run) -> None:
    t = query_transaction(run.admin, int(run.opts["name"]))
    txn_header(run, "Querying")
    run.pairs(
        [
            ("Transaction ID", t["id"]),
            ("XID", t["xid"] or "-"),
            ("State", t["state"]),
            ("User name", t["user"] or "-"),
            ("Client ID", t["client_id"] or "-"),
            ("Connection", t["connection"] or "-"),
            ("Connection ID", t["connection_id"] or "-"),
            ("Number of messages", t["messages"]),
            ("Number of acknowledgments", t["acks"]),
            ("Creation time", created(t)),
        ]
    )
    run.done()


def txn_change(doing: str, verb: str, act: Callable[..., None]) -> Handler:
    """Commit or roll back the -n transaction, asking "Are you sure you want to <verb>
    the transaction ID?" first."""
    return change(
        lambda run: txn_header(run, doing),
        lambda run: act(run.admin, run.actor, int(run.opts["name"])),
        lambda run: f"Are you sure you want to {verb} the transaction {int(run.opts['name'])}?",
    )


COMMANDS: dict[tuple[str, str], Spec] = {
    ("list", "txn"): Spec(list_txn),
    ("query", "txn"): Spec(query_txn, ("name",)),
    ("commit", "txn"): Spec(txn_change("Committing", "commit", commit_transaction), ("name",)),
    ("rollback", "txn"): Spec(
        txn_change("Rolling back", "roll back", rollback_transaction), ("name",)
    ),
}
