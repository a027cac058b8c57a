"""The log records (the database)."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend

from broker.admintools.actions.log import log_records

from .. import filters
from .. import serializers as s
from ..base import DB_ERRORS, QuerysetListView, doc


class LogListView(QuerysetListView):
    serializer_class = s.LogRecordSerializer  # the browsable API's form
    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.LogRecordFilter
    row_serializer = s.LogRecordSerializer

    def get_queryset(self):
        return log_records()

    @doc(
        "List the log records",
        s.LogRecordSerializer(many=True),
        errors=DB_ERRORS,
        description="Newest first; filtered by minimum level, time and text.",
    )
    def get(self, request):
        return self.list_response()
