"""The HTTP tunnel's codec, HTTP reader and per-connection stream, in process: packet
bytes in, packets and JMQ bytes out (broker/protocol/httptunnel.py, http1.py,
broker/engine/tunnel.py).  The stock client through a real broker is
tests/interop/test_java_tunnel.py."""

from __future__ import annotations

import struct

import pytest

from broker.engine.tunnel import INITIAL_RTO, RX_WINDOW, TunnelConnection
from broker.protocol.errors import ProtocolError
from broker.protocol.http1 import HttpError, RequestReader, response
from broker.protocol.httptunnel import (
    MAX_DATA,
    SEQ_MOD,
    ConnOption,
    TunnelPacket,
    TunnelType,
    decode_option,
    decode_packets,
    encode_option,
    parse_request,
)

pytestmark = pytest.mark.fast

T = TunnelType


def header(ptype=4, size=24, version=100, conn=1, seq=0, win=0) -> bytes:
    return struct.pack(">hhiiihhi", version, ptype, size, conn, seq, win, 0, 0)


# -- codec -----------------------------------------------------------------------


def test_packet_layout_and_round_trip():
    raw = TunnelPacket(T.DATA, 5, 9, 63, b"abc").encode()
    # version 100, type 4, size 27, conn 5, seq 9, window 63, reserved 0, checksum 0
    assert raw == header(4, 27, conn=5, seq=9, win=63) + b"abc"
    assert decode_packets(raw + TunnelPacket(T.ACK, 5, 9, 1).encode()) == [
        TunnelPacket(T.DATA, 5, 9, 63, b"abc"),
        TunnelPacket(T.ACK, 5, 9, 1, b""),
    ]


def test_sequence_numbers_are_java_ints():
    raw = TunnelPacket(T.ACK, 1, SEQ_MOD - 1).encode()
    assert struct.unpack_from(">i", raw, 12)[0] == -1  # written as Java writes -1
    assert decode_packets(raw)[0].seq == SEQ_MOD - 1


@pytest.mark.parametrize(
    "data, why",
    [
        (b"", "empty"),
        (header()[:23], "truncated tunnel packet header"),
        (header(version=101), "version 101"),
        (header(size=10), "less than its header"),
        (header(size=24 + 70000), "data bytes"),
        (header(size=30) + b"xx", "cut short"),
        (header() + b"\x00", "truncated"),
    ],
)
def test_bad_packets_are_protocol_errors(data, why):
    with pytest.raises(ProtocolError, match=why):
        decode_packets(data)


def test_options_and_requests():
    assert decode_option(encode_option(ConnOption.CONNECTION_TIMEOUT, 300)) == (2, 300)
    with pytest.raises(ProtocolError):
        decode_option(b"\x00\x00")
    r = parse_request("Type=pull&ConnId=-5&ServerName=vm:imqbroker")
    assert (r.type, r.conn_id, r.server_name) == ("pull", SEQ_MOD - 5, "vm:imqbroker")
    assert parse_request("").type == ""
    for bad in ("Type=teleport", "Type=pull", "Type=pull&ConnId=x", "Type=push&ServerName=%ff"):
        with pytest.raises(ProtocolError):
            parse_request(bad)


