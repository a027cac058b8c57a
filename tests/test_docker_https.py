"""The Docker stack's HTTPS (docker/https.yaml, docker/entrypoint.py), as far as a machine
without a Docker daemon checks it (see tests/test_docker.py): Compose's own loader reads
the override, and the portal's and the UMS gateway's entry commands, given the environment
the override gives them, serve HTTPS that Python's http.client verifies against the
certificate, and pass their own compose health checks.
"""

from __future__ import annotations

import http.client
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.launcher import free_port
from broker.management.commands.imqkeytool import generate

from .test_docker import ENTRYPOINT, ROOT, compose_config, secrets_dir  # noqa: F401

pytestmark = pytest.mark.timeout(300)

KEY_PASSWORD = "docker-https-pw"


def test_https_override_gives_the_portal_and_ums_their_key_material(secrets_dir: Path) -> None:  # noqa: F811
    (secrets_dir / "https.crt").write_text("certificate\n")
    (secrets_dir / "https.key").write_text("key\n")
    config = compose_config(secrets_dir, "-f", "https.yaml")
    services = config["services"]
    for name in ("portal", "ums"):
        env = services[name]["environment"]
        assert env["PORTAL_HTTPS_CERT"] == "/run/secrets/https_cert"
        assert env["PORTAL_HTTPS_KEY"] == "/run/secrets/https_key"
        assert env["DJANGO_SECRET_KEY_FILE"]  # the base file's environment is kept
        targets = {s["source"] for s in services[name]["secrets"]}
        assert {"https_cert", "https_key", "django_secret_key"} <= targets
    # Only the web services get the key.
    assert "PORTAL_HTTPS_CERT" not in services["broker"]["environment"]
    assert config["secrets"]["https_key"]["file"] == str(secrets_dir / "https.key")
    # The proxy settings reach the portal from .env.
    proxied = compose_config(
        secrets_dir,
        CSRF_TRUSTED_ORIGINS="https://mq.example.com",
        TRUST_X_FORWARDED_PROTO="true",
    )["services"]["portal"]["environment"]
    assert proxied["CSRF_TRUSTED_ORIGINS"] == "https://mq.example.com"
    assert proxied["TRUST_X_FORWARDED_PROTO"] == "true"


def entry(env: dict[str, str], *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ENTRYPOINT), *args], cwd=ROOT, env=env, **kwargs)


def test_portal_and_ums_entry_commands_serve_https(tmp_path: Path) -> None:
    keystore, crt = generate("CN=localhost", 1, KEY_PASSWORD)
    (tmp_path / "https.pem").write_bytes(keystore)  # certificate + encrypted key
    (tmp_path / "https.crt").write_bytes(crt)
    (tmp_path / "key_password").write_text(KEY_PASSWORD + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMQ_", "PORTAL_", "UVICORN_"))}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        IMQ_VARHOME=str(tmp_path / "var"),
        PORTAL_HTTPS_CERT=str(tmp_path / "https.pem"),
        PORTAL_HTTPS_KEY=str(tmp_path / "https.pem"),
        PORTAL_HTTPS_KEY_PASSWORD_FILE=str(tmp_path / "key_password"),
        PORTAL_BIND="127.0.0.1",
        PORTAL_PORT=str(free_port()),
        UMS_BIND="127.0.0.1",
        UMS_PORT=str(free_port()),
    )
    trust = ssl.create_default_context(cafile=str(tmp_path / "https.crt"))
    procs = {
        name: entry(
            env,
            name,
            stdout=open(tmp_path / f"{name}.log", "wb"),  # noqa: SIM115 - the child's
            stderr=subprocess.STDOUT,
        )
        for name in ("portal", "ums")
    }
    try:
        for name, port in (("portal", env["PORTAL_PORT"]), ("ums", env["UMS_PORT"])):
            log = tmp_path / f"{name}.log"
            deadline = time.monotonic() + 90
            while subprocess.run(
                [sys.executable, str(ENTRYPOINT), "health", name], env=env, timeout=60
            ).returncode:
                assert procs[name].poll() is None, log.read_text(errors="replace")
                assert time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.3)
            conn = http.client.HTTPSConnection("localhost", int(port), context=trust, timeout=30)
            conn.request("GET", "/healthz")
            reply = conn.getresponse()
            assert (reply.status, reply.read()) == (200, b"ok")
            conn.close()
            # The password came from its secret file, not the command line.
            cmdline = Path(f"/proc/{procs[name].pid}/cmdline").read_bytes()
            assert KEY_PASSWORD.encode() not in cmdline
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # A wrong password: the container stops at once, saying why (exit 2).
    (tmp_path / "key_password").write_text("wrong\n")
    done = subprocess.run(
        [sys.executable, str(ENTRYPOINT), "ums"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "wrong or missing password" in done.stderr
