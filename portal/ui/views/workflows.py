"""Definitions (download, upload with a dry run) and message workflows (publish; move,
copy or re-send selected messages; retry from the DMQ; delete by selector).

Thin: each page validates its form and calls one function of
:mod:`broker.admintools.definitions` or :mod:`broker.admintools.workflows`, which records the
change in the audit log with the administrator who made it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import urlencode

from django import forms
from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from broker.admintools import definitions, workflows

from ..access import admin_required
from .common import (
    REFUSALS,
    acting_user,
    broker_admin,
    confirm_action,
    dest_url,
    error_text,
    kind_code,
    kind_label,
    render_page,
)

MAX_UPLOAD = 20 * 1024 * 1024


# --------------------------------------------------------------------------------------
# Definitions
# --------------------------------------------------------------------------------------


class DefinitionsUploadForm(forms.Form):
    file = forms.FileField(label="Definitions file (JSON)")
    dry_run = forms.BooleanField(
        label="Dry run: only show what would change", required=False, initial=True
    )


@admin_required
def definitions_page(request: HttpRequest) -> HttpResponse:
    """GET: download link and upload form; POST: import the uploaded file (or only
    report what it would change) and show the changes or every error."""
    result = None
    errors: list[str] = []
    form = DefinitionsUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        doc = None
        if upload.size > MAX_UPLOAD:
            errors = [f"the file is larger than {MAX_UPLOAD // 1024 // 1024} MB"]
        else:
            try:
                doc = json.loads(upload.read().decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                errors = [f"{upload.name} is not a JSON document: {exc}"]
        if doc is not None:
            try:
                result = definitions.import_definitions(
                    broker_admin(), acting_user(request), doc, dry_run=form.cleaned_data["dry_run"]
                )
            except definitions.DefinitionsError as exc:
                errors = exc.errors
            except REFUSALS as exc:
                errors = [f"the broker refused, nothing changed: {error_text(exc)}"]
        if result is not None and not result["dry_run"]:
            s = result["summary"]
            flash.success(
                request,
                f"Imported {upload.name}: {s['create']} created, {s['update']} updated, "
                f"{s['unchanged']} unchanged.",
            )
    changed = [c for c in result["changes"] if c["op"] != "unchanged"] if result else []
    return render(
        request,
        "portal/definitions.html",
        {
            "nav": "definitions",
            "form": form,
            "result": result,
            "changed": changed,
            "errors": errors,
        },
    )


@admin_required
def definitions_export(request: HttpRequest) -> HttpResponse:
    """The definitions as a JSON file download."""
    try:
        doc = definitions.export_definitions(broker_admin())
    except REFUSALS as exc:
        refusal = exc

        def build() -> dict:
            raise refusal

        return render_page(request, "portal/definitions.html", build, nav="definitions")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    response = HttpResponse(json.dumps(doc, indent=2) + "\n", content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="definitions-{stamp}.json"'
    return response


# --------------------------------------------------------------------------------------
# Publish
# --------------------------------------------------------------------------------------


class PublishForm(forms.Form):
    message_type = forms.ChoiceField(
        label="Message type", choices=[(t, t) for t in workflows.BODY_TYPES], initial="text"
    )
    body = forms.CharField(
        label="Body",
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="map: a JSON object; bytes: text in the encoding below",
    )
    encoding = forms.ChoiceField(
        label="Bytes encoding", choices=[(e, e) for e in workflows.ENCODINGS], initial="utf-8"
    )
    properties = forms.CharField(
        label="Properties",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="name=value lines; whole numbers, decimals and true/false are typed",
    )
    persistent = forms.BooleanField(label="Persistent", required=False, initial=True)
    priority = forms.IntegerField(label="Priority", min_value=0, max_value=9, initial=4)
    ttl_ms = forms.IntegerField(
        label="Time to live (ms)", min_value=0, initial=0, help_text="0: never expires"
    )
    jms_type = forms.CharField(label="JMSType", required=False, max_length=1000)
    correlation_id = forms.CharField(label="Correlation ID", required=False, max_length=1000)

    def clean_properties(self) -> dict[str, object]:
        try:
            return workflows.parse_properties(self.cleaned_data["properties"])
        except workflows.ActionError as exc:
            raise forms.ValidationError(str(exc)) from None


@admin_required
def publish(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    form = PublishForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            mid = workflows.publish_message(
                broker_admin(),
                acting_user(request),
                kind,
                name,
                message_type=d["message_type"],
                body=d["body"],
                encoding=d["encoding"],
                properties=d["properties"],
                persistent=d["persistent"],
                priority=d["priority"],
                ttl_ms=d["ttl_ms"],
                jms_type=d["jms_type"] or None,
                correlation_id=d["correlation_id"] or None,
            )
        except REFUSALS as exc:
            form.add_error(None, error_text(exc))
        else:
            flash.success(request, f"Published message {mid} to {kind_label(kind)} {name}.")
            return redirect(dest_url(name, kind))
    return render(
        request,
        "portal/publish.html",
        {
            "nav": "destinations",
            "form": form,
            "dest": {"name": name, "type": kind_label(kind)},
            "kind": kind_code(kind),
        },
    )


# --------------------------------------------------------------------------------------
# Selected messages: move, copy, re-send, retry; delete by selector
# --------------------------------------------------------------------------------------


class TransferForm(forms.Form):
    mode = forms.ChoiceField(
        choices=[("move", "Move"), ("copy", "Copy"), ("resend", "Re-send"), ("retry", "Retry")]
    )
    target = forms.CharField(required=False, max_length=255)
    target_type = forms.ChoiceField(choices=[("q", "queue"), ("t", "topic")], initial="q")
    ids = forms.MultipleChoiceField(required=False)  # choices: whatever was posted

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        posted = self.data.getlist("ids") if hasattr(self.data, "getlist") else []
        self.fields["ids"].choices = [(i, i) for i in posted]


@admin_required
def messages_transfer(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    """POST from a queue's message list: the selected messages moved, copied, re-sent or
    (from the DMQ) retried; back to the list with what was done."""
    back = dest_url(name, kind, "messages")
    if request.method != "POST":
        return redirect(back)
    data = request.POST.copy()
    if data.get("retry"):  # the DMQ's own button
        data["mode"] = "retry"
    form = TransferForm(data)
    if not form.is_valid():
        flash.error(request, "Choose what to do with the selected messages.")
        return redirect(back)
    d = form.cleaned_data
    ids = d["ids"]
    if not ids:
        flash.error(request, "No message selected: tick the messages first.")
        return redirect(back)
    admin, actor = broker_admin(), acting_user(request)
    try:
        if d["mode"] == "retry":
            if name != workflows.DMQ_NAME:
                raise workflows.ActionError(f"only messages of {workflows.DMQ_NAME} can be retried")
            result = workflows.retry_dead_messages(admin, actor, ids=ids)
            where = ", ".join(f"{n} to {t}" for t, n in sorted(result["targets"].items()))
            text = f"Retried {result['count']} message(s)" + (f" ({where})" if where else "")
        else:
            if not d["target"].strip():
                raise workflows.ActionError("give the target destination's name")
            result = workflows.transfer_messages(
                admin,
                actor,
                d["mode"],
                name,
                d["target"],
                target_kind=d["target_type"],
                ids=ids,
            )
            verb = {"move": "Moved", "copy": "Copied", "resend": "Re-sent"}[d["mode"]]
            text = (
                f"{verb} {result['count']} message(s) to "
                f"{kind_label(d['target_type'])} {d['target'].strip()}"
            )
    except REFUSALS as exc:
        flash.error(request, error_text(exc))
        return redirect(back)
    if result["left_in_source"]:
        text += f"; {len(result['left_in_source'])} being delivered stayed"
    if result["not_found"]:
        text += f"; {len(result['not_found'])} no longer there"
    flash.success(request, text + ".")
    return redirect(back)


@admin_required
def messages_delete_selected(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    """Delete by selector, after "Really delete ...?"."""
    selector = (request.POST.get("selector") or request.GET.get("selector") or "").strip()
    back = dest_url(name, kind, "messages")
    if not selector:
        flash.error(request, "Give a selector (to empty the queue, purge it).")
        return redirect(back)
    return confirm_action(
        request,
        title=f"Delete messages from queue {name}",
        question=f"Really delete every message of queue {name} that matches {selector}?",
        button="Delete messages",
        cancel=back + "?" + urlencode({"selector": selector}),
        done=back,
        do=lambda: workflows.delete_by_selector(
            broker_admin(), acting_user(request), name, selector
        ),
        success=f"Deleted the messages matching {selector}.",
        details=[("selector", selector)],
    )
