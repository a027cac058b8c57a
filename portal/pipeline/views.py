"""The pipeline's pages: history charts per broker (and their data, which the destination
page's history section reads too) and the pipeline's runs.  Administrators only.

The pages are read from the rollup tables (portal/pipeline/history.py), never from the
broker, so they work while the broker is down.  The charts are drawn by
static/portal/history.js (uPlot, served from static/portal/vendor/), which fetches
:func:`history_data`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from portal.auth import is_administrator
from portal.ui.access import admin_required

from .history import RANGES, brokers_with_history, history_series, pipeline_runs

RUNS_PER_PAGE = 50
ERROR_PREVIEW = 300  # characters of a failed run's error shown before "more"


@admin_required
def history(request: HttpRequest, broker: str | None = None) -> HttpResponse:
    """The History page of one broker (the portal's own by default)."""
    broker = broker or settings.IMQ_INSTANCE
    brokers = brokers_with_history()
    if broker not in brokers:
        brokers = sorted([*brokers, broker])
    wanted = request.GET.get("range", "hour")
    return render(
        request,
        "portal/history.html",
        {
            "nav": "history",
            "broker": broker,
            "brokers": [(b, reverse("history_broker", args=[b])) for b in brokers],
            "ranges": list(RANGES.values()),
            "range": wanted if wanted in RANGES else "hour",
            "data_url": reverse("history_data"),
        },
    )


def history_data(request: HttpRequest) -> JsonResponse:
    """``GET history/data/?broker=&destination=&type=&range=``: one chart's series as JSON
    (portal/pipeline/history.py); 403 for anyone but an administrator, 400 for a bad
    range."""
    if not is_administrator(request.user):
        return JsonResponse({"detail": "administrators only"}, status=403)
    params = request.GET
    kind = params.get("type", "")
    if kind not in ("", "queue", "topic"):
        return JsonResponse({"detail": "type must be queue or topic"}, status=400)
    try:
        series = history_series(
            params.get("broker") or settings.IMQ_INSTANCE,
            params.get("range", "hour"),
            destination=params.get("destination", ""),
            dest_type=kind,
        )
    except ValueError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    return JsonResponse(series)


@admin_required
def pipeline(request: HttpRequest) -> HttpResponse:
    """The pipeline's runs, newest first, 50 a page."""
    page = Paginator(pipeline_runs(), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    for run in page:
        run.error_preview = (run.error or "")[:ERROR_PREVIEW]
    return render(
        request,
        "portal/pipeline_runs.html",
        {"nav": "history", "page": page, "total": page.paginator.count},
    )
