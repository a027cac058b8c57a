"""Durable and shared topic subscriptions (addressed by client ID and name)."""

from __future__ import annotations

from rest_framework import exceptions, status
from rest_framework.response import Response

from broker.admintools.actions.durables import destroy_durable, list_durables, purge_durable

from .. import serializers as s
from ..base import AdminView, RowListView, doc, path_param
from .common import DONE, done

NO_CLIENT_ID = "-"
DURABLE_PARAMS = [
    path_param("client_id", f"The subscriber's client ID; {NO_CLIENT_ID} for none."),
    path_param("name", "The subscription name."),
]


def _client_id(value: str) -> str | None:
    return None if value == NO_CLIENT_ID else value


class DurableListView(RowListView):
    search_fields = ("name", "client_id")

    @doc(
        "List the durable subscriptions",
        s.DurableSerializer(many=True),
        params=[s.DurableQuerySerializer],
    )
    def get(self, request):
        q = self.query(s.DurableQuerySerializer)
        rows = list_durables(self.admin, q.get("topic"))
        return self.page(rows, s.DurableSerializer, q)


class DurableView(AdminView):
    @doc("Query a durable subscription", s.DurableSerializer, params=DURABLE_PARAMS)
    def get(self, request, client_id, name):
        cid = _client_id(client_id) or ""
        for row in list_durables(self.admin):
            if row["name"] == name and row["client_id"] == cid:
                return Response(s.DurableSerializer(row).data)
        raise exceptions.NotFound(f"no durable subscription {name} (client ID {client_id})")

    @doc("Destroy a durable subscription", None, code=204, params=DURABLE_PARAMS)
    def delete(self, request, client_id, name):
        destroy_durable(self.admin, self.actor, name, _client_id(client_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DurablePurgeView(AdminView):
    @doc("Purge a durable subscription's messages", DONE, params=DURABLE_PARAMS)
    def post(self, request, client_id, name):
        purge_durable(self.admin, self.actor, name, _client_id(client_id))
        return done(f"purged durable subscription {name} (client ID {client_id})")
