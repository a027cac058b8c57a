"""A queue's messages: list, one message (headers, properties, body preview), delete."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from broker.admintools.actions import ActionError, AdminError
from broker.admintools.actions.destinations import query_destination
from broker.admintools.actions.messages import delete_message, get_message, list_messages

from ..access import admin_required
from .common import (
    PER_PAGE,
    acting_user,
    broker_admin,
    confirm_action,
    dest_url,
    error_text,
    java_type,
    kind_code,
    kind_label,
    plain_value,
    render_page,
)


def _msg_row(m: dict) -> dict[str, Any]:
    """The columns of the message list (actions' message dicts)."""
    return {
        "id": m["id"],
        "type": m["message_type"],
        "priority": m["priority"],
        "timestamp": _timestamp(m["timestamp"]),
        "redelivered": m["redelivered"],
        "size": m["body_size"],
        "persistent": m["persistent"],
        "mq_type": m["mq_type_name"],
        "reports": m["report_options"],
        "feedback": m["feedback_name"],
    }


def _timestamp(value: Any) -> str:
    if isinstance(value, int) and value > 0:
        from datetime import UTC, datetime

        return (
            datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
        )
    return ""


@admin_required
def messages_list(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    try:
        page_no = max(1, int(request.GET.get("page", 1)))
    except ValueError:
        page_no = 1
    mq_type = request.GET.get("mq_type", "")

    def build() -> dict[str, object]:
        admin = broker_admin()
        dest = query_destination(admin, kind, name)
        start = (page_no - 1) * PER_PAGE
        error = ""
        rows: list[dict] = []
        try:
            rows = [
                _msg_row(m)
                for m in list_messages(
                    admin, name, kind, start=start, limit=PER_PAGE, mq_type=mq_type
                )
            ]
        except (AdminError, ActionError) as exc:
            error = error_text(exc)
        total = dest["messages"]
        return {
            "dest": dest,
            "kind": kind_code(kind),
            "rows": rows,
            "error": error,
            "page_no": page_no,
            "start": start,
            "has_previous": page_no > 1,
            "has_next": start + len(rows) < total and len(rows) == PER_PAGE,
            # Filtered, the number of pages is not known without reading them all.
            "pages": "?" if mq_type else max(1, (total + PER_PAGE - 1) // PER_PAGE),
            "mq_type": mq_type,
            "mq_types": ["datagram", "request", "reply", "report"],
            "page_query": urlencode({"mq_type": mq_type}) + "&" if mq_type else "",
        }

    return render_page(request, "portal/messages.html", build, nav="destinations")


@admin_required
def message_detail(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    msg_id = request.GET.get("id", "")

    def build():
        if not msg_id:
            raise AdminError(404, "no message ID given")
        m = get_message(broker_admin(), name, msg_id, kind)
        headers = [
            ("Message ID", m["id"]),
            ("Message type", m["message_type"]),
            ("JMSType", m["jms_type"]),
            ("Priority", m["priority"]),
            ("Timestamp", _timestamp(m["timestamp"])),
            ("Expiration", _timestamp(m["expiration"]) or "never"),
            ("Delivery mode", "persistent" if m["persistent"] else "non-persistent"),
            ("Redelivered", "yes" if m["redelivered"] else "no"),
            ("Correlation ID", m["correlation_id"]),
            ("IBM MQ message type", m["mq_type_name"]),
            ("Report options", m["report_options"]),
            ("Feedback", m["feedback_name"]),
            ("Reply to", m["reply_to"]),
            ("Destination", m["destination"]),
            ("Body size", f"{m['body_size']} bytes"),
        ]
        shown = {
            "MessageID",
            "Type",
            "Priority",
            "Timestamp",
            "Expiration",
            "DeliveryMode",
            "Redelivered",
            "CorrelationID",
            "ReplyToDestinationName",
            "DestinationName",
            "DestinationType",
            "MessageKind",
            "MessageBodyType",
        }
        headers += sorted((k, plain_value(v)) for k, v in m["headers"].items() if k not in shown)
        return {
            "msg": _msg_row(m),
            "msg_id": msg_id,
            "headers": headers,
            "properties": [
                (k, java_type(v), plain_value(v)) for k, v in sorted(m["properties"].items())
            ],
            "preview": m["preview"],
            "dest": {"name": name, "type": kind_label(kind)},
            "kind": kind_code(kind),
        }

    return render_page(request, "portal/message.html", build, nav="destinations")


@admin_required
def message_delete(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    msg_id = request.POST.get("id") or request.GET.get("id", "")
    label = kind_label(kind)
    back = dest_url(name, kind, "messages")
    return confirm_action(
        request,
        title=f"Delete message from {label} {name}",
        question=f"Really delete message {msg_id} from {label} {name}?",
        button="Delete message",
        cancel=reverse("message", args=[kind_code(kind), name]) + "?" + urlencode({"id": msg_id}),
        done=back,
        do=lambda: delete_message(broker_admin(), acting_user(request), name, msg_id, kind),
        success=f"Deleted message {msg_id}.",
        details=[("id", msg_id)],
    )
