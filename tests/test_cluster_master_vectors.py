"""The master broker's change-record exchange and destination updates as the stock
OpenMQ broker sends them (tests/vectors_cluster/stock_master_exchange.txt): decoded by our
codec and written again byte for byte; the stock destination attribute table read into
ours and ours written in the stock's names; and bad change-record input fed to a link
engine drops that link with its reason (no sockets, no brokers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cluster.changerecord import change_event_entry, changes_reply_entries
from broker.cluster.destattrs import from_wire, to_wire
from broker.cluster.linkengine import LinkEngine, LinkHost, LinkState
from broker.engine.effects import Close
from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo
from broker.protocol.properties import decode_properties, encode_properties

pytestmark = pytest.mark.fast

VECTORS = Path(__file__).resolve().parent / "vectors_cluster" / "stock_master_exchange.txt"


def _vectors() -> list[tuple[str, str, bytes]]:
    out = []
    for line in VECTORS.read_text().splitlines():
        role, name, hexed = line.split()
        out.append((role, name, bytes.fromhex(hexed)))
    return out


def _one(role: str, name: str, index: int = 0) -> gp.GPacket:
    raws = [raw for r, n, raw in _vectors() if (r, n) == (role, name)]
    return gp.decode(raws[index])


def test_every_stock_packet_decodes_and_encodes_byte_for_byte() -> None:
    vectors = _vectors()
    assert len(vectors) >= 15
    for _role, name, raw in vectors:
        pkt = gp.decode(raw)
        assert pkt.name == name
        assert not pkt.wants_reply  # the stock broker asks for none of these replies
        assert gp.encode(pkt, stamp=False) == raw, name


def test_stock_change_record_reply_and_its_entries() -> None:
    req = _one("member", "G_GET_CONFIG_CHANGES_REQUEST")
    assert req.props == {"TS": -1}  # never synchronised
    reply = _one("master", "G_GET_CONFIG_CHANGES_REPLY")
    assert (reply.props["S"], reply.props["C"]) == (200, 3)
    entries = changes_reply_entries(reply)
    assert [e.name for e in entries] == [
        "G_RESET_PERSISTENCE",
        "G_UPDATE_DESTINATION",
        "G_NEW_INTEREST",
    ]
    reset, dest, durable = entries
    assert reset.props == {} and reset.payload == b""
    assert (dest.props["N"], dest.props["DT"], dest.props["M"]) == ("pre.q", 1, True)
    attrs, problems = from_wire(decode_properties(dest.payload))
    assert problems == []
    assert attrs["maxNumMsgs"] == -1 and attrs["limitBehavior"] == "REJECT_NEWEST"
    assert attrs["maxNumProducers"] == 100 and attrs["consumerFlowLimit"] == 1000
    assert (durable.props["N"], durable.props["I"], durable.props["M"]) == ("pre-dur", "cid0", True)
    rec = gp.read_interest(gp.BodyReader(durable.payload))
    assert (rec["dest"], rec["durable"], rec["client_id"], rec["queue"]) == (
        "pre.t",
        "pre-dur",
        "cid0",
        False,
    )


def test_stock_change_events_carry_marked_entries_and_get_status_1() -> None:
    kinds = []
    for i in range(3):
        event = _one("member", "G_CONFIG_CHANGE_EVENT", i)
        assert isinstance(event.props["X"], int)
        entry = change_event_entry(event)
        assert entry.props["M"] is True
        kinds.append(entry.name)
    assert kinds == ["G_UPDATE_DESTINATION", "G_NEW_INTEREST", "G_REM_DURABLE_INTEREST"]
    unsub = change_event_entry(_one("member", "G_CONFIG_CHANGE_EVENT", 2))
    assert (unsub.props["N"], unsub.props["I"]) == ("d1", "cid1")
    r = gp.BodyReader(unsub.payload)
    assert (r.utf(), r.utf()) == ("d1", "cid1")
    for i in range(3):
        reply = _one("master", "G_CONFIG_CHANGE_EVENT_REPLY", i)
        assert reply.props["S"] == gp.EVENT_LOG_SUCCESS
    removed = _one("master", "G_REM_DESTINATION")
    assert (removed.props, removed.payload) == ({"DT": 1, "N": "adm.q"}, b"")


def test_destination_tables_both_ways() -> None:
    topic = _one("master", "G_UPDATE_DESTINATION")
    table = decode_properties(topic.payload)
    attrs, problems = from_wire(table)
    assert problems == []
    assert attrs["maxNumSharedConsumers"] == -1 and attrs["sharedConsumerFlowLimit"] == 5
    # Ours written the stock's way has every field the stock table has.
    ours = to_wire("adm.t", False, attrs)
    assert set(ours) == set(table)
    assert from_wire(decode_properties(encode_properties(ours)))[0] == attrs
    queue = to_wire("q", True, {"maxNumMsgs": 5, "limitBehavior": "FLOW_CONTROL"})
    assert (queue["max_messages"], queue["behaviour"], queue["queue"]) == (5, 0, True)
    assert "max_shared_consumers" not in queue and "max_active" in queue
    bad, problems = from_wire({"behaviour": 9, "max_producers": "many"})
    assert bad == {} and len(problems) == 2


class _Host:
    def __init__(self) -> None:
        self.closed = 0

    def packet(self, pkt: gp.GPacket) -> None:
        # What the cluster service does with them (changes.py).
        if pkt.type == gp.G_CONFIG_CHANGE_EVENT:
            change_event_entry(pkt)
        elif pkt.type == gp.G_GET_CONFIG_CHANGES_REPLY:
            changes_reply_entries(pkt)

    def link_host(self) -> LinkHost:
        return LinkHost(
            init_body=lambda: gp.LinkInit(gp.CLUSTER_VERSION, "10.0.0.1", "A", 7676).encode(),
            info_body=lambda: BrokerInfo("10.0.0.1", "A", 7676, 1, 0).encode(),
            check_peer=lambda init: None,
            up=lambda: None,
            packet=self.packet,
            closed=lambda: None,
        )


def _up_engine() -> LinkEngine:
    e = LinkEngine(_Host().link_host())
    e.start()
    init = gp.LinkInit(gp.CLUSTER_VERSION, "10.0.0.2", "B", 7677)
    info = BrokerInfo("10.0.0.2", "B", 7677, 2, 0).encode()
    e.receive_data(
        gp.encode_link(gp.LinkPacket(gp.LINK_INIT, init.encode()))
        + gp.encode_link(gp.LinkPacket(gp.LINK_BROKER_INFO, info))
        + gp.encode(gp.GPacket(gp.G_BROKER_INFO_REPLY, {"S": 0}))
    )
    assert e.state is LinkState.UP
    return e


@pytest.mark.parametrize(
    "pkt,reason",
    [
        (gp.GPacket(99, {"X": 1}), "unknown GPacket type 99"),
        (gp.GPacket(50), "unknown GPacket type 50"),
        (
            gp.GPacket(gp.G_CONFIG_CHANGE_EVENT, {"X": 1}, b"\x01\x5e\x00\x0djunk"),
            "G_CONFIG_CHANGE_EVENT body does not deserialise: truncated GPacket header",
        ),
        (
            gp.GPacket(gp.G_CONFIG_CHANGE_EVENT, {"X": 1}, gp.encode(gp.GPacket(gp.G_PING))),
            "G_CONFIG_CHANGE_EVENT carries G_PING, not a record entry",
        ),
        (
            gp.GPacket(gp.G_GET_CONFIG_CHANGES_REPLY, {"S": 200, "C": 1}, b"\x00" * 40),
            "G_GET_CONFIG_CHANGES_REPLY body does not deserialise",
        ),
        (
            gp.GPacket(
                gp.G_GET_CONFIG_CHANGES_REPLY,
                {"S": 200, "C": 2},
                gp.encode(gp.GPacket(gp.G_RESET_PERSISTENCE)),
            ),
            "G_GET_CONFIG_CHANGES_REPLY says 2 record(s) but carries 1",
        ),
    ],
)
def test_bad_change_record_input_drops_the_link_with_its_reason(
    pkt: gp.GPacket, reason: str
) -> None:
    e = _up_engine()
    effects = e.receive_data(gp.encode(pkt))
    assert [type(x) for x in effects] == [Close]
    assert e.state is LinkState.CLOSED and e.logged
    assert e.reason is not None and e.reason.startswith(reason), e.reason
    assert e.receive_data(gp.encode(gp.GPacket(gp.G_PING))) == ()  # nothing more is read
