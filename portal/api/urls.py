"""REST API URLs (under /api/): resources named after imqcmd's objects.

Destinations are addressed by type and name (``destinations/queue/orders/``; a name
may contain "/", as temporary destinations' names do), durable
subscriptions by client ID and name (``-`` for no client ID).  Path parameters are
matched as plain strings and checked by the views, so a bad one is a JSON 400/404.
"""

from django.http import JsonResponse
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from portal.objects import api as objects_api

from . import views as v
from . import workflows as wf

DEST = "destinations/<str:type>/<path:name>/"
DURABLE = "durables/<str:client_id>/<str:name>/"


@csrf_exempt
def not_found(request, *args, **kwargs):
    return JsonResponse({"detail": f"no API endpoint {request.path}"}, status=404)


urlpatterns = [
    path("", v.ApiRootView.as_view(), name="api-root"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("token/", v.TokenView.as_view(), name="api-token"),
    # broker
    path("broker/", v.BrokerView.as_view(), name="api-broker"),
    path("broker/properties/", v.BrokerPropertiesView.as_view(), name="api-broker-properties"),
    path("broker/metrics/", v.BrokerMetricsView.as_view(), name="api-broker-metrics"),
    path("broker/ha/", v.HABrokerListView.as_view(), name="api-broker-ha"),
    path("broker/cluster/", v.ClusterBrokerListView.as_view(), name="api-broker-cluster"),
    path("broker/cluster/reload/", v.ClusterReloadView.as_view(), name="api-broker-cluster-reload"),
    path("broker/pause/", v.BrokerPauseView.as_view(), name="api-broker-pause"),
    path("broker/resume/", v.BrokerResumeView.as_view(), name="api-broker-resume"),
    path("broker/quiesce/", v.BrokerQuiesceView.as_view(), name="api-broker-quiesce"),
    path("broker/unquiesce/", v.BrokerUnquiesceView.as_view(), name="api-broker-unquiesce"),
    path("broker/shutdown/", v.BrokerShutdownView.as_view(), name="api-broker-shutdown"),
    path("broker/restart/", v.BrokerRestartView.as_view(), name="api-broker-restart"),
    path("broker/reload-acl/", v.BrokerReloadAclView.as_view(), name="api-broker-reload-acl"),
    path(
        "broker/reset-metrics/", v.BrokerResetMetricsView.as_view(), name="api-broker-reset-metrics"
    ),
    path("broker/compact/", v.BrokerCompactView.as_view(), name="api-broker-compact"),
    # services
    path("services/", v.ServiceListView.as_view(), name="api-services"),
    path("services/<str:name>/", v.ServiceView.as_view(), name="api-service"),
    path("services/<str:name>/pause/", v.ServicePauseView.as_view(), name="api-service-pause"),
    path("services/<str:name>/resume/", v.ServiceResumeView.as_view(), name="api-service-resume"),
    path(
        "services/<str:name>/metrics/", v.ServiceMetricsView.as_view(), name="api-service-metrics"
    ),
    # destinations
    path("destinations/", v.DestinationListView.as_view(), name="api-destinations"),
    path(DEST + "purge/", v.DestinationPurgeView.as_view(), name="api-destination-purge"),
    path(DEST + "pause/", v.DestinationPauseView.as_view(), name="api-destination-pause"),
    path(DEST + "resume/", v.DestinationResumeView.as_view(), name="api-destination-resume"),
    path(DEST + "compact/", v.DestinationCompactView.as_view(), name="api-destination-compact"),
    path(DEST + "metrics/", v.DestinationMetricsView.as_view(), name="api-destination-metrics"),
    path(
        DEST + "consumers/", v.DestinationConsumersView.as_view(), name="api-destination-consumers"
    ),
    path(
        DEST + "producers/", v.DestinationProducersView.as_view(), name="api-destination-producers"
    ),
    path(DEST + "messages/", v.DestinationMessagesView.as_view(), name="api-destination-messages"),
    path(DEST + "publish/", wf.PublishView.as_view(), name="api-destination-publish"),
    path(
        "destinations/queue/<path:name>/messages/transfer/",
        wf.TransferView.as_view(),
        name="api-messages-transfer",
    ),
    path(
        "destinations/queue/<path:name>/messages/delete/",
        wf.DeleteSelectedView.as_view(),
        name="api-messages-delete",
    ),
    path(DEST + "messages/<str:msg_id>/", v.MessageView.as_view(), name="api-message"),
    # after its sub-resources: a name may hold "/" (temporary destinations do)
    path(DEST, v.DestinationView.as_view(), name="api-destination"),
    # connections
    path("connections/", v.ConnectionListView.as_view(), name="api-connections"),
    path("connections/<str:id>/", v.ConnectionView.as_view(), name="api-connection"),
    # durable subscriptions
    path("durables/", v.DurableListView.as_view(), name="api-durables"),
    path(DURABLE, v.DurableView.as_view(), name="api-durable"),
    path(DURABLE + "purge/", v.DurablePurgeView.as_view(), name="api-durable-purge"),
    # transactions
    path("transactions/", v.TransactionListView.as_view(), name="api-transactions"),
    path("transactions/<str:id>/", v.TransactionView.as_view(), name="api-transaction"),
    path(
        "transactions/<str:id>/commit/",
        v.TransactionCommitView.as_view(),
        name="api-transaction-commit",
    ),
    path(
        "transactions/<str:id>/rollback/",
        v.TransactionRollbackView.as_view(),
        name="api-transaction-rollback",
    ),
    # users, groups, access control
    path("users/", v.UserListView.as_view(), name="api-users"),
    path("users/<path:username>/", v.UserView.as_view(), name="api-user"),
    path("groups/", v.GroupListView.as_view(), name="api-groups"),
    path("groups/<path:name>/", v.GroupView.as_view(), name="api-group"),
    path("acl/", v.RuleListView.as_view(), name="api-acl"),
    path("acl/file/", v.AclFileView.as_view(), name="api-acl-file"),
    path("acl/<path:key>/", v.RuleView.as_view(), name="api-acl-rule"),
    # definitions (export/import) and the DMQ's retry
    path("definitions/", wf.DefinitionsView.as_view(), name="api-definitions"),
    path("dmq/retry/", wf.RetryView.as_view(), name="api-dmq-retry"),
    # log records
    path("logs/", v.LogListView.as_view(), name="api-logs"),
    # administered objects (portal/objects/api.py)
    path("object-stores/", objects_api.StoreListView.as_view(), name="api-object-stores"),
    path("object-stores/<str:store>/", objects_api.StoreView.as_view(), name="api-object-store"),
    path("objects/", objects_api.ObjectListView.as_view(), name="api-objects"),
    path(
        "objects/<str:store>/<path:lookup_name>/",
        objects_api.ObjectView.as_view(),
        name="api-object",
    ),
    # anything else under /api/: a JSON 404, never the HTML page
    re_path(r"^[\s\S]*$", not_found),
]
