"""Listening sockets, and TLS on the connections they accept, with a refused handshake
logged.

``loop.create_server(..., ssl=context)`` drops a connection whose handshake fails without a
word outside asyncio's debug mode (an ``ssl.SSLError`` is an ``OSError``, which asyncio and
uvloop log only at debug level), so an administrator whose clients do not trust the
broker's certificate, or who aimed plain TCP at a TLS port, saw nothing.  A
:class:`TlsListener` accepts plain sockets itself and hands each to
``loop.connect_accepted_socket(..., ssl=context)``, which reports the handshake's failure to
its caller: the application protocol sees only a finished handshake, exactly as with
``create_server(ssl=)``, and a refused one is logged once, with the peer and the reason.
(Starting TLS from a plain protocol with ``loop.start_tls`` would lose a ClientHello that
arrives before the switch: uvloop starts reading right after ``connection_made``.)
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable

log = logging.getLogger("broker.tls")

# asyncio's own default for create_server(ssl=...).
HANDSHAKE_TIMEOUT = 60.0
# After a failed accept (out of descriptors), before the next try.
ACCEPT_RETRY = 0.1


def listening_socket(host: str | None, port: int, backlog: int) -> socket.socket:
    """A listening socket; with no host, one dual-stack socket so IPv4 and IPv6 share the
    port (two sockets would get two different ephemeral ports for port 0)."""
    if host:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _t, _p, _c, addr = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    else:
        try:
            sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            addr = ("::", port)
        except OSError:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            addr = ("0.0.0.0", port)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve(
    factory: Callable[[], asyncio.BaseProtocol],
    sock: socket.socket,
    context: ssl.SSLContext | None,
    service: str,
) -> asyncio.Server | TlsListener:
    """Serve ``factory``'s protocols on the listening ``sock``: plain, or over TLS with a
    refused handshake logged as refused by ``service``."""
    if context is None:
        return await asyncio.get_running_loop().create_server(factory, sock=sock)
    return TlsListener(factory, sock, context, service)


class TlsListener(asyncio.AbstractServer):
    """A listening socket whose connections are served over TLS once their handshake
    succeeds (what ``create_server(ssl=)`` does, with the failures logged)."""

    def __init__(
        self,
        factory: Callable[[], asyncio.BaseProtocol],
        sock: socket.socket,
        context: ssl.SSLContext,
        service: str,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.factory = factory
        self.context = context
        self.service = service
        self.handshake_timeout = handshake_timeout
        self.sockets = [sock]
        self._loop = asyncio.get_running_loop()
        self._handshakes: set[asyncio.Task] = set()
        self._accepting: asyncio.Task | None = self._loop.create_task(self._accept(sock))

    async def _accept(self, sock: socket.socket) -> None:
        said: str | None = None
        while True:
            try:
                conn, addr = await self._loop.sock_accept(sock)
            except OSError as exc:
                # Out of descriptors, say: said once, retried, the listener stays.
                if str(exc) != said:
                    said = str(exc)
                    log.warning("service %s: cannot accept a connection: %s", self.service, exc)
                await asyncio.sleep(ACCEPT_RETRY)
                continue
            said = None
            task = self._loop.create_task(self._handshake(conn, addr))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, conn: socket.socket, addr: object) -> None:
        peer = _peer(addr)
        try:
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await self._loop.connect_accepted_socket(
                self.factory,
                conn,
                ssl=self.context,
                ssl_handshake_timeout=self.handshake_timeout,
            )
        except asyncio.CancelledError:
            conn.close()
            raise
        except (OSError, TimeoutError, EOFError, ConnectionError) as exc:
            conn.close()
            _log_refused(self.service, peer, exc)

    # -- asyncio.AbstractServer --------------------------------------------------

    def close(self) -> None:
        """Stop accepting (connections already served carry on)."""
        if self._accepting is not None:
            self._accepting.cancel()
            self._accepting = None
        for task in list(self._handshakes):
            task.cancel()
        for sock in self.sockets:
            sock.close()

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return self._accepting is not None

    async def start_serving(self) -> None:
        return None

    async def serve_forever(self) -> None:
        while self._accepting is not None:
            await asyncio.sleep(3600)

    async def wait_closed(self) -> None:
        if self._handshakes:
            await asyncio.gather(*self._handshakes, return_exceptions=True)


def _peer(addr: object) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr or "unknown peer")


def _log_refused(service: str, peer: str, exc: BaseException) -> None:
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = f"certificate not accepted: {exc.verify_message or exc.reason or exc}"
        log.warning("service %s: TLS handshake with %s refused: %s", service, peer, reason)
    elif isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        log.warning("service %s: TLS handshake with %s refused: %s", service, peer, reason)
    elif isinstance(exc, TimeoutError):
        log.warning("service %s: TLS handshake with %s timed out", service, peer)
    else:
        # The peer hung up or reset before the handshake ended: often a client that does
        # not trust our certificate and says so only by closing; uvloop also reports a
        # handshake past its time this way.
        detail = str(exc)
        reason = "the peer closed the connection" + (f" ({detail})" if detail else "")
        log.warning("service %s: TLS handshake with %s not completed: %s", service, peer, reason)
