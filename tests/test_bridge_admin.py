"""The bridge admin protocol's sans-IO core (broker/protocol/bridge_admin.py) and
imqbridgemgr's printing and checks (broker/admintools/bridgemgr.py), without a broker.

``tests/data/bridgemgr_list_started.hex`` is the LIST reply body the stock OpenMQ 6.9
broker sent for its running STOMP bridge (captured with tests/interop/java/BridgeProbe.java,
which re-serialises the ArrayList it received).  The replies against real brokers:
tests/interop/test_bridgemgr.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.admintools import bridgemgr
from broker.protocol import bridge_admin as ba
from broker.protocol.javaser import decode_object

pytestmark = pytest.mark.fast

STARTED = [ba.BridgeView("stomp", "STOMP", "STARTED")]
STOPPED = [ba.BridgeView("stomp", "STOMP", "STOPPED")]


def test_list_body_is_byte_for_byte_the_stock_brokers() -> None:
    stock = bytes.fromhex(
        (Path(__file__).parent / "data" / "bridgemgr_list_started.hex").read_text()
    )
    assert ba.list_body(STARTED) == stock


def test_list_body_of_no_bridge_reads_back_as_an_empty_table() -> None:
    (table,) = decode_object(ba.list_body([]), generic=True)  # type: ignore[misc]
    assert table["table"] == []
    assert table["titleTable"] == [["Bridge Name", "Bridge Type", "Bridge State"]]


@pytest.mark.parametrize(
    ("msg_type", "props", "bridges", "status", "error", "start", "stop"),
    [
        (ba.LIST, {}, STARTED, 200, None, [], []),
        (ba.LIST, {ba.BRIDGE_TYPE: "foo"}, STARTED, 500, "Invalid bridge type FOO", [], []),
        (
            ba.START,
            {ba.BRIDGE_TYPE: "foo"},
            STARTED,
            500,
            "[BB4005]: Invalid bridge type FOO",
            [],
            [],
        ),
        (ba.STOP, {ba.BRIDGE_NAME: "stomp"}, STARTED, 200, None, [], ["stomp"]),
        (ba.STOP, {ba.BRIDGE_NAME: "stomp"}, STOPPED, 200, None, [], []),
        (ba.STOP, {ba.BRIDGE_NAME: ""}, STARTED, 500, "Invalid bridge name: ", [], []),
        (ba.START, {}, STOPPED, 200, None, ["stomp"], []),
        (ba.START, {ba.BRIDGE_NAME: "stomp", ba.LINK_NAME: "l"}, STOPPED, 200, None, ["stomp"], []),
        (
            ba.STOP,
            {ba.BRIDGE_NAME: "stomp", ba.LINK_NAME: "l"},
            STARTED,
            500,
            "[BSS4000]: Operation stop(.., -ln l ) is not supported by STOMP type bridge",
            [],
            [],
        ),
        (ba.PAUSE, {}, STARTED, 500, ba.PAUSE_NO_TYPE, [], []),
        (ba.RESUME, {ba.BRIDGE_NAME: "stomp"}, STARTED, 200, None, [], []),
        (
            ba.RESUME,
            {ba.BRIDGE_NAME: "stomp"},
            STOPPED,
            500,
            "[BSS4000]: Operation resume is not supported by STOMP type bridge",
            [],
            [],
        ),
        (ba.STOP, {ba.BRIDGE_NAME: "x"}, STARTED, 500, "[BB4006]: Bridge name x not found", [], []),
        (
            99,
            {},
            STARTED,
            500,
            "[BB4013]: Unexpected bridge admin message type INVALID_TYPE(99)",
            [],
            [],
        ),
    ],
)
def test_answer(msg_type, props, bridges, status, error, start, stop) -> None:
    out = ba.answer(msg_type, props, bridges)
    assert (out.status, out.error, out.start, out.stop) == (status, error, start, stop)
    assert ("JMQMessageType" in out.properties()) == (msg_type < ba.LAST)
    assert bool(out.body) == (msg_type == ba.LIST and status == 200)


def test_table_is_multicolumnprinter_left_aligned_and_sorted() -> None:
    lines = bridgemgr.table(["Host", "Primary Port"], [["localhost", "7676"]], 4, "-")
    assert lines == [
        "-------------------------",
        "Host         Primary Port",
        "-------------------------",
        "localhost    7676",
        "",
    ]
    rows = [["b", "x"], ["a", None]]
    assert bridgemgr.table(["N", "V"], rows, 2, None) == ["N  V", "a  -", "b  x", ""]


def test_check_refuses_as_the_stock_tool() -> None:
    assert bridgemgr.check(bridgemgr.Options("list", "bridge")) is None
    link = bridgemgr.Options("stop", "link", bridge_name="stomp")
    assert bridgemgr.check(link) == (
        "Error [BA3001]: The link name needs to be specified with the -ln option."
    )
    assert bridgemgr.check(bridgemgr.Options("list", "bridge", link_name="l")) == (
        "Error [BA3002]: The -ln option is not allowed for list bridge "
    )
    assert "Error [A3101]" in (bridgemgr.check(bridgemgr.Options("list", "frob")) or "")


def test_passfile() -> None:
    text = "# x\nimq.imqcmd.password=no\nimq.imqbridgemgr.password = secret\n"
    assert bridgemgr.read_passfile(text) == "secret"
    assert bridgemgr.read_passfile("imq.imqcmd.password=x\n") is None
