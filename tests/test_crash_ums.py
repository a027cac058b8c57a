"""The UMS HTTP gateway while its broker is SIGKILLed under load and started again (same
ports, var home and database), all real processes: redis, the broker, the daphne portal
and the uvicorn gateway of ``manage.py up``.

While the broker is down every request gets a prompt, clear answer: 503 with "not
reachable" (``ums.status: 503``; a SOAP fault whose detail says 503 on /xml) for requests
without sid, 410 "log in again" for a sid whose session went with its connection; a
receive that was waiting when the broker died gets that answer too, not the 404 of "no
message within the timeout".  Once the broker is back the same gateway process serves
again by itself, and every persistent message whose send was answered 200 is there.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
import requests

from portal.ums import transformer

from .crash_stack import kill_broker, restart_broker
from .ums_stack import UmsStack, running_ums

pytestmark = pytest.mark.timeout(240)

SOAP = "http://schemas.xmlsoap.org/soap/envelope/"
UMS = "https://mq.java.net/ums"
HTTP_TIMEOUT = 60  # a request answered later than this counts as a hang


@pytest.fixture(scope="module")
def stack() -> Iterator[UmsStack]:
    with running_ums("imq-crash-ums-") as ums:
        yield ums


def simple(stack: UmsStack, data: bytes | None = None, method: str = "POST", **fields):
    return requests.request(
        method, f"{stack.url}/ums/simple", params=fields, data=data, timeout=HTTP_TIMEOUT
    )


def xml_send(stack: UmsStack, destination: str, text: str) -> requests.Response:
    envelope = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<SOAP-ENV:Envelope xmlns:SOAP-ENV="{SOAP}" xmlns:ums="{UMS}">'
        '<SOAP-ENV:Header><ums:MessageHeader ums:id="1.0" ums:version="1.1">'
        f'<ums:Service ums:service="send" ums:destination="{destination}"/>'
        "</ums:MessageHeader></SOAP-ENV:Header>"
        f"<SOAP-ENV:Body>{text}</SOAP-ENV:Body></SOAP-ENV:Envelope>"
    )
    return requests.post(
        f"{stack.url}/ums/xml",
        data=envelope.encode(),
        headers={"Content-Type": "text/xml; charset=utf-8"},
        timeout=HTTP_TIMEOUT,
    )


def body_text(r: requests.Response) -> str:
    """What a /simple receive got: the text, or for a message sent through /xml (a
    BytesMessage in MessageTransformer's layout) the text of its SOAP Body."""
    if r.headers["Content-Type"].startswith("application/octet-stream"):
        envelope = transformer.decode(r.content).envelope
        return ET.fromstring(envelope).findtext(f"{{{SOAP}}}Body") or ""
    return r.text


def fault_status(r: requests.Response) -> str:
    """The UMS status in a SOAP fault's detail."""
    assert r.status_code == 500, r.text
    node = ET.fromstring(r.content).find(f".//{{{UMS}}}status")
    assert node is not None, r.text
    return node.text or ""


def assert_unreachable(r: requests.Response) -> None:
    assert r.status_code == 503, (r.status_code, r.text)
    assert r.headers.get("ums.status") == "503", r.headers
    assert "not reachable" in r.text and "Traceback" not in r.text, r.text


def assert_sid_gone(r: requests.Response) -> None:
    assert r.status_code == 410, (r.status_code, r.text)
    assert r.headers.get("ums.status") == "410", r.headers
    assert "log in again" in r.text, r.text


class Senders:
    """Threads sending persistent messages without sid (two over /simple, one over /xml)
    until stopped; ``ok`` holds the bodies answered 200, ``odd`` any other answer than
    200 or 503 (the broker down)."""

    def __init__(self, stack: UmsStack, queue: str) -> None:
        self.stack, self.queue = stack, queue
        self.ok: set[str] = set()
        self.refused = 0
        self.odd: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self.run, args=(n, n == 2), daemon=True) for n in range(3)
        ]

    def run(self, n: int, via_xml: bool) -> None:
        i = 0
        while not self.stop.is_set():
            body = f"m-{n}-{i}"
            i += 1
            try:
                if via_xml:
                    r = xml_send(self.stack, self.queue, body)
                    status = "200" if r.status_code == 200 else fault_status(r)
                else:
                    r = simple(self.stack, body.encode(), service="send", destination=self.queue)
                    status = str(r.status_code)
                    assert r.headers.get("ums.status") == status, r.headers
            except Exception as exc:  # a hang (timeout) or a malformed answer
                with self.lock:
                    self.odd.append(f"{body}: {exc!r}")
                continue
            with self.lock:
                if status == "200":
                    self.ok.add(body)
                elif status == "503" and "not reachable" in r.text:
                    self.refused += 1
                else:
                    self.odd.append(f"{body}: {r.status_code} {r.text[:300]}")

    def __enter__(self) -> Senders:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(HTTP_TIMEOUT + 10)


