"""Access control rules, one by one or as an accesscontrol.properties file."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.response import Response

from broker.admintools import security_actions

from .. import filters
from .. import serializers as s
from ..base import DB_ERRORS, AdminView, QuerysetListView, doc, path_param

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
