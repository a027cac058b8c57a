"""The broker: query, properties, metrics, and its operations (pause, quiesce, shutdown, ...)."""

from __future__ import annotations

from rest_framework.response import Response

from broker.admintools.actions.broker_info import (
    broker_properties,
    pause_broker,
    query_broker,
    quiesce_broker,
    reload_access_control,
    restart_broker,
    resume_broker,
    shutdown_broker,
    unquiesce_broker,
    update_broker,
)
from broker.admintools.actions.destinations import compact_destination
from broker.admintools.actions.metrics import broker_metrics, reset_metrics

from .. import serializers as s
from ..base import AdminView, doc
from .common import DONE, done


class BrokerView(AdminView):
    @doc(
        "Query the broker",
        s.BrokerSerializer,
        description="Version, instance, address, ports, memory state, services and counts.",
    )
    def get(self, request):
        return Response(s.BrokerSerializer(query_broker(self.admin)).data)

    @doc(
        "Update broker properties",
        s.BrokerSerializer,
        request=s.BrokerUpdateSerializer,
        description="Changes broker properties at run time; the broker refuses those it "
        "cannot change while running (and then changes none).",
    )
    def patch(self, request):
        data = self.body(s.BrokerUpdateSerializer)
        update_broker(self.admin, self.actor, data["properties"])
        return Response(s.BrokerSerializer(query_broker(self.admin)).data)


class BrokerPropertiesView(AdminView):
    @doc("The broker's properties", s.BrokerPropertiesSerializer)
    def get(self, request):
        return Response(s.BrokerPropertiesSerializer(broker_properties(self.admin)).data)


class BrokerMetricsView(AdminView):
    @doc("The broker's metrics", s.MetricsSerializer)
    def get(self, request):
        return Response(s.MetricsSerializer(broker_metrics(self.admin)).data)


def broker_operation(action, text: str, summary: str, description: str = ""):
    """A POST /api/broker/<operation>/ view running ``action(admin, actor)``."""

    class View(AdminView):
        @doc(summary, DONE, description=description)
        def post(self, request):
            action(self.admin, self.actor)
            return done(text)

    View.__name__ = View.__qualname__ = (
        "Broker" + "".join(w.title() for w in summary.split()) + "View"
    )
    return View


BrokerPauseView = broker_operation(
    pause_broker,
    "paused the broker",
    "Pause the broker",
    "Pauses every NORMAL service: new client connections wait until resumed.",
)
BrokerResumeView = broker_operation(resume_broker, "resumed the broker", "Resume the broker")
BrokerQuiesceView = broker_operation(
    quiesce_broker,
    "quiesced the broker",
    "Quiesce the broker",
    "Refuses new client connections and lets the existing ones finish.",
)
BrokerUnquiesceView = broker_operation(
    unquiesce_broker, "unquiesced the broker", "Unquiesce the broker"
)
BrokerShutdownView = broker_operation(
    shutdown_broker, "the broker is shutting down", "Shut the broker down"
)
BrokerRestartView = broker_operation(
    restart_broker, "the broker is restarting", "Restart the broker"
)
BrokerReloadAclView = broker_operation(
    reload_access_control,
    "reloaded the access control rules",
    "Reload access control",
    "Makes the broker read its access control rules again.",
)
BrokerResetMetricsView = broker_operation(
    reset_metrics, "reset the broker's metrics", "Reset the metrics"
)
BrokerCompactView = broker_operation(
    lambda admin, actor: compact_destination(admin, actor),
    "compacted the message store",
    "Compact the message store",
    "Reclaims the file store's free space for every destination.",
)
