"""The file message store (the default): numbered append-only segment files.

Why one module (about 1,250 lines, its record codec apart in
:mod:`broker.store.filecodec`): recovery, appends, space reclamation and compaction work
on the same segment files and in-memory index under one lock, and the crash-safety
argument of each relies on the others.

Layout
------
``<directory>/0000000001.seg``, ``0000000002.seg``, ...: segments, replayed in number
order.  Each starts with the 8-byte magic :data:`MAGIC`, then records framed as::

    [u32 length][u32 crc32(payload)][payload]          (little endian)

The payload is a kind byte followed by the record's fields, as the table of record
kinds in :mod:`broker.store.filecodec` lists them (both the encoder and the decoder are
built from it).

Writes: each batch (from the base class: the writer thread, or the event loop itself
for a lone waiting producer, see ``Store.inline``) is framed, written with one
``os.pwrite`` at the segment's logical end and, when ``sync`` is on, made durable with
one ``fdatasync`` (group commit: everything submitted in one event-loop turn, and
whatever queued up while the previous sync ran, shares it).  Segments are filled up to
``segment_size`` (a batch that crosses it continues in the next one: one write + sync
per segment touched; a single bigger record gets a segment of its own).  A new
segment's directory entry is fsynced when it is created; without ``sync`` a segment is
fsynced once, when closed.

Preallocation (``preallocate``, default with ``sync``): a segment is created with its
header and 1 MiB of real zeros, synced, and a writer-thread job zero-fills more (doubling,
16 MiB at most per step, up to ``segment_size``) before the room runs out.  A batch's
``fdatasync`` then changes neither the file size nor its block map: only the data goes
to disk, about twice as fast as an appending ``fsync`` on ext4.  Closed segments (and
the current one on ``close``) are trimmed to their records; a crash leaves the zeros.

Recovery (:meth:`FileStore.load`): a record whose frame is cut short or whose crc does
not match ends the good part of a segment.  Zeros from there to the end of the file are
the preallocated space (or a write that never reached the disk, which was never
confirmed since a batch is confirmed only once synced): the segment simply ends there,
no repair.  Anything else at the tail of the last segment is a torn write from a crash:
the file is truncated there (with everything after it, so stray blocks of the
unconfirmed batch can never reappear once appends reach them) and appends continue.
Anywhere else (an older segment, or a bad record followed by good ones) it is damage:
the rest of that segment is skipped, and a new segment is used for appends; when nothing
in such a damaged segment is needed any more it is renamed ``*.seg.damaged`` rather than
deleted.  Both go to ``RecoveredState.repairs`` (and the log).

Reclaiming space
----------------
An in-memory index (no message bytes: each live message's segment, offset and frame
size) tracks, per segment, how many records in it the current state still needs
(``holds``: live messages, latest destination/durable adds, settles and delivery counts
of live messages, open transaction records) and which older segments it must outlive
(``refs``: a settle or remove record is needed as long as the record it cancels is on
disk).  A closed segment with no holds whose ``refs`` are all gone is deleted (one at a
time, fsyncing the directory in between, so the order survives a crash).  Chains of
segments kept only for each other's settle records are left to the rewrite below.

When dead space still dominates (closed segments under 50% live bytes and past
``compact_threshold``, and at least twice the size of the previous rewrite, so a
mostly-live store is not rewritten over and over), the writer thread rewrites the
whole live state (destinations, durables, live messages with their open interests and
delivery counts, open transactions) into a new segment that starts with a CHECKPOINT
record, then deletes every older segment.  Crash-safety: the rewrite goes to
``N.seg.tmp``, is fsynced, renamed to ``N.seg`` and the directory fsynced before any
old segment is deleted; ``load`` deletes leftover ``.tmp`` files and ignores (deletes)
segments older than the last checkpoint segment, so a crash at any point loads the same
state.  The rewrite runs between batches in the writer thread: the event loop, and so
delivery, is never blocked; writes submitted meanwhile wait for it.
"""

from __future__ import annotations

import gc
import logging
import mmap
import os
import shutil
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import overload

from broker.protocol.packet import body_offset

from .base import (
    DestAdd,
    DestRemove,
    DurableAdd,
    DurableRemove,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    RecoveredState,
    Store,
    StoredMessage,
    StoredTransaction,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)
from .filecodec import (
    CHECKPOINT,
    FRAME_HEADER,
    HEADER_SIZE,
    K_CHECKPOINT,
    K_MSG_ADD,
    Checkpoint,
    CorruptRecord,
    decode,
    decode_msg_add_in_place,
    encode,
    frame,
    frame_record,
    msg_add_middle,
    msg_add_raw_at,
)
from .packedmsgs import Msg as _Msg
from .packedmsgs import PackedMsgs

__all__ = [
    "CHECKPOINT",
    "HEADER_SIZE",
    "MAGIC",
    "CorruptRecord",
    "FileStore",
    "decode",
    "encode",
    "frame",
    "measure_fsync_rate",
    "measure_sync_rate",
]

log = logging.getLogger("broker.store.file")

MAGIC = b"OMQFS01\n"
SUFFIX = ".seg"
TMP_SUFFIX = ".seg.tmp"
DAMAGED_SUFFIX = ".damaged"  # a damaged segment no longer needed, kept for inspection

_HDR = FRAME_HEADER
_U32 = struct.Struct("<I")

_WRITE_CHUNK = 1 << 20
_ZEROS = bytes(1 << 20)
_PREALLOC_MIN = 1 << 20  # a new segment's first zero-filled chunk
_PREALLOC_MAX_STEP = 16 << 20
_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def _zero_fill(fd: int, start: int, end: int) -> None:
    """Write zeros to ``[start, end)`` of ``fd`` (real blocks, not a sparse hole)."""
    while start < end:
        n = os.pwrite(fd, memoryview(_ZEROS)[: min(len(_ZEROS), end - start)], start)
        start += n


def _zero_tail(buf: bytes | mmap.mmap, pos: int) -> bool:
    """Is ``buf[pos:]`` all zero bytes?"""
    if isinstance(buf, bytes):
        return buf.count(0, pos) == len(buf) - pos
    n = len(buf)
    step = 1 << 20  # (a mapping has no count: a chunk at a time)
    return all(buf[i : min(i + step, n)].count(0) == min(step, n - i) for i in range(pos, n, step))


