"""REST API views: thin.  Each validates its input with a serializer, calls ONE action
(:mod:`broker.admin.actions` for the running broker, :mod:`broker.admin.security_actions`
for users, groups and access rules) with ``actor`` = the requesting administrator, and
answers the action's dict.  Errors become JSON ``{"detail": ...}`` (portal/api/errors.py).

Why one module (about 850 lines): every endpoint is a few lines (a serializer, one
action, its dict) sharing the same error handling and schema declarations; split it by
subject as portal/ui/views/ is, once it grows.

Operations that change something answer ``{"detail": "<what was done>"}`` (200), or the
object as it now is (create 201, update 200); deletes answer 204.
"""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.urls import reverse
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.authtoken.models import Token
from rest_framework.parsers import FormParser, JSONParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from broker.admin import security_actions
from broker.admin.actions.broker_info import (
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
from broker.admin.actions.cluster import list_brokers, reload_cluster
from broker.admin.actions.connections import destroy_connection, list_connections, query_connection
from broker.admin.actions.consumers import list_consumers, list_producers
from broker.admin.actions.destinations import (
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
from broker.admin.actions.durables import destroy_durable, list_durables, purge_durable
from broker.admin.actions.ha import ha_broker_dict, ha_brokers_queryset
from broker.admin.actions.log import log_records
from broker.admin.actions.messages import delete_message, get_message, list_messages
from broker.admin.actions.metrics import (
    broker_metrics,
    destination_metrics,
    reset_metrics,
    service_metrics,
)
from broker.admin.actions.services import (
    list_services,
    pause_service,
    query_service,
    resume_service,
    update_service,
)
from broker.admin.actions.transactions import (
    commit_transaction,
    list_transactions,
    query_transaction,
    rollback_transaction,
)
from broker.protocol.types import TEMP_PREFIX
from portal.auth import is_administrator

from . import filters
from . import serializers as s
from .base import (
    DB_ERRORS,
    DEST_NAME_PARAM,
    DEST_TYPE_PARAM,
    AdminView,
    QuerysetListView,
    RowListView,
    dest_type,
    doc,
    path_param,
)

DONE = s.DoneSerializer


def done(text: str) -> Response:
    return Response({"detail": text})


ROOT_LINKS = {
    "schema": "api-schema",
    "docs": "api-docs",
    "token": "api-token",
    "broker": "api-broker",
    "services": "api-services",
    "destinations": "api-destinations",
    "connections": "api-connections",
    "durables": "api-durables",
    "transactions": "api-transactions",
    "users": "api-users",
    "groups": "api-groups",
    "acl": "api-acl",
    "logs": "api-logs",
    "definitions": "api-definitions",
}


class ApiRootView(AdminView):
    @doc("The API's resources", s.FreeFormSerializer, errors=(401, 403))
    def get(self, request):
        return Response(
            {key: request.build_absolute_uri(reverse(name)) for key, name in ROOT_LINKS.items()}
        )


# ======================================================================================
# Authentication: tokens
# ======================================================================================


class TokenView(APIView):
    """Exchange a broker user name and password for an API token (POST), or drop the
    caller's token (DELETE).  The password is checked against the broker's user
    repository, as at the portal's login."""

    parser_classes = [JSONParser, FormParser]

    def get_authenticators(self):
        if getattr(self, "request", None) is not None and self.request.method == "POST":
            return []  # credentials in the body; no session, hence no CSRF token needed
        return super().get_authenticators()

    def get_permissions(self):
        if self.request.method == "POST":
            return [AllowAny()]
        return [IsAuthenticated()]

    @extend_schema(auth=[])
    @doc(
        "Get an API token",
        s.TokenSerializer,
        request=s.TokenRequestSerializer,
        errors=(400,),
        description="Authenticates against the broker's user repository and returns the "
        "user's token (created on first use).  Only administrators may then use the API.",
    )
    def post(self, request):
        data = s.TokenRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(
            request,
            username=data.validated_data["username"],
            password=data.validated_data["password"],
        )
        if user is None:
            raise exceptions.ValidationError(
                {"non_field_errors": ["wrong user name or password, or the user is disabled"]}
            )
        token, _ = Token.objects.get_or_create(user=user)
        return Response(
            {
                "token": token.key,
                "username": user.get_username(),
                "administrator": is_administrator(user),
            }
        )

    @doc("Drop my API token", None, code=204, errors=(401, 403))
    def delete(self, request):
        Token.objects.filter(user=request.user).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


# ======================================================================================
# Broker
# ======================================================================================


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


class ClusterBrokerListView(RowListView):
    search_fields = ("address", "instance")

    @doc(
        "List the brokers of the cluster",
        s.ClusterBrokerSerializer(many=True),
        params=[s.ClusterBrokerQuerySerializer],
        description="Every broker of the conventional cluster (imq.cluster.brokerlist) the "
        "portal's broker belongs to, with its state as that broker sees it; a broker that "
        "is not clustered lists itself.",
    )
    def get(self, request):
        q = self.query(s.ClusterBrokerQuerySerializer)
        rows = list_brokers(self.admin)
        return self.page(rows, s.ClusterBrokerSerializer, q)


class ClusterReloadView(AdminView):
    @doc(
        "Reload the cluster configuration",
        s.ClusterReloadSerializer,
        description="imqcmd reload cls: the portal's broker and every broker linked to it "
        "read the cluster's broker list again (imq.cluster.brokerlist in their files, or "
        "the file of imq.cluster.url), link to the brokers added and leave those removed. "
        "Refused (409) for a broker that is not in a conventional cluster; 502 with the "
        "broker's reason when the list cannot be read (nothing changes).",
    )
    def post(self, request):
        return Response(reload_cluster(self.admin, self.actor))


class HABrokerListView(QuerysetListView):
    filter_backends: list = []
    row_serializer = s.HABrokerSerializer
    render = staticmethod(ha_broker_dict)

    def get_queryset(self):
        return ha_brokers_queryset(self.request.query_params.get("cluster_id"))

    @doc(
        "List the brokers of the HA cluster",
        s.HABrokerSerializer(many=True),
        errors=DB_ERRORS,
        params=[OpenApiParameter("cluster_id", str, description="Only this cluster's brokers.")],
        description="Every broker of an HA cluster on the shared database store, with its "
        "state, last heartbeat and the broker that took it over (from the store, so a "
        "broker that is down is listed too). ?cluster_id= limits it to one cluster.",
    )
    def get(self, request):
        return self.list_response()


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


# ======================================================================================
# Services
# ======================================================================================

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


# ======================================================================================
# Destinations
# ======================================================================================

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


MESSAGE_PARAM = path_param("msg_id", "The message's ID (JMSMessageID).")


class DestinationMessagesView(AdminView):
    @doc(
        "Browse a destination's messages",
        s.MessagePageSerializer,
        params=[*DEST_PARAMS, s.MessageQuerySerializer],
        operation_id="destinations_messages_list",
        description="Oldest first, ``limit`` messages from position ``start``: headers, "
        "properties and a safe preview of the body; ``mq_type`` keeps one IBM MQ message "
        "type (``start``/``limit`` then count those).",
    )
    def get(self, request, type, name):
        kind = dest_type(type)
        q = self.query(s.MessageQuerySerializer)
        rows = list_messages(
            self.admin, name, kind, start=q["start"], limit=q["limit"], mq_type=q.get("mq_type")
        )
        return Response(
            s.MessagePageSerializer(
                {"start": q["start"], "limit": q["limit"], "results": rows}
            ).data
        )


class MessageView(AdminView):
    @doc("One message", s.MessageSerializer, params=[*DEST_PARAMS, MESSAGE_PARAM])
    def get(self, request, type, name, msg_id):
        row = get_message(self.admin, name, msg_id, dest_type(type))
        return Response(s.MessageSerializer(row).data)

    @doc("Delete one message", None, code=204, params=[*DEST_PARAMS, MESSAGE_PARAM])
    def delete(self, request, type, name, msg_id):
        delete_message(self.admin, self.actor, name, msg_id, dest_type(type))
        return Response(status=status.HTTP_204_NO_CONTENT)


# ======================================================================================
# Connections
# ======================================================================================

ID_SCHEMA = {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**63 - 1}
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


# ======================================================================================
# Durable subscriptions
# ======================================================================================

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


# ======================================================================================
# Transactions
# ======================================================================================

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


# ======================================================================================
# Users and groups (the broker's database user repository)
# ======================================================================================

USER_PARAM = path_param("username", "The user's name.")
GROUP_PARAM = path_param("name", "The group's name.")


class UserListView(QuerysetListView):
    serializer_class = s.UserCreateSerializer  # the browsable API's form
    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.UserFilter
    row_serializer = s.UserSerializer
    render = staticmethod(security_actions.user_dict)

    def get_queryset(self):
        return security_actions.users_queryset()

    @doc("List the users", s.UserSerializer(many=True), errors=DB_ERRORS)
    def get(self, request):
        return self.list_response()

    @doc(
        "Create a user",
        s.UserSerializer,
        code=201,
        request=s.UserCreateSerializer,
        errors=DB_ERRORS,
    )
    def post(self, request):
        data = self.body(s.UserCreateSerializer)
        user = security_actions.create_user(self.actor, **data)
        return Response(s.UserSerializer(user).data, status=status.HTTP_201_CREATED)


class UserView(AdminView):
    @doc("Query a user", s.UserSerializer, params=[USER_PARAM], errors=DB_ERRORS)
    def get(self, request, username):
        return Response(s.UserSerializer(security_actions.get_user(username)).data)

    @doc(
        "Update a user",
        s.UserSerializer,
        request=s.UserUpdateSerializer,
        params=[USER_PARAM],
        errors=DB_ERRORS,
        description="Changes the password, the groups (replaced) and/or the active flag. "
        "Refused (409) when it would leave no active administrator.",
    )
    def patch(self, request, username):
        data = self.body(s.UserUpdateSerializer)
        return Response(
            s.UserSerializer(security_actions.update_user(self.actor, username, **data)).data
        )

    @doc("Delete a user", None, code=204, params=[USER_PARAM], errors=DB_ERRORS)
    def delete(self, request, username):
        security_actions.delete_user(self.actor, username)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupListView(QuerysetListView):
    serializer_class = s.GroupCreateSerializer  # the browsable API's form
    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.GroupFilter
    row_serializer = s.GroupSerializer
    render = staticmethod(security_actions.group_dict)

    def get_queryset(self):
        return security_actions.groups_queryset()

    @doc("List the groups", s.GroupSerializer(many=True), errors=DB_ERRORS)
    def get(self, request):
        return self.list_response()

    @doc(
        "Create a group",
        s.GroupSerializer,
        code=201,
        request=s.GroupCreateSerializer,
        errors=DB_ERRORS,
    )
    def post(self, request):
        data = self.body(s.GroupCreateSerializer)
        group = security_actions.create_group(self.actor, data["name"], data["description"])
        return Response(s.GroupSerializer(group).data, status=status.HTTP_201_CREATED)


class GroupView(AdminView):
    @doc("Query a group", s.GroupSerializer, params=[GROUP_PARAM], errors=DB_ERRORS)
    def get(self, request, name):
        return Response(s.GroupSerializer(security_actions.get_group(name)).data)

    @doc(
        "Update a group's description",
        s.GroupSerializer,
        request=s.GroupUpdateSerializer,
        params=[GROUP_PARAM],
        errors=DB_ERRORS,
    )
    def patch(self, request, name):
        data = self.body(s.GroupUpdateSerializer)
        return Response(
            s.GroupSerializer(
                security_actions.update_group(self.actor, name, data["description"])
            ).data
        )

    @doc(
        "Delete a group",
        None,
        code=204,
        params=[GROUP_PARAM],
        errors=DB_ERRORS,
        description="Its members stay, without the group.  The built-in groups (admin, "
        "user, anonymous) are refused (409).",
    )
    def delete(self, request, name):
        security_actions.delete_group(self.actor, name)
        return Response(status=status.HTTP_204_NO_CONTENT)


# ======================================================================================
# Access control rules
# ======================================================================================

RULE_PARAM = path_param("key", "The rule's key, e.g. queue.orders.consume.allow.group.")
INSTANCE_PARAM = OpenApiParameter(
    "instance",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    description="The broker instance the rule is for; empty or absent: every broker.",
)


class RuleListView(QuerysetListView):
    serializer_class = s.RuleCreateSerializer  # the browsable API's form
    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.RuleFilter
    row_serializer = s.RuleSerializer
    render = staticmethod(security_actions.rule_dict)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            # Schema generation: the model is all it needs (and it seeds nothing).
            from broker.models import AccessRule

            return AccessRule.objects.none()
        return security_actions.rules_queryset()

    @doc("List the access control rules", s.RuleSerializer(many=True), errors=DB_ERRORS)
    def get(self, request):
        return self.list_response()

    @doc(
        "Add or change a rule",
        s.RuleSerializer,
        code=201,
        request=s.RuleCreateSerializer,
        errors=DB_ERRORS,
        ok_description="The rule (200 instead of 201 when it existed and was changed).",
    )
    def post(self, request):
        data = self.body(s.RuleCreateSerializer)
        rule, created = security_actions.set_rule(
            self.actor, data["key"], data["value"], data["instance"]
        )
        return Response(s.RuleSerializer(rule).data, status=201 if created else 200)


class RuleView(AdminView):
    @doc("Query a rule", s.RuleSerializer, params=[RULE_PARAM, INSTANCE_PARAM], errors=DB_ERRORS)
    def get(self, request, key):
        instance = self.query(s.InstanceQuerySerializer)["instance"]
        return Response(s.RuleSerializer(security_actions.get_rule(key, instance)).data)

    @doc(
        "Set a rule",
        s.RuleSerializer,
        request=s.RuleUpdateSerializer,
        params=[RULE_PARAM, INSTANCE_PARAM],
        errors=DB_ERRORS,
        ok_description="The rule (created if it did not exist).",
    )
    def put(self, request, key):
        instance = self.query(s.InstanceQuerySerializer)["instance"]
        data = self.body(s.RuleUpdateSerializer)
        rule, _ = security_actions.set_rule(self.actor, key, data["value"], instance)
        return Response(s.RuleSerializer(rule).data)

    @doc("Delete a rule", None, code=204, params=[RULE_PARAM, INSTANCE_PARAM], errors=DB_ERRORS)
    def delete(self, request, key):
        instance = self.query(s.InstanceQuerySerializer)["instance"]
        security_actions.delete_rule(self.actor, key, instance)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AclFileView(AdminView):
    @doc(
        "The rules as an accesscontrol.properties file",
        s.AclFileSerializer,
        params=[INSTANCE_PARAM],
        errors=DB_ERRORS,
    )
    def get(self, request):
        instance = self.query(s.InstanceQuerySerializer)["instance"]
        text = security_actions.export_rules_file(instance)
        return Response({"instance": instance, "text": text})

    @doc(
        "Replace (or merge) the rules from an accesscontrol.properties text",
        s.AclFileResultSerializer,
        request=s.AclFileUpdateSerializer,
        errors=DB_ERRORS,
        description="Refused whole (400) when a key is not a rule or the version is wrong.",
    )
    def put(self, request):
        data = self.body(s.AclFileUpdateSerializer)
        n = security_actions.import_rules_file(
            self.actor, data["text"], replace=data["replace"], instance=data["instance"]
        )
        text = security_actions.export_rules_file(data["instance"])
        return Response({"instance": data["instance"], "text": text, "rules": n})


# ======================================================================================
# Log records
# ======================================================================================


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
