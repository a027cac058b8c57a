"""HTTP in, HTTP out for /simple and /xml, free of any web framework.

One translation between HTTP and :mod:`.services`, used by the lean ASGI path
(:mod:`.asgi`, what serves the gateway) and by the Django views (:mod:`.views`, what a
Django test client or an app without the ASGI front reaches).  Callers hand over the
method, the query fields, the Content-Type and the body, and get an :class:`HttpReply`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from urllib.parse import quote, unquote_to_bytes

from broker.protocol.destname import (
    client_name_problem,
    queue_name_problem,
    topic_pattern_problem,
)

from . import soap
from .services import MOM, UmsError, UmsReply, UmsRequest, build_request, perform, read_only

log = logging.getLogger("portal.ums")

PLAIN = "text/plain;charset=UTF-8"
XML = "text/xml;charset=UTF-8"
NODE_COOKIE = "UMSNODE"


@dataclass
class HttpReply:
    """What goes back: status, Content-Type, body, the ``ums.*`` headers (simple
    messaging) and whether to set the node cookie (a login's reply)."""

    status: int
    content_type: str
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    node_cookie: bool = False


def charset_of(content_type: str | None) -> str:
    """The charset parameter of a Content-Type, UTF-8 without one."""
    for param in (content_type or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return "utf-8"


# Printable ASCII but "%": what a header value carries as it is.
_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def header_value(text: str) -> str:
    """``text`` for an HTTP header: as it is when printable ASCII, else URL-encoded
    (UTF-8, as in the query string: ``café`` is ``caf%C3%A9``).  A client-supplied
    value never goes into a header raw (CR, LF or NUL would end or break it)."""
    if text.isascii() and text.isprintable() and "%" not in text:
        return text
    return quote(text, safe=_HEADER_SAFE)


def parse_query(raw: bytes) -> dict[str, str]:
    """Query-string fields as Django's request.GET gives them (the last of a repeated
    field, blanks kept); a field that is not UTF-8 once unescaped (``%FF``) is a 400."""
    fields: dict[str, str] = {}
    for part in raw.split(b"&"):
        if not part:
            continue
        key, _, value = part.partition(b"=")
        try:
            name = unquote_to_bytes(key.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UmsError(400, f"a query-string field name is not UTF-8: {key!r}") from exc
        try:
            fields[name] = unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UmsError(
                400,
                f"the query-string field {name!r} is not UTF-8 text: {value.decode('latin-1')!r} "
                "(percent-escapes are the UTF-8 bytes of the text)",
            ) from exc
    return fields


def refused(status: int, reason: str, service: str | None = None) -> HttpReply:
    """A /simple request refused before it was understood (a bad query string, a body
    cut short or too slow): logged once, answered with ``status``."""
    log.warning("UMS request refused (%d): %s", status, reason)
    name = f"{service}_reply" if service else "reply"
    return HttpReply(status, PLAIN, reason.encode("utf-8"), _ums_headers(name, None, status))


def _ums_headers(service: str, req: UmsRequest | None, status: int) -> list[tuple[str, str]]:
    return [
        ("ums.service", header_value(service)),
        ("ums.destination", header_value((req.destination if req else None) or "")),
        ("ums.domain", (req.domain if req else None) or "queue"),
        ("ums.mom", MOM),
        ("ums.status", str(status)),
    ]


async def simple(
    method: str, fields: dict[str, str], content_type: str | None, body: bytes
) -> HttpReply:
    """``/simple``: POST runs a messaging service, GET a read-only one."""
    if method == "GET":
        try:
            r = await read_only(fields)
            return HttpReply(r.status, r.content_type, r.text.encode("utf-8"))
        except UmsError as exc:
            return HttpReply(exc.status, PLAIN, exc.reason.encode("utf-8"))
        except Exception:
            log.exception("UMS GET %s failed", fields.get("service"))
            return HttpReply(500, PLAIN, b"internal error of the UMS gateway")
    if method != "POST":
        return HttpReply(405, PLAIN, b"use POST (messaging) or GET (queries)")

    service = fields.get("service") or ""
    reply_name = f"{service}_reply" if service else "reply"
    req: UmsRequest | None = None
    try:
        req = build_request(fields)
        read_simple_body(req, content_type, body)
        reply = await perform(req)
    except UmsError as exc:
        if exc.status == 400:
            log.warning("UMS %s refused (400): %s", service or "request", exc.reason)
        return HttpReply(
            exc.status, PLAIN, exc.reason.encode("utf-8"), _ums_headers(reply_name, req, exc.status)
        )
    except Exception:
        log.exception("UMS %s failed", service)
        return HttpReply(
            500, PLAIN, b"internal error of the UMS gateway", _ums_headers(reply_name, req, 500)
        )
    return _simple_reply(reply, req)


def read_simple_body(req: UmsRequest, content_type: str | None, body: bytes) -> None:
    """What a /simple POST asks beyond its query string: the destination checked, a
    send's text read in its charset; UmsError 400 for what cannot be sent."""
    _check_destination(req)
    if req.service == "send":
        try:
            req.text = body.decode(charset_of(content_type))
        except (ValueError, LookupError) as exc:
            # ValueError: not text in that charset (UnicodeDecodeError), or a charset name
            # Python cannot even look up (one with a NUL in it: found by bench/fuzz.py).
            raise UmsError(400, f"the body is not text in its charset: {exc}") from exc


def xml_request(content_type: str | None, body: bytes) -> UmsRequest:
    """The request of one /xml POST (SoapFault or UmsError for what is not one): its
    Service attributes, its JMS properties, and for a send the SOAP message in
    MessageTransformer's BytesMessage layout."""
    parsed = soap.parse_request(content_type or "text/xml", body)
    req = build_request(parsed.service)
    _check_destination(req)
    req.properties = parsed.properties
    if req.service == "send":
        req.data = parsed.jms_body()
    return req


def _check_destination(req: UmsRequest) -> None:
    """400 for a send or receive on a destination name the stock Java client (what
    OpenMQ's UMS sends with) refuses, or that has control characters, or a queue named
    like a topic pattern, or a topic pattern OpenMQ's broker refuses; nothing reaches the
    broker.  (Other services ignore the field; a reply echoes it escaped.)"""
    if req.destination is not None and req.service in ("send", "receive"):
        problem = client_name_problem(req.destination)
        if problem is None:
            # The broker would answer 415 (only topics can be patterns) or 406 (a bad
            # pattern): the sender's mistake, so a 400 here rather than a 500.
            if req.domain == "topic":
                problem = topic_pattern_problem(req.destination)
            else:
                problem = queue_name_problem(req.destination)
        if problem is not None:
            # The reply's ums.destination would echo it: leave it out.
            req.destination = None
            raise UmsError(400, problem)


def _simple_reply(reply: UmsReply, req: UmsRequest) -> HttpReply:
    if reply.data is not None:
        out = HttpReply(200, reply.content_type or "application/octet-stream", reply.data)
    else:
        out = HttpReply(200, reply.content_type or PLAIN, (reply.text or "").encode("utf-8"))
    out.headers = _ums_headers(reply.service, req, reply.status)
    # Lets a load balancer keep the sid's later requests on this process.
    out.node_cookie = reply.service == "login_reply"
    return out


def _fault(code: str, reason: str, status: int) -> HttpReply:
    # SOAP 1.1 section 6.2: a fault goes back with HTTP 500.
    return HttpReply(500, XML, soap.fault(code, reason, status).encode("utf-8"))


async def xml(method: str, content_type: str | None, body: bytes) -> HttpReply:
    """``/xml``: one SOAP 1.1 request (optionally multipart/related with attachments)."""
    if method != "POST":
        return _fault("Client", "the XML messaging service takes SOAP requests by POST", 405)
    try:
        req = xml_request(content_type, body)
        reply = await perform(req)
    except soap.SoapFault as exc:
        return _fault(exc.code, exc.reason, exc.status)
    except UmsError as exc:
        if exc.status == 400:
            log.warning("UMS XML request refused (400): %s", exc.reason)
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
    ctype, data = soap.reply(attrs, text=text, data=reply.data, properties=reply.properties)
    return HttpReply(200, ctype, data, node_cookie=reply.service == "login_reply")
