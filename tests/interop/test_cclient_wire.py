"""What the stock C client writes, relayed to a real broker and recorded on the way.

The C client differs from the Java one on the wire (third_party/openmq/vectors/cclient/README.md):
a variable header on every packet (property offset 76 when it has no fields, padding
0-3 bytes), correlation IDs from 0x8000000000000001, HELLO with JMQSize, START_TRANSACTION
as soon as a transacted session exists. Here the probe's whole `checks` run goes through
a recording relay, and the broker's answers are checked against those quirks.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from broker.protocol.packet import (
    HEADER_SIZE,
    VH_DELIVERY_COUNT,
    VH_DELIVERY_TIME,
    VH_PRODUCERID,
    VH_TRANSACTIONID,
)
from broker.protocol.types import FLAG_A, PacketType, reply_type

from .conftest import CProbe
from .relay import Relay
from .test_cclient import CHECKS

FIRST_CORRELATION_ID = -(2**63) + 1  # 0x8000000000000001 as the signed field
# Statuses other than 200 the checks bring about: a destination created again (409, which
# clients take as success) and the invalid-selector check (400).
ALLOWED = {PacketType.CREATE_DESTINATION: {200, 409}, PacketType.ADD_CONSUMER: {200, 400}}


def test_c_client_wire_through_relay(broker: Any, c_probe: CProbe) -> None:
    relay = Relay(broker.host, broker.jms_port)
    try:
        r = c_probe.run(
            broker, "checks", uuid.uuid4().hex[:10], env={"PROBE_SERVICE_PORT": str(relay.port)}
        )
    finally:
        relay.close()
    assert r.checks == dict.fromkeys(CHECKS, "ok"), r.explain()
    # connect_close, the main connection and the durable subscriber's (with a client ID).
    assert len(relay.connections) == 3, r.explain()

    saw_transaction = False
    paddings: set[int] = set()
    for rec in relay.connections:
        sent, answers = rec.client_packets(), rec.broker_packets()
        hello = sent[0]
        assert hello.type == PacketType.HELLO
        assert hello.prop_offset == 76  # the empty variable header: terminator + padding
        assert "JMQSize" in hello.properties and "JMQReconnectable" not in hello.properties
        for p in sent:
            assert p.prop_offset >= 76 and p.prop_offset % 4 == 0, p
            pad = padding(p.raw, p.prop_offset)
            assert 0 <= pad <= 3, (PacketType(p.type).name, pad)
            paddings.add(pad)
        # Correlation IDs count up from 0x8000000000000001 (START carries 0, without A).
        requests = [p for p in sent if p.flags & FLAG_A]
        assert requests[0].consumer_id == FIRST_CORRELATION_ID
        ids = [p.consumer_id for p in requests]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        # The broker answers every request with its reply, echoing its correlation ID.
        replies = {(p.type, p.consumer_id): p for p in answers}
        for req in requests:
            reply = replies.get((reply_type(req.type), req.consumer_id))
            assert reply is not None, f"no reply to {PacketType(req.type).name} {req.consumer_id}"
            status = reply.properties["JMQStatus"]
            assert status in ALLOWED.get(req.type, {200}), (PacketType(req.type).name, status)
            if req.type == PacketType.START_TRANSACTION:
                saw_transaction = True
                assert isinstance(reply.properties["JMQTransactionID"], int)
    assert saw_transaction
    # The broker read variable headers with every padding the C client writes, 0 included
    # (the Java client's is 1-4).
    assert paddings == {0, 1, 2, 3}


def padding(raw: bytes, end: int) -> int:
    """Bytes between the variable header's terminator and the property table."""
    pos = HEADER_SIZE
    while True:
        (tag,) = struct.unpack_from(">h", raw, pos)
        if tag == 0:
            return end - (pos + 2)
        (length,) = struct.unpack_from(">H", raw, pos + 2)
        if tag in (VH_TRANSACTIONID, VH_PRODUCERID, VH_DELIVERY_TIME):
            length = 8
        elif tag == VH_DELIVERY_COUNT:
            length = 4
        pos += 4 + length