def test_http_reader():
    reader = RequestReader(max_body=100)
    body = TunnelPacket(T.CONN_INIT).encode()
    raw = (
        b"POST /imq/tunnel?Type=connect HTTP/1.1\r\nContent-Type: application/octet-stream\r\n"
        b"Content-Length: 24\r\n\r\n"
        + body
        + b"GET /imq/tunnel?Type=pull&ConnId=1 HTTP/1.1\r\n\r\n"
    )
    got = []
    for i in range(0, len(raw), 7):  # as TCP may cut it
        got += reader.feed(raw[i : i + 7])
    assert [(r.method, r.path, r.query, r.body) for r in got] == [
        ("POST", "/imq/tunnel", "Type=connect", body),
        ("GET", "/imq/tunnel", "Type=pull&ConnId=1", b""),
    ]
    assert got[0].keep_alive
    for bad, status in [
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
        (b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413),
        (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"HELLO\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nbad header\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 20000, 431),
    ]:
        with pytest.raises(HttpError) as e:
            RequestReader(max_body=100).feed(bad)
        assert e.value.status == status
    assert response(200, b"ab").endswith(b"Content-Length: 2\r\nCache-Control: no-cache\r\n"
                                         b"Connection: keep-alive\r\n\r\nab")  # fmt: skip


# -- the stream --------------------------------------------------------------------


def opened(now=0.0, **kw) -> TunnelConnection:
    """A connection past CONN_INIT_ACK and the option packets (acknowledged)."""
    c = TunnelConnection(7, now, **kw)
    assert [p.type for p in c.take_pull(now, 1 << 20)] == [T.CONN_INIT_ACK]
    opts = c.take_pull(now, 1 << 20)
    assert all(p.type == T.CONN_OPTION for p in opts)
    c.receive(TunnelPacket(T.ACK, 7, opts[-1].seq, 63), now)
    return c


def data(seq, body=b"x", conn=7) -> TunnelPacket:
    return TunnelPacket(T.DATA, conn, seq, 0, body)


def test_connection_start_sends_init_ack_alone_then_options():
    c = TunnelConnection(7, 0.0, pull_period=5, connection_timeout=30)
    c.send(b"early")
    assert c.take_pull(0.0, 1 << 20) == [TunnelPacket(T.CONN_INIT_ACK, 7)]
    first = c.take_pull(0.0, 1 << 20)
    assert [(p.type, p.seq, decode_option(p.body)) for p in first[:2]] == [
        (T.CONN_OPTION, 0, (1, 5)),
        (T.CONN_OPTION, 1, (2, 30)),
    ]
    assert (first[2].type, first[2].seq, first[2].body) == (T.DATA, 2, b"early")
    # Without a pull period only the timeout is told (the client's default is -1).
    c2 = TunnelConnection(8, 0.0)
    c2.take_pull(0.0, 100)
    assert [decode_option(p.body) for p in c2.take_pull(0.0, 100)] == [(2, 300)]


def test_receive_in_order_out_of_order_and_duplicates():
    c = opened()
    c.receive(data(0, b"a"), 1.0)
    c.receive(data(2, b"c"), 1.0)  # early: waits for 1
    assert c.take_inbox() == b"a"
    c.receive(data(1, b"b"), 1.0)
    assert c.take_inbox() == b"bc"
    c.receive(data(1, b"b"), 1.0)  # a retransmission already had
    assert c.take_inbox() == b""
    acks = [p for p in c.take_pull(1.0, 1 << 20) if p.type == T.ACK]
    assert [(a.seq, a.winsize) for a in acks] == [(2, RX_WINDOW)]  # one, the latest
    c.receive(data(RX_WINDOW + 10), 1.0)  # beyond the window: dropped
    assert c.take_inbox() == b""
    assert c.next_recv == 3


def test_paused_reading_shrinks_the_window():
    c = opened()
    c.reading_paused = True
    for seq in range(RX_WINDOW):
        c.receive(data(seq), 1.0)
    assert c.take_inbox() == b""
    (ack,) = [p for p in c.take_pull(1.0, 1 << 20) if p.type == T.ACK]
    assert (ack.seq, ack.winsize) == (RX_WINDOW - 1, 0)
    c.receive(data(RX_WINDOW), 1.0)  # no room: not taken
    c.take_pull(1.0, 1 << 20)
    c.reading_paused = False
    assert c.take_inbox() == b"x" * RX_WINDOW
    (update,) = c.take_pull(1.0, 1 << 20)  # the window reopens
    assert (update.type, update.winsize) == (T.ACK, RX_WINDOW)


def test_send_respects_window_and_acks():
    c = opened()
    c.receive(TunnelPacket(T.ACK, 7, 0, 4), 0.0)  # the client has room for 4
    c.send(b"y" * (MAX_DATA * 10 + 1))
    first = c.take_pull(1.0, 1 << 20)
    assert [p.seq for p in first] == [1, 2, 3, 4]
    assert all(len(p.body) == MAX_DATA for p in first)
    assert not c.has_output()
    c.receive(TunnelPacket(T.ACK, 7, 2, 4), 1.5)
    assert [p.seq for p in c.take_pull(2.0, 1 << 20)] == [5, 6]
    c.receive(TunnelPacket(T.ACK, 7, 6, 64), 2.5)
    rest = c.take_pull(3.0, 1 << 20)
    assert [p.seq for p in rest] == [7, 8, 9, 10, 11]
    assert len(rest[-1].body) == 1
    assert c.bytes_out == MAX_DATA * 10 + 1
    # A small budget still sends one packet per pull.
    c.send(b"z" * MAX_DATA * 2)
    assert len(c.take_pull(3.0, 10)) == 1


def test_retransmission_on_timer_and_duplicate_acks():
    c = opened()
    c.send(b"a" * (MAX_DATA * 3))
    sent = c.take_pull(10.0, 1 << 20)
    assert [p.seq for p in sent] == [1, 2, 3]
    # The option packets' quick ACK already brought the timeout down from 15 s.
    assert c.rto < INITIAL_RTO
    assert not c.tick(10.0 + c.rto - 0.5)
    assert c.tick(10.0 + c.rto)
    # Everything unacknowledged again (a lost pull answer loses all it carried).
    assert [p.seq for p in c.take_pull(30.0, 1 << 20)] == [1, 2, 3]
    for _ in range(3):  # the client got 2 and 3 but not 1: it repeats its ACK of 0
        c.receive(TunnelPacket(T.ACK, 7, 0, 63), 31.0)
    assert [p.seq for p in c.take_pull(31.0, 1 << 20)] == [1]
    c.receive(TunnelPacket(T.ACK, 7, 3, 63), 32.0)
    assert not c.has_output() and not c.tick(1000.0)
    assert c.retransmits == 2


def test_sequence_numbers_wrap():
    c = opened()
    c.next_recv = SEQ_MOD - 1
    c.receive(data(SEQ_MOD - 1, b"a"), 1.0)
    c.receive(data(0, b"b"), 1.0)
    assert c.take_inbox() == b"ab"
    c.next_send = c.last_ack = SEQ_MOD - 1
    c.last_ack = SEQ_MOD - 2
    c.send(b"q" * (MAX_DATA + 1))
    assert [p.seq for p in c.take_pull(2.0, 1 << 20) if p.type == T.DATA] == [SEQ_MOD - 1, 0]
    c.receive(TunnelPacket(T.ACK, 7, 0, 64), 3.0)
    assert c.unacked_bytes == 0


def test_broker_close_then_client_ack():
    c = opened()
    c.send(b"goodbye")
    c.close()
    c.send(b"ignored after close")
    out = c.take_pull(1.0, 1 << 20)
    assert [(p.type, p.body) for p in out] == [(T.DATA, b"goodbye"), (T.CONN_CLOSE, b"")]
    assert not c.finished
    c.receive(TunnelPacket(T.ACK, 7, out[-1].seq, 63), 2.0)
    assert c.finished


def test_client_close():
    c = opened()
    c.send(b"unsent")
    c.receive(data(0, b"last"), 1.0)
    c.receive(TunnelPacket(T.CONN_CLOSE, 7, 1), 1.0)
    assert c.peer_closed and c.take_inbox() == b"last"
    out = c.take_pull(1.0, 1 << 20)
    assert [(p.type, p.seq) for p in out] == [(T.ACK, 1)]  # the client reads no more data
    assert c.finished
    c.receive(data(2), 1.0)  # after the close: nothing more is taken
    assert c.take_inbox() == b""


def test_idle_limit():
    c = opened(now=0.0, connection_timeout=3)
    c.request_started(1.0)
    assert not c.expired(100.0)  # a pull is held: the client is there
    c.request_ended(10.0)
    assert not c.expired(13.0) and c.expired(13.5)
    polling = opened(now=0.0, connection_timeout=3, pull_period=2)
    assert polling.idle_limit == 10  # five pull periods: it comes back only every 2 s
    assert TunnelConnection(9, 0.0, connection_timeout=0).idle_limit == 60


def test_ignores_packets_it_does_not_take():
    c = opened()
    for ptype in (T.NO_OP, T.DUMMY, T.LINK_INIT, 77):
        c.receive(TunnelPacket(ptype, 7), 1.0)
    assert c.take_inbox() == b"" and not c.has_output()
    # A client option (pull period) takes a sequence number and changes the period.
    c.receive(TunnelPacket(T.CONN_OPTION, 7, 0, 0, encode_option(ConnOption.PULL_PERIOD, 9)), 1)
    c.receive(TunnelPacket(T.CONN_OPTION, 7, 1, 0, b"\x00"), 1.0)  # unreadable: skipped
    assert c.pull_period == 9 and c.next_recv == 2
