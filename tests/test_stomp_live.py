"""stomp.py (PyPI stomp-py) against a broker process with the STOMP listener on: every
client frame and ack mode in STOMP 1.0, 1.1 and 1.2, transactions, selectors, durable
subscriptions, refusals, and a silent heart-beating client dropped with its unacked
messages going to another subscriber.

Each test runs against ours and against the stock OpenMQ broker's STOMP bridge
(``--interop-broker=ours`` or ``stock``, or INTEROP_BROKER, runs one of them); only what
docs/reference/stomp.md lists under "Where ours differs from OpenMQ's bridge" is skipped
there, each with its reason."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.protocol.stomp import FrameReader

from .interop.jvm import broker_kind
from .stompkit import WAIT, Peer, stock_stomp_broker, stomp_broker

pytestmark = pytest.mark.timeout(300)

VERSIONS = ("1.0", "1.1", "1.2")


# What docs/reference/stomp.md lists as the stock bridge's differences.
NO_11 = "the stock bridge speaks STOMP 1.0 and 1.2, not 1.1 (docs/reference/stomp.md)"
NESTED = "one open transaction a connection (docs/reference/stomp.md)"
ACKS = "client acknowledges every message delivered, like JMS (docs/reference/stomp.md)"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test against ours and against the stock bridge (issue 38: the same stomp.py
    program passes there too), or the one --interop-broker / INTEROP_BROKER names."""
    if "stock" not in metafunc.fixturenames:
        return
    config = metafunc.config
    named = config.getoption("--interop-broker", default=None) or os.environ.get("INTEROP_BROKER")
    kinds = [broker_kind(config)] if named else ["ours", "stock"]
    metafunc.parametrize("stock", [k == "stock" for k in kinds], ids=kinds, scope="module")


@pytest.fixture(scope="module")
def stomp_b(stock: bool) -> Iterator[tuple[Any, int]]:
    if stock:
        with stock_stomp_broker() as bp:
            yield bp
        return
    # The server asks for heart-beats every 500 ms at the most (the drop test's client
    # offers 500).
    with stomp_broker("imq.bridge.stomp.heartbeat.receive=500") as bp:
        yield bp


@pytest.fixture(scope="module")
def v(stock: bool) -> str:
    """The version of the tests that do not depend on one: 1.0 on the stock bridge."""
    return "1.0" if stock else "1.2"


def differs_on_stock(stock: bool, why: str) -> None:
    """Skip on the stock bridge for a difference docs/reference/stomp.md lists."""
    if stock:
        pytest.skip(f"stock bridge: {why}")


@pytest.fixture(scope="module")
def port(stomp_b: tuple[Any, int]) -> int:
    return stomp_b[1]