def _map(path: Path) -> bytes | mmap.mmap:
    """A segment's bytes: mapped rather than copied (a 2 GB backlog loads a second or
    two faster); nothing keeps a view into them (a record's bytes are copied out, and
    a heads-only load copies just the heads), so the mapping goes with its last use."""
    with open(path, "rb") as f:
        n = os.fstat(f.fileno()).st_size
        if n <= len(MAGIC):
            return f.read()
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    data.madvise(mmap.MADV_SEQUENTIAL)
    return data


def _frame_ok(buf: bytes, pos: int, n: int) -> int:
    """End offset of a well-formed frame at ``pos`` (crc checked), or -1."""
    if pos + HEADER_SIZE > n:
        return -1
    length, crc = _HDR.unpack_from(buf, pos)
    end = pos + HEADER_SIZE + length
    if length == 0 or end > n:
        return -1
    if zlib.crc32(memoryview(buf)[pos + HEADER_SIZE : end]) != crc:
        return -1
    return end


# -- the in-memory index of live things ----------------------------------------------


class _Seg:
    """Bookkeeping for one segment file."""

    __slots__ = (
        "num",
        "size",
        "holds",
        "live_msgs",
        "live_bytes",
        "refs",
        "checkpoint",
        "sealed",
        "damaged",
        "alloc",
    )

    def __init__(self, num: int) -> None:
        self.num = num
        self.size = 0  # bytes of records in the file (its logical end)
        self.alloc = 0  # bytes in the file: more than size when zeros are preallocated
        self.holds = 0  # records in it the current state needs
        self.live_msgs = 0  # of which live MsgAdd records
        self.live_bytes = 0  # frame bytes of live MsgAdd / open TxnSend records
        self.refs: set[int] = set()  # older segments this one must outlive
        self.checkpoint = False  # starts with a CHECKPOINT record
        self.sealed = False  # never append to it (damaged, or a write to it failed)
        self.damaged = False  # holds bytes recovery skipped: kept aside, never deleted


class _Txn:
    __slots__ = ("txn_id", "state", "info", "state_seg", "first_seg", "sends", "acks", "segs")

    def __init__(self, txn_id: int, first_seg: int) -> None:
        self.txn_id = txn_id
        self.first_seg = first_seg  # held while open: fixes the recovered order
        self.state = 0
        self.info: dict = {}
        self.state_seg = -1
        self.sends: list[list] = []  # [segment, offset, frame size, TxnSend while loading]
        self.acks: list[tuple[int, TxnAck]] = []
        self.segs: set[int] = set()  # every segment holding a record of this transaction


