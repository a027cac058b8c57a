"""SysMessageID: the 32 bytes that name a message (timestamp, IP, port, sequence).

The broker treats the marshalled 32 bytes as the message's key (they are what
ACKNOWLEDGE blocks carry), and only builds the string form for people and logs.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from typing import NamedTuple

from .errors import ProtocolError

SYSMSGID_SIZE = 32
_STRUCT = struct.Struct(">q16sii")

IP_ZERO = b"\x00" * 10 + b"\xff\xff" + b"\x00" * 4
_V4_MAPPED_PREFIX = b"\x00" * 10 + b"\xff\xff"


def ipv4_mapped(address: str) -> bytes:
    """The 16-byte field for an IPv4 address (``::ffff:a.b.c.d``)."""
    return _V4_MAPPED_PREFIX + ipaddress.IPv4Address(address).packed


def ip_field(address: str | None) -> bytes:
    """The 16-byte IP field for a textual IPv4 or IPv6 address (zero when unknown)."""
    if not address:
        return IP_ZERO
    ip = ipaddress.ip_address(address)
    if ip.version == 4:
        return _V4_MAPPED_PREFIX + ip.packed
    return ip.packed


def ip_to_string(ip: bytes) -> str:
    """The string form OpenMQ prints for the IP field (docs/developers/protocol.md)."""
    if len(ip) != 16:
        raise SysMessageIDError(f"an IP field has 16 bytes, not {len(ip)}")
    if ip[:12] == _V4_MAPPED_PREFIX:
        return ".".join(str(b) for b in ip[12:])
    if ip[0] == 0xFF and ip[10:12] == b"\xff\xff":
        mac = ":".join(format(b, "x") for b in ip[4:10])
        return ".".join(str(b) for b in ip[12:]) + f"({mac})"
    groups = struct.unpack(">8H", ip)
    return ":".join(format(g, "x") for g in groups)


# A broker sees few distinct addresses: their text is made once (message ids of logs,
# selectors and reports' correlation ids).
_ip_text = functools.lru_cache(maxsize=1024)(ip_to_string)


class SysMessageIDError(ProtocolError):
    """Bytes too short for a marshalled SysMessageID or an IP field."""


class SysMessageID(NamedTuple):
    """A decoded SysMessageID."""

    timestamp: int
    ip: bytes
    port: int
    sequence: int

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, offset: int = 0) -> SysMessageID:
        """Unmarshal 32 bytes starting at ``offset``."""
        if offset < 0 or len(data) - offset < SYSMSGID_SIZE:
            raise SysMessageIDError(f"a SysMessageID needs {SYSMSGID_SIZE} bytes at {offset}")
        return cls(*_STRUCT.unpack_from(data, offset))

    def to_bytes(self) -> bytes:
        """Marshal to the 32-byte wire form."""
        return _STRUCT.pack(self.timestamp, self.ip, self.port, self.sequence)

    def __str__(self) -> str:
        port = "" if self.port < 0 else str(self.port)
        return f"{self.sequence}-{_ip_text(self.ip)}-{port}-{self.timestamp}"

    def message_id(self) -> str:
        """JMSMessageID as the client derives it."""
        return "ID:" + str(self)


def sysmsgid_string(data: bytes) -> str:
    """String form of marshalled SysMessageID bytes (``str(SysMessageID)``, without
    making the tuple: every report's correlation id is one)."""
    if len(data) < SYSMSGID_SIZE:
        raise SysMessageIDError(f"a SysMessageID needs {SYSMSGID_SIZE} bytes at 0")
    timestamp, ip, port, sequence = _STRUCT.unpack_from(data, 0)
    return f"{sequence}-{_ip_text(ip)}-{'' if port < 0 else port}-{timestamp}"
