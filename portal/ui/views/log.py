"""The log records (the LogRecord table), filtered by level, time and text."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from broker.admintools.actions import ActionError
from broker.admintools.actions.log import log_records

from .. import forms
from ..access import admin_required
from .common import (
    error_text,
    paginate,
)


@admin_required
def log_view(request: HttpRequest) -> HttpResponse:
    filt = forms.LogFilterForm(request.GET or None)
    data = filt.cleaned_data if filt.is_valid() else {}
    try:
        qs = log_records(
            level=data.get("level") or None,
            since=data.get("since"),
            until=data.get("until"),
            text=data.get("text") or None,
        )
    except ActionError as exc:
        messages.error(request, error_text(exc))
        qs = log_records()
    page = paginate(
        request, qs.only("id", "timestamp", "level", "logger", "message", "broker_instance")
    )
    return render(request, "portal/log.html", {"filter": filt, "page": page, "nav": "log"})
