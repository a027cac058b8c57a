"""Portal page URLs (mounted at /)."""

from django.contrib.auth.views import LogoutView
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import path, register_converter

from .views import (
    broker,
    cluster,
    connections,
    destinations,
    durables,
    log,
    login,
    messages,
    overview,
    rules,
    services,
    transactions,
    users,
    workflows,
)


class DestTypeConverter:
    """``q`` (queue) or ``t`` (topic), as imqcmd's -t."""

    regex = "[qt]"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(DestTypeConverter, "dtype")

urlpatterns = [
    path("login/", login.PortalLoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("", overview.overview, name="overview"),
    # Broker
    path("broker/", broker.broker_view, name="broker"),
    path("broker/properties/", broker.broker_properties_update, name="broker_properties"),
    path("broker/shutdown/", broker.broker_shutdown, name="broker_shutdown"),
    path("broker/restart/", broker.broker_restart, name="broker_restart"),
    path("broker/<slug:op>/", broker.broker_op, name="broker_op"),
    # Services
    path("cluster/", cluster.cluster, name="cluster"),
    path("cluster/reload/", cluster.cluster_reload, name="cluster_reload"),
    path("services/", services.services, name="services"),
    path("services/<str:name>/", services.service_detail, name="service"),
    path("services/<str:name>/update/", services.service_update, name="service_update"),
    path("services/<str:name>/<slug:op>/", services.service_op, name="service_op"),
    # Destinations (names may hold any character, "/" too: temporary ones do; the
    # specific routes come before the detail page so the name can be a path)
    path("destinations/", destinations.destinations, name="destinations"),
    path("destinations/new/", destinations.destination_create, name="destination_create"),
    path(
        "destinations/<dtype:kind>/<path:name>/edit/",
        destinations.destination_edit,
        name="destination_edit",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/purge/",
        destinations.destination_purge,
        name="destination_purge",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/destroy/",
        destinations.destination_destroy,
        name="destination_destroy",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/pause/",
        destinations.destination_pause,
        name="destination_pause",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/resume/",
        destinations.destination_resume,
        name="destination_resume",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/compact/",
        destinations.destination_compact,
        name="destination_compact",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/messages/", messages.messages_list, name="messages"
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/messages/transfer/",
        workflows.messages_transfer,
        name="messages_transfer",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/messages/delete/",
        workflows.messages_delete_selected,
        name="messages_delete_selected",
    ),
    path("destinations/<dtype:kind>/<path:name>/publish/", workflows.publish, name="publish"),
    path(
        "destinations/<dtype:kind>/<path:name>/message/delete/",
        messages.message_delete,
        name="message_delete",
    ),
    path("destinations/<dtype:kind>/<path:name>/message/", messages.message_detail, name="message"),
    path(
        "destinations/<dtype:kind>/<path:name>/",
        destinations.destination_detail,
        name="destination",
    ),
    # Connections
    path("connections/", connections.connections, name="connections"),
    path("connections/<int:cxn_id>/", connections.connection_detail, name="connection"),
    path(
        "connections/<int:cxn_id>/destroy/",
        connections.connection_destroy,
        name="connection_destroy",
    ),
    # Durable subscriptions (names and client IDs travel as parameters: any characters)
    path("durables/", durables.durables, name="durables"),
    path("durables/purge/", durables.durable_purge, name="durable_purge"),
    path("durables/destroy/", durables.durable_destroy, name="durable_destroy"),
    # Transactions
    path("transactions/", transactions.transactions, name="transactions"),
    path(
        "transactions/<int:txn_id>/commit/",
        transactions.transaction_commit,
        name="transaction_commit",
    ),
    path(
        "transactions/<int:txn_id>/rollback/",
        transactions.transaction_rollback,
        name="transaction_rollback",
    ),
    # Users and groups
    path("users/", users.users, name="users"),
    path("users/new/", users.user_create, name="user_create"),
    path("users/<path:username>/delete/", users.user_delete, name="user_delete"),
    path("users/<path:username>/", users.user_edit, name="user"),
    path("groups/new/", users.group_create, name="group_create"),
    path("groups/<path:name>/delete/", users.group_delete, name="group_delete"),
    # Access control rules (keys travel as parameters)
    path("acl/", rules.rules, name="rules"),
    path("acl/rule/", rules.rule_edit, name="rule"),
    path("acl/rule/delete/", rules.rule_delete, name="rule_delete"),
    path("acl/import/", rules.rules_import, name="rules_import"),
    path("acl/export/", rules.rules_export, name="rules_export"),
    # Definitions (export, import)
    path("definitions/", workflows.definitions_page, name="definitions"),
    path("definitions/export/", workflows.definitions_export, name="definitions_export"),
    # Log records
    path("log/", log.log_view, name="log"),
    # Static files (CSS, the overview's script, the API docs' assets) from the apps' and
    # the project's static directories: the portal is one daphne process, no web server
    # in front is needed.
    path("static/<path:path>", serve_static, {"insecure": True}, name="static"),
]
