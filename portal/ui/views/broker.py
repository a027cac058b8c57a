"""The broker's page: its properties and metrics, pause/resume, quiesce, reload the
access rules, reset the metrics, shut down and restart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from broker.admintools.actions import AdminError
from broker.admintools.actions.broker_info import (
    pause_broker,
    query_broker,
    quiesce_broker,
    reload_access_control,
    restart_broker,
    resume_broker,
    shutdown_broker,
    unquiesce_broker,
    update_broker,
)
from broker.admintools.actions.ha import ha_brokers
from broker.admintools.actions.metrics import broker_metrics, reset_metrics

from .. import forms
from ..access import admin_required
from .common import (
    acting_user,
    apply_change,
    broker_address,
    broker_admin,
    confirm_action,
    metric_rows,
    render_page,
)


@admin_required
def broker_view(request: HttpRequest) -> HttpResponse:
    def build():
        admin = broker_admin()
        info = query_broker(admin)
        try:
            metrics = metric_rows(broker_metrics(admin))
        except AdminError:
            metrics = None
        props = sorted(info.pop("properties", {}).items())
        return {
            "info": info,
            "properties": props,
            "metrics": metrics,
            "form": forms.BrokerPropertiesForm(),
            # An HA cluster's members from the shared store, down ones and takeovers too.
            "ha_brokers": ha_brokers(),
        }

    return render_page(request, "portal/broker.html", build, nav="broker")


@admin_required
@require_POST
def broker_properties_update(request: HttpRequest) -> HttpResponse:
    form = forms.BrokerPropertiesForm(request.POST)
    if not form.is_valid():
        for err in form.errors.get("properties", []):
            messages.error(request, err)
        return redirect("broker")
    props = form.cleaned_data["properties"]
    apply_change(
        request,
        lambda: update_broker(broker_admin(), acting_user(request), props),
        "Updated " + ", ".join(f"{k}={v}" for k, v in props.items()) + ".",
    )
    return redirect("broker")


BROKER_OPS: dict[str, tuple[Callable[..., Any], str]] = {
    "pause": (pause_broker, "The broker is paused: its services take no new work."),
    "resume": (resume_broker, "The broker is running again."),
    "quiesce": (quiesce_broker, "The broker is quiesced: it accepts no new connections."),
    "unquiesce": (unquiesce_broker, "The broker accepts new connections again."),
    "reload-acl": (reload_access_control, "The access control rules were reloaded."),
    "reset-metrics": (reset_metrics, "The broker's metrics were reset."),
}


@admin_required
@require_POST
def broker_op(request: HttpRequest, op: str) -> HttpResponse:
    if op not in BROKER_OPS:
        messages.error(request, f"unknown broker operation {op!r}")
        return redirect("broker")
    fn, success = BROKER_OPS[op]
    apply_change(request, lambda: fn(broker_admin(), acting_user(request)), success)
    return redirect("broker")


@admin_required
def broker_shutdown(request: HttpRequest) -> HttpResponse:
    return confirm_action(
        request,
        title="Shut down the broker",
        question=f"Really shut down the broker at {broker_address()}? Every client is "
        "disconnected and the broker stops; it has to be started again by hand.",
        button="Shut down",
        cancel=reverse("broker"),
        do=lambda: shutdown_broker(broker_admin(), acting_user(request)),
        success="The broker is shutting down.",
    )


@admin_required
def broker_restart(request: HttpRequest) -> HttpResponse:
    return confirm_action(
        request,
        title="Restart the broker",
        question=f"Really restart the broker at {broker_address()}? Every client is "
        "disconnected while it restarts.",
        button="Restart",
        cancel=reverse("broker"),
        do=lambda: restart_broker(broker_admin(), acting_user(request)),
        success="The broker is restarting.",
    )
