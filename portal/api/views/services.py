"""The connection services."""

from __future__ import annotations

from rest_framework.response import Response

from broker.admintools.actions.metrics import service_metrics
from broker.admintools.actions.services import (
    list_services,
    pause_service,
    query_service,
    resume_service,
    update_service,
)

from .. import serializers as s
from ..base import AdminView, RowListView, doc, path_param
from .common import DONE, done

SERVICE_PARAM = path_param("name", "The service's name, e.g. jms or admin.")


class ServiceListView(RowListView):
    search_fields = ("name",)

    @doc("List the services", s.ServiceSerializer(many=True), params=[s.ServiceQuerySerializer])
    def get(self, request):
        q = self.query(s.ServiceQuerySerializer)
        return self.page(list_services(self.admin), s.ServiceSerializer, q)


class ServiceView(AdminView):
    @doc("Query a service", s.ServiceSerializer, params=[SERVICE_PARAM])
    def get(self, request, name):
        return Response(s.ServiceSerializer(query_service(self.admin, name)).data)

    @doc(
        "Update a service",
        s.ServiceSerializer,
        request=s.ServiceUpdateSerializer,
        params=[SERVICE_PARAM],
        description="Changes the service's port or its connection limit (max_threads).",
    )
    def patch(self, request, name):
        data = self.body(s.ServiceUpdateSerializer)
        update_service(self.admin, self.actor, name, **data)
        return Response(s.ServiceSerializer(query_service(self.admin, name)).data)


class ServicePauseView(AdminView):
    @doc("Pause a service", DONE, params=[SERVICE_PARAM])
    def post(self, request, name):
        pause_service(self.admin, self.actor, name)
        return done(f"paused service {name}")


class ServiceResumeView(AdminView):
    @doc("Resume a service", DONE, params=[SERVICE_PARAM])
    def post(self, request, name):
        resume_service(self.admin, self.actor, name)
        return done(f"resumed service {name}")


class ServiceMetricsView(AdminView):
    @doc("A service's metrics", s.MetricsSerializer, params=[SERVICE_PARAM])
    def get(self, request, name):
        return Response(s.MetricsSerializer(service_metrics(self.admin, name)).data)
