"""The file store's writer: batches appended to the current segment, the next segment
started when it is full, zero-filled room grown ahead of the records.

Writes: each batch (from the base class: the writer thread, or the event loop itself
for a lone waiting producer, see ``Store.inline``) is framed, written with one
``os.pwrite`` at the segment's logical end and, when ``sync`` is on, made durable with
one ``fdatasync`` (group commit: everything submitted in one event-loop turn, and
whatever queued up while the previous sync ran, shares it).  Segments are filled up to
``segment_size`` (a batch that crosses it continues in the next one: one write + sync
per segment touched; a single bigger record gets a segment of its own).  A new
segment's directory entry is fsynced when it is created; without ``sync`` a segment is
fsynced once, when closed.  A record is applied to the index only once its batch is
written (and synced).

Preallocation (``preallocate``, default with ``sync``): a segment is created with its
header and 1 MiB of real zeros, synced, and a writer-thread job zero-fills more (doubling,
16 MiB at most per step, up to ``segment_size``) before the room runs out.  A batch's
``fdatasync`` then changes neither the file size nor its block map: only the data goes
to disk, about twice as fast as an appending ``fsync`` on ext4.  Closed segments (and
the current one on ``close``) are trimmed to their records; a crash leaves the zeros.

:class:`SegmentWriter` owns the index (recovery hands it over, a rewrite replaces it:
:mod:`broker.store.filecompact`), the current segment and its file descriptor.  No
lock of its own: the file store calls it only under the base store's ``_io`` lock.
"""

from __future__ import annotations

import logging
import os

from .base import Record
from .filecodec import frame_record
from .fileindex import Index
from .filesegs import MAGIC, PREALLOC_MIN, Seg, SegmentFiles, zero_fill

log = logging.getLogger("broker.store.file")

_PREALLOC_MAX_STEP = 16 << 20


