"""The portal's server: daphne, with a read timeout for requests that stop coming.

daphne hands a request to the application only once its whole body is in, so the UMS
gateway's own read timeout (``UMS_READ_TIMEOUT``, portal/ums/asgi.py) never sees a sender
that goes silent on the portal's ``/ums/``: Twisted, under daphne, held such a request for
its 60 s idle timeout and then dropped it without an answer.  Here the idle timeout is the
gateway's read timeout, and a request cut off by it is answered 408 as the gateway
answers (``connection: close``; on ``/ums/`` the UMS headers too) and logged once.
Between requests the timeout closes an idle keep-alive connection, as uvicorn's does.

With ``PORTAL_HTTPS_CERT`` and ``PORTAL_HTTPS_KEY`` in the environment
(broker/security/https.py) the same ``-b``/``-p`` address serves HTTPS instead of HTTP:
daphne's endpoint strings have no room for a key password, so its TCP endpoints are
swapped for TLS ones here.

Run as ``python -m portal.serve`` with daphne's arguments (``broker.commandlines
.portal_command``).
"""

from __future__ import annotations

import logging
import os
import sys

from daphne import server as daphne_server
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory
from twisted.web.http import HTTPChannel

log = logging.getLogger("portal.serve")


def timeout_reply(path: str, seconds: float) -> bytes:
    """The 408 for a request that stopped coming, as the UMS gateway words it."""
    from portal.ums import http

    reason = f"the request did not come: nothing for {seconds:g} s (UMS_READ_TIMEOUT)"
    if path.startswith("/ums/"):
        reply = http.refused(408, reason, _ums_service(path))
    else:
        log.warning("request for %s refused (408): %s", path, reason)
        reply = http.HttpReply(408, http.PLAIN, reason.encode("utf-8"))
    head = [
        "HTTP/1.1 408 Request Timeout",
        f"content-type: {reply.content_type}",
        f"content-length: {len(reply.body)}",
        "connection: close",
        *(f"{name}: {value}" for name, value in reply.headers),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body


def _ums_service(path: str) -> str | None:
    _, _, query = path.partition("?")
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == "service" and value.isidentifier():
            return value
    return None


class ReadTimeoutChannel(HTTPChannel):
    """Twisted's HTTP connection, answering 408 when its idle timeout cuts a request."""

    def timeoutConnection(self) -> None:
        if self.requests and self.transport is not None:
            raw = getattr(self, "_path", b"")
            path = raw.decode("latin-1") if isinstance(raw, bytes) else "?"
            # zope.interface declares ITransport.write without self: mypy miscounts.
            self.transport.write(timeout_reply(path, self.timeOut or 0))  # type: ignore[call-arg,misc]
        super().timeoutConnection()


class PortalHTTPFactory(HTTPFactory):
    """daphne's factory, its connections timed out after the gateway's read timeout."""

    protocol = ReadTimeoutChannel

    def __init__(self, server: daphne_server.Server) -> None:
        super().__init__(server)
        from portal.ums.config import ums_config

        self.timeOut = ums_config().read_timeout_ms / 1000


def main() -> None:
    # daphne's Server.run builds its factory from this module global; there is no option
    # for Twisted's timeout, so the factory is swapped here, before the CLI runs.
    daphne_server.HTTPFactory = PortalHTTPFactory
    from broker.security.https import HttpsError, HttpsKeys, tls_endpoints

    try:
        keys = HttpsKeys.from_env(os.environ)
        factory = keys.twisted_context_factory() if keys is not None else None
    except HttpsError as exc:
        sys.exit(f"portal: {exc}")
    if factory is not None:
        daphne_server.serverFromString = tls_endpoints(factory)
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
