"""Start a broker as a child process on free ports (for tests, benchmarks and tools)."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.commandlines import broker_command, manage_command
from broker.stock_paths import REALBROKER

ROOT = Path(__file__).resolve().parent.parent

# What start_broker starts the broker's process with: subprocess.Popen, or a stand-in
# with its interface a test harness sets (tests/manage_fork.py forks it from a process
# that has the libraries imported, saving each start a second of imports).
spawn: Callable[..., Any] = subprocess.Popen


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_portmapper(host: str, port: int, timeout: float = 5.0) -> bytes:
    """The port mapper's service table (docs/developers/protocol.md): our version line,
    then read to the closing "." line or EOF.  Raises OSError when nothing answers."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(b"101\n")
        data = b""
        while not data.endswith(b".\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return data


def portmapper_answers(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when a broker's port mapper at host:port sends its service table."""
    try:
        return read_portmapper(host, port, timeout).startswith(b"101 ")
    except OSError:
        return False


def terminate(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM (a clean shutdown), SIGKILL if it is not over within ``grace`` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@dataclass
class BrokerProcess:
    """A running ``manage.py runbroker`` child and where it listens."""

    host: str
    portmapper_port: int
    jms_port: int
    admin_port: int
    varhome: Path
    instance: str
    proc: subprocess.Popen
    log_path: Path
    extra: dict = field(default_factory=dict)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        terminate(self.proc, 10)


def migrate(env: dict[str, str], python: str | None = None) -> None:
    """``manage.py migrate`` on the database ``env["DATABASE_URL"]`` names."""
    subprocess.run(
        manage_command("migrate", "--noinput", "-v", "0", python=python),
        cwd=ROOT,
        env=env,
        check=True,
    )


# interpreter -> a SQLite database with every migration applied (made on first use, removed
# when this process exits).
_TEMPLATES: dict[str, Path] = {}


def _migrated_sqlite(python: str, env: dict[str, str]) -> Path:
    template = _TEMPLATES.get(python)
    if template is None:
        where = Path(tempfile.mkdtemp(prefix="imq-migrated-"))
        atexit.register(shutil.rmtree, where, ignore_errors=True)
        template = where / "db.sqlite3"
        migrate({**env, "DATABASE_URL": f"sqlite:///{template}"}, python)
        # The last connection's close checkpointed the WAL: the one file is the database.
        _TEMPLATES[python] = template
    return template


def migrated_sqlite(python: str | None = None) -> Path:
    """The migrated SQLite database :func:`fresh_sqlite` copies in this process (made on
    first use): for another process to adopt (:func:`adopt_migrated_sqlite`)."""
    return _migrated_sqlite(python or sys.executable, dict(os.environ))


def adopt_migrated_sqlite(template: Path, python: str | None = None) -> None:
    """Copy ``template``, another process's :func:`migrated_sqlite` of the same code, for
    each fresh database here instead of migrating one more (a child of a test process)."""
    _TEMPLATES[python or sys.executable] = template


def fresh_sqlite(
    db_file: Path, env: dict[str, str] | None = None, python: str | None = None
) -> None:
    """Make ``db_file`` a migrated SQLite database: a copy of one migrated once per
    interpreter (a ``manage.py migrate`` costs seconds of CPU, and tests make hundreds)."""
    env = {**os.environ, **(env or {})}
    shutil.copyfile(_migrated_sqlite(python or sys.executable, env), db_file)


def _wait_serving(
    proc: subprocess.Popen,
    jms: int,
    pm: int,
    timeout: float = 60,
    host: str = "127.0.0.1",
    jms_host: str | None = None,
) -> bool:
    """True once the broker accepts on its JMS port and its port mapper; False when it
    exits first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection((jms_host or host, jms), timeout=0.5):
                pass
            with socket.create_connection((host, pm), timeout=0.5):
                pass
            return True
        except OSError:
            time.sleep(0.1)
    return False


def start_broker(
    tmp: Path,
    *props: str,
    instance: str = "testbroker",
    python: str | None = None,
    database_url: str | None = None,
    env: dict[str, str] | None = None,
    portmapper_port: int | None = None,
    tty: bool = True,
    host: str = "127.0.0.1",
    jms_host: str | None = None,
    ready_timeout: float = 60,
) -> BrokerProcess:
    """Start a broker child process with ``-Dname=value`` overrides and wait until it serves
    (``ready_timeout`` seconds at most).

    Its database is a SQLite file in ``tmp`` unless ``database_url`` names another;
    ``env`` adds to (or overrides) the environment it inherits, e.g. ``REDIS_URL``.
    With ``tty`` (``-tty``: every log category on the console) its stdout and stderr go to
    ``tmp/broker-stdout.txt``; without, as the console properties say, stderr to
    ``tmp/broker-stderr.txt`` apart.  ``host`` is its ``imq.hostname`` (another loopback
    address only inside a private network namespace, see tests/stock_cluster.py);
    ``jms_host`` is where its jms service listens when ``props`` bind it elsewhere
    (``imq.jms.tcp.hostname``), so the start is waited for there.
    """
    varhome = tmp / "var"
    env = {**os.environ, **(env or {})}
    env["DATABASE_URL"] = database_url or f"sqlite:///{tmp / 'db.sqlite3'}"
    env["IMQ_VARHOME"] = str(varhome)
    url = env["DATABASE_URL"]
    db_file = Path(url[len("sqlite:///") :]) if url.startswith("sqlite:///") else None
    # Any other database is brought up to date by the broker itself (runbroker migrates
    # before it serves); a separate `manage.py migrate` here cost 2 s of CPU a start.
    if db_file is not None and not db_file.exists():
        fresh_sqlite(db_file, env, python)
    log_path = tmp / "broker-stdout.txt"
    err_path = tmp / "broker-stderr.txt"
    for attempt in range(3):
        # A cluster's brokers name each other's port mappers, so those can be chosen first.
        pm, jms, admin = portmapper_port or free_port(), free_port(), free_port()
        args = (broker_command if tty else _runbroker)(
            "-name",
            instance,
            "-port",
            str(pm),
            "-varhome",
            str(varhome),
            f"-Dimq.jms.tcp.port={jms}",
            f"-Dimq.admin.tcp.port={admin}",
            f"-Dimq.hostname={host}",
            *(f"-D{p}" for p in props),
        )
        # A restart in the same directory starts a new log; a retry adds to it.
        start = log_path.stat().st_size if attempt else 0
        out = open(log_path, "ab" if attempt else "wb")  # noqa: SIM115 - as long as the process
        err = subprocess.STDOUT if tty else open(err_path, "ab" if attempt else "wb")  # noqa: SIM115
        proc = spawn(args, cwd=ROOT, env=env, stdout=out, stderr=err)
        if _wait_serving(proc, jms, pm, ready_timeout, host=host, jms_host=jms_host):
            break
        with open(log_path if tty else err_path, "rb") as f:
            f.seek(start if tty else 0)
            said = f.read().decode(errors="replace")
        # A port free_port() found can be taken by someone else before the broker binds it.
        if proc.poll() is None or "Address already in use" not in said or attempt == 2:
            how = "did not start" if proc.poll() is None else "exited early"
            proc.kill()
            proc.wait(10)
            apart = "" if tty else said
            raise RuntimeError(f"broker {how}:\n{log_path.read_text(errors='replace')}{apart}")
    return BrokerProcess(host, pm, jms, admin, varhome, instance, proc, log_path, {"env": env})


def _runbroker(*args: str) -> list[str]:
    """``manage.py runbroker ARGS`` without ``-tty``."""
    return manage_command("runbroker", *args)


# The stock OpenMQ 6.9 broker, the reference every behaviour and benchmark is compared with
# (third_party/openmq/realbroker; OPENMQ_REALBROKER names another copy).
# What hosts OpenMQ's own HTTP tunnel servlet (imq.jar) in the Grizzly the stock broker
# ships: the stock side of the tunnel tests and benchmark.
STOCK_SERVLET_JARS = [
    REALBROKER / "mq" / "lib" / f"{j}.jar"
    for j in (
        "grizzly-http-servlet",
        "grizzly-http-server",
        "grizzly-http",
        "grizzly-framework",
        "jakarta.servlet-api",
        "imq",
    )
]


@dataclass
class StockBrokerProcess:
    """A running stock OpenMQ ``imqbrokerd`` (run.sh) child and where it listens."""

    host: str
    portmapper_port: int
    varhome: Path
    instance: str
    proc: subprocess.Popen
    log_path: Path

    def log_text(self) -> str:
        """Its console output (the instance log is varhome/instances/NAME/log/log.txt)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """SIGTERM: the stock broker's clean shutdown."""
        terminate(self.proc, 30)

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def missing_stock_broker() -> list[str]:
    """What starting the stock broker needs and this machine lacks."""
    missing = []
    if not (REALBROKER / "run.sh").is_file():
        missing.append(f"the stock OpenMQ broker {REALBROKER / 'run.sh'}")
    if not (REALBROKER / "mq" / "lib" / "imqbroker.jar").is_file():
        missing.append(f"its jar {REALBROKER / 'mq/lib/imqbroker.jar'}")
    if not os.environ.get("JAVA") and shutil.which("java") is None:
        missing.append("java (a JDK 17: apt-get install openjdk-17-jdk-headless)")
    return missing


def start_stock_broker(
    tmp: Path,
    *props: str,
    instance: str = "imqbroker",
    portmapper_port: int | None = None,
    args: tuple[str, ...] = (),
    timeout: float = 90.0,
    host: str = "127.0.0.1",
) -> StockBrokerProcess:
    """Start ``third_party/openmq/realbroker/run.sh`` with ``-Dname=value`` overrides; wait for ready.

    Its jms and admin services take dynamic ports, found through the port mapper as every
    client finds them. Raises RuntimeError naming what is missing or what it printed.
    """
    missing = missing_stock_broker()
    if missing:
        raise RuntimeError("cannot start the stock OpenMQ broker; missing: " + "; ".join(missing))
    pm = portmapper_port or free_port()
    varhome = tmp / "stock-var"
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / f"stock-{instance}-stdout.txt"
    cmd = [str(REALBROKER / "run.sh"), str(pm), str(varhome), "-name", instance, *args]
    if host != "127.0.0.1":
        cmd.append(f"-Dimq.hostname={host}")
    cmd += [f"-D{p}" for p in props]
    out = open(log_path, "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    # B1039 "Broker ... ready." is printed once every service listens.
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"stock broker exited early:\n{log_path.read_text(errors='replace')}"
            )
        if b"[B1039]" in log_path.read_bytes():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError(f"stock broker did not start:\n{log_path.read_text(errors='replace')}")
    return StockBrokerProcess(host, pm, varhome, instance, proc, log_path)
