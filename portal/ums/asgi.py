"""The gateway's lean HTTP path: an ASGI application that answers ``/<root>/simple`` and
``/<root>/xml`` itself and hands every other request to the application behind it.

A UMS request costs a query-string parse, the services' work on the pooled broker
connections and one response; Django's request objects, middleware, thread hops
(sync_to_async) and URL resolver stay off that path, which is where a request's time went
(bench/ums.py).  portal/asgi.py puts it in front of the whole portal, so whichever server
runs ``portal.asgi:application`` serves UMS this way: daphne (the portal of ``manage.py
up``) and uvicorn with uvloop and httptools (``manage.py up``'s UMS gateway process).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from . import http
from .config import ums_config
from .services import UmsError

log = logging.getLogger("portal.ums")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Django's own limit on a request body (DATA_UPLOAD_MAX_MEMORY_SIZE's default).
DEFAULT_MAX_BODY = 2_621_440


class BodyTooLarge(Exception):
    """The request body is over the limit."""


class BodyIncomplete(Exception):
    """The client closed the connection before the whole body came."""


class BodyTimeout(Exception):
    """The next part of the body did not come within the read timeout."""


class UmsApp:
    """``/<root>/simple`` (and ``.../simple/``) and ``/<root>/xml`` here, the rest to
    ``fallback`` (the Django portal); lifespan events close the gateway's sessions."""

    def __init__(
        self,
        fallback: ASGIApp | None,
        context_root: str | None = None,
        max_body: int = 0,
        read_timeout: float | None = None,
    ) -> None:
        config = ums_config()
        root = (context_root if context_root is not None else config.context_root).strip("/")
        base = f"/{root}" if root else ""
        self.routes = {
            f"{base}/simple": "simple",
            f"{base}/simple/": "simple",
            f"{base}/xml": "xml",
        }
        self.fallback = fallback
        self.max_body = max_body or _max_body()
        # The longest wait for the next part of a request body (nginx's
        # client_body_timeout): a sender that goes silent is answered 408 and closed.
        self.read_timeout = (
            read_timeout if read_timeout is not None else config.read_timeout_ms / 1000
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            route = self.routes.get(scope["path"])
            if route is not None:
                await self.serve(route, scope, receive, send)
                return
        elif kind == "lifespan":
            await self.lifespan(receive, send)
            return
        if self.fallback is None:
            await _answer(send, http.HttpReply(404, http.PLAIN, b"not found"))
            return
        await self.fallback(scope, receive, send)

    async def serve(self, route: str, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        ctype = None
        for name, value in scope["headers"]:
            if name == b"content-type":
                ctype = value.decode("latin-1")
                break
        fields: dict[str, str] = {}
        if route == "simple":
            try:
                fields = http.parse_query(scope["query_string"])
            except UmsError as exc:
                # The body is left unread: the connection cannot carry another request.
                await _answer(send, http.refused(exc.status, exc.reason), close=True)
                return
        service = fields.get("service")
        try:
            body = await self.read_body(receive) if method == "POST" else b""
        except BodyTooLarge:
            reason = f"the request body is over {self.max_body} bytes"
            await _answer(send, http.refused(413, reason, service), close=True)
            return
        except BodyTimeout:
            reason = (
                f"the request body did not come: nothing for {self.read_timeout:g} s "
                "(UMS_READ_TIMEOUT)"
            )
            await _answer(send, http.refused(408, reason, service), close=True)
            return
        except BodyIncomplete as exc:
            # Nobody is there to answer; what came is not a message.
            log.warning("UMS request refused: %s; nothing was done with it", exc)
            return
        if route == "simple":
            reply = await http.simple(method, fields, ctype, body)
        else:
            reply = await http.xml(method, ctype, body)
        await _answer(send, reply)

    async def read_body(self, receive: Receive) -> bytes:
        """The whole body; BodyIncomplete if the client leaves before its end (a body cut
        short is never taken for a message), BodyTimeout if it stops sending."""
        parts: list[bytes] = []
        size = 0
        while True:
            try:
                async with asyncio.timeout(self.read_timeout):
                    msg = await receive()
            except TimeoutError:
                raise BodyTimeout from None
            if msg["type"] == "http.disconnect":
                raise BodyIncomplete(
                    f"the client closed the connection after {size} bytes of the body"
                )
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise BodyTooLarge
            if not msg.get("more_body"):
                if not parts:
                    return chunk  # the usual case: one message
                parts.append(chunk)
                return b"".join(parts)
            parts.append(chunk)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                from .sessions import shutdown

                try:
                    # Open transactions roll back, unacknowledged messages go back.
                    await shutdown()
                except Exception:
                    log.exception("UMS gateway shutdown failed")
                await send({"type": "lifespan.shutdown.complete"})
                return


def _max_body() -> int:
    from django.conf import settings

    return int(getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None) or DEFAULT_MAX_BODY)


async def _answer(send: Send, reply: http.HttpReply, close: bool = False) -> None:
    headers = [
        (b"content-type", reply.content_type.encode("latin-1")),
        (b"content-length", str(len(reply.body)).encode()),
    ]
    for name, value in reply.headers:
        # Values are ASCII: http.header_value escaped what a client supplied.
        headers.append((name.encode("latin-1"), value.encode("ascii")))
    if close:
        # The rest of the request body is not read: the connection cannot carry another.
        headers.append((b"connection", b"close"))
    if reply.node_cookie:
        cookie = f"{http.NODE_COOKIE}={ums_config().node}; HttpOnly; Path=/; SameSite=Lax"
        headers.append((b"set-cookie", cookie.encode("latin-1")))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})
