"""The cluster link's protocol in process: bytes fed to a LinkEngine, what it writes,
which state it reaches, and the reason it drops a link for (no sockets, no brokers).

The same bad inputs reach a real broker's cluster port in tests/test_cluster.py
(``test_bad_input_on_the_cluster_port_drops_the_link``); here each refusal is seen
exactly, per state.
"""

from __future__ import annotations

import os
import struct

import pytest

from broker.cluster.linkengine import (
    HANDSHAKE_TIMEOUT,
    TRANSITIONS,
    InvalidTransition,
    LinkEngine,
    LinkEvent,
    LinkHost,
    LinkRefused,
    LinkState,
    next_state,
)
from broker.engine.effects import CancelTimer, Close, StartTimer
from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo

pytestmark = pytest.mark.fast

PEER = gp.LinkInit(gp.CLUSTER_VERSION, "10.0.0.2", "B", 7677)
MY_INFO = BrokerInfo("10.0.0.1", "A", 7676, 1, 0).encode()
PEER_INFO = BrokerInfo("10.0.0.2", "B", 7677, 2, 0)


class Host:
    """Records what the engine tells the cluster service."""

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.checked: list[gp.LinkInit] = []
        self.ups = 0
        self.packets: list[gp.GPacket] = []
        self.closed = 0

    def check_peer(self, init: gp.LinkInit) -> None:
        self.checked.append(init)
        if self.refuse:
            raise LinkRefused(self.refuse)

    def link_host(self) -> LinkHost:
        return LinkHost(
            init_body=lambda: gp.LinkInit(gp.CLUSTER_VERSION, "10.0.0.1", "A", 7676).encode(),
            info_body=lambda: MY_INFO,
            check_peer=self.check_peer,
            up=self._up,
            packet=self.packets.append,
            closed=self._closed,
        )

    def _up(self) -> None:
        self.ups += 1

    def _closed(self) -> None:
        self.closed += 1


def _engine(host: Host | None = None) -> tuple[LinkEngine, Host]:
    h = host or Host()
    e = LinkEngine(h.link_host(), expected=("10.0.0.2", 7677))
    effects = e.start()
    assert [type(x) for x in effects] == [StartTimer]
    assert effects[0].delay == HANDSHAKE_TIMEOUT  # type: ignore[union-attr]
    return e, h


def _written(e: LinkEngine) -> list:
    """Decoded link packets and GPackets the engine queued since the last call."""
    data = b"".join(e.data_to_send())
    return gp.GPacketReader().feed(data) if data else []


def _init(init: gp.LinkInit = PEER) -> bytes:
    return gp.encode_link(gp.LinkPacket(gp.LINK_INIT, init.encode()))


def _info(body: bytes | None = None) -> bytes:
    body = PEER_INFO.encode() if body is None else body
    return gp.encode_link(gp.LinkPacket(gp.LINK_BROKER_INFO, body))


def _reply(status: int = 0) -> bytes:
    return gp.encode(gp.GPacket(gp.G_BROKER_INFO_REPLY, {"S": status}, b""))


def _up(e: LinkEngine) -> None:
    e.receive_data(_init() + _info())
    effects = e.receive_data(_reply())
    assert [type(x) for x in effects] == [CancelTimer]
    assert e.state is LinkState.UP


def test_handshake_both_ways_then_gpackets_reach_the_host() -> None:
    e, h = _engine()
    hello = _written(e)
    assert [(p.type, type(p)) for p in hello] == [
        (gp.LINK_INIT, gp.LinkPacket),
        (gp.LINK_BROKER_INFO, gp.LinkPacket),
    ]
    assert gp.LinkInit.decode(hello[0].body).instance == "A"

    assert e.receive_data(_init()) == ()
    assert e.state is LinkState.INIT and h.checked == [PEER] and e.address == PEER.address
    e.receive_data(_info())
    assert e.state is LinkState.INFO_EXCHANGED and e.peer_info == PEER_INFO
    (reply,) = _written(e)
    assert (reply.type, reply.props["S"], reply.payload) == (gp.G_BROKER_INFO_REPLY, 0, MY_INFO)
    assert h.ups == 0

    effects = e.receive_data(_reply())
    assert [type(x) for x in effects] == [CancelTimer] and h.ups == 1 and e.up

    ping = gp.GPacket(gp.G_PING, {"X": 1}, b"")
    e.receive_data(gp.encode(ping) + gp.encode_link(gp.LinkPacket(gp.LINK_PING, b"")))
    assert [p.type for p in h.packets] == [gp.G_PING]  # the legacy keep-alive is only heard


def test_handshake_split_across_reads_and_all_in_one() -> None:
    whole = _init() + _info() + _reply()
    e, h = _engine()
    for i in range(len(whole)):
        e.receive_data(whole[i : i + 1])
    assert e.state is LinkState.UP and h.ups == 1
    e, h = _engine()
    e.receive_data(whole)
    assert e.state is LinkState.UP and h.ups == 1