@pytest.fixture
def peers(port: int, stock: bool) -> Iterator[Any]:
    made: list[Peer] = []

    def make(version: str = "1.2", **kw: Any) -> Peer:
        if version == "1.1":
            differs_on_stock(stock, NO_11)
        p = Peer(port, version, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def _q() -> str:
    return "/queue/q" + uuid.uuid4().hex[:12]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("ack", ["auto", "client", "client-individual"])
def test_ack_modes(peers, version, ack, stock):
    if ack != "auto":
        differs_on_stock(stock, ACKS)
    q = _q()
    a = peers(version)
    a.receipt(a.conn.subscribe, q, "s1", ack=ack)
    for i in range(3):
        a.receipt(a.conn.send, q, f"m{i}", headers={"n": str(i)})
    got = [a.next() for _ in range(3)]
    assert [m.body for m in got] == ["m0", "m1", "m2"]
    assert [m.headers["n"] for m in got] == ["0", "1", "2"]
    assert all(m.headers["subscription"] == "s1" for m in got)
    if ack == "client":
        a.ack(got[1])  # cumulative: m0 and m1
    elif ack == "client-individual":
        a.ack(got[0])
        a.ack(got[2])
    a.close()
    # What was not acknowledged comes to the next subscriber, marked redelivered.
    b = peers(version)
    b.receipt(b.conn.subscribe, q, "s2", ack="client-individual")
    if ack == "auto":
        assert b.nothing_more()
    else:
        m = b.next()
        want = "m2" if ack == "client" else "m1"
        assert (m.body, m.headers["redelivered"]) == (want, "true")
        b.ack(m)
        assert b.nothing_more()


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_nack_redelivers(peers, version, stock):
    differs_on_stock(stock, "no NACK: BSS4038, the connection closed (docs/reference/stomp.md)")
    q = _q()
    a = peers(version)
    a.receipt(a.conn.subscribe, q, "s", ack="client-individual")
    a.receipt(a.conn.send, q, "again")
    first = a.next()
    a.nack(first)
    second = a.next()
    assert second.body == "again" and second.headers["redelivered"] == "true"
    a.ack(second)
    assert a.nothing_more()


@pytest.mark.parametrize("version", VERSIONS)
def test_unsubscribe_stops_deliveries(peers, version):
    q = _q()
    a = peers(version)
    a.receipt(a.conn.subscribe, q, "s")
    a.receipt(a.conn.send, q, "one")
    assert a.next().body == "one"
    if version == "1.0":
        a.receipt(a.conn.unsubscribe, destination=q, id="s")
    else:
        a.receipt(a.conn.unsubscribe, "s")
    a.receipt(a.conn.send, q, "two")
    assert a.nothing_more()


@pytest.mark.parametrize("version", VERSIONS)
def test_transactions_commit_and_abort(peers, version, stock):
    differs_on_stock(stock, NESTED)
    q = _q()
    a = peers(version)
    a.receipt(a.conn.subscribe, q, "s", ack="client-individual")
    a.receipt(a.conn.begin, "t1")
    a.receipt(a.conn.send, q, "rolled back", transaction="t1")
    a.receipt(a.conn.abort, "t1")
    a.receipt(a.conn.begin, "t2")
    a.receipt(a.conn.send, q, "committed", transaction="t2")
    assert a.nothing_more()
    a.receipt(a.conn.commit, "t2")
    m = a.next()
    assert m.body == "committed"
    # An acknowledgement in a transaction rolled back: the message comes again.
    a.receipt(a.conn.begin, "t3")
    if version == "1.2":
        a.receipt(a.conn.ack, m.headers["ack"], transaction="t3")
    elif version == "1.1":
        a.receipt(a.conn.ack, m.headers["message-id"], "s", transaction="t3")
    else:
        a.receipt(a.conn.ack, m.headers["message-id"], transaction="t3")
    a.receipt(a.conn.abort, "t3")
    again = a.next()
    assert again.body == "committed" and again.headers["redelivered"] == "true"
    a.ack(again)
    assert a.nothing_more()


@pytest.mark.parametrize("version", VERSIONS)
def test_headers_both_ways_and_selector(peers, version, stock):
    q = _q()
    a = peers(version)
    a.receipt(a.conn.subscribe, q, "s", headers={"selector": "colour = 'red' AND n <> '0'"})
    for colour, n in (("blue", "5"), ("red", "0"), ("red", "7")):
        a.receipt(
            a.conn.send,
            q,
            f"{colour}{n}",
            headers={
                "colour": colour,
                "n": n,
                "priority": "8",
                "correlation-id": "corr-1",
                "type": "kind",
                "reply-to": "/queue/answers",
                "persistent": "false",
            },
        )
    m = a.next()
    assert m.body == "red7"
    h = m.headers
    assert (h["priority"], h["correlation-id"], h["type"], h["reply-to"]) == (
        "8",
        "corr-1",
        "kind",
        "/queue/answers",
    )
    # A non-persistent message's frame has no persistent header (the stock bridge never
    # writes one: docs/reference/stomp.md).
    assert "persistent" not in h
    assert h["message-id"].startswith("ID:")
    # Its ID names where it came from (the client's address), as a JMQ client's does.
    assert "-0.0.0.0-" not in h["message-id"], h["message-id"]
    assert a.nothing_more()


def test_durable_subscription_while_away(peers, v):
    topic = "/topic/t" + uuid.uuid4().hex[:12]
    cid = "stomp-" + uuid.uuid4().hex[:8]
    a = peers(v, connect=False)
    a.connect(**{"client-id": cid})
    a.receipt(a.conn.subscribe, topic, "d", headers={"durable-subscriber-name": "dur"})
    a.close()
    p = peers(v)
    p.receipt(p.conn.send, topic, "while away")
    b = peers(v, connect=False)
    b.connect(**{"client-id": cid})
    b.receipt(b.conn.subscribe, topic, "d", headers={"durable-subscriber-name": "dur"})
    assert b.next().body == "while away"
    b.receipt(b.conn.unsubscribe, id="d", headers={"durable-subscriber-name": "dur"})


def test_bytes_body_with_nul(peers, v):
    q = _q()
    a = peers(v, auto_decode=False)
    a.receipt(a.conn.subscribe, q, "s")
    a.receipt(a.conn.send, q, b"\x00\x01\xff\x00")
    assert a.next().body == b"\x00\x01\xff\x00"


def test_refusals(peers, v, stock):
    a = peers(v)
    a.conn.send("/nowhere/x", "x")
    err = a.errors.get(timeout=WAIT)
    if not stock:  # the stock bridge words it its own way
        assert "/queue/NAME" in err.headers["message"]
    # The connection goes on after a refused operation.
    q = _q()
    a.receipt(a.conn.subscribe, q, "s")
    a.receipt(a.conn.send, q, "fine")
    assert a.next().body == "fine"


def test_hand_written_frames_in_one_write_with_connect(port, stock):
    # A client that writes CONNECT and its next frames at once (`printf ... | nc`): those
    # are read in the version CONNECT agrees, 1.2 here, escapes and spaces included. The
    # stock bridge (1.2 too) reads the escapes so.
    q = _q()
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    s.sendall(
        b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"
        + f"SUBSCRIBE\nid:s\ndestination:{q}\nreceipt:sub\n\n\x00".encode()
        + f"SEND\ndestination:{q}\nx:a\\cb\\\\c\npad: y \nreceipt:sent\n\nhi\x00".encode()
    )
    reader = FrameReader("1.2")
    got: dict[str, Any] = {}
    while not {"MESSAGE", "RECEIPT"} <= set(got) or len(got.get("RECEIPT", [])) < 2:
        chunk = s.recv(65536)
        assert chunk, f"closed: {got}"
        for f in reader.feed(chunk):
            got.setdefault(f.command, []).append(f)
    (m,) = got["MESSAGE"]
    assert (m.body, m.get("x")) == (b"hi", "a:b\\c")
    if not stock:  # it trims 1.2's values too (docs/reference/stomp.md)
        assert m.get("pad") == " y "
    s.sendall(b"DISCONNECT\nreceipt:bye\n\n\x00")
    s.close()


def test_wrong_passcode(port, stock):
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    s.sendall(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:wrong\n\n\x00")
    data = _until_error(s, stock)
    assert data.startswith(b"ERROR\n")
    if not stock:  # its own wording (and a Java stack trace) on the stock bridge
        assert b"authentication failed" in data


def test_garbage_gets_an_error_and_others_are_served(peers, port, stock):
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00")
    data = _until_error(s, stock)
    assert data.startswith(b"ERROR\n")
    if not stock:
        assert b"unknown command" in data
    a = peers("1.0" if stock else "1.1")
    q = _q()
    a.receipt(a.conn.subscribe, q, "s")
    a.receipt(a.conn.send, q, "still served")
    assert a.next().body == "still served"


def _until_error(s: socket.socket, stock: bool) -> bytes:
    """The ERROR frame: ours closes the connection after it; the stock bridge leaves it
    open (docs/reference/stomp.md), so there the frame's NUL ends the read."""
    if not stock:
        return _until_closed(s)
    data = b""
    while b"\x00" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _until_closed(s: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_silent_heart_beating_client_dropped_and_its_messages_redelivered(peers, port, stock):
    differs_on_stock(stock, "it answers heart-beat:0,0 (docs/reference/stomp.md)")
    q = _q()
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    s.sendall(
        b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nheart-beat:500,0\n\n\x00"
        + f"SUBSCRIBE\nid:s\ndestination:{q}\nack:client-individual\n\n\x00".encode()
    )
    p = peers("1.2")
    p.receipt(p.conn.send, q, "held")
    seen = b""
    while b"held\x00" not in seen:
        chunk = s.recv(65536)
        assert chunk, f"closed before the message came: {seen!r}"
        seen += chunk
    assert seen.startswith(b"CONNECTED\n") and b"heart-beat:" in seen
    # It promised a beat every 500 ms and now says nothing: the broker drops it.
    rest = _until_closed(s)
    assert b"ERROR\n" in rest and b"heart-beat" in rest
    b = peers("1.2")
    b.receipt(b.conn.subscribe, q, "t", ack="client-individual")
    m = b.next()
    assert (m.body, m.headers["redelivered"]) == ("held", "true")
    b.ack(m)


def test_imqcmd_lists_the_service_and_its_connections(stomp_b, peers, tmp_path, stock):
    differs_on_stock(
        stock, "the stomp connection service imqcmd lists is ours (docs/reference/stomp.md)"
    )
    from .test_imqcmd import run_imqcmd

    b, port = stomp_b
    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    peers("1.2")
    svc = run_imqcmd(b, "list", "svc", passfile=passfile)
    assert svc.returncode == 0, svc.stderr
    row = next((line for line in svc.stdout.splitlines() if line.split()[:1] == ["stomp"]), "")
    assert str(port) in row.split(), svc.stdout
    cxn = run_imqcmd(b, "list", "cxn", "-svn", "stomp", passfile=passfile)
    assert cxn.returncode == 0, cxn.stderr
    assert any("guest" in line.split() for line in cxn.stdout.splitlines()), cxn.stdout


def test_a_dynamic_stomp_port_stays_dynamic_through_stop_and_start(tmp_path, stock):
    """imq.bridge.stomp.tcp.port=0: imqbridgemgr stop and start listen again on the port
    it had, and imqcmd lists it as dynamic all along (it said static after a start)."""
    differs_on_stock(
        stock, "the stomp connection service imqcmd lists is ours (docs/reference/stomp.md)"
    )
    import io

    from broker.admintools import bridgemgr
    from broker.launcher import start_broker

    from .test_imqcmd import run_imqcmd

    (tmp_path / "b").mkdir()
    b = start_broker(
        tmp_path / "b",
        "imq.bridge.enabled=true",
        "imq.bridge.activelist=stomp",
        "imq.bridge.stomp.tcp.port=0",
    )
    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")

    def listed() -> list[str]:
        svc = run_imqcmd(b, "list", "svc", passfile=passfile)
        assert svc.returncode == 0, svc.stderr
        return next(line.split() for line in svc.stdout.splitlines() if line.startswith("stomp"))

    def bridge(command: str) -> None:
        opts = bridgemgr.Options(command, "bridge", host=b.host, port=b.portmapper_port)
        opts.password, opts.bridge_name, opts.force = "admin", "stomp", True
        out, err = io.StringIO(), io.StringIO()
        assert bridgemgr.run(opts, out, err) == 0, (out.getvalue(), err.getvalue())

    try:
        name, port, kind, state = listed()
        assert (kind, state) == ("(dynamic)", "RUNNING") and int(port) > 0
        bridge("stop")
        assert listed() == ["stomp", port, "(dynamic)", "STOPPED"]
        bridge("start")
        assert listed() == ["stomp", port, "(dynamic)", "RUNNING"]
        p = Peer(int(port), "1.2")
        q = _q()
        p.receipt(p.conn.subscribe, q, "s")
        p.receipt(p.conn.send, q, "after start")
        assert p.next().body == "after start"
        p.close()
    finally:
        b.stop()
