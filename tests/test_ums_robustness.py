"""The UMS gateway against requests as a plain HTTP client sends them (http.client, and
raw sockets for a body cut short, a silent sender and bytes that are not UTF-8), and the
one destination-name rule at every way in: JMS packets, UMS, REST and the portal form.

Its own stack (redis, broker, daphne portal, uvicorn gateway): a 1 s read timeout for
request bodies (UMS_READ_TIMEOUT), a 4 s sid/producer cache and a broker that reaps
auto-created destinations unused for 1 s, so a sessionless send's producer is seen to go.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
import requests

from broker.admintools.client import AdminClient
from broker.protocol.packet import build_packet
from broker.protocol.types import FLAG_A, FLAG_Q, PacketType
from openmq_client import JMSException, Queue, TextMessage, Topic, connect

from .ums_stack import UmsStack, running_ums
from .wire import login

ENV = {"UMS_CACHE_DURATION": "4000", "UMS_SWEEP_INTERVAL": "500", "UMS_READ_TIMEOUT": "1000"}
BAD_NAMES = ["a\r\nb", "a\x00b", "a\nb", "x\u200by"]


@pytest.fixture(scope="module")
def stack() -> Iterator[UmsStack]:
    with running_ums(
        "imq-umsrob-",
        lambda tmp: ["imq.autocreate.reaptime=1"],
        ENV,
        {"jos\u00e9": "s\u00e9same"},
    ) as ums:
        yield ums


def q() -> str:
    return f"rob_{uuid.uuid4().hex[:10]}"


def call(port: int, target: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """POST ``target`` (sent as it is: already percent-encoded) with http.client."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", target, body=body, headers={"Content-Type": "text/plain"})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def raw(port: int, data: bytes, *, close: bool) -> bytes:
    """Write ``data`` on a fresh socket; then close at once, or read until the server
    closes (what came back)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        if close:
            return b""
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def wait_for(what: str, check, seconds: float = 60.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {what}")


def destinations(stack: UmsStack) -> set[str]:
    b = stack.broker

    async def run() -> set[str]:
        admin = await AdminClient.open(b.host, b.portmapper_port, "admin", "admin")
        try:
            names = {str(i.get("name")) for i in await admin.destinations()}
            # Not the admin connections' own reply queues.
            return {n for n in names if not n.startswith("temporary_destination://")}
        finally:
            await admin.close()

    return asyncio.run(run())


def test_non_ascii_names_and_bytes_that_are_not_utf8(stack):
    port = stack.port
    # A destination named café, as the query string carries it (UTF-8, percent-encoded).
    status, headers, _ = call(port, "/ums/simple?service=send&destination=caf%C3%A9", b"hi")
    assert status == 200 and headers["ums.status"] == "200"
    # A header carries it as the query string did (never raw bytes).
    assert headers["ums.destination"] == "caf%C3%A9"
    status, headers, body = call(
        port, "/ums/simple?service=receive&destination=caf%C3%A9&timeout=5000"
    )
    assert (status, body) == (200, b"hi")
    assert "caf\u00e9" in destinations(stack)
    # A user named josé, who is in the repository, logs in, sends and closes.
    status, _, sid = call(port, "/ums/simple?service=login&user=jos%C3%A9&password=s%C3%A9same")
    assert status == 200 and sid, sid
    target = f"/ums/simple?service=send&sid={sid.decode()}&destination=caf%C3%A9"
    assert call(port, target, "from jos\u00e9".encode())[0] == 200
    assert call(port, f"/ums/simple?service=close&sid={sid.decode()}")[0] == 200
    # The wrong password, and a user the repository does not have: the auth error.
    for query in ("user=jos%C3%A9&password=nope", "user=ren%C3%A9e&password=x"):
        status, headers, body = call(port, f"/ums/simple?service=login&{query}")
        assert status == 401 and headers["ums.status"] == "401", body
        assert b"authentication failed" in body
    # %FF is no UTF-8: 400 with the reason, in a key or a value, through the raw socket.
    for query in (b"service=send&destination=%FF", b"service=send&de%FFst=x"):
        reply = raw(
            port,
            b"POST /ums/simple?" + query + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
            b"Connection: close\r\n\r\nhi",
            close=False,
        )
        assert reply.startswith(b"HTTP/1.1 400 "), reply
        assert b"not UTF-8" in reply and b"ums.status: 400" in reply
    # The same on the portal's /ums/ (daphne, the same ASGI path).
    status, _, body = call(stack.portal.port, "/ums/simple?service=send&destination=%FF", b"x")
    assert status == 400 and b"not UTF-8" in body
    # Still serving everyone.
    assert call(port, f"/ums/simple?service=send&destination={q()}", b"ok")[0] == 200


def test_a_body_cut_short_or_never_sent(stack):
    port = stack.port
    dest = q()
    head = (
        f"POST /ums/simple?service=send&destination={dest} HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: text/plain\r\nContent-Length: 1000\r\n\r\n"
    ).encode()
    # 7 bytes of 1000, then the client goes: refused, logged once, nothing stored.
    raw(port, head + b"1234567", close=True)
    wait_for(
        "the gateway's log line",
        lambda: "closed the connection after 7 bytes" in stack.log_path.read_text(),
    )
    status, headers, body = call(
        port, f"/ums/simple?service=receive&destination={dest}&timeout=1500"
    )
    assert (status, headers["ums.status"], body) == (200, "404", b"")
    assert stack.log_path.read_text().count("closed the connection after 7 bytes") == 1
    # A sender that goes silent after the headers and 7 bytes: 408 and the connection
    # closed once UMS_READ_TIMEOUT (1 s here) passes without the rest.
    reply = raw(port, head + b"1234567", close=False)
    assert reply.startswith(b"HTTP/1.1 408 "), reply
    assert b"connection: close" in reply and b"UMS_READ_TIMEOUT" in reply
    assert b"ums.service: send_reply" in reply and b"ums.status: 408" in reply
    status, headers, body = call(
        port, f"/ums/simple?service=receive&destination={dest}&timeout=500"
    )
    assert (headers["ums.status"], body) == ("404", b"")
    # The same on the portal's /ums/: daphne reads the whole body before the application
    # sees the request, so portal/serve.py gives it the read timeout and the 408.
    reply = raw(stack.portal.port, head + b"1234567", close=False)
    assert reply.startswith(b"HTTP/1.1 408 "), reply
    assert b"connection: close" in reply and b"UMS_READ_TIMEOUT" in reply
    assert b"ums.service: send_reply" in reply and b"ums.status: 408" in reply
    # ... and a silent sender of the portal's own pages gets its 408 too.
    reply = raw(stack.portal.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", close=False)
    assert reply.startswith(b"HTTP/1.1 408 "), reply
    status, headers, body = call(
        port, f"/ums/simple?service=receive&destination={dest}&timeout=500"
    )
    assert (headers["ums.status"], body) == ("404", b"")
    # A whole body sent in pieces is one message.
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head.replace(b"1000", b"10") + b"12345")
        time.sleep(0.3)  # a pause shorter than the read timeout, not an assertion
        s.sendall(b"67890")
        assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
    status, _, body = call(port, f"/ums/simple?service=receive&destination={dest}&timeout=5000")
    assert (status, body) == (200, b"1234567890")


def test_bad_destination_names_are_refused_at_every_way_in(stack):
    port = stack.port
    before = destinations(stack)
    # UMS: 400 with the reason; the name is not echoed into a header; nothing reaches
    # the broker.
    for name, escaped in (("a\r\nb", "a%0D%0Ab"), ("a\x00b", "a%00b"), ("a-b", "a-b")):
        for service in ("send", "receive"):
            status, headers, body = call(
                port, f"/ums/simple?service={service}&destination={escaped}&timeout=100", b"x"
            )
            assert status == 400 and headers["ums.status"] == "400", (name, body)
            assert b"invalid destination name" in body
            assert headers["ums.destination"] == ""
    # A queue named like a topic pattern: 400 (the broker would refuse it 415); the same
    # name is a topic pattern, which a receive may use.
    for service in ("send", "receive"):
        status, headers, body = call(
            port, f"/ums/simple?service={service}&destination=%2A.x&timeout=100", b"x"
        )
        assert status == 400 and headers["ums.status"] == "400", body
        assert b"wildcards" in body
    status, headers, _ = call(
        port, "/ums/simple?service=receive&destination=%2A.x&domain=topic&timeout=100"
    )
    assert status == 200 and headers["ums.status"] != "400"
    # A topic pattern OpenMQ's broker refuses (406): 400 with its words.
    status, headers, body = call(
        port, "/ums/simple?service=receive&destination=q%2Ax&domain=topic&timeout=100"
    )
    assert status == 400 and headers["ums.status"] == "400", body
    assert b"q*x-Wildcard should be surrounded by ." in body
    envelope = (
        '<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/">'
        '<SOAP-ENV:Header><ums:MessageHeader xmlns:ums="https://mq.java.net/ums">'
        '<ums:Service service="send" destination="a&#10;b"/></ums:MessageHeader>'
        "</SOAP-ENV:Header><SOAP-ENV:Body>x</SOAP-ENV:Body></SOAP-ENV:Envelope>"
    )
    r = requests.post(
        f"{stack.url}/ums/xml", data=envelope, headers={"Content-Type": "text/xml"}, timeout=30
    )
    assert r.status_code == 500 and "invalid destination name" in r.text  # a SOAP fault

    # JMS: the broker answers 400 to CREATE_DESTINATION, ADD_PRODUCER, ADD_CONSUMER and
    # an acknowledged SEND, and goes on serving the connection.
    b = stack.broker

    async def jms() -> list[str]:
        out = []
        conn = await connect(b.host, b.portmapper_port)
        try:
            sess = await conn.create_session()
            for name in BAD_NAMES:
                for dest in (Queue(name), Topic(name)):
                    for what, op in (
                        ("create", lambda d: conn._create_destination(d)),
                        ("producer", lambda d: sess.create_producer(d)),
                        ("consumer", lambda d: sess.create_consumer(d)),
                    ):
                        try:
                            await op(dest)
                            out.append(f"{what} {name!r} accepted")
                        except JMSException as exc:
                            assert exc.status == 400, (what, name, exc)
                            assert "invalid destination name" in str(exc)
            ok = q()
            prod = await sess.create_producer(Queue(ok))
            await prod.send(TextMessage("still serving"))
            cons = await sess.create_consumer(Queue(ok))
            await conn.start()
            m = await cons.receive(10)
            assert isinstance(m, TextMessage) and m.text == "still serving"
        finally:
            await conn.close()
        return out

    assert asyncio.run(jms()) == []
    # A message sent straight to such a name (no CREATE_DESTINATION, no producer first),
    # acknowledged: SEND_REPLY 400; the connection serves on.
    peer = login(b.host, b.jms_port)
    try:
        for i, name in enumerate(BAD_NAMES + [q()]):
            peer.send(
                build_packet(
                    PacketType.TEXT_MESSAGE,
                    flags=FLAG_Q | FLAG_A,
                    consumer_id=10 + i,
                    fields={1: name},
                    body=b"x",
                )
            )
            status = peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"]
            assert status == (200 if name.startswith("rob_") else 400), (name, status)
    finally:
        peer.close()
    after = destinations(stack)
    assert not [n for n in after - before if any(c in n for c in "\r\n\x00\u200b")]

    # getBrokerInfo stays well-formed XML for the administrator.
    r = requests.get(
        f"{stack.url}/ums/simple",
        params={"service": "getBrokerInfo", "cmd": "getDestinations", "user": "admin",
                "password": "admin"},
        timeout=30,
    )  # fmt: skip
    assert r.status_code == 200
    ET.fromstring(r.content)

    # REST: 400 with the name field's error.
    token = requests.post(
        f"{stack.portal.url}/api/token/",
        json={"username": "admin", "password": "admin"},
        timeout=30,
    ).json()["token"]
    for name in ("a\r\nb", "a b", "9lives", "x\u200by"):
        r = requests.post(
            f"{stack.portal.url}/api/destinations/",
            json={"name": name, "type": "queue"},
            headers={"Authorization": f"Token {token}"},
            timeout=30,
        )
        assert r.status_code == 400, (name, r.text)
        assert "contains invalid characters" in r.json()["errors"]["name"][0], r.text
    assert destinations(stack) == after


def test_portal_form_says_why_a_name_is_refused():
    from portal.ui.forms import DestinationCreateForm

    for name, says in (
        ("a\rb", "'a\\rb' contains invalid characters (a letter, _ or $ first"),
        ("x\u200by", "contains invalid characters"),
        ("9lives", "[B4091]: The Destination of 9lives contains invalid characters"),
        ("mq.mine", "reserved"),
    ):
        form = DestinationCreateForm(data={"kind": "q", "name": name})
        assert not form.is_valid()
        assert says in " ".join(form.errors["name"]), (name, form.errors)
    assert DestinationCreateForm(data={"kind": "q", "name": "caf\u00e9"}).is_valid()
    # A name stored before the broker refused such names still gives well-formed XML.
    from portal.ums.services import destination_elements

    assert destination_elements({"name": "a\x00b\x1f"})["Name"] == "a\ufffdb\ufffd"


def test_sessionless_send_leaves_no_producer_behind(stack):
    """A send without sid registers a producer on the gateway's pooled connection; it is
    closed once idle for the cache duration (4 s here), so the broker reaps the
    auto-created queue (unused for imq.autocreate.reaptime, 1 s here) even while the
    connection stays busy."""
    dest = q()
    assert call(stack.port, f"/ums/simple?service=send&destination={dest}", b"once")[0] == 200
    status, _, body = call(
        stack.port, f"/ums/simple?service=receive&destination={dest}&timeout=5000"
    )
    assert (status, body) == (200, b"once")
    assert dest in destinations(stack)
    # Meanwhile other sessionless sends keep the gateway's pooled connection in use (it
    # would otherwise close, idle, and take every producer with it).
    busy = q()

    def reaped() -> bool:
        assert call(stack.port, f"/ums/simple?service=send&destination={busy}", b".")[0] == 200
        return dest not in destinations(stack)

    wait_for(f"{dest} reaped", reaped)
    # The gateway sends there again as if nothing happened.
    assert call(stack.port, f"/ums/simple?service=send&destination={dest}", b"again")[0] == 200
    status, _, body = call(
        stack.port, f"/ums/simple?service=receive&destination={dest}&timeout=5000"
    )
    assert (status, body) == (200, b"again")
