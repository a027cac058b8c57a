"""The compose stack brought up in real containers, on a private Docker daemon.

Opt-in (``IMQ_TEST_DOCKER_STACK=1``): it needs dockerd (Debian's docker.io) and root, and
it builds the image (several minutes).  The machine has no image registry, so the
Dockerfile's base ``python:3.11-slim-bookworm`` is stood in for by an image imported from a
Debian bookworm root file system (``debootstrap``: Debian's Python 3.11 in a virtual
environment at /usr/local, where the official image has its Python) -- given as
``IMQ_TEST_DOCKER_ROOTFS`` or made here.  The image itself is built from the committed tree
(``git archive HEAD``) with docker/Dockerfile unchanged.

The daemon runs without iptables or bridges (nothing of the host's network is touched), so
the containers share the host's network: a compose override puts every service of ours on
it, bound to loopback on free ports, and points them at the tests' own PostgreSQL and Redis
(the way docker/external.yaml points them at existing ones), with the ``cluster`` profile's
second broker.  Then Docker's own health checks must pass in every container, a message
goes through the broker in its container, another from one broker to the other, and the
portal's REST API logs in with the secret administrator password.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.launcher import free_port
from openmq_client import Queue, TextMessage
from openmq_client.sync import connect

from .pg import fresh_database

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
BASE = "python:3.11-slim-bookworm"
IMAGE = "openmq-py:stack-test"
SERVICES = ["broker", "broker-2", "portal", "ums", "worker", "beat", "spark-master", "spark-worker"]
SECRETS = {
    "db_password": "p@ss/w:rd %1",
    "django_secret_key": "docker-stack-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "imq_admin_password": "Adm1n-from-secret",
    "imq_portal_secret": "P0rtal-from-secret-0123456789",
}

pytestmark = [
    pytest.mark.timeout(2400),
    pytest.mark.skipif(
        not os.environ.get("IMQ_TEST_DOCKER_STACK"),
        reason="opt-in: IMQ_TEST_DOCKER_STACK=1 (needs dockerd and root; builds the image)",
    ),
]


def run(cmd: list[str], env: dict[str, str], timeout: float = 1800, **kw) -> str:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def docker_env() -> Iterator[dict[str, str]]:
    """A private dockerd (own data root and socket; no iptables, no bridge)."""
    dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
    if not Path(dockerd).exists() or os.geteuid() != 0:
        pytest.fail("dockerd (apt-get install docker.io) and root are needed", pytrace=False)
    tmp = Path(tempfile.mkdtemp(prefix="imq-dockerd-"))
    sock = tmp / "docker.sock"
    log = open(tmp / "dockerd.log", "wb")  # noqa: SIM115 - lives as long as the daemon
    proc = subprocess.Popen(
        [dockerd, "--data-root", str(tmp / "root"), "--exec-root", str(tmp / "exec"),
         "--pidfile", str(tmp / "dockerd.pid"), "-H", f"unix://{sock}",
         "--iptables=false", "--ip6tables=false", "--bridge=none"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    env = {**os.environ, "DOCKER_HOST": f"unix://{sock}", "DOCKER_BUILDKIT": "0"}
    try:
        deadline = time.monotonic() + 120
        while subprocess.run(["docker", "info"], env=env, capture_output=True).returncode:
            assert proc.poll() is None, (tmp / "dockerd.log").read_text()
            assert time.monotonic() < deadline, (tmp / "dockerd.log").read_text()
            time.sleep(0.5)
        yield env
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        # dockerd leaves its default network namespace mounted in its exec root.
        subprocess.run(["umount", str(tmp / "exec/netns/default")], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def make_rootfs(target: Path) -> None:
    """Debian bookworm with Python 3.11 in a venv at /usr/local (python, pip on PATH) and
    this host's CA bundle (pip reaches PyPI through whatever this machine trusts)."""
    run(["debootstrap", "--variant=minbase",
         "--include=python3.11,python3.11-venv,ca-certificates",
         "bookworm", str(target), "http://deb.debian.org/debian"], os.environ)  # fmt: skip
    run(["chroot", str(target), "python3.11", "-m", "venv", "--clear", "/usr/local"], os.environ)
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", target / "etc/ssl/certs/ca-certificates.crt")


