"""The REST API (/api/) against a real broker process: every endpoint, authentication and
permissions, refused input leaving state unchanged, and the audit trail.

The portal side runs in process (DRF's APIClient on the test database); its settings
point the admin connection at the test broker.  No mocks.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from broker.admintools import security_actions
from broker.launcher import free_port, start_broker
from broker.models import AccessRule, BrokerUser, LogRecord
from broker.protocol.types import AckMode
from openmq_client import sync
from openmq_client.destination import Queue, Topic
from openmq_client.message import TextMessage

pytestmark = pytest.mark.django_db

ADMIN, ADMIN_PW = "root", "r00t-secret"


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def point_at(settings, b, tmp_path) -> None:
    settings.IMQ_BROKER_HOST = b.host
    settings.IMQ_BROKER_PORT = b.portmapper_port
    settings.IMQ_ADMIN_USER = "admin"
    settings.IMQ_ADMIN_PASSWORD = "admin"
    settings.IMQ_VARHOME = tmp_path / "portal-var"  # the portal's own broker config: defaults


def token_client(username: str, password: str) -> APIClient:
    client = APIClient()
    r = client.post("/api/token/", {"username": username, "password": password}, format="json")
    assert r.status_code == 200, r.content
    client.credentials(HTTP_AUTHORIZATION=f"Token {r.json()['token']}")
    return client


@pytest.fixture(scope="module")
def spare_broker(tmp_path_factory):
    """A broker of this module's own, for pausing, quiescing and reconfiguring (the
    shared one keeps serving other tests undisturbed)."""
    b = start_broker(tmp_path_factory.mktemp("spare"))
    yield b
    b.stop()


@pytest.fixture
def api(broker, settings, tmp_path) -> APIClient:
    """An administrator's API client (token authentication) on the shared test broker."""
    point_at(settings, broker, tmp_path)
    security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])
    return token_client(ADMIN, ADMIN_PW)


def audited(text: str, user: str = ADMIN) -> bool:
    return LogRecord.objects.filter(logger="broker.audit", message=f"{user}: {text}").exists()


def send(b, queue: str, count: int, persistent: bool = False) -> None:
    with sync.connect(b.host, b.portmapper_port) as conn:
        sess = conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
        prod = sess.create_producer(Queue(queue))
        for n in range(count):
            prod.send(TextMessage(f"m{n}"), persistent=persistent)


# --------------------------------------------------------------------------------------
# Authentication and permissions
# --------------------------------------------------------------------------------------


def test_anonymous_gets_401_with_token_challenge(api):
    r = APIClient().get("/api/broker/")
    assert r.status_code == 401
    assert r["WWW-Authenticate"].startswith("Token")
    assert "detail" in r.json()


def test_non_administrator_gets_403(api):
    security_actions.create_user("setup", "bob", "bob-pw", ["user"])
    bob = token_client("bob", "bob-pw")
    for url in ("/api/broker/", "/api/users/", "/api/logs/", "/api/destinations/"):
        r = bob.get(url)
        assert r.status_code == 403, url
        assert "administrators" in r.json()["detail"]
    r = bob.post("/api/broker/pause/")
    assert r.status_code == 403


def test_token_endpoint(api):
    r = APIClient().post("/api/token/", {"username": ADMIN, "password": "wrong"}, format="json")
    assert r.status_code == 400 and "password" in r.json()["detail"]
    r = APIClient().post("/api/token/", {"username": ADMIN}, format="json")
    assert r.status_code == 400 and r.json()["errors"]["password"]
    r = APIClient().post("/api/token/", {"username": ADMIN, "password": ADMIN_PW}, format="json")
    assert r.status_code == 200
    assert r.json()["administrator"] is True and r.json()["username"] == ADMIN
    # The same token again; form posts work too (curl -d).
    r2 = APIClient().post(
        "/api/token/",
        f"username={ADMIN}&password={ADMIN_PW}",
        content_type="application/x-www-form-urlencoded",
    )
    assert r2.json()["token"] == r.json()["token"]
    # Dropping it logs the client out.
    assert api.delete("/api/token/").status_code == 204
    assert api.get("/api/broker/").status_code == 401


def test_session_authentication(api):
    client = APIClient()
    assert client.login(username=ADMIN, password=ADMIN_PW)
    assert client.get("/api/broker/properties/").status_code == 200


