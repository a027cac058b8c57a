"""A real redis-server for tests: the Channels layer between a broker and the test.

``redis_url`` (session fixture) runs ``/usr/bin/redis-server`` (installed by ``make
install-dev``) bound to 127.0.0.1 on a free port, in a throwaway directory, with no
persistence (no RDB snapshots, no AOF) and protected mode on; it is stopped and its
directory deleted at the end of the session.  :class:`RedisServer` starts one on a
given port for tests that need Redis to come and go.

Use it from a test module through the conftest (``redis_url`` is imported there).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.launcher import free_port

REDIS_SERVER = "/usr/bin/redis-server"


def find_redis_server() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    return REDIS_SERVER if Path(REDIS_SERVER).exists() else None


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One private redis-server: ``start()``, ``url``, ``stop()``."""

    def __init__(self, binary: str, port: int | None = None) -> None:
        self.binary = binary
        self.tmp = Path(tempfile.mkdtemp(prefix="imq-redis-"))
        self.log = self.tmp / "redis.log"
        self.port = port or 0
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30) -> None:
        fixed = bool(self.port)
        for attempt in range(3):  # a free port can be taken before the server binds it
            if not fixed:
                self.port = free_port()
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    "--bind", "127.0.0.1",
                    "--port", str(self.port),
                    "--dir", str(self.tmp),
                    "--save", "",
                    "--appendonly", "no",
                    "--protected-mode", "yes",
                    "--daemonize", "no",
                    "--logfile", str(self.log),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                if _ping(self.port):
                    return
                time.sleep(0.05)
            self.stop_process()
            if fixed or attempt == 2:
                log = self.log.read_text(errors="replace") if self.log.exists() else ""
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{log}")

    def stop_process(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def stop(self) -> None:
        self.stop_process()
        shutil.rmtree(self.tmp, ignore_errors=True)


def redis_binary() -> str:
    binary = find_redis_server()
    if binary is None:
        pytest.fail(
            "redis-server not found: run `make install-dev` (it installs Debian's "
            "redis-server package) or `apt-get install redis-server`",
            pytrace=False,
        )
    return binary


@pytest.fixture(scope="session")
def needs_redis_server() -> str:
    """For tests that start a redis-server through something else (``manage.py up``):
    they fail, never skip, naming what is missing."""
    return redis_binary()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """``redis://127.0.0.1:PORT/0`` of a real redis-server for this session."""
    server = RedisServer(redis_binary())
    try:
        server.start()
        yield server.url
    finally:
        server.stop()
