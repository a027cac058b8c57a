"""The server side of a WebSocket connection carrying STOMP (OpenMQ's ``wsjms``/``wssjms``
services), sans-IO: bytes in, the STOMP bytes the client sent out, and back.

OpenMQ serves STOMP over WebSocket at ``/<service>/mqstomp`` (e.g. ``/wsjms/mqstomp``)
and answers the ``v12.stomp`` subprotocol; its other sub-services there, ``mqjms`` (JMQ
packets) and ``mqjsonstomp`` (STOMP as JSON), are not served here.  The frames and the
HTTP upgrade are wsproto's; this module adds the path and subprotocol rules, and turns
every error of the peer into :class:`WebSocketError` (a :class:`ProtocolError`).

Each WebSocket message is a piece of the STOMP byte stream (a browser sends one frame a
message, a heart-beat as ``"\\n"``); what the broker writes goes out one message a
write, as text when it is UTF-8 (what a hand-written page expects) and binary otherwise.
"""

from __future__ import annotations

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from .errors import ProtocolError

__all__ = ["STOMP_PATH", "SUBPROTOCOLS", "WebSocketError", "WebSocketServer"]

# OpenMQ's sub-service for STOMP (MQWebSocketServiceApp: /<service name>/mqstomp).
STOMP_PATH = "mqstomp"
# Ours in order of preference; OpenMQ answers v12.stomp only, stompjs offers all three.
SUBPROTOCOLS = ("v12.stomp", "v11.stomp", "v10.stomp")
# Close codes (RFC 6455 7.4.1).
CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002


class WebSocketError(ProtocolError):
    """Bytes that are not a WebSocket upgrade or WebSocket frames."""


class WebSocketServer:
    """One accepted WebSocket connection for the service named ``service``.

    :meth:`receive` takes the bytes the client sent and returns the STOMP bytes in them;
    what the codec must answer (the upgrade's response, pongs, the closing handshake)
    collects in :attr:`outgoing`, taken with :meth:`take_outgoing`.
    """

    def __init__(self, service: str, max_message: int) -> None:
        self.service = service
        self.path = f"/{service}/{STOMP_PATH}"
        self.max_message = max_message
        self._ws = WSConnection(ConnectionType.SERVER)
        self.open = False  # the upgrade was accepted
        self.closed = False  # the closing handshake happened (or the peer went)
        self.subprotocol: str | None = None
        self.outgoing: list[bytes] = []
        self._pending = 0  # bytes of the message being assembled from fragments

    def take_outgoing(self) -> bytes:
        out = b"".join(self.outgoing)
        self.outgoing.clear()
        return out

    def receive(self, data: bytes) -> bytes:
        """The STOMP bytes in ``data``; raises WebSocketError for bad input (after which
        :meth:`take_outgoing` may hold an HTTP refusal or a Close frame to send)."""
        try:
            self._ws.receive_data(data)
            stomp: list[bytes] = []
            for event in self._ws.events():
                self._event(event, stomp)
            return b"".join(stomp)
        except WebSocketError as exc:
            if self.open:
                self._fail(str(exc))
            self.closed = True
            raise
        except (RemoteProtocolError, LocalProtocolError, ValueError) as exc:
            # ValueError: wsproto's header decoding (UnicodeDecodeError on non-ASCII bytes).
            self._fail(str(exc) or type(exc).__name__)
            raise WebSocketError(f"not a WebSocket: {exc}") from None

    def _event(self, event: object, stomp: list[bytes]) -> None:
        if isinstance(event, Request):
            self._upgrade(event)
        elif isinstance(event, Message):
            data = event.data
            chunk = data.encode("utf-8") if isinstance(event, TextMessage) else bytes(data)
            self._pending = 0 if event.message_finished else self._pending + len(chunk)
            if self._pending > self.max_message:
                raise WebSocketError(f"a message over {self.max_message} bytes")
            stomp.append(chunk)
        elif isinstance(event, Ping):
            self.outgoing.append(self._ws.send(event.response()))
        elif isinstance(event, CloseConnection):
            if self._ws.state is ConnectionState.REMOTE_CLOSING:
                self.outgoing.append(self._ws.send(event.response()))
            self.closed = True

    def _upgrade(self, req: Request) -> None:
        target = req.target.split("?", 1)[0]
        if target != self.path:
            self._reject(404, f"no STOMP service at {target} (it is at {self.path})")
            raise WebSocketError(f"upgrade for {target}, not {self.path}")
        chosen = next((p for p in SUBPROTOCOLS if p in req.subprotocols), None)
        self.subprotocol = chosen
        self.outgoing.append(self._ws.send(AcceptConnection(subprotocol=chosen)))
        self.open = True

    def _reject(self, status: int, why: str) -> None:
        body = why.encode() + b"\n"
        headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
        self.outgoing.append(
            self._ws.send(RejectConnection(status_code=status, headers=headers, has_body=True))
        )
        self.outgoing.append(self._ws.send(RejectData(body)))

    def _fail(self, why: str) -> None:
        """Answer bad input: a 400 before the upgrade, a Close frame after it."""
        state = self._ws.state
        try:
            if state is ConnectionState.CONNECTING:
                self._reject(400, why)
            elif state is ConnectionState.OPEN:
                self.outgoing.append(
                    self._ws.send(CloseConnection(code=CLOSE_PROTOCOL_ERROR, reason=why[:120]))
                )
        except (LocalProtocolError, RemoteProtocolError):
            pass  # no answer possible in this state: the connection is closed all the same
        self.closed = True

    def message(self, payload: bytes) -> bytes:
        """``payload`` (STOMP bytes the broker writes) as one WebSocket message."""
        try:
            return self._ws.send(TextMessage(payload.decode("utf-8")))
        except UnicodeDecodeError:
            return self._ws.send(BytesMessage(payload))

    def close(self) -> bytes:
        """The broker's Close frame (the broker is closing the connection)."""
        if not self.open or self._ws.state is not ConnectionState.OPEN:
            return b""
        self.closed = True
        return self._ws.send(CloseConnection(code=CLOSE_NORMAL))
