"""Client connections: list, detail, destroy."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from broker.admintools.actions.connections import (
    destroy_connection,
    list_connections,
    query_connection,
)
from broker.admintools.actions.services import list_services

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
        rows = list_connections(admin)
        if service:
            rows = [r for r in rows if r["service"] == service]
        if user:
            rows = [r for r in rows if user.lower() in r["user"].lower()]
        return {
            "page": paginate(request, rows),
            "total": len(rows),
            "service": service,
            "user_filter": user,
            "services": [s["name"] for s in list_services(admin)],
        }

    return render_page(request, "portal/connections.html", build, nav="connections")


@admin_required
def connection_detail(request: HttpRequest, cxn_id: int) -> HttpResponse:
    return render_page(
        request,
        "portal/connection.html",
        lambda: {"cxn": query_connection(broker_admin(), cxn_id)},
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
        do=lambda: destroy_connection(broker_admin(), acting_user(request), cxn_id),
        success=f"Destroyed connection {cxn_id}.",
    )
