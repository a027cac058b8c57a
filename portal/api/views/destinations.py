"""Physical destinations: list, create, query, update, destroy, purge, pause, resume,
compact, metrics, consumers and producers."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response

from broker.admintools.actions.consumers import list_consumers, list_producers
from broker.admintools.actions.destinations import (
    compact_destination,
    create_destination,
    destroy_destination,
    list_destinations,
    page_destinations,
    pause_destination,
    purge_destination,
    query_destination,
    resume_destination,
    update_destination,
)
from broker.admintools.actions.metrics import destination_metrics
from broker.protocol.types import TEMP_PREFIX

from .. import serializers as s
from ..base import DEST_NAME_PARAM, DEST_TYPE_PARAM, AdminView, RowListView, dest_type, doc
from .common import DONE, done

DEST_PARAMS = [DEST_TYPE_PARAM, DEST_NAME_PARAM]


class DestinationListView(RowListView):
    search_fields = ("name",)

    @doc(
        "List the destinations",
        s.DestinationSerializer(many=True),
        params=[s.DestinationQuerySerializer],
        description="With message counts, bytes, producers, consumers and state.",
    )
    def get(self, request):
        q = self.query(s.DestinationQuerySerializer)
        filters = {
            "kind": q.get("type"),
            "state": q.get("state"),
            "show_temporary": q.get("temporary") is not False,
            "order": "depth" if q["ordering"] == "-messages" else "name",
        }
        if not q.get("temporary"):
            return self.broker_page(
                lambda start, limit: page_destinations(
                    self.admin, start=start, limit=limit, name_contains=q.get("search"), **filters
                ),
                s.DestinationSerializer,
            )
        # Only the temporary ones: the broker filters by name, and theirs all begin so.
        if not q.get("search"):
            return self.broker_page(
                lambda start, limit: page_destinations(
                    self.admin, start=start, limit=limit, name_contains=TEMP_PREFIX, **filters
                ),
                s.DestinationSerializer,
            )
        rows = list_destinations(self.admin, name_contains=q["search"], **filters)
        return self.page(rows, s.DestinationSerializer, where={"temporary": True})

    @doc(
        "Create a destination",
        s.DestinationSerializer,
        code=201,
        request=s.DestinationCreateSerializer,
    )
    def post(self, request):
        data = self.body(s.DestinationCreateSerializer)
        create_destination(
            self.admin, self.actor, data["type"], data["name"], data.get("attributes") or {}
        )
        row = query_destination(self.admin, data["type"], data["name"])
        return Response(s.DestinationSerializer(row).data, status=status.HTTP_201_CREATED)


class DestinationView(AdminView):
    @doc("Query a destination", s.DestinationSerializer, params=DEST_PARAMS)
    def get(self, request, type, name):
        row = query_destination(self.admin, dest_type(type), name)
        return Response(s.DestinationSerializer(row).data)

    @doc(
        "Update a destination's attributes",
        s.DestinationSerializer,
        request=s.DestinationUpdateSerializer,
        params=DEST_PARAMS,
    )
    def patch(self, request, type, name):
        kind = dest_type(type)
        data = self.body(s.DestinationUpdateSerializer)
        update_destination(self.admin, self.actor, kind, name, data["attributes"])
        return Response(s.DestinationSerializer(query_destination(self.admin, kind, name)).data)

    @doc(
        "Destroy a destination",
        None,
        code=204,
        params=DEST_PARAMS,
        description="Refused (400) for a temporary destination: it goes with its connection.",
    )
    def delete(self, request, type, name):
        destroy_destination(self.admin, self.actor, dest_type(type), name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DestinationPurgeView(AdminView):
    @doc("Purge a destination's messages", DONE, params=DEST_PARAMS)
    def post(self, request, type, name):
        purge_destination(self.admin, self.actor, dest_type(type), name)
        return done(f"purged {type} {name}")


class DestinationPauseView(AdminView):
    @doc(
        "Pause a destination",
        DONE,
        request=s.PauseSerializer,
        params=DEST_PARAMS,
        description="Pauses its consumers (delivery stops), producers (sends wait) or all.",
    )
    def post(self, request, type, name):
        kind = dest_type(type)
        what = self.body(s.PauseSerializer)["what"]
        pause_destination(self.admin, self.actor, kind, name, what)
        return done(f"paused {what} of {type} {name}")


class DestinationResumeView(AdminView):
    @doc("Resume a destination", DONE, params=DEST_PARAMS)
    def post(self, request, type, name):
        resume_destination(self.admin, self.actor, dest_type(type), name)
        return done(f"resumed {type} {name}")


class DestinationCompactView(AdminView):
    @doc("Compact a destination's store", DONE, params=DEST_PARAMS)
    def post(self, request, type, name):
        compact_destination(self.admin, self.actor, dest_type(type), name)
        return done(f"compacted {type} {name}")


class DestinationMetricsView(AdminView):
    @doc("A destination's metrics", s.MetricsSerializer, params=DEST_PARAMS)
    def get(self, request, type, name):
        return Response(
            s.MetricsSerializer(destination_metrics(self.admin, dest_type(type), name)).data
        )


class DestinationConsumersView(RowListView):
    @doc("A destination's consumers", s.ConsumerSerializer(many=True), params=DEST_PARAMS)
    def get(self, request, type, name):
        rows = list_consumers(self.admin, dest_type(type), name)
        return self.page(rows, s.ConsumerSerializer)


class DestinationProducersView(RowListView):
    @doc("A destination's producers", s.ProducerSerializer(many=True), params=DEST_PARAMS)
    def get(self, request, type, name):
        rows = list_producers(self.admin, dest_type(type), name)
        return self.page(rows, s.ProducerSerializer)
