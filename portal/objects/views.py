"""The administered objects pages: list, add, edit, delete objects; add and delete
object stores.  Thin: every change is one call of :mod:`portal.objects.actions`."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from portal.ui.access import admin_required
from portal.ui.views.common import REFUSALS, acting_user, confirm_action, error_text, paginate

from . import actions, forms
from .attributes import TYPES
from .models import AdministeredObject

NAV = "objects"


def _not_found(request: HttpRequest, detail: str) -> HttpResponse:
    return render(request, "portal/not_found.html", {"detail": detail, "nav": NAV}, status=404)


def _get(pk: int) -> AdministeredObject | None:
    return AdministeredObject.objects.select_related("store").filter(pk=pk).first()


@admin_required
def objects_page(request: HttpRequest) -> HttpResponse:
    store = request.GET.get("store", "").strip()
    kind = request.GET.get("type", "").strip()
    q = request.GET.get("q", "").strip()
    stores = actions.list_stores()
    qs = actions.objects_queryset(
        store=store or None, obj_type=kind if kind in TYPES else None, search=q or None
    )
    page = paginate(request, qs)
    page.object_list = [{"pk": o.pk, **actions.object_dict(o)} for o in page.object_list]
    return render(
        request,
        "portal/objects.html",
        {
            "page": page,
            "total": page.paginator.count,
            "stores": stores,
            "types": [(code, t.label) for code, t in TYPES.items()],
            "store": store,
            "type": kind,
            "q": q,
            "store_form": forms.StoreCreateForm(),
            "nav": NAV,
        },
    )


@admin_required
def object_create(request: HttpRequest) -> HttpResponse:
    names = [s["name"] for s in actions.list_stores()]
    if request.method == "POST":
        form = forms.ObjectCreateForm(request.POST, stores=names)
        if form.is_valid():
            d = form.cleaned_data
            try:
                actions.add_object(
                    acting_user(request),
                    d["lookup_name"],
                    d["obj_type"],
                    d["attributes"],
                    read_only=d["read_only"],
                    store=d["store"],
                )
            except REFUSALS as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Added {d['lookup_name']} to {d['store']}.")
                return redirect("objects")
    else:
        form = forms.ObjectCreateForm(
            stores=names, initial={"store": request.GET.get("store") or actions.DEFAULT_STORE}
        )
    return render(request, "portal/object_form.html", {"form": form, "create": True, "nav": NAV})


@admin_required
def object_edit(request: HttpRequest, pk: int) -> HttpResponse:
    obj = _get(pk)
    if obj is None:
        return _not_found(request, f"no administered object {pk}")
    record = actions.object_dict(obj)
    if request.method == "POST":
        form = forms.ObjectUpdateForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            try:
                actions.update_object(
                    acting_user(request),
                    obj.lookup_name,
                    attributes=d["attributes"],
                    read_only=d["read_only"],
                    store=obj.store.name,
                    replace=True,
                )
            except REFUSALS as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Updated {obj.lookup_name}.")
                return redirect("object", pk=pk)
    else:
        lines = "\n".join(f"{k}={v}" for k, v in record["attributes"].items())
        form = forms.ObjectUpdateForm(
            initial={"read_only": record["read_only"], "attributes": lines}
        )
    return render(
        request,
        "portal/object_form.html",
        {
            "form": form,
            "create": False,
            "record": record,
            "pk": pk,
            "effective": sorted(record["effective"].items()),
            "nav": NAV,
        },
    )


@admin_required
def object_delete(request: HttpRequest, pk: int) -> HttpResponse:
    obj = _get(pk)
    if obj is None:
        return _not_found(request, f"no administered object {pk}")
    label = TYPES[obj.obj_type].label
    return confirm_action(
        request,
        title=f"Delete {obj.lookup_name}",
        question=f"Really delete {label} {obj.lookup_name} from object store {obj.store.name}?",
        button="Delete",
        cancel=reverse("object", args=[pk]),
        do=lambda: actions.delete_object(
            acting_user(request), obj.lookup_name, store=obj.store.name
        ),
        success=f"Deleted {obj.lookup_name}.",
        done=reverse("objects"),
    )


@admin_required
def store_create(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return redirect("objects")
    form = forms.StoreCreateForm(request.POST)
    if form.is_valid():
        try:
            actions.create_store(acting_user(request), form.cleaned_data["name"], form.properties())
        except REFUSALS as exc:
            messages.error(request, error_text(exc))
        else:
            messages.success(request, f"Added object store {form.cleaned_data['name']}.")
    else:
        for field, errors in form.errors.items():
            for error in errors:
                messages.error(request, f"{field}: {error}" if field != "__all__" else error)
    return redirect("objects")


@admin_required
def store_delete(request: HttpRequest, name: str) -> HttpResponse:
    return confirm_action(
        request,
        title=f"Delete object store {name}",
        question=f"Really forget object store {name}? (What it published stays there.)",
        button="Delete",
        cancel=reverse("objects"),
        do=lambda: actions.delete_store(acting_user(request), name),
        success=f"Deleted object store {name}.",
        done=reverse("objects"),
    )
