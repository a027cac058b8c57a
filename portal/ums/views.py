"""Django views of the gateway: thin adapters of :mod:`.http` (the lean ASGI path in
:mod:`.asgi` serves /simple and /xml in front of Django; these answer when Django is
reached directly, e.g. by its test client) and the demo page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt

from . import http
from .config import ums_config
from .services import UmsError


def _response(reply: http.HttpReply) -> HttpResponse:
    resp = HttpResponse(reply.body, status=reply.status, content_type=reply.content_type)
    for name, value in reply.headers:
        resp[name] = value
    if reply.node_cookie:
        resp.set_cookie(http.NODE_COOKIE, ums_config().node, httponly=True, samesite="Lax")
    return resp


def _raw_query(request: HttpRequest) -> bytes:
    # Django's ASGI handler decodes QUERY_STRING as UTF-8, WSGI and its test client as
    # ISO-8859-1; a percent-escaped query string is ASCII either way.
    text = request.META.get("QUERY_STRING", "")
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


@csrf_exempt
async def simple(request: HttpRequest) -> HttpResponse:
    """``/simple``: POST runs a messaging service, GET a read-only one."""
    try:
        # The raw query string, as the ASGI path reads it (request.GET would turn
        # bytes that are not UTF-8 into replacement characters).
        fields = http.parse_query(_raw_query(request))
    except UmsError as exc:
        return _response(http.refused(exc.status, exc.reason))
    body = request.body if request.method == "POST" else b""
    ctype = request.META.get("CONTENT_TYPE")
    return _response(await http.simple(request.method or "", fields, ctype, body))


@csrf_exempt
async def xml(request: HttpRequest) -> HttpResponse:
    """``/xml``: one SOAP 1.1 request (optionally multipart/related with attachments)."""
    body = request.body if request.method == "POST" else b""
    ctype = request.META.get("CONTENT_TYPE") or "text/xml"
    return _response(await http.xml(request.method or "", ctype, body))


def demo(request: HttpRequest) -> HttpResponse:
    """A page that sends and receives through /simple from JavaScript."""
    return render(
        request,
        "ums/demo.html",
        {"nav": "ums", "root": "/" + ums_config().context_root},
    )