class SegmentWriter:
    """Appends batches of records to the segment files and applies them to the index."""

    def __init__(
        self, files: SegmentFiles, *, sync: bool, segment_size: int, preallocate: bool
    ) -> None:
        self.files = files
        self.sync = sync
        self.segment_size = segment_size
        # Zero-filled space ahead of the records: each sync is then an fdatasync that
        # changes no file size or block map.
        self.preallocate = preallocate
        self.index: Index | None = None
        self.cur: Seg | None = None  # the segment being appended to
        self.fd = -1
        self.next_num = 1
        self.preallocations = 0  # zero-fills of segment space (creation or growth)
        # Set when a batch had to start or grow a file (the base store's _slow_ok).
        self.slow = False

    def take_number(self) -> int:
        """A number for a new segment, never used before."""
        num = self.next_num
        self.next_num += 1
        return num

    # -- preallocation ----------------------------------------------------------------

    def grow_to(self, seg: Seg, fd: int, end: int) -> int:
        """Zero-fill the file of ``seg`` from its allocated end up to about ``end``, in
        steps that double (1 MiB first, 16 MiB at most) up to the segment size; returns
        the new allocated size.  The caller syncs."""
        step = min(max(seg.alloc, PREALLOC_MIN), _PREALLOC_MAX_STEP)
        target = max(end, min(seg.alloc + step, self.segment_size))
        if target > seg.alloc:
            zero_fill(fd, max(seg.alloc, end), target)
            seg.alloc = target
            self.preallocations += 1
            self.slow = True
        return target

    def grow_job(self) -> None:
        """Writer-thread job: more zeroed room in the current segment before it runs out,
        so no batch has to grow the file (and wait for the size change) itself."""
        seg = self.cur
        if seg is None or seg.sealed or self.fd < 0 or not self.preallocate:
            return
        if seg.alloc - seg.size >= PREALLOC_MIN // 2 or seg.alloc >= self.segment_size:
            return
        self.grow_to(seg, self.fd, seg.size)
        self.files.datasync(self.fd)

    # -- after recovery -----------------------------------------------------------------

    def resume(self, idx: Index, nums: list[int]) -> None:
        """Take over the index recovery built from segments ``nums``: appends continue in
        the last one while it can take more."""
        self.index = idx
        self.next_num = (nums[-1] + 1) if nums else 1
        last = idx.segs.get(nums[-1]) if nums else None
        if last is not None and not last.sealed and last.size < self.segment_size:
            self.cur = last
            idx.current = last.num
            self.fd = os.open(self.files.path(last.num), os.O_WRONLY)
            if self.preallocate and last.alloc - last.size < PREALLOC_MIN // 2:
                had = last.alloc
                self.grow_to(last, self.fd, max(last.size, len(MAGIC)))
                if last.alloc > had:
                    self.files.datasync(self.fd)
        idx.zeroed = True  # look for dead segments after the first batch

    # -- writing ------------------------------------------------------------------------

    def write(self, records: list[Record]) -> bool:
        """Append a batch (the index is there): one write and, with sync, one sync per
        segment it touches.  Returns whether the zeroed room ahead of the records is now
        short: time for ``grow_job``."""
        frames = [frame_record(r) for r in records]
        limit = self.segment_size
        seg = self.cur
        if seg is not None and not seg.sealed and seg.size >= len(MAGIC):
            total = sum(map(len, frames))
            if seg.size + total <= limit:  # the common case: all of it fits
                self.append(seg, records, frames, 0, len(frames))
                frames = []
        i = 0
        while i < len(frames):
            seg = self.cur
            if seg is None or seg.sealed or seg.size >= limit:
                seg = self.roll()
            # As many records as fit in this segment (at least one in a fresh segment):
            # one write and, with sync, one fsync per segment the batch touches.
            room = limit - max(seg.size, len(MAGIC))
            j, size = i, 0
            while j < len(frames) and (size + len(frames[j]) <= room or j == i):
                size += len(frames[j])
                j += 1
            if j == i + 1 and size > room and seg.size > len(MAGIC):
                seg = self.roll()  # a big record: give it a fresh segment
            self.append(seg, records, frames, i, j)
            i = j
        cur = self.cur
        return (
            self.preallocate
            and cur is not None
            and cur.alloc < self.segment_size
            and cur.alloc - cur.size < PREALLOC_MIN // 2
        )

    def append(self, seg: Seg, records: list[Record], frames: list[bytes], i: int, j: int) -> None:
        """Write ``frames[i:j]`` to ``seg`` (fsync with sync on), then index them."""
        idx = self.index
        assert idx is not None
        start = seg.size
        head = MAGIC if start == 0 else b""
        data = head + b"".join(frames[i:j])
        end = start + len(data)
        fd = self.fd
        files = self.files
        try:
            files.pwrite_all(fd, data, start)
            if end > seg.alloc:
                if self.preallocate:
                    self.grow_to(seg, fd, end)  # out of zeroed room: this sync grows it
                else:
                    seg.alloc = end
            if self.sync:
                files.datasync(fd)
        except BaseException:
            # Don't leave half a batch for the next one to append after.
            seg.sealed = True
            try:
                os.ftruncate(self.fd, start)
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

    def roll(self) -> Seg:
        """Close the current segment and start the next one."""
        self.slow = True
        self.close_current()
        idx = self.index
        assert idx is not None
        num = self.take_number()
        fd = self.fd = os.open(self.files.path(num), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        seg = Seg(num)
        if self.preallocate:
            # Header and a first run of zeros, synced now: the batches' syncs then only
            # carry their own data.
            self.files.pwrite_all(fd, MAGIC, 0)
            seg.size = seg.alloc = len(MAGIC)
            self.grow_to(seg, fd, len(MAGIC))
            self.files.datasync(fd)
        self.files.fsync_dir()  # the new file's name must survive a crash like its data
        self.cur = idx.segs[num] = seg
        idx.current = num
        return seg

    # -- closing ------------------------------------------------------------------------

    def close_current(self) -> None:
        """Close the segment being appended to (trimmed, and fsynced without sync)."""
        if self.fd >= 0:
            cur = self.cur
            try:
                self.trim(cur)
                # Closed segments are always on disk: deletions and rewrites rely on it.
                if not self.sync and cur is not None and cur.size and not cur.sealed:
                    self.files.fsync(self.fd)
            finally:
                os.close(self.fd)
                self.fd = -1
        idx = self.index
        if idx is not None:
            idx.current = -1
            cur = self.cur
            if cur is not None and cur.holds == 0:
                idx.zeroed = True  # dead already while it was being appended to
        self.cur = None

    def trim(self, seg: Seg | None) -> None:
        """Cut the unused zeros off a segment that is being closed.  Not synced: if a
        crash undoes it, the zeros are skipped on load."""
        if seg is not None and seg.alloc > seg.size and self.fd >= 0:
            try:
                os.ftruncate(self.fd, seg.size)
                seg.alloc = seg.size
            except OSError as exc:
                log.warning(
                    "file store %s: could not trim segment %d: %s",
                    self.files.directory,
                    seg.num,
                    exc,
                )

    def close(self) -> None:
        """Close the current segment's file, trimmed (the store is closing or reloading:
        unlike ``close_current``, no sync and the index is left as it is)."""
        if self.fd >= 0:
            try:
                self.trim(self.cur)
            finally:
                os.close(self.fd)
                self.fd = -1
        self.cur = None

    def forget(self) -> None:
        """Close the file and drop the index (the directory is being emptied)."""
        self.close()
        self.index = None
        self.next_num = 1
