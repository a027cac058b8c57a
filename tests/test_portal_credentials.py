"""Changing passwords keeps the portal reaching the broker: in a real headless Chromium
against a real daphne portal, broker and redis-server (tests/portal_server.py) whose
portal logs in with its own account (no IMQ_ADMIN_USER/IMQ_ADMIN_PASSWORD, as installed):
admin's password changed on the Users page and then with imqusermgr from another process,
the pages, the REST API, /metrics and the expiry job still work against the broker; what
would cut the portal off is refused with what to do; a new secret is picked up."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from broker.admintools.portal_account import PORTAL_ACCOUNT
from tests.manage_fork import run_manage

from .portal_server import (
    PortalStack,
    playwright_expect,
    start_stack,
)

expect = playwright_expect()

WAIT = 30_000  # ms: what Playwright's expect() waits at most


# A second administrator, whose password no test changes: the tests after the first log
# in as ops, so each stands alone (pytest-xdist may give each its own stack).
OPS, OPS_PW = "ops", "0ps-password"


@pytest.fixture(scope="module")
def stack() -> Iterator[PortalStack]:
    s = start_stack(None, admin_user=None)
    try:
        s.create_user(OPS, OPS_PW, ("admin",))
        yield s
    finally:
        s.stop()


@pytest.fixture
def page(chromium):  # noqa: F811
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(WAIT)
    try:
        yield pg
    finally:
        context.close()


def login(page, base: str, username: str, password: str) -> None:
    page.goto(base + "/login/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def imqusermgr(stack: PortalStack, *args: str) -> subprocess.CompletedProcess:
    """``manage.py imqusermgr ARGS`` as an operator runs it: another process, the same
    database and var home, none of the portal's process state."""
    return run_manage(["imqusermgr", *args], env=stack.env, timeout=120)


def api(stack: PortalStack, path: str, token: str = "", body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    req = urllib.request.Request(stack.url + path, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def metrics(stack: PortalStack) -> str:
    with urllib.request.urlopen(stack.url + "/metrics", timeout=60) as r:
        return r.read().decode()


def assert_all_reach_the_broker(page, stack: PortalStack, token: str) -> None:
    """The overview and the destinations page, the REST API, /metrics and the expiry job
    (a Celery task's code, run in a process of its own) all answered by the broker."""
    page.goto(stack.url + "/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator("#broker-instance")).to_have_text(stack.broker.instance)
    page.goto(stack.url + "/destinations/")
    expect(page.get_by_role("link", name="mq.sys.dmq", exact=True)).to_be_visible()
    expect(page.get_by_text("is not reachable")).to_have_count(0)

    broker = api(stack, "/api/broker/", token)
    assert broker["instance"] == stack.broker.instance, broker
    names = {d["name"] for d in api(stack, "/api/destinations/", token)["results"]}
    assert "mq.sys.dmq" in names
    assert re.search(r"^openmq_broker_up 1(\.0)?$", metrics(stack), re.M)

    address = f"{stack.broker.host}:{stack.broker.portmapper_port}"
    out = stack.django(
        "from portal.jobs.expiry import reclaim_on\n"
        f"run = reclaim_on({address!r})\n"
        "print(run.status, run.error)\n"
    )
    assert out.split()[0] == "ok", out


def test_password_changes_keep_the_portal_working(page, stack: PortalStack) -> None:
    login(page, stack.url, "admin", "admin")
    token = api(stack, "/api/token/", body={"username": "admin", "password": "admin"})["token"]
    assert_all_reach_the_broker(page, stack, token)
    secret = (stack.broker.varhome / "portal.secret").read_text().strip()
    assert (stack.broker.varhome / "portal.secret").stat().st_mode & 0o077 == 0

    # admin's password on the Users page, which says what the portal logs in as.
    page.goto(stack.url + "/users/")
    expect(page.locator("#portal-account")).to_contain_text(
        f"log in to the broker as {PORTAL_ACCOUNT}"
    )
    page.goto(stack.url + "/users/admin/")
    page.get_by_label("New password").fill("Adm1n-changed-on-page")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("Updated user admin.")).to_be_visible()
    assert_all_reach_the_broker(page, stack, token)
    with pytest.raises(urllib.error.HTTPError):
        api(stack, "/api/token/", body={"username": "admin", "password": "admin"})

    # Then with imqusermgr, another process: the running portal is not told, and needs
    # not be.
    done = imqusermgr(stack, "update", "-u", "admin", "-p", "Adm1n-by-imqusermgr", "-f")
    assert done.returncode == 0 and "User admin successfully updated." in done.stdout, done
    assert_all_reach_the_broker(page, stack, token)
    fresh = api(
        stack, "/api/token/", body={"username": "admin", "password": "Adm1n-by-imqusermgr"}
    )["token"]
    assert api(stack, "/api/broker/", fresh)["instance"] == stack.broker.instance
    assert (stack.broker.varhome / "portal.secret").read_text().strip() == secret


def test_what_would_cut_the_portal_off_is_refused(page, stack: PortalStack) -> None:
    token = api(stack, "/api/token/", body={"username": OPS, "password": OPS_PW})["token"]
    login(page, stack.url, OPS, OPS_PW)
    page.goto(stack.url + f"/users/{PORTAL_ACCOUNT}/")
    note = page.locator("#portal-account")
    expect(note).to_contain_text(f"{PORTAL_ACCOUNT} is the portal's own broker account")
    expect(note).to_contain_text(str(stack.broker.varhome / "portal.secret"))
    page.get_by_label("New password").fill("taken-over")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("alert")).to_contain_text(
        f"refused to change user {PORTAL_ACCOUNT}'s password: {PORTAL_ACCOUNT} is the "
        "portal's own broker account"
    )
    done = imqusermgr(stack, "delete", "-u", PORTAL_ACCOUNT, "-f")
    assert done.returncode != 0 and "replace that file's content" in done.stderr, done
    assert_all_reach_the_broker(page, stack, token)


def test_a_new_secret_is_picked_up_without_a_restart(page, stack: PortalStack) -> None:
    token = api(stack, "/api/token/", body={"username": OPS, "password": OPS_PW})["token"]
    login(page, stack.url, OPS, OPS_PW)
    (stack.broker.varhome / "portal.secret").write_text("a-rotated-portal-secret-0123456789\n")
    assert_all_reach_the_broker(page, stack, token)
    out = stack.django(
        "from broker.models import BrokerUser\n"
        "from broker.security.digest import password_digest\n"
        f"u = BrokerUser.objects.get(username={PORTAL_ACCOUNT!r})\n"
        f"print(u.password_digest == password_digest({PORTAL_ACCOUNT!r}, "
        "'a-rotated-portal-secret-0123456789'))\n"
    )
    assert out.strip() == "True"
