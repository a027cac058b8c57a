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
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.properties import encode_properties
from broker.protocol.types import FLAG_A, FLAG_C, FLAG_F, FLAG_Q, FLAG_Z, HEADER_SIZE, PacketType

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
                        # Connection (F) and consumer (C) flow paused: resume both, as a
                        # client does, so the loop outlives the first 100 messages.
                        if pkt.flags & FLAG_F:
                            self.peer.send(build_packet(PacketType.RESUME_FLOW))
                        if pkt.flags & FLAG_C:
                            self.peer.send(
                                control(
                                    PacketType.RESUME_FLOW,
                                    0,
                                    JMQConsumerID=JLong(self.cons),
                                    JMQSize=JInt(100),
                                )
                            )
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


# ---------------------------------------------------------------------------
# Strings that are not (modified) UTF-8: a bad request, never an internal error

BAD_UTF8 = {
    "ff-fe": b"\xff\xfe",
    "lone-continuation": b"ab\x80cd",
    "truncated-3-byte": b"x\xe2\x82",
    "bad-continuation": b"\xe2\x28\xa1",
}


def table_with(props: dict, name: bytes, value: bytes) -> bytes:
    """``props`` encoded as the Java client does, plus one String entry given as raw bytes."""
    good = encode_properties(props)
    entry = struct.pack(">H", len(name)) + name + b"\x00\x08" + struct.pack(">H", len(value))
    return struct.pack(">ii", 1, len(props) + 1) + good[8:] + entry + value


def bad_entry(where: str, bad: bytes, props: dict, prop: str) -> bytes:
    """A property table whose ``prop`` value (``where="value"``) or an extra property's
    name (``where="name"``) is ``bad``."""
    if where == "value":
        return table_with({k: v for k, v in props.items() if k != prop}, prop.encode(), bad)
    return table_with(props, b"JMQ" + bad, b"x")


# Control packets: (type, reply type, properties, the property made bad).
CONTROL = {
    "CREATE_DESTINATION": (
        PacketType.CREATE_DESTINATION,
        {"JMQDestination": "q", "JMQDestType": JInt(1)},
        "JMQDestination",
    ),
    "ADD_CONSUMER": (
        PacketType.ADD_CONSUMER,
        {"JMQDestination": "q", "JMQDestType": JInt(1), "JMQSize": JInt(10)},
        "JMQDestination",
    ),
    "DELETE_PRODUCER": (
        PacketType.DELETE_PRODUCER,
        {"JMQProducerID": JLong(1), "JMQReason": "bye"},
        "JMQReason",
    ),
    "START_TRANSACTION": (
        PacketType.START_TRANSACTION,
        {"JMQSessionID": JLong(1), "JMQUserAgent": "x"},
        "JMQUserAgent",
    ),
}


def peer_name(peer: Peer) -> str:
    host, port = peer.sock.getsockname()[:2]
    return f"{host}:{port}"


def assert_refused_as_bad_request(b, good, peer: Peer, reply: int, why: str) -> None:
    """400 with the reason, GOODBYE and close; one WARNING line naming the peer, no traceback."""
    pkt = peer.expect(reply)
    assert pkt.properties["JMQStatus"] == 400, pkt.properties
    assert why in pkt.properties["JMQReason"], pkt.properties
    goodbye = peer.expect(PacketType.GOODBYE)
    assert why in goodbye.properties["JMQGoodbyeReasonString"]
    assert peer.closed_by_peer()
    assert_logged_once(b, f"from {peer_name(peer)}: malformed ")
    log = b.log_text()
    line = next(x for x in log.splitlines() if f"from {peer_name(peer)}: malformed " in x)
    assert "WARNING" in line and why in line, line
    assert "Traceback" not in log
    assert "internal error" not in log
    good.wait_rounds()


@pytest.mark.parametrize("where", ["name", "value"])
@pytest.mark.parametrize("bad", BAD_UTF8.values(), ids=BAD_UTF8.keys())
def test_bad_utf8_in_hello(b, good, bad, where):
    hello = parse_packet(vector("hello.hex"))
    props = dict(hello.properties)
    props.setdefault("JMQUserAgent", "x")
    peer = Peer(b.host, b.jms_port)
    peer.send(
        build_packet(
            PacketType.HELLO,
            raw_props=bad_entry(where, bad, props, "JMQUserAgent"),
            flags=hello.flags,
            consumer_id=hello.consumer_id,
        )
    )
    assert_refused_as_bad_request(b, good, peer, PacketType.HELLO_REPLY, "not valid modified UTF-8")


@pytest.mark.parametrize("where", ["name", "value"])
@pytest.mark.parametrize("bad", BAD_UTF8.values(), ids=BAD_UTF8.keys())
@pytest.mark.parametrize("kind", CONTROL)
def test_bad_utf8_in_control_packet(b, good, kind, bad, where):
    ptype, props, prop = CONTROL[kind]
    peer = login(b.host, b.jms_port)
    peer.send(
        build_packet(ptype, raw_props=bad_entry(where, bad, props, prop), flags=0x10, consumer_id=9)
    )
    assert_refused_as_bad_request(b, good, peer, ptype + 1, "not valid modified UTF-8")


