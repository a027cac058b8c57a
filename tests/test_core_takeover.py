"""Recovery of a taken-over broker's rows into a running router (broker/core/recovery.py,
``takeover=True``): what the failed broker stored reaches the consumers attached here
already, marked redelivered."""

from __future__ import annotations

import pytest

from broker.core.recovery import recover
from broker.core.router import MessageRouter
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC
from broker.store.base import QUEUE_INTEREST, RecoveredState, StoredMessage

from .routerkit import Conn, msg, session

pytestmark = pytest.mark.fast


def _stored(dest: str, body: int, interest: str, *, topic: bool = False) -> StoredMessage:
    m = msg(dest, body, topic=topic, persistent=True)
    return StoredMessage(
        bytes([body]) * 16, dest, DEST_TOPIC if topic else DEST_QUEUE, m.raw, {interest: 0}
    )


def test_taken_over_messages_reach_consumers_attached_already() -> None:
    """A queue's consumer and a durable subscription's consumer, attached before the
    takeover's recovery: both get the failed broker's messages, marked redelivered (it
    may have delivered them without the count reaching the store)."""
    r = MessageRouter()
    conn = Conn(1, "c1")
    r.subs.set_client_id(conn, "c1", False, None)  # type: ignore[arg-type]
    sess = session(r, conn)
    r.add_consumer(sess, "q", DEST_QUEUE)
    durable = r.add_consumer(sess, "prices", DEST_TOPIC, durable_name="d")
    assert durable.subscription is not None
    state = RecoveredState(
        messages=[
            _stored("q", 1, QUEUE_INTEREST),
            _stored("prices", 2, durable.subscription.sub_id, topic=True),
        ]
    )
    counts = recover(r, state, takeover=True)
    assert counts["messages"] == 2
    got = conn.deliveries()
    assert sorted(d.body for d in got) == [b"\x01", b"\x02"]
    assert all(d.redelivered for d in got)
