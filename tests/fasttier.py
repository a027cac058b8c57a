"""The fast tier's guard: a test marked ``fast`` runs in this process only.

``make test-fast`` runs ``pytest -m fast``: the tests marked ``fast`` (a module's
``pytestmark`` or a test's own mark), nothing else.  While such a test runs (its setup, so
the fixtures it pulls in, a session's too, and its call) an audit hook
(:func:`sys.addaudithook`, no patching) refuses what would take it out of the process:

* starting a program or a process (``subprocess``, ``os.fork``, ``os.exec*``,
  ``os.posix_spawn``, ``os.system``): a broker, PostgreSQL, slapd, redis, Chromium, a JVM;
* connecting a socket to a listener that is not this process's own (read from
  ``/proc/net`` and ``/proc/self/fd``): a stand-in server the test runs on its own event
  loop is fine, a broker or database elsewhere is not.

The refused call raises :class:`FastTierViolation`, and the test fails at the end of the
phase even if the code under test swallowed the exception.  A test that needs any of these is
not fast: leave it unmarked.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
    }
)


class FastTierViolation(RuntimeError):
    """A test marked ``fast`` tried to leave the process."""


class _State:
    item: str | None = None  # the node id of the fast test running now
    violations: list[str] = []
    busy: bool = False  # the hook's own /proc reads must not re-enter it


def _own_socket_inodes() -> set[str]:
    inodes: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _listener_inodes(family: int, address: Any) -> set[str]:
    """The inodes of the listening sockets at ``address`` (TCP over IPv4/IPv6, or a
    Unix socket path)."""
    found: set[str] = set()
    if family in (socket.AF_INET, socket.AF_INET6):
        port = f"{address[1]:04X}"
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                lines = Path(table).read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                cols = line.split()
                if cols[1].rsplit(":", 1)[1] == port and cols[3] == "0A":  # LISTEN
                    found.add(cols[9])
    elif family == socket.AF_UNIX and isinstance(address, str | bytes):
        path = os.fsdecode(address)
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
            cols = line.split()
            if len(cols) >= 8 and cols[7] == path:
                found.add(cols[6])
    return found


def _refusal(event: str, args: tuple[Any, ...]) -> str | None:
    if event in PROCESS_EVENTS:
        what = args[0] if args else ""
        return f"{event} {what!r}"[:200]
    if event == "socket.connect":
        sock, address = args[0], args[1]
        listeners = _listener_inodes(sock.family, address)
        if listeners and listeners <= _own_socket_inodes():
            return None  # a stand-in server of this test's own
        return f"socket.connect to {address!r}, a listener outside this process"
    return None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _State.item is None or _State.busy:
        return
    if event not in PROCESS_EVENTS and event != "socket.connect":
        return
    _State.busy = True
    try:
        reason = _refusal(event, args)
    finally:
        _State.busy = False
    if reason:
        message = f"{_State.item} is marked fast but tried {reason}"
        _State.violations.append(message)
        raise FastTierViolation(message)


sys.addaudithook(_audit)


def expect_violation() -> list[str]:
    """The violations recorded so far, taken (the guard's own test provokes one)."""
    taken = list(_State.violations)
    _State.violations.clear()
    return taken


def _guarded(item: pytest.Item):
    _State.item = item.nodeid if item.get_closest_marker("fast") else None
    _State.violations.clear()
    try:
        result = yield
    finally:
        _State.item = None
    if _State.violations:
        pytest.fail("; ".join(expect_violation()), pytrace=False)
    return result


# The setup (fixtures, a session's too) and the call; not the teardown, where a session
# fixture an earlier slow test started (a broker, PostgreSQL) may be stopped.
pytest_runtest_setup = pytest.hookimpl(wrapper=True)(_guarded)
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_guarded)
