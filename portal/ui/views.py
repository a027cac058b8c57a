"""The portal's pages.  Thin: every broker operation is one call of an action function
(broker/admin/actions.py; users, groups and rules: broker/admin/security_actions.py), the
view only turns the request into arguments and the result into a page.

* reads render a template from the action's result; a broker that cannot be reached
  gives a page with a banner saying so (status 503), never a 500;
* changes are POSTs (CSRF-checked) that redirect back with a success message or the
  action's error text; destructive ones go through a confirmation page first (GET asks,
  POST does it), so everything works without JavaScript.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import LoginView
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from broker.admin import actions
from broker.admin import security_actions as sec
from broker.admin.actions import ActionError, AdminError, BrokerUnavailable
from broker.admin.remote import default_admin

from . import forms
from .access import admin_required

PER_PAGE = 50
DEEPEST = 20
# What an action may raise when it refuses: shown to the administrator as is.
REFUSALS: tuple[type[BaseException], ...] = (
    ActionError,
    AdminError,
    BrokerUnavailable,
    ValueError,
    LookupError,
)


def _admin():
    return default_admin()


def _actor(request: HttpRequest) -> str:
    return request.user.get_username()


def broker_address() -> str:
    return f"{settings.IMQ_BROKER_HOST}:{settings.IMQ_BROKER_PORT}"


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, AdminError):
        return exc.text or str(exc)
    return str(exc) or type(exc).__name__


def _page(request: HttpRequest, template: str, build: Callable[[], dict[str, Any]], **extra):
    """Render ``template`` with what ``build()`` returns; a broker that cannot be reached
    or a missing object gives a page that says so instead."""
    try:
        context = build()
    except BrokerUnavailable as exc:
        return render(
            request,
            "portal/unavailable.html",
            {"address": broker_address(), "detail": str(exc), **extra},
            status=503,
        )
    except AdminError as exc:
        if exc.status == 404:
            return render(
                request, "portal/not_found.html", {"detail": _error_text(exc), **extra}, status=404
            )
        return render(
            request, "portal/error.html", {"detail": _error_text(exc), **extra}, status=502
        )
    return render(request, template, {**extra, **context})


def _change(request: HttpRequest, do: Callable[[], Any], success: str) -> bool:
    """Run one change; a success or the refusal's text as a message.  True if it worked."""
    try:
        do()
    except REFUSALS as exc:
        messages.error(request, _error_text(exc))
        return False
    messages.success(request, success)
    return True


def _next(request: HttpRequest, default: str) -> str:
    """Where to go after a change: a safe ``next`` parameter or ``default``."""
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


def _confirm(
    request: HttpRequest,
    *,
    title: str,
    question: str,
    button: str,
    cancel: str,
    do: Callable[[], Any],
    success: str,
    done: str | None = None,
    danger: bool = True,
    details: list[tuple[str, Any]] | None = None,
):
    """GET: "Really ...? [button] [Cancel]"; POST: do it and redirect (``done`` on
    success, back to ``cancel`` when refused)."""
    if request.method == "POST":
        ok = _change(request, do, success)
        return redirect(done if ok and done else cancel)
    return render(
        request,
        "portal/confirm.html",
        {
            "title": title,
            "question": question,
            "button": button,
            "cancel": cancel,
            "danger": danger,
            "details": details or [],
        },
    )


def _paginate(request: HttpRequest, items, per_page: int = PER_PAGE):
    return Paginator(items, per_page).get_page(request.GET.get("page"))


# --------------------------------------------------------------------------------------
# Login
# --------------------------------------------------------------------------------------


class PortalLoginView(LoginView):
    template_name = "registration/login.html"
    authentication_form = forms.AdminLoginForm
    redirect_authenticated_user = False


# --------------------------------------------------------------------------------------
# Overview
# --------------------------------------------------------------------------------------


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
            "url": _dest_url(d["name"], d["type"]),
        }
        for d in rows
    ]


