"""The overview: the broker at a glance and its deepest destinations (the live
figures come over the WebSocket, portal/consumers.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from broker.admintools.actions.broker_info import query_broker
from broker.admintools.actions.destinations import page_destinations

from ..access import admin_required
from .common import (
    DEEPEST,
    broker_admin,
    dest_url,
    render_page,
)


def _deepest(destinations: list[dict], n: int = DEEPEST) -> list[dict]:
    rows = sorted(destinations, key=lambda d: (-d["messages"], -d["bytes"], d["name"]))[:n]
    return [
        {
            "name": d["name"],
            "type": d["type"],
            "messages": d["messages"],
            "bytes": d["bytes"],
            "producers": d["producers"],
            "consumers": d["consumers"],
            "state": d.get("state", ""),
            "url": dest_url(d["name"], d["type"]),
        }
        for d in rows
    ]


def _summary(admin) -> tuple[dict[str, Any], list[dict]]:
    """What the overview shows of the broker, and its deepest destinations (the broker
    sorts and cuts the list: a page of them, whatever their number)."""
    info = query_broker(admin)
    info.pop("properties", None)
    rows, _ = page_destinations(admin, limit=DEEPEST, show_temporary=False, order="depth")
    return info, _deepest(rows)


@admin_required
def overview(request: HttpRequest) -> HttpResponse:
    def build():
        info, deepest = _summary(broker_admin())
        return {"info": info, "deepest": deepest, "initial": {"deepest": deepest}}

    return render_page(request, "portal/overview.html", build, nav="overview")
