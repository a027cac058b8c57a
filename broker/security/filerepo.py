"""OpenMQ's flat-file user repository (``passwd``, docs/developers/protocol.md).

One user per line, ``<username>:<MD5STR(username:password)>:<group>:<active>``.  The
broker reads it the way OpenMQ's ``JMQFileUserRepository`` does: fields split on ``:``
with ``StringTokenizer`` semantics (empty fields collapse), users whose fourth field is
not ``1`` are not loaded at all.  The file is re-read when it changes (size or
modification time), so edits take effect at the next authentication without a restart.

The broker calls :meth:`FileUserRepository.lookup` from a worker thread.  :func:`parse_passwd` / :func:`format_passwd` are also what
``imqusermgr import`` / ``export`` use, which keeps the round trip exact.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from .users import UserRecord

__all__ = [
    "FileUserRepository",
    "PasswdEntry",
    "format_passwd",
    "parse_passwd",
    "parse_passwd_line",
]


@dataclass(frozen=True)
class PasswdEntry:
    """One line of a passwd file as written (active or not)."""

    username: str
    password_digest: str
    group: str
    active: bool

    def line(self) -> str:
        return f"{self.username}:{self.password_digest}:{self.group}:{'1' if self.active else '0'}"


def parse_passwd_line(line: str) -> PasswdEntry | None:
    """Parse one line; None for blank lines, comments and lines too short to be a user.

    ``StringTokenizer(line, ":")`` drops empty tokens, so ``bob:hash::1`` has three
    tokens: group ``1`` and no active field, i.e. a disabled user.
    """
    line = line.rstrip("\r\n")
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    tokens = [t for t in line.split(":") if t]
    if len(tokens) < 2:
        return None
    group = tokens[2] if len(tokens) > 2 else ""
    active = len(tokens) > 3 and tokens[3] == "1"
    return PasswdEntry(tokens[0], tokens[1], group, active)


def parse_passwd(text: str) -> list[PasswdEntry]:
    """All user lines of a passwd file, in order (inactive ones included)."""
    return [e for e in map(parse_passwd_line, text.splitlines()) if e is not None]


def format_passwd(entries: list[PasswdEntry]) -> str:
    """The file text for ``entries``: four non-empty fields a line, UTF-8, LF endings."""
    return "".join(e.line() + "\n" for e in entries)


def _record(entry: PasswdEntry) -> UserRecord:
    groups = frozenset([entry.group]) if entry.group else frozenset()
    return UserRecord(entry.username, entry.password_digest, entry.active, groups)


class FileUserRepository:
    """Users from a passwd file (blocking: call off the event loop)."""

    kind = "file"
    # The broker checks the password digest of the record lookup() finds.
    verify_basic = None

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._users: dict[str, UserRecord] = {}

    def _load(self) -> dict[str, UserRecord]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return {}
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._lock:
            if stamp != self._stamp:
                text = self.path.read_text(encoding="utf-8", errors="replace")
                # Disabled users are not loaded (OpenMQ): the broker cannot tell them apart
                # from unknown users.
                self._users = {e.username: _record(e) for e in parse_passwd(text) if e.active}
                self._stamp = stamp
            return self._users

    def lookup(self, username: str) -> UserRecord | None:
        """Return the active user, or None (unknown and disabled users look the same)."""
        return self._load().get(username)

    def ensure_default_users(self) -> list[str]:
        """The file is the administrator's: nothing is created in it."""
        return []

    def describe(self) -> str:
        return f"file {self.path}"
