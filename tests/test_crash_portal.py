"""The portal and its REST API while the broker is SIGKILLed and started again (same
ports, var home and database), all real processes (redis, broker, daphne).

While the broker is down the pages that need it answer 503 with "the broker at host:port
is not reachable" (no 500, no traceback), the REST API 503 with a JSON ``detail``, the
pages that only need the database (users, access control, log, jobs) keep working, an
administrator can still log in, and /metrics says ``openmq_broker_up 0``; once the broker
is back every one of them answers 200 again without restarting the portal."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from .crash_stack import kill_broker, restart_broker
from .portal_server import PortalStack, start_stack
from .redis import find_redis_server

pytestmark = pytest.mark.timeout(240)

HTTP_TIMEOUT = 30  # answered later than this counts as a hang

NEEDS_BROKER_API = [
    "/api/broker/",
    "/api/broker/metrics/",
    "/api/services/",
    "/api/destinations/",
    "/api/connections/",
    "/api/durables/",
    "/api/transactions/",
    "/api/broker/cluster/",
    "/api/definitions/",
]
NEEDS_BROKER_PAGES = [
    "/",
    "/broker/",
    "/services/",
    "/destinations/",
    "/connections/",
    "/durables/",
    "/transactions/",
    "/cluster/",
]
DATABASE_PAGES = ["/users/", "/acl/", "/log/", "/jobs/", "/api/users/", "/api/logs/"]


@pytest.fixture(scope="module")
def stack() -> Iterator[PortalStack]:
    if find_redis_server() is None:
        pytest.fail("redis-server not found: run `make install-dev`", pytrace=False)
    tmp = Path(tempfile.mkdtemp(prefix="imq-crash-portal-"))
    s = start_stack(tmp)
    try:
        yield s
    finally:
        s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def logged_in(stack: PortalStack, landing: int = 200) -> requests.Session:
    """A session logged in as admin; ``landing`` is the status of the overview it lands
    on (503 while the broker is down)."""
    s = requests.Session()
    s.get(f"{stack.url}/login/", timeout=HTTP_TIMEOUT)
    r = s.post(
        f"{stack.url}/login/",
        data={
            "username": "admin",
            "password": "admin",
            "csrfmiddlewaretoken": s.cookies["csrftoken"],
        },
        headers={"Referer": f"{stack.url}/login/"},
        timeout=HTTP_TIMEOUT,
    )
    assert r.status_code == landing and r.url.rstrip("/") == stack.url, (r.status_code, r.url)
    return s


def test_portal_and_api_through_a_broker_crash(stack: PortalStack) -> None:
    token = requests.post(
        f"{stack.url}/api/token/",
        json={"username": "admin", "password": "admin"},
        timeout=HTTP_TIMEOUT,
    ).json()["token"]
    api = requests.Session()
    api.headers["Authorization"] = f"Token {token}"
    pages = logged_in(stack)

    def get(session: requests.Session, path: str) -> requests.Response:
        return session.get(f"{stack.url}{path}", timeout=HTTP_TIMEOUT)

    for path in NEEDS_BROKER_API + DATABASE_PAGES[4:]:
        assert get(api, path).status_code == 200, path
    for path in NEEDS_BROKER_PAGES + DATABASE_PAGES[:4]:
        assert get(pages, path).status_code == 200, path

    kill_broker(stack.broker)
    address = f"127.0.0.1:{stack.broker.portmapper_port}"
    for path in NEEDS_BROKER_API:
        r = get(api, path)
        assert r.status_code == 503, (path, r.status_code, r.text[:300])
        assert address in r.json()["detail"], (path, r.text)
    for path in NEEDS_BROKER_PAGES:
        r = get(pages, path)
        assert r.status_code == 503, (path, r.status_code, r.text[:300])
        assert f"The broker at {address} is not reachable" in r.text, (path, r.text[:2000])
        assert "Traceback" not in r.text
    for path in DATABASE_PAGES:
        r = get(api if path.startswith("/api/") else pages, path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
    logged_in(stack, 503)  # logging in needs only the database
    r = requests.get(f"{stack.url}/metrics", timeout=HTTP_TIMEOUT)
    assert r.status_code == 200 and "openmq_broker_up 0" in r.text, r.text[:500]

    restart_broker(stack.broker)
    for path in NEEDS_BROKER_API + DATABASE_PAGES[4:]:
        r = get(api, path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
    for path in NEEDS_BROKER_PAGES + DATABASE_PAGES[:4]:
        r = get(pages, path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
    r = requests.get(f"{stack.url}/metrics", timeout=HTTP_TIMEOUT)
    assert "openmq_broker_up 1" in r.text, r.text[:500]
