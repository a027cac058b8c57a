"""``/metrics`` over real HTTP: a real daphne serving portal.asgi, a real broker and a real
redis-server (tests/portal_server.py), the exposition parsed with prometheus-client's own
parser; who may scrape (allowed addresses, bearer token, administrators; 403 otherwise);
a broker that is down gives ``openmq_broker_up 0`` with HTTP 200.
"""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from broker.admintools.broker_handle import BrokerAdmin
from openmq_client import Queue, TextMessage
from openmq_client.sync import connect

from .crash_stack import restart_broker
from .portal_server import PortalStack, start_portal, start_stack

TOKEN = "scrape-token-7f3a"


@pytest.fixture(scope="module")
def stack() -> Iterator[PortalStack]:
    s = start_stack()
    try:
        yield s
    finally:
        s.stop()


def fetch(url: str, headers: dict[str, str] | None = None, opener=None) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, 4xx included."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of an exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def families(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def dest(name: str, kind: str = "queue") -> tuple:
    return (("destination", name), ("type", kind))


def test_metrics_give_the_figures_of_a_filled_queue(stack):
    bodies = [f"order {i} " + "x" * (10 * i) for i in range(12)]
    conn = connect(stack.broker.host, stack.broker.portmapper_port)
    try:
        session = conn.create_session()
        producer = session.create_producer(Queue("prom.orders"))
        for body in bodies:
            producer.send(TextMessage(body), persistent=False)
        # An open consumer on another queue (not started: nothing is delivered) and the
        # producer above stay while the endpoint is read.
        session.create_consumer(Queue("prom.work"))

        status, ctype, text = fetch(stack.url + "/metrics")
        assert status == 200, text
        assert ctype.startswith("text/plain; version=0.0.4")
        got = samples(text)
        kinds = families(text)

        # The broker's own view of the same queue, through its admin service.
        admin = BrokerAdmin(stack.broker.host, stack.broker.portmapper_port)
        try:
            info = admin.call("destinations", "prom.orders", 1)[0]
            totals = admin.call("metrics")
        finally:
            admin.close()
    finally:
        conn.close()

    assert got[("openmq_broker_up", ())] == 1
    assert got[("openmq_destination_messages", dest("prom.orders"))] == len(bodies)
    assert got[("openmq_destination_messages_bytes", dest("prom.orders"))] == info["nMessageBytes"]
    assert info["nMessageBytes"] > sum(len(b) for b in bodies)
    assert got[("openmq_destination_producers", dest("prom.orders"))] == 1
    assert got[("openmq_destination_consumers", dest("prom.orders"))] == 0
    assert got[("openmq_destination_consumers", dest("prom.work"))] == 1
    assert got[("openmq_destination_messages", dest("prom.work"))] == 0
    assert ("openmq_destination_messages", dest("mq.sys.dmq")) in got
    # Counters are counters (the parser strips _total from the family name).
    assert kinds["openmq_broker_messages_in"] == "counter"
    assert kinds["openmq_service_messages_in"] == "counter"
    assert kinds["openmq_destination_messages"] == "gauge"
    # The admin requests of this very scrape count too: at least the queue's messages,
    # at most what the broker counted a moment later.
    assert len(bodies) <= got[("openmq_broker_messages_in_total", ())] <= totals["messagesIn"]
    assert got[("openmq_service_messages_in_total", (("service", "jms"),))] >= len(bodies)
    assert got[("openmq_service_connections", (("service", "jms"),))] >= 1
    assert got[("openmq_service_running", (("service", "jms"),))] == 1
    assert got[("openmq_broker_connections", ())] >= 2  # the test's and the portal's admin
    assert got[("openmq_broker_messages", ())] >= len(bodies)
    assert got[("openmq_memory_state", ())] == 0  # green
    info_labels = dict(next(k for k in got if k[0] == "openmq_broker_info")[1])
    assert info_labels["instance"] == stack.broker.instance
    assert info_labels["state"] == "RUNNING"


