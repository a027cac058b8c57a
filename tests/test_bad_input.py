"""Bad input over a real socket: the offending connection is closed with a logged
reason, and a well-behaved client on the same broker keeps working throughout."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

import pytest

from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import build_packet
from broker.protocol.types import FLAG_A, FLAG_Q, PacketType

from .conftest import start_broker
from .wire import Peer, control, login, vector


@pytest.fixture(scope="module")
def b():
    tmp = Path(tempfile.mkdtemp(prefix="imq-bad-"))
    broker = start_broker(tmp)
    yield broker
    broker.stop()
    shutil.rmtree(tmp, ignore_errors=True)


class GoodClient(threading.Thread):
    """Sends a persistent message and receives it back, over and over, until stopped."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(daemon=True)
        self.peer = login(host, port)
        p = self.peer
        self.sid = p.request(
            control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(1)),
            PacketType.CREATE_SESSION_REPLY,
        ).properties["JMQSessionID"]
        dest = {"JMQDestination": "alive", "JMQDestType": JInt(1)}
        p.request(
            control(PacketType.CREATE_DESTINATION, 4, **dest), PacketType.CREATE_DESTINATION_REPLY
        )
        self.pid = p.request(
            control(PacketType.ADD_PRODUCER, 5, JMQSessionID=JLong(self.sid), **dest),
            PacketType.ADD_PRODUCER_REPLY,
        ).properties["JMQProducerID"]
        self.cons = p.request(
            control(
                PacketType.ADD_CONSUMER, 6, JMQSessionID=JLong(self.sid), JMQSize=JInt(100), **dest
            ),
            PacketType.ADD_CONSUMER_REPLY,
        ).properties["JMQConsumerID"]
        p.send(build_packet(PacketType.START))
        self.rounds = 0
        self.error: BaseException | None = None
        self.stop_flag = threading.Event()

    def run(self) -> None:
        n = 100
        try:
            while not self.stop_flag.is_set():
                n += 1
                body = f"alive {n}".encode()
                self.peer.send(
                    build_packet(
                        PacketType.TEXT_MESSAGE,
                        body=body,
                        flags=FLAG_Q | FLAG_A | 4,
                        consumer_id=n,
                        priority=4,
                        fields={1: "alive", 9: self.pid},
                    )
                )
                got_reply = got_msg = False
                while not (got_reply and got_msg):
                    pkt = self.peer.recv()
                    if pkt.type == PacketType.SEND_REPLY:
                        assert pkt.properties["JMQStatus"] == 200
                        got_reply = True
                    elif pkt.type == PacketType.TEXT_MESSAGE:
                        assert pkt.body == body
                        got_msg = True
                        ack = struct.pack(">q", self.cons) + pkt.raw[20:52]
                        self.peer.send(build_packet(PacketType.ACKNOWLEDGE, body=ack))
                    elif pkt.type == PacketType.RESUME_FLOW:
                        continue
                self.rounds += 1
        except BaseException as exc:  # reported by the test
            self.error = exc

    def wait_rounds(self, more: int = 3, timeout: float = 10) -> None:
        target = self.rounds + more
        deadline = time.monotonic() + timeout
        while self.rounds < target and time.monotonic() < deadline and self.error is None:
            time.sleep(0.01)
        assert self.error is None, self.error
        assert self.rounds >= target, "the good client stalled"


@pytest.fixture(scope="module")
def good(b):
    g = GoodClient(b.host, b.jms_port)
    g.start()
    g.wait_rounds()
    yield g
    g.stop_flag.set()
    g.join(5)


def raw_connect(b) -> socket.socket:
    s = socket.create_connection((b.host, b.jms_port), timeout=10)
    return s


def closed(s: socket.socket) -> bool:
    s.settimeout(10)
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def assert_logged_once(b, text: str) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if b.log_text().count(text) >= 1:
            break
        time.sleep(0.05)
    assert b.log_text().count(text) == 1, f"{text!r} logged {b.log_text().count(text)} times"


def test_random_bytes(b, good):
    s = raw_connect(b)
    s.sendall(b"\x13\x37" + os.urandom(300))
    assert closed(s)
    assert_logged_once(b, "bad magic number 0x1337")
    good.wait_rounds()


