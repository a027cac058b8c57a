"""Portal page URLs (mounted at /)."""

from django.contrib.auth.views import LogoutView
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import path, register_converter

from . import views


class DestTypeConverter:
    """``q`` (queue) or ``t`` (topic), as imqcmd's -t."""

    regex = "[qt]"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(DestTypeConverter, "dtype")

urlpatterns = [
    path("login/", views.PortalLoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("", views.overview, name="overview"),
    # Broker
    path("broker/", views.broker_view, name="broker"),
    path("broker/properties/", views.broker_properties_update, name="broker_properties"),
    path("broker/shutdown/", views.broker_shutdown, name="broker_shutdown"),
    path("broker/restart/", views.broker_restart, name="broker_restart"),
    path("broker/<slug:op>/", views.broker_op, name="broker_op"),
    # Services
    path("services/", views.services, name="services"),
    path("services/<str:name>/", views.service_detail, name="service"),
    path("services/<str:name>/update/", views.service_update, name="service_update"),
    path("services/<str:name>/<slug:op>/", views.service_op, name="service_op"),
    # Destinations (names may hold any character, "/" too: temporary ones do; the
    # specific routes come before the detail page so the name can be a path)
    path("destinations/", views.destinations, name="destinations"),
    path("destinations/new/", views.destination_create, name="destination_create"),
    path(
        "destinations/<dtype:kind>/<path:name>/edit/",
        views.destination_edit,
        name="destination_edit",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/purge/",
        views.destination_purge,
        name="destination_purge",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/destroy/",
        views.destination_destroy,
        name="destination_destroy",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/pause/",
        views.destination_pause,
        name="destination_pause",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/resume/",
        views.destination_resume,
        name="destination_resume",
    ),
    path(
        "destinations/<dtype:kind>/<path:name>/compact/",
        views.destination_compact,
        name="destination_compact",
    ),
    path("destinations/<dtype:kind>/<path:name>/messages/", views.messages_list, name="messages"),
    path(
        "destinations/<dtype:kind>/<path:name>/message/delete/",
        views.message_delete,
        name="message_delete",
    ),
    path("destinations/<dtype:kind>/<path:name>/message/", views.message_detail, name="message"),
    path("destinations/<dtype:kind>/<path:name>/", views.destination_detail, name="destination"),
    # Connections
    path("connections/", views.connections, name="connections"),
    path("connections/<int:cxn_id>/", views.connection_detail, name="connection"),
    path("connections/<int:cxn_id>/destroy/", views.connection_destroy, name="connection_destroy"),
    # Durable subscriptions (names and client IDs travel as parameters: any characters)
    path("durables/", views.durables, name="durables"),
    path("durables/purge/", views.durable_purge, name="durable_purge"),
    path("durables/destroy/", views.durable_destroy, name="durable_destroy"),
    # Transactions
    path("transactions/", views.transactions, name="transactions"),
    path("transactions/<int:txn_id>/commit/", views.transaction_commit, name="transaction_commit"),
    path(
        "transactions/<int:txn_id>/rollback/",
        views.transaction_rollback,
        name="transaction_rollback",
    ),
    # Users and groups
    path("users/", views.users, name="users"),
    path("users/new/", views.user_create, name="user_create"),
    path("users/<path:username>/delete/", views.user_delete, name="user_delete"),
    path("users/<path:username>/", views.user_edit, name="user"),
    path("groups/new/", views.group_create, name="group_create"),
    path("groups/<path:name>/delete/", views.group_delete, name="group_delete"),
    # Access control rules (keys travel as parameters)
    path("acl/", views.rules, name="rules"),
    path("acl/rule/", views.rule_edit, name="rule"),
    path("acl/rule/delete/", views.rule_delete, name="rule_delete"),
    path("acl/import/", views.rules_import, name="rules_import"),
    path("acl/export/", views.rules_export, name="rules_export"),
    # Log records
    path("log/", views.log_view, name="log"),
    # Static files (CSS, the overview's script, the API docs' assets) from the apps' and
    # the project's static directories: the portal is one daphne process, no web server
    # in front is needed.
    path("static/<path:path>", serve_static, {"insecure": True}, name="static"),
]
