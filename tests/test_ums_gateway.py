"""The UMS gateway's lean ASGI path (portal/ums/asgi.py) over real HTTP: the uvicorn
gateway process ``manage.py up`` runs and daphne's portal both answer /ums/ with it, the
HTTP edges Django used to handle (repeated fields, charset, body limit, methods, the
rest of the portal behind it), and one-shot receives on the pooled shared session leave
nothing behind for other consumers.
"""

from __future__ import annotations

import asyncio
import uuid

import requests

from openmq_client import Queue, TextMessage, connect


def q() -> str:
    return f"umsg_{uuid.uuid4().hex[:10]}"


def post(url: str, body: str | bytes = b"", headers=None, **params: str) -> requests.Response:
    return requests.post(f"{url}/ums/simple", params=params, data=body, headers=headers, timeout=30)


def test_daphne_portal_and_gateway_share_the_broker(ums_stack):
    dest = q()
    r = post(ums_stack.portal.url, "via daphne", service="send", destination=dest)
    assert r.status_code == 200 and r.headers["ums.status"] == "200", r.text
    r = post(ums_stack.url, service="receive", destination=dest, timeout="5000")
    assert r.text == "via daphne" and r.headers["ums.service"] == "receive_reply"
    r = post(ums_stack.url, "via uvicorn", service="send", destination=dest)
    r = post(ums_stack.portal.url, service="receive", destination=dest, timeout="5000")
    assert r.text == "via uvicorn"
    assert r.headers["Content-Type"] == "text/plain;charset=UTF-8"


def test_a_sid_belongs_to_its_process(ums_stack):
    login = post(ums_stack.url, service="login")
    sid = login.text
    node = login.cookies.get("UMSNODE")
    assert node and sid.startswith(node + ".")
    r = post(ums_stack.portal.url, "x", service="send", sid=sid, destination=q())
    assert r.status_code == 410 and "not known" in r.text
    other = post(ums_stack.portal.url, service="login")
    assert other.cookies.get("UMSNODE") != node
    for url, s in ((ums_stack.url, sid), (ums_stack.portal.url, other.text)):
        assert post(url, service="close", sid=s).status_code == 200


def test_http_edges(ums_stack):
    url = ums_stack.url
    dest = q()
    # A repeated field: the last one counts (as Django's request.GET.get).
    r = requests.post(
        f"{url}/ums/simple?service=send&destination=nowhere&destination={dest}",
        data=b"last wins",
        timeout=30,
    )
    assert r.headers["ums.destination"] == dest
    # The body's charset parameter.
    r = post(
        url,
        "grüße".encode("latin-1"),
        {"Content-Type": "text/plain; charset=ISO-8859-1"},
        service="send",
        destination=dest,
    )
    assert r.status_code == 200, r.text
    got = [post(url, service="receive", destination=dest, timeout="5000").text for _ in range(2)]
    assert got == ["last wins", "grüße"]
    r = post(url, b"\xff\xfe", {"Content-Type": "text/plain; charset=utf-8"}, service="send",
             destination=dest)  # fmt: skip
    assert r.status_code == 400 and "charset" in r.text
    # The trailing-slash form, and a body over Django's DATA_UPLOAD_MAX_MEMORY_SIZE.
    r = requests.post(
        f"{url}/ums/simple/", params={"service": "send", "destination": dest}, timeout=30
    )
    assert r.status_code == 200
    r = post(url, service="receive", destination=dest, timeout="5000")
    assert r.headers["ums.status"] == "200" and r.text == ""
    r = post(url, b"x" * 3_000_000, service="send", destination=dest)
    assert r.status_code == 413 and "over" in r.text
    # Methods.
    r = requests.put(f"{url}/ums/simple", params={"service": "send"}, timeout=30)
    assert r.status_code == 405
    r = requests.get(f"{url}/ums/xml", timeout=30)
    assert r.status_code == 500 and "Fault" in r.text
    # Everything else is the portal behind it.
    assert requests.get(f"{url}/healthz", timeout=30).text == "ok"
    assert requests.get(f"{url}/ums/nothing-here", timeout=30).status_code == 404


def test_one_shot_receives_leave_nothing_behind(ums_stack):
    """A one-shot receive's consumer lives on the pooled shared session and stays parked
    for the next receive of its queue (UMS_RECEIVE_LINGER, 1 s); when it closes, the
    message the broker had pushed to it goes back at once (the broker's consumer-close
    rule), so a JMS client gets every message UMS did not hand out."""
    b = ums_stack.broker
    dests = [q() for _ in range(5)]
    for dest in dests:
        for text in ("first", "second"):
            assert post(ums_stack.url, text, service="send", destination=dest).status_code == 200
        r = post(ums_stack.url, service="receive", destination=dest, timeout="5000")
        assert r.text == "first"

    async def jms_side() -> list[str]:
        conn = await connect(b.host, b.portmapper_port)
        try:
            sess = await conn.create_session()
            await conn.start()
            out = []
            for dest in dests:
                cons = await sess.create_consumer(Queue(dest))
                m = await cons.receive(10)
                assert isinstance(m, TextMessage), f"{dest}: the second message is held"
                out.append(m.text or "")
                await cons.close()
            return out
        finally:
            await conn.close()

    assert asyncio.run(jms_side()) == ["second"] * len(dests)
