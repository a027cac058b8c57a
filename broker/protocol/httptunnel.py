"""OpenMQ's HTTP tunnel packets (the ``httpjms`` / ``httpsjms`` services), sans-IO.

The stock client (``imqConnectionType=HTTP``) carries its JMQ byte stream in tunnel
packets: one per HTTP POST (``?Type=push``, ``?Type=connect``), and any number back in
the body of a long-held GET (``?Type=pull``).  Each packet is a 24-byte big-endian
header and a body:

    version (short, 100)   packet type (short)   packet size (int, header included)
    connection id (int)    sequence (int)        window size (short)
    reserved (short)       checksum (int, always 0)

Sequence numbers are Java ints (they wrap at 2**31 to negative values); this module
hands them out as unsigned 32-bit numbers and writes them back signed.  Decoders raise
only :class:`ProtocolError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from urllib.parse import parse_qs

from .errors import ProtocolError

__all__ = [
    "HEADER",
    "MAX_DATA",
    "SEQ_MOD",
    "VERSION",
    "ConnOption",
    "TunnelPacket",
    "TunnelType",
    "TunnelRequest",
    "decode_option",
    "decode_packets",
    "encode_option",
    "parse_request",
]

VERSION = 100
HEADER = 24
# The client cuts its writes into packets of at most this many bytes (MAX_PACKETSIZE).
MAX_DATA = 8192
# What a packet from a client may carry: a generous bound over MAX_DATA, so a garbage
# size field is refused before anything is allocated for it.
MAX_ACCEPTED_DATA = 64 * 1024
SEQ_MOD = 1 << 32

_HEADER = struct.Struct(">hhiiihhi")


class TunnelType(IntEnum):
    """Packet types (HttpTunnelDefaults)."""

    CONN_INIT = 1
    CONN_INIT_ACK = 2
    CONN_REJECTED = 3
    DATA = 4
    CONN_CLOSE = 5
    ACK = 6
    CONN_SHUTDOWN = 7
    LINK_INIT = 8
    CONN_ABORT = 9
    CONN_OPTION = 10
    LISTEN_STATE = 11
    NO_OP = 12
    DUMMY = 100


class ConnOption(IntEnum):
    """What a CONN_OPTION packet sets (its body: option int, value int)."""

    PULL_PERIOD = 1
    CONNECTION_TIMEOUT = 2


@dataclass(slots=True)
class TunnelPacket:
    """One tunnel packet; ``seq`` is unsigned (0 .. 2**32-1)."""

    type: int
    conn_id: int = 0
    seq: int = 0
    winsize: int = 0
    body: bytes = b""

    def encode(self) -> bytes:
        seq = self.seq % SEQ_MOD
        if seq >= 1 << 31:
            seq -= SEQ_MOD
        conn_id = self.conn_id if self.conn_id < 1 << 31 else self.conn_id - SEQ_MOD
        head = _HEADER.pack(
            VERSION,
            self.type,
            HEADER + len(self.body),
            conn_id,
            seq,
            max(min(self.winsize, 32767), 0),
            0,
            0,
        )
        return head + self.body if self.body else head


def decode_packets(data: bytes, max_data: int = MAX_ACCEPTED_DATA) -> list[TunnelPacket]:
    """Every packet of an HTTP body (one or more, back to back); a body that is not
    whole packets raises :class:`ProtocolError`."""
    out: list[TunnelPacket] = []
    view = memoryview(data)
    pos, end = 0, len(data)
    if end == 0:
        raise ProtocolError("empty tunnel request body")
    while pos < end:
        if end - pos < HEADER:
            raise ProtocolError(f"truncated tunnel packet header ({end - pos} of {HEADER} bytes)")
        version, ptype, size, conn_id, seq, winsize, _reserved, _checksum = _HEADER.unpack_from(
            view, pos
        )
        if version != VERSION:
            raise ProtocolError(f"tunnel packet version {version}, expected {VERSION}")
        if size < HEADER:
            raise ProtocolError(f"tunnel packet size {size} is less than its header")
        if size - HEADER > max_data:
            raise ProtocolError(f"tunnel packet of {size - HEADER} data bytes (at most {max_data})")
        if pos + size > end:
            raise ProtocolError(f"tunnel packet of {size} bytes cut short at {end - pos}")
        out.append(
            TunnelPacket(
                ptype,
                conn_id % SEQ_MOD,
                seq % SEQ_MOD,
                winsize,
                bytes(view[pos + HEADER : pos + size]),
            )
        )
        pos += size
    return out


def encode_option(option: ConnOption, value: int) -> bytes:
    """A CONN_OPTION body."""
    return struct.pack(">ii", int(option), value)


def decode_option(body: bytes) -> tuple[int, int]:
    """A CONN_OPTION body as (option, value)."""
    if len(body) < 8:
        raise ProtocolError(f"connection option of {len(body)} bytes (needs 8)")
    option, value = struct.unpack_from(">ii", body)
    return option, value


@dataclass(slots=True)
class TunnelRequest:
    """What an HTTP request's query string asks of the tunnel."""

    type: str  # connect, push, pull, or "" (no Type: the servlet's test page)
    conn_id: int | None = None
    server_name: str | None = None


def parse_request(query: str) -> TunnelRequest:
    """The query string of a tunnel request (``Type=pull&ConnId=12&ServerName=h:b``)."""
    try:
        q = parse_qs(query, keep_blank_values=True, strict_parsing=False, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"unreadable query string: {exc}") from None
    kind = (q.get("Type") or [""])[0]
    if kind not in ("", "connect", "push", "pull"):
        raise ProtocolError(f"unknown tunnel request type {kind!r}")
    conn_id: int | None = None
    raw = q.get("ConnId")
    if raw is not None:
        try:
            conn_id = int(raw[0]) % SEQ_MOD
        except ValueError:
            raise ProtocolError(f"ConnId {raw[0]!r} is not a number") from None
    if kind == "pull" and conn_id is None:
        raise ProtocolError("pull request without ConnId")
    names = q.get("ServerName")
    server = names[0] if names else None
    return TunnelRequest(kind, conn_id, server)
