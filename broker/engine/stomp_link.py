"""The JMQ engine under a STOMP connection: a :class:`ConnectionEngine` whose deliveries
are MESSAGE frames made straight from the router's message, written to the STOMP
engine's batch (no JMQ packet encoded, queued and decoded again per delivery)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from broker.core.errors import RouterError
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, Status

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
        # A consumer reads this once (Consumer.render) and calls it per delivery: the
        # STOMP engine's own method, not one of this class that would call it.
        self.render_delivery = target.render

    def take_message(self, msg: Message, txn_id: int) -> None:
        """A SEND's message (stomp_mapping.send_message), taken as ``on_message`` takes a
        JMQ message packet, without the packet: counted in, its access checked as a send
        without a producer, then routed or held in transaction ``txn_id``.  Raises
        RouterError with what the SEND_REPLY would say; the caller says OK (after the
        store, for a persistent message outside a transaction) and checks memory.

        What on_message does besides is not for STOMP: its properties were encoded
        here (no table to check), the admin queue is the ADMIN service's, and STOMP has
        no producer or connection flow control (flags C and F are never set)."""
        self.msgs_in += 1
        m = self.metrics
        m.messages_in += 1
        m.message_bytes_in += msg.size  # the packet as sent (before its slot)
        dest_type = DEST_QUEUE if msg.is_queue else DEST_TOPIC
        why = self.send_denied(msg.destination, dest_type)
        if why is not None:
            raise RouterError(Status.FORBIDDEN, why)
        # The router's Link, typed as the JMQ engine it is (send_delivery takes bytes here).
        link: ConnectionEngine = self
        if txn_id:
            txns = self.router.txns
            txns.transacted_send(txns.transaction(txn_id, link), msg, dest_type, link)
        else:
            self.router.route(msg, link, dest_type)

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
