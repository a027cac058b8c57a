"""The stock Java client over TLS (ssljms) with its trust settings: imqSSLIsHostTrusted=true,
=false with a javax.net.ssl.trustStore holding the broker's certificate, connection type
TLS, mqssl:// straight to the service port, and a refusal when nothing trusts the
certificate (tests/interop/java/TlsClient.java, two JVM runs).

Our broker's key material comes from ``manage.py imqkeytool -broker``; the stock broker's
(``--interop-broker=stock``) from the JDK's keytool, in the JKS/PKCS12 keystore it reads
(``imq.keystore.file.dirpath``, alias ``imq``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import read_portmapper
from broker.protocol.portmapper import parse_table
from tests.manage_fork import run_manage

from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

PASSWORD = "s3cret-keystore"
STORE_PASSWORD = "changeit"
INSTANCE = "testbroker"


def keytool(*args: str) -> None:
    done = subprocess.run(
        ["keytool", *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"keytool {args[0]} failed:\n{done.stdout}{done.stderr}"


def our_key_material(tmp: Path) -> tuple[Path, tuple[str, ...]]:
    """``manage.py imqkeytool -broker``: its certificate and the broker's properties."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "IMQ_VARHOME": str(tmp / "var"),
    }
    done = run_manage(
        ["imqkeytool", "-broker", "-name", INSTANCE, "-dname", "CN=localhost",
         "-password", PASSWORD],
        env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    crt = tmp / "var" / "instances" / INSTANCE / "etc" / "keystore.crt"
    return crt, (f"imq.keystore.password={PASSWORD}",)


def stock_key_material(
    tmp: Path, password: str = PASSWORD, san: str | None = None
) -> tuple[Path, tuple[str, ...]]:
    """The stock broker's keystore (what its imqkeytool makes: alias imq, RSA; ``san``
    adds subject alternative names, e.g. ``dns:localhost,ip:127.0.0.1``): its
    certificate's PEM file and the broker's properties."""
    d = tmp / "stock-keystore"
    d.mkdir()
    ext = ("-ext", f"SAN={san}") if san else ()
    keytool(
        "-genkeypair", "-alias", "imq", "-keyalg", "RSA", "-keysize", "2048",
        "-dname", "CN=localhost", *ext, "-validity", "30", "-keystore", str(d / "keystore"),
        "-storepass", password, "-keypass", password,
    )  # fmt: skip
    crt = d / "keystore.crt"
    keytool(
        "-exportcert", "-rfc", "-alias", "imq", "-file", str(crt),
        "-keystore", str(d / "keystore"), "-storepass", password,
    )  # fmt: skip
    return crt, (f"imq.keystore.file.dirpath={d}", f"imq.keystore.password={password}")


def truststore(path: Path, crt: Path) -> Path:
    keytool(
        "-importcert", "-noprompt", "-alias", "broker", "-file", str(crt),
        "-keystore", str(path), "-storetype", "PKCS12", "-storepass", STORE_PASSWORD,
    )  # fmt: skip
    return path


def stranger_truststore(tmp: Path) -> Path:
    """A trust store that trusts some other self-signed certificate, not the broker's
    (an EC key: made in a fraction of an RSA key's time)."""
    other = tmp / "other.p12"
    keytool(
        "-genkeypair", "-alias", "other", "-keyalg", "EC", "-groupname", "secp256r1",
        "-dname", "CN=localhost", "-validity", "30", "-keystore", str(other),
        "-storetype", "PKCS12", "-storepass", STORE_PASSWORD,
    )  # fmt: skip
    crt = tmp / "other.crt"
    keytool(
        "-exportcert", "-rfc", "-alias", "other", "-file", str(crt),
        "-keystore", str(other), "-storepass", STORE_PASSWORD,
    )  # fmt: skip
    return truststore(tmp / "stranger.p12", crt)


def trust_args(store: Path) -> tuple[str, ...]:
    return (
        f"-Djavax.net.ssl.trustStore={store}",
        f"-Djavax.net.ssl.trustStorePassword={STORE_PASSWORD}",
        "-Djavax.net.ssl.trustStoreType=PKCS12",
    )


def test_java_client_over_tls(
    tmp_path: Path, java_programs: Any, request: pytest.FixtureRequest
) -> None:
    kind = broker_kind(request.config)
    make = stock_key_material if kind == "stock" else our_key_material
    crt, props = make(tmp_path)
    b = start_either(kind, tmp_path, "imq.service.activelist=jms,admin,ssljms", *props)
    try:
        table = parse_table(read_portmapper(b.host, b.portmapper_port))
        ssljms = {s.name: s for s in table.services}["ssljms"]
        assert ssljms.protocol == "tls"
        port = str(ssljms.port)

        trusting = java_programs.run(
            "TlsClient", b, port, "trusting",
            jvm_args=trust_args(truststore(tmp_path / "trusting.p12", crt)),
        )  # fmt: skip
        assert trusting.checks == {
            "host_trusted_send_receive": "ok",
            "truststore_send_receive": "ok",
            "connection_type_tls": "ok",
            "mqssl_direct_to_service_port": "ok",
            "tls_and_tcp_together": "ok",
        }, trusting.explain()

        stranger = java_programs.run(
            "TlsClient", b, port, "stranger", jvm_args=trust_args(stranger_truststore(tmp_path))
        )
        assert stranger.checks == {
            "untrusted_certificate_refused": "ok",
            "plain_tcp_to_tls_port_refused": "ok",
            "host_trusted_after_refusals": "ok",
            "address_is_host_trusted": "ok",
        }, stranger.explain()
        # Refused by the client's certificate check, not by anything else.
        assert "SSLHandshakeException" in stranger.stderr, stranger.explain()
        assert "PKIX" in stranger.stderr, stranger.explain()
        assert b.proc.poll() is None
        if kind == "ours":
            # Each refused handshake is logged, without a traceback: the Java client that
            # does not trust the certificate says so with a certificate_unknown alert.
            log = b.log_text()
            assert "Traceback" not in log, log[-4000:]
            refused = [x for x in log.splitlines() if "service ssljms: TLS handshake with" in x]
            assert any("CERTIFICATE_UNKNOWN" in x for x in refused), log[-4000:]
    finally:
        b.stop()
