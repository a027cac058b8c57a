"""REST endpoints for definitions and message workflows: thin, as in views.py.  Each
validates its body with a serializer and calls ONE function of
:mod:`broker.admintools.definitions` or :mod:`broker.admintools.workflows` with ``actor`` = the
requesting administrator.

* ``/api/definitions/``: GET the whole configuration as one JSON document; POST one
  (``?dry_run=true`` only reports) -> the changes; a refused document is a 400 whose
  ``errors.document`` lists every reason.
* ``destinations/{type}/{name}/publish/``: POST a message.
* ``destinations/queue/{name}/messages/transfer/``: POST move, copy or re-send.
* ``destinations/queue/{name}/messages/delete/``: POST delete by selector.
* ``/api/dmq/retry/``: POST send dead messages back where they died.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from broker.admintools import definitions, workflows

from .base import DEST_NAME_PARAM, DEST_TYPE_PARAM, AdminView, dest_type, doc
from .errors import error_response
from .serializers import DEST_TYPES, FreeFormSerializer

DEST_PARAMS = [DEST_TYPE_PARAM, DEST_NAME_PARAM]
QUEUE_PARAMS = [DEST_NAME_PARAM]


# --------------------------------------------------------------------------------------
# Serializers
# --------------------------------------------------------------------------------------


class ChangeSerializer(serializers.Serializer):
    section = serializers.CharField()
    op = serializers.ChoiceField(choices=("create", "update", "unchanged"))
    name = serializers.CharField()
    detail = serializers.CharField(allow_blank=True)


class ImportResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    summary = serializers.DictField(child=serializers.IntegerField())
    changes = ChangeSerializer(many=True)


class ImportQuerySerializer(serializers.Serializer):
    dry_run = serializers.BooleanField(default=False, help_text="Only report what would change.")


class PublishSerializer(serializers.Serializer):
    message_type = serializers.ChoiceField(choices=workflows.BODY_TYPES, default="text")
    body = serializers.JSONField(
        required=False,
        default="",
        help_text="text: a string; bytes: a string in `encoding`; map: a JSON object.",
    )
    encoding = serializers.ChoiceField(choices=workflows.ENCODINGS, default="utf-8")
    properties = serializers.DictField(
        required=False, default=dict, help_text="name: string, number or boolean"
    )
    persistent = serializers.BooleanField(default=True)
    priority = serializers.IntegerField(min_value=0, max_value=9, default=4)
    ttl_ms = serializers.IntegerField(min_value=0, max_value=2**62, default=0)
    jms_type = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    correlation_id = serializers.CharField(required=False, allow_blank=True, max_length=1000)


class PublishedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    id = serializers.CharField(help_text="The message's JMSMessageID.")


class SelectionSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=10000,
        help_text="The messages (JMSMessageID); without it those matching `selector`, or all.",
    )
    selector = serializers.CharField(
        required=False, allow_blank=True, max_length=4000, help_text="A JMS message selector."
    )


class TransferSerializer(SelectionSerializer):
    mode = serializers.ChoiceField(choices=workflows.TRANSFER_MODES)
    target = serializers.CharField(max_length=255)
    target_type = serializers.ChoiceField(choices=DEST_TYPES, default="queue")


class DeleteSelectedSerializer(serializers.Serializer):
    selector = serializers.CharField(max_length=4000)


class WorkflowResultSerializer(serializers.Serializer):
    detail = serializers.CharField()
    count = serializers.IntegerField(help_text="Messages done.")
    already_in_target = serializers.IntegerField(
        required=False, help_text="Copies a cut-short move had sent already (only deleted now)."
    )
    left_in_source = serializers.ListField(
        child=serializers.CharField(), help_text="Being delivered: left where they were."
    )
    not_found = serializers.ListField(child=serializers.CharField(), required=False)
    targets = serializers.DictField(child=serializers.IntegerField(), required=False)


def _selection(body: dict) -> dict:
    return {"ids": body.get("ids"), "selector": body.get("selector") or None}


# --------------------------------------------------------------------------------------
# Definitions
# --------------------------------------------------------------------------------------


class DefinitionsView(AdminView):
    @doc(
        "Export the definitions",
        FreeFormSerializer,
        description="Destinations with attributes, groups, users (stored credentials, never "
        "passwords), access rules, run-time broker properties: one JSON document.",
    )
    def get(self, request):
        return Response(definitions.export_definitions(self.admin))

    @doc(
        "Import definitions",
        ImportResultSerializer,
        request=OpenApiTypes.OBJECT,
        params=[ImportQuerySerializer],
        description="Validated first (a 400 lists every error in errors.document), then "
        "applied all or nothing; with dry_run=true only reported.",
    )
    def post(self, request):
        q = self.query(ImportQuerySerializer)
        if not isinstance(request.data, dict):
            raise exceptions.ValidationError({"non_field_errors": ["a JSON object is expected"]})
        try:
            result = definitions.import_definitions(
                self.admin, self.actor, dict(request.data), dry_run=q["dry_run"]
            )
        except definitions.DefinitionsError as exc:
            return error_response(
                400,
                f"the definitions were refused, nothing changed: {exc}",
                errors={"document": exc.errors},
            )
        return Response(ImportResultSerializer(result).data)


# --------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------


class PublishView(AdminView):
    @doc("Publish a message", PublishedSerializer, request=PublishSerializer, params=DEST_PARAMS)
    def post(self, request, type, name):
        kind = dest_type(type)
        b = self.body(PublishSerializer)
        mid = workflows.publish_message(
            self.admin,
            self.actor,
            kind,
            name,
            message_type=b["message_type"],
            body=b["body"],
            encoding=b["encoding"],
            properties=b["properties"],
            persistent=b["persistent"],
            priority=b["priority"],
            ttl_ms=b["ttl_ms"],
            jms_type=b.get("jms_type") or None,
            correlation_id=b.get("correlation_id") or None,
        )
        return Response({"detail": f"published message {mid} to {kind} {name}", "id": mid})


class TransferView(AdminView):
    @doc(
        "Move, copy or re-send a queue's messages",
        WorkflowResultSerializer,
        request=TransferSerializer,
        params=QUEUE_PARAMS,
        description="move: a copy is sent (persistent messages durably) marked "
        "JMS_PY_ORIGINAL_ID, then the original removed; run again after a failure, it "
        "finishes without duplicates.  copy keeps the original; resend sends it again as "
        "a new message.",
    )
    def post(self, request, name):
        b = self.body(TransferSerializer)
        result = workflows.transfer_messages(
            self.admin,
            self.actor,
            b["mode"],
            name,
            b["target"],
            target_kind=b["target_type"],
            **_selection(b),
        )
        verb = {"move": "moved", "copy": "copied", "resend": "re-sent"}[b["mode"]]
        return Response(
            {"detail": f"{verb} {result['count']} message(s) to {b['target']}", **result}
        )


class DeleteSelectedView(AdminView):
    @doc(
        "Delete a queue's messages matching a selector",
        WorkflowResultSerializer,
        request=DeleteSelectedSerializer,
        params=QUEUE_PARAMS,
    )
    def post(self, request, name):
        b = self.body(DeleteSelectedSerializer)
        result = workflows.delete_by_selector(self.admin, self.actor, name, b["selector"])
        return Response({"detail": f"deleted {result['count']} message(s)", **result})


class RetryView(AdminView):
    @doc(
        "Retry dead messages",
        WorkflowResultSerializer,
        request=SelectionSerializer,
        description="Messages of mq.sys.dmq go back to the destination each died on, with "
        "their headers and properties and a JMS_PY_REDELIVERY_NOTE.",
    )
    def post(self, request):
        b = self.body(SelectionSerializer)
        result = workflows.retry_dead_messages(self.admin, self.actor, **_selection(b))
        return Response({"detail": f"retried {result['count']} message(s)", **result})
