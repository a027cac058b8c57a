"""Change events (broker/admintools/events.py): an action run through the REST API reaches the
live overview's consumer over a real Redis channel layer, and a Redis outage never fails
the action.

A real broker process (the shared ``broker`` fixture), a real redis-server
(tests/redis.py), the portal's ASGI application under Channels' ``WebsocketCommunicator``
and DRF's APIClient in process; no mocks.  Waits are bounded receives, never sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from rest_framework.test import APIClient

from broker.admintools import security_actions
from broker.launcher import free_port

pytestmark = pytest.mark.django_db(transaction=True)

ADMIN, ADMIN_PW = "evroot", "evr00t-secret"


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def redis_layer(url: str) -> dict:
    return {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [url]},
        }
    }


@pytest.fixture
def api(broker, settings, tmp_path) -> APIClient:
    """An administrator's REST client (token authentication) on the shared test broker."""
    settings.IMQ_BROKER_HOST = broker.host
    settings.IMQ_BROKER_PORT = broker.portmapper_port
    settings.IMQ_ADMIN_USER = "admin"
    settings.IMQ_ADMIN_PASSWORD = "admin"
    settings.IMQ_VARHOME = tmp_path / "portal-var"
    security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])
    client = APIClient()
    r = client.post("/api/token/", {"username": ADMIN, "password": ADMIN_PW}, format="json")
    assert r.status_code == 200, r.content
    client.credentials(HTTP_AUTHORIZATION=f"Token {r.json()['token']}")
    return client


def in_thread(fn, *args, **kwargs):
    """Run a synchronous request on a thread of its own (as a server would), closing that
    thread's database connection after it."""
    from django.db import connection

    def run():
        try:
            return fn(*args, **kwargs)
        finally:
            connection.close()

    return asyncio.to_thread(run)


def test_rest_action_reaches_the_overview_consumer(api, redis_url, settings):
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth import get_user_model
    from django.test import Client

    from portal.asgi import application

    settings.CHANNEL_LAYERS = redis_layer(redis_url)
    viewer = get_user_model().objects.get(username=ADMIN)
    browser = Client()
    browser.force_login(viewer)
    cookie = f"sessionid={browser.cookies['sessionid'].value}".encode()
    name = unique("evq")

    async def go() -> list[dict]:
        comm = WebsocketCommunicator(
            application,
            "/ws/overview/",
            headers=[(b"origin", b"http://localhost"), (b"cookie", cookie)],
        )
        connected, _ = await comm.connect(timeout=10)
        assert connected
        try:
            assert (await comm.receive_json_from(timeout=10))["type"] == "history"
            body = {"name": name, "type": "queue", "attributes": {"maxNumMsgs": 10}}
            r = await in_thread(api.post, "/api/destinations/", body, format="json")
            assert r.status_code == 201, r.content
            r = await in_thread(api.post, f"/api/destinations/queue/{name}/purge/")
            assert r.status_code in (200, 204), r.content
            r = await in_thread(api.delete, f"/api/destinations/queue/{name}/")
            assert r.status_code in (200, 204), r.content
            got = []
            while len(got) < 3:
                msg = await comm.receive_json_from(timeout=10)
                if msg["type"] == "change" and msg["event"].get("name") == name:
                    got.append(msg)
            return got
        finally:
            await comm.disconnect()

    created, purged, destroyed = asyncio.run(go())
    assert created["instance"] == settings.IMQ_INSTANCE
    assert created["event"] == {
        "type": "destination",
        "op": "create",
        "name": name,
        "dest_type": "queue",
        "attributes": {"maxNumMsgs": 10},
        "by": ADMIN,
    }
    assert purged["event"] == {
        "type": "destination",
        "op": "purge",
        "name": name,
        "dest_type": "queue",
        "by": ADMIN,
    }
    assert destroyed["event"]["op"] == "destroy" and destroyed["event"]["by"] == ADMIN


def test_user_change_reaches_a_layer_subscriber(api, redis_url, settings):
    """A security action (a user created through the REST API) is one event on the
    broker's group, as a plain channel layer subscriber sees it."""
    from channels.layers import get_channel_layer

    from broker.admintools.events import CHANGE_TYPE
    from broker.server.events import group_name

    settings.CHANNEL_LAYERS = redis_layer(redis_url)
    username = unique("evuser")

    async def go() -> dict:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(group_name(settings.IMQ_INSTANCE), channel)
        body = {"username": username, "password": "Secret-pw-1", "groups": ["user"]}
        r = await in_thread(api.post, "/api/users/", body, format="json")
        assert r.status_code == 201, r.content
        while True:
            msg = await asyncio.wait_for(layer.receive(channel), 10)
            if msg["event"].get("name") == username:
                return msg

    msg = asyncio.run(go())
    assert msg["type"] == CHANGE_TYPE
    assert msg["event"] == {
        "type": "user",
        "op": "create",
        "name": username,
        "groups": ["user"],
        "active": True,
        "by": ADMIN,
    }


def test_redis_outage_never_fails_the_action(api, redis_url, settings, caplog):
    """With the channel layer's Redis gone, the change is made; the failed publish is one
    warning, not one per change."""
    from broker.admintools.events import send_event

    settings.CHANNEL_LAYERS = redis_layer(redis_url)
    assert send_event({"type": "test", "op": "ping", "by": "test"})  # the layer works
    settings.CHANNEL_LAYERS = redis_layer(f"redis://127.0.0.1:{free_port()}/0")
    names = [unique("evdown") for _ in range(2)]
    with caplog.at_level(logging.WARNING, logger="broker.audit"):
        for name in names:
            r = api.post("/api/destinations/", {"name": name, "type": "queue"}, format="json")
            assert r.status_code == 201, r.content
    for name in names:
        assert api.get(f"/api/destinations/queue/{name}/").status_code == 200
    warnings = [r for r in caplog.records if "change events" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
