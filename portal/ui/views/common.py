"""What every page shares: the admin connection, the acting user, rendering a read
(:func:`render_page`), making a change (:func:`apply_change`, :func:`confirm_action`), paging, and how
values and destination URLs are shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from broker.admintools.actions import ActionError, AdminError, BrokerUnavailable
from broker.admintools.actions.common import dest_type_code
from broker.admintools.credentials import default_admin
from broker.protocol.types import DEST_QUEUE

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


def broker_admin():
    return default_admin()


def acting_user(request: HttpRequest) -> str:
    return request.user.get_username()


def broker_address() -> str:
    return f"{settings.IMQ_BROKER_HOST}:{settings.IMQ_BROKER_PORT}"


def error_text(exc: BaseException) -> str:
    if isinstance(exc, AdminError):
        return exc.text or str(exc)
    return str(exc) or type(exc).__name__


def render_page(request: HttpRequest, template: str, build: Callable[[], dict[str, Any]], **extra):
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
                request, "portal/not_found.html", {"detail": error_text(exc), **extra}, status=404
            )
        return render(
            request, "portal/error.html", {"detail": error_text(exc), **extra}, status=502
        )
    return render(request, template, {**extra, **context})


def apply_change(request: HttpRequest, do: Callable[[], Any], success: str) -> bool:
    """Run one change; a success or the refusal's text as a message.  True if it worked."""
    try:
        do()
    except REFUSALS as exc:
        messages.error(request, error_text(exc))
        return False
    messages.success(request, success)
    return True


def next_url(request: HttpRequest, default: str) -> str:
    """Where to go after a change: a safe ``next`` parameter or ``default``."""
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


def confirm_action(
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
        ok = apply_change(request, do, success)
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


def paginate(request: HttpRequest, items, per_page: int = PER_PAGE):
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def kind_label(kind: str) -> str:
    return "queue" if dest_type_code(kind) == DEST_QUEUE else "topic"


def kind_code(kind: str) -> str:
    """The URL's destination type: q or t."""
    return "q" if dest_type_code(kind) == DEST_QUEUE else "t"


def dest_url(name: str, kind: str, view: str = "destination") -> str:
    return reverse(view, args=[kind_code(kind), name])


def plain_value(value: Any) -> Any:
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


def java_type(value: Any) -> str:
    """The Java type a message property value has (as JMS names it)."""
    return _JAVA_TYPES.get(type(value).__name__, type(value).__name__)


_BYTE_METRICS = {"totalMemory", "freeMemory", "maxMemory", "diskReserved", "diskUsed"}
_TIME_METRICS = {"timeStamp", "timestamp"}


def human_bytes(n: int | float) -> str:
    """``1.5 MiB (1,572,864 bytes)``; under a KiB just ``512 B``."""
    value = float(n)
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit} ({int(n):,} bytes)"
    raise AssertionError("unreachable")


def _metric_value(name: str, value: Any) -> Any:
    """A metric as a person reads it: byte counts in KiB/MiB/GiB, times as UTC dates."""
    plain = plain_value(value)
    if isinstance(plain, bool) or not isinstance(plain, int | float):
        return plain
    if name in _BYTE_METRICS or "Bytes" in name or name.endswith("Size"):
        return human_bytes(plain)
    if name in _TIME_METRICS and plain > 0:
        from datetime import UTC, datetime

        when = datetime.fromtimestamp(plain / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return when
    return plain


def metric_rows(values: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (k, _metric_value(str(k), v))
        for k, v in sorted(values.items())
        if not str(k).startswith("__")
    ]
