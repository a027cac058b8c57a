"""The REST API's definitions and message workflows against a real broker process (the
portal in process, DRF's APIClient on the test database), each change in the audit log
with the administrator who made it."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from broker.admintools import security_actions
from broker.launcher import start_broker
from broker.models import BrokerGroup, LogRecord

from .test_rest_api import ADMIN, ADMIN_PW, point_at, token_client, unique

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def dying_broker(tmp_path_factory):
    """A broker that expires messages every second (for the DMQ's retry)."""
    b = start_broker(tmp_path_factory.mktemp("dying"), "imq.message.expiration.interval=1")
    yield b
    b.stop()


@pytest.fixture
def api(dying_broker, settings, tmp_path) -> APIClient:
    point_at(settings, dying_broker, tmp_path)
    security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])
    return token_client(ADMIN, ADMIN_PW)


def audited(text: str) -> bool:
    return LogRecord.objects.filter(
        logger="broker.audit", message__startswith=f"{ADMIN}: ", message__contains=text
    ).exists()


def messages(api: APIClient, queue: str) -> list[dict]:
    r = api.get(f"/api/destinations/queue/{queue}/messages/?limit=1000")
    assert r.status_code == 200, r.content
    return r.json()["results"]


def test_definitions_export_dry_run_import_and_refusal(api):
    r = api.get("/api/definitions/")
    assert r.status_code == 200
    doc = r.json()
    assert doc["format"] == "openmq-py definitions" and "users" in doc
    assert any(u["username"] == ADMIN for u in doc["users"])
    name = unique("defs.q")
    doc["destinations"].append({"name": name, "type": "queue", "attributes": {"maxNumMsgs": 9}})
    doc["groups"].append({"name": "auditors", "description": "read only"})

    r = api.post("/api/definitions/?dry_run=true", doc, format="json")
    assert r.status_code == 200, r.content
    result = r.json()
    assert result["dry_run"] is True
    assert {"section": "destinations", "op": "create", "name": f"queue {name}", "detail": ""} in (
        result["changes"]
    )
    assert not BrokerGroup.objects.filter(name="auditors").exists()

    r = api.post("/api/definitions/", doc, format="json")
    assert r.status_code == 200 and r.json()["summary"]["create"] == 2, r.content
    assert BrokerGroup.objects.filter(name="auditors").exists()
    r = api.get(f"/api/destinations/queue/{name}/")
    assert r.json()["attributes"]["maxNumMsgs"] == 9
    assert audited("imported definitions: 2 created")

    bad = {"users": [{"username": "eve", "password": "x"}], "destinations": "all"}
    r = api.post("/api/definitions/", bad, format="json")
    assert r.status_code == 400
    errors = r.json()["errors"]["document"]
    assert any("plain passwords" in e for e in errors)
    assert any("destinations: must be a list" in e for e in errors)
    r = api.post("/api/definitions/", [1, 2], format="json")
    assert r.status_code == 400
    # Only administrators.
    assert APIClient().get("/api/definitions/").status_code == 401


def test_publish_transfer_delete(api):
    src, dst = unique("wf.src"), unique("wf.dst")
    for n in range(4):
        r = api.post(
            f"/api/destinations/queue/{src}/publish/",
            {"body": f"hello {n}", "properties": {"n": n, "tag": "x"}, "priority": 5},
            format="json",
        )
        assert r.status_code == 200, r.content
        assert r.json()["id"].startswith("ID:")
    r = api.post(
        f"/api/destinations/queue/{src}/publish/",
        {"message_type": "map", "body": {"k": "v"}},
        format="json",
    )
    assert r.status_code == 200
    rows = messages(api, src)
    assert [m["message_type"] for m in rows] == ["text"] * 4 + ["map"]
    assert rows[0]["properties"] == {"n": 0, "tag": "x"} and rows[0]["priority"] == 5
    assert audited(f"published text message {rows[0]['id']} to queue {src}")

    r = api.post(
        f"/api/destinations/queue/{src}/messages/transfer/",
        {"mode": "move", "target": dst, "ids": [rows[0]["id"], rows[1]["id"]]},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert r.json()["count"] == 2 and r.json()["left_in_source"] == []
    assert [m["preview"] for m in messages(api, dst)] == ["hello 0", "hello 1"]
    assert len(messages(api, src)) == 3
    assert audited(f"moved 2 message(s) from queue {src} to queue {dst}")

    r = api.post(
        f"/api/destinations/queue/{src}/messages/transfer/",
        {"mode": "copy", "target": dst, "selector": "n = 3"},
        format="json",
    )
    assert r.json()["count"] == 1 and len(messages(api, src)) == 3

    r = api.post(
        f"/api/destinations/queue/{src}/messages/delete/", {"selector": "tag = 'x'"}, format="json"
    )
    assert r.status_code == 200 and r.json()["count"] == 2
    assert [m["message_type"] for m in messages(api, src)] == ["map"]
    assert audited(f"deleted 2 message(s) matching tag = 'x' from queue {src}")

    for body, reason in (
        ({"mode": "teleport", "target": dst}, "mode"),
        ({"mode": "move", "target": src}, "other than the source"),
        ({"mode": "copy", "target": dst, "selector": "n = = 2"}, "bad selector"),
        ({"mode": "copy", "target": dst, "ids": []}, "no message selected"),
    ):
        r = api.post(f"/api/destinations/queue/{src}/messages/transfer/", body, format="json")
        assert r.status_code == 400 and reason in r.json()["detail"], r.content
    r = api.post(
        f"/api/destinations/queue/{src}/publish/", {"properties": {"a b": 1}}, format="json"
    )
    assert r.status_code == 400 and "Java identifier" in r.json()["detail"]
    r = api.post(
        "/api/destinations/queue/nope.none/messages/delete/", {"selector": "a=1"}, format="json"
    )
    assert r.status_code == 404


def test_retry_dead_messages(api):
    queue = unique("wf.dies")
    for n in range(2):
        r = api.post(
            f"/api/destinations/queue/{queue}/publish/",
            {"body": f"d{n}", "ttl_ms": 100, "properties": {"n": n}},
            format="json",
        )
        assert r.status_code == 200
    deadline = time.monotonic() + 30
    dead: list[dict] = []
    while time.monotonic() < deadline:
        dead = [m for m in messages(api, "mq.sys.dmq") if m["preview"] in ("d0", "d1")]
        if len(dead) == 2:
            break
        time.sleep(0.3)
    assert len(dead) == 2
    r = api.post("/api/dmq/retry/", {"ids": [m["id"] for m in dead]}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["count"] == 2 and r.json()["targets"] == {f"queue {queue}": 2}
    back = messages(api, queue)
    assert sorted(m["preview"] for m in back) == ["d0", "d1"]
    assert all(
        "retried from mq.sys.dmq by " + ADMIN in m["properties"]["JMS_PY_REDELIVERY_NOTE"]
        for m in back
    )
    assert audited(f"retried 2 message(s) from mq.sys.dmq (2 to queue {queue})")
