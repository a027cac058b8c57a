"""Client connections."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response

from broker.admintools.actions.connections import (
    destroy_connection,
    list_connections,
    query_connection,
)

from .. import serializers as s
from ..base import AdminView, RowListView, doc, path_param
from .common import ID_SCHEMA

CXN_PARAM = path_param("id", "The connection's ID.", ID_SCHEMA)


class ConnectionListView(RowListView):
    search_fields = ("user", "address", "client_id")

    @doc(
        "List the client connections",
        s.ConnectionSerializer(many=True),
        params=[s.ConnectionQuerySerializer],
    )
    def get(self, request):
        q = self.query(s.ConnectionQuerySerializer)
        rows = list_connections(self.admin, q.get("service"))
        return self.page(rows, s.ConnectionSerializer, q)


class ConnectionView(AdminView):
    @doc("Query a connection", s.ConnectionSerializer, params=[CXN_PARAM])
    def get(self, request, id):
        return Response(s.ConnectionSerializer(query_connection(self.admin, id)).data)

    @doc(
        "Destroy a connection",
        None,
        code=204,
        params=[CXN_PARAM],
        description="The client is sent GOODBYE and the connection closed.",
    )
    def delete(self, request, id):
        destroy_connection(self.admin, self.actor, id)
        return Response(status=status.HTTP_204_NO_CONTENT)
