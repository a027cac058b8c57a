"""A message sent again with its first SysMessageID (issue 35 item 1), on the wire against
ours and OpenMQ 6.9's broker (``--interop-broker=stock``): the repeat, marked I (OpenMQ's
"being resent" bit), is answered NOT_MODIFIED (304) and not stored again -- the queue holds
it once.  (OpenMQ's broker answers 304 to any send of a SysMessageID still in the queue,
marked or not; ours checks the marked ones, since the stock clients never repeat an id:
docs/operators/ha.md.)
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from broker.protocol.jtypes import JInt
from broker.protocol.packet import build_packet
from broker.protocol.types import FLAG_A, FLAG_I, FLAG_P, FLAG_Q, PacketType

from ..wire import Peer, login
from .test_wire_stock_details import jms_port, request

pytestmark = pytest.mark.timeout(120)


def test_a_persistent_message_sent_again_is_304_and_kept_once(interop_broker: Any) -> None:
    peer: Peer = login(interop_broker.host, jms_port(interop_broker))
    try:
        queue = f"resend{int(time.time() * 1000) % 10**8}"
        request(peer, PacketType.CREATE_DESTINATION, JMQDestination=queue, JMQDestType=JInt(1))
        stamp = int(time.time() * 1000)

        def send(flags: int) -> int:
            peer.send(
                build_packet(
                    PacketType.TEXT_MESSAGE,
                    flags=FLAG_Q | FLAG_P | FLAG_A | flags,
                    consumer_id=7,
                    timestamp=stamp,
                    sequence=4242,
                    fields={1: queue},
                    body=b"once",
                )
            )
            return int(peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"])  # type: ignore[arg-type]

        assert send(0) == 200
        assert send(FLAG_I) == 304, "a marked repeat of a message the queue holds"
        browse = request(peer, PacketType.BROWSE, JMQDestination=queue, JMQDestType=JInt(1))
        assert browse.properties["JMQStatus"] == 200
        assert len(browse.body) == 32, f"the queue holds {len(browse.body) // 32} copies"
    finally:
        peer.close()


def test_acknowledging_twice_or_for_an_unknown_consumer(interop_broker: Any) -> None:
    """ACKNOWLEDGE_REPLY as both brokers answer it: 200 the first time, 409 CONFLICT for a
    message acknowledged already, 404 for a consumer the connection never had."""
    import struct

    from .test_wire_stock_details import deliveries, send, session

    peer: Peer = login(interop_broker.host, jms_port(interop_broker))
    try:
        queue = f"ackTwice{int(time.time() * 1000) % 10**8}"
        send(peer, queue, 1)
        sid = session(peer)
        reply = request(
            peer,
            PacketType.ADD_CONSUMER,
            JMQDestination=queue,
            JMQDestType=JInt(1),
            JMQSessionID=sid,
        )
        cid = int(reply.properties["JMQConsumerID"])  # type: ignore[arg-type]
        peer.send(build_packet(PacketType.START))
        (msg,) = deliveries(peer, 1)

        def ack(consumer: int) -> int:
            body = struct.pack(">q", consumer) + msg.sysmsgid
            peer.send(build_packet(PacketType.ACKNOWLEDGE, body=body, flags=FLAG_A))
            return int(peer.expect(PacketType.ACKNOWLEDGE_REPLY).properties["JMQStatus"])  # type: ignore[arg-type]

        assert ack(cid) == 200
        assert ack(cid) == 409
        assert ack(cid + 987654) == 404
    finally:
        peer.close()