@pytest.fixture(scope="module")
def image(docker_env: dict[str, str]) -> str:
    if subprocess.run(["docker", "image", "inspect", BASE], env=docker_env,
                      capture_output=True).returncode:  # fmt: skip
        rootfs = Path(os.environ.get("IMQ_TEST_DOCKER_ROOTFS") or "")
        if not rootfs.is_dir():
            rootfs = Path(tempfile.mkdtemp(prefix="imq-rootfs-")) / "fs"
            make_rootfs(rootfs)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        run(["docker", "import", "-", BASE], docker_env, stdin=tar.stdout)
        tar.wait()
    archive = subprocess.Popen(["git", "archive", "HEAD"], cwd=ROOT, stdout=subprocess.PIPE)
    run(["docker", "build", "--network", "host", "-f", "docker/Dockerfile", "-t", IMAGE, "-"],
        docker_env, stdin=archive.stdout)  # fmt: skip
    assert archive.wait() == 0
    return IMAGE


def override(ports: dict[str, int], database_url: str, redis_url: str) -> dict:
    """Every service of ours on the host's network, on loopback and free ports, with the
    tests' PostgreSQL and Redis; the bundled PostgreSQL and Redis left out."""
    p = ports
    common = {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "IMQ_BROKER_HOST": "127.0.0.1",
        "IMQ_PORT": str(p["pm"]),
        "IMQ_JMS_PORT": str(p["jms"]),
        "IMQ_ADMIN_PORT": str(p["admin"]),
        "JOBS_BROKERS": f"127.0.0.1:{p['pm']},127.0.0.1:{p['pm2']}",
        # The cluster profile's two brokers, naming each other.
        "IMQ_CLUSTER_BROKERLIST": f"127.0.0.1:{p['pm']},127.0.0.1:{p['pm2']}",
        "IMQ_CLUSTER_HOSTNAME": "127.0.0.1",
        "IMQ_BROKER_OPTS": "-Dimq.hostname=127.0.0.1",
        "SPARK_MASTER": f"spark://127.0.0.1:{p['spark']}",
        "SPARK_LOCAL_HOSTNAME": "localhost",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PORTAL_BIND": "127.0.0.1",
        "PORTAL_PORT": str(p["portal"]),
        "UMS_BIND": "127.0.0.1",
        "UMS_PORT": str(p["ums"]),
        "SPARK_MASTER_HOST": "127.0.0.1",
        "SPARK_MASTER_PORT": str(p["spark"]),
        "SPARK_MASTER_WEBUI_PORT": str(p["spark_ui"]),
        "SPARK_WORKER_WEBUI_PORT": str(p["worker_ui"]),
        "SPARK_WORKER_MEMORY": "1g",
        "SPARK_WORKER_CORES": "1",
    }
    services: dict = {
        "postgres": {"profiles": ["bundled"]},
        "redis": {"profiles": ["bundled"]},
        "migrate": {"network_mode": "host", "environment": common},
    }
    for name in SERVICES:
        services[name] = {"network_mode": "host", "environment": common}
    services["broker-2"]["environment"] = {
        **common,
        "IMQ_PORT": str(p["pm2"]),
        "IMQ_JMS_PORT": str(p["jms2"]),
        "IMQ_ADMIN_PORT": str(p["admin2"]),
    }
    return {"services": services}


