"""XA transaction ids (``javax.transaction.xa.Xid``) and their 136-byte wire form.

The body of START/END/PREPARE/COMMIT/ROLLBACK/VERIFY_TRANSACTION for XA, and each entry
of a RECOVER_TRANSACTION_REPLY body, is one marshalled Xid (docs/developers/protocol.md)::

    int32  formatId          (-1: the null Xid)
    int16  gtrid length      (0..64)
    int16  bqual length      (0..64)
    64     global transaction id, zero-padded
    64     branch qualifier, zero-padded

Two Xids are the same transaction when format id, gtrid and bqual (up to their
lengths) are equal; the padding never matters.  The string form, used in logs and by
the administration tools, is the hex of the branch qualifier followed by the hex of the
global transaction id (upper case), or ``NULL_XID``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import ProtocolError
from .names import JMQ_QUANTITY

XID_SIZE = 136
MAX_GTRID = 64
MAX_BQUAL = 64
NULL_FORMAT_ID = -1

_HEAD = struct.Struct(">ihh")


class XidError(ProtocolError):
    """Bytes that are not a marshalled Xid."""


@dataclass(frozen=True)
class Xid:
    """An XA transaction branch id."""

    format_id: int
    gtrid: bytes = b""
    bqual: bytes = b""

    def __post_init__(self) -> None:
        if not -(2**31) <= self.format_id < 2**31:
            raise XidError(f"format id {self.format_id} does not fit an int32")
        if len(self.gtrid) > MAX_GTRID:
            raise XidError(f"global transaction id of {len(self.gtrid)} bytes (max {MAX_GTRID})")
        if len(self.bqual) > MAX_BQUAL:
            raise XidError(f"branch qualifier of {len(self.bqual)} bytes (max {MAX_BQUAL})")

    @classmethod
    def null(cls) -> Xid:
        return cls(NULL_FORMAT_ID)

    @property
    def is_null(self) -> bool:
        return self.format_id == NULL_FORMAT_ID

    def encode(self) -> bytes:
        """The fixed 136-byte marshalled form."""
        if self.is_null:
            return _HEAD.pack(NULL_FORMAT_ID, 0, 0) + bytes(MAX_GTRID + MAX_BQUAL)
        return (
            _HEAD.pack(self.format_id, len(self.gtrid), len(self.bqual))
            + self.gtrid.ljust(MAX_GTRID, b"\0")
            + self.bqual.ljust(MAX_BQUAL, b"\0")
        )

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> Xid:
        """Read one marshalled Xid at ``offset``; :class:`XidError` if it is not one."""
        if len(data) - offset < XID_SIZE:
            raise XidError(f"an Xid needs {XID_SIZE} bytes, got {max(len(data) - offset, 0)}")
        fmt, glen, blen = _HEAD.unpack_from(data, offset)
        if fmt == NULL_FORMAT_ID:
            return cls.null()
        if not 0 <= glen <= MAX_GTRID or not 0 <= blen <= MAX_BQUAL:
            raise XidError(f"bad Xid lengths (gtrid {glen}, bqual {blen})")
        start = offset + 8
        gtrid = bytes(data[start : start + glen])
        bqual = bytes(data[start + MAX_GTRID : start + MAX_GTRID + blen])
        return cls(fmt, gtrid, bqual)

    @classmethod
    def decode_list(
        cls, data: bytes | bytearray | memoryview, count: int | None = None
    ) -> list[Xid]:
        """A RECOVER_TRANSACTION_REPLY body: ``count`` (default: all) marshalled Xids."""
        if len(data) % XID_SIZE:
            raise XidError(f"body of {len(data)} bytes is not a whole number of Xids")
        n = len(data) // XID_SIZE
        if count is not None and count != n:
            raise XidError(f"{JMQ_QUANTITY} says {count} Xids, the body holds {n}")
        return [cls.decode(data, i * XID_SIZE) for i in range(n)]

    def __str__(self) -> str:
        if self.is_null:
            return "NULL_XID"
        return (self.bqual + self.gtrid).hex().upper()

    def __repr__(self) -> str:
        return f"Xid({self.format_id}, {self.gtrid!r}, {self.bqual!r})"


def encode_xids(xids: list[Xid]) -> bytes:
    return b"".join(x.encode() for x in xids)


__all__ = [
    "MAX_BQUAL",
    "MAX_GTRID",
    "NULL_FORMAT_ID",
    "XID_SIZE",
    "Xid",
    "XidError",
    "encode_xids",
]
