"""The stock Java client through the HTTP tunnel (httpjms, httpsjms):
tests/interop/java/TunnelClient.java.

Ours serves the tunnel itself at /imq/tunnel.  With ``--interop-broker=stock`` the same
programs run against the stock broker's httpjms service behind OpenMQ's own tunnel
servlet (imq.jar's HttpTunnelServlet, hosted in the Grizzly server the stock broker ships:
tests/interop/stock_tunnel/StockTunnel.java), which is how OpenMQ deploys the tunnel.
"""

from __future__ import annotations

import http.client
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.admintools.broker_handle import BrokerAdmin
from broker.launcher import (
    STOCK_SERVLET_JARS,
    free_port,
    read_portmapper,
    terminate,
)
from broker.protocol.httptunnel import (
    ConnOption,
    TunnelPacket,
    TunnelType,
    decode_option,
    decode_packets,
)
from broker.protocol.portmapper import parse_table
from tests.jvmflags import JAVAC

from .jvm import broker_kind, require_java, start_either
from .test_java_tls import our_key_material, trust_args, truststore

pytestmark = pytest.mark.timeout(420)

# A vanished client's tunnel connection is closed this long after its last request
# (ours); the stock servlet's rule is 60 s without a pull.
TIMEOUT = 3


def stock_servlet(tmp: Path, servlet_port: int) -> tuple[subprocess.Popen, int]:
    """The stock tunnel servlet in Grizzly, linked to by the stock broker."""
    require_java()
    jars = STOCK_SERVLET_JARS
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        pytest.fail("the stock tunnel servlet needs " + ", ".join(missing), pytrace=False)
    cp = ":".join(str(j) for j in jars)
    out = tmp / "stock-tunnel-classes"
    src = Path(__file__).parent / "stock_tunnel" / "StockTunnel.java"
    subprocess.run([*JAVAC, "-cp", cp, "-d", str(out), str(src)], check=True)
    http_port = free_port()
    log = open(tmp / "stock-tunnel.txt", "wb")  # noqa: SIM115 - lives with the process
    proc = subprocess.Popen(
        ["java", "-cp", f"{cp}:{out}", "StockTunnel", str(http_port), str(servlet_port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, http_port


def wait_for(what: str, cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}", pytrace=False)


@pytest.fixture(scope="module")
def tunnel(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator:
    """(kind, broker, http URL, https URL or None, JVM args trusting the broker)."""
    kind = broker_kind(request.config)
    tmp = tmp_path_factory.mktemp("tunnel")
    if kind == "stock":
        servlet_port = free_port()
        b = start_either(
            kind,
            tmp,
            "imq.service.activelist=jms,admin,httpjms",
            f"imq.httpjms.http.servletPort={servlet_port}",
        )
        proc, http_port = stock_servlet(tmp, servlet_port)
        url = f"http://127.0.0.1:{http_port}/imq/tunnel"

        def linked() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    return b"Total available brokers = 1" in r.read()
            except OSError:
                return False

        try:
            wait_for("the stock broker's link to the tunnel servlet", linked, 60)
            yield kind, b, url, None, ()
        finally:
            terminate(proc, 10)
            b.stop()
        return
    crt, key_props = our_key_material(tmp)
    b = start_either(
        kind,
        tmp,
        "imq.service.activelist=jms,admin,httpjms,httpsjms",
        f"imq.httpjms.http.connectionTimeout={TIMEOUT}",
        # The HTTPS service has its clients poll (a pull each second when idle).
        "imq.httpsjms.https.pullPeriod=1",
        *key_props,
    )
    try:
        table = {
            s.name: s for s in parse_table(read_portmapper(b.host, b.portmapper_port)).services
        }
        http, https = table["httpjms"], table["httpsjms"]
        assert (http.protocol, http.type, https.protocol) == ("http", "NORMAL", "https")
        url = f"http://127.0.0.1:{http.port}/imq/tunnel"
        # The certificate names localhost: the HTTPS client checks the host name.
        surl = f"https://localhost:{https.port}/imq/tunnel"
        trust = trust_args(truststore(tmp / "trust.p12", crt))
        yield kind, b, url, surl, trust
    finally:
        b.stop()


def test_tunnel_full(tunnel: Any, java_programs: Any) -> None:
    kind, b, url, _surl, _trust = tunnel
    table = {s.name: s for s in parse_table(read_portmapper(b.host, b.portmapper_port)).services}
    # The stock broker lists httpjms with port 0 (its clients go to the web server);
    # ours lists the port it serves the tunnel on.
    assert table["httpjms"].protocol == "http"
    assert (table["httpjms"].port == 0) == (kind == "stock")
    admin = BrokerAdmin(b.host, b.portmapper_port)
    try:
        services = {s["name"]: s for s in admin.services()}
        assert "httpjms" in services, services
    finally:
        admin.close()
    r = java_programs.run("TunnelClient", b, "full", url, timeout=300)
    assert r.checks == {
        "address_list_send_receive": "ok",
        "connection_type_send_receive": "ok",
        "transactions": "ok",
        "one_megabyte": "ok",
        "many_clients": "ok",
        "tcp_producer_tunnel_consumer": "ok",
    }, r.explain()


def test_tunnel_https(tunnel: Any, java_programs: Any) -> None:
    kind, b, _url, surl, trust = tunnel
    if kind == "stock":
        pytest.skip(
            "the stock run hosts only the plain HTTP servlet (HttpsTunnelServlet not set up)"
        )
    r = java_programs.run("TunnelClient", b, "short", surl, jvm_args=trust)
    assert r.checks == {
        "address_list_send_receive": "ok",
        "connection_type_send_receive": "ok",
        "one_megabyte": "ok",
    }, r.explain()


def test_tunnel_client_vanishes(tunnel: Any, java_programs: Any) -> None:
    """SIGKILL a tunnelled consumer holding an unacknowledged message: the broker closes
    its connection once the connection timeout passes without a request, and the
    message is delivered again."""
    kind, b, url, _surl, _trust = tunnel
    queue = f"interop.tunnel.vanish.{time.time_ns()}"
    cmd = java_programs.command("TunnelClient", b, "vanish", url, queue)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    admin = BrokerAdmin(b.host, b.portmapper_port)
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            if line.strip() == "ready":
                break
        assert "ok received" in lines, (lines, proc.stderr.read() if proc.poll() else "")

        assert len(admin.connections("httpjms")) == 1, admin.connections("httpjms")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        # Ours: TIMEOUT s after the killed client's last request; stock: the servlet's 60 s.
        wait_for(
            "the vanished client's connection to be closed",
            lambda: not admin.connections("httpjms"),
            30 if kind == "ours" else 150,
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        admin.close()
    if kind == "ours":
        log = b.log_text()
        assert "tunnel connection" in log and "aborted" in log, log[-2000:]
    r = java_programs.run("TunnelClient", b, "after", url, queue)
    assert r.checks == {"redelivered_after_vanish": "ok"}, r.explain()


def _exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` on a new connection; what comes back until the broker closes or
    5 s pass."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(raw)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
                if b"\r\n\r\n" in out:
                    head, _, body = out.partition(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    if len(body) >= length:
                        return out
        except TimeoutError:
            pass
        return out


def test_tunnel_bad_requests(tunnel: Any) -> None:
    """Each bad request is answered with an HTTP status (or CONN_ABORT for a connection
    that does not exist) and logged; the tunnel goes on serving."""
    kind, b, url, _surl, _trust = tunnel
    if kind == "stock":
        pytest.skip("ours: the stock servlet answers bad tunnel requests 200 (a NO_OP or its page)")
    port = int(url.split(":")[2].split("/")[0])
    q = "/imq/tunnel?"
    cases = [
        (b"HELLO\r\n\r\n", b"HTTP/1.1 400"),
        (b"GET /nowhere HTTP/1.1\r\n\r\n", b"HTTP/1.1 404"),
        (f"GET {q}Type=teleport HTTP/1.1\r\n\r\n".encode(), b"HTTP/1.1 400"),
        (f"GET {q}Type=pull&ConnId=x HTTP/1.1\r\n\r\n".encode(), b"HTTP/1.1 400"),
        (
            f"POST {q}Type=push HTTP/1.1\r\nContent-Length: 5\r\n\r\n".encode() + b"\x00\x07abc",
            b"HTTP/1.1 400",
        ),
        (
            f"POST {q}Type=push HTTP/1.1\r\nContent-Length: 24\r\n\r\n".encode()
            + b"\x00\x07"  # tunnel packet version 7
            + bytes(22),
            b"HTTP/1.1 400",
        ),
        (f"POST {q}Type=push HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".encode(), b" 411 "),
    ]
    for raw, want in cases:
        got = _exchange(port, raw)
        assert want in got.split(b"\r\n")[0] + b" ", (raw, got)
    # A pull for a connection that does not exist: CONN_ABORT, as the servlet answers.
    got = _exchange(port, f"GET {q}Type=pull&ConnId=12345 HTTP/1.1\r\n\r\n".encode())
    assert decode_packets(got.partition(b"\r\n\r\n")[2]) == [
        TunnelPacket(TunnelType.CONN_ABORT, 12345)
    ]
    page = _exchange(port, b"GET /imq/tunnel HTTP/1.1\r\n\r\n")
    assert b"200 OK" in page and b"HTTP tunneling service httpjms" in page
    # Still serving: a connection goes through connect, CONN_INIT_ACK and the options.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", q + "Type=connect", TunnelPacket(TunnelType.CONN_INIT).encode())
        (echo,) = decode_packets(conn.getresponse().read())
        assert echo.type == TunnelType.CONN_INIT and echo.body.startswith(b"ServerName=")
        pull = f"{q}Type=pull&ConnId={echo.conn_id}&{echo.body.decode()}"
        conn.request("GET", pull)
        assert decode_packets(conn.getresponse().read()) == [
            TunnelPacket(TunnelType.CONN_INIT_ACK, echo.conn_id)
        ]
        conn.request("GET", pull)
        (option,) = decode_packets(conn.getresponse().read())
        assert (option.type, option.seq) == (TunnelType.CONN_OPTION, 0)
        assert decode_option(option.body) == (ConnOption.CONNECTION_TIMEOUT, TIMEOUT)
    finally:
        conn.close()
    log = b.log_text()
    assert "bad tunnel request" in log and "unreadable HTTP request" in log, log[-3000:]
