"""The brokers of the cluster the portal's broker belongs to (imq.cluster.brokerlist)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from broker.admintools.actions.cluster import list_brokers, reload_cluster

from ..access import admin_required
from .common import acting_user, apply_change, broker_admin, render_page


@admin_required
def cluster(request: HttpRequest) -> HttpResponse:
    return render_page(
        request,
        "portal/cluster.html",
        lambda: {"brokers": list_brokers(broker_admin())},
        nav="cluster",
    )


@admin_required
@require_POST
def cluster_reload(request: HttpRequest) -> HttpResponse:
    """imqcmd reload cls: every broker of the cluster reads its broker list again."""
    changed: dict[str, list[str]] = {}

    def do() -> None:
        changed.update(reload_cluster(broker_admin(), acting_user(request)))

    if apply_change(request, do, "The cluster configuration was reloaded."):
        for what in ("added", "removed"):
            if changed.get(what):
                messages.info(request, f"Brokers {what}: {', '.join(changed[what])}.")
    return redirect("cluster")
