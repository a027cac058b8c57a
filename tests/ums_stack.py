"""A portal stack (redis + broker + daphne) for the UMS tests, with a short sid cache.

The broker gets an access-control file where queue ``secret`` refuses guest (produce and
consume) and user ``alice`` exists; the portal's UMS sweeps every 0.5 s and forgets a sid
idle for 4 s, so expiry is seen within a test.  Test modules take it with
``from .ums_stack import ums_stack_fixture  # noqa: F401``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.security.acl import DEFAULT_RULES

from .portal_server import PortalStack, start_stack
from .redis import find_redis_server

UMS_ENV = {"UMS_CACHE_DURATION": "4000", "UMS_SWEEP_INTERVAL": "500"}


@pytest.fixture(scope="module", name="ums_stack")
def ums_stack_fixture() -> Iterator[PortalStack]:
    if find_redis_server() is None:
        pytest.fail("redis-server not found: run `make install-dev`", pytrace=False)
    tmp = Path(tempfile.mkdtemp(prefix="imq-ums-"))
    acl = tmp / "acl"
    acl.mkdir()
    (acl / "ums.acl").write_text(
        "\n".join(f"{k}={v}" for k, v in DEFAULT_RULES.items())
        + "\nqueue.secret.produce.deny.user=guest\nqueue.secret.consume.deny.user=guest\n"
    )
    saved = {k: os.environ.get(k) for k in UMS_ENV}
    os.environ.update(UMS_ENV)  # the broker's environment, which the portal inherits
    try:
        stack = start_stack(
            tmp,
            f"imq.accesscontrol.file.dirpath={acl}",
            "imq.accesscontrol.file.filename=ums.acl",
        )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        stack.create_user("alice", "wonderland")
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(tmp, ignore_errors=True)
