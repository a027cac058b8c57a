"""The portal's definitions and message workflow pages in headless Chromium (Playwright)
against a real daphne, broker and redis-server (tests/portal_server.py): download and
upload definitions (dry run, refusal, import), publish, move/copy selected messages,
delete by selector, retry from the DMQ; each in the audit log with the administrator."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest

from broker.admintools.actions import AdminError
from broker.admintools.actions.destinations import query_destination
from broker.admintools.actions.messages import list_messages
from broker.admintools.broker_handle import BrokerAdmin
from openmq_client import Queue, TextMessage
from openmq_client.sync import connect

from .portal_server import playwright_expect
from .test_portal_pages import WAIT, login_admin

expect = playwright_expect()


@pytest.fixture
def page(chromium):  # noqa: F811
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(WAIT)
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture
def admin(portal_server):  # noqa: F811
    a = BrokerAdmin(portal_server.broker.host, portal_server.broker.portmapper_port)
    yield a
    a.close()


def audit(stack, *fragments: str) -> list[int]:
    """How many of the administrator's audit records hold each of ``fragments`` (one
    process for them all: each is a Django start)."""
    out = stack.django(
        "from broker.models import LogRecord\n"
        "q = LogRecord.objects.filter(logger='broker.audit', message__startswith='admin: ')\n"
        f"print(*[q.filter(message__contains=f).count() for f in {list(fragments)!r}])\n"
    )
    return [int(n) for n in out.split()[-len(fragments) :]]


def previews(admin: BrokerAdmin, queue: str) -> list[str]:
    return [m["preview"] for m in list_messages(admin, queue, limit=1000)]


def test_definitions_download_and_upload(page, portal_server, admin, tmp_path):  # noqa: F811
    base = portal_server.url
    login_admin(page, base)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Definitions").click()
    expect(page.get_by_role("heading", name="Definitions", exact=True)).to_be_visible()
    with page.expect_download() as info:
        page.locator("#definitions-download").click()
    doc = json.loads(open(info.value.path()).read())
    assert doc["format"] == "openmq-py definitions"
    assert any(u["username"] == "admin" for u in doc["users"])

    name = f"pages.defs.{uuid.uuid4().hex[:6]}"
    doc["destinations"].append({"name": name, "type": "queue", "attributes": {"maxNumMsgs": 42}})
    good = tmp_path / "good.json"
    good.write_text(json.dumps(doc))
    page.locator("input[type=file]").set_input_files(str(good))
    page.get_by_role("button", name="Upload").click()  # dry run is ticked by default
    expect(page.locator("#definitions-result h2")).to_contain_text("Dry run")
    expect(page.locator("#definitions-changes")).to_contain_text(f"queue {name}")
    with pytest.raises(AdminError):
        query_destination(admin, "q", name)

    page.locator("input[type=file]").set_input_files(str(good))
    page.get_by_label("Dry run: only show what would change").uncheck()
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#definitions-result h2")).to_have_text("Imported")
    expect(page.get_by_text("1 created", exact=False)).to_be_visible()
    assert query_destination(admin, "q", name)["attributes"]["maxNumMsgs"] == 42
    assert audit(portal_server, "imported definitions: 1 created") == [1]

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"users": [{"username": "x", "password": "plain"}], "oops": 1}))
    page.locator("input[type=file]").set_input_files(str(bad))
    page.get_by_role("button", name="Upload").click()
    errors = page.locator("#definitions-errors")
    expect(errors).to_contain_text("unknown sections: oops")
    expect(errors).to_contain_text("plain passwords are not accepted")


def test_publish_move_copy_delete(page, portal_server, admin):  # noqa: F811
    base = portal_server.url
    src = f"pages.src.{uuid.uuid4().hex[:6]}"
    dst = f"pages.dst.{uuid.uuid4().hex[:6]}"
    login_admin(page, base)
    for n in range(3):
        page.goto(f"{base}/destinations/q/{src}/publish/")
        page.get_by_label("Body").fill(f"hello {n}")
        page.get_by_label("Properties").fill(f"n={n}\nregion=eu")
        page.get_by_role("button", name="Publish").click()
        expect(page.get_by_text("Published message ID:")).to_be_visible()
    assert previews(admin, src) == ["hello 0", "hello 1", "hello 2"]
    props = list_messages(admin, src)[0]["properties"]
    assert props == {"n": 0, "region": "eu"}

    # A bad property line is refused on the form.
    page.goto(f"{base}/destinations/q/{src}/publish/")
    page.get_by_label("Properties").fill("no equals sign")
    page.get_by_role("button", name="Publish").click()
    expect(page.get_by_text("line 1: expected name=value")).to_be_visible()

    page.goto(f"{base}/destinations/q/{src}/messages/")
    boxes = page.locator("#messages input[type=checkbox]")
    expect(boxes).to_have_count(3)
    boxes.nth(0).check()
    boxes.nth(2).check()
    page.locator("#transfer-mode").select_option("move")
    page.locator("#transfer-target").fill(dst)
    page.locator("#transfer-button").click()
    expect(page.get_by_text(f"Moved 2 message(s) to queue {dst}")).to_be_visible()
    assert previews(admin, src) == ["hello 1"]
    assert previews(admin, dst) == ["hello 0", "hello 2"]

    page.locator("#messages input[type=checkbox]").nth(0).check()
    page.locator("#transfer-mode").select_option("copy")
    page.locator("#transfer-target").fill(dst)
    page.locator("#transfer-button").click()
    expect(page.get_by_text(f"Copied 1 message(s) to queue {dst}")).to_be_visible()
    assert previews(admin, src) == ["hello 1"] and len(previews(admin, dst)) == 3

    # Nothing ticked: said so, nothing done.
    page.locator("#transfer-target").fill(dst)
    page.locator("#transfer-button").click()
    expect(page.get_by_text("No message selected")).to_be_visible()

    page.goto(f"{base}/destinations/q/{dst}/messages/")
    page.locator("#delete-selector").fill("n = 0 OR n = 1")
    page.get_by_role("button", name="Delete…").last.click()
    expect(
        page.get_by_text(f"Really delete every message of queue {dst} that matches")
    ).to_be_visible()
    page.get_by_role("button", name="Delete messages").click()
    expect(page.get_by_text("Deleted the messages matching n = 0 OR n = 1.")).to_be_visible()
    assert previews(admin, dst) == ["hello 2"]

    assert audit(
        portal_server,
        f"to queue {src}",  # published
        f"moved 2 message(s) from queue {src} to queue {dst}",
        f"copied 1 message(s) from queue {src} to queue {dst}",
        f"deleted 2 message(s) matching n = 0 OR n = 1 from queue {dst}",
    ) == [3, 1, 1, 1]


def test_retry_from_the_dmq_page(page, portal_server, admin):  # noqa: F811
    """A message rejected by a full queue goes to the DMQ; retried from the DMQ's page
    (after making room) it is back in its queue with a redelivery note."""
    base = portal_server.url
    queue = f"pages.full.{uuid.uuid4().hex[:6]}"
    admin.create_destination(queue, 1, {"maxNumMsgs": 1, "limitBehavior": "REMOVE_OLDEST"})
    conn = connect(portal_server.broker.host, portal_server.broker.portmapper_port)
    try:
        producer = conn.create_session().create_producer(Queue(queue))
        for text in ("first", "second"):
            producer.send(TextMessage(text), persistent=True)
    finally:
        conn.close()
    deadline = time.monotonic() + 30
    dead = []
    while time.monotonic() < deadline and not dead:
        dead = [
            m for m in list_messages(admin, "mq.sys.dmq", limit=1000) if m["preview"] == "first"
        ]
        time.sleep(0.2)
    assert dead, "the removed oldest message did not reach the DMQ"
    admin.update_destination(queue, 1, {"maxNumMsgs": 10})

    login_admin(page, base)
    page.goto(f"{base}/destinations/q/mq.sys.dmq/messages/")
    page.get_by_role("checkbox", name=f"select {dead[0]['id']}").check()
    page.locator("#retry-button").click()
    expect(page.get_by_text(f"Retried 1 message(s) (1 to queue {queue})")).to_be_visible()
    back = list_messages(admin, queue)
    assert sorted(m["preview"] for m in back) == ["first", "second"]
    first = next(m for m in back if m["preview"] == "first")
    assert "retried from mq.sys.dmq by admin" in first["properties"]["JMS_PY_REDELIVERY_NOTE"]
    assert audit(portal_server, f"retried 1 message(s) from mq.sys.dmq (1 to queue {queue})") == [1]


def test_destination_page_live_rates_and_readable_metrics(page, portal_server, admin):  # noqa: F811
    """While a producer sends, the destination page's live rates (from the broker's
    samples over the WebSocket) show messages coming in and the uPlot chart is drawn;
    the metrics table shows bytes in KiB/MiB."""
    from .test_portal_pages import Producer

    queue = f"pages.live.{uuid.uuid4().hex[:6]}"
    admin.create_destination(queue, 1, {})
    login_admin(page, portal_server.url)
    page.goto(f"{portal_server.url}/destinations/q/{queue}/")
    producer = Producer(portal_server, queue)
    producer.start()
    try:
        expect(page.locator("#live-in")).to_have_text(re.compile(r"^(?!0$)[0-9.]+$"))
        expect(page.locator("#live-chart canvas")).to_have_count(1)
        expect(page.locator("#live-status")).to_contain_text("Live: updated")
    finally:
        producer.stop()
    assert producer.error is None and producer.sent > 0
    page.reload()
    metrics = page.locator("section.card", has=page.get_by_role("heading", name="Metrics"))
    expect(metrics.locator("tr", has_text="msgBytesIn")).to_contain_text(re.compile(r"(B|KiB)"))
    # Once quiet, the rate goes back to 0 (a destination with no traffic is not listed).
    expect(page.locator("#live-in")).to_have_text("0")


def test_admin_reply_queues_are_not_counted(page, portal_server):  # noqa: F811
    """The temporary reply queue of the portal's own admin connection (and imqcmd's) is
    hidden from the destination list and its count; a client's temporary queue is not."""
    conn = connect(portal_server.broker.host, portal_server.broker.portmapper_port)
    try:
        temp = conn.create_temporary_queue()
        login_admin(page, portal_server.url)
        page.goto(f"{portal_server.url}/destinations/?temporary=on&name=temporary")
        rows = page.locator("table tbody tr", has_text="temporary_destination")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(temp.name)
        expect(page.locator("p.count")).to_have_text("1 destination")
    finally:
        conn.close()