class _Index:
    """The live state plus per-segment holds/refs; ``apply`` mirrors the replay rules."""

    def __init__(self, keep_raw: bool = False) -> None:
        # Loading: keep the records of open transactions for RecoveredState (messages
        # are read again from their segments when recovery asks: _Recovered).
        self.keep_raw = keep_raw
        self.segs: dict[int, _Seg] = {}
        # Destinations/durables: [latest add, its segment, segment of the first add].  The
        # first add is held too: it fixes the position in the recovered order.
        self.dests: dict[tuple[str, int], list] = {}
        self.dest_segs: dict[tuple[str, int], set[int]] = {}
        self.durs: dict[str, list] = {}
        self.dur_segs: dict[str, set[int]] = {}
        # Live messages, in the order they were first added (the recovered order).
        self.msgs = PackedMsgs()
        self.txns: dict[int, _Txn] = {}
        self.dest_live: dict[tuple[str, int], int] = {}  # live messages per destination
        self.interest_live: dict[str, int] = {}  # live messages per open interest
        self.live_bytes = 0
        self.disk_bytes = 0
        self.zeroed = False  # some segment's holds dropped to 0: time to look for dead ones
        # The segment being appended to: its holds dropping to 0 is no news (it cannot
        # go while it is current; when it is closed, that is looked at).
        self.current = -1
        self._apply = {
            DestAdd: self._dest_add,
            DestRemove: self._dest_remove,
            DurableAdd: self._durable_add,
            DurableRemove: self._durable_remove,
            MsgAdd: self._msg_add,
            MsgDelivered: self._msg_delivered,
            MsgSettle: self._msg_settle,
            TxnState: self._txn_state,
            TxnSend: self._txn_send,
            TxnAck: self._txn_ack,
            TxnRemove: self._txn_remove,
            Checkpoint: self._checkpoint,
        }

    def apply(self, rec: Record | Checkpoint, seg: _Seg, off: int, size: int) -> None:
        fn = self._apply.get(type(rec))
        if fn is None:
            fn = next(f for t, f in self._apply.items() if isinstance(rec, t))
        fn(rec, seg, off, size)

    def _release(self, num: int, nbytes: int = 0) -> None:
        s = self.segs.get(num)
        if s is None:
            return
        s.holds -= 1
        if nbytes:
            s.live_bytes -= nbytes
            self.live_bytes -= nbytes
        if s.holds == 0 and num != self.current:
            self.zeroed = True

    def _hold(self, num: int) -> None:
        s = self.segs.get(num)
        if s is not None:
            s.holds += 1

    def _checkpoint(self, rec: Checkpoint, seg: _Seg, off: int, size: int) -> None:
        seg.checkpoint = True

    # destinations and durables

    def _add(self, table: dict, k: object, r: Record, seg: _Seg) -> None:
        entry = table.get(k)
        if entry is None:
            table[k] = [r, seg.num, seg.num]
            seg.holds += 2  # as the latest add and as the first one
        else:
            self._release(entry[1])  # superseded
            entry[0] = r
            entry[1] = seg.num
            seg.holds += 1

    def _remove(self, table: dict, k: object) -> None:
        entry = table.pop(k, None)
        if entry is not None:
            self._release(entry[1])
            self._release(entry[2])

    def _dest_add(self, r: DestAdd, seg: _Seg, off: int, size: int) -> None:
        k = (r.name, r.dest_type)
        self._add(self.dests, k, r, seg)
        self.dest_segs.setdefault(k, set()).add(seg.num)

    def _dest_remove(self, r: DestRemove, seg: _Seg, off: int, size: int) -> None:
        k = (r.name, r.dest_type)
        self._remove(self.dests, k)
        # Needed as long as an add it cancels is on disk.
        seg.refs.update(self.dest_segs.pop(k, ()))
        if self.dest_live.get(k):
            for key, m in self.msgs.items():  # (deleting while iterating is allowed)
                if m.dtype == r.dest_type and m.dest == r.name:
                    seg.refs.add(m.seg)
                    self._drop(m)
                    del self.msgs[key]
        seg.refs.discard(seg.num)

    def _durable_add(self, r: DurableAdd, seg: _Seg, off: int, size: int) -> None:
        self._add(self.durs, r.sub_id, r, seg)
        self.dur_segs.setdefault(r.sub_id, set()).add(seg.num)

    def _durable_remove(self, r: DurableRemove, seg: _Seg, off: int, size: int) -> None:
        self._remove(self.durs, r.sub_id)
        seg.refs.update(self.dur_segs.pop(r.sub_id, ()))
        if self.interest_live.get(r.sub_id):
            interest = r.sub_id
            for key, m in self.msgs.items():  # (deleting while iterating is allowed)
                ints = m.ints
                for j in range(0, len(ints), 3):
                    if ints[j] == interest:
                        self._settle_at(key, m, j, seg)
                        break
        seg.refs.discard(seg.num)

    # messages

    def _drop(self, m: _Msg) -> None:
        """Release everything a message holds (it is dead or being replaced)."""
        s = self.segs.get(m.seg)
        if s is not None:
            s.holds -= 1
            s.live_msgs -= 1
            s.live_bytes -= m.size
            if s.holds == 0 and s.num != self.current:
                self.zeroed = True
        self.live_bytes -= m.size
        k = (m.dest, m.dtype)
        self.dest_live[k] -= 1
        ints = m.ints
        il = self.interest_live
        for j in range(0, len(ints), 3):
            il[ints[j]] -= 1
            if ints[j + 2] >= 0:
                self._release(ints[j + 2])
        if m.extra:
            for num in m.extra:
                self._release(num)
        if m.first >= 0:
            self._release(m.first)

    def _msg_add(self, r: MsgAdd, seg: _Seg, off: int, size: int) -> None:
        msgs = self.msgs
        key = r.key
        interests = r.interests
        il = self.interest_live
        if len(interests) == 1:
            i = interests[0]
            dest = r.destination
            dtype = r.dest_type
            if msgs.add(key, seg.num, off, size, dest, dtype, i):
                # A new queue message, never delivered: kept packed (the common case,
                # on the hot path of every persistent send).
                il[i] = il.get(i, 0) + 1
                seg.holds += 1
                seg.live_msgs += 1
                seg.live_bytes += size
                self.live_bytes += size
                k = (dest, dtype)
                dl = self.dest_live
                dl[k] = dl.get(k, 0) + 1
                return
        m = msgs.get(key)
        if m is None:
            if not interests:
                return
            ints: list = []
            for i in dict.fromkeys(interests):
                ints += (i, 0, -1)
                il[i] = il.get(i, 0) + 1
            msgs.put(key, _Msg(seg.num, off, size, r.destination, r.dest_type, ints))
        else:  # re-added: replaces the old one, keeping its place
            seg.refs.add(m.seg)
            seg.refs.discard(seg.num)
            first = m.first if m.first >= 0 else m.seg
            self._drop(m)
            if not interests:
                del msgs[key]
                return
            self._hold(first)
            m.first = first
            m.seg = seg.num
            m.off = off
            m.size = size
            m.dest = r.destination
            m.dtype = r.dest_type
            ints = []
            for i in dict.fromkeys(interests):
                ints += (i, 0, -1)
                il[i] = il.get(i, 0) + 1
            m.ints = ints
            m.extra = None
        seg.holds += 1
        seg.live_msgs += 1
        seg.live_bytes += size
        self.live_bytes += size
        k = (r.destination, r.dest_type)
        self.dest_live[k] = self.dest_live.get(k, 0) + 1

    def _msg_delivered(self, r: MsgDelivered, seg: _Seg, off: int, size: int) -> None:
        m = self.msgs.get(r.key)
        if m is None:
            return
        ints = m.ints
        for j in range(0, len(ints), 3):
            if ints[j] == r.interest:
                if type(ints) is tuple:
                    ints = m.ints = list(ints)
                ints[j + 1] = r.count
                if ints[j + 2] >= 0:  # superseded
                    self._release(ints[j + 2])
                ints[j + 2] = seg.num
                seg.holds += 1
                return

    def _msg_settle(self, r: MsgSettle, seg: _Seg, off: int, size: int) -> None:
        packed = self.msgs.take(r.key, r.interest)
        if packed is not None:  # its one interest, never delivered: the common case
            num, fsize, dest, dtype = packed
            if num != seg.num:
                seg.refs.add(num)  # the settle must outlive the MsgAdd it cancels
            s = self.segs.get(num)
            if s is not None:
                s.holds -= 1
                s.live_msgs -= 1
                s.live_bytes -= fsize
                if s.holds == 0 and num != self.current:
                    self.zeroed = True
            self.live_bytes -= fsize
            self.dest_live[(dest, dtype)] -= 1
            self.interest_live[r.interest] -= 1
            return
        m = self.msgs.get(r.key)
        if m is None:
            return
        ints = m.ints
        for j in range(0, len(ints), 3):
            if ints[j] == r.interest:
                self._settle_at(r.key, m, j, seg)
                return

    def _settle_at(self, key: bytes, m: _Msg, j: int, seg: _Seg) -> None:
        """Settle ``m.ints[j]`` by a record in ``seg``."""
        ints = m.ints
        if type(ints) is tuple:
            ints = m.ints = list(ints)
        self.interest_live[ints[j]] -= 1
        if ints[j + 2] >= 0:
            self._release(ints[j + 2])
        del ints[j : j + 3]
        if m.seg != seg.num:
            seg.refs.add(m.seg)  # the settle must outlive the MsgAdd it cancels
        if ints:
            if m.extra is None:
                m.extra = [seg.num]
            else:
                m.extra.append(seg.num)
            seg.holds += 1
        else:
            self._drop(m)
            del self.msgs[key]

    # transactions

    def _txn(self, txn_id: int, seg: _Seg) -> _Txn:
        t = self.txns.get(txn_id)
        if t is None:
            t = self.txns[txn_id] = _Txn(txn_id, seg.num)
            seg.holds += 1
        return t

    def _txn_state(self, r: TxnState, seg: _Seg, off: int, size: int) -> None:
        t = self._txn(r.txn_id, seg)
        if t.state_seg >= 0:
            self._release(t.state_seg)
        t.state = r.state
        t.info = r.info
        t.state_seg = seg.num
        seg.holds += 1
        t.segs.add(seg.num)

    def _txn_send(self, r: TxnSend, seg: _Seg, off: int, size: int) -> None:
        t = self._txn(r.txn_id, seg)
        t.sends.append([seg.num, off, size, r if self.keep_raw else None])
        seg.holds += 1
        seg.live_bytes += size
        self.live_bytes += size
        t.segs.add(seg.num)

    def _txn_ack(self, r: TxnAck, seg: _Seg, off: int, size: int) -> None:
        t = self._txn(r.txn_id, seg)
        t.acks.append((seg.num, r))
        seg.holds += 1
        t.segs.add(seg.num)

    def _txn_remove(self, r: TxnRemove, seg: _Seg, off: int, size: int) -> None:
        t = self.txns.pop(r.txn_id, None)
        if t is None:
            return
        if t.state_seg >= 0:
            self._release(t.state_seg)
        self._release(t.first_seg)
        for num, _off, fsize, _rec in t.sends:
            self._release(num, fsize)
        for num, _ack in t.acks:
            self._release(num)
        seg.refs.update(t.segs)
        seg.refs.discard(seg.num)


