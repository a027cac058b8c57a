"""Temporary directories in memory (tmpfs) where the machine has one.

For tests whose check is what a store writes and reads back, not the disk: a disk's
fsync takes milliseconds each (tens while other processes write), a tmpfs's nothing,
and a store syncs at every commit or segment.  The tests about surviving a crash of the
process lose nothing either way (the kernel has the data); none is about the machine's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SHM = Path("/dev/shm")


def memory_root() -> Path | None:
    """/dev/shm when it is a writable directory, else None (the default temporary place)."""
    return SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else None


@contextmanager
def memory_dir(prefix: str) -> Iterator[Path]:
    """A new directory, in memory where possible, removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix=prefix, dir=memory_root()))
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)
