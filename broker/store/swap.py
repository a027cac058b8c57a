"""The swap area: where the broker pages out message bodies the message store cannot
give back (non-persistent messages, and every body when the store has no read API).

Not a store: nothing in it outlives the broker process.  It is emptied when the broker
starts (OpenMQ's semantics for non-persistent messages: a restart loses them), it is
never synced, and its files are written at the operating system's page cache speed.

Layout: ``<directory>/NNNNNNNNNN.swp``, numbered segment files of about
``segment_size`` bytes, each a run of frames ``[u32 length][u32 crc32][body]``.  A body
is found by its position (segment number and offset in one int); a frame whose crc does
not match reads back as None, never as another message's bytes.  A segment file is
deleted once every body in it is released (the message is gone) and it is no longer the
one appended to.

Thread model: ``put`` and ``release`` run on the event loop; ``read`` runs on the pager's
reader thread (and on the loop for a synchronous read); one lock guards the file table.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from pathlib import Path

log = logging.getLogger("broker.swap")

SUFFIX = ".swp"
_FRAME = struct.Struct("<II")
_OFF_BITS = 40
_OFF_MASK = (1 << _OFF_BITS) - 1


class SwapArea:
    """Numbered append-only files of message bodies, deleted as their bodies go."""

    def __init__(self, directory: Path, segment_size: int = 64 << 20) -> None:
        self.directory = Path(directory)
        self.segment_size = segment_size
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}  # segment number -> fd (read/write)
        self._live: dict[int, int] = {}  # segment number -> bodies not yet released
        # Bodies with more than one holder (retain): position -> holders beyond the first.
        self._extra: dict[int, int] = {}
        self._cur = 0  # the segment appended to (0: none yet)
        self._end = 0  # its logical end
        self._next = 1
        self.live_bytes = 0  # frame bytes of bodies not yet released

    def open(self) -> int:
        """Create the directory and delete what an earlier run left; returns how many
        files were removed."""
        self.directory.mkdir(parents=True, exist_ok=True)
        removed = 0
        for p in self.directory.glob("*" + SUFFIX):
            try:
                p.unlink()
                removed += 1
            except OSError as exc:
                log.warning("swap area %s: cannot remove %s: %s", self.directory, p.name, exc)
        return removed

    def _path(self, num: int) -> Path:
        return self.directory / f"{num:010d}{SUFFIX}"

    def put(self, raw: bytes) -> int:
        """Append ``raw``; returns its position.  Raises OSError (a full disk) with
        nothing recorded."""
        frame = _FRAME.pack(len(raw), zlib.crc32(raw))
        with self._lock:
            if self._cur == 0 or self._end + len(frame) + len(raw) > self.segment_size:
                self._roll()
            num, off = self._cur, self._end
            fd = self._fds[num]
            n = os.pwrite(fd, frame + raw, off)
            if n != len(frame) + len(raw):
                # A short write (ENOSPC part-way): the frame stays incomplete and unread.
                raise OSError(28, "short write to the swap area")
            self._end = off + n
            self._live[num] += 1
            self.live_bytes += n
        return (num << _OFF_BITS) | off

    def _roll(self) -> None:
        old = self._cur
        num = self._next
        fd = os.open(self._path(num), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._next += 1
        self._fds[num] = fd
        self._live[num] = 0
        self._cur, self._end = num, 0
        if old and self._live.get(old) == 0:
            self._drop(old)

    def read(self, pos: int, size: int) -> bytes | None:
        """The body at ``pos`` (``size`` bytes), or None when it does not read back
        intact (logged)."""
        num, off = pos >> _OFF_BITS, pos & _OFF_MASK
        with self._lock:
            fd = self._fds.get(num)
            if fd is None:
                return None
            try:
                data = os.pread(fd, _FRAME.size + size, off)
            except OSError as exc:
                log.error("swap area %s: reading %d:%d failed: %s", self.directory, num, off, exc)
                return None
        if len(data) == _FRAME.size + size:
            length, crc = _FRAME.unpack_from(data)
            body = data[_FRAME.size :]
            if length == size and zlib.crc32(body) == crc:
                return body
        log.error(
            "swap area %s: the body at %d:%d does not read back intact", self.directory, num, off
        )
        return None

    def retain(self, pos: int) -> None:
        """One more holder of the body at ``pos``: it goes after one more ``release``."""
        with self._lock:
            self._extra[pos] = self._extra.get(pos, 0) + 1

    def release(self, pos: int, size: int) -> None:
        """A holder of the body at ``pos`` no longer needs it (the last: it goes)."""
        num = pos >> _OFF_BITS
        with self._lock:
            extra = self._extra.get(pos)
            if extra:
                if extra == 1:
                    del self._extra[pos]
                else:
                    self._extra[pos] = extra - 1
                return
            live = self._live.get(num)
            if live is None:
                return
            self._live[num] = live - 1
            self.live_bytes -= _FRAME.size + size
            if live == 1 and num != self._cur:
                self._drop(num)

    def _drop(self, num: int) -> None:
        fd = self._fds.pop(num, None)
        self._live.pop(num, None)
        if fd is not None:
            os.close(fd)
        try:
            self._path(num).unlink()
        except OSError as exc:
            log.warning("swap area %s: cannot remove segment %d: %s", self.directory, num, exc)

    def files(self) -> int:
        with self._lock:
            return len(self._fds)

    def close(self) -> None:
        """Close and delete every file (the broker stops: nothing in it is kept)."""
        with self._lock:
            for num in list(self._fds):
                self._drop(num)
            self._extra.clear()
            self._cur = 0