_BAD = [
    ("", _info(), "BROKER_INFO before LINK_INIT"),
    ("", _reply(), "G_BROKER_INFO_REPLY before the handshake was complete"),
    ("init", _init(), "second LINK_INIT on one link"),
    ("init", gp.encode(gp.GPacket(gp.G_PING, {}, b"")), "before the handshake was complete"),
    ("info", _info(), "second BROKER_INFO on one link"),
    ("info", gp.encode(gp.GPacket(gp.G_PING, {}, b"")), "before the handshake was complete"),
    ("info", _reply(503), "peer refused the link (status 503"),
    ("up", _init(), "second LINK_INIT on one link"),
    ("up", _info(), "second BROKER_INFO on one link"),
    ("", gp.encode_link(gp.LinkPacket(9, b"")), "unexpected link packet type 9"),
    ("", os.urandom(64).replace(b"\x00", b"\x01"), "unknown packet version"),
    ("", struct.pack(">hh", 351, 1) + b"\0" * 40, "unknown packet version"),
    # A LINK_INIT cut short (its size says so) and BROKER_INFO bodies that are no BrokerInfo.
    (
        "",
        gp.encode_link(gp.LinkPacket(gp.LINK_INIT, PEER.encode()[:9])),
        "bad LINK_INIT: bad string",
    ),
    ("init", _info(b"\xac\xed\x00\x05\x70"), "BROKER_INFO body does not deserialise"),
    ("init", _info(PEER.encode()), "BROKER_INFO body does not deserialise"),
    ("init", _info(PEER_INFO.encode()[:-3]), "BROKER_INFO body does not deserialise"),
    (
        "init",
        _info(BrokerInfo("10.0.0.2", "C", 7677, 2, 0).encode()),
        "BROKER_INFO names C@10.0.0.2:7677, LINK_INIT B@10.0.0.2:7677",
    ),
]


# Ids by number: the bytes (random, time-stamped) differ between pytest-xdist's workers.
@pytest.mark.parametrize("before,data,reason", _BAD, ids=[f"case{i}" for i in range(len(_BAD))])
def test_out_of_place_or_bad_input_drops_the_link_with_its_reason(
    before: str, data: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    e, h = _engine()
    if before in ("init", "info", "up"):
        e.receive_data(_init())
    if before in ("info", "up"):
        e.receive_data(_info())
    if before == "up":
        e.receive_data(_reply())
    _written(e)
    effects = e.receive_data(data)
    assert [type(x) for x in effects] == [Close]
    assert e.closed and e.reason is not None and reason in e.reason and e.logged
    assert [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()] == [
        f"cluster link {e.describe()} dropped: {e.reason}"
    ]
    # Nothing more is read or written; the host hears of the close once the transport goes.
    assert e.receive_data(_init()) == () and _written(e) == []
    e.connection_lost(None)
    assert h.closed == 1 and reason in (e.reason or "")


def test_a_peer_the_service_refuses_is_dropped_at_its_link_init() -> None:
    e, h = _engine(Host(refuse="10.0.0.2:7677 is not in imq.cluster.brokerlist"))
    effects = e.receive_data(_init() + _info())
    assert [type(x) for x in effects] == [Close] and e.closed
    assert e.reason == "10.0.0.2:7677 is not in imq.cluster.brokerlist"
    assert e.peer is None and h.ups == 0


def test_no_complete_handshake_in_time_drops_the_link() -> None:
    e = LinkEngine(Host().link_host())
    (start,) = e.start()
    assert isinstance(start, StartTimer)
    e.receive_data(_init())
    assert [type(x) for x in start.callback()] == [Close]
    assert e.closed and e.reason == f"no complete handshake within {HANDSHAKE_TIMEOUT:g} s"
    # Once up, the deadline (were it to fire) does nothing.
    e = LinkEngine(Host().link_host())
    (start,) = e.start()
    _up(e)
    assert start.callback() == () and e.state is LinkState.UP


def test_goodbye_either_way_is_a_leave_not_a_crash() -> None:
    e, h = _engine()
    _up(e)
    e.heard_goodbye()
    assert e.state is LinkState.LEAVING and e.goodbye
    e.receive_data(gp.encode(gp.GPacket(gp.G_PING, {}, b"")))
    assert [p.type for p in h.packets] == [gp.G_PING]  # still heard while leaving
    e.connection_lost(None)
    assert e.state is LinkState.CLOSED and e.reason == "left the cluster (GOODBYE)"

    e, h = _engine()
    _up(e)
    _written(e)
    e.leave()
    (goodbye,) = _written(e)
    assert goodbye.type == gp.G_GOODBYE and e.state is LinkState.LEAVING
    assert [type(x) for x in e.take_effects()] == [Close]
    e.connection_lost(None)
    assert e.reason == "left the cluster (GOODBYE)" and h.closed == 1


def test_connection_lost_says_why() -> None:
    e, h = _engine()
    e.receive_data(_init()[:20])
    e.connection_lost(None)
    assert e.reason == "connection lost in the middle of a packet (EOF)" and h.closed == 1
    e, h = _engine()
    _up(e)
    e.connection_lost(ConnectionResetError("reset"))
    assert e.reason == "connection lost (reset)"


def test_transition_table() -> None:
    assert next_state(LinkState.NEW, LinkEvent.PEER_INIT) is LinkState.INIT
    assert all(
        TRANSITIONS[s, LinkEvent.CLOSED] is LinkState.CLOSED
        for s in LinkState
        if s is not LinkState.CLOSED
    )
    with pytest.raises(InvalidTransition):
        next_state(LinkState.NEW, LinkEvent.REPLY_OK)
    with pytest.raises(InvalidTransition):
        next_state(LinkState.CLOSED, LinkEvent.CLOSED)
