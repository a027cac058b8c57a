"""The JMQ engine under a STOMP connection: a :class:`ConnectionEngine` whose deliveries
are MESSAGE frames made straight from the router's message, written to the STOMP
engine's batch (no JMQ packet encoded, queued and decoded again per delivery)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .engine import ConnectionEngine

if TYPE_CHECKING:
    from broker.core.message import Message


class DeliveryTarget(Protocol):
    """What the link needs from the STOMP engine above it."""

    def render(self, consumer_id: int, msg: Message, redelivered: bool, count: int) -> bytes:
        """The MESSAGE frame of a delivery to JMQ consumer ``consumer_id`` (empty: the
        consumer is no subscription of the connection)."""
        ...

    def write_delivery(self, frame: bytes) -> None:
        """Queue the frame for the client."""
        ...


class StompLink(ConnectionEngine):
    """The router's ``Link`` for a STOMP connection (the rest is the JMQ engine's)."""

    target: DeliveryTarget

    def __init__(self, broker: Any, service: Any, target: DeliveryTarget, **kw: Any) -> None:
        super().__init__(broker, service, **kw)
        self.target = target

    def render_delivery(
        self, consumer_id: int, msg: Message, redelivered: bool, count: int
    ) -> bytes:
        return self.target.render(consumer_id, msg, redelivered, count)

    def send_delivery(self, buf: bytes) -> None:  # type: ignore[override]
        if not buf:
            return  # for no subscription of the connection (render said so)
        # No connection flow control (HELLO's JMQSize, which the STOMP side never
        # sends): a subscription is paced by its credit (StompSettings.prefetch).
        self.msgs_out += 1
        m = self.metrics
        m.messages_out += 1
        m.message_bytes_out += len(buf)
        self.target.write_delivery(buf)
