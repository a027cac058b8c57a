"""Transactions the broker tracks: list, query, commit, roll back."""

from __future__ import annotations

from rest_framework.response import Response

from broker.admintools.actions.transactions import (
    commit_transaction,
    list_transactions,
    query_transaction,
    rollback_transaction,
)

from .. import serializers as s
from ..base import AdminView, RowListView, doc, path_param
from .common import DONE, ID_SCHEMA, done

TXN_PARAM = path_param("id", "The transaction's ID.", ID_SCHEMA)


class TransactionListView(RowListView):
    search_fields = ("user", "client_id", "xid")

    @doc(
        "List the transactions",
        s.TransactionSerializer(many=True),
        params=[s.TransactionQuerySerializer],
    )
    def get(self, request):
        q = self.query(s.TransactionQuerySerializer)
        state = q.get("state")
        return self.page(
            list_transactions(self.admin),
            s.TransactionSerializer,
            q,
            where={"state": state.upper() if state else None},
        )


class TransactionView(AdminView):
    @doc("Query a transaction", s.TransactionSerializer, params=[TXN_PARAM])
    def get(self, request, id):
        return Response(s.TransactionSerializer(query_transaction(self.admin, id)).data)


class TransactionCommitView(AdminView):
    @doc(
        "Commit a transaction", DONE, params=[TXN_PARAM], description="An in-doubt (PREPARED) one."
    )
    def post(self, request, id):
        commit_transaction(self.admin, self.actor, id)
        return done(f"committed transaction {id}")


class TransactionRollbackView(AdminView):
    @doc("Roll a transaction back", DONE, params=[TXN_PARAM])
    def post(self, request, id):
        rollback_transaction(self.admin, self.actor, id)
        return done(f"rolled back transaction {id}")
