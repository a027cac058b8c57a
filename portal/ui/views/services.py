"""The services (jms, admin, ...): list, detail, port and thread limits, pause/resume."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from broker.admintools.actions import AdminError
from broker.admintools.actions.connections import list_connections
from broker.admintools.actions.metrics import service_metrics
from broker.admintools.actions.services import (
    list_services,
    pause_service,
    query_service,
    resume_service,
    update_service,
)

from .. import forms
from ..access import admin_required
from .common import (
    PER_PAGE,
    acting_user,
    apply_change,
    broker_admin,
    metric_rows,
    next_url,
    render_page,
)


@admin_required
def services(request: HttpRequest) -> HttpResponse:
    return render_page(
        request,
        "portal/services.html",
        lambda: {"services": list_services(broker_admin())},
        nav="services",
    )


@admin_required
def service_detail(request: HttpRequest, name: str) -> HttpResponse:
    def build():
        admin = broker_admin()
        svc = query_service(admin, name)
        try:
            metrics = metric_rows(service_metrics(admin, name))
        except AdminError:
            metrics = None
        conns = list_connections(admin, name)
        form = forms.ServiceUpdateForm(
            initial={
                "port": svc["port"],
                "max_threads": svc["max_threads"],
                "min_threads": svc["min_threads"],
            }
        )
        return {
            "service": svc,
            "metrics": metrics,
            "connections": conns[:PER_PAGE],
            "connection_count": len(conns),
            "form": form,
        }

    return render_page(request, "portal/service.html", build, nav="services")


@admin_required
@require_POST
def service_update(request: HttpRequest, name: str) -> HttpResponse:
    form = forms.ServiceUpdateForm(request.POST)
    back = reverse("service", args=[name])
    if not form.is_valid():
        for field, errs in form.errors.items():
            for err in errs:
                messages.error(
                    request, f"{form.fields[field].label if field in form.fields else field}: {err}"
                )
        return redirect(back)
    data = form.cleaned_data
    apply_change(
        request,
        lambda: update_service(
            broker_admin(),
            acting_user(request),
            name,
            port=data.get("port"),
            min_threads=data.get("min_threads"),
            max_threads=data.get("max_threads"),
        ),
        f"Service {name} updated.",
    )
    return redirect(back)


@admin_required
@require_POST
def service_op(request: HttpRequest, name: str, op: str) -> HttpResponse:
    fns = {"pause": pause_service, "resume": resume_service}
    if op not in fns:
        messages.error(request, f"unknown service operation {op!r}")
    else:
        done = "paused" if op == "pause" else "resumed"
        apply_change(
            request,
            lambda: fns[op](broker_admin(), acting_user(request), name),
            f"Service {name} {done}.",
        )
    return redirect(next_url(request, reverse("services")))
