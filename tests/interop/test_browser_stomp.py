"""@stomp/stompjs (third_party/stompjs, the UMD build) in headless Chromium reaches the
broker's WebSocket services (OpenMQ's wsjms and wssjms, STOMP at /<service>/mqstomp)
and exchanges messages both ways with the stock Java client (tests/interop/java/WsPeer.java)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import free_port, read_portmapper, start_broker
from broker.protocol.portmapper import parse_table
from tests.portal_server import chromium  # noqa: F401
from tests.test_tls import make_keystore

pytestmark = pytest.mark.timeout(300)

STOMPJS = Path(__file__).resolve().parents[2] / "third_party" / "stompjs" / "stomp.umd.min.js"

PAGE = b'<!doctype html><title>stomp</title><script src="/stomp.umd.min.js"></script>'


class _PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body, kind = (
            (STOMPJS.read_bytes(), "text/javascript")
            if self.path == "/stomp.umd.min.js"
            else (PAGE, "text/html")
        )
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def page_server() -> Iterator[str]:
    """The page on a loopback HTTP server: Chromium's local network access checks let a
    page reach loopback addresses only when it comes from one (about:blank may not)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _PageHandler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


# The page's side: connect, subscribe to PREFIX.j2b, send to PREFIX.b2j, and keep what
# arrives (and any STOMP or WebSocket error) for the test to read.
PAGE_SCRIPT = """
([url, prefix]) => new Promise((resolve, reject) => {
  window.got = [];
  window.problems = [];
  const client = new StompJs.Client({
    brokerURL: url,
    connectHeaders: {login: 'guest', passcode: 'guest'},
    heartbeatIncoming: 2000,
    heartbeatOutgoing: 2000,
    reconnectDelay: 0,
  });
  client.onStompError = (f) => window.problems.push('ERROR ' + f.headers.message);
  client.onWebSocketError = (e) => { window.problems.push('websocket error'); reject('websocket error'); };
  client.onConnect = (frame) => {
    window.connected = frame.headers;
    client.subscribe('/queue/' + prefix + '.j2b', (m) => {
      window.got.push({body: m.body, headers: m.headers});
      m.ack();
    }, {ack: 'client-individual'});
    client.publish({
      destination: '/queue/' + prefix + '.b2j',
      body: 'hello from ' + prefix,
      headers: {colour: 'red', priority: '7'},
      skipContentLengthHeader: true,
    });
    const receiptId = 'r-' + prefix;
    client.watchForReceipt(receiptId, () => resolve(frame.headers));
    client.publish({destination: '/queue/' + prefix + '.noop', body: 'x',
                    headers: {receipt: receiptId}});
  };
  window.client = client;
  client.activate();
})
"""


def _exchange(
    browser: Any, java_programs: Any, b: Any, page_url: str, url: str, prefix: str, **ctx: Any
) -> None:
    context = browser.new_context(**ctx)
    try:
        page = context.new_page()
        page.goto(page_url)
        page.wait_for_function("typeof StompJs !== 'undefined'")
        connected = page.evaluate(PAGE_SCRIPT, [url, prefix])
        assert connected["version"] == "1.2", connected
        r = java_programs.run("WsPeer", b, prefix)
        assert r.checks == {"browser_to_java": "ok", "java_to_browser": "ok"}, r.explain()
        page.wait_for_function("window.got.length >= 1", timeout=20000)
        got = page.evaluate("window.got")
        problems = page.evaluate("window.problems")
        page.evaluate("window.client.deactivate()")
    finally:
        context.close()
    assert problems == []
    assert len(got) == 1, json.dumps(got)
    m = got[0]
    assert m["body"] == f"hello from java over {prefix}"
    assert (m["headers"]["num"], m["headers"]["correlation-id"]) == ("5", "jc")


def test_stompjs_over_ws_and_wss(chromium, java_programs, tmp_path: Path) -> None:  # noqa: F811
    make_keystore(tmp_path)
    ws_port, wss_port = free_port(), free_port()
    b = start_broker(
        tmp_path,
        "imq.passfile.enabled=true",
        "imq.service.activelist=jms,admin,wsjms,wssjms",
        f"imq.wsjms.ws.port={ws_port}",
        f"imq.wssjms.wss.port={wss_port}",
    )
    try:
        with page_server() as page_url:
            table = parse_table(read_portmapper(b.host, b.portmapper_port))
            by_name = {s.name: s for s in table.services}
            assert (by_name["wsjms"].protocol, by_name["wsjms"].port) == ("ws", ws_port)
            assert (by_name["wssjms"].protocol, by_name["wssjms"].port) == ("wss", wss_port)
            tag = uuid.uuid4().hex[:8]
            _exchange(
                chromium,
                java_programs,
                b,
                page_url,
                f"ws://127.0.0.1:{ws_port}/wsjms/mqstomp",
                f"ws{tag}",
            )
            # The broker's certificate is self-signed: this context accepts it (Chromium has
            # no per-test trust store); the TLS itself is the broker's key material.
            _exchange(
                chromium,
                java_programs,
                b,
                page_url,
                f"wss://127.0.0.1:{wss_port}/wssjms/mqstomp",
                f"wss{tag}",
                ignore_https_errors=True,
            )
    finally:
        b.stop()