def test_wrong_magic(b, good):
    raw = bytearray(vector("hello.hex"))
    raw[0:4] = b"\xde\xad\xbe\xef"
    s = raw_connect(b)
    s.sendall(raw)
    assert closed(s)
    assert_logged_once(b, "bad magic number 0xdeadbeef")
    good.wait_rounds()


def test_two_gigabyte_size_field(b, good):
    raw = bytearray(vector("hello.hex"))
    struct.pack_into(">i", raw, 8, 2**31 - 1)
    s = raw_connect(b)
    s.sendall(raw)
    assert closed(s)
    assert_logged_once(b, f"bad packet size {2**31 - 1}")
    good.wait_rounds()


def test_truncated_packet_then_hangup(b, good):
    s = raw_connect(b)
    s.sendall(vector("hello.hex")[:100])
    s.shutdown(socket.SHUT_WR)
    assert closed(s)
    good.wait_rounds()


def test_unknown_packet_type(b, good):
    peer = login(b.host, b.jms_port)
    peer.send(build_packet(99, flags=0x10, consumer_id=7))
    pkt = peer.recv()
    # Unknown type: the broker says why (a reply if it can name one) and says GOODBYE.
    while pkt.type != PacketType.GOODBYE:
        pkt = peer.recv()
    assert "unknown packet type 99" in pkt.properties["JMQGoodbyeReasonString"]
    assert peer.closed_by_peer()
    assert_logged_once(b, "unknown packet type 99")
    good.wait_rounds()


def test_property_of_unknown_type(b, good):
    peer = login(b.host, b.jms_port)
    props = bytes.fromhex("0000000100000001000a") + b"JMQAckMode" + b"\x00\x63" + b"\x00" * 4
    raw = build_packet(PacketType.CREATE_SESSION, raw_props=props, flags=0x10, consumer_id=9)
    peer.send(raw)
    reply = peer.expect(PacketType.CREATE_SESSION_REPLY)
    assert reply.properties["JMQStatus"] == 400
    assert "unknown property type 99" in reply.properties["JMQReason"]
    assert peer.closed_by_peer()
    assert_logged_once(b, "unknown property type 99 for JMQAckMode")
    good.wait_rounds()


def test_packets_before_authentication(b, good):
    peer = Peer(b.host, b.jms_port)
    peer.send(control(PacketType.CREATE_SESSION, 1, JMQAckMode=JInt(1)))
    reply = peer.expect(PacketType.CREATE_SESSION_REPLY)
    assert reply.properties["JMQStatus"] == 500
    assert peer.closed_by_peer()
    # Before AUTHENTICATE too (after HELLO):
    peer = Peer(b.host, b.jms_port)
    peer.send(vector("hello.hex"))
    peer.expect(PacketType.HELLO_REPLY)
    peer.expect(PacketType.AUTHENTICATE_REQUEST)
    peer.send(
        build_packet(
            PacketType.TEXT_MESSAGE,
            flags=FLAG_Q | FLAG_A,
            consumer_id=5,
            fields={1: "alive"},
            body=b"sneaky",
        )
    )
    assert peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"] == 500
    assert peer.closed_by_peer()
    good.wait_rounds()


def test_wrong_password_refused(b, good):
    with pytest.raises(AssertionError):
        login(b.host, b.jms_port, "guest", "wrong")
    assert_logged_once(b, "authentication failed for user guest")
    good.wait_rounds()


def test_protocol_level_negotiation(b):
    from broker.protocol.packet import parse_packet

    for level, status, offered in (
        (600, 505, 500),
        (410, 200, 410),
        (350, 200, 350),
        (100, 505, 350),
    ):
        hello = parse_packet(vector("hello.hex"))
        props = dict(hello.properties)
        props["JMQProtocolLevel"] = JInt(level)
        peer = Peer(b.host, b.jms_port)
        peer.send(build_packet(PacketType.HELLO, props=props, flags=0x10, consumer_id=1))
        reply = peer.expect(PacketType.HELLO_REPLY)
        assert reply.properties["JMQStatus"] == status
        assert reply.properties["JMQProtocolLevel"] == offered
        peer.close()
