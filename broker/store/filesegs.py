"""The file store's segment files: their names, header and frames, and the bookkeeping
of each one (:class:`Seg`).

``<directory>/0000000001.seg``, ``0000000002.seg``, ...: segments, replayed in number
order.  Each starts with the 8-byte magic :data:`MAGIC`, then records framed as::

    [u32 length][u32 crc32(payload)][payload]          (little endian)

(the payload's kinds: :mod:`broker.store.filecodec`).  :class:`SegmentFiles` does what
touches the directory: a segment's path, the syncs (counted in ``fsyncs``), whole writes,
the deletion of a segment no longer needed.  It holds no lock: the file store calls it
only under the base store's ``_io`` lock (see :mod:`broker.store.filestore`).
"""

from __future__ import annotations

import logging
import mmap
import os
import zlib
from pathlib import Path

from .filecodec import FRAME_HEADER, HEADER_SIZE

log = logging.getLogger("broker.store.file")

MAGIC = b"OMQFS01\n"
SUFFIX = ".seg"
TMP_SUFFIX = ".seg.tmp"
DAMAGED_SUFFIX = ".damaged"  # a damaged segment no longer needed, kept for inspection

_HDR = FRAME_HEADER

_ZEROS = bytes(1 << 20)
PREALLOC_MIN = 1 << 20  # a new segment's first zero-filled chunk
_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def zero_fill(fd: int, start: int, end: int) -> None:
    """Write zeros to ``[start, end)`` of ``fd`` (real blocks, not a sparse hole)."""
    while start < end:
        n = os.pwrite(fd, memoryview(_ZEROS)[: min(len(_ZEROS), end - start)], start)
        start += n


def zero_tail(buf: bytes | mmap.mmap, pos: int) -> bool:
    """Is ``buf[pos:]`` all zero bytes?"""
    if isinstance(buf, bytes):
        return buf.count(0, pos) == len(buf) - pos
    n = len(buf)
    step = 1 << 20  # (a mapping has no count: a chunk at a time)
    return all(buf[i : min(i + step, n)].count(0) == min(step, n - i) for i in range(pos, n, step))


def map_segment(path: Path) -> bytes | mmap.mmap:
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


def frame_ok(buf: bytes, pos: int, n: int) -> int:
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


class Seg:
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


class SegmentFiles:
    """The segment files of one store directory: names, syncs and whole writes."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.fsyncs = 0  # data and directory syncs

    def path(self, num: int) -> Path:
        return self.directory / f"{num:010d}{SUFFIX}"

    def fsync(self, fd: int) -> None:
        os.fsync(fd)
        self.fsyncs += 1

    def datasync(self, fd: int) -> None:
        """Make written data durable: the file's size and blocks are synced with it when
        they changed (fdatasync); in a preallocated segment they did not, so it is only
        the data."""
        _fdatasync(fd)
        self.fsyncs += 1

    def fsync_dir(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def write_all(fd: int, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]

    @staticmethod
    def pwrite_all(fd: int, data: bytes | bytearray, offset: int) -> None:
        n = os.pwrite(fd, data, offset)
        if n < len(data):
            view = memoryview(data)[n:]
            offset += n
            while view:
                n = os.pwrite(fd, view, offset)
                view = view[n:]
                offset += n

    def numbers(self) -> list[int]:
        """The numbers of the segment files in the directory, in order."""
        nums = []
        for p in self.directory.glob("*" + SUFFIX):
            stem = p.name[: -len(SUFFIX)]
            if stem.isdigit():
                nums.append(int(stem))
        return sorted(nums)

    def discard(self, seg: Seg) -> None:
        """Delete a segment no longer needed; one with skipped damage is only set aside."""
        path = self.path(seg.num)
        if seg.damaged:
            aside = path.with_name(path.name + DAMAGED_SUFFIX)
            os.replace(path, aside)
            log.warning("file store %s: kept damaged segment as %s", self.directory, aside.name)
        else:
            path.unlink(missing_ok=True)
