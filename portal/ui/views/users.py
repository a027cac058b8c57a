"""Users and groups of the broker's user repository."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from broker.admintools import security_actions as sec
from broker.admintools.actions import ActionError
from broker.admintools.portal_account import guarded_account

from .. import forms
from ..access import admin_required
from .common import (
    REFUSALS,
    acting_user,
    apply_change,
    confirm_action,
    error_text,
    paginate,
)


@admin_required
def users(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    page = paginate(request, sec.users_queryset(search=q or None))
    page.object_list = [sec.user_dict(u) for u in page.object_list]
    return render(
        request,
        "portal/users.html",
        {
            "page": page,
            "total": page.paginator.count,
            "q": q,
            "groups": sec.list_groups(),
            "group_form": forms.GroupCreateForm(),
            "portal_account": guarded_account(),
            "nav": "users",
        },
    )


@admin_required
def user_create(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = forms.UserCreateForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            try:
                sec.create_user(
                    acting_user(request), d["username"], d["password"], d["groups"], d["active"]
                )
            except REFUSALS as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Created user {d['username']}.")
                return redirect("users")
    else:
        form = forms.UserCreateForm()
    return render(request, "portal/user_form.html", {"form": form, "create": True, "nav": "users"})


@admin_required
def user_edit(request: HttpRequest, username: str) -> HttpResponse:
    try:
        record = sec.get_user(username)
    except ActionError as exc:
        return render(
            request,
            "portal/not_found.html",
            {"detail": error_text(exc), "nav": "users"},
            status=404,
        )
    if request.method == "POST":
        form = forms.UserUpdateForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            try:
                sec.update_user(
                    acting_user(request),
                    username,
                    password=d["password"] or None,
                    groups=d["groups"],
                    active=d["active"],
                )
            except REFUSALS as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Updated user {username}.")
                return redirect("users")
    else:
        form = forms.UserUpdateForm(
            initial={"groups": ", ".join(record["groups"]), "active": record["active"]}
        )
    return render(
        request,
        "portal/user_form.html",
        {
            "form": form,
            "create": False,
            "record": record,
            "portal_account": guarded_account(),
            "nav": "users",
        },
    )


@admin_required
def user_delete(request: HttpRequest, username: str) -> HttpResponse:
    own = username == acting_user(request)
    return confirm_action(
        request,
        title=f"Delete user {username}",
        question=f"Really delete user {username}? They can no longer connect or log in."
        + (" This is you: you will be logged out at your next page." if own else ""),
        button="Delete user",
        cancel=reverse("users"),
        do=lambda: sec.delete_user(acting_user(request), username),
        success=f"Deleted user {username}.",
    )


@admin_required
@require_POST
def group_create(request: HttpRequest) -> HttpResponse:
    form = forms.GroupCreateForm(request.POST)
    if form.is_valid():
        d = form.cleaned_data
        apply_change(
            request,
            lambda: sec.create_group(acting_user(request), d["name"].strip(), d["description"]),
            f"Created group {d['name'].strip()}.",
        )
    else:
        messages.error(request, "A group needs a name.")
    return redirect("users")


@admin_required
def group_delete(request: HttpRequest, name: str) -> HttpResponse:
    return confirm_action(
        request,
        title=f"Delete group {name}",
        question=f"Really delete group {name}? Its members lose it (the users stay); rules naming it stay and match nobody.",
        button="Delete group",
        cancel=reverse("users"),
        do=lambda: sec.delete_group(acting_user(request), name),
        success=f"Deleted group {name}.",
    )
