"""Entries packed into runs (broker/core/runs.py): the records and their packing.

A deep backlog's waiting entries are kept as fixed-size records in a run's bytearray,
not as Message and Entry objects (about 450 bytes each): :data:`SHORT` records (39
bytes) for the common case, :data:`PACKED` ones (91 bytes) for the rest.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from broker.protocol.types import FLAG_P, FLAG_Q

from .message import _DC_SLOT, _STRIP, BODIES, Entry, Message

if TYPE_CHECKING:
    from .message import BodySource, EntryOwner, EntryQueue

# An entry packed into a run (broker/core/runs.py): the fields of its paged-out message
# and its delivery state, 91 bytes instead of about 450 in objects.  The store key
# is not in it (a run keeps the few that differ from the key: DMQ copies).
PACKED = struct.Struct("<32shHHBIIIqqqqq")
# The same for the common case, 39 bytes: a message paged out to the store (no swap
# position), not delayed, its timestamp its key's (the SysMessageID starts with it),
# its priority its run's, its origin connection and its key's source (the producer's
# address and port, the key's middle 20 bytes) each one of the run's few (a 1-byte
# index into them); the record holds the key's timestamp and sequence number.  A
# million waiting messages: 52 MB less.
SHORT = struct.Struct("<8s4sHHBIIIqBB")
# A short run's (priority, origin connections, key sources).
Shape = tuple[int, list[int], list[bytes]]
_P_STORED, _P_QUEUE, _P_PERSISTENT, _P_REDELIVERED, _P_REPORT = 1, 2, 4, 8, 16


def packable(entry: Entry, src: BodySource) -> bool:
    """Can ``entry`` be packed (its message paged out to ``src``)?  What was decoded
    from it (selector values, report fields) is not kept: it is decoded again if it is
    needed once the entry is unpacked."""
    m = entry.msg
    return m._raw is None and m.src is src


def key_timestamp(key: bytes) -> int:
    """The timestamp a SysMessageID starts with (the header's, as a rule)."""
    return int.from_bytes(key[:8], "big", signed=True)


def fits_short(m: Message) -> bool:
    """Can ``m``'s entry be a :data:`SHORT` record (paged out to the store, not
    delayed, its timestamp its key's)?"""
    return (
        m.pos < 0
        and not m.delivery_time
        and len(m.key) == 32
        and m.timestamp == key_timestamp(m.key)
    )


def _flag_bits(entry: Entry, report: object) -> int:
    """The flag byte both record forms carry."""
    m = entry.msg
    return (
        (_P_STORED if m.stored else 0)
        | (_P_QUEUE if m.is_queue else 0)
        | (_P_PERSISTENT if m.persistent else 0)
        | (_P_REDELIVERED if entry.redelivered else 0)
        | (_P_REPORT if report is not None and m.report_info is report else 0)
    )


def pack_short(
    entry: Entry, buf: bytearray, off: int, report: object, origin_index: int, source_index: int
) -> None:
    """Write ``entry`` (``fits_short``) as a :data:`SHORT` record at ``off``: its
    priority is its run's, its origin connection the run's ``origin_index``-th, its
    key's source the run's ``source_index``-th."""
    m = entry.msg
    bits = _flag_bits(entry, report)
    key = m.key
    SHORT.pack_into(
        buf,
        off,
        key[:8],
        key[28:],
        m.type,
        m.base_flags,
        bits,
        m.dc_offset,
        m.size,
        entry.count,
        m.expiration,
        origin_index,
        source_index,
    )


def pack_entry(entry: Entry, buf: bytearray, off: int, report: object = None) -> None:
    """Write ``entry`` as a :data:`PACKED` record at ``off`` (``packable`` said it can
    be).  ``report``: the report information its run keeps once for the messages that
    share it (the report generator's "asks for nothing", as a rule); the record is
    marked when its message's is that one.  A message in the swap area: the record
    holds its body there too (the Message may be another subscription's as well)."""
    m = entry.msg
    bits = _flag_bits(entry, report)
    PACKED.pack_into(
        buf,
        off,
        m.key,
        m.priority,
        m.type,
        m.base_flags,
        bits,
        m.dc_offset,
        m.size,
        entry.count,
        m.expiration,
        m.timestamp,
        m.delivery_time,
        m.pos,
        m.origin_connection,
    )
    if m.pos >= 0 and m.src is not None:
        m.src.retain(m.pos)


def pack_stored_head(
    buf: bytearray,
    off: int,
    key: bytes,
    fields: tuple,
    dc_offset: int,
    delivery_time: int,
    size: int,
    count: int,
    redelivered: bool,
    report_bit: bool,
    short: int = -1,
) -> int:
    """Write a stored message recovered without its body as a :data:`PACKED` record at
    ``off``, straight from its head (``fields``, ``dc_offset``, ``delivery_time`` as
    ``stored_head`` read them; ``size`` the stored packet's length): the record
    ``Message.paged`` and ``pack_entry`` would make, without either object.  ``short``
    (not -1): a :data:`SHORT` record instead (not delayed, the timestamp the key's; its
    run's priority is ``fields[11]``, its first origin 0 and its ``short``-th source the
    key's).  Returns the message's size."""
    flags = fields[13]
    bits = (
        _P_STORED
        | (_P_QUEUE if flags & FLAG_Q else 0)
        | (_P_PERSISTENT if flags & FLAG_P else 0)
        | (_P_REDELIVERED if redelivered else 0)
        | (_P_REPORT if report_bit else 0)
    )
    size -= _DC_SLOT
    if short >= 0:
        SHORT.pack_into(
            buf,
            off,
            key[:8],
            key[28:],
            fields[2],
            flags & _STRIP,
            bits,
            dc_offset,
            size,
            count,
            fields[4],
            0,
            short,
        )
        return size
    PACKED.pack_into(
        buf,
        off,
        key,
        fields[11],
        fields[2],
        flags & _STRIP,
        bits,
        dc_offset,
        size,
        count,
        fields[4],
        fields[5],
        delivery_time,
        -1,
        0,
    )
    return size


def unpack_entry(
    buf: bytes | bytearray,
    off: int,
    store_key: bytes | None,
    destination: str,
    src: BodySource,
    owner: EntryOwner,
    queue: EntryQueue,
    interest: str | None,
    report: object = None,
    short: Shape | None = None,
) -> Entry:
    """The entry a :data:`PACKED` record at ``off`` holds, its message paged out to
    ``src`` (``store_key``: when not its key; ``report``: its run's shared report
    information, for a record marked with it).  ``short``: the record is a
    :data:`SHORT` one, of a run with this priority and these origin connections."""
    if short is None:
        (
            key,
            priority,
            ptype,
            flags,
            bits,
            dc_offset,
            size,
            count,
            expiration,
            timestamp,
            delivery_time,
            pos,
            origin,
        ) = PACKED.unpack_from(buf, off)
    else:
        (stamp, seq, ptype, flags, bits, dc_offset, size, count, expiration, oi, si) = (
            SHORT.unpack_from(buf, off)
        )
        priority, origins, sources = short
        key = stamp + sources[si] + seq
        timestamp = key_timestamp(stamp)
        origin = origins[oi]
        delivery_time = 0
        pos = -1
    m = Message.__new__(Message)
    m._raw = None
    BODIES.out += 1
    m.stored = bool(bits & _P_STORED)
    m.src = src
    m.pos = pos
    m.dc_offset = dc_offset
    m.type = ptype
    m.base_flags = flags
    m.priority = priority
    m.expiration = expiration
    m.timestamp = timestamp
    m.key = key
    m.store_key = key if store_key is None else store_key
    m.destination = destination
    m.is_queue = bool(bits & _P_QUEUE)
    m.persistent = bool(bits & _P_PERSISTENT)
    m.size = size
    m.origin_connection = origin
    m.delivery_time = delivery_time
    m._selector_values = None
    m.report_info = report if bits & _P_REPORT else None
    e = Entry(m, owner, queue, interest)
    e.redelivered = bool(bits & _P_REDELIVERED)
    e.count = count
    return e
