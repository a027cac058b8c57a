"""Broker-generated 64-bit ids (connections, sessions, consumers, producers, transactions).

Laid out like OpenMQ's UID: a 15-bit positive prefix, a 40-bit millisecond timestamp
and an 8-bit counter, so ids look familiar in logs and stay unique across restarts.
"""

from __future__ import annotations

import random
import time


class UIDGenerator:
    """Makes unique positive non-zero int64 ids."""

    def __init__(self, prefix: int | None = None) -> None:
        self.prefix = (prefix if prefix is not None else random.randint(1, 0x7FFF)) & 0x7FFF
        self._last_ms = 0
        self._counter = 0

    def next(self) -> int:
        ms = int(time.time() * 1000) & 0xFF_FFFF_FFFF
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
