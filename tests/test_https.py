"""HTTPS for the portal, the REST API and the UMS gateway (``manage.py up --https`` with
the broker's own key material), the portal's admin client and imqcmd over ``ssladmin``,
and the settings a TLS-terminating proxy needs; real processes, checked with stock HTTP
clients (curl, Python's http.client) that verify the certificate against a trust store.

The stock Java client's HTTPS tunnel (the broker's httpsjms service, which this does not
change) is tests/interop/test_java_tunnel.py's test_tunnel_https.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

from broker.commandlines import portal_command
from broker.launcher import ROOT, free_port, fresh_sqlite
from broker.management.commands.imqkeytool import generate
from tests.manage_fork import ForkedProcess, popen, run_manage

from .portal_server import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.timeout(300)

KEYSTORE_PASSWORD = "https-keystore-pw"
Process = subprocess.Popen | ForkedProcess
INSTANCE = "imqbroker"


def base_env(tmp: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("IMQ_", "REDIS_URL", "PORTAL_HTTPS", "UVICORN_"))
    }
    env["DATABASE_URL"] = f"sqlite:///{tmp / 'db.sqlite3'}"
    env["IMQ_VARHOME"] = str(tmp / "var")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_manage(list(args), env=env, timeout=timeout)


def make_keystore(env: dict[str, str]) -> Path:
    """The broker's key pair (imqkeytool -broker); its certificate, the trust store."""
    done = manage(
        env, "imqkeytool", "-broker", "-dname", "CN=localhost", "-password", KEYSTORE_PASSWORD
    )
    assert done.returncode == 0, done.stderr
    crt = Path(env["IMQ_VARHOME"]) / "instances" / INSTANCE / "etc" / "keystore.crt"
    assert crt.is_file()
    return crt


@dataclass
class Stack:
    """``manage.py up --https`` on free ports; the broker also serves ssladmin and the
    portal administers it over ssladmin (IMQ_ADMIN_SECURE)."""

    proc: subprocess.Popen
    log: Path
    env: dict[str, str]
    crt: Path
    portal: int
    ums: int
    pm: int
    tmp: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.crt))


def wait_running(proc: subprocess.Popen, log: Path, deadline_s: float = 180) -> None:
    deadline = time.monotonic() + deadline_s
    while "up: running" not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()  # its children die with it (PR_SET_PDEATHSIG)
            proc.wait()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("https")
    env = base_env(tmp)
    # A copy of the migrated database: up's own migrate then has nothing to do (what it
    # does on an empty one is tests/test_up.py's shared up).
    fresh_sqlite(tmp / "db.sqlite3")
    crt = make_keystore(env)
    env["IMQ_ADMIN_SECURE"] = "true"  # the portal's admin client over ssladmin
    portal, ums, pm = free_port(), free_port(), free_port()
    log = tmp / "up.log"
    cmd = [
        sys.executable, "manage.py", "up", "--https",
        "--portal-port", str(portal),
        "--ums-port", str(ums),
        "-port", str(pm),
        "-Dimq.service.activelist=jms,admin,ssladmin",
        f"-Dimq.keystore.password={KEYSTORE_PASSWORD}",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_running(proc, log)
        yield Stack(proc, log, env, crt, portal, ums, pm, tmp)
    finally:
        stop(proc)


# -- stock clients --------------------------------------------------------------------


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["curl", "-sS", "--max-time", "20", *args], capture_output=True, text=True, timeout=60
    )


def request(
    port: int,
    method: str,
    path: str,
    *,
    context: ssl.SSLContext | None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, list[str]], bytes]:
    """One request with http.client: (status, headers by lower-case name, body)."""
    if context is None:
        conn: http.client.HTTPConnection = http.client.HTTPConnection("localhost", port, timeout=30)
    else:
        conn = http.client.HTTPSConnection("localhost", port, timeout=30, context=context)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        got: dict[str, list[str]] = {}
        for name, value in resp.getheaders():
            got.setdefault(name.lower(), []).append(value)
        return resp.status, got, resp.read()
    finally:
        conn.close()


def cookies_of(headers: dict[str, list[str]]) -> dict[str, SimpleCookie]:
    jar: dict[str, SimpleCookie] = {}
    for line in headers.get("set-cookie", []):
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(line)
        for name in cookie:
            jar[name] = cookie
    return jar


def portal_login(
    port: int,
    context: ssl.SSLContext | None,
    origin: str,
    extra: dict[str, str] | None = None,
) -> tuple[int, dict[str, list[str]]]:
    """The portal's login form as a browser posts it: GET the form (CSRF cookie and
    token), POST the credentials with the browser's Origin header."""
    status, headers, body = request(port, "GET", "/login/", context=context, headers=extra)
    assert status == 200, body[:500]
    csrf = cookies_of(headers)["csrftoken"]["csrftoken"].value
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', body)
    assert token is not None
    form = urllib.parse.urlencode(
        {
            "username": "admin",
            "password": "admin",
            "csrfmiddlewaretoken": token.group(1).decode(),
        }
    ).encode()
    status, headers, _ = request(
        port,
        "POST",
        "/login/",
        context=context,
        body=form,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"csrftoken={csrf}",
            "Origin": origin,
            "Referer": f"{origin}/login/",
            **(extra or {}),
        },
    )
    return status, headers