def test_session_needs_csrf_for_changes(api):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username=ADMIN, password=ADMIN_PW)
    r = client.post("/api/groups/", {"name": "csrfgroup"}, format="json")
    assert r.status_code == 403 and "CSRF" in r.json()["detail"]
    assert api.get("/api/groups/csrfgroup/").status_code == 404


def test_removed_administrator_loses_the_api_at_once(api):
    security_actions.create_user("setup", "eve", "eve-pw", ["admin"])
    eve = token_client("eve", "eve-pw")
    assert eve.get("/api/users/").status_code == 200
    r = api.patch("/api/users/eve/", {"groups": ["user"]}, format="json")
    assert r.status_code == 200 and r.json()["is_admin"] is False
    assert eve.get("/api/users/").status_code == 401  # token dropped


def test_unknown_endpoint_is_a_json_404(api):
    r = api.get("/api/nothing-here/")
    assert r.status_code == 404 and "no API endpoint" in r.json()["detail"]
    r = api.get("/api/destinations/table/orders/")
    assert r.status_code == 404 and "queue or topic" in r.json()["detail"]


def test_schema_and_docs_are_served(api):
    r = api.get("/api/")
    assert r.status_code == 200 and r.json()["destinations"].endswith("/api/destinations/")
    r = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    schema = r.json()
    assert "/api/destinations/{type}/{name}/" in schema["paths"]
    r = APIClient().get("/api/docs/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "swagger-ui" in html
    # served locally (sidecar): no script or stylesheet comes from another host
    assert re.findall(r'(?:src|href)="(https?:)?//', html) == []


# --------------------------------------------------------------------------------------
# Broker
# --------------------------------------------------------------------------------------


def test_query_broker(api, broker):
    r = api.get("/api/broker/")
    assert r.status_code == 200, r.content
    data = r.json()
    assert data["instance"] == broker.instance
    assert data["port"] == broker.portmapper_port
    names = {s["name"] for s in data["services"]}
    assert {"jms", "admin"} <= names
    assert data["properties"]["imq.instancename"] == broker.instance


def test_broker_properties(api, broker):
    r = api.get("/api/broker/properties/")
    assert r.status_code == 200
    assert r.json()["imq.instancename"] == broker.instance


def test_broker_update_refuses_bad_input(api):
    for body in ({}, {"properties": {}}, {"properties": {"": "x"}}, {"properties": "x"}):
        r = api.patch("/api/broker/", body, format="json")
        assert r.status_code == 400, body
        assert r.json()["detail"].startswith("invalid input")
    assert not LogRecord.objects.filter(message__contains="updated broker properties").exists()


def test_broker_pause_resume(spare_broker, api, settings, tmp_path):
    point_at(settings, spare_broker, tmp_path)
    r = api.post("/api/broker/pause/")
    assert r.status_code == 200 and r.json()["detail"] == "paused the broker"
    jms = api.get("/api/services/jms/").json()
    assert jms["state"] == "PAUSED"
    assert api.post("/api/broker/resume/").status_code == 200
    assert api.get("/api/services/jms/").json()["state"] == "RUNNING"
    assert audited("paused the broker") and audited("resumed the broker")


def test_broker_shutdown(own_broker, api, settings, tmp_path):
    b = own_broker()
    point_at(settings, b, tmp_path)
    r = api.post("/api/broker/shutdown/")
    assert r.status_code == 200
    b.proc.wait(20)
    assert audited("shut down the broker")
    r = api.get("/api/broker/")
    assert r.status_code == 503 and f"127.0.0.1:{b.portmapper_port}" in r.json()["detail"]


def test_broker_unavailable_is_503(api, settings):
    settings.IMQ_BROKER_PORT = free_port()
    r = api.get("/api/destinations/")
    assert r.status_code == 503
    assert "not reachable" in r.json()["detail"] or "cannot open" in r.json()["detail"]


def test_broker_quiesce_acl_metrics_compact_properties(spare_broker, api, settings, tmp_path):
    point_at(settings, spare_broker, tmp_path)
    assert api.post("/api/broker/quiesce/").status_code == 200
    assert api.get("/api/broker/").json()["state"] in ("QUIESCING", "QUIESCED")
    assert api.post("/api/broker/unquiesce/").status_code == 200
    assert api.post("/api/broker/reload-acl/").status_code == 200
    assert api.get("/api/broker/metrics/").status_code == 200
    assert api.post("/api/broker/reset-metrics/").status_code == 200
    assert api.post("/api/broker/compact/").status_code == 200
    r = api.patch("/api/broker/", {"properties": {"imq.log.level": "INFO"}}, format="json")
    assert r.status_code == 200
    assert r.json()["properties"]["imq.log.level"] == "INFO"
    assert audited("updated broker properties imq.log.level=INFO")
    assert audited("quiesced the broker") and audited("reloaded the access control rules")


# --------------------------------------------------------------------------------------
# Services
# --------------------------------------------------------------------------------------


def test_services_list_query(api):
    r = api.get("/api/services/")
    assert r.status_code == 200
    page = r.json()
    assert page["count"] >= 2 and {"count", "next", "previous", "results"} <= set(page)
    jms = next(s for s in page["results"] if s["name"] == "jms")
    assert jms["type"] == "NORMAL" and jms["state"] == "RUNNING" and jms["port"] > 0
    r = api.get("/api/services/", {"search": "adm"})
    assert [s["name"] for s in r.json()["results"]] == ["admin"]
    r = api.get("/api/services/", {"ordering": "-name", "page_size": 1})
    assert r.json()["results"][0]["name"] == max(s["name"] for s in page["results"])
    assert r.json()["next"]
    assert api.get("/api/services/admin/").json()["type"] == "ADMIN"
    r = api.get("/api/services/nosuch/")
    assert r.status_code == 404 and "nosuch" in r.json()["detail"]
    assert api.get("/api/services/", {"ordering": "bogus"}).status_code == 400


def test_service_pause_resume_and_refusals(spare_broker, api, settings, tmp_path):
    point_at(settings, spare_broker, tmp_path)
    assert api.post("/api/services/jms/pause/").status_code == 200
    assert api.get("/api/services/jms/").json()["state"] == "PAUSED"
    assert api.post("/api/services/jms/resume/").status_code == 200
    assert api.get("/api/services/jms/").json()["state"] == "RUNNING"
    assert audited("paused service jms") and audited("resumed service jms")
    # The broker refuses to pause its admin service: 400 with its reason, no change.
    r = api.post("/api/services/admin/pause/")
    assert r.status_code == 400 and "admin" in r.json()["detail"]
    assert api.get("/api/services/admin/").json()["state"] == "RUNNING"
    assert not audited("paused service admin")
    assert api.post("/api/services/nosuch/pause/").status_code == 404


def test_service_update_validation(api):
    for body in ({}, {"port": 70000}, {"max_threads": 0}, {"min_threads": 5, "max_threads": 2}):
        r = api.patch("/api/services/jms/", body, format="json")
        assert r.status_code == 400, body
    assert not LogRecord.objects.filter(message__contains="updated service").exists()


def test_service_update_and_metrics(spare_broker, api, settings, tmp_path):
    point_at(settings, spare_broker, tmp_path)
    r = api.patch("/api/services/jms/", {"max_threads": 500}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["max_threads"] == 500
    assert audited("updated service jms: maxThreads=500")
    assert api.get("/api/services/jms/metrics/").status_code == 200


# --------------------------------------------------------------------------------------
# Destinations
# --------------------------------------------------------------------------------------


def test_destination_list_filters_and_pages(api, broker):
    names = [unique("restlist") for _ in range(3)]
    for n, name in enumerate(names):
        send(broker, name, n + 1)
    r = api.get("/api/destinations/", {"search": "restlist", "type": "queue", "page_size": 2})
    assert r.status_code == 200
    page = r.json()
    assert page["count"] >= 3 and len(page["results"]) == 2 and page["next"]
    r = api.get("/api/destinations/", {"search": names[2]})
    (row,) = r.json()["results"]
    assert row["name"] == names[2] and row["type"] == "queue" and row["messages"] == 3
    assert row["bytes"] > 0 and row["state"] == "RUNNING" and row["temporary"] is False
    r = api.get("/api/destinations/", {"search": "restlist", "ordering": "-messages"})
    counts = [d["messages"] for d in r.json()["results"]]
    assert counts == sorted(counts, reverse=True) and counts[0] >= 3
    r = api.get("/api/destinations/", {"search": "restlist", "page_size": 1, "page": 2})
    assert r.json()["previous"] and r.json()["next"] and len(r.json()["results"]) == 1
    assert api.get("/api/destinations/", {"ordering": "bytes"}).status_code == 400
    assert api.get("/api/destinations/", {"page": "x"}).status_code == 404
    assert api.get("/api/destinations/", {"page": "9" * 30}).status_code == 404
    assert api.get("/api/destinations/", {"search": names[0], "type": "topic"}).json()["count"] == 0
    assert api.get("/api/destinations/", {"type": "table"}).status_code == 400
    assert api.get("/api/destinations/", {"state": "nap"}).status_code == 400
    assert api.get("/api/destinations/", {"page": 999}).status_code == 404


def test_destination_query_purge_pause_resume_destroy(api, broker):
    name = unique("restq")
    send(broker, name, 4)
    url = f"/api/destinations/queue/{name}/"
    r = api.get(url)
    assert r.status_code == 200 and r.json()["messages"] == 4
    assert api.get(f"/api/destinations/topic/{name}/").status_code == 404
    # Refused: bad pause target; nothing changed.
    r = api.post(url + "pause/", {"what": "everything"}, format="json")
    assert r.status_code == 400 and "what" in r.json()["errors"]
    assert api.get(url).json()["state"] == "RUNNING"
    assert api.post(url + "pause/", {"what": "consumers"}, format="json").status_code == 200
    assert api.get(url).json()["state"] == "CONSUMERS_PAUSED"
    assert api.post(url + "resume/").status_code == 200
    assert api.post(url + "pause/", format="json").status_code == 200  # default: all
    assert api.get(url).json()["state"] == "PAUSED"
    assert api.post(url + "resume/").status_code == 200
    assert api.get(url).json()["state"] == "RUNNING"
    assert api.post(url + "purge/").status_code == 200
    assert api.get(url).json()["messages"] == 0
    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404
    assert api.delete(url).status_code == 404
    for what in (
        f"paused consumers of queue {name}",
        f"paused all of queue {name}",
        f"resumed queue {name}",
        f"purged queue {name}",
        f"destroyed queue {name}",
    ):
        assert audited(what), what


def test_temporary_destination_cannot_be_destroyed(api, broker):
    with sync.connect(broker.host, broker.portmapper_port) as conn:
        temp = conn.create_temporary_queue()
        r = api.get("/api/destinations/", {"temporary": "true", "page_size": 1000})
        temp_names = [d["name"] for d in r.json()["results"]]
        assert temp.name in temp_names and all(d["temporary"] for d in r.json()["results"])
        r = api.get("/api/destinations/", {"temporary": "false", "page_size": 1000})
        assert temp.name not in [d["name"] for d in r.json()["results"]]
        r = api.get("/api/destinations/", {"temporary": "true", "search": temp.name[-6:]})
        assert [d["name"] for d in r.json()["results"]] == [temp.name]
        r = api.delete(f"/api/destinations/queue/{temp.name}/")
        assert r.status_code == 400 and "temporary" in r.json()["detail"]
        r = api.get("/api/destinations/", {"temporary": "true", "page_size": 1000})
        assert temp.name in [d["name"] for d in r.json()["results"]]
    assert not audited(f"destroyed queue {temp.name}")


def test_destination_create_refuses_bad_input(api):
    name = unique("restbad")
    bad = [
        {"name": name, "type": "table"},
        {"type": "queue"},
        {"name": name, "type": "queue", "attributes": {"maxNumMsgz": 5}},
        {"name": name, "type": "queue", "attributes": {"maxNumMsgs": "lots"}},
        {"name": name, "type": "queue", "attributes": {"maxNumMsgs": -2}},
        {"name": name, "type": "queue", "attributes": {"limitBehavior": "EXPLODE"}},
        {"name": "temporary_destination://queue/x", "type": "queue"},
        ["not", "an", "object"],
    ]
    for body in bad:
        r = api.post("/api/destinations/", body, format="json")
        assert r.status_code == 400, (body, r.content)
        assert r.json()["detail"]
    assert api.get("/api/destinations/", {"search": name}).json()["count"] == 0
    r = api.patch(f"/api/destinations/queue/{name}/", {"attributes": {}}, format="json")
    assert r.status_code == 400


def test_destination_create_update(api, broker):
    name = unique("restnew")
    body = {
        "name": name,
        "type": "queue",
        "attributes": {"maxNumMsgs": 10, "limitBehavior": "REMOVE_OLDEST"},
    }
    r = api.post("/api/destinations/", body, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["name"] == name and r.json()["attributes"]["maxNumMsgs"] == 10
    assert api.post("/api/destinations/", body, format="json").status_code == 409
    r = api.patch(
        f"/api/destinations/queue/{name}/", {"attributes": {"maxNumMsgs": 20}}, format="json"
    )
    assert r.status_code == 200 and r.json()["attributes"]["maxNumMsgs"] == 20
    assert audited(f"created queue {name} with maxNumMsgs=10, limitBehavior=REMOVE_OLDEST")
    assert audited(f"updated queue {name}: maxNumMsgs=20")
    assert api.get(f"/api/destinations/queue/{name}/metrics/").status_code == 200
    assert api.post(f"/api/destinations/queue/{name}/compact/").status_code == 200


def test_destination_consumers_and_producers(api, broker):
    name = unique("restcons")
    with sync.connect(broker.host, broker.portmapper_port) as conn:
        sess = conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        sess.create_consumer(Queue(name), selector="color = 'red'")
        sess.create_producer(Queue(name))
        r = api.get(f"/api/destinations/queue/{name}/consumers/")
        assert r.status_code == 200, r.content
        (row,) = r.json()["results"]
        assert row["selector"] == "color = 'red'" and row["ack_mode"] == "CLIENT_ACKNOWLEDGE"
        assert row["user"] == "guest" and row["destination"] == name
        r = api.get(f"/api/destinations/queue/{name}/producers/")
        assert r.status_code == 200, r.content
        (row,) = r.json()["results"]
        assert row["user"] == "guest" and row["destination"] == name
    assert api.get(f"/api/destinations/queue/{name}/consumers/").json()["count"] == 0
    assert api.get("/api/destinations/queue/nosuchqueue/producers/").status_code == 404


def test_messages_browse_and_delete(api, broker):
    name = unique("restmsg")
    send(broker, name, 3)
    url = f"/api/destinations/queue/{name}/messages/"
    r = api.get(url, {"limit": 2})
    assert r.status_code == 200, r.content
    page = r.json()
    assert page["start"] == 0 and page["limit"] == 2 and len(page["results"]) == 2
    first = page["results"][0]
    assert first["message_type"] == "text" and first["preview"] == "m0"
    assert api.get(url, {"limit": 0}).status_code == 400
    assert api.get(url, {"start": -1}).status_code == 400
    msg_id = next(
        v for k, v in first.items() if k.lower() in ("id", "msg_id", "message_id", "jmsmessageid")
    )
    one = api.get(f"{url}{msg_id}/")
    assert one.status_code == 200 and one.json()["preview"] == "m0"
    assert api.delete(f"{url}{msg_id}/").status_code == 204
    assert api.get(f"{url}{msg_id}/").status_code == 404
    assert api.get(f"/api/destinations/queue/{name}/").json()["messages"] == 2
    assert audited(f"deleted message {msg_id} from queue {name}")


# --------------------------------------------------------------------------------------
# Connections, durable subscriptions, transactions
# --------------------------------------------------------------------------------------


def test_connections_list(api, broker):
    cid = unique("restcid")
    with sync.connect(broker.host, broker.portmapper_port, client_id=cid) as conn:
        conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
        r = api.get("/api/connections/", {"search": cid})
        assert r.status_code == 200
        (row,) = r.json()["results"]
        assert row["client_id"] == cid and row["user"] == "guest" and row["service"] == "jms"
        assert row["address"].startswith("127.0.0.1:")
        assert (
            api.get("/api/connections/", {"service": "admin", "search": cid}).json()["count"] == 0
        )
        r = api.get("/api/connections/", {"service": "admin"})
        assert r.json()["count"] >= 1  # the portal's own admin connection
    assert api.get("/api/connections/", {"search": cid}).json()["count"] == 0


def test_connection_query_and_destroy(api, broker):
    cid = unique("restkill")
    conn = sync.connect(broker.host, broker.portmapper_port, client_id=cid)
    try:
        (row,) = api.get("/api/connections/", {"search": cid}).json()["results"]
        r = api.get(f"/api/connections/{row['id']}/")
        assert r.status_code == 200, r.content
        assert r.json()["client_id"] == cid
        assert api.delete(f"/api/connections/{row['id']}/").status_code == 204
        assert api.get("/api/connections/", {"search": cid}).json()["count"] == 0
        assert audited(f"destroyed connection {row['id']}")
    finally:
        conn.close()
    assert api.get("/api/connections/abc/").status_code == 400


def test_durables(api, broker):
    cid, sub, topic = unique("restdcid"), unique("restsub"), unique("resttopic")
    with sync.connect(broker.host, broker.portmapper_port, client_id=cid) as conn:
        sess = conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
        cons = sess.create_durable_subscriber(Topic(topic), sub)
        cons.close()
    r = api.get("/api/durables/", {"topic": topic})
    assert r.status_code == 200, r.content
    (row,) = r.json()["results"]
    assert row["name"] == sub and row["client_id"] == cid and row["topic"] == topic
    assert api.get(f"/api/durables/{cid}/{sub}/").json()["name"] == sub
    assert api.post(f"/api/durables/{cid}/{sub}/purge/").status_code == 200
    assert api.delete(f"/api/durables/{cid}/{sub}/").status_code == 204
    assert api.get("/api/durables/", {"topic": topic}).json()["count"] == 0
    assert api.get(f"/api/durables/{cid}/{sub}/").status_code == 404
    assert audited(f"destroyed durable subscription {sub} (client ID {cid})")


def test_transactions(api, broker):
    with sync.connect(broker.host, broker.portmapper_port) as conn:
        sess = conn.create_session(transacted=True)
        sess.create_producer(Queue(unique("resttxn"))).send(TextMessage("t"))
        r = api.get("/api/transactions/")
        assert r.status_code == 200, r.content
        assert r.json()["count"] >= 1
        txn = r.json()["results"][0]
        assert api.get(f"/api/transactions/{txn['id']}/").json()["id"] == txn["id"]
        sess.rollback()
    assert api.get("/api/transactions/999999999/").status_code == 404
    assert api.post("/api/transactions/999999999/commit/").status_code in (404, 409, 400)
    assert api.post("/api/transactions/x/rollback/").status_code == 400


# --------------------------------------------------------------------------------------
# Users and groups
# --------------------------------------------------------------------------------------


def test_user_crud(api):
    r = api.post(
        "/api/users/",
        {"username": "carol", "password": "c-pw", "groups": ["user", "ops"]},
        format="json",
    )
    assert r.status_code == 201, r.content
    assert r.json()["groups"] == ["ops", "user"] and "password" not in r.json()
    assert audited("created user carol (groups: user, ops)")
    assert not LogRecord.objects.filter(message__contains="c-pw").exists()
    r = api.post("/api/users/", {"username": "carol", "password": "x"}, format="json")
    assert r.status_code == 409
    r = api.get("/api/users/", {"search": "car"})
    assert [u["username"] for u in r.json()["results"]] == ["carol"]
    assert api.get("/api/users/", {"group": "ops"}).json()["count"] == 1
    assert api.get("/api/users/carol/").json()["active"] is True
    r = api.patch("/api/users/carol/", {"password": "new-pw", "active": False}, format="json")
    assert r.status_code == 200 and r.json()["active"] is False
    assert BrokerUser.objects.get(username="carol").check_password("new-pw")
    assert audited("updated user carol: password, disabled")
    assert api.delete("/api/users/carol/").status_code == 204
    assert api.get("/api/users/carol/").status_code == 404
    assert api.delete("/api/users/carol/").status_code == 404
    assert audited("deleted user carol")


def test_user_refusals_change_nothing(api):
    for body in (
        {"username": "a:b", "password": "x"},
        {"username": "dave", "password": ""},
        {"username": "dave", "password": "x", "groups": ["bad,group"]},
        {"username": "dave", "password": "x", "groups": "user"},
        {"username": "", "password": "x"},
    ):
        r = api.post("/api/users/", body, format="json")
        assert r.status_code == 400, (body, r.content)
    assert not BrokerUser.objects.filter(username="dave").exists()
    security_actions.create_user("setup", "dave", "d-pw", ["user"])
    before = BrokerUser.objects.get(username="dave").password_digest
    # A bad group refuses the whole change: the password stays too.
    r = api.patch("/api/users/dave/", {"password": "other", "groups": ["x:y"]}, format="json")
    assert r.status_code == 400
    assert BrokerUser.objects.get(username="dave").password_digest == before
    assert api.patch("/api/users/dave/", {}, format="json").status_code == 400
    assert api.patch("/api/users/nobody/", {"active": False}, format="json").status_code == 404


def test_last_administrator_is_kept(api):
    BrokerUser.objects.exclude(username=ADMIN).filter(groups__name="admin").delete()
    r = api.patch(f"/api/users/{ADMIN}/", {"groups": ["user"]}, format="json")
    assert r.status_code == 409 and "last" in r.json()["detail"]
    assert api.patch(f"/api/users/{ADMIN}/", {"active": False}, format="json").status_code == 409
    assert api.delete(f"/api/users/{ADMIN}/").status_code == 409
    assert api.get(f"/api/users/{ADMIN}/").json()["is_admin"] is True


def test_group_crud(api):
    r = api.post("/api/groups/", {"name": "ops", "description": "operators"}, format="json")
    assert r.status_code == 201 and r.json() == {
        "name": "ops",
        "description": "operators",
        "members": 0,
        "builtin": False,
    }
    assert api.post("/api/groups/", {"name": "ops"}, format="json").status_code == 409
    assert api.post("/api/groups/", {"name": "a,b"}, format="json").status_code == 400
    security_actions.create_user("setup", "frank", "f-pw", ["ops"])
    assert api.get("/api/groups/ops/").json()["members"] == 1
    r = api.get("/api/groups/", {"search": "op"})
    assert [g["name"] for g in r.json()["results"]] == ["ops"]
    r = api.patch("/api/groups/ops/", {"description": "night shift"}, format="json")
    assert r.json()["description"] == "night shift"
    assert api.delete("/api/groups/admin/").status_code == 409
    assert api.delete("/api/groups/ops/").status_code == 204
    assert api.get("/api/users/frank/").json()["groups"] == []
    assert audited("created group ops") and audited("deleted group ops (1 members)")


# --------------------------------------------------------------------------------------
# Access control rules
# --------------------------------------------------------------------------------------


def test_acl_rules_crud(api):
    r = api.get("/api/acl/", {"page_size": 100})
    assert r.status_code == 200
    keys = {x["key"] for x in r.json()["results"]}
    assert "connection.ADMIN.allow.group" in keys and "version" in keys  # seeded defaults
    key = "queue.orders.consume.allow.group"
    r = api.post("/api/acl/", {"key": key, "value": "billing"}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["scope"] == "queue" and r.json()["target"] == "orders"
    assert r.json()["operation"] == "consume" and r.json()["principal"] == "group"
    r = api.put(f"/api/acl/{key}/", {"value": "billing, audit"}, format="json")
    assert r.status_code == 200 and r.json()["value"] == "billing, audit"
    assert api.get(f"/api/acl/{key}/").json()["value"] == "billing, audit"
    # Per broker instance.
    r = api.put(f"/api/acl/{key}/?instance=other", {"value": "x"}, format="json")
    assert r.status_code == 200 and r.json()["instance"] == "other"
    assert api.get("/api/acl/", {"instance": "other"}).json()["count"] == 1
    assert api.get(f"/api/acl/{key}/").json()["value"] == "billing, audit"
    assert audited(f"changed access rule {key}=billing, audit (all brokers)")
    assert audited(f"added access rule {key}=x (broker other)")
    assert api.delete(f"/api/acl/{key}/").status_code == 204
    assert api.get(f"/api/acl/{key}/").status_code == 404
    assert api.delete(f"/api/acl/{key}/").status_code == 404
    assert audited(f"deleted access rule {key} (all brokers)")


def test_acl_refusals_change_nothing(api):
    api.get("/api/acl/")  # seeds the defaults
    before = sorted(AccessRule.objects.values_list("broker_instance", "key", "value"))
    for body in (
        {"key": "queue.orders.eat.allow.user", "value": "x"},
        {"key": "queue.orders.consume.allow.user", "value": "a\nb"},
        {"key": "version", "value": "2"},
        {"value": "x"},
    ):
        assert api.post("/api/acl/", body, format="json").status_code == 400, body
    assert api.delete("/api/acl/version/").status_code == 409
    r = api.put(
        "/api/acl/file/",
        {"text": "version=JMQFileAccessControlModel/100\nnot.a.rule=1\n"},
        format="json",
    )
    assert r.status_code == 400 and "not.a.rule" in r.json()["detail"]
    r = api.put("/api/acl/file/", {"text": "queue.*.produce.allow.user=*\n"}, format="json")
    assert r.status_code == 400 and "version" in r.json()["detail"]
    assert sorted(AccessRule.objects.values_list("broker_instance", "key", "value")) == before


def test_acl_file(api):
    r = api.get("/api/acl/file/")
    assert r.status_code == 200 and "version=JMQFileAccessControlModel/100" in r.json()["text"]
    text = (
        "version=JMQFileAccessControlModel/100\n"
        "connection.NORMAL.allow.user=*\n"
        "connection.ADMIN.allow.group=admin\n"
        "queue.*.produce.allow.user=*\n"
    )
    r = api.put("/api/acl/file/", {"text": text}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["rules"] == 4
    assert set(AccessRule.objects.filter(broker_instance="").values_list("key", flat=True)) == {
        "version",
        "connection.NORMAL.allow.user",
        "connection.ADMIN.allow.group",
        "queue.*.produce.allow.user",
    }
    r = api.put(
        "/api/acl/file/",
        {"text": "topic.*.consume.allow.user=*\n", "replace": False},
        format="json",
    )
    assert r.status_code == 200 and "topic.*.consume.allow.user=*" in r.json()["text"]
    assert audited("replaced the access rules of all brokers (4 rules)")
    assert audited("merged the access rules of all brokers (1 rules)")


# --------------------------------------------------------------------------------------
# Log records
# --------------------------------------------------------------------------------------


def test_logs_filter_and_page(api):
    now = datetime.now(UTC)
    LogRecord.objects.bulk_create(
        [
            LogRecord(
                timestamp=now - timedelta(minutes=n),
                level=level,
                logger="t",
                message=f"{level} number {n}",
                broker_instance=inst,
            )
            for n, (level, inst) in enumerate(
                [("INFO", "a"), ("WARNING", "a"), ("ERROR", "b"), ("DEBUG", "b"), ("FORCE", "a")]
            )
        ]
    )
    r = api.get("/api/logs/", {"search": "number"})
    assert r.status_code == 200
    assert [x["level"] for x in r.json()["results"]] == [
        "INFO",
        "WARNING",
        "ERROR",
        "DEBUG",
        "FORCE",
    ]
    r = api.get("/api/logs/", {"search": "number", "level": "WARNING"})
    assert {x["level"] for x in r.json()["results"]} == {"WARNING", "ERROR", "FORCE"}
    since = (now - timedelta(minutes=2, seconds=30)).isoformat()
    until = (now - timedelta(seconds=30)).isoformat()
    r = api.get("/api/logs/", {"search": "number", "since": since, "until": until})
    assert [x["message"] for x in r.json()["results"]] == ["WARNING number 1", "ERROR number 2"]
    r = api.get("/api/logs/", {"search": "number", "instance": "b"})
    assert r.json()["count"] == 2 and r.json()["results"][0]["instance"] == "b"
    r = api.get("/api/logs/", {"search": "number", "page_size": 2, "page": 3})
    assert r.json()["count"] == 5 and len(r.json()["results"]) == 1
    assert api.get("/api/logs/", {"level": "LOUD"}).status_code == 400
    assert api.get("/api/logs/", {"since": "yesterday"}).status_code == 400


def test_changes_are_audited_with_the_actor(api):
    api.post("/api/groups/", {"name": "audited"}, format="json")
    r = api.get("/api/logs/", {"search": "created group audited"})
    (row,) = r.json()["results"]
    assert row["message"] == f"{ADMIN}: created group audited" and row["level"] == "INFO"
