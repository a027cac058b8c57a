"""How fast the disk under a store directory syncs: probes (for bench/persistent.py and
the tests) of what the file store can reach with sync on."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from .filesegs import zero_fill


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
        zero_fill(fd, 0, size)
        os.fdatasync(fd)

    def write(fd: int, n: int) -> None:
        os.pwrite(fd, data, (n % per_file) * record)
        os.fdatasync(fd)

    return _probe_rate(directory, ".sync-probe-", seconds, prefill, write)