# -- HTTPS served by up ---------------------------------------------------------------


def test_up_says_https_and_serves_only_https(stack: Stack) -> None:
    out = stack.output()
    assert f"https://127.0.0.1:{stack.portal}/" in out
    assert f"https://127.0.0.1:{stack.ums}/ums/ (UMS gateway)" in out
    # curl with the broker's certificate as its trust store: verified, answered.
    for port in (stack.portal, stack.ums):
        done = curl("--cacert", str(stack.crt), f"https://localhost:{port}/healthz")
        assert done.returncode == 0 and done.stdout == "ok", done.stderr
        # Without it, curl's system trust store refuses the self-signed certificate
        # (exit 60: peer certificate cannot be authenticated).
        done = curl(f"https://localhost:{port}/healthz")
        assert done.returncode == 60, (done.returncode, done.stderr)
        # Plain HTTP to the same port gets no HTTP answer.
        done = curl(f"http://localhost:{port}/healthz")
        assert done.returncode != 0 and done.stdout != "ok"


def test_ums_over_https(stack: Stack) -> None:
    ctx = stack.trust()
    for port in (stack.ums, stack.portal):  # the gateway and the portal's own /ums/
        queue = f"https_ums_{port}"
        status, headers, _ = request(
            port,
            "POST",
            f"/ums/simple?service=send&destination={queue}",
            context=ctx,
            body=b"over tls",
            headers={"Content-Type": "text/plain"},
        )
        assert status == 200 and headers["ums.status"] == ["200"], headers
        status, headers, body = request(
            port,
            "POST",
            f"/ums/simple?service=receive&destination={queue}&timeout=5000",
            context=ctx,
        )
        assert status == 200 and body == b"over tls", (status, headers, body)


