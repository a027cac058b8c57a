"""Broker-generated 64-bit ids (connections, sessions, consumers, producers, transactions).

Laid out like OpenMQ's UID: a 15-bit positive prefix, a 40-bit millisecond timestamp
and an 8-bit counter, so ids look familiar in logs and stay unique across restarts.
"""

from __future__ import annotations

import random
import time

# The timestamp field: milliseconds since the epoch, 40 bits of them.
_MS_MASK = 0xFF_FFFF_FFFF


class UIDGenerator:
    """Makes unique positive non-zero int64 ids."""

    def __init__(self, prefix: int | None = None) -> None:
        self.prefix = (prefix if prefix is not None else random.randint(1, 0x7FFF)) & 0x7FFF
        self._last_ms = 0
        self._counter = 0

    def next(self) -> int:
        ms = int(time.time() * 1000) & _MS_MASK
        if ms <= self._last_ms:
            ms = self._last_ms
            self._counter += 1
            if self._counter > 0xFF:
                # Borrow the next millisecond rather than repeat an id.
                ms += 1
                self._counter = 0
        else:
            self._counter = 0
        self._last_ms = ms
        return (self.prefix << 48) | (ms << 8) | self._counter


def made_by_another_run_before(uid: int, prefix: int, when_ms: int) -> bool:
    """Whether ``uid`` (a UIDGenerator id) was made by a generator other than the one
    with ``prefix`` (another broker run), no later than ``when_ms`` (ms since the epoch)."""
    return uid >> 48 != prefix and (uid >> 8) & _MS_MASK <= when_ms & _MS_MASK
