"""UMS simple messaging and the GET services over real HTTP (daphne + broker + redis)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import requests

from openmq_client import Queue, TextMessage, connect

HEADERS = ("ums.service", "ums.destination", "ums.domain", "ums.mom", "ums.status")


def q() -> str:
    return f"ums_{uuid.uuid4().hex[:10]}"


def post(stack, body: str | bytes = b"", **params: str) -> requests.Response:
    return requests.post(f"{stack.url}/ums/simple", params=params, data=body, timeout=30)


def ums(r: requests.Response) -> dict[str, str]:
    return {h: r.headers[h] for h in HEADERS}


def test_send_receive_one_shot(ums_stack):
    dest = q()
    r = post(ums_stack, "héllo wörld".encode(), service="send", destination=dest)
    assert r.status_code == 200, r.text
    assert ums(r) == {
        "ums.service": "send_reply",
        "ums.destination": dest,
        "ums.domain": "queue",
        "ums.mom": "openmq",
        "ums.status": "200",
    }
    r = post(ums_stack, service="receive", destination=dest, timeout="5000")
    assert r.status_code == 200
    assert r.content.decode("utf-8") == "héllo wörld"
    assert r.headers["Content-Type"] == "text/plain;charset=UTF-8"
    assert ums(r)["ums.service"] == "receive_reply"
    assert ums(r)["ums.status"] == "200"


def test_receive_timeout_is_empty_404(ums_stack):
    dest = q()
    r = post(ums_stack, service="receive", destination=dest, timeout="300")
    assert r.status_code == 200
    assert r.content == b""
    assert ums(r)["ums.status"] == "404"
    assert ums(r)["ums.service"] == "receive_reply"


def test_login_sid_send_receive_close(ums_stack):
    dest = q()
    r = post(ums_stack, service="login", user="alice", password="wonderland")
    assert r.status_code == 200 and ums(r)["ums.service"] == "login_reply"
    sid = r.text
    assert sid and "." in sid
    assert r.cookies.get("UMSNODE") == sid.split(".")[0]
    for i in range(3):
        r = post(ums_stack, f"m{i}", service="send", sid=sid, destination=dest)
        assert ums(r)["ums.status"] == "200", r.text
    got = [post(ums_stack, service="receive", sid=sid, destination=dest).text for _ in range(3)]
    assert got == ["m0", "m1", "m2"]
    r = post(ums_stack, service="close", sid=sid)
    assert r.status_code == 200 and ums(r)["ums.service"] == "close_reply"
    r = post(ums_stack, "late", service="send", sid=sid, destination=dest)
    assert r.status_code == 410 and ums(r)["ums.status"] == "410"
    assert "not known" in r.text


def test_topic_with_sid(ums_stack):
    dest = q()
    sid = post(ums_stack, service="login").text
    # The first receive subscribes; what is published afterwards waits for the next.
    r = post(ums_stack, service="receive", sid=sid, destination=dest, domain="topic", timeout="200")
    assert ums(r)["ums.status"] == "404" and ums(r)["ums.domain"] == "topic"
    assert ums(r)["ums.status"] == "404"
    r = post(ums_stack, "news", service="send", destination=dest, domain="topic")
    assert ums(r)["ums.status"] == "200"
    r = post(ums_stack, service="receive", sid=sid, destination=dest, domain="topic")
    assert r.text == "news"
    post(ums_stack, service="close", sid=sid)


def test_transacted_commit_and_rollback(ums_stack):
    dest = q()
    sid = post(ums_stack, service="login", transacted="true").text
    post(ums_stack, "t1", service="send", sid=sid, destination=dest)
    # Not visible before the commit.
    r = post(ums_stack, service="receive", destination=dest, timeout="300")
    assert ums(r)["ums.status"] == "404"
    r = post(ums_stack, service="rollback", sid=sid)
    assert ums(r) | {} == ums(r) and ums(r)["ums.service"] == "rollback_reply"
    r = post(ums_stack, service="receive", destination=dest, timeout="300")
    assert ums(r)["ums.status"] == "404"  # the rolled-back send is gone
    post(ums_stack, "t2", service="send", sid=sid, destination=dest)
    r = post(ums_stack, service="commit", sid=sid)
    assert ums(r)["ums.service"] == "commit_reply" and ums(r)["ums.status"] == "200"
    # Received inside the transaction, rolled back: the message comes back.
    r = post(ums_stack, service="receive", sid=sid, destination=dest)
    assert r.text == "t2"
    post(ums_stack, service="rollback", sid=sid)
    post(ums_stack, service="close", sid=sid)
    r = post(ums_stack, service="receive", destination=dest, timeout="5000")
    assert r.text == "t2"
    # Committed receive: gone for good.
    sid = post(ums_stack, service="login", transacted="true").text
    post(ums_stack, "t3", service="send", destination=dest)
    assert post(ums_stack, service="receive", sid=sid, destination=dest).text == "t3"
    post(ums_stack, service="commit", sid=sid)
    post(ums_stack, service="close", sid=sid)
    r = post(ums_stack, service="receive", destination=dest, timeout="500")
    assert ums(r)["ums.status"] == "404"


def test_commit_needs_transacted_sid(ums_stack):
    sid = post(ums_stack, service="login").text
    r = post(ums_stack, service="commit", sid=sid)
    assert r.status_code == 400 and "not transacted" in r.text
    r = post(ums_stack, service="commit")
    assert r.status_code == 400
    post(ums_stack, service="close", sid=sid)


def test_sid_expires_and_releases_its_messages(ums_stack):
    dest = q()
    sid = post(ums_stack, service="login", transacted="true").text
    post(ums_stack, "kept", service="send", destination=dest)
    assert post(ums_stack, service="receive", sid=sid, destination=dest).text == "kept"
    # Idle past the cache duration (4 s) plus a sweep (0.5 s): the sid is gone and its
    # uncommitted receive is rolled back.
    deadline = time.monotonic() + 30
    while True:
        time.sleep(0.2)
        r = post(ums_stack, service="receive", destination=dest, timeout="200")
        if r.text == "kept" or time.monotonic() > deadline:
            break
    assert r.text == "kept"
    r = post(ums_stack, service="commit", sid=sid)
    assert r.status_code == 410


def test_wrong_password(ums_stack):
    r = post(ums_stack, service="login", user="alice", password="nope")
    assert r.status_code == 401 and ums(r)["ums.status"] == "401"
    assert "authentication failed" in r.text
    r = post(ums_stack, "x", service="send", destination=q(), user="alice", password="nope")
    assert r.status_code == 401


def test_unauthorised_destination(ums_stack):
    r = post(ums_stack, "x", service="send", destination="secret")
    assert r.status_code == 403 and ums(r)["ums.status"] == "403"
    assert "not authorized" in r.text
    r = post(ums_stack, service="receive", destination="secret", timeout="100")
    assert r.status_code == 403
    # alice is not denied.
    r = post(
        ums_stack, "x", service="send", destination="secret", user="alice", password="wonderland"
    )
    assert r.status_code == 200, r.text


def test_bad_requests(ums_stack):
    r = post(ums_stack, service="fly")
    assert r.status_code == 400 and "unknown service" in r.text
    assert ums(r)["ums.service"] == "fly_reply"
    r = post(ums_stack, service="send")
    assert r.status_code == 400 and "destination" in r.text
    r = post(ums_stack, service="receive", destination=q(), timeout="soon")
    assert r.status_code == 400
    r = post(ums_stack, service="send", destination=q(), domain="galaxy")
    assert r.status_code == 400


def test_interop_with_python_client(ums_stack):
    """UMS send -> JMS TextMessage for a client of the broker, and back."""
    dest = q()
    post(ums_stack, "to jms", service="send", destination=dest)
    b = ums_stack.broker

    async def jms_side() -> str:
        conn = await connect(b.host, b.portmapper_port)
        try:
            sess = await conn.create_session()
            cons = await sess.create_consumer(Queue(dest))
            await conn.start()
            m = await cons.receive(10)
            assert isinstance(m, TextMessage)
            prod = await sess.create_producer(Queue(dest))
            await prod.send(TextMessage("from jms", properties={"n": 7}))
            return m.text or ""
        finally:
            await conn.close()

    assert asyncio.run(jms_side()) == "to jms"
    assert post(ums_stack, service="receive", destination=dest).text == "from jms"


def test_get_configuration_is_the_seed_format(ums_stack):
    r = requests.get(
        f"{ums_stack.url}/ums/simple",
        params={"service": "getConfiguration", "user": "admin", "password": "admin"},
        timeout=30,
    )
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/xml;charset=UTF-8"
    b = ums_stack.broker
    assert r.text == (
        "<ums>\n"
        f"    <BrokerAddress>{b.host}:{b.portmapper_port}</BrokerAddress>\n"
        "    <JMSAuthenticate>true</JMSAuthenticate>\n"
        "    <CacheDuration>4000</CacheDuration>\n"
        "    <SweepInterval>500</SweepInterval>\n"
        "    <ReceiveTimeout>7000</ReceiveTimeout>\n"
        "    <MaxClientsPerConnection>100</MaxClientsPerConnection>\n"
        "</ums>"
    )
    r = requests.get(
        f"{ums_stack.url}/ums/simple", params={"service": "getConfiguration"}, timeout=30
    )
    assert r.status_code == 401


def test_debug_and_ping(ums_stack):
    url = f"{ums_stack.url}/ums/simple"
    r = requests.get(
        url,
        params={"service": "debug", "debug": "true", "user": "admin", "password": "admin"},
        timeout=30,
    )
    assert r.status_code == 200 and r.text == "service=debug, debug=true"
    r = requests.get(
        url,
        params={"service": "debug", "debug": "false", "user": "admin", "password": "admin"},
        timeout=30,
    )
    assert r.text == "service=debug, debug=false"
    r = requests.get(url, params={"service": "debug", "debug": "true"}, timeout=30)
    assert r.status_code == 401
    r = requests.get(
        url, params={"service": "ping", "user": "admin", "password": "admin"}, timeout=30
    )
    assert r.status_code == 200
    assert r.text.startswith("Broker is alive, round trip = ") and r.text.endswith(" milli secs.")
    r = requests.get(
        url, params={"service": "ping", "user": "alice", "password": "bad"}, timeout=30
    )
    assert r.status_code == 401


def test_get_broker_info_destinations(ums_stack):
    dest = q()
    post(ums_stack, "one", service="send", destination=dest)
    url = f"{ums_stack.url}/ums/simple"
    params = {
        "service": "getBrokerInfo",
        "cmd": "getDestinations",
        "user": "admin",
        "password": "admin",
    }
    r = requests.get(url, params={**params, "dest-elements": "Name,Type,NumMsgs"}, timeout=30)
    assert r.status_code == 200
    import xml.etree.ElementTree as ET

    root = ET.fromstring(r.content)
    assert root.tag == "ums"
    rp = root.find("BrokerInfo/Header/RequestProperties")
    assert rp is not None and rp.get("cmd") == "getDestinations"
    assert rp.get("dest-elements") == "Name,Type,NumMsgs"
    dests = {d.get("Name"): d for d in root.iterfind("BrokerInfo/Body/Destinations/Destination")}
    d = dests[dest]
    assert d.get("Type") == "q"
    assert [c.tag for c in d] == ["Name", "Type", "NumMsgs"]
    assert d.findtext("NumMsgs") == "1"
    r = requests.get(url, params=params, timeout=30)
    full = ET.fromstring(r.content)
    tags = {c.tag for d in full.iterfind("BrokerInfo/Body/Destinations/Destination") for c in d}
    assert {"NumConsumers", "NumProducers", "TotalMsgBytes", "StateLabel"} <= tags
    r = requests.get(url, params={"service": "getBrokerInfo", "cmd": "getDestinations"}, timeout=30)
    assert r.status_code == 401
    post(ums_stack, service="receive", destination=dest)


def test_readme_curl_examples(ums_stack):
    curl = shutil.which("curl")
    assert curl, "curl is needed for the examples in docs/reference/ums.md"
    base = f"{ums_stack.url}/ums/simple"
    dest = q()
    out = subprocess.run(
        [
            curl,
            "-s",
            "-i",
            "-X",
            "POST",
            "--data-binary",
            "hello",
            f"{base}?service=send&destination={dest}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "ums.status: 200" in out.lower() or "Ums.status: 200" in out
    out = subprocess.run(
        [curl, "-s", "-X", "POST", f"{base}?service=receive&destination={dest}&timeout=5000"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "hello"
    out = subprocess.run(
        [curl, "-s", f"{base}?service=ping"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("Broker is alive")


def test_demo_page(ums_stack):
    r = requests.get(f"{ums_stack.url}/ums/demo/", timeout=30)
    assert r.status_code == 200 and "ums/demo.js" in r.text
    js = requests.get(f"{ums_stack.url}/static/ums/demo.js", timeout=30)
    assert js.status_code == 200 and "/simple?" in js.text
