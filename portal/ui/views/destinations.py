"""Destinations: list and filter, create, detail (consumers, producers, metrics),
edit attributes, purge, destroy, pause/resume, compact."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from broker.admintools.actions import AdminError, BrokerUnavailable
from broker.admintools.actions.consumers import list_consumers, list_producers
from broker.admintools.actions.destinations import (
    compact_destination,
    create_destination,
    destroy_destination,
    paged_destinations,
    pause_destination,
    purge_destination,
    query_destination,
    resume_destination,
    update_destination,
)
from broker.admintools.actions.metrics import destination_metrics

from .. import forms
from ..access import admin_required
from .common import (
    REFUSALS,
    acting_user,
    apply_change,
    broker_address,
    broker_admin,
    confirm_action,
    dest_url,
    error_text,
    human_bytes,
    kind_code,
    kind_label,
    metric_rows,
    next_url,
    paginate,
    plain_value,
    render_page,
)


@admin_required
def destinations(request: HttpRequest) -> HttpResponse:
    filt = forms.DestinationFilterForm(request.GET or None)
    data = filt.cleaned_data if filt.is_valid() else {}

    def build():
        rows = paged_destinations(
            broker_admin(),
            kind=data.get("type") or None,
            name_contains=data.get("name") or None,
            state=data.get("state") or None,
            show_temporary=bool(data.get("temporary")),
            hide_admin_temporary=True,
        )
        page = paginate(request, rows)
        page.object_list = [
            {**row, "url": dest_url(row["name"], row["type"])} for row in page.object_list
        ]
        return {"filter": filt, "page": page, "total": page.paginator.count}

    return render_page(request, "portal/destinations.html", build, nav="destinations")


@admin_required
def destination_create(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = forms.DestinationCreateForm(request.POST)
        if form.is_valid():
            kind = form.cleaned_data["kind"]
            name = form.cleaned_data["name"].strip()
            attrs = form.attributes()
            try:
                create_destination(broker_admin(), acting_user(request), kind, name, attrs)
            except REFUSALS as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Created {kind_label(kind)} {name}.")
                return redirect(dest_url(name, kind))
    else:
        form = forms.DestinationCreateForm(initial={"kind": request.GET.get("type", "q")})
    return render(
        request,
        "portal/destination_form.html",
        {"form": form, "create": True, "nav": "destinations"},
    )


@admin_required
def destination_detail(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    def build():
        admin = broker_admin()
        dest = query_destination(admin, kind, name)
        try:
            consumers, consumers_error = list_consumers(admin, kind, name), ""
        except AdminError as exc:
            consumers, consumers_error = [], error_text(exc)
        try:
            producers, producers_error = list_producers(admin, kind, name), ""
        except AdminError as exc:
            producers, producers_error = [], error_text(exc)
        try:
            metrics = metric_rows(destination_metrics(admin, kind, name))
        except AdminError:
            metrics = None
        return {
            "dest": dest,
            "kind": kind_code(kind),
            "attributes": [(k, plain_value(v)) for k, v in sorted(dest["attributes"].items())],
            "consumers": consumers,
            "consumers_error": consumers_error,
            "producers": producers,
            "producers_error": producers_error,
            "metrics": metrics,
            "dest_bytes": human_bytes(dest["bytes"]),
            "pause_form": forms.PauseDestinationForm(),
        }

    return render_page(request, "portal/destination.html", build, nav="destinations")


@admin_required
def destination_edit(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    try:
        dest = query_destination(broker_admin(), kind, name)
    except BrokerUnavailable as exc:
        return render(
            request,
            "portal/unavailable.html",
            {"address": broker_address(), "detail": str(exc)},
            status=503,
        )
    except AdminError as exc:
        return render(request, "portal/not_found.html", {"detail": error_text(exc)}, status=404)
    current = dest["attributes"]
    if request.method == "POST":
        form = forms.DestinationAttributesForm(request.POST, current=current, kind=kind_code(kind))
        if form.is_valid():
            attrs = form.attributes(changed_only=True)
            if not attrs:
                messages.info(request, "Nothing changed.")
                return redirect(dest_url(name, kind))
            try:
                update_destination(broker_admin(), acting_user(request), kind, name, attrs)
            except REFUSALS as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(
                    request,
                    f"Updated {kind_label(kind)} {name}: "
                    + ", ".join(f"{k}={v}" for k, v in attrs.items()),
                )
                return redirect(dest_url(name, kind))
    else:
        form = forms.DestinationAttributesForm(current=current, kind=kind_code(kind))
    return render(
        request,
        "portal/destination_form.html",
        {
            "form": form,
            "create": False,
            "dest": dest,
            "kind": kind_code(kind),
            "nav": "destinations",
        },
    )


@admin_required
def destination_purge(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    label = kind_label(kind)
    return confirm_action(
        request,
        title=f"Purge {label} {name}",
        question=f"Really purge {label} {name}? All its messages are deleted.",
        button="Purge",
        cancel=dest_url(name, kind),
        do=lambda: purge_destination(broker_admin(), acting_user(request), kind, name),
        success=f"Purged {label} {name}.",
    )


@admin_required
def destination_destroy(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    label = kind_label(kind)
    return confirm_action(
        request,
        title=f"Destroy {label} {name}",
        question=f"Really destroy {label} {name}? The destination and all its messages are "
        "deleted and its clients get an error.",
        button="Destroy",
        cancel=dest_url(name, kind),
        done=reverse("destinations"),
        do=lambda: destroy_destination(broker_admin(), acting_user(request), kind, name),
        success=f"Destroyed {label} {name}.",
    )


@admin_required
@require_POST
def destination_pause(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    label = kind_label(kind)
    what = request.POST.get("what") or "all"
    apply_change(
        request,
        lambda: pause_destination(broker_admin(), acting_user(request), kind, name, what),
        f"Paused {'producers and consumers' if what == 'all' else what} of {label} {name}.",
    )
    return redirect(next_url(request, dest_url(name, kind)))


@admin_required
@require_POST
def destination_resume(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    apply_change(
        request,
        lambda: resume_destination(broker_admin(), acting_user(request), kind, name),
        f"Resumed {kind_label(kind)} {name}.",
    )
    return redirect(next_url(request, dest_url(name, kind)))


@admin_required
@require_POST
def destination_compact(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    apply_change(
        request,
        lambda: compact_destination(broker_admin(), acting_user(request), kind, name),
        f"Compacted {kind_label(kind)} {name}.",
    )
    return redirect(next_url(request, dest_url(name, kind)))
