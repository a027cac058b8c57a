"""The brokers of the cluster the portal's broker belongs to (imq.cluster.brokerlist)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from broker.admin.cluster_actions import list_brokers

from ..access import admin_required
from .common import _admin, _page


@admin_required
def cluster(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        "portal/cluster.html",
        lambda: {"brokers": list_brokers(_admin())},
        nav="cluster",
    )
