"""Packets the stock OpenMQ 6.9 broker sent ours in the mixed-cluster topics scenario
(tests/vectors_cluster/stock_topics.txt, captured as the README there says), decoded as
the cluster service reads them, and written again byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.protocol import gpacket as gp

pytestmark = pytest.mark.fast

STOCK = gp.BrokerAddress("198.18.0.1", "stock1", 27676)


def _vectors() -> dict[str, bytes]:
    path = Path(__file__).resolve().parent / "vectors_cluster" / "stock_topics.txt"
    return {
        label: bytes.fromhex(text)
        for label, text in (line.split() for line in path.read_text().splitlines() if line)
    }


VECTORS = _vectors()


def test_every_vector_decodes_and_encodes_byte_for_byte() -> None:
    for label, raw in VECTORS.items():
        pkt = gp.decode(raw)
        assert gp.encode(pkt, stamp=False) == raw, label


def test_client_closed_names_a_connection_and_wants_no_reply() -> None:
    pkt = gp.decode(VECTORS["g_client_closed"])
    assert pkt.type == gp.G_CLIENT_CLOSED and not pkt.wants_reply
    assert isinstance(pkt.props["I"], int) and pkt.payload == b""


def test_client_id_lock_and_its_reply() -> None:
    lock = gp.decode(VECTORS["g_lock_clientid"])
    assert lock.type == gp.G_LOCK
    # The stock broker asks without the A bit and with TS 0 for a client ID.
    assert lock.props["I"] == "clientid:cid-ds" and lock.props["TS"] == 0
    assert lock.props["SH"] is False and isinstance(lock.props["X"], int)
    reply = gp.decode(VECTORS["g_lock_reply"])
    assert reply.type == gp.G_LOCK_REPLY and reply.props["S"] == gp.LOCK_SUCCESS
    assert set(reply.props) == {"I", "S", "X"}


def test_durable_subscription_is_an_interest_then_its_consumer_attaches() -> None:
    sub = gp.decode(VECTORS["g_new_interest_durable_subscription"])
    rec = gp.read_interest(gp.BodyReader(sub.payload))
    assert (rec["dest"], rec["client_id"], rec["durable"]) == ("mixed.dt.ds", "cid-ds", "dur-ds")
    assert rec["max_active"] == 1 and not rec["jms_shared"] and rec["uid"].broker == STOCK
    assert sub.props[f"{rec['uid'].consumer_id}:prefetch"] == 1
    attach = gp.decode(VECTORS["g_durable_attach_durable"])
    assert attach.type == gp.G_DURABLE_ATTACH
    assert (attach.props["N"], attach.props["I"], attach.props["allowsNonDurable"]) == (
        "dur-ds",
        "cid-ds",
        True,
    )
    cons = gp.read_interest(gp.BodyReader(attach.payload))
    assert cons["durable"] is None and cons["max_active"] is None
    assert cons["uid"].connection_id == rec["uid"].connection_id
    assert attach.props[f"{cons['uid'].consumer_id}:prefetch"] == 500


def test_shared_subscription_record_and_attach() -> None:
    sub = gp.decode(VECTORS["g_new_interest_shared_subscription"])
    rec = gp.read_interest(gp.BodyReader(sub.payload))
    assert rec["jms_shared"] and rec["shared_name"] == "share-nondurable"
    assert rec["max_active"] == -1 and rec["uid"].connection_id == 0
    attach = gp.decode(VECTORS["g_durable_attach_shared"])
    assert attach.props["NDN"] == "share-nondurable" and attach.props["I"] == ""
    assert "N" not in attach.props


def test_unsubscribe_names_the_durable_in_its_body_only() -> None:
    pkt = gp.decode(VECTORS["g_rem_durable_interest"])
    assert "N" not in pkt.props and "I" not in pkt.props
    assert gp.read_durable_names(pkt.payload, pkt.props["C"]) == [("dur-ds", "cid-ds")]
    with pytest.raises(gp.GPacketError):
        gp.read_durable_names(pkt.payload[:-3], 1)
    with pytest.raises(gp.GPacketError):
        gp.read_durable_names(pkt.payload, 0)


def test_delivered_ack_and_interest_removal() -> None:
    ack = gp.decode(VECTORS["g_message_ack_delivered"])
    assert ack.props["T"] == gp.ACK_DELIVERED and not ack.wants_reply
    r = gp.BodyReader(ack.payload)
    r.raw(32)
    # It names the consumer of a subscription ours announced first (the stock broker
    # relays that subscription under our consumer's UID).
    assert gp.ConsumerUID.read(r).broker.instance == "ours" and r.at_end
    upd = gp.decode(VECTORS["g_interest_update_rem"])
    assert upd.props["T"] == gp.INTEREST_REM and upd.props["C"] == 1
    r = gp.BodyReader(upd.payload)
    assert gp.ConsumerUID.read(r).broker == STOCK and r.at_end