class _Recovered(Sequence[StoredMessage]):
    """``RecoveredState.messages`` of a file store: each message read from its segment
    as recovery goes through them (in order, as often as it likes), never all at once.

    Read before the store starts (``FileStore.load``, then recovery, then ``start``):
    the segments it reads are still there.  A message that does not read back intact is
    logged and skipped."""

    def __init__(self, store: FileStore, idx: _Index, *, heads_only: bool) -> None:
        self.store = store
        self.idx = idx
        self.heads_only = heads_only  # StoredMessage.head and size, not raw
        self.count = len(idx.msgs)
        self._list: list[StoredMessage] | None = None

    def __len__(self) -> int:
        return self.count

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    @overload
    def __getitem__(self, i: int) -> StoredMessage: ...

    @overload
    def __getitem__(self, i: slice) -> list[StoredMessage]: ...

    def __getitem__(self, i: int | slice) -> StoredMessage | list[StoredMessage]:
        # (Tests and tools look at a message by number: rare, so all are read then.)
        if self._list is None:
            self._list = list(self)
        return self._list[i]

    def __iter__(self) -> Iterator[StoredMessage]:
        # Each segment is read in windows of _WINDOW bytes (records are met in file
        # order within a segment), so what is read stays small and out of the mapping.
        # No crc this time (load checked every frame moments ago, nothing has written
        # since): the record must decode and carry its key.
        shared: dict[tuple, dict[str, int]] = {}
        middles: dict[tuple, bytes] = {}
        heads_only = self.heads_only
        fd, num = -1, -1
        win, view, wstart = b"", memoryview(b""), 0
        try:
            for key, snum, off, size, dest, dtype, ints in self.idx.msgs.locations():
                if type(ints) is tuple:
                    interests = shared.get(ints)
                    if interests is None:
                        interests = shared[ints] = {ints[0]: ints[1]}
                else:
                    interests = {ints[j]: ints[j + 1] for j in range(0, len(ints), 3)}
                if snum != num:
                    if fd >= 0:
                        os.close(fd)
                    fd, num, win, view, wstart = -1, snum, b"", memoryview(b""), 0
                    try:
                        fd = os.open(self.store._path(num), os.O_RDONLY)
                    except OSError as exc:
                        log.error("file store: segment %d does not open: %s", num, exc)
                start = off - wstart
                end = start + size
                if start < 0 or end > len(win):
                    if fd < 0:
                        continue
                    win = os.pread(fd, max(_WINDOW, size), off)
                    view = memoryview(win)
                    wstart, start, end = off, 0, size
                p = start + HEADER_SIZE
                # (A packed message's record is checked, not decoded: its middle bytes
                # are those of its one interest, as written.)
                q = -1
                if type(ints) is tuple and len(key) == 32:
                    middle = middles.get((dest, dtype, ints))
                    if middle is None:
                        middle = middles[(dest, dtype, ints)] = msg_add_middle(
                            dest, dtype, (ints[0],)
                        )
                    q = msg_add_raw_at(win, p, end, key, middle)
                if q >= 0:
                    raw: bytes | memoryview = view[q:end]
                else:
                    rec: MsgAdd | None = None
                    try:
                        rec = decode_msg_add_in_place(win, view, p, end)
                    except CorruptRecord:
                        pass
                    if rec is None or rec.key != key:
                        log.error(
                            "file store %s: message %s does not read back intact: skipped",
                            self.store.directory,
                            key.hex(),
                        )
                        continue
                    raw = rec.raw
                if heads_only:
                    head = bytes(raw[: body_offset(raw)])
                    yield StoredMessage(key, dest, dtype, None, interests, head, len(raw))
                else:
                    yield StoredMessage(key, dest, dtype, bytes(raw), interests)
        finally:
            if fd >= 0:
                os.close(fd)


_WINDOW = 1 << 20


# -- the store ------------------------------------------------------------------------


