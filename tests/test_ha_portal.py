"""The HA cluster in the portal and the REST API: every member broker of the shared
store with its state, last heartbeat and who took it over (broker/admintools/actions/ha.py).

The rows are the StoreOwner rows HA brokers write (tests/test_ha.py drives real ones);
here they are made directly in the test database, and the broker page is served by the
portal in process, its admin connection pointed at the shared test broker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from broker.admintools import security_actions
from broker.models import BrokerState, StoreOwner

pytestmark = pytest.mark.django_db

ADMIN, ADMIN_PW = "haroot", "ha-r00t-secret"


@pytest.fixture
def members(db) -> None:
    now = timezone.now()
    StoreOwner.objects.create(
        broker_instance="brokerA",
        ha=True,
        cluster_id="c1",
        address="10.0.0.1:7676",
        state=StoreOwner.State.STOPPED,
        broker_state=BrokerState.FAILOVER_COMPLETE,
        taken_over_by="brokerB",
        taken_over_at=now,
        heartbeat=now - timedelta(seconds=40),
        epoch=3,
    )
    StoreOwner.objects.create(
        broker_instance="brokerB",
        ha=True,
        cluster_id="c1",
        address="10.0.0.2:7676",
        heartbeat=now,
        epoch=1,
    )
    StoreOwner.objects.create(broker_instance="solo", heartbeat=now)  # not HA: not listed
    StoreOwner.objects.create(broker_instance="other", ha=True, cluster_id="c2")


@pytest.fixture
def admin_user(settings, broker, tmp_path) -> None:
    settings.IMQ_BROKER_HOST = broker.host
    settings.IMQ_BROKER_PORT = broker.portmapper_port
    settings.IMQ_ADMIN_USER = "admin"
    settings.IMQ_ADMIN_PASSWORD = "admin"
    settings.IMQ_VARHOME = tmp_path / "portal-var"
    security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])


def test_rest_api_lists_the_ha_members_and_the_takeover(members, admin_user) -> None:
    api = APIClient()
    token = api.post("/api/token/", {"username": ADMIN, "password": ADMIN_PW}, format="json")
    assert token.status_code == 200, token.content
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.json()['token']}")
    r = api.get("/api/broker/ha/", {"cluster_id": "c1"})
    assert r.status_code == 200, r.content
    rows = {row["broker_id"]: row for row in r.json()["results"]}
    assert set(rows) == {"brokerA", "brokerB"}
    assert rows["brokerA"]["state"] == "FAILOVER_COMPLETE"
    assert rows["brokerA"]["taken_over_by"] == "brokerB" and not rows["brokerA"]["running"]
    assert rows["brokerB"]["state"] == "OPERATING" and rows["brokerB"]["running"]
    assert rows["brokerA"]["heartbeat_age"] >= 40
    every = api.get("/api/broker/ha/").json()["results"]
    assert [row["broker_id"] for row in every] == ["brokerA", "brokerB", "other"]
    assert APIClient().get("/api/broker/ha/").status_code == 401


def test_broker_page_shows_the_ha_cluster(members, admin_user) -> None:
    client = Client()
    assert client.login(username=ADMIN, password=ADMIN_PW)
    page = client.get("/broker/").content.decode()
    assert 'id="ha-cluster"' in page
    assert "FAILOVER_COMPLETE" in page and "brokerB at " in page
    assert "10.0.0.2:7676" in page and "OPERATING" in page
    assert "solo" not in page
