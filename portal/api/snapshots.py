"""Snapshots of a big broker's lists, so a page of them answers in milliseconds.

A list the broker can only give whole (GET_DESTINATIONS: every destination at once) costs
about a second with 10,000 destinations: the broker encodes them, the admin client
decodes them, the action converts them.  Paging and filtering that in every request
would cost the same second each time.  So a list of more than :data:`BIG` rows is kept:

* the next requests are answered from the kept list at once, and (at most one at a
  time, at most every :data:`REFRESH_EVERY` seconds) a background thread fetches a new
  one over an admin connection of its own, so it never holds up the portal's shared one;
* a kept list older than :data:`MAX_AGE` seconds is never used: the request fetches;
* any change made through the action layer in this process (it writes an audit record,
  :func:`broker.admin.actions.record_change`) drops every kept list: the next request
  sees the change.

Small lists (tests, most brokers) are always fetched in the request: exact, never stale.
Answers from a kept list carry an ``Age`` header (seconds, as HTTP caches do).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from broker.admin.remote import BrokerAdmin, default_admin
from broker.models import LogRecord

log = logging.getLogger("portal.api")

BIG = 1000  # rows: a list longer than this is kept
MAX_AGE = 30.0  # seconds: a kept list older than this is not used
REFRESH_EVERY = 2.0  # seconds between background fetches of one list

Fetch = Callable[[BrokerAdmin], Any]


class _Entry:
    __slots__ = ("value", "at", "generation", "refreshing", "size")

    def __init__(self, value: Any, at: float, generation: int, size: int) -> None:
        self.value = value
        self.at = at
        self.generation = generation
        self.refreshing = False
        self.size = size


class Snapshots:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple, _Entry] = {}
        self._generation = 0
        self._refresh_admins: dict[tuple, BrokerAdmin] = {}

    def invalidate(self) -> None:
        """Forget every kept list (something changed)."""
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def get(self, name: str, fetch: Fetch, size: Callable[[Any], int] = len) -> tuple[Any, float]:
        """(the value of ``fetch(admin)``, its age in seconds: 0 when fetched now)."""
        admin = default_admin()
        key = (admin.host, admin.port, admin.user, name)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.generation == self._generation and now - entry.at < MAX_AGE:
                if not entry.refreshing and now - entry.at >= REFRESH_EVERY:
                    entry.refreshing = True
                    threading.Thread(
                        target=self._refresh, args=(key, admin, fetch, size), daemon=True
                    ).start()
                return entry.value, now - entry.at
            generation = self._generation
        value = fetch(admin)
        self._keep(key, value, generation, size(value), time.monotonic())
        return value, 0.0

    def _keep(self, key: tuple, value: Any, generation: int, n: int, at: float) -> None:
        with self._lock:
            if n > BIG and generation == self._generation:
                self._entries[key] = _Entry(value, at, generation, n)
            else:
                self._entries.pop(key, None)

    def _refresh(self, key: tuple, admin: BrokerAdmin, fetch: Fetch, size) -> None:
        with self._lock:
            generation = self._generation
            other = self._refresh_admins.get(key[:3])
            if other is None or other.password != admin.password:
                if other is not None:
                    other.close()
                other = BrokerAdmin(admin.host, admin.port, admin.user, admin.password)
                self._refresh_admins[key[:3]] = other
        try:
            value = fetch(other)
        except Exception as exc:  # the request path will fetch (and report) it
            log.warning("background refresh of %s failed: %s", key[3], exc)
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    entry.refreshing = False
            return
        self._keep(key, value, generation, size(value), time.monotonic())


SNAPSHOTS = Snapshots()


@receiver(post_save, sender=LogRecord, dispatch_uid="portal.api.snapshots.invalidate")
def _changed(sender, instance: LogRecord, created: bool, **kwargs) -> None:
    if created and instance.logger == "broker.audit":
        SNAPSHOTS.invalidate()
