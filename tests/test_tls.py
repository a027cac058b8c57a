"""TLS services (ssljms, ssladmin), imqkeytool, passfiles and per-service connection limits,
against real broker processes."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from broker.launcher import read_portmapper, start_broker
from broker.protocol.portmapper import parse_table
from openmq_client import JMSException, JMSSecurityException, Queue, TextMessage, connect
from openmq_client.errors import ResourceAllocationException
from tests.manage_fork import run_manage

pytestmark = pytest.mark.timeout(180)

INSTANCE = "testbroker"
PASSWORD = "s3cret-keystore"
SSL_PROPS = (
    "imq.service.activelist=jms,admin,ssljms,ssladmin",
    "imq.passfile.enabled=true",
)


def etc_dir(tmp: Path) -> Path:
    return tmp / "var" / "instances" / INSTANCE / "etc"


def broker_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = f"sqlite:///{tmp / 'db.sqlite3'}"
    env["IMQ_VARHOME"] = str(tmp / "var")
    return env


def keytool(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return run_manage(["imqkeytool", *args], env=broker_env(tmp), timeout=120)


def make_keystore(tmp: Path, broker_password: str = PASSWORD) -> Path:
    """Key material made with the keytool's own passfile, and the broker's passfile."""
    tool_passfile = tmp / "keytool.pass"
    tool_passfile.write_text(f"imq.keystore.password={PASSWORD}\n")
    r = keytool(
        tmp, "-broker", "-name", INSTANCE, "-dname", "CN=localhost", "-passfile", str(tool_passfile)
    )
    assert r.returncode == 0, r.stderr
    etc = etc_dir(tmp)
    assert (etc / "keystore.pem").is_file() and (etc / "keystore.crt").is_file()
    (etc / "passfile").write_text(f"# broker passwords\nimq.keystore.password={broker_password}\n")
    return etc / "keystore.crt"


def test_keytool_refuses_to_overwrite(tmp_path: Path) -> None:
    make_keystore(tmp_path)
    before = (etc_dir(tmp_path) / "keystore.pem").read_bytes()
    r = keytool(tmp_path, "-broker", "-name", INSTANCE, "-password", "another-pw")
    assert r.returncode != 0 and "already exists" in r.stderr
    assert (etc_dir(tmp_path) / "keystore.pem").read_bytes() == before
    r = keytool(tmp_path, "-broker", "-name", INSTANCE, "-password", "another-pw", "-f")
    assert r.returncode == 0, r.stderr
    assert (etc_dir(tmp_path) / "keystore.pem").read_bytes() != before


def test_tls_services(own_broker, tmp_path: Path) -> None:
    cafile = make_keystore(tmp_path)
    b = own_broker(*SSL_PROPS)
    table = parse_table(read_portmapper(b.host, b.portmapper_port))
    by_name = {s.name: s for s in table.services}
    ssljms, ssladmin = by_name["ssljms"], by_name["ssladmin"]
    assert (ssljms.protocol, ssljms.type) == ("tls", "NORMAL") and ssljms.port > 0
    assert (ssladmin.protocol, ssladmin.type) == ("tls", "ADMIN") and ssladmin.port > 0
    assert by_name["jms"].protocol == "tcp" and by_name["jms"].port == b.jms_port
    ctx = ssl.create_default_context(cafile=str(cafile))

    async def go() -> None:
        # Through the port mapper, verifying the broker against the generated certificate.
        conn = await connect(b.host, b.portmapper_port, ssl=ctx, request_timeout=20)
        assert conn.service == "ssljms"
        q = Queue(f"tls_{uuid.uuid4().hex[:8]}")
        sess = await conn.create_session()
        prod = await sess.create_producer(q)
        cons = await sess.create_consumer(q)
        await conn.start()
        await prod.send(TextMessage("over tls"))
        got = await cons.receive(10)
        assert got is not None and got.text == "over tls"
        await conn.close()

        # ssl=True with the certificate as the trust anchor, and without verification.
        for kw in ({"ssl_cafile": str(cafile)}, {"ssl_verify": False}):
            c = await connect(b.host, b.portmapper_port, ssl=True, **kw)
            assert c.service == "ssljms"
            await c.close()
        # The system CAs do not know a self-signed certificate.
        with pytest.raises(JMSException):
            await connect(b.host, b.portmapper_port, ssl=True, connect_timeout=10)

        # The admin TLS service: guest is refused, admin gets in.
        with pytest.raises(JMSSecurityException):
            await connect(b.host, b.portmapper_port, ssl=ctx, service_type="ADMIN")
        admin = await connect(
            b.host, b.portmapper_port, ssl=ctx, service_type="ADMIN", user="admin", password="admin"
        )
        assert admin.service == "ssladmin"
        await admin.close()

        # Plain TCP to the TLS port: the handshake fails, the connection is dropped.
        with pytest.raises(JMSException):
            await connect(b.host, ssljms.port, direct=True, connect_timeout=10)

    asyncio.run(go())

    # Raw bytes that are not a TLS ClientHello: the broker closes the socket...
    with socket.create_connection((b.host, ssljms.port), timeout=10) as s:
        s.sendall(b"\x01\x2c" + b"\x00" * 70)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if not s.recv(4096):
                break
    # ... and keeps serving TLS and TCP clients.
    assert b.proc.poll() is None

    # Each refused handshake is logged once, with its peer and reason: the client that did
    # not trust the certificate (it hangs up), plain TCP and the raw bytes (not TLS).
    def refused_lines() -> list[str]:
        return [x for x in b.log_text().splitlines() if "TLS handshake with 127.0.0.1:" in x]

    deadline = time.monotonic() + 10
    while len(refused_lines()) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    refused = refused_lines()
    assert all("service ssljms" in x for x in refused), refused
    assert sum("not completed: the peer closed" in x for x in refused) == 1, refused
    assert sum("refused: WRONG_VERSION_NUMBER" in x for x in refused) == 2, refused
    assert len(refused) == 3, refused

    async def again() -> None:
        for kw in ({"ssl": ctx}, {}):
            c = await connect(b.host, b.portmapper_port, **kw)
            await c.close()

    asyncio.run(again())


def test_wrong_keystore_password_refuses_to_start(own_broker, tmp_path: Path) -> None:
    make_keystore(tmp_path, broker_password="not-the-password")
    with pytest.raises(RuntimeError) as err:
        own_broker(*SSL_PROPS)
    assert "cannot open keystore" in str(err.value)
    assert "wrong keystore password" in str(err.value)


def test_missing_keystore_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as err:
        start_broker(
            tmp_path, "imq.service.activelist=jms,ssljms", f"imq.keystore.password={PASSWORD}"
        )
    assert "no keystore" in str(err.value) and "imqkeytool" in str(err.value)


def test_connection_limits(own_broker, tmp_path: Path) -> None:
    cafile = make_keystore(tmp_path)
    b = own_broker(*SSL_PROPS, "imq.jms.max_connections=2", "imq.ssljms.max_threads=1")
    ctx = ssl.create_default_context(cafile=str(cafile))

    async def go() -> None:
        first = await connect(b.host, b.portmapper_port)
        second = await connect(b.host, b.portmapper_port)
        with pytest.raises(ResourceAllocationException) as err:
            await connect(b.host, b.portmapper_port)
        assert err.value.status == 503
        assert "connection limit" in (err.value.reason or "")
        await first.close()
        # A freed place can be taken again.
        for _ in range(50):
            try:
                third = await connect(b.host, b.portmapper_port)
                break
            except ResourceAllocationException:
                await asyncio.sleep(0.1)
        else:
            pytest.fail("the freed connection place was not given back")
        await third.close()
        await second.close()

        # max_threads (OpenMQ's knob) limits the TLS service when max_connections is unset.
        tls = await connect(b.host, b.portmapper_port, ssl=ctx)
        with pytest.raises(ResourceAllocationException) as err:
            await connect(b.host, b.portmapper_port, ssl=ctx)
        assert err.value.status == 503
        await tls.close()
        # The admin service keeps its shipped max_threads default: not a connection limit.
        admins = [
            await connect(
                b.host, b.portmapper_port, service_type="ADMIN", user="admin", password="admin"
            )
            for _ in range(12)
        ]
        for a in admins:
            await a.close()

    asyncio.run(go())
