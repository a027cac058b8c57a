"""The stock OpenMQ broker's cluster handshake, captured (tests/vectors_cluster): decoded
field by field and written again byte for byte by our codec."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo, BrokerInfoError
from broker.protocol.errors import ProtocolError

pytestmark = pytest.mark.fast

VECTORS = Path(__file__).resolve().parent / "vectors_cluster"
MATCH = {
    "imq.persist.file.newTxnLog.enabled": "true",
    "imq.useFileLockForLockFile.enabled": "true",
    "imq.autocreate.queue": "true",
    "imq.autocreate.topic": "true",
}


def _stream(name: str) -> list:
    data = bytes.fromhex((VECTORS / f"{name}.hex").read_text().replace("\n", ""))
    return gp.GPacketReader().feed(data)


@pytest.mark.parametrize(
    "name,host,instance,port",
    [
        ("stock_dialler_to_acceptor", "198.18.0.2", "s2", 27677),
        ("stock_acceptor_to_dialler", "198.18.0.1", "s1", 27676),
    ],
)
def test_stock_handshake_decodes_and_encodes_byte_for_byte(
    name: str, host: str, instance: str, port: int
) -> None:
    init, info, reply, goodbye, goodbye_reply = _stream(name)
    assert (init.type, info.type) == (gp.LINK_INIT, gp.LINK_BROKER_INFO)
    li = gp.LinkInit.decode(init.body)
    assert (li.version, li.host, li.instance, li.port, li.master) == (
        500,
        host,
        instance,
        port,
        None,
    )
    assert li.match == MATCH and list(li.match) == list(MATCH)
    assert (li.ha, li.broker_id, li.store_session) == (False, None, None)
    assert li.encode() == init.body

    bi = BrokerInfo.decode(info.body)
    assert (bi.host, bi.instance, bi.port, bi.session_uid) == (host, instance, port, li.session_uid)
    assert (bi.cluster_version, bi.ha, bi.broker_id, bi.store_session) == (500, False, None, None)
    assert (bi.heartbeat_port, bi.heartbeat_interval, bi.description) == (-1, 0, None)
    assert bi.address_props == {"isHostTrusted": "false"}
    assert bi.encode() == info.body

    # The reply: status 0, no A bit, the replier's own BrokerInfo as payload.
    assert (reply.type, reply.props, reply.flags) == (gp.G_BROKER_INFO_REPLY, {"S": 0}, 0)
    assert reply.payload == info.body
    assert (goodbye.type, goodbye.flags) == (gp.G_GOODBYE, gp.A_BIT)
    assert goodbye.props == {
        "instanceName": instance,
        "HA": False,
        "port": port,
        "brokerSession": li.session_uid,
        "host": host,
    }
    assert (goodbye_reply.type, goodbye_reply.props) == (gp.G_GOODBYE_REPLY, {"S": 200})
    for pkt in (reply, goodbye, goodbye_reply):
        assert gp.decode(gp.encode(pkt, stamp=False)) == pkt


def test_bad_broker_info_bodies_raise_protocol_errors_only() -> None:
    (_, info, *_rest) = _stream("stock_dialler_to_acceptor")
    body = info.body
    for bad in (b"", body[:-1], body[:100], b"\xac\xed\x00\x05t\x00\x01x", body[:7] + b"\xff"):
        with pytest.raises(ProtocolError):
            BrokerInfo.decode(bad)
    # Every one-byte corruption either decodes or raises a ProtocolError, nothing else.
    for i in range(0, len(body), 7):
        try:
            BrokerInfo.decode(body[:i] + bytes([body[i] ^ 0x5A]) + body[i + 1 :])
        except ProtocolError:
            pass
    with pytest.raises(BrokerInfoError):
        BrokerInfo.decode(b"\xac\xed\x00\x05t\x00\x01x")  # a String, not a BrokerInfo


def test_our_broker_info_round_trips() -> None:
    info = BrokerInfo("198.18.0.9", "ours", 7676, 1 << 62, 1_700_000_000_000, store_session=5)
    assert BrokerInfo.decode(info.encode()) == info