def test_portal_login_and_rest_api_over_https_with_the_admin_client_on_ssladmin(
    stack: Stack,
) -> None:
    ctx = stack.trust()
    origin = f"https://localhost:{stack.portal}"
    status, headers = portal_login(stack.portal, ctx, origin)
    assert status == 302, headers
    session = cookies_of(headers)["sessionid"]["sessionid"]
    # The portal serves HTTPS itself: its cookies are sent over HTTPS only.
    assert session["secure"] and session.value

    # The REST API over HTTPS, with a token; the broker's connections it lists include
    # the portal's own admin connection, on ssladmin.
    status, _, body = request(
        stack.portal,
        "POST",
        "/api/token/",
        context=ctx,
        body=json.dumps({"username": "admin", "password": "admin"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert status == 200, body
    token = json.loads(body)["token"]
    status, _, body = request(
        stack.portal,
        "GET",
        "/api/connections/",
        context=ctx,
        headers={"Authorization": f"Token {token}"},
    )
    assert status == 200, body
    data = json.loads(body)
    rows = data["results"] if isinstance(data, dict) else data
    services = {(r["user"], r["service"]) for r in rows}
    # The portal's own account (broker/admintools/credentials.py), over ssladmin only.
    assert ("imq.portal", "ssladmin") in services, rows
    assert ("imq.portal", "admin") not in services, rows


# -- imqcmd over ssladmin -----------------------------------------------------------


def imqcmd(stack: Stack, *args: str, env: dict[str, str] | None = None):
    passfile = stack.tmp / "imqcmd.pass"
    passfile.write_text("imq.imqcmd.password=admin\n")
    return manage(
        env or stack.env,
        "imqcmd",
        *args,
        "-b",
        f"localhost:{stack.pm}",
        "-u",
        "admin",
        "-passfile",
        str(passfile),
    )


def test_imqcmd_secure(stack: Stack, tmp_path: Path) -> None:
    done = imqcmd(stack, "list", "cxn", "-secure", "-truststore", str(stack.crt))
    assert done.returncode == 0, done.stderr
    # Its own connection is listed, on ssladmin.
    assert re.search(r"\badmin\s+ssladmin\b", done.stdout), done.stdout
    # Without -truststore the local instance's keystore.crt is trusted (IMQ_VARHOME).
    done = imqcmd(stack, "list", "svc", "-secure")
    assert done.returncode == 0, done.stderr
    assert re.search(r"\bssladmin\s+\d+ \(dynamic\)\s+RUNNING", done.stdout), done.stdout

    # Another certificate as the trust store, and no local instance to trust by default:
    # refused, saying why.
    other_crt = tmp_path / "other.crt"
    other_crt.write_bytes(generate("CN=localhost", 1, KEYSTORE_PASSWORD)[1])
    elsewhere = {**stack.env, "IMQ_VARHOME": str(tmp_path / "empty")}
    done = imqcmd(stack, "list", "svc", "-secure", "-truststore", str(other_crt), env=elsewhere)
    assert done.returncode == 1
    assert "certificate is not trusted" in done.stderr, done.stderr
    done = imqcmd(stack, "list", "svc", "-truststore", str(stack.crt))
    assert done.returncode == 1 and "-truststore goes with -secure" in done.stderr


# -- a TLS-terminating proxy in front of a plain-HTTP portal ---------------------------

PROXY_ORIGIN = "https://mq.example.com"
PROXY_HEADERS = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "mq.example.com"}


def start_plain_portal(stack: Stack, extra: dict[str, str]) -> tuple[Process, int]:
    """A second portal process on plain HTTP, on the stack's database and broker: the
    portal as it runs behind a proxy that terminates TLS (see wait_portal)."""
    env = {
        **stack.env,
        "IMQ_PORT": str(stack.pm),
        "IMQ_BROKER_HOST": "127.0.0.1",
        "ALLOWED_HOSTS": "localhost,127.0.0.1,mq.example.com",
        **extra,
    }
    port = free_port()
    with open(stack.tmp / f"portal-{port}.log", "wb") as out:
        # Forked from tests/manage_fork.py's server (Django imported), as
        # tests/portal_server.py starts its portals.
        proc = popen(portal_command(port), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return proc, port


def wait_portal(stack: Stack, proc: Process, port: int) -> None:
    log = stack.tmp / f"portal-{port}.log"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        try:
            if request(port, "GET", "/healthz", context=None)[0] == 200:
                return
        except OSError:
            time.sleep(0.2)


def test_login_through_a_tls_terminating_proxy(stack: Stack) -> None:
    plain, plain_port = start_plain_portal(stack, {})
    proxied, proxied_port = start_plain_portal(
        stack,
        {
            "CSRF_TRUSTED_ORIGINS": PROXY_ORIGIN,
            "TRUST_X_FORWARDED_PROTO": "true",
            "USE_X_FORWARDED_HOST": "true",
        },
    )
    try:
        wait_portal(stack, plain, plain_port)
        wait_portal(stack, proxied, proxied_port)
        # Without the settings, Django's origin check refuses the login the browser posts
        # from https://mq.example.com.
        status, _ = portal_login(plain_port, None, PROXY_ORIGIN, PROXY_HEADERS)
        assert status == 403
        # With them: logged in, redirected on the proxy's own origin, secure cookies.
        status, headers = portal_login(proxied_port, None, PROXY_ORIGIN, PROXY_HEADERS)
        assert status == 302, headers
        assert headers["location"] == ["/"] or headers["location"][0].startswith(PROXY_ORIGIN)
        assert cookies_of(headers)["sessionid"]["sessionid"]["secure"]
    finally:
        for proc in (plain, proxied):
            proc.terminate()
            proc.wait(30)


# -- refused key material ---------------------------------------------------------------


def test_up_https_refuses_bad_key_material_before_starting_anything(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    args = ["up", "--https", "--portal-port", str(free_port()), "-port", str(free_port())]
    done = manage(env, *args)
    assert done.returncode != 0
    assert "the broker has no key material" in done.stderr and "imqkeytool -broker" in done.stderr
    etc = tmp_path / "var" / "instances" / INSTANCE / "etc"
    etc.mkdir(parents=True)
    (etc / "keystore.pem").write_bytes(generate("CN=localhost", 1, KEYSTORE_PASSWORD)[0])
    done = manage(env, *args, "-Dimq.keystore.password=not-the-password")
    assert done.returncode != 0
    assert "wrong or missing password" in done.stderr, done.stderr
    assert "up: migrating" not in done.stdout  # nothing was started


# -- a real browser ---------------------------------------------------------------------


def spki_pin(crt: Path) -> str:
    """Chromium's pin of a certificate's key: base64(SHA-256(SubjectPublicKeyInfo))."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    spki = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def test_portal_login_in_a_real_browser_over_https(stack: Stack) -> None:
    """Chromium trusting the broker's certificate (and only it) logs in to the portal;
    one that does not trust it refuses the page."""
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed: run `make install-dev`", pytrace=False)
    from playwright.sync_api import Error, expect, sync_playwright

    base = f"https://localhost:{stack.portal}"
    trusting = [*CHROMIUM_ARGS, f"--ignore-certificate-errors-spki-list={spki_pin(stack.crt)}"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=trusting)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            page.goto(base + "/login/")
            page.get_by_label("User name").fill("admin")
            page.get_by_label("Password").fill("admin")
            page.get_by_role("button", name="Log in").click()
            expect(page.get_by_role("heading", name="Overview")).to_be_visible(timeout=30_000)
            assert page.url == base + "/"
        finally:
            browser.close()
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            with pytest.raises(Error, match="ERR_CERT_AUTHORITY_INVALID"):
                browser.new_page().goto(base + "/login/")
        finally:
            browser.close()