def test_the_stack_in_containers(image: str, docker_env, tmp_path: Path, postgres_url: str,
                                 redis_url: str) -> None:  # fmt: skip
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    for name, value in SECRETS.items():
        (secrets / name).write_text(value + "\n")
        (secrets / name).chmod(0o644)
    ports = {
        name: free_port()
        for name in ("pm", "jms", "admin", "pm2", "jms2", "admin2", "portal", "ums", "spark",
                     "spark_ui", "worker_ui")
    }  # fmt: skip
    database = fresh_database(postgres_url, "imq_stack", migrated=False)
    redis_db = redis_url.rsplit("/", 1)[0] + "/10"
    # Compose reads the override as YAML; JSON is YAML.  hostname and ports do not go
    # with the host's network, so they are dropped in a second override.
    first = tmp_path / "host-network.json"
    first.write_text(json.dumps(override(ports, database, redis_db)))
    env = {**docker_env, "IMQ_SECRETS_DIR": str(secrets), "IMQ_IMAGE": image}
    reset = tmp_path / "reset.yaml"
    lines = ["services:"]
    for name in ["migrate", *SERVICES]:
        lines += [f"  {name}:", "    hostname: !reset null", "    ports: !reset []"]
        if name == "migrate":
            lines.append("    depends_on: !reset {}")
    reset.write_text("\n".join(lines) + "\n")
    base = [str(Path(sys.executable).parent / "docker-compose"), "-p", "imqstacktest",
            "--profile", "cluster",
            "-f", "compose.yaml", "-f", str(first), "-f", str(reset)]  # fmt: skip
    try:
        run([*base, "up", "-d", "--no-build"], env, timeout=900, cwd=DOCKER)
        deadline = time.monotonic() + 600
        while True:
            rows = [
                json.loads(line)
                for line in run(
                    [*base, "ps", "-a", "--format", "json"], env, cwd=DOCKER
                ).splitlines()
                if line.strip()
            ]
            health = {r["Service"]: r.get("Health") or r.get("State") for r in rows}
            failed = [r["Service"] for r in rows if r["State"] == "exited" and r.get("ExitCode")]
            assert not failed, run([*base, "logs", "--tail", "40", *failed], env, cwd=DOCKER)
            if all(health.get(s) == "healthy" for s in SERVICES):
                break
            assert time.monotonic() < deadline, (
                health,
                run([*base, "logs", "--tail", "50"], env, cwd=DOCKER),
            )
            time.sleep(5)
        # The one-shot migration finished; the broker logs on stdout.
        states = {r["Service"]: (r["State"], r.get("ExitCode")) for r in rows}
        assert states["migrate"] == ("exited", 0), states
        assert "imqbroker ready" in run([*base, "logs", "broker"], env, cwd=DOCKER)

        conn = connect("127.0.0.1", ports["pm"])
        try:
            session = conn.create_session()
            session.create_producer(Queue("docker.stack")).send(TextMessage("in containers"))
            consumer = session.create_consumer(Queue("docker.stack"))
            conn.start()
            msg = consumer.receive(timeout=30)
            assert msg is not None and msg.text == "in containers"
        finally:
            conn.close()

        # The cluster profile: a queue message produced on the first broker is consumed
        # on the second (the queue keeps it until the consumer's interest arrives).
        far = connect("127.0.0.1", ports["pm2"])
        near = connect("127.0.0.1", ports["pm"])
        try:
            consumer = far.create_session().create_consumer(Queue("docker.cluster"))
            far.start()
            near.create_session().create_producer(Queue("docker.cluster")).send(
                TextMessage("across the cluster")
            )
            msg = consumer.receive(timeout=60)
            assert msg is not None and msg.text == "across the cluster"
        finally:
            near.close()
            far.close()

        portal = f"http://127.0.0.1:{ports['portal']}"
        req = urllib.request.Request(
            portal + "/api/token/",
            data=json.dumps(
                {"username": "admin", "password": SECRETS["imq_admin_password"]}
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            token = json.loads(r.read())["token"]
        req = urllib.request.Request(
            portal + "/api/broker/", headers={"Authorization": f"Token {token}"}
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200
        # Every process of ours runs as uid 10001.
        for service in SERVICES:
            uid = run([*base, "exec", "-T", service, "id", "-u"], env, cwd=DOCKER).strip()
            assert uid == "10001", service
    finally:
        subprocess.run([*base, "down", "-v", "--timeout", "30"], env=env, cwd=DOCKER,
                       capture_output=True, timeout=300)  # fmt: skip
