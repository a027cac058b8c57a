"""A raw-socket peer for wire tests: sends captured client packets, reads replies.

Deliberately not the product's client library: these tests replay the bytes the
stock OpenMQ Java and C clients wrote, so our broker is checked against them and
not against a second copy of our own assumptions.
"""

from __future__ import annotations

import socket
import struct

from broker.protocol.jtypes import JLong
from broker.protocol.packet import (
    HEADER_SIZE,
    OFF_PROP_OFFSET,
    OFF_SIZE,
    Packet,
    PacketReader,
    build_packet,
    encode_fields,
    parse_packet,
)
from broker.protocol.properties import encode_properties
from broker.protocol.types import PacketType

from .vectors import vector

__all__ = ["vector"]


def rewrite(raw: bytes, ids: dict[int, int], body: bytes | None = None) -> bytes:
    """Replace ids the capture's stand-in handed out with the ones our broker gave.

    Properties and variable-header longs are re-encoded; header bytes 0-71 (message id,
    flags, correlation id) stay exactly as the real client wrote them.
    """
    pkt = parse_packet(raw)
    props = {
        k: (JLong(ids.get(int(v), int(v))) if type(v) is JLong else v)
        for k, v in pkt.properties.items()
    }
    fields = {k: (ids.get(v, v) if k in (8, 9) else v) for k, v in pkt.fields.items()}
    vh = encode_fields(fields) if pkt.prop_offset > HEADER_SIZE else b""
    if pkt.prop_offset > HEADER_SIZE and not fields:
        vh = raw[HEADER_SIZE : pkt.prop_offset]  # the C client's empty list, kept as sent
    pr = encode_properties(props) if pkt.prop_size else b""
    b = pkt.body if body is None else body
    head = bytearray(raw[:HEADER_SIZE])
    struct.pack_into(">i", head, OFF_PROP_OFFSET, HEADER_SIZE + len(vh))
    struct.pack_into(">i", head, OFF_PROP_OFFSET + 4, len(pr))
    struct.pack_into(">i", head, OFF_SIZE, HEADER_SIZE + len(vh) + len(pr) + len(b))
    return bytes(head) + vh + pr + b


class Peer:
    """A TCP connection speaking raw packets."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.reader = PacketReader()
        self.pending: list[Packet] = []

    def send(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def recv(self) -> Packet:
        while not self.pending:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("broker closed the connection")
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def expect(self, ptype: int) -> Packet:
        pkt = self.recv()
        while pkt.type == PacketType.INFO and ptype != PacketType.INFO:
            # An HA broker tells its clients of a changed broker list at any time (cluster
            # INFO); the stock client takes it in its reader thread, between replies.
            pkt = self.recv()
        assert pkt.type == ptype, f"expected {PacketType(ptype).name}, got {pkt!r} {pkt.properties}"
        return pkt

    def request(self, raw: bytes, reply: int, status: int = 200) -> Packet:
        self.send(raw)
        pkt = self.expect(reply)
        assert pkt.properties["JMQStatus"] == status, pkt.properties
        assert pkt.consumer_id == parse_packet(raw).consumer_id
        return pkt

    def closed_by_peer(self) -> bool:
        """True once the broker has closed (any packets before that are drained)."""
        try:
            while True:
                data = self.sock.recv(1 << 16)
                if not data:
                    return True
                try:
                    self.pending.extend(self.reader.feed(data))
                except ValueError:
                    pass
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def control(ptype: int, cid: int, **props) -> bytes:
    """A request packet with the A flag, as a Java client would write it."""
    return build_packet(ptype, props=props, flags=0x10, consumer_id=cid)


def login(host: str, port: int, user: str = "guest", password: str = "guest") -> Peer:
    """Handshake with the Java client's HELLO and whichever auth type the broker asks for."""
    from broker.protocol.auth import encode_auth_body, encode_basic_password
    from broker.security.digest import digest_response, md5str

    peer = Peer(host, port)
    peer.send(vector("hello.hex"))
    peer.expect(PacketType.HELLO_REPLY)
    req = peer.expect(PacketType.AUTHENTICATE_REQUEST)
    kind = req.properties["JMQAuthType"]
    if kind == "basic":
        cred = encode_basic_password(password)
    else:
        cred = digest_response(md5str(f"{user}:{password}"), req.body.decode("ascii"))
    auth = build_packet(
        PacketType.AUTHENTICATE,
        props={"JMQAuthType": kind},
        body=encode_auth_body(user, cred),
        flags=0x10,
        consumer_id=2,
    )
    peer.request(auth, PacketType.AUTHENTICATE_REPLY)
    return peer
