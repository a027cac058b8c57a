"""Access control rules: list, edit, delete, import and export (accesscontrol.properties)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from broker.admintools import security_actions as sec
from broker.admintools.actions import ActionError

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
def rules(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    page = paginate(request, sec.rules_queryset(search=q or None))
    page.object_list = [sec.rule_dict(r) for r in page.object_list]
    return render(
        request,
        "portal/rules.html",
        {
            "page": page,
            "total": page.paginator.count,
            "q": q,
            "import_form": forms.RulesImportForm(),
            "nav": "acl",
        },
    )


@admin_required
def rule_edit(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = forms.RuleForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            key, value, inst = d["key"].strip(), d["value"].strip(), d["instance"].strip()
            try:
                sec.set_rule(acting_user(request), key, value, inst)
            except REFUSALS as exc:
                form.add_error(None, error_text(exc))
            else:
                messages.success(request, f"Saved rule {key}={value}.")
                return redirect("rules")
    else:
        key = request.GET.get("key", "")
        inst = request.GET.get("instance", "")
        try:
            value = sec.get_rule(key, inst)["value"] if key else ""
        except ActionError:
            value = ""
        form = forms.RuleForm(initial={"key": key, "value": value, "instance": inst})
    return render(request, "portal/rule_form.html", {"form": form, "nav": "acl"})


@admin_required
def rule_delete(request: HttpRequest) -> HttpResponse:
    src = request.POST if request.method == "POST" else request.GET
    key, inst = src.get("key", ""), src.get("instance", "")
    where = f" (broker {inst})" if inst else ""
    return confirm_action(
        request,
        title="Delete an access control rule",
        question=f"Really delete rule {key}{where}?",
        button="Delete rule",
        cancel=reverse("rules"),
        do=lambda: sec.delete_rule(acting_user(request), key, inst),
        success=f"Deleted rule {key}{where}.",
        details=[("key", key), ("instance", inst)],
    )


@admin_required
@require_POST
def rules_import(request: HttpRequest) -> HttpResponse:
    form = forms.RulesImportForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Paste the text of an accesscontrol.properties file.")
        return redirect("rules")
    d = form.cleaned_data
    apply_change(
        request,
        lambda: sec.import_rules_file(acting_user(request), d["text"], replace=d["replace"]),
        "Imported the rules"
        + (", replacing the old ones." if d["replace"] else ", merged with the old ones."),
    )
    return redirect("rules")


@admin_required
def rules_export(request: HttpRequest) -> HttpResponse:
    text = sec.export_rules_file()
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="accesscontrol.properties"'
    return response
