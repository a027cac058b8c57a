"""A refused login, as the stock C client's bytes see it (raw socket, real broker).

The broker answers AUTHENTICATE with 413 INVALID_LOGIN and then leaves the closing to the client for a
moment (libmqcrt reports "connection closed" instead of the refusal when EOF follows the
reply at once); meanwhile nothing else the client sends is served, and the broker closes
the connection itself if the client does not.
"""

from __future__ import annotations

from typing import Any

from broker.protocol.types import PacketType

from ..wire import Peer, vector

CAPTURE = "cclient/connect-close-digest"


def test_refused_login_serves_nothing_more_and_closes(broker: Any) -> None:
    peer = Peer(broker.host, broker.jms_port)
    try:
        peer.send(vector(f"{CAPTURE}/c2b-01-HELLO.hex"))
        peer.expect(PacketType.HELLO_REPLY)
        assert peer.expect(PacketType.AUTHENTICATE_REQUEST).properties["JMQAuthType"] == "digest"
        # The captured credential answered another nonce, so this login fails.
        peer.send(vector(f"{CAPTURE}/c2b-04-AUTHENTICATE.hex"))
        reply = peer.expect(PacketType.AUTHENTICATE_REPLY)
        assert reply.properties["JMQStatus"] == 413  # INVALID_LOGIN, as OpenMQ's broker
        peer.send(vector(f"{CAPTURE}/c2b-06-START.hex"))
        peer.send(vector(f"{CAPTURE}/c2b-07-CREATE_SESSION.hex"))
        assert peer.closed_by_peer()
        assert [p.type for p in peer.pending] == []
    finally:
        peer.close()
