"""Destination names on a real broker: raw JMS packets (CREATE_DESTINATION, ADD_PRODUCER,
ADD_CONSUMER and an acknowledged send to a name no one created) and the stock imqcmd's
``create dst``.  ``--interop-broker=stock`` runs the same against OpenMQ's broker, whose
answers are in the table beside ours.

Deliberate differences: a name with a control or format character (CR, LF, NUL, U+200B)
or an empty one is refused 400 here and never stored; OpenMQ's broker creates it (and can
then fail to store its messages).  A send to an ``mq.*`` topic is answered 400 here, 500
there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import read_portmapper
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import build_packet
from broker.protocol.portmapper import parse_table
from broker.protocol.types import FLAG_A, FLAG_Q, PacketType

from ..wire import control, login
from .imqcmd_stock import StockImqcmd, compile_java, missing
from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

Q, T = 1, 2
OK4 = (200, 200, 200, 200)
# (name, destination type) -> the JMQStatus of CREATE_DESTINATION, ADD_PRODUCER,
# ADD_CONSUMER and SEND: (ours, OpenMQ's).
CASES: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]] = {
    # The stock Java client refuses these names itself (C4050); the broker takes them.
    ("a-b", Q): (OK4, OK4),
    ("1abc", T): (OK4, OK4),
    ("bad name", Q): (OK4, OK4),
    ("café", Q): (OK4, OK4),
    # Only topics are patterns; a pattern must be well formed.
    ("q*x", Q): ((415,) * 4, (415,) * 4),
    ("a.*", Q): ((415,) * 4, (415,) * 4),
    ("a.*", T): (OK4, OK4),
    ("q*x", T): ((406,) * 4, (406,) * 4),
    ("a.>", T): ((406,) * 4, (406,) * 4),
    # mq.* is OpenMQ's monitoring namespace.
    ("mq.nosuch", Q): ((500,) * 4, (500,) * 4),
    ("mq.nosuch", T): ((400,) * 4, (400, 400, 400, 500)),
    # Never stored here.
    ("a\r\nb", Q): ((400,) * 4, OK4),
    ("a\x00b", T): ((400,) * 4, OK4),
    ("x\u200by", Q): ((400,) * 4, OK4),
    ("", Q): ((400,) * 4, OK4),
}

# The stock imqcmd's create dst: the line OpenMQ's broker makes it print (exit status 1).
IMQCMD = {
    ("q", "bad name"): "[B4091]: The Destination of bad name contains invalid characters",
    ("q", "a-b"): "[B4091]: The Destination of a-b contains invalid characters",
    ("t", "a.*"): "[B4091]: The Destination of a.* contains invalid characters",
    ("q", "mq.foo"): "[B4175]: The following destination cannot be created: mq.foo",
}


def jms_port(b: Any) -> int:
    """The jms service's port, from the port mapper as a client finds it."""
    entry = parse_table(read_portmapper(b.host, b.portmapper_port)).find(name="jms")
    assert entry is not None
    return entry.port


def statuses(peer: Any, sid: int, name: str, dtype: int, cid: int) -> tuple[int, ...]:
    out = []
    session = {"JMQSessionID": JLong(sid)}
    for ptype, reply, extra in (
        (PacketType.CREATE_DESTINATION, PacketType.CREATE_DESTINATION_REPLY, {}),
        (PacketType.ADD_PRODUCER, PacketType.ADD_PRODUCER_REPLY, session),
        (
            PacketType.ADD_CONSUMER,
            PacketType.ADD_CONSUMER_REPLY,
            {**session, "JMQAckMode": JInt(1)},
        ),
    ):
        cid += 1
        peer.send(control(ptype, cid, JMQDestination=name, JMQDestType=JInt(dtype), **extra))
        out.append(int(peer.expect(reply).properties["JMQStatus"]))
    # A message to a name nobody created or registered a producer for.
    flags = FLAG_A | (FLAG_Q if dtype == Q else 0)
    peer.send(
        build_packet(
            PacketType.TEXT_MESSAGE, flags=flags, consumer_id=cid + 1, fields={1: name}, body=b"x"
        )
    )
    out.append(int(peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"]))
    return tuple(out)


def test_destination_names_on_the_wire_and_through_the_stock_imqcmd(
    request: pytest.FixtureRequest,
) -> None:
    kind = broker_kind(request.config)
    lacking = missing()
    if lacking:
        pytest.fail("the stock imqcmd cannot run; missing: " + "; ".join(lacking), pytrace=False)
    tmp = Path(tempfile.mkdtemp(prefix="imq-destnames-"))
    b = start_either(kind, tmp)
    try:
        peer = login(b.host, jms_port(b))
        try:
            peer.send(control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(1)))
            sid = int(peer.expect(PacketType.CREATE_SESSION_REPLY).properties["JMQSessionID"])
            got = {
                case: statuses(peer, sid, *case, cid=10 * (i + 1)) for i, case in enumerate(CASES)
            }
            column = 1 if kind == "stock" else 0
            assert got == {case: want[column] for case, want in CASES.items()}
            if kind == "ours":
                # Nothing refused was stored: VERIFY_DESTINATION does not find it.
                for i, (name, dtype) in enumerate(CASES):
                    if CASES[(name, dtype)][0][0] == 200:
                        continue
                    peer.send(
                        control(
                            PacketType.VERIFY_DESTINATION,
                            900 + i,
                            JMQDestination=name,
                            JMQDestType=JInt(dtype),
                        )
                    )
                    reply = peer.expect(PacketType.VERIFY_DESTINATION_REPLY)
                    assert reply.properties["JMQStatus"] != 200, name
        finally:
            peer.close()

        imqcmd = StockImqcmd(tmp, compile_java(tmp / "imqcmd"))
        for (dtype, name), line in IMQCMD.items():
            r = imqcmd.run(
                f"{b.host}:{b.portmapper_port}", "create", "dst", "-t", dtype, "-n", name
            )
            assert r.returncode == 1, str(r)
            assert line in r.output.splitlines(), str(r)
            assert "Creating the destination failed." in r.output, str(r)
    finally:
        b.stop()
