"""HTTP views of the gateway: thin, they translate HTTP to :mod:`.services` and back.

All messaging views are async (Daphne's event loop): a receive waiting for its timeout
holds a coroutine, not a worker thread.
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt

from . import soap
from .config import ums_config
from .services import (
    MOM,
    UmsError,
    UmsReply,
    UmsRequest,
    build_request,
    perform,
    read_only,
)

log = logging.getLogger("portal.ums")

PLAIN = "text/plain;charset=UTF-8"
XML = "text/xml;charset=UTF-8"
NODE_COOKIE = "UMSNODE"


def _charset(request: HttpRequest) -> str:
    return request.encoding or request.content_params.get("charset") or "utf-8"


def _headers(resp: HttpResponse, service: str, req: UmsRequest | None, status: int) -> None:
    resp["ums.service"] = service
    resp["ums.destination"] = (req.destination if req else None) or ""
    resp["ums.domain"] = (req.domain if req else None) or "queue"
    resp["ums.mom"] = MOM
    resp["ums.status"] = str(status)


@csrf_exempt
async def simple(request: HttpRequest) -> HttpResponse:
    """``/simple``: POST runs a messaging service, GET a read-only one."""
    fields = {k: request.GET.get(k, "") for k in request.GET}
    if request.method == "GET":
        try:
            r = await read_only(fields)
            return HttpResponse(r.text, status=r.status, content_type=r.content_type)
        except UmsError as exc:
            return HttpResponse(exc.reason, status=exc.status, content_type=PLAIN)
        except Exception:
            log.exception("UMS GET %s failed", fields.get("service"))
            return HttpResponse("internal error of the UMS gateway", status=500, content_type=PLAIN)
    if request.method != "POST":
        return HttpResponse("use POST (messaging) or GET (queries)", status=405, content_type=PLAIN)

    service = fields.get("service") or ""
    reply_name = f"{service}_reply" if service else "reply"
    req: UmsRequest | None = None
    try:
        req = build_request(fields)
        if req.service == "send":
            try:
                req.text = request.body.decode(_charset(request))
            except (UnicodeDecodeError, LookupError) as exc:
                raise UmsError(400, f"the body is not text in its charset: {exc}") from exc
        reply = await perform(req)
    except UmsError as exc:
        resp = HttpResponse(exc.reason, status=exc.status, content_type=PLAIN)
        _headers(resp, reply_name, req, exc.status)
        return resp
    except Exception:
        log.exception("UMS %s failed", service)
        resp = HttpResponse("internal error of the UMS gateway", status=500, content_type=PLAIN)
        _headers(resp, reply_name, req, 500)
        return resp
    return _simple_reply(reply, req)


def _simple_reply(reply: UmsReply, req: UmsRequest) -> HttpResponse:
    if reply.data is not None:
        resp = HttpResponse(reply.data, content_type=reply.content_type)
    else:
        resp = HttpResponse(
            (reply.text or "").encode("utf-8"), content_type=reply.content_type or PLAIN
        )
    _headers(resp, reply.service, req, reply.status)
    if reply.service == "login_reply":
        # Lets a load balancer keep the sid's later requests on this process.
        resp.set_cookie(NODE_COOKIE, ums_config().node, httponly=True, samesite="Lax")
    return resp


def _fault(code: str, reason: str, status: int) -> HttpResponse:
    # SOAP 1.1 section 6.2: a fault goes back with HTTP 500.
    return HttpResponse(soap.fault(code, reason, status), status=500, content_type=XML)


@csrf_exempt
async def xml(request: HttpRequest) -> HttpResponse:
    """``/xml``: one SOAP 1.1 request (optionally multipart/related with attachments)."""
    if request.method != "POST":
        return _fault("Client", "the XML messaging service takes SOAP requests by POST", 405)
    try:
        ctype = request.META.get("CONTENT_TYPE") or "text/xml"
        parsed = soap.parse_request(ctype, request.body)
        req = build_request(parsed.service)
        if len(parsed.attachments) > 1:
            raise soap.SoapFault("Client", "one attachment per message")
        req.text = parsed.text
        req.properties = parsed.properties
        if parsed.attachments:
            req.data = parsed.attachments[0].data
        reply = await perform(req)
    except soap.SoapFault as exc:
        return _fault(exc.code, exc.reason, exc.status)
    except UmsError as exc:
        return _fault("Client" if exc.status < 500 else "Server", exc.reason, exc.status)
    except Exception:
        log.exception("UMS XML request failed")
        return _fault("Server", "internal error of the UMS gateway", 500)

    attrs = {
        "service": reply.service,
        **({"sid": reply.sid} if reply.sid else {}),
        **({"destination": reply.destination} if reply.destination else {}),
        "domain": reply.domain or req.domain,
        "mom": MOM,
        "status": str(reply.status),
    }
    text = reply.text if reply.service == "receive_reply" else None
    env = soap.envelope(attrs, text=text, properties=reply.properties)
    if reply.data is not None:
        ctype, body = soap.multipart(env, soap.Attachment("application/octet-stream", reply.data))
        return HttpResponse(body, content_type=ctype)
    resp = HttpResponse(env.encode("utf-8"), content_type=XML)
    if reply.service == "login_reply":
        resp.set_cookie(NODE_COOKIE, ums_config().node, httponly=True, samesite="Lax")
    return resp


def demo(request: HttpRequest) -> HttpResponse:
    """A page that sends and receives through /simple from JavaScript."""
    return render(
        request,
        "ums/demo.html",
        {"nav": "ums", "root": "/" + ums_config().context_root},
    )