def _summary(admin) -> tuple[dict[str, Any], list[dict]]:
    """What the overview shows of the broker, and its deepest destinations (the broker
    sorts and cuts the list: a page of them, whatever their number)."""
    info = actions.query_broker(admin)
    info.pop("properties", None)
    rows, _ = actions.page_destinations(admin, limit=DEEPEST, show_temporary=False, order="depth")
    return info, _deepest(rows)


@admin_required
def overview(request: HttpRequest) -> HttpResponse:
    def build():
        info, deepest = _summary(_admin())
        return {"info": info, "deepest": deepest, "initial": {"deepest": deepest}}

    return _page(request, "portal/overview.html", build, nav="overview")


# --------------------------------------------------------------------------------------
# Broker
# --------------------------------------------------------------------------------------


@admin_required
def broker_view(request: HttpRequest) -> HttpResponse:
    def build():
        admin = _admin()
        info = actions.query_broker(admin)
        try:
            metrics = _metrics(actions.broker_metrics(admin))
        except AdminError:
            metrics = None
        props = sorted(info.pop("properties", {}).items())
        return {
            "info": info,
            "properties": props,
            "metrics": metrics,
            "form": forms.BrokerPropertiesForm(),
        }

    return _page(request, "portal/broker.html", build, nav="broker")


@admin_required
@require_POST
def broker_properties_update(request: HttpRequest) -> HttpResponse:
    form = forms.BrokerPropertiesForm(request.POST)
    if not form.is_valid():
        for err in form.errors.get("properties", []):
            messages.error(request, err)
        return redirect("broker")
    props = form.cleaned_data["properties"]
    _change(
        request,
        lambda: actions.update_broker(_admin(), _actor(request), props),
        "Updated " + ", ".join(f"{k}={v}" for k, v in props.items()) + ".",
    )
    return redirect("broker")


BROKER_OPS: dict[str, tuple[Callable[..., Any], str]] = {
    "pause": (actions.pause_broker, "The broker is paused: its services take no new work."),
    "resume": (actions.resume_broker, "The broker is running again."),
    "quiesce": (actions.quiesce_broker, "The broker is quiesced: it accepts no new connections."),
    "unquiesce": (actions.unquiesce_broker, "The broker accepts new connections again."),
    "reload-acl": (actions.reload_access_control, "The access control rules were reloaded."),
    "reset-metrics": (actions.reset_metrics, "The broker's metrics were reset."),
}


@admin_required
@require_POST
def broker_op(request: HttpRequest, op: str) -> HttpResponse:
    if op not in BROKER_OPS:
        messages.error(request, f"unknown broker operation {op!r}")
        return redirect("broker")
    fn, success = BROKER_OPS[op]
    _change(request, lambda: fn(_admin(), _actor(request)), success)
    return redirect("broker")


@admin_required
def broker_shutdown(request: HttpRequest) -> HttpResponse:
    return _confirm(
        request,
        title="Shut down the broker",
        question=f"Really shut down the broker at {broker_address()}? Every client is "
        "disconnected and the broker stops; it has to be started again by hand.",
        button="Shut down",
        cancel=reverse("broker"),
        do=lambda: actions.shutdown_broker(_admin(), _actor(request)),
        success="The broker is shutting down.",
    )


@admin_required
def broker_restart(request: HttpRequest) -> HttpResponse:
    return _confirm(
        request,
        title="Restart the broker",
        question=f"Really restart the broker at {broker_address()}? Every client is "
        "disconnected while it restarts.",
        button="Restart",
        cancel=reverse("broker"),
        do=lambda: actions.restart_broker(_admin(), _actor(request)),
        success="The broker is restarting.",
    )


# --------------------------------------------------------------------------------------
# Services
# --------------------------------------------------------------------------------------


@admin_required
def services(request: HttpRequest) -> HttpResponse:
    return _page(
        request,
        "portal/services.html",
        lambda: {"services": actions.list_services(_admin())},
        nav="services",
    )