def message_with_bad_field(ptype: int, tag: int, bad: bytes, body: bytes) -> bytes:
    """A message whose variable-header string ``tag`` holds ``bad`` (lengths kept right)."""
    marker = "~" * len(bad)
    fields = {1: "alive", 9: 1, 6: "com.sun.messaging.BasicQueue"}
    fields[tag] = marker
    raw = bytearray(
        build_packet(ptype, fields=fields, body=body, flags=FLAG_Q | FLAG_A, consumer_id=11)
    )
    at = raw.index(marker.encode(), HEADER_SIZE)
    raw[at : at + len(bad)] = bad
    return bytes(raw)


@pytest.mark.parametrize("tag", [1, 5], ids=["destination", "JMSType"])
@pytest.mark.parametrize("bad", BAD_UTF8.values(), ids=BAD_UTF8.keys())
def test_bad_utf8_in_message_header(b, good, bad, tag):
    peer = login(b.host, b.jms_port)
    peer.send(message_with_bad_field(PacketType.TEXT_MESSAGE, tag, bad, b"hello"))
    assert_refused_as_bad_request(b, good, peer, PacketType.SEND_REPLY, "not valid modified UTF-8")


@pytest.mark.parametrize("where", ["name", "value"])
@pytest.mark.parametrize("bad", BAD_UTF8.values(), ids=BAD_UTF8.keys())
@pytest.mark.parametrize("ptype", [PacketType.OBJECT_MESSAGE, PacketType.TEXT_MESSAGE])
def test_bad_utf8_in_message_properties(b, good, ptype, bad, where):
    body = parse_packet(vector("send-messages/c2b-16-OBJECT_MESSAGE.hex")).body
    peer = login(b.host, b.jms_port)
    peer.send(
        build_packet(
            ptype,
            fields={1: "alive", 9: 1},
            raw_props=bad_entry(where, bad, {"color": "red", "n": JInt(3)}, "color"),
            body=body if ptype == PacketType.OBJECT_MESSAGE else b"hi",
            flags=FLAG_Q | FLAG_A,
            consumer_id=12,
        )
    )
    assert_refused_as_bad_request(b, good, peer, PacketType.SEND_REPLY, "not valid modified UTF-8")


def test_bad_utf8_message_without_reply_flag_is_closed(b, good):
    peer = login(b.host, b.jms_port)
    raw = bytearray(message_with_bad_field(PacketType.TEXT_MESSAGE, 1, b"\xff\xfe", b"x"))
    struct.pack_into(">H", raw, 62, FLAG_Q)
    peer.send(bytes(raw))
    goodbye = peer.expect(PacketType.GOODBYE)
    assert "not valid modified UTF-8" in goodbye.properties["JMQGoodbyeReasonString"]
    assert peer.closed_by_peer()
    assert_logged_once(b, f"from {peer_name(peer)}: malformed TEXT_MESSAGE")
    assert "Traceback" not in b.log_text()
    good.wait_rounds()


def test_bad_utf8_in_authentication_body_is_refused(b, good):
    from broker.protocol.auth import encode_auth_body

    peer = Peer(b.host, b.jms_port)
    peer.send(vector("hello.hex"))
    peer.expect(PacketType.HELLO_REPLY)
    req = peer.expect(PacketType.AUTHENTICATE_REQUEST)
    body = struct.pack(">H", 2) + b"\xff\xfe" + encode_auth_body("", "x")[2:]
    peer.send(
        build_packet(
            PacketType.AUTHENTICATE,
            props={"JMQAuthType": req.properties["JMQAuthType"]},
            body=body,
            flags=0x10,
            consumer_id=2,
        )
    )
    reply = peer.expect(PacketType.AUTHENTICATE_REPLY)
    assert reply.properties["JMQStatus"] == 413  # INVALID_LOGIN
    assert peer.closed_by_peer()
    assert_logged_once(b, f"from {peer_name(peer)}: malformed authentication body")
    assert "Traceback" not in b.log_text()
    good.wait_rounds()


def test_unpaired_surrogate_is_accepted_as_java_does(b, good):
    # Java's writeUTF writes a lone surrogate char as a 3-byte sequence and readUTF reads
    # it back: valid modified UTF-8, so not a bad request.
    peer = login(b.host, b.jms_port)
    peer.request(
        build_packet(
            PacketType.CREATE_DESTINATION,
            raw_props=table_with({"JMQDestType": JInt(1)}, b"JMQDestination", b"sur\xed\xa0\x80"),
            flags=0x10,
            consumer_id=13,
        ),
        PacketType.CREATE_DESTINATION_REPLY,
    )
    peer.close()
    assert "Traceback" not in b.log_text()
    good.wait_rounds()


def test_admin_request_with_bad_strings(b, good):
    from .test_admin_protocol import AdminSession

    # A body that does not inflate: the admin reply says 400; the connection goes on.
    admin = AdminSession(b)
    t = admin.template
    admin.peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE,
            props={"JMQMessageType": JInt(56)},  # UPDATE_BROKER_PROPS
            fields=t.fields,
            flags=t.flags | FLAG_Z,
            body=b"\xff\xfe not zlib",
        )
    )
    reply = admin.reply(57, status=400)
    assert "bad compressed body" in reply.properties["JMQErrorString"]
    admin.peer.send(admin.hello_request)
    admin.reply(29)
    # A property name that is not modified UTF-8: 400, GOODBYE and close.
    admin.peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE,
            raw_props=bad_entry("name", b"\xff\xfe", {"JMQMessageType": JInt(28)}, ""),
            fields=t.fields,
            flags=t.flags | FLAG_A,
            consumer_id=21,
        )
    )
    assert_refused_as_bad_request(
        b, good, admin.peer, PacketType.SEND_REPLY, "not valid modified UTF-8"
    )
