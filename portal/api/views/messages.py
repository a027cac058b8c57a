"""The messages a destination holds: browse, one message, delete one."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response

from broker.admintools.actions.messages import delete_message, get_message, list_messages

from .. import serializers as s
from ..base import AdminView, dest_type, doc, path_param
from .destinations import DEST_PARAMS

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
