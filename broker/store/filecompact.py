"""The file store's space reclaiming: segments the index no longer needs deleted, and
the live state rewritten when dead space dominates.

A closed segment with no holds whose ``refs`` are all gone (see
:mod:`broker.store.fileindex`) is deleted (one at a time, fsyncing the directory in
between, so the order survives a crash).  Chains of segments kept only for each other's
settle records are left to the rewrite below.

When dead space still dominates (closed segments under 50% live bytes and past
``compact_threshold``, and at least twice the size of the previous rewrite, so a
mostly-live store is not rewritten over and over), the writer thread rewrites the
whole live state (destinations, durables, live messages with their open interests and
delivery counts, open transactions) into a new segment that starts with a CHECKPOINT
record, then deletes every older segment.  Crash-safety: the rewrite goes to
``N.seg.tmp``, is fsynced, renamed to ``N.seg`` and the directory fsynced before any
old segment is deleted; ``load`` deletes leftover ``.tmp`` files and ignores (deletes)
segments older than the last checkpoint segment (:mod:`broker.store.filerecovery`), so
a crash at any point loads the same state.  The rewrite runs between batches in the
writer thread: the event loop, and so delivery, is never blocked; writes submitted
meanwhile wait for it.  It relies on the writer (:mod:`broker.store.filewriter`) for
closed segments being on disk, and replaces the writer's index with the one it built.
No lock of its own: the file store runs it only under the base store's ``_io`` lock.
"""

from __future__ import annotations

import logging
import os

from .base import MsgAdd, MsgDelivered, Record, TxnState
from .filecodec import CHECKPOINT, HEADER_SIZE, Checkpoint, decode, encode, frame
from .fileindex import Index
from .filesegs import MAGIC, TMP_SUFFIX, Seg, SegmentFiles, frame_ok
from .filewriter import SegmentWriter

log = logging.getLogger("broker.store.file")

_WRITE_CHUNK = 1 << 20


class Compactor:
    """Deletes the segments the writer's index no longer needs; rewrites the live state
    into one checkpoint segment when dead space dominates."""

    def __init__(
        self, files: SegmentFiles, writer: SegmentWriter, *, sync: bool, compact_threshold: int
    ) -> None:
        self.files = files
        self.writer = writer
        self.sync = sync
        # Closed segments must reach this size before a rewrite is considered.
        self.compact_threshold = compact_threshold
        self.compactions = 0
        self.segments_deleted = 0
        self.last_rewrite = 0  # size of the last rewrite: don't redo it before 2x

    def due(self) -> bool:
        """Does dead space dominate the closed segments (see the module docstring)?"""
        w = self.writer
        idx = w.index
        if idx is None:
            return False
        cur = w.cur
        closed = idx.disk_bytes - (cur.size if cur is not None else 0)
        if closed < self.compact_threshold or closed < 2 * self.last_rewrite:
            return False
        live = idx.live_bytes - (cur.live_bytes if cur is not None else 0)
        return 2 * live < closed

    def housekeeping(self) -> None:
        """Writer-thread job: delete dead segments, rewrite when it is due."""
        if self.writer.index is None:
            return
        try:
            self.delete_dead_segments()
            if self.due():
                self.rewrite()
        except Exception:  # never kill the writer thread over housekeeping
            log.exception("file store %s: compaction failed", self.files.directory)

    def delete_dead_segments(self) -> int:
        """Delete closed segments the current state no longer needs; returns how many."""
        w = self.writer
        idx = w.index
        assert idx is not None
        idx.zeroed = False
        deleted = 0
        for num in sorted(idx.segs):
            seg = idx.segs[num]
            if seg is w.cur or seg.holds > 0:
                continue
            if seg.refs:
                seg.refs = {r for r in seg.refs if r in idx.segs}
                if seg.refs:
                    continue
            if seg.checkpoint and min(idx.segs) != num:
                continue  # it supersedes older segments: those must go first
            if deleted == 0 and not self.sync and w.fd >= 0:
                # The records that made it dead must be on disk before it is gone.
                self.files.fsync(w.fd)
            self.files.discard(seg)
            # One at a time: a later segment's deletion may only be safe once this is.
            self.files.fsync_dir()
            del idx.segs[num]
            idx.disk_bytes -= seg.size
            deleted += 1
        self.segments_deleted += deleted
        return deleted

    def compact_now(self) -> None:
        """Delete dead segments, then rewrite whatever is left (the index is there)."""
        self.delete_dead_segments()
        idx = self.writer.index
        assert idx is not None
        if len(idx.segs) > 1 or (len(idx.segs) == 1 and self.writer.cur is not None):
            self.rewrite()

    def rewrite(self) -> None:
        """Write the live state into a new checkpoint segment; delete all older ones."""
        w = self.writer
        files = self.files
        old = w.index
        assert old is not None
        w.close_current()  # the rewrite covers everything written so far
        num = w.take_number()
        tmp = files.directory / f"{num:010d}{TMP_SUFFIX}"
        new = Index()
        seg = new.segs[num] = Seg(num)
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
                    files.write_all(fd, buf)
                    written += len(buf)
                    buf.clear()

            def read(num: int, off: int, size: int) -> tuple[Record, bytes]:
                rfd = readers.get(num)
                if rfd is None:
                    rfd = readers[num] = os.open(files.path(num), os.O_RDONLY)
                fr = os.pread(rfd, size, off)
                if frame_ok(fr, 0, len(fr)) != size:
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
            files.write_all(fd, buf)
            written += len(buf)
            files.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            self.last_rewrite = old.disk_bytes  # don't retry at once
            raise
        finally:
            for rfd in readers.values():
                os.close(rfd)
        os.close(fd)
        os.rename(tmp, files.path(num))
        files.fsync_dir()  # from here on the new segment is the store
        seg.size = written
        new.disk_bytes = written
        new.zeroed = False
        w.index = new  # the writer appends to a new segment after this one
        for _, oseg in sorted(old.segs.items()):
            files.discard(oseg)
        files.fsync_dir()
        self.segments_deleted += len(old.segs)
        self.compactions += 1
        self.last_rewrite = written
        log.info(
            "file store %s: compacted %d segments (%d bytes) into %d bytes, %d live messages",
            files.directory,
            len(old.segs),
            old.disk_bytes,
            written,
            len(new.msgs),
        )