class FileStore(Store):
    """Append-only segment files with checksummed records, group commit and compaction.

    ``FileStore(directory, sync=..., segment_size=64 MiB, compact_threshold=2 segments,
    preallocate=sync, inline=True)``.
    Used like any :class:`Store` (``load``, ``start``, ``submit``/``after_durable``,
    ``close``); extras: :meth:`compact` (reclaim now, blocking), the counters ``fsyncs``
    (data and directory syncs), ``compactions``, ``segments_deleted``,
    ``preallocations`` (plus ``batches``, ``inline_batches`` and ``records_written``
    from the base), and :meth:`segments` (logical sizes) / :meth:`disk_usage` (file
    sizes, preallocated zeros included) / :meth:`live_messages`.  After ``start`` the
    files are touched by one thread at a time under the base's ``_io`` lock: the writer
    thread, or the loop for an inline batch.  Records are encoded when written: don't
    mutate a submitted record's dicts.
    """

    def __init__(
        self,
        directory: Path,
        *,
        sync: bool,
        segment_size: int = 64 * 1024 * 1024,
        compact_threshold: int | None = None,
        preallocate: bool | None = None,
        inline: bool | None = None,
    ) -> None:
        super().__init__(sync=sync)
        self.directory = Path(directory)
        self.segment_size = segment_size
        # Zero-filled space ahead of the records: each sync is then an fdatasync that
        # changes no file size or block map (default: with sync, where it matters).
        self.preallocate = sync if preallocate is None else preallocate
        # Write on the event loop while the writer thread is idle (see Store).
        self.inline = True if inline is None else inline
        # Closed segments must reach this size before a rewrite is considered.
        self.compact_threshold = (
            compact_threshold if compact_threshold is not None else 2 * segment_size
        )
        self.fsyncs = 0
        self.compactions = 0
        self.segments_deleted = 0
        self._index: _Index | None = None
        self._cur: _Seg | None = None  # the segment being appended to
        self._fd = -1
        self._next_num = 1
        self._last_rewrite = 0  # size of the last rewrite: don't redo it before 2x
        self._housekeeping_queued = False
        self._grow_queued = False
        self._batches_unchecked = 0  # batches since _compaction_due was last looked at
        self.preallocations = 0  # zero-fills of segment space (creation or growth)

    # -- paths and small helpers -------------------------------------------------------

    def _path(self, num: int) -> Path:
        return self.directory / f"{num:010d}{SUFFIX}"

    def _fsync(self, fd: int) -> None:
        os.fsync(fd)
        self.fsyncs += 1

    def _datasync(self, fd: int) -> None:
        """Make written data durable: the file's size and blocks are synced with it when
        they changed (fdatasync); in a preallocated segment they did not, so it is only
        the data."""
        _fdatasync(fd)
        self.fsyncs += 1

    def _fsync_dir(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            self._fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _write_all(fd: int, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]

    @staticmethod
    def _pwrite_all(fd: int, data: bytes | bytearray, offset: int) -> None:
        n = os.pwrite(fd, data, offset)
        if n < len(data):
            view = memoryview(data)[n:]
            offset += n
            while view:
                n = os.pwrite(fd, view, offset)
                view = view[n:]
                offset += n

    # -- preallocation (writer thread) ----------------------------------------------------

    def _grow_to(self, seg: _Seg, fd: int, end: int) -> int:
        """Zero-fill the file of ``seg`` from its allocated end up to about ``end``, in
        steps that double (1 MiB first, 16 MiB at most) up to the segment size; returns
        the new allocated size.  The caller syncs."""
        step = min(max(seg.alloc, _PREALLOC_MIN), _PREALLOC_MAX_STEP)
        target = max(end, min(seg.alloc + step, self.segment_size))
        if target > seg.alloc:
            _zero_fill(fd, max(seg.alloc, end), target)
            seg.alloc = target
            self.preallocations += 1
            self._slow_ok = True
        return target

    def _grow_job(self) -> None:
        """Writer-thread job: more zeroed room in the current segment before it runs out,
        so no batch has to grow the file (and wait for the size change) itself."""
        self._grow_queued = False
        seg = self._cur
        if seg is None or seg.sealed or self._fd < 0 or not self.preallocate:
            return
        if seg.alloc - seg.size >= _PREALLOC_MIN // 2 or seg.alloc >= self.segment_size:
            return
        self._grow_to(seg, self._fd, seg.size)
        self._datasync(self._fd)

    def _segment_numbers(self) -> list[int]:
        nums = []
        for p in self.directory.glob("*" + SUFFIX):
            stem = p.name[: -len(SUFFIX)]
            if stem.isdigit():
                nums.append(int(stem))
        return sorted(nums)

    # -- stats (for tests, the benchmark and management) ---------------------------------

    def segments(self) -> list[tuple[int, int, int]]:
        """``(number, size, live messages)`` of each segment, oldest first."""
        idx = self._index
        if idx is None:
            return []
        return [(s.num, s.size, s.live_msgs) for _, s in sorted(idx.segs.items())]

    def disk_usage(self) -> int:
        """Bytes in segment files."""
        return sum(p.stat().st_size for p in self.directory.glob("*" + SUFFIX))

    def live_messages(self) -> int:
        return 0 if self._index is None else len(self._index.msgs)

    # -- reading bodies back (the pager's reader thread, or the loop) --------------------

    reads_bodies = True

    def data_directory(self) -> Path:
        return self.directory

    def holds(self, key: bytes) -> bool:
        """See Store.holds: the index says (read without the lock, as the writer left
        it: see packedmsgs)."""
        idx = self._index
        return idx is not None and idx.msgs.where(key) is not None

    def read_bodies(self, keys: list[bytes]) -> list[bytes | None]:
        """The stored bytes of ``keys`` (see Store.read_bodies), read in file order.

        No lock: the index is looked up as the writer left it (see packedmsgs) and
        each frame is checked (crc, kind and key) after the read, so a message the
        writer moved meanwhile (a compaction deletes the segments it copied) is looked
        up again, never mistaken for another."""
        out: list[bytes | None] = [None] * len(keys)
        todo = list(range(len(keys)))
        for _attempt in range(3):
            idx = self._index
            if idx is None or not todo:
                break
            where = []
            for i in todo:
                loc = idx.msgs.where(keys[i])
                if loc is not None:
                    where.append((*loc, i))
            where.sort()
            todo = []
            fds: dict[int, int] = {}
            try:
                for num, off, size, i in where:
                    fd = fds.get(num)
                    if fd is None:
                        try:
                            fd = fds[num] = os.open(self._path(num), os.O_RDONLY)
                        except FileNotFoundError:  # compacted away: look it up again
                            todo.append(i)
                            continue
                    fr = os.pread(fd, size, off)
                    rec = None
                    if _frame_ok(fr, 0, len(fr)) == size:
                        try:
                            rec = decode(fr, HEADER_SIZE, size)
                        except CorruptRecord:
                            rec = None
                    if isinstance(rec, MsgAdd) and rec.key == keys[i]:
                        out[i] = rec.raw
                    else:
                        todo.append(i)
            finally:
                for fd in fds.values():
                    os.close(fd)
        for i in todo:
            log.error(
                "file store %s: message %s does not read back intact", self.directory, keys[i].hex()
            )
        return out

    # -- recovery ---------------------------------------------------------------------

    def load(self) -> RecoveredState:
        """Replay the segments into a RecoveredState (and the live index)."""
        self._close_files()
        self.directory.mkdir(parents=True, exist_ok=True)
        repairs: list[str] = []
        for tmp in sorted(self.directory.glob("*" + TMP_SUFFIX)):
            tmp.unlink()
            repairs.append(f"removed {tmp.name}, left by a compaction that did not finish")
        nums = self._segment_numbers()
        # A compacted segment supersedes everything before it: start there.
        first = 0
        for i in range(len(nums) - 1, 0, -1):
            if self._starts_with_checkpoint(nums[i]):
                first = i
                break
        if first:
            for num in nums[:first]:
                self._path(num).unlink()
            self._fsync_dir()
            repairs.append(
                f"removed {first} segment(s) superseded by compacted segment {nums[first]}"
                " (a compaction was interrupted before deleting them)"
            )
        nums = nums[first:]
        idx = _Index(keep_raw=True)
        # Replay allocates millions of small acyclic objects: the cyclic GC would rescan
        # the growing index over and over (most of the load time), so pause it.
        gc_was_on = gc.isenabled()
        gc.disable()
        try:
            for i, num in enumerate(nums):
                data = _map(self._path(num))
                self._replay(idx, num, data, last=i == len(nums) - 1, repairs=repairs)
                del data
        finally:
            if gc_was_on:
                gc.enable()
        idx.keep_raw = False
        idx.disk_bytes = sum(s.size for s in idx.segs.values())
        for line in repairs:
            log.warning("file store %s: %s", self.directory, line)

        state = RecoveredState(repairs=repairs)
        # Copies of the dicts: the broker may change its own, the index keeps these.
        state.destinations = [
            DestAdd(r.name, r.dest_type, dict(r.attributes)) for r, _, _ in idx.dests.values()
        ]
        state.durables = [r for r, _, _ in idx.durs.values()]
        # Read from the segments as recovery goes through them, not held here: a
        # million messages' heads at once would take hundreds of MB.
        state.messages = _Recovered(self, idx, heads_only=self.lazy_bodies)
        state.message_destinations = {k for k, n in idx.dest_live.items() if n}
        for t in idx.txns.values():
            sends = []
            for send in t.sends:
                sends.append(send[3])
                send[3] = None
            acks = [a for _, a in t.acks]
            state.transactions.append(
                StoredTransaction(t.txn_id, t.state, dict(t.info), sends, acks)
            )

        self._index = idx
        self._next_num = (nums[-1] + 1) if nums else 1
        last = idx.segs.get(nums[-1]) if nums else None
        if last is not None and not last.sealed and last.size < self.segment_size:
            self._cur = last
            idx.current = last.num
            self._fd = os.open(self._path(last.num), os.O_WRONLY)
            if self.preallocate and last.alloc - last.size < _PREALLOC_MIN // 2:
                had = last.alloc
                self._grow_to(last, self._fd, max(last.size, len(MAGIC)))
                if last.alloc > had:
                    self._datasync(self._fd)
        idx.zeroed = True  # look for dead segments after the first batch
        return state

    def _starts_with_checkpoint(self, num: int) -> bool:
        try:
            with open(self._path(num), "rb") as f:
                head = f.read(len(MAGIC) + HEADER_SIZE + 64)
        except OSError:
            return False
        if not head.startswith(MAGIC):
            return False
        pos = len(MAGIC)
        end = _frame_ok(head, pos, len(head))
        return end > 0 and head[pos + HEADER_SIZE] == K_CHECKPOINT

    def _replay(
        self,
        idx: _Index,
        num: int,
        data: bytes | mmap.mmap,
        *,
        last: bool,
        repairs: list[str],
    ) -> None:
        """Apply segment ``num``'s records (``data``, its bytes) to ``idx``."""
        path = self._path(num)
        n = len(data)
        seg = _Seg(num)
        seg.size = seg.alloc = n
        idx.segs[num] = seg
        if n == 0:
            return
        if n < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
            if last and MAGIC.startswith(data[:n]):  # crashed while creating it
                if n:
                    os.truncate(path, 0)
                    seg.size = seg.alloc = 0
                    repairs.append(f"truncated {n} bytes of a torn header of segment {path.name}")
                return
            if _zero_tail(data, 0):
                # Preallocated but its header never reached the disk: it holds nothing.
                seg.size = 0
                return
            seg.sealed = seg.damaged = True
            repairs.append(f"segment {path.name} does not start with the store header: skipped")
            return
        pos = len(MAGIC)
        view = memoryview(data)
        hdr = _HDR.unpack_from
        crc32 = zlib.crc32
        handlers = idx._apply
        while pos < n:
            problem = ""
            if pos + HEADER_SIZE > n:
                problem = "a partial record header"
            else:
                length, crc = hdr(data, pos)
                end = pos + HEADER_SIZE + length
                if length == 0 or end > n:
                    problem = "a record length running past the end"
                elif crc32(view[pos + HEADER_SIZE : end]) != crc:
                    problem = "a checksum mismatch"
            if not problem:
                start = pos + HEADER_SIZE
                try:
                    if data[start] == K_MSG_ADD:  # (the index keeps no message bytes)
                        rec = decode_msg_add_in_place(data, view, start, end)
                    else:
                        rec = decode(data, start, end)
                except CorruptRecord as exc:
                    problem = f"an undecodable record ({exc})"
                else:
                    handlers[type(rec)](rec, seg, pos, end - pos)
                    pos = end
                    continue
            if _zero_tail(data, pos):
                # Only zeros from here: the preallocated space after the last record (a
                # write that never reached the disk leaves zeros too; nothing in it was
                # confirmed, since a batch is confirmed only once synced).
                seg.size = pos
                return
            # Damage.  A torn write can only be at the very end of the last segment; a bad
            # record with good ones after it is corruption: keep the bytes, skip them.
            if last and not self._good_record_follows(data, pos, n):
                # (Everything after the bad record goes: in a preallocated segment that may
                # include stray blocks of the same unconfirmed batch, which must not come
                # back once new records are appended up to them.)
                os.truncate(path, pos)
                seg.size = seg.alloc = pos
                repairs.append(
                    f"truncated {n - pos} bytes of a torn record at the end of segment"
                    f" {path.name} ({problem} at offset {pos})"
                )
            else:
                seg.sealed = seg.damaged = True
                repairs.append(
                    f"corrupt record in segment {path.name} at offset {pos} ({problem}):"
                    f" skipped the remaining {n - pos} bytes of that segment"
                )
            return

    @staticmethod
    def _good_record_follows(data: bytes, pos: int, n: int) -> bool:
        """Is there a valid record right after the (bad) one at ``pos``?"""
        if pos + HEADER_SIZE > n:
            return False
        (length,) = _U32.unpack_from(data, pos)
        nxt = pos + HEADER_SIZE + length
        return 0 < length and nxt < n and _frame_ok(data, nxt, n) > 0

    # -- writing (writer thread) ---------------------------------------------------------

    def _write_batch(self, records: list[Record]) -> None:
        if self._index is None:  # started without load(): build the index first
            self.load()
        idx = self._index
        assert idx is not None
        frames = [frame_record(r) for r in records]
        limit = self.segment_size
        seg = self._cur
        if seg is not None and not seg.sealed and seg.size >= len(MAGIC):
            total = sum(map(len, frames))
            if seg.size + total <= limit:  # the common case: all of it fits
                self._append(seg, records, frames, 0, len(frames))
                frames = []
        i = 0
        while i < len(frames):
            seg = self._cur
            if seg is None or seg.sealed or seg.size >= limit:
                seg = self._roll()
            # As many records as fit in this segment (at least one in a fresh segment):
            # one write and, with sync, one fsync per segment the batch touches.
            room = limit - max(seg.size, len(MAGIC))
            j, size = i, 0
            while j < len(frames) and (size + len(frames[j]) <= room or j == i):
                size += len(frames[j])
                j += 1
            if j == i + 1 and size > room and seg.size > len(MAGIC):
                seg = self._roll()  # a big record: give it a fresh segment
            self._append(seg, records, frames, i, j)
            i = j
        self._batches_unchecked += 1
        if not self._housekeeping_queued and (
            idx.zeroed or (self._batches_unchecked >= 64 and self._compaction_due())
        ):
            # After this batch's callbacks have gone out, not before.
            self._housekeeping_queued = True
            self.run_in_writer(self._housekeeping)
        cur = self._cur
        if (
            self.preallocate
            and not self._grow_queued
            and cur is not None
            and cur.alloc < self.segment_size
            and cur.alloc - cur.size < _PREALLOC_MIN // 2
        ):
            self._grow_queued = True
            self.run_in_writer(self._grow_job)

    def _append(
        self, seg: _Seg, records: list[Record], frames: list[bytes], i: int, j: int
    ) -> None:
        """Write ``frames[i:j]`` to ``seg`` (fsync with sync on), then index them."""
        idx = self._index
        assert idx is not None
        start = seg.size
        head = MAGIC if start == 0 else b""
        data = head + b"".join(frames[i:j])
        end = start + len(data)
        fd = self._fd
        try:
            self._pwrite_all(fd, data, start)
            if end > seg.alloc:
                if self.preallocate:
                    self._grow_to(seg, fd, end)  # out of zeroed room: this sync grows it
                else:
                    seg.alloc = end
            if self.sync:
                self._datasync(fd)
        except BaseException:
            # Don't leave half a batch for the next one to append after.
            seg.sealed = True
            try:
                os.ftruncate(self._fd, start)
            except OSError:
                pass
            raise
        seg.size = end
        idx.disk_bytes += len(data)
        off = start + len(head)
        handlers = idx._apply
        for k in range(i, j):
            rec = records[k]
            size = len(frames[k])
            fn = handlers.get(type(rec))
            if fn is None:
                idx.apply(rec, seg, off, size)
            else:
                fn(rec, seg, off, size)
            off += size

    def _roll(self) -> _Seg:
        """Close the current segment and start the next one."""
        self._slow_ok = True
        self._close_current()
        idx = self._index
        assert idx is not None
        num = self._next_num
        self._next_num += 1
        fd = self._fd = os.open(self._path(num), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        seg = _Seg(num)
        if self.preallocate:
            # Header and a first run of zeros, synced now: the batches' syncs then only
            # carry their own data.
            self._pwrite_all(fd, MAGIC, 0)
            seg.size = seg.alloc = len(MAGIC)
            self._grow_to(seg, fd, len(MAGIC))
            self._datasync(fd)
        self._fsync_dir()  # the new file's name must survive a crash like its data
        self._cur = idx.segs[num] = seg
        idx.current = num
        return seg

    def _close_current(self) -> None:
        if self._fd >= 0:
            cur = self._cur
            try:
                self._trim(cur)
                # Closed segments are always on disk: deletions and rewrites rely on it.
                if not self.sync and cur is not None and cur.size and not cur.sealed:
                    self._fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = -1
        idx = self._index
        if idx is not None:
            idx.current = -1
            cur = self._cur
            if cur is not None and cur.holds == 0:
                idx.zeroed = True  # dead already while it was being appended to
        self._cur = None

    # -- reclaiming space (writer thread) -------------------------------------------------

    def _compaction_due(self) -> bool:
        idx = self._index
        if idx is None:
            return False
        cur = self._cur
        closed = idx.disk_bytes - (cur.size if cur is not None else 0)
        if closed < self.compact_threshold or closed < 2 * self._last_rewrite:
            return False
        live = idx.live_bytes - (cur.live_bytes if cur is not None else 0)
        return 2 * live < closed

    def _housekeeping(self) -> None:
        self._housekeeping_queued = False
        self._batches_unchecked = 0
        if self._index is None:
            return
        try:
            self._delete_dead_segments()
            if self._compaction_due():
                self._rewrite()
        except Exception:  # never kill the writer thread over housekeeping
            log.exception("file store %s: compaction failed", self.directory)

    def _delete_dead_segments(self) -> int:
        """Delete closed segments the current state no longer needs; returns how many."""
        idx = self._index
        assert idx is not None
        idx.zeroed = False
        deleted = 0
        for num in sorted(idx.segs):
            seg = idx.segs[num]
            if seg is self._cur or seg.holds > 0:
                continue
            if seg.refs:
                seg.refs = {r for r in seg.refs if r in idx.segs}
                if seg.refs:
                    continue
            if seg.checkpoint and min(idx.segs) != num:
                continue  # it supersedes older segments: those must go first
            if deleted == 0 and not self.sync and self._fd >= 0:
                # The records that made it dead must be on disk before it is gone.
                self._fsync(self._fd)
            self._discard(seg)
            # One at a time: a later segment's deletion may only be safe once this is.
            self._fsync_dir()
            del idx.segs[num]
            idx.disk_bytes -= seg.size
            deleted += 1
        self.segments_deleted += deleted
        return deleted

    def _discard(self, seg: _Seg) -> None:
        """Delete a segment no longer needed; one with skipped damage is only set aside."""
        path = self._path(seg.num)
        if seg.damaged:
            aside = path.with_name(path.name + DAMAGED_SUFFIX)
            os.replace(path, aside)
            log.warning("file store %s: kept damaged segment as %s", self.directory, aside.name)
        else:
            path.unlink(missing_ok=True)

    def compact(self, timeout: float = 300.0) -> None:
        """Reclaim space now: delete dead segments and rewrite the live state.

        Runs in the writer thread (after everything submitted so far) and waits for it;
        without a running writer it runs here.
        """
        if self._thread is None:
            self._compact_now()
            return
        done = threading.Event()
        errors: list[BaseException] = []

        def job() -> None:
            try:
                self._compact_now()
            except BaseException as exc:
                errors.append(exc)
            finally:
                done.set()

        self._hand_over(inline=False, defer=False)
        self.run_in_writer(job)
        if not done.wait(timeout):
            raise TimeoutError("compaction did not finish")
        if errors:
            raise errors[0]

    def compact_soon(self, done: Callable[[BaseException | None], None]) -> None:
        """Compact behind everything submitted so far without blocking the event loop
        (admin COMPACT_DESTINATION); ``done(error or None)`` is then called on the loop."""
        if self._thread is None:
            try:
                self._compact_now()
            except Exception as exc:
                done(exc)
                return
            done(None)
            return
        loop = self._loop

        def job() -> None:
            error: BaseException | None = None
            try:
                self._compact_now()
            except Exception as exc:
                error = exc
            try:
                loop.call_soon_threadsafe(done, error)  # type: ignore[union-attr]
            except RuntimeError:  # the loop is gone: the broker is stopping
                pass

        self._hand_over(inline=False, defer=False)
        self.run_in_writer(job)

    def _compact_now(self) -> None:
        if self._index is None:
            self.load()
        self._delete_dead_segments()
        idx = self._index
        assert idx is not None
        if len(idx.segs) > 1 or (len(idx.segs) == 1 and self._cur is not None):
            self._rewrite()

    def _rewrite(self) -> None:
        """Write the live state into a new checkpoint segment; delete all older ones."""
        old = self._index
        assert old is not None
        self._close_current()  # the rewrite covers everything written so far
        num = self._next_num
        self._next_num += 1
        tmp = self.directory / f"{num:010d}{TMP_SUFFIX}"
        new = _Index()
        seg = new.segs[num] = _Seg(num)
        readers: dict[int, int] = {}
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            buf = bytearray(MAGIC)
            written = 0

            def emit(rec: Record | Checkpoint, fr: bytes | None = None) -> None:
                nonlocal written
                if fr is None:
                    fr = frame(encode(rec))
                new.apply(rec, seg, written + len(buf), len(fr))
                buf.extend(fr)
                if len(buf) >= _WRITE_CHUNK:
                    self._write_all(fd, buf)
                    written += len(buf)
                    buf.clear()

            def read(num: int, off: int, size: int) -> tuple[Record, bytes]:
                rfd = readers.get(num)
                if rfd is None:
                    rfd = readers[num] = os.open(self._path(num), os.O_RDONLY)
                fr = os.pread(rfd, size, off)
                if _frame_ok(fr, 0, len(fr)) != size:
                    raise OSError(f"live record at {num}:{off} no longer reads back intact")
                return decode(fr, HEADER_SIZE, size), fr

            emit(CHECKPOINT)
            for r, _, _ in old.dests.values():
                emit(r)
            for r, _, _ in old.durs.values():
                emit(r)
            for key, m in old.msgs.items():
                rec, fr = read(m.seg, m.off, m.size)
                assert isinstance(rec, MsgAdd) and rec.key == key
                ints = m.ints
                interests = tuple(ints[0::3])
                if interests == rec.interests:
                    emit(rec, fr)  # unchanged: copy the frame as it is
                else:
                    emit(rec._replace(interests=interests))
                for j in range(0, len(ints), 3):
                    if ints[j + 1]:
                        emit(MsgDelivered(key, ints[j], ints[j + 1]))
            for t in old.txns.values():
                emit(TxnState(t.txn_id, t.state, t.info))
                for snum, soff, ssize, _rec in t.sends:
                    rec, fr = read(snum, soff, ssize)
                    emit(rec, fr)
                for _, ack in t.acks:
                    emit(ack)
            self._write_all(fd, buf)
            written += len(buf)
            self._fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            self._last_rewrite = old.disk_bytes  # don't retry at once
            raise
        finally:
            for rfd in readers.values():
                os.close(rfd)
        os.close(fd)
        os.rename(tmp, self._path(num))
        self._fsync_dir()  # from here on the new segment is the store
        seg.size = written
        new.disk_bytes = written
        new.zeroed = False
        self._index = new
        for _, oseg in sorted(old.segs.items()):
            self._discard(oseg)
        self._fsync_dir()
        self.segments_deleted += len(old.segs)
        self.compactions += 1
        self._last_rewrite = written
        log.info(
            "file store %s: compacted %d segments (%d bytes) into %d bytes, %d live messages",
            self.directory,
            len(old.segs),
            old.disk_bytes,
            written,
            len(new.msgs),
        )

    # -- lifecycle ------------------------------------------------------------------------

    def _trim(self, seg: _Seg | None) -> None:
        """Cut the unused zeros off a segment that is being closed.  Not synced: if a
        crash undoes it, the zeros are skipped on load."""
        if seg is not None and seg.alloc > seg.size and self._fd >= 0:
            try:
                os.ftruncate(self._fd, seg.size)
                seg.alloc = seg.size
            except OSError as exc:
                log.warning(
                    "file store %s: could not trim segment %d: %s", self.directory, seg.num, exc
                )

    def _close_files(self) -> None:
        if self._fd >= 0:
            try:
                self._trim(self._cur)
            finally:
                os.close(self._fd)
                self._fd = -1
        self._cur = None

    def _close_backend(self) -> None:
        self._close_files()

    def reset(self) -> None:
        """Delete everything in the store directory (call before load/start)."""
        self._close_files()
        self._index = None
        self._next_num = 1
        self._last_rewrite = 0
        if self.directory.is_dir():
            for p in self.directory.iterdir():
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()


def _probe_rate(directory: Path, prefix: str, seconds: float, setup, step) -> float:
    """Calls per second of ``step(fd, n)`` on a fresh file in ``directory`` prepared by
    ``setup(fd)``, for ``seconds``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=prefix, dir=directory)
    count = 0
    try:
        setup(fd)
        began = time.perf_counter()
        deadline = began + seconds
        while True:
            step(fd, count)
            count += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        return count / (now - began)
    finally:
        os.close(fd)
        os.unlink(name)


def measure_fsync_rate(directory: Path, seconds: float = 1.0) -> float:
    """fsyncs per second of 4 KB appends in ``directory`` (what sync=True can reach)."""
    block = b"\0" * 4096

    def append(fd: int, _n: int) -> None:
        os.write(fd, block)
        os.fsync(fd)

    return _probe_rate(directory, ".fsync-probe-", seconds, lambda fd: None, append)


def measure_sync_rate(directory: Path, seconds: float = 1.0, record: int = 1100) -> float:
    """Syncs per second the way the store does them with sync on: a ``record``-byte
    ``pwrite`` at the logical end of a preallocated (zero-filled) segment + ``fdatasync``.
    """
    data = b"\1" * record
    size = 16 << 20
    per_file = size // record

    def prefill(fd: int) -> None:
        _zero_fill(fd, 0, size)
        os.fdatasync(fd)

    def write(fd: int, n: int) -> None:
        os.pwrite(fd, data, (n % per_file) * record)
        os.fdatasync(fd)

    return _probe_rate(directory, ".sync-probe-", seconds, prefill, write)
