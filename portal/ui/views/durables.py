"""Durable subscriptions: list, purge, destroy."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from broker.admintools.actions.durables import destroy_durable, list_durables, purge_durable

from ..access import admin_required
from .common import (
    acting_user,
    broker_admin,
    confirm_action,
    paginate,
    render_page,
)


@admin_required
def durables(request: HttpRequest) -> HttpResponse:
    topic = request.GET.get("topic", "").strip()

    def build():
        rows = list_durables(broker_admin(), topic or None)
        return {"page": paginate(request, rows), "total": len(rows), "topic": topic}

    return render_page(request, "portal/durables.html", build, nav="durables")


def _durable_args(request: HttpRequest) -> tuple[str, str]:
    src = request.POST if request.method == "POST" else request.GET
    return src.get("name", ""), src.get("client_id", "")


def _durable_label(name: str, client_id: str) -> str:
    return f"durable subscription {name}" + (f" of client ID {client_id}" if client_id else "")


@admin_required
def durable_purge(request: HttpRequest) -> HttpResponse:
    name, client_id = _durable_args(request)
    label = _durable_label(name, client_id)
    return confirm_action(
        request,
        title="Purge a durable subscription",
        question=f"Really purge {label}? The messages waiting for it are deleted.",
        button="Purge",
        cancel=reverse("durables"),
        do=lambda: purge_durable(broker_admin(), acting_user(request), name, client_id or None),
        success=f"Purged {label}.",
        details=[("name", name), ("client_id", client_id)],
    )


@admin_required
def durable_destroy(request: HttpRequest) -> HttpResponse:
    name, client_id = _durable_args(request)
    label = _durable_label(name, client_id)
    return confirm_action(
        request,
        title="Destroy a durable subscription",
        question=f"Really destroy {label}? The subscription and its messages are deleted.",
        button="Destroy",
        cancel=reverse("durables"),
        do=lambda: destroy_durable(broker_admin(), acting_user(request), name, client_id or None),
        success=f"Destroyed {label}.",
        details=[("name", name), ("client_id", client_id)],
    )
