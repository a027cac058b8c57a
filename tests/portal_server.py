"""The whole portal stack for browser tests, screenshots and benchmarks, all real processes.

:func:`start_stack` starts, in one temporary directory:

* a redis-server on a loopback port (tests/redis.py's :class:`RedisServer`), the Channels
  layer the broker publishes its live samples on;
* a broker (:func:`broker.launcher.start_broker`) with its own SQLite database, migrated,
  and ``REDIS_URL`` in its environment;
* ``daphne portal.asgi:application`` on a free loopback port, on the same ``DATABASE_URL``,
  ``IMQ_VARHOME``/``IMQ_INSTANCE`` (so the portal reads the broker's configuration, e.g.
  its user repository), ``IMQ_PORT`` (the portal's admin connection goes to this broker)
  and ``REDIS_URL``.

It returns a :class:`PortalStack`; ``stack.url`` is the portal's base URL. Broker
properties that the portal must see as well (the LDAP user repository) go in
``config_props``: they are written to the instance's ``config.properties`` before the
broker starts, which both processes read.

``portal_server`` is a session fixture of one such stack (import it into a test module
with ``from tests.portal_server import portal_server  # noqa: F401``).  Without pytest::

    with start_stack(Path(tempfile.mkdtemp())) as stack:
        print(stack.url)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.commandlines import portal_command
from broker.launcher import BrokerProcess, free_port, start_broker

from .manage_fork import ForkedProcess, popen, run_manage
from .redis import RedisServer, find_redis_server

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class PortalStack:
    """A running redis + broker + daphne portal (see the module docstring)."""

    url: str
    port: int
    broker: BrokerProcess
    redis: RedisServer
    env: dict[str, str]
    proc: subprocess.Popen | ForkedProcess
    log_path: Path
    tmp: Path
    own_tmp: bool = False
    extra: dict = field(default_factory=dict)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def django(self, code: str, timeout: float = 60) -> str:
        """Run Python ``code`` with Django set up on the stack's database (a child
        process, as the test process has a database of its own: ``manage.py shell``,
        forked from tests/manage_fork.py's server with the libraries imported); its
        stdout."""
        # Its output is read when it has exited: unbuffered output is the daphne log's
        # need, and a variable the fork server's interpreter does not have.
        env = {k: v for k, v in self.env.items() if k != "PYTHONUNBUFFERED"}
        done = run_manage(["shell", "-v", "0", "-c", code], env=env, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"django code failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def create_user(
        self, username: str, password: str, groups: tuple[str, ...] = ("user",)
    ) -> None:
        """A broker user in the shared database (broker.security.users.create_user)."""
        self.django(
            "from broker.security.users import create_user\n"
            f"create_user({username!r}, {password!r}, {list(groups)!r})\n"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.broker.stop()
        self.redis.stop()
        if self.own_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> PortalStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _write_config(varhome: Path, instance: str, props: dict[str, str]) -> None:
    path = varhome / "instances" / instance / "props" / "config.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")


def wait_http(
    url: str, proc: subprocess.Popen | ForkedProcess, log: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"daphne exited ({proc.returncode}):\n{log.read_text(errors='replace')}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the portal did not answer at {url}:\n{log.read_text(errors='replace')}")


def start_portal(
    tmp: Path,
    broker: BrokerProcess,
    redis_url: str,
    *,
    admin_user: str | None = "admin",
    admin_password: str = "admin",
    extra_env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen | ForkedProcess, int, dict[str, str], Path]:
    """Start daphne serving portal.asgi for ``broker``; (process, port, env, log path).
    ``admin_user`` None: the portal logs in to the broker with its own account
    (broker/admintools/credentials.py), as it does unless told otherwise."""
    env = dict(broker.extra["env"])
    if admin_user is not None:
        env.update({"IMQ_ADMIN_USER": admin_user, "IMQ_ADMIN_PASSWORD": admin_password})
    else:
        for name in ("IMQ_ADMIN_USER", "IMQ_ADMIN_PASSWORD", "IMQ_ADMIN_PASSWORD_FILE"):
            env.pop(name, None)
    env.update(
        {
            "REDIS_URL": redis_url,
            "IMQ_VARHOME": str(broker.varhome),
            "IMQ_INSTANCE": broker.instance,
            "IMQ_BROKER_HOST": broker.host,
            "IMQ_PORT": str(broker.portmapper_port),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
    )
    log_path = tmp / "daphne-stdout.txt"
    for attempt in range(3):  # a free port can be taken before daphne binds it
        port = free_port()
        out = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
        # Forked from tests/manage_fork.py's server (Django and DRF imported) as a
        # manage.py command is: ~1.5 s of CPU less a portal.
        proc = popen(
            portal_command(port),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", proc, log_path)
            return proc, port, env, log_path
        except RuntimeError:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def start_stack(
    tmp: Path | None = None,
    *broker_props: str,
    config_props: dict[str, str] | None = None,
    admin_user: str | None = "admin",
    admin_password: str = "admin",
    instance: str = "testbroker",
) -> PortalStack:
    """Start redis, a broker and the portal (see the module docstring)."""
    binary = find_redis_server()
    if binary is None:
        raise RuntimeError("redis-server is not installed (make install-dev installs it)")
    own = tmp is None
    tmp = Path(tempfile.mkdtemp(prefix="imq-portal-")) if tmp is None else tmp
    redis = RedisServer(binary)
    redis.start()
    broker = None
    try:
        if config_props:
            _write_config(tmp / "var", instance, config_props)
        saved = os.environ.get("REDIS_URL")
        os.environ["REDIS_URL"] = redis.url  # start_broker passes os.environ on
        try:
            broker = start_broker(tmp, *broker_props, instance=instance)
        finally:
            if saved is None:
                os.environ.pop("REDIS_URL", None)
            else:
                os.environ["REDIS_URL"] = saved
        proc, port, env, log_path = start_portal(
            tmp, broker, redis.url, admin_user=admin_user, admin_password=admin_password
        )
    except BaseException:
        if broker is not None:
            broker.stop()
        redis.stop()
        if own:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return PortalStack(
        url=f"http://127.0.0.1:{port}",
        port=port,
        broker=broker,
        redis=redis,
        env=env,
        proc=proc,
        log_path=log_path,
        tmp=tmp,
        own_tmp=own,
    )


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def portal_server() -> Iterator[PortalStack]:
    """One portal stack (redis + broker + daphne) for the session."""
    if find_redis_server() is None:
        pytest.fail("redis-server not found: run `make install-dev`", pytrace=False)
    stack = start_stack()
    try:
        yield stack
    finally:
        stack.stop()


def playwright_expect():
    """Playwright's ``expect``; the module fails (never skips) naming what is missing."""
    try:
        from playwright.sync_api import expect
    except ImportError as exc:
        pytest.fail(
            f"the Python package playwright is not installed ({exc}): run `make install-dev` "
            "(it installs requirements-dev.lock into .venv)",
            pytrace=False,
        )
    return expect


@pytest.fixture(scope="module")
def chromium():
    """Debian's headless Chromium driven by Playwright (no browser download)."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            "Debian's chromium is not installed (/usr/bin/chromium): run `make install-dev`",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
