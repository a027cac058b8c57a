"""Client connections: list, detail, destroy."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from broker.admin import actions

from ..access import admin_required
from .common import (
    acting_user,
    broker_admin,
    confirm_action,
    paginate,
    render_page,
)


@admin_required
def connections(request: HttpRequest) -> HttpResponse:
    service = request.GET.get("service", "").strip()
    user = request.GET.get("user", "").strip()

    def build():
        admin = broker_admin()
        rows = actions.list_connections(admin)
        if service:
            rows = [r for r in rows if r["service"] == service]
        if user:
            rows = [r for r in rows if user.lower() in r["user"].lower()]
        return {
            "page": paginate(request, rows),
            "total": len(rows),
            "service": service,
            "user_filter": user,
            "services": [s["name"] for s in actions.list_services(admin)],
        }

    return render_page(request, "portal/connections.html", build, nav="connections")


@admin_required
def connection_detail(request: HttpRequest, cxn_id: int) -> HttpResponse:
    return render_page(
        request,
        "portal/connection.html",
        lambda: {"cxn": actions.query_connection(broker_admin(), cxn_id)},
        nav="connections",
    )


@admin_required
def connection_destroy(request: HttpRequest, cxn_id: int) -> HttpResponse:
    return confirm_action(
        request,
        title=f"Destroy connection {cxn_id}",
        question=f"Really destroy connection {cxn_id}? The client is disconnected; its "
        "unacknowledged messages are redelivered and its open transactions rolled back.",
        button="Destroy connection",
        cancel=reverse("connection", args=[cxn_id]),
        done=reverse("connections"),
        do=lambda: actions.destroy_connection(broker_admin(), acting_user(request), cxn_id),
        success=f"Destroyed connection {cxn_id}.",
    )
