"""A portal stack (redis + broker + daphne) plus the UMS gateway process (uvicorn serving
portal.asgi, as ``manage.py up`` runs it) for the UMS tests, with a short sid cache.

``ums_stack.url`` is the gateway's; ``ums_stack.portal.url`` the daphne portal's, whose
/ums/ answers too (the same lean ASGI path in front of Django).

The broker gets an access-control file where queue ``secret`` refuses guest (produce and
consume) and user ``alice`` exists; the portal's UMS sweeps every 0.5 s and forgets a sid
idle for 4 s, so expiry is seen within a test.  Test modules take it with
``from .ums_stack import ums_stack_fixture  # noqa: F401``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.commandlines import ums_gateway_command
from broker.launcher import free_port
from broker.security.acl import DEFAULT_RULES

from .manage_fork import ForkedProcess, popen
from .portal_server import ROOT, PortalStack, start_stack, wait_http
from .redis import find_redis_server

UMS_ENV = {"UMS_CACHE_DURATION": "4000", "UMS_SWEEP_INTERVAL": "500"}


@dataclass
class UmsStack:
    """A portal stack and the UMS gateway process in front of its broker."""

    portal: PortalStack
    proc: subprocess.Popen | ForkedProcess
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def broker(self):  # noqa: ANN201 - BrokerProcess
        return self.portal.broker

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.portal.stop()

    def __enter__(self) -> UmsStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def jms_receive(broker, dest: str, count: int = 1) -> list:
    """What a JMS consumer of queue ``dest`` gets, ``count`` receives of up to 10 s each
    (None for one that timed out): the other side of a UMS send."""
    from openmq_client import Queue, connect

    async def receive() -> list:
        conn = await connect(broker.host, broker.portmapper_port)
        try:
            cons = await (await conn.create_session()).create_consumer(Queue(dest))
            await conn.start()
            return [await cons.receive(10) for _ in range(count)]
        finally:
            await conn.close()

    return asyncio.run(receive())


def start_gateway(portal: PortalStack) -> UmsStack:
    """``manage.py up``'s UMS gateway process for ``portal`` (its environment, broker and
    database)."""
    log_path = portal.tmp / "ums-gateway-stdout.txt"
    for attempt in range(3):  # a free port can be taken before uvicorn binds it
        port = free_port()
        out = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
        # Forked from tests/manage_fork.py's server, as tests/portal_server.py's portal.
        proc = popen(
            ums_gateway_command(port),
            cwd=ROOT,
            env=portal.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", proc, log_path)
            return UmsStack(portal, proc, port, log_path)
        except RuntimeError:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@contextmanager
def running_ums(
    prefix: str,
    props: Callable[[Path], Sequence[str]] = lambda tmp: (),
    env: dict[str, str] | None = None,
    users: dict[str, str] | None = None,
) -> Iterator[UmsStack]:
    """A portal stack (broker ``-D`` properties from ``props(tmp)``, ``env`` in the broker's
    environment, which the portal inherits), ``users`` created, and the UMS gateway in
    front of it; everything stopped and removed at the end."""
    if find_redis_server() is None:
        pytest.fail("redis-server not found: run `make install-dev`", pytrace=False)
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    env = env or {}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        portal = start_stack(tmp, *props(tmp))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        for user, password in (users or {}).items():
            portal.create_user(user, password)
        ums = start_gateway(portal)
    except BaseException:
        portal.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        yield ums
    finally:
        ums.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _acl_props(tmp: Path) -> list[str]:
    acl = tmp / "acl"
    acl.mkdir()
    (acl / "ums.acl").write_text(
        "\n".join(f"{k}={v}" for k, v in DEFAULT_RULES.items())
        + "\nqueue.secret.produce.deny.user=guest\nqueue.secret.consume.deny.user=guest\n"
    )
    return [f"imq.accesscontrol.file.dirpath={acl}", "imq.accesscontrol.file.filename=ums.acl"]


@pytest.fixture(scope="module", name="ums_stack")
def ums_stack_fixture() -> Iterator[UmsStack]:
    with running_ums("imq-ums-", _acl_props, UMS_ENV, {"alice": "wonderland"}) as ums:
        yield ums
