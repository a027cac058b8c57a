"""Recovery of the file store: the segments replayed into an index, and the recovered
messages read back from them as the broker's recovery goes through them.

A record whose frame is cut short or whose crc does not match ends the good part of a
segment.  Zeros from there to the end of the file are the preallocated space (or a write
that never reached the disk, which was never confirmed since a batch is confirmed only
once synced): the segment simply ends there, no repair.  Anything else at the tail of
the last segment is a torn write from a crash: the file is truncated there (with
everything after it, so stray blocks of the unconfirmed batch can never reappear once
appends reach them) and appends continue.  Anywhere else (an older segment, or a bad
record followed by good ones) it is damage: the rest of that segment is skipped, and a
new segment is used for appends; when nothing in such a damaged segment is needed any
more it is renamed ``*.seg.damaged`` rather than deleted.  Both go to
``RecoveredState.repairs`` (and the log).

Leftover ``.tmp`` files of a rewrite are deleted and segments older than the last
checkpoint segment ignored (deleted): :mod:`broker.store.filecompact` says why a crash
at any point of a rewrite then loads the same state.  All of it runs in
``FileStore.load``, before the store starts (no other thread touches the files yet).
"""

from __future__ import annotations

import gc
import logging
import mmap
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import overload

from broker.protocol.packet import body_offset

from .base import DestAdd, MsgAdd, RecoveredState, StoredMessage, StoredTransaction
from .filecodec import (
    FRAME_HEADER,
    HEADER_SIZE,
    K_CHECKPOINT,
    K_MSG_ADD,
    CorruptRecord,
    decode,
    decode_msg_add_in_place,
    msg_add_middle,
    msg_add_raw_at,
)
from .fileindex import Index
from .filesegs import MAGIC, TMP_SUFFIX, Seg, SegmentFiles, frame_ok, map_segment, zero_tail

log = logging.getLogger("broker.store.file")

_HDR = FRAME_HEADER
_U32 = struct.Struct("<I")
_WINDOW = 1 << 20


def replay(files: SegmentFiles, repairs: list[str]) -> tuple[Index, list[int]]:
    """Replay the segments of ``files`` into a new index; returns it and the numbers of
    the segments it holds.  What had to be repaired is added to ``repairs`` (and logged)."""
    directory = files.directory
    directory.mkdir(parents=True, exist_ok=True)
    for tmp in sorted(directory.glob("*" + TMP_SUFFIX)):
        tmp.unlink()
        repairs.append(f"removed {tmp.name}, left by a compaction that did not finish")
    nums = files.numbers()
    # A compacted segment supersedes everything before it: start there.
    first = 0
    for i in range(len(nums) - 1, 0, -1):
        if _starts_with_checkpoint(files, nums[i]):
            first = i
            break
    if first:
        for num in nums[:first]:
            files.path(num).unlink()
        files.fsync_dir()
        repairs.append(
            f"removed {first} segment(s) superseded by compacted segment {nums[first]}"
            " (a compaction was interrupted before deleting them)"
        )
    nums = nums[first:]
    idx = Index(keep_raw=True)
    # Replay allocates millions of small acyclic objects: the cyclic GC would rescan
    # the growing index over and over (most of the load time), so pause it.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for i, num in enumerate(nums):
            data = map_segment(files.path(num))
            _replay(files, idx, num, data, last=i == len(nums) - 1, repairs=repairs)
            del data
    finally:
        if gc_was_on:
            gc.enable()
    idx.keep_raw = False
    idx.disk_bytes = sum(s.size for s in idx.segs.values())
    for line in repairs:
        log.warning("file store %s: %s", directory, line)
    return idx, nums


def recovered_state(
    files: SegmentFiles, idx: Index, repairs: list[str], *, heads_only: bool
) -> RecoveredState:
    """The state ``idx`` holds, as the broker's recovery takes it."""
    state = RecoveredState(repairs=repairs)
    # Copies of the dicts: the broker may change its own, the index keeps these.
    state.destinations = [
        DestAdd(r.name, r.dest_type, dict(r.attributes)) for r, _, _ in idx.dests.values()
    ]
    state.durables = [r for r, _, _ in idx.durs.values()]
    # Read from the segments as recovery goes through them, not held here: a
    # million messages' heads at once would take hundreds of MB.
    state.messages = Recovered(files, idx, heads_only=heads_only)
    state.message_destinations = {k for k, n in idx.dest_live.items() if n}
    for t in idx.txns.values():
        sends = []
        for send in t.sends:
            sends.append(send[3])
            send[3] = None
        acks = [a for _, a in t.acks]
        state.transactions.append(StoredTransaction(t.txn_id, t.state, dict(t.info), sends, acks))
    return state


def _starts_with_checkpoint(files: SegmentFiles, num: int) -> bool:
    try:
        with open(files.path(num), "rb") as f:
            head = f.read(len(MAGIC) + HEADER_SIZE + 64)
    except OSError:
        return False
    if not head.startswith(MAGIC):
        return False
    pos = len(MAGIC)
    end = frame_ok(head, pos, len(head))
    return end > 0 and head[pos + HEADER_SIZE] == K_CHECKPOINT


def _replay(
    files: SegmentFiles,
    idx: Index,
    num: int,
    data: bytes | mmap.mmap,
    *,
    last: bool,
    repairs: list[str],
) -> None:
    """Apply segment ``num``'s records (``data``, its bytes) to ``idx``."""
    path = files.path(num)
    n = len(data)
    seg = Seg(num)
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
        if zero_tail(data, 0):
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
        if zero_tail(data, pos):
            # Only zeros from here: the preallocated space after the last record (a
            # write that never reached the disk leaves zeros too; nothing in it was
            # confirmed, since a batch is confirmed only once synced).
            seg.size = pos
            return
        # Damage.  A torn write can only be at the very end of the last segment; a bad
        # record with good ones after it is corruption: keep the bytes, skip them.
        if last and not _good_record_follows(data, pos, n):
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


def _good_record_follows(data: bytes, pos: int, n: int) -> bool:
    """Is there a valid record right after the (bad) one at ``pos``?"""
    if pos + HEADER_SIZE > n:
        return False
    (length,) = _U32.unpack_from(data, pos)
    nxt = pos + HEADER_SIZE + length
    return 0 < length and nxt < n and frame_ok(data, nxt, n) > 0


class Recovered(Sequence[StoredMessage]):
    """``RecoveredState.messages`` of a file store: each message read from its segment
    as recovery goes through them (in order, as often as it likes), never all at once.

    Read before the store starts (``FileStore.load``, then recovery, then ``start``):
    the segments it reads are still there.  A message that does not read back intact is
    logged and skipped."""

    def __init__(self, files: SegmentFiles, idx: Index, *, heads_only: bool) -> None:
        self.files = files
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
                        fd = os.open(self.files.path(num), os.O_RDONLY)
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
                            self.files.directory,
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
