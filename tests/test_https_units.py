"""HTTPS key material (broker/security/https.py), the servers' TLS endpoints and command
lines, and the admin client's trust store, in process (the servers themselves:
tests/test_https.py)."""

from __future__ import annotations

import ssl
import sys
from pathlib import Path

import pytest

from broker.commandlines import ums_gateway_command
from broker.config import ConfigError
from broker.management.commands.imqkeytool import generate
from broker.security.https import HttpsError, HttpsKeys, tls_endpoints
from broker.security.tls import client_trust_context

pytestmark = pytest.mark.fast

PASSWORD = "unit-https-pw"


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(keystore.pem: certificate + encrypted key, keystore.crt) as imqkeytool writes them."""
    tmp = tmp_path_factory.mktemp("keys")
    keystore, crt = generate("CN=localhost", 1, PASSWORD, "EC")
    (tmp / "keystore.pem").write_bytes(keystore)
    (tmp / "keystore.crt").write_bytes(crt)
    return tmp / "keystore.pem", tmp / "keystore.crt"


def test_keys_from_the_environment() -> None:
    assert HttpsKeys.from_env({}) is None
    keys = HttpsKeys.from_env(
        {
            "PORTAL_HTTPS_CERT": "/c.pem",
            "PORTAL_HTTPS_KEY": "/k.pem",
            "PORTAL_HTTPS_KEY_PASSWORD": "pw",
        }
    )
    assert keys == HttpsKeys(Path("/c.pem"), Path("/k.pem"), "pw")
    # Handed on to the children: the same variables, and uvicorn's name for the password.
    assert keys.environment() == {
        "PORTAL_HTTPS_CERT": "/c.pem",
        "PORTAL_HTTPS_KEY": "/k.pem",
        "PORTAL_HTTPS_KEY_PASSWORD": "pw",
        "UVICORN_SSL_KEYFILE_PASSWORD": "pw",
    }
    with pytest.raises(HttpsError, match="PORTAL_HTTPS_KEY is not set"):
        HttpsKeys.from_env({"PORTAL_HTTPS_CERT": "/c.pem"})


def test_key_material_is_checked_with_a_clear_message(
    material: tuple[Path, Path], tmp_path: Path
) -> None:
    keystore, _ = material
    assert isinstance(HttpsKeys(keystore, keystore, PASSWORD).server_context(), ssl.SSLContext)
    with pytest.raises(HttpsError, match="wrong or missing password"):
        HttpsKeys(keystore, keystore, "not-it").server_context()
    with pytest.raises(HttpsError, match="wrong or missing password"):
        HttpsKeys(keystore, keystore, None).server_context()
    with pytest.raises(HttpsError, match="no such file"):
        HttpsKeys(tmp_path / "none.pem", keystore, PASSWORD).server_context()
    # Twisted's context factory for daphne, from the same files.
    factory = HttpsKeys(keystore, keystore, PASSWORD).twisted_context_factory()
    assert factory.getContext() is factory.getContext()


def test_daphne_tcp_endpoints_become_tls_endpoints(material: tuple[Path, Path]) -> None:
    from twisted.internet.endpoints import SSL4ServerEndpoint

    keystore, _ = material
    make = tls_endpoints(HttpsKeys(keystore, keystore, PASSWORD).twisted_context_factory())
    reactor = object()  # stored by the endpoints, not used until they listen
    for description, interface in (
        ("tcp:port=8443:interface=127.0.0.1", "127.0.0.1"),
        ("tcp:port=8443:interface=\\:\\:1", "::1"),
    ):
        ep = make(reactor, description)
        assert isinstance(ep, SSL4ServerEndpoint)
        assert (ep._port, ep._interface) == (8443, interface)
    assert not isinstance(make(reactor, "unix:/tmp/portal.sock"), SSL4ServerEndpoint)


def test_ums_gateway_command_line_carries_files_not_the_password() -> None:
    cmd = ums_gateway_command(8001, "0.0.0.0", certfile="/c.pem")
    assert cmd[cmd.index("--ssl-certfile") + 1] == "/c.pem"
    assert cmd[cmd.index("--ssl-keyfile") + 1] == "/c.pem"
    assert cmd[-1] == "portal.asgi:application"
    assert not any("password" in arg for arg in cmd)
    assert "--ssl-certfile" not in ums_gateway_command(8001)


def test_entrypoint_ums_command_with_https() -> None:
    docker = str(Path(__file__).resolve().parent.parent / "docker")
    if docker not in sys.path:
        sys.path.insert(0, docker)
    import entrypoint

    cmd = entrypoint.command(
        "ums", [], {"PORTAL_HTTPS_CERT": "/run/secrets/c", "PORTAL_HTTPS_KEY": "/run/secrets/k"}
    )
    assert cmd[cmd.index("--ssl-certfile") + 1] == "/run/secrets/c"
    assert cmd[cmd.index("--ssl-keyfile") + 1] == "/run/secrets/k"
    assert "--ssl-certfile" not in entrypoint.command("ums", [], {})


def test_admin_trust_store(material: tuple[Path, Path], tmp_path: Path) -> None:
    _, crt = material
    ctx = client_trust_context(crt)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert len(ctx.get_ca_certs()) == 1  # only the named trust store
    with pytest.raises(ConfigError, match="cannot read the trust store"):
        client_trust_context(tmp_path / "missing.crt")
    # No trust store named: the system's CAs plus the local broker's certificate.
    system = len(client_trust_context(None).get_ca_certs())
    assert len(client_trust_context(None, crt).get_ca_certs()) == system + 1
    assert len(client_trust_context(None, tmp_path / "absent.crt").get_ca_certs()) == system
