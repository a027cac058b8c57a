"""Transactions the broker tracks: list, commit, roll back."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from broker.admintools.actions.transactions import (
    commit_transaction,
    list_transactions,
    rollback_transaction,
)

from ..access import admin_required
from .common import (
    acting_user,
    broker_admin,
    confirm_action,
    paginate,
    render_page,
)


@admin_required
def transactions(request: HttpRequest) -> HttpResponse:
    def build():
        rows = list_transactions(broker_admin())
        return {"page": paginate(request, rows), "total": len(rows)}

    return render_page(request, "portal/transactions.html", build, nav="transactions")


@admin_required
def transaction_commit(request: HttpRequest, txn_id: int) -> HttpResponse:
    return confirm_action(
        request,
        title=f"Commit transaction {txn_id}",
        question=f"Really commit transaction {txn_id}? Its messages are delivered and its "
        "acknowledgements become final.",
        button="Commit",
        cancel=reverse("transactions"),
        do=lambda: commit_transaction(broker_admin(), acting_user(request), txn_id),
        success=f"Committed transaction {txn_id}.",
    )


@admin_required
def transaction_rollback(request: HttpRequest, txn_id: int) -> HttpResponse:
    return confirm_action(
        request,
        title=f"Roll back transaction {txn_id}",
        question=f"Really roll back transaction {txn_id}? Its messages are dropped and the "
        "messages it acknowledged are delivered again.",
        button="Roll back",
        cancel=reverse("transactions"),
        do=lambda: rollback_transaction(broker_admin(), acting_user(request), txn_id),
        success=f"Rolled back transaction {txn_id}.",
    )
