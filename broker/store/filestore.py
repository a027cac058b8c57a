"""The file message store (the default): numbered append-only segment files.

:class:`FileStore` is the façade the broker uses; its parts, each in a module of its own
and each owning its state, are

- :mod:`broker.store.filesegs`: the segment files (names, header, frames, syncs) and each
  segment's bookkeeping (``Seg``);
- :mod:`broker.store.filecodec`: the records' encoding;
- :mod:`broker.store.fileindex`: the in-memory index of live things and how each record
  changes it;
- :mod:`broker.store.filerecovery`: ``load``'s replay of the segments, and the recovered
  messages read back as recovery goes through them;
- :mod:`broker.store.filewriter`: the writer (append, roll, preallocate, sync);
- :mod:`broker.store.filecompact`: deleting dead segments and rewriting the live state;
- :mod:`broker.store.fileprobes`: how fast the disk syncs.

One lock over all of them: recovery, appends, space reclamation and compaction work on
the same segment files and in-memory index, and the crash-safety argument of each relies
on the others (a segment is deleted only once the records that made it dead are on disk;
a rewrite covers everything written, and the writer then appends after it; a checkpoint
segment supersedes older ones only once renamed and its directory synced).  So the parts
hold no lock and never run on their own: this façade calls them, after ``start`` only
under the base store's ``_io`` lock (the writer thread's batches and jobs, or the loop's
inline batch), and in the same order of writes and syncs as one module did.  The only
thing read without it is the index, by :meth:`FileStore.holds` and
:meth:`FileStore.read_bodies` (see :mod:`broker.store.packedmsgs`).

Layout
------
``<directory>/0000000001.seg``, ``0000000002.seg``, ...: segments, replayed in number
order.  Each starts with the 8-byte magic :data:`MAGIC`, then records framed as::

    [u32 length][u32 crc32(payload)][payload]          (little endian)

The payload is a kind byte followed by the record's fields, as the table of record
kinds in :mod:`broker.store.filecodec` lists them (both the encoder and the decoder are
built from it).  Each part's module says what it does with them.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from .base import MsgAdd, Record, RecoveredState, Store
from .filecodec import CHECKPOINT, HEADER_SIZE, CorruptRecord, decode, encode, frame
from .filecompact import Compactor
from .fileindex import Index
from .fileprobes import measure_fsync_rate, measure_sync_rate
from .filerecovery import recovered_state, replay
from .filesegs import MAGIC, SUFFIX, Seg, SegmentFiles, frame_ok
from .filewriter import SegmentWriter

__all__ = [
    "CHECKPOINT",
    "HEADER_SIZE",
    "MAGIC",
    "CorruptRecord",
    "FileStore",
    "Index",
    "Seg",
    "decode",
    "encode",
    "frame",
    "measure_fsync_rate",
    "measure_sync_rate",
]

log = logging.getLogger("broker.store.file")


class FileStore(Store):
    """Append-only segment files with checksummed records, group commit and compaction.

    ``FileStore(directory, sync=..., segment_size=64 MiB, compact_threshold=2 segments,
    preallocate=sync, inline=True)``.
    Used like any :class:`Store` (``load``, ``start``, ``submit``/``after_durable``,
    ``close``); extras: :meth:`compact` (reclaim now, blocking), the counters ``fsyncs``
    (data and directory syncs), ``compactions``, ``segments_deleted``,
    ``preallocations`` (plus ``batches``, ``inline_batches`` and ``records_written``
    from the base), and :meth:`segments` (logical sizes) / :meth:`disk_usage` (file
    sizes, preallocated zeros included) / :meth:`live_messages`.  Its parts: ``files``
    (:class:`~broker.store.filesegs.SegmentFiles`), ``writer``
    (:class:`~broker.store.filewriter.SegmentWriter`, which holds the index) and
    ``compactor`` (:class:`~broker.store.filecompact.Compactor`).  After ``start`` the
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
        # Write on the event loop while the writer thread is idle (see Store).
        self.inline = True if inline is None else inline
        self.files = SegmentFiles(self.directory)
        # Zero-filled space ahead of the records (default: with sync, where it matters).
        self.writer = SegmentWriter(
            self.files,
            sync=sync,
            segment_size=segment_size,
            preallocate=sync if preallocate is None else preallocate,
        )
        self.compactor = Compactor(
            self.files,
            self.writer,
            sync=sync,
            compact_threshold=(
                compact_threshold if compact_threshold is not None else 2 * segment_size
            ),
        )
        # The parts' jobs this façade queues for the writer thread (run_in_writer).
        self._housekeeping_queued = False
        self._grow_queued = False
        self._batches_unchecked = 0  # batches since the compactor's due() was looked at

    # -- settings and counters (the parts own them) -------------------------------------

    @property
    def segment_size(self) -> int:
        return self.writer.segment_size

    @property
    def preallocate(self) -> bool:
        return self.writer.preallocate

    @property
    def compact_threshold(self) -> int:
        return self.compactor.compact_threshold

    @property
    def fsyncs(self) -> int:
        return self.files.fsyncs

    @property
    def preallocations(self) -> int:
        return self.writer.preallocations

    @property
    def compactions(self) -> int:
        return self.compactor.compactions

    @property
    def segments_deleted(self) -> int:
        return self.compactor.segments_deleted

    # -- stats (for tests, the benchmark and management) ---------------------------------

    def segments(self) -> list[tuple[int, int, int]]:
        """``(number, size, live messages)`` of each segment, oldest first."""
        idx = self.writer.index
        if idx is None:
            return []
        return [(s.num, s.size, s.live_msgs) for _, s in sorted(idx.segs.items())]

    def disk_usage(self) -> int:
        """Bytes in segment files."""
        return sum(p.stat().st_size for p in self.directory.glob("*" + SUFFIX))

    def live_messages(self) -> int:
        idx = self.writer.index
        return 0 if idx is None else len(idx.msgs)

    # -- reading bodies back (the pager's reader thread, or the loop) --------------------

    reads_bodies = True

    def data_directory(self) -> Path:
        return self.directory

    def holds(self, key: bytes) -> bool:
        """See Store.holds: the index says (read without the lock, as the writer left
        it: see packedmsgs)."""
        idx = self.writer.index
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
            idx = self.writer.index
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
                            fd = fds[num] = os.open(self.files.path(num), os.O_RDONLY)
                        except FileNotFoundError:  # compacted away: look it up again
                            todo.append(i)
                            continue
                    fr = os.pread(fd, size, off)
                    rec = None
                    if frame_ok(fr, 0, len(fr)) == size:
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
        self.writer.close()
        repairs: list[str] = []
        idx, nums = replay(self.files, repairs)
        state = recovered_state(self.files, idx, repairs, heads_only=self.lazy_bodies)
        self.writer.resume(idx, nums)
        return state

    # -- writing (writer thread, or the loop for an inline batch) ------------------------

    def _write_batch(self, records: list[Record]) -> None:
        w = self.writer
        w.slow = False
        try:
            if w.index is None:  # started without load(): build the index first
                self.load()
            room_short = w.write(records)
        finally:
            if w.slow:  # it started or grew a file: not a slow sync (see Store)
                self._slow_ok = True
        idx = w.index
        assert idx is not None
        self._batches_unchecked += 1
        if not self._housekeeping_queued and (
            idx.zeroed or (self._batches_unchecked >= 64 and self.compactor.due())
        ):
            # After this batch's callbacks have gone out, not before.
            self._housekeeping_queued = True
            self.run_in_writer(self._housekeeping)
        if room_short and not self._grow_queued:
            self._grow_queued = True
            self.run_in_writer(self._grow_job)

    def _housekeeping(self) -> None:
        self._housekeeping_queued = False
        self._batches_unchecked = 0
        self.compactor.housekeeping()

    def _grow_job(self) -> None:
        self._grow_queued = False
        self.writer.grow_job()

    # -- reclaiming space (writer thread) -------------------------------------------------

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
        if self.writer.index is None:
            self.load()
        self.compactor.compact_now()

    # -- lifecycle ------------------------------------------------------------------------

    def _close_backend(self) -> None:
        self.writer.close()

    def reset(self) -> None:
        """Delete everything in the store directory (call before load/start)."""
        self.writer.forget()
        self.compactor.last_rewrite = 0
        if self.directory.is_dir():
            for p in self.directory.iterdir():
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