@pytest.fixture(scope="module")
def guarded(stack) -> Iterator[str]:
    """A second portal on the same broker: loopback not allowed, a token set, only the
    deepest destination exported."""
    tmp = stack.tmp / "guarded"
    tmp.mkdir(exist_ok=True)
    proc, port, _, _ = start_portal(
        tmp,
        stack.broker,
        stack.redis.url,
        extra_env={
            "METRICS_ALLOWED_ADDRESSES": "192.0.2.0/24",
            "METRICS_TOKEN": TOKEN,
            "METRICS_DESTINATIONS_LIMIT": "1",
        },
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_not_allowed_address_without_token_is_refused(guarded):
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Token {TOKEN}"},  # not the bearer scheme
        {"Authorization": "Bearer "},
    ):
        status, _, body = fetch(guarded + "/metrics", headers)
        assert status == 403, headers
        assert "openmq_" not in body


def test_bearer_token_is_let_in(guarded):
    status, _, text = fetch(guarded + "/metrics", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    assert samples(text)[("openmq_broker_up", ())] == 1
    # What Prometheus asks for when it prefers OpenMetrics.
    status, ctype, text = fetch(
        guarded + "/metrics",
        {"Authorization": f"Bearer {TOKEN}", "Accept": "application/openmetrics-text"},
    )
    assert status == 200
    assert ctype.startswith("application/openmetrics-text")
    parsed = {f.name: f for f in openmetrics_families(text)}
    assert parsed["openmq_broker_up"].samples[0].value == 1
    assert parsed["openmq_broker_messages_in"].type == "counter"


def test_destinations_limit_keeps_the_deepest(stack, guarded):
    conn = connect(stack.broker.host, stack.broker.portmapper_port)
    try:
        producer = conn.create_session().create_producer(Queue("prom.deepest"))
        for i in range(40):  # deeper than any other queue of this module
            producer.send(TextMessage(f"deep {i}"), persistent=False)
    finally:
        conn.close()
    status, _, text = fetch(guarded + "/metrics", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    got = samples(text)
    exported = {dict(k[1])["destination"] for k in got if k[0] == "openmq_destination_messages"}
    assert exported == {"prom.deepest"}
    assert got[("openmq_destination_messages", dest("prom.deepest"))] == 40
    # The broker-wide count still counts them all (the DMQ and this one at least).
    assert got[("openmq_broker_destinations", ())] >= 2


def test_logged_in_administrator_is_let_in(guarded):
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    _, _, page = fetch(guarded + "/login/", opener=opener)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode(
        {"username": "admin", "password": "admin", "csrfmiddlewaretoken": csrf}
    ).encode()
    request = urllib.request.Request(
        guarded + "/login/", data=form, headers={"Referer": guarded + "/login/"}
    )
    with opener.open(request, timeout=30) as r:
        assert r.status == 200
    status, _, text = fetch(guarded + "/metrics", opener=opener)
    assert status == 200
    assert samples(text)[("openmq_broker_up", ())] == 1


def test_broker_down_gives_up_zero(stack):
    # The module's stack, its broker stopped and then started again on the same ports and
    # store (tests/crash_stack.py), so the tests of this module pass in any order: a stack
    # of its own is a redis, a broker and a daphne more to start.
    status, _, text = fetch(stack.url + "/metrics")
    assert status == 200
    assert samples(text)[("openmq_broker_up", ())] == 1
    stack.broker.stop()
    try:
        status, _, text = fetch(stack.url + "/metrics")
        assert status == 200
        got = samples(text)
        assert got[("openmq_broker_up", ())] == 0
        # Nothing but the up gauge: no stale figures of a broker that is gone.
        assert set(families(text)) == {"openmq_broker_up"}
    finally:
        restart_broker(stack.broker)
    status, _, text = fetch(stack.url + "/metrics")
    assert status == 200 and samples(text)[("openmq_broker_up", ())] == 1
