"""An AUTO_ACKNOWLEDGE ``receive`` whose acknowledgement is cut by a lost connection.

The broker may have applied the acknowledgement before the connection went, so the
client must hand the message to the application rather than raise and lose it
(commit 56e879e; test_ha's SIGKILL test lost a message this way, but only under load).
The stand-in broker makes the timing exact: it reads the ACKNOWLEDGE and then drops the
socket without a reply, so the wait for that reply is what the lost connection cuts.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.protocol.packet import Packet
from broker.protocol.types import FLAG_A, FLAG_P, FLAG_Q, PacketType
from openmq_client import AckMode, Queue, TextMessage, connect
from openmq_client.testing import StandIn, message_packet

pytestmark = [pytest.mark.fast, pytest.mark.timeout(60)]


@pytest.fixture
def standin():
    s = StandIn()
    yield s
    s.close()


def test_auto_receive_returns_message_when_ack_reply_is_lost(standin: StandIn) -> None:
    s = standin

    def drop_without_reply(pkt: Packet) -> list[bytes]:
        s.drop()
        return []

    s.on[PacketType.ACKNOWLEDGE] = drop_without_reply

    async def main() -> None:
        conn = await connect("127.0.0.1", s.jms_port, direct=True)
        sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
        cons = await sess.create_consumer(Queue("q"))
        await conn.start()
        # Persistent, so the client waits for the acknowledgement's reply.
        s.push(
            message_packet(
                consumer_id=cons.consumer_id,
                sequence=1,
                flags=FLAG_Q | FLAG_P,
                body=b"the only copy",
            )
        )
        m = await asyncio.wait_for(cons.receive(5), 10)
        assert isinstance(m, TextMessage) and m.text == "the only copy"
        ack = s.wait_for(PacketType.ACKNOWLEDGE)[0]
        assert ack.flags & FLAG_A  # a reply was awaited: the case under test
        assert conn.is_closed  # the receive ended because the connection went

    asyncio.run(main())
