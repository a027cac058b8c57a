"""A real in-process :class:`~broker.core.router.MessageRouter` and what a client would
give it, for the router parts' tests (tests/test_core_*.py): a connection that keeps the
deliveries it is sent, and messages built as a client builds them."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from broker.core.message import Message
from broker.core.router import MessageRouter
from broker.core.session import Session
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, FLAG_P, FLAG_Q, FLAG_R, PacketType

_seq = itertools.count(1)
_clock = itertools.count(1)


@dataclass(frozen=True)
class Delivery:
    """One delivery as the client reads it."""

    consumer: int
    body: bytes
    redelivered: bool


class Conn:
    """A client connection: may always take deliveries, keeps what it was sent."""

    render_delivery = None  # JMQ deliveries

    def __init__(self, cid: int, client_id: str | None = None) -> None:
        self.id = cid
        self.client_id = client_id
        self.sent: list[bytes] = []

    def can_deliver(self) -> bool:
        return True

    def send_delivery(self, buf: bytearray) -> None:
        self.sent.append(bytes(buf))

    def deliveries(self) -> list[Delivery]:
        out = []
        for raw in self.sent:
            pkt = parse_packet(raw)
            out.append(Delivery(pkt.consumer_id, pkt.body, bool(pkt.flags & FLAG_R)))
        return out

    def bodies(self) -> list[bytes]:
        return [d.body for d in self.deliveries()]


def msg(
    dest: str,
    body: bytes | int,
    *,
    topic: bool = False,
    priority: int = 4,
    props: dict[str, object] | None = None,
    persistent: bool = False,
    expiration: int = 0,
    origin: int = 0,
) -> Message:
    """A message a producer on connection ``origin`` sends to ``dest``; timestamps
    increase, so "oldest" is the first made."""
    data = bytes([body]) if isinstance(body, int) else body
    raw = build_packet(
        PacketType.BYTES_MESSAGE,
        body=data,
        props=props,
        flags=(0 if topic else FLAG_Q) | (FLAG_P if persistent else 0),
        fields={1: dest},
        priority=priority,
        sequence=next(_seq),
        timestamp=int(time.time() * 1000) + next(_clock),
        expiration=expiration,
    )
    return Message(parse_packet(raw), dest, origin)


def body_of(m: Message) -> bytes:
    return parse_packet(m.raw).body


def send(r: MessageRouter, conn: Conn, dest: str, *bodies: bytes | int, **kw: object) -> None:
    topic = bool(kw.get("topic"))
    for b in bodies:
        r.route(msg(dest, b, **kw), conn, DEST_TOPIC if topic else DEST_QUEUE)  # type: ignore[arg-type]


def session(r: MessageRouter, conn: Conn, ack_mode: int = 2) -> Session:
    """A session (CLIENT_ACKNOWLEDGE unless told otherwise)."""
    return r.create_session(conn, ack_mode)  # type: ignore[arg-type]


def pending(r: MessageRouter, queue: str) -> list[bytes]:
    """The bodies waiting in a queue, in delivery order."""
    return [body_of(e.msg) for e in r.queues[queue].dq]


def dmq_bodies(r: MessageRouter) -> list[bytes]:
    return [body_of(e.msg) for e in r.dmq.dq]


def dmq_reasons(r: MessageRouter) -> list[object]:
    return [e.msg.selector_values().get("JMS_SUN_DMQ_UNDELIVERED_REASON") for e in r.dmq.dq]