@admin_required
def service_detail(request: HttpRequest, name: str) -> HttpResponse:
    def build():
        admin = _admin()
        svc = actions.query_service(admin, name)
        try:
            metrics = _metrics(actions.service_metrics(admin, name))
        except AdminError:
            metrics = None
        conns = actions.list_connections(admin, name)
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

    return _page(request, "portal/service.html", build, nav="services")


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
    _change(
        request,
        lambda: actions.update_service(
            _admin(),
            _actor(request),
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
    fns = {"pause": actions.pause_service, "resume": actions.resume_service}
    if op not in fns:
        messages.error(request, f"unknown service operation {op!r}")
    else:
        done = "paused" if op == "pause" else "resumed"
        _change(
            request, lambda: fns[op](_admin(), _actor(request), name), f"Service {name} {done}."
        )
    return redirect(_next(request, reverse("services")))


# --------------------------------------------------------------------------------------
# Destinations
# --------------------------------------------------------------------------------------


def _kind_label(kind: str) -> str:
    return "queue" if actions.dest_type_code(kind) == actions.DEST_QUEUE else "topic"


def _kind_code(kind: str) -> str:
    """The URL's destination type: q or t."""
    return "q" if actions.dest_type_code(kind) == actions.DEST_QUEUE else "t"


def _dest_url(name: str, kind: str, view: str = "destination") -> str:
    return reverse(view, args=[_kind_code(kind), name])


@admin_required
def destinations(request: HttpRequest) -> HttpResponse:
    filt = forms.DestinationFilterForm(request.GET or None)
    data = filt.cleaned_data if filt.is_valid() else {}

    def build():
        rows = actions.paged_destinations(
            _admin(),
            kind=data.get("type") or None,
            name_contains=data.get("name") or None,
            state=data.get("state") or None,
            show_temporary=bool(data.get("temporary")),
        )
        page = _paginate(request, rows)
        page.object_list = [
            {**row, "url": _dest_url(row["name"], row["type"])} for row in page.object_list
        ]
        return {"filter": filt, "page": page, "total": page.paginator.count}

    return _page(request, "portal/destinations.html", build, nav="destinations")


@admin_required
def destination_create(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = forms.DestinationCreateForm(request.POST)
        if form.is_valid():
            kind = form.cleaned_data["kind"]
            name = form.cleaned_data["name"].strip()
            attrs = form.attributes()
            try:
                actions.create_destination(_admin(), _actor(request), kind, name, attrs)
            except REFUSALS as exc:
                form.add_error(None, _error_text(exc))
            else:
                messages.success(request, f"Created {_kind_label(kind)} {name}.")
                return redirect(_dest_url(name, kind))
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
        admin = _admin()
        dest = actions.query_destination(admin, kind, name)
        try:
            consumers, consumers_error = actions.list_consumers(admin, kind, name), ""
        except AdminError as exc:
            consumers, consumers_error = [], _error_text(exc)
        try:
            producers, producers_error = actions.list_producers(admin, kind, name), ""
        except AdminError as exc:
            producers, producers_error = [], _error_text(exc)
        try:
            metrics = _metrics(actions.destination_metrics(admin, kind, name))
        except AdminError:
            metrics = None
        return {
            "dest": dest,
            "kind": _kind_code(kind),
            "attributes": [(k, _plain(v)) for k, v in sorted(dest["attributes"].items())],
            "consumers": consumers,
            "consumers_error": consumers_error,
            "producers": producers,
            "producers_error": producers_error,
            "metrics": metrics,
            "pause_form": forms.PauseDestinationForm(),
        }

    return _page(request, "portal/destination.html", build, nav="destinations")


def _plain(value: Any) -> Any:
    """A value as a page shows it: Java-typed numbers as plain numbers, booleans as
    true/false (as imqcmd prints them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


_JAVA_TYPES = {
    "JByte": "byte",
    "JShort": "short",
    "JInt": "int",
    "JLong": "long",
    "JFloat": "float",
    "JChar": "char",
    "bool": "boolean",
    "int": "long",
    "float": "double",
    "str": "String",
}


def _java_type(value: Any) -> str:
    """The Java type a message property value has (as JMS names it)."""
    return _JAVA_TYPES.get(type(value).__name__, type(value).__name__)


def _metrics(values: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(k, _plain(v)) for k, v in sorted(values.items()) if not str(k).startswith("__")]


@admin_required
def destination_edit(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    try:
        dest = actions.query_destination(_admin(), kind, name)
    except BrokerUnavailable as exc:
        return render(
            request,
            "portal/unavailable.html",
            {"address": broker_address(), "detail": str(exc)},
            status=503,
        )
    except AdminError as exc:
        return render(request, "portal/not_found.html", {"detail": _error_text(exc)}, status=404)
    current = dest["attributes"]
    if request.method == "POST":
        form = forms.DestinationAttributesForm(request.POST, current=current, kind=_kind_code(kind))
        if form.is_valid():
            attrs = form.attributes(changed_only=True)
            if not attrs:
                messages.info(request, "Nothing changed.")
                return redirect(_dest_url(name, kind))
            try:
                actions.update_destination(_admin(), _actor(request), kind, name, attrs)
            except REFUSALS as exc:
                form.add_error(None, _error_text(exc))
            else:
                messages.success(
                    request,
                    f"Updated {_kind_label(kind)} {name}: "
                    + ", ".join(f"{k}={v}" for k, v in attrs.items()),
                )
                return redirect(_dest_url(name, kind))
    else:
        form = forms.DestinationAttributesForm(current=current, kind=_kind_code(kind))
    return render(
        request,
        "portal/destination_form.html",
        {
            "form": form,
            "create": False,
            "dest": dest,
            "kind": _kind_code(kind),
            "nav": "destinations",
        },
    )


@admin_required
def destination_purge(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    label = _kind_label(kind)
    return _confirm(
        request,
        title=f"Purge {label} {name}",
        question=f"Really purge {label} {name}? All its messages are deleted.",
        button="Purge",
        cancel=_dest_url(name, kind),
        do=lambda: actions.purge_destination(_admin(), _actor(request), kind, name),
        success=f"Purged {label} {name}.",
    )


@admin_required
def destination_destroy(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    label = _kind_label(kind)
    return _confirm(
        request,
        title=f"Destroy {label} {name}",
        question=f"Really destroy {label} {name}? The destination and all its messages are "
        "deleted and its clients get an error.",
        button="Destroy",
        cancel=_dest_url(name, kind),
        done=reverse("destinations"),
        do=lambda: actions.destroy_destination(_admin(), _actor(request), kind, name),
        success=f"Destroyed {label} {name}.",
    )


@admin_required
@require_POST
def destination_pause(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    label = _kind_label(kind)
    what = request.POST.get("what") or "all"
    _change(
        request,
        lambda: actions.pause_destination(_admin(), _actor(request), kind, name, what),
        f"Paused {'producers and consumers' if what == 'all' else what} of {label} {name}.",
    )
    return redirect(_next(request, _dest_url(name, kind)))


@admin_required
@require_POST
def destination_resume(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    _change(
        request,
        lambda: actions.resume_destination(_admin(), _actor(request), kind, name),
        f"Resumed {_kind_label(kind)} {name}.",
    )
    return redirect(_next(request, _dest_url(name, kind)))


@admin_required
@require_POST
def destination_compact(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    _change(
        request,
        lambda: actions.compact_destination(_admin(), _actor(request), kind, name),
        f"Compacted {_kind_label(kind)} {name}.",
    )
    return redirect(_next(request, _dest_url(name, kind)))


# -- messages ---------------------------------------------------------------------------


def _msg_row(m: dict) -> dict[str, Any]:
    """The columns of the message list (actions' message dicts)."""
    return {
        "id": m["id"],
        "type": m["message_type"],
        "priority": m["priority"],
        "timestamp": _timestamp(m["timestamp"]),
        "redelivered": m["redelivered"],
        "size": m["body_size"],
        "persistent": m["persistent"],
    }


def _timestamp(value: Any) -> str:
    if isinstance(value, int) and value > 0:
        from datetime import UTC, datetime

        return (
            datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
        )
    return ""


@admin_required
def messages_list(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    try:
        page_no = max(1, int(request.GET.get("page", 1)))
    except ValueError:
        page_no = 1

    def build():
        admin = _admin()
        dest = actions.query_destination(admin, kind, name)
        start = (page_no - 1) * PER_PAGE
        error = ""
        rows: list[dict] = []
        try:
            rows = [
                _msg_row(m)
                for m in actions.list_messages(admin, name, kind, start=start, limit=PER_PAGE)
            ]
        except (AdminError, ActionError) as exc:
            error = _error_text(exc)
        total = dest["messages"]
        return {
            "dest": dest,
            "kind": _kind_code(kind),
            "rows": rows,
            "error": error,
            "page_no": page_no,
            "start": start,
            "has_previous": page_no > 1,
            "has_next": start + len(rows) < total and len(rows) == PER_PAGE,
            "pages": max(1, (total + PER_PAGE - 1) // PER_PAGE),
        }

    return _page(request, "portal/messages.html", build, nav="destinations")


@admin_required
def message_detail(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    msg_id = request.GET.get("id", "")

    def build():
        if not msg_id:
            raise AdminError(404, "no message ID given")
        m = actions.get_message(_admin(), name, msg_id, kind)
        headers = [
            ("Message ID", m["id"]),
            ("Message type", m["message_type"]),
            ("JMSType", m["jms_type"]),
            ("Priority", m["priority"]),
            ("Timestamp", _timestamp(m["timestamp"])),
            ("Expiration", _timestamp(m["expiration"]) or "never"),
            ("Delivery mode", "persistent" if m["persistent"] else "non-persistent"),
            ("Redelivered", "yes" if m["redelivered"] else "no"),
            ("Correlation ID", m["correlation_id"]),
            ("Reply to", m["reply_to"]),
            ("Destination", m["destination"]),
            ("Body size", f"{m['body_size']} bytes"),
        ]
        shown = {
            "MessageID",
            "Type",
            "Priority",
            "Timestamp",
            "Expiration",
            "DeliveryMode",
            "Redelivered",
            "CorrelationID",
            "ReplyToDestinationName",
            "DestinationName",
            "DestinationType",
            "MessageKind",
            "MessageBodyType",
        }
        headers += sorted((k, _plain(v)) for k, v in m["headers"].items() if k not in shown)
        return {
            "msg": _msg_row(m),
            "msg_id": msg_id,
            "headers": headers,
            "properties": [
                (k, _java_type(v), _plain(v)) for k, v in sorted(m["properties"].items())
            ],
            "preview": m["preview"],
            "dest": {"name": name, "type": _kind_label(kind)},
            "kind": _kind_code(kind),
        }

    return _page(request, "portal/message.html", build, nav="destinations")


@admin_required
def message_delete(request: HttpRequest, kind: str, name: str) -> HttpResponse:
    msg_id = request.POST.get("id") or request.GET.get("id", "")
    label = _kind_label(kind)
    back = _dest_url(name, kind, "messages")
    return _confirm(
        request,
        title=f"Delete message from {label} {name}",
        question=f"Really delete message {msg_id} from {label} {name}?",
        button="Delete message",
        cancel=reverse("message", args=[_kind_code(kind), name]) + "?" + urlencode({"id": msg_id}),
        done=back,
        do=lambda: actions.delete_message(_admin(), _actor(request), name, msg_id, kind),
        success=f"Deleted message {msg_id}.",
        details=[("id", msg_id)],
    )


# --------------------------------------------------------------------------------------
# Connections
# --------------------------------------------------------------------------------------


@admin_required
def connections(request: HttpRequest) -> HttpResponse:
    service = request.GET.get("service", "").strip()
    user = request.GET.get("user", "").strip()

    def build():
        admin = _admin()
        rows = actions.list_connections(admin)
        if service:
            rows = [r for r in rows if r["service"] == service]
        if user:
            rows = [r for r in rows if user.lower() in r["user"].lower()]
        return {
            "page": _paginate(request, rows),
            "total": len(rows),
            "service": service,
            "user_filter": user,
            "services": [s["name"] for s in actions.list_services(admin)],
        }

    return _page(request, "portal/connections.html", build, nav="connections")


@admin_required
def connection_detail(request: HttpRequest, cxn_id: int) -> HttpResponse:
    return _page(
        request,
        "portal/connection.html",
        lambda: {"cxn": actions.query_connection(_admin(), cxn_id)},
        nav="connections",
    )


@admin_required
def connection_destroy(request: HttpRequest, cxn_id: int) -> HttpResponse:
    return _confirm(
        request,
        title=f"Destroy connection {cxn_id}",
        question=f"Really destroy connection {cxn_id}? The client is disconnected; its "
        "unacknowledged messages are redelivered and its open transactions rolled back.",
        button="Destroy connection",
        cancel=reverse("connection", args=[cxn_id]),
        done=reverse("connections"),
        do=lambda: actions.destroy_connection(_admin(), _actor(request), cxn_id),
        success=f"Destroyed connection {cxn_id}.",
    )


# --------------------------------------------------------------------------------------
# Durable subscriptions
# --------------------------------------------------------------------------------------


@admin_required
def durables(request: HttpRequest) -> HttpResponse:
    topic = request.GET.get("topic", "").strip()

    def build():
        rows = actions.list_durables(_admin(), topic or None)
        return {"page": _paginate(request, rows), "total": len(rows), "topic": topic}

    return _page(request, "portal/durables.html", build, nav="durables")


def _durable_args(request: HttpRequest) -> tuple[str, str]:
    src = request.POST if request.method == "POST" else request.GET
    return src.get("name", ""), src.get("client_id", "")


def _durable_label(name: str, client_id: str) -> str:
    return f"durable subscription {name}" + (f" of client ID {client_id}" if client_id else "")


@admin_required
def durable_purge(request: HttpRequest) -> HttpResponse:
    name, client_id = _durable_args(request)
    label = _durable_label(name, client_id)
    return _confirm(
        request,
        title="Purge a durable subscription",
        question=f"Really purge {label}? The messages waiting for it are deleted.",
        button="Purge",
        cancel=reverse("durables"),
        do=lambda: actions.purge_durable(_admin(), _actor(request), name, client_id or None),
        success=f"Purged {label}.",
        details=[("name", name), ("client_id", client_id)],
    )


@admin_required
def durable_destroy(request: HttpRequest) -> HttpResponse:
    name, client_id = _durable_args(request)
    label = _durable_label(name, client_id)
    return _confirm(
        request,
        title="Destroy a durable subscription",
        question=f"Really destroy {label}? The subscription and its messages are deleted.",
        button="Destroy",
        cancel=reverse("durables"),
        do=lambda: actions.destroy_durable(_admin(), _actor(request), name, client_id or None),
        success=f"Destroyed {label}.",
        details=[("name", name), ("client_id", client_id)],
    )


# --------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------


@admin_required
def transactions(request: HttpRequest) -> HttpResponse:
    def build():
        rows = actions.list_transactions(_admin())
        return {"page": _paginate(request, rows), "total": len(rows)}

    return _page(request, "portal/transactions.html", build, nav="transactions")


@admin_required
def transaction_commit(request: HttpRequest, txn_id: int) -> HttpResponse:
    return _confirm(
        request,
        title=f"Commit transaction {txn_id}",
        question=f"Really commit transaction {txn_id}? Its messages are delivered and its "
        "acknowledgements become final.",
        button="Commit",
        cancel=reverse("transactions"),
        do=lambda: actions.commit_transaction(_admin(), _actor(request), txn_id),
        success=f"Committed transaction {txn_id}.",
    )


@admin_required
def transaction_rollback(request: HttpRequest, txn_id: int) -> HttpResponse:
    return _confirm(
        request,
        title=f"Roll back transaction {txn_id}",
        question=f"Really roll back transaction {txn_id}? Its messages are dropped and the "
        "messages it acknowledged are delivered again.",
        button="Roll back",
        cancel=reverse("transactions"),
        do=lambda: actions.rollback_transaction(_admin(), _actor(request), txn_id),
        success=f"Rolled back transaction {txn_id}.",
    )


# --------------------------------------------------------------------------------------
# Users and groups
# --------------------------------------------------------------------------------------


@admin_required
def users(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    page = _paginate(request, sec.users_queryset(search=q or None))
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
                    _actor(request), d["username"], d["password"], d["groups"], d["active"]
                )
            except REFUSALS as exc:
                form.add_error(None, _error_text(exc))
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
            {"detail": _error_text(exc), "nav": "users"},
            status=404,
        )
    if request.method == "POST":
        form = forms.UserUpdateForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            try:
                sec.update_user(
                    _actor(request),
                    username,
                    password=d["password"] or None,
                    groups=d["groups"],
                    active=d["active"],
                )
            except REFUSALS as exc:
                form.add_error(None, _error_text(exc))
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
        {"form": form, "create": False, "record": record, "nav": "users"},
    )


@admin_required
def user_delete(request: HttpRequest, username: str) -> HttpResponse:
    own = username == _actor(request)
    return _confirm(
        request,
        title=f"Delete user {username}",
        question=f"Really delete user {username}? They can no longer connect or log in."
        + (" This is you: you will be logged out at your next page." if own else ""),
        button="Delete user",
        cancel=reverse("users"),
        do=lambda: sec.delete_user(_actor(request), username),
        success=f"Deleted user {username}.",
    )


@admin_required
@require_POST
def group_create(request: HttpRequest) -> HttpResponse:
    form = forms.GroupCreateForm(request.POST)
    if form.is_valid():
        d = form.cleaned_data
        _change(
            request,
            lambda: sec.create_group(_actor(request), d["name"].strip(), d["description"]),
            f"Created group {d['name'].strip()}.",
        )
    else:
        messages.error(request, "A group needs a name.")
    return redirect("users")


@admin_required
def group_delete(request: HttpRequest, name: str) -> HttpResponse:
    return _confirm(
        request,
        title=f"Delete group {name}",
        question=f"Really delete group {name}? Its members lose it (the users stay); rules naming it stay and match nobody.",
        button="Delete group",
        cancel=reverse("users"),
        do=lambda: sec.delete_group(_actor(request), name),
        success=f"Deleted group {name}.",
    )


# --------------------------------------------------------------------------------------
# Access control rules
# --------------------------------------------------------------------------------------


@admin_required
def rules(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    page = _paginate(request, sec.rules_queryset(search=q or None))
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
                sec.set_rule(_actor(request), key, value, inst)
            except REFUSALS as exc:
                form.add_error(None, _error_text(exc))
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
    return _confirm(
        request,
        title="Delete an access control rule",
        question=f"Really delete rule {key}{where}?",
        button="Delete rule",
        cancel=reverse("rules"),
        do=lambda: sec.delete_rule(_actor(request), key, inst),
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
    _change(
        request,
        lambda: sec.import_rules_file(_actor(request), d["text"], replace=d["replace"]),
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


# --------------------------------------------------------------------------------------
# Log records
# --------------------------------------------------------------------------------------


@admin_required
def log_view(request: HttpRequest) -> HttpResponse:
    filt = forms.LogFilterForm(request.GET or None)
    data = filt.cleaned_data if filt.is_valid() else {}
    try:
        qs = actions.log_records(
            level=data.get("level") or None,
            since=data.get("since"),
            until=data.get("until"),
            text=data.get("text") or None,
        )
    except ActionError as exc:
        messages.error(request, _error_text(exc))
        qs = actions.log_records()
    page = _paginate(
        request, qs.only("id", "timestamp", "level", "logger", "message", "broker_instance")
    )
    return render(request, "portal/log.html", {"filter": filt, "page": page, "nav": "log"})