def wait_for(what: str, check, timeout: float = 90) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_gateway_through_a_broker_crash(stack: UmsStack) -> None:
    gateway_pid = stack.proc.pid
    # Sessions from before the crash: a plain one and a transacted one with a send
    # that is never committed.
    sid = simple(stack, service="login").text
    tsid = simple(stack, service="login", transacted="true").text
    assert simple(stack, b"t1", service="send", sid=tsid, destination="crash.t").status_code == 200
    assert simple(stack, b"w", service="send", sid=sid, destination="crash.w").status_code == 200
    assert simple(stack, service="receive", sid=sid, destination="crash.w").text == "w"

    # Receives waiting when the broker dies: a sid's, and one without sid.
    waiting: dict[str, requests.Response] = {}

    def wait_receive(key: str, **fields) -> None:
        waiting[key] = simple(stack, service="receive", timeout="50000", **fields)

    waiters = [
        threading.Thread(target=wait_receive, args=("sid",), kwargs={"sid": sid, "destination": "crash.wa"}),
        threading.Thread(target=wait_receive, args=("oneshot",), kwargs={"destination": "crash.wb"}),
    ]  # fmt: skip

    with Senders(stack, "crash.q") as load:
        wait_for("sends before the crash", lambda: len(load.ok) >= 30)
        for t in waiters:
            t.start()
        wait_for(
            "the waiting receives' consumers",
            lambda: all(name in simple(
                stack, method="GET", service="getBrokerInfo", cmd="getDestinations",
                user="admin", password="admin",
            ).text for name in ("crash.wa", "crash.wb")),
        )  # fmt: skip
        kill_broker(stack.broker)

        for t in waiters:
            t.join(HTTP_TIMEOUT)
        # Not 404 ("nothing within the timeout"): the broker went away meanwhile.
        assert_sid_gone(waiting["sid"])
        assert_unreachable(waiting["oneshot"])

        wait_for("the senders to be refused", lambda: load.refused >= 3)
        assert_unreachable(simple(stack, b"x", service="send", destination="crash.q2"))
        assert_unreachable(simple(stack, service="receive", destination="crash.q", timeout="100"))
        assert_unreachable(simple(stack, service="login"))
        assert fault_status(xml_send(stack, "crash.q2", "x")) == "503"
        assert_sid_gone(simple(stack, b"x", service="send", sid=sid, destination="crash.q2"))
        assert_sid_gone(simple(stack, service="commit", sid=tsid))
        r = simple(stack, method="GET", service="ping")
        assert r.status_code == 503 and "not reachable" in r.text, r.text
        r = simple(stack, method="GET", service="getBrokerInfo", user="admin", password="admin")
        assert r.status_code == 503 and "not reachable" in r.text, r.text

        restart_broker(stack.broker)
        before = len(load.ok)
        wait_for("sends after the restart", lambda: len(load.ok) >= before + 30)
    assert not load.odd, load.odd[:10]
    assert stack.proc.poll() is None and stack.proc.pid == gateway_pid

    # Every send answered 200 is there (persistent: recovered from the store).
    got: set[str] = set()
    while True:
        r = simple(stack, service="receive", destination="crash.q", timeout="3000")
        assert r.status_code == 200, r.text
        if r.headers["ums.status"] == "404":  # nothing within the timeout
            break
        got.add(body_text(r))
    assert load.ok <= got, sorted(load.ok - got)[:20]
    # The uncommitted transacted send went with the crash.
    r = simple(stack, service="receive", destination="crash.t", timeout="500")
    assert r.headers["ums.status"] == "404", r.text

    # The old sids stay gone (until the cache duration); a new login works.
    assert_sid_gone(simple(stack, service="receive", sid=sid, destination="crash.q", timeout="0"))
    assert_sid_gone(simple(stack, service="close", sid=tsid))
    new = simple(stack, service="login")
    assert new.status_code == 200, new.text
    assert simple(stack, b"n", service="send", sid=new.text, destination="crash.n").ok
    assert simple(stack, service="receive", sid=new.text, destination="crash.n").text == "n"
    log = stack.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
    # The outage is logged once when it starts and once when it ends, not per request.
    assert log.count("UMS: the broker at") == 2, log[-4000:]
    assert "is reachable again" in log, log[-4000:]
