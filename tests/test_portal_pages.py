"""The portal's pages in a real headless Chromium (Playwright, Debian's chromium), against
a real daphne serving portal.asgi, a real broker and a real redis-server
(tests/portal_server.py): login, refusals, the live overview, a destination's life.

No timing assertions: Playwright's expect() waits (generously) for what must appear.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Iterator

import pytest

from broker.launcher import free_port, start_broker
from openmq_client import Queue, TextMessage
from openmq_client.sync import connect

from .ldap import ldap_server  # noqa: F401 - a real slapd for the LDAP login
from .portal_server import (
    PortalStack,
    playwright_expect,
    start_portal,
    start_stack,
)

expect = playwright_expect()

WAIT = 30_000  # ms: what Playwright's expect() waits at most


@pytest.fixture
def page(chromium):  # noqa: F811
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(WAIT)
    try:
        yield pg
    finally:
        context.close()


def login(page, base: str, username: str = "admin", password: str = "admin") -> None:
    page.goto(base + "/login/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def login_admin(page, base: str) -> None:
    login(page, base)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=WAIT)


def send_texts(stack: PortalStack, queue: str, texts: list[str]) -> None:
    conn = connect(stack.broker.host, stack.broker.portmapper_port)
    try:
        producer = conn.create_session().create_producer(Queue(queue))
        for text in texts:
            producer.send(TextMessage(text), persistent=False)
    finally:
        conn.close()


class Producer(threading.Thread):
    """Sends small text messages to a queue until stopped."""

    def __init__(self, stack: PortalStack, queue: str) -> None:
        super().__init__(daemon=True)
        self.stack, self.queue = stack, queue
        self.stopping = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = connect(self.stack.broker.host, self.stack.broker.portmapper_port)
            try:
                producer = conn.create_session().create_producer(Queue(self.queue))
                while not self.stopping.wait(0.02):
                    producer.send(TextMessage(f"live {self.sent}"), persistent=False)
                    self.sent += 1
            finally:
                conn.close()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


# --------------------------------------------------------------------------------------
# Login
# --------------------------------------------------------------------------------------


def test_login_as_admin(page, portal_server):  # noqa: F811
    login_admin(page, portal_server.url)
    nav = page.get_by_role("navigation", name="Main")
    for name in (
        "Overview",
        "Broker",
        "Services",
        "Destinations",
        "Connections",
        "Durables",
        "Transactions",
        "Users",
        "Access control",
        "Log",
    ):
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.locator("#broker-instance")).to_have_text(portal_server.broker.instance)
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()


def test_wrong_password_is_refused(page, portal_server):  # noqa: F811
    login(page, portal_server.url, "admin", "not-the-password")
    expect(page.get_by_role("alert")).to_contain_text("Wrong user name or password")
    expect(page.get_by_role("navigation", name="Main")).to_have_count(0)
    page.goto(portal_server.url + "/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))


def test_non_admin_sees_only_the_login_page(page, portal_server):  # noqa: F811
    portal_server.create_user("bob", "bobpw", ("user",))
    login(page, portal_server.url, "bob", "bobpw")
    expect(page.get_by_role("alert")).to_contain_text("bob is not an administrator")
    expect(page.get_by_role("navigation", name="Main")).to_have_count(0)
    # A direct URL goes to the login page, with nothing of the page asked for.
    page.goto(portal_server.url + "/destinations/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/destinations/$"))
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    expect(page.locator("#destinations")).to_have_count(0)
    assert "mq.sys.dmq" not in page.content()


def test_every_page_renders(page, portal_server):  # noqa: F811
    login_admin(page, portal_server.url)
    nav = page.get_by_role("navigation", name="Main")
    headings = {
        "Broker": "Broker testbroker",
        "Cluster": "Cluster",
        "Services": "Services",
        "Destinations": "Destinations",
        "Connections": "Connections",
        "Durables": "Durable subscriptions",
        "Transactions": "Transactions",
        "Users": "Users",
        "Access control": "Access control rules",
        "Log": "Log records",
    }
    for link, heading in headings.items():
        nav.get_by_role("link", name=link, exact=True).click()
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    page.goto(portal_server.url + "/services/jms/")
    expect(page.get_by_role("heading", name="Service jms")).to_be_visible()
    page.goto(portal_server.url + "/broker/shutdown/")
    expect(page.locator(".question")).to_contain_text("Really shut down the broker")
    page.get_by_role("link", name="Cancel").click()  # and nothing happens
    expect(page.get_by_role("heading", name="Broker testbroker")).to_be_visible()


def test_users_create_and_delete(page, portal_server):  # noqa: F811
    base = portal_server.url
    login_admin(page, base)
    page.goto(base + "/users/new/")
    page.get_by_label("User name").fill("carol")
    page.get_by_label("Password").fill("carolpw")
    page.get_by_label("Groups").fill("user, billing")
    page.get_by_role("button", name="Create user").click()
    expect(page.get_by_role("status")).to_contain_text("Created user carol.")
    row = page.locator("#users tr", has_text="carol")
    expect(row).to_contain_text("billing, user")
    row.get_by_role("link", name="Delete…").click()
    expect(page.locator(".question")).to_contain_text("Really delete user carol?")
    page.get_by_role("button", name="Delete user").click()
    expect(page.get_by_role("status")).to_contain_text("Deleted user carol.")
    expect(page.locator("#users tr", has_text="carol")).to_have_count(0)
    page.goto(base + "/log/?text=carol")
    expect(page.locator("#log")).to_contain_text("admin: created user carol")
    expect(page.locator("#log")).to_contain_text("admin: deleted user carol")


# --------------------------------------------------------------------------------------
# The live overview
# --------------------------------------------------------------------------------------


def test_overview_updates_live_while_a_producer_sends(page, portal_server):  # noqa: F811
    login_admin(page, portal_server.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    row = page.locator('#deepest tr[data-name="portalLiveQ"]')
    expect(row).to_have_count(0)
    page.evaluate("window.__sameDocument = true")  # gone if the page reloaded
    producer = Producer(portal_server, "portalLiveQ")
    producer.start()
    try:
        # The queue appears among the deepest destinations and its depth keeps growing,
        # messages in per second climbs to the producer's rate (about 50/s; the portal's
        # own admin requests stay far below 10/s) -- all without reloading the page.
        expect(row).to_be_visible(timeout=WAIT)
        depth = row.locator("td.messages")
        expect(depth).not_to_have_text("0")
        first = depth.inner_text()
        expect(depth).not_to_have_text(first, timeout=WAIT)
        expect(page.locator("#fig-msgs-in")).to_have_text(
            re.compile(r"^([1-9]\d+(\.\d+)?|[\d.]+k)$")
        )
        # The broker's event-loop lag, p99 / max in ms, from the same live samples.
        expect(page.locator("#fig-loop-lag")).to_have_text(re.compile(r"^[\d.]+k? / [\d.]+k?$"))
        expect(page.locator("#chart-rates polyline.in")).to_have_count(1)
        expect(page.locator("#chart-connections polyline.conn")).to_have_count(1)
        assert page.evaluate("window.__sameDocument") is True
    finally:
        producer.stop()
    assert producer.error is None, producer.error
    assert producer.sent > 0


# --------------------------------------------------------------------------------------
# A destination's life: create, list, send, browse, purge, destroy
# --------------------------------------------------------------------------------------


def test_create_browse_purge_destroy_a_queue(page, portal_server):  # noqa: F811
    base = portal_server.url
    login_admin(page, base)

    # Create through the form.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Destinations").click()
    page.get_by_role("link", name="Create destination…").click()
    page.get_by_label("Type", exact=True).select_option("q")
    page.get_by_label("Name", exact=True).fill("portalOrders")
    page.get_by_label("maxNumMsgs", exact=True).fill("1000")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status")).to_contain_text("Created queue portalOrders.")
    expect(page.locator("#dest-name")).to_have_text("portalOrders")

    # It is in the list.
    page.goto(base + "/destinations/?name=portalOrd")
    row = page.locator('#destinations tr[data-name="portalOrders"]')
    expect(row).to_be_visible()

    # Send three messages and browse them.
    send_texts(portal_server, "portalOrders", ["order one", "order <two> & more", "order three"])
    page.goto(base + "/destinations/q/portalOrders/")
    expect(page.locator("#dest-messages")).to_have_text("3")
    page.get_by_role("link", name="Browse messages").click()
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(3)
    rows.nth(1).locator("td").nth(2).get_by_role("link").click()  # after the select box
    # The body is shown as text, escaped (the angle brackets are text, not markup).
    expect(page.locator("#body-preview")).to_have_text("order <two> & more")
    expect(page.locator("#headers")).to_be_visible()

    # Purge, with a confirmation.
    page.goto(base + "/destinations/q/portalOrders/")
    page.get_by_role("link", name="Purge…").click()
    expect(page.locator(".question")).to_contain_text("Really purge queue portalOrders?")
    page.get_by_role("button", name="Purge").click()
    expect(page.get_by_role("status")).to_contain_text("Purged queue portalOrders.")
    expect(page.locator("#dest-messages")).to_have_text("0")

    # Destroy, with a confirmation; Cancel first changes nothing.
    page.get_by_role("link", name="Destroy…").click()
    page.get_by_role("link", name="Cancel").click()
    expect(page.locator("#dest-name")).to_have_text("portalOrders")
    page.get_by_role("link", name="Destroy…").click()
    expect(page.locator(".question")).to_contain_text("Really destroy queue portalOrders?")
    page.get_by_role("button", name="Destroy").click()
    expect(page.get_by_role("status")).to_contain_text("Destroyed queue portalOrders.")
    expect(page.get_by_role("heading", name="Destinations")).to_be_visible()
    expect(page.locator('#destinations tr[data-name="portalOrders"]')).to_have_count(0)

    # Every change is in the log with who made it.
    page.goto(base + "/log/?text=portalOrders")
    log = page.locator("#log")
    for what in (
        "created queue portalOrders",
        "purged queue portalOrders",
        "destroyed queue portalOrders",
    ):
        expect(log).to_contain_text(f"admin: {what}")


def test_create_destination_form_shows_every_error_beside_its_field(page, portal_server):  # noqa: F811
    """A bad name and three bad attributes are all reported at once, each at its field,
    and nothing is created; corrected, the same form creates the topic."""
    base = portal_server.url
    login_admin(page, base)
    page.goto(base + "/destinations/new/")
    page.get_by_label("Type", exact=True).select_option("t")
    page.get_by_label("Name", exact=True).fill("9lives")
    page.get_by_label("maxNumMsgs", exact=True).fill("lots")
    page.get_by_label("maxBytesPerMsg", exact=True).fill("10 parsecs")
    page.get_by_label("maxNumActiveConsumers", exact=True).fill("2")
    page.get_by_role("button", name="Create").click()

    def beside(label: str):
        return page.get_by_label(label, exact=True).locator("xpath=..")

    expect(beside("Name")).to_contain_text("The Destination of 9lives contains invalid characters")
    expect(beside("maxNumMsgs")).to_contain_text("maxNumMsgs: 'lots' is not an integer")
    expect(beside("maxBytesPerMsg")).to_contain_text("'10 parsecs' is not a size")
    expect(beside("maxNumActiveConsumers")).to_contain_text(
        "maxNumActiveConsumers applies to queues only"
    )
    expect(page.locator(".errorlist")).to_have_count(4)
    # What was typed is still there to be corrected.
    expect(page.get_by_label("maxNumMsgs", exact=True)).to_have_value("lots")

    page.get_by_label("Name", exact=True).fill("lives9")
    page.get_by_label("maxNumMsgs", exact=True).fill("500")
    page.get_by_label("maxBytesPerMsg", exact=True).fill("10k")
    page.get_by_label("maxNumActiveConsumers", exact=True).fill("")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status")).to_contain_text("Created topic lives9.")
    page.goto(base + "/destinations/?name=lives")
    expect(page.locator('#destinations tr[data-name="lives9"]')).to_be_visible()
    expect(page.locator('#destinations tr[data-name="9lives"]')).to_have_count(0)


# --------------------------------------------------------------------------------------
# A broker that cannot be reached; LDAP logins
# --------------------------------------------------------------------------------------


def test_unreachable_broker_gives_a_banner(page, portal_server, tmp_path):  # noqa: F811
    """A second portal on the same database, pointed at a port where no broker listens."""
    nowhere = dataclasses.replace(portal_server.broker, portmapper_port=free_port())
    proc, port, _, _ = start_portal(tmp_path, nowhere, portal_server.redis.url)
    try:
        base = f"http://127.0.0.1:{port}"
        login(page, base)  # then the overview, which shows the banner
        banner = page.get_by_role("alert")
        expect(banner).to_contain_text(
            f"The broker at 127.0.0.1:{nowhere.portmapper_port} is not reachable"
        )
        page.goto(base + "/destinations/")
        expect(page.get_by_role("alert")).to_contain_text("is not reachable")
    finally:
        proc.terminate()
        proc.wait(10)


def test_overview_warns_of_shipped_passwords(page, portal_server, tmp_path):  # noqa: F811
    """A broker whose jms service listens on every interface, admin and guest still on
    their shipped passwords: the overview says so (the broker reports them)."""
    redis_url = portal_server.redis.url
    broker = start_broker(tmp_path, "imq.jms.tcp.hostname=0.0.0.0", env={"REDIS_URL": redis_url})
    try:
        deadline = time.monotonic() + 60  # its start's last line comes after the look-up
        while f"broker {broker.instance} ready" not in broker.log_text():
            assert broker.proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        proc, port, _, _ = start_portal(tmp_path, broker, redis_url)
        try:
            login(page, f"http://127.0.0.1:{port}")
            expect(page.get_by_role("alert")).to_contain_text(
                "admin, guest still have their shipped passwords and the broker listens "
                "beyond loopback: anyone who reaches it can log in as those users."
            )
        finally:
            proc.terminate()
            proc.wait(10)
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def ldap_stack(ldap_server) -> Iterator[PortalStack]:  # noqa: F811
    """A broker and portal whose user repository is the LDAP directory (alice is in its
    admin group, bob is not); the portal's own admin connection logs in as alice."""
    props = dict(p.split("=", 1) for p in ldap_server.broker_props())
    stack = start_stack(None, config_props=props, admin_user="alice", admin_password="alicepw")
    try:
        yield stack
    finally:
        stack.stop()


def test_ldap_login(page, ldap_stack):
    login(page, ldap_stack.url, "alice", "wrong")
    expect(page.get_by_role("alert")).to_contain_text("Wrong user name or password")
    login(page, ldap_stack.url, "bob", "bobpw")
    expect(page.get_by_role("alert")).to_contain_text("bob is not an administrator")
    login(page, ldap_stack.url, "alice", "alicepw")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator("#broker-instance")).to_have_text(ldap_stack.broker.instance)
