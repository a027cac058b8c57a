"""The WebSocket services' per-connection glue (OpenMQ's ``wsjms``/``wssjms``): the STOMP
transport of :mod:`broker.server.stomp` with a WebSocket codec
(:mod:`broker.protocol.websocket`) between the socket and the STOMP engine."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.protocol.websocket import WebSocketError, WebSocketServer

from .stomp import StompConnection

if TYPE_CHECKING:
    from .broker import Broker
    from .services import Service

log = logging.getLogger("broker.websocket")


class WebSocketStompConnection(StompConnection):
    """One browser's (or any WebSocket client's) STOMP connection."""

    def __init__(self, broker: Broker, service: Service) -> None:
        super().__init__(broker, service)
        self.ws = WebSocketServer(service.name, service.stomp.max_frame)

    def _receive(self, data: bytes) -> None:
        ws = self.ws
        t = self.transport
        try:
            stomp = ws.receive(data)
        except WebSocketError as exc:
            # Logged once here; the client gets a 400/404 or a Close frame, others go on.
            log.warning("service %s: %s: %s, closed", ws.service, self.engine.peer, exc)
            if t is not None and not t.is_closing():
                t.write(ws.take_outgoing())
                t.close()
            return
        answer = ws.take_outgoing()
        if answer and t is not None and not t.is_closing():
            t.write(answer)
        if stomp:
            super()._receive(stomp)
        if ws.closed and t is not None:
            t.close()

    def write_batch(self, t: asyncio.Transport, out: Sequence[bytes | bytearray]) -> None:
        if self.ws.open and not self.ws.closed:
            t.write(self.ws.message(b"".join(out)))

    def close_transport(self) -> None:
        t = self.transport
        if t is not None:
            if not t.is_closing():
                goodbye = self.ws.close()
                if goodbye:
                    t.write(goodbye)
            t.close()
