"""``python manage.py up``: the supervisor brings up redis, the broker and the portal, and
takes every one of them down again (on SIGTERM, or when one of them dies)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from broker import props
from broker.launcher import free_port
from broker.management.commands.up import portmapper_answers, redis_answers

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.timeout(240),
    # manage.py up starts a redis-server: without one the tests fail naming it.
    pytest.mark.usefixtures("needs_redis_server"),
]


def children_of(pid: int) -> dict[int, str]:
    """The live child processes of ``pid`` and their command lines (from /proc)."""
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ")".
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out[int(entry.name)] = cmdline
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def kind(cmdline: str) -> str:
    """Which of ``up``'s children a command line is."""
    if "redis-server" in cmdline:
        return "redis"
    if "runbroker" in cmdline:
        return "broker"
    if "celery" in cmdline:
        return "beat" if " beat " in cmdline else "worker"
    if "uvicorn" in cmdline:
        return "ums"
    return "portal"


def portal_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            return r.status == 200 and r.read() == b"ok"
    except OSError:
        return False


def refuses(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


class Up:
    """``manage.py up`` as a child process on free ports, its output in a file."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        self.pm, self.portal, self.ums = free_port(), free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IMQ_", "REDIS_URL"))}
        env["DATABASE_URL"] = f"sqlite:///{tmp / 'db.sqlite3'}"
        env["IMQ_VARHOME"] = str(tmp / "var")
        self.log = tmp / "up.log"
        cmd = [
            sys.executable, "manage.py", "up",
            "--portal-port", str(self.portal),
            "--ums-port", str(self.ums),
            "-port", str(self.pm),
            f"-Dimq.jms.tcp.port={free_port()}",
            f"-Dimq.admin.tcp.port={free_port()}",
            *extra,
        ]  # fmt: skip
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_running(self) -> dict[int, str]:
        deadline = time.monotonic() + 150
        while not (
            "up: running" in self.output()
            and portal_answers(self.portal)
            and portal_answers(self.ums)
            and portmapper_answers("127.0.0.1", self.pm)
        ):
            assert self.proc.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.3)
        kids = children_of(self.proc.pid)
        kinds = sorted(kind(c) for c in kids.values())
        assert kinds == ["beat", "broker", "portal", "redis", "ums", "worker"], kids
        assert any("portal.serve" in c and "portal.asgi:application" in c for c in kids.values())
        assert any("uvicorn" in c and "portal.asgi:application" in c for c in kids.values())
        return kids

    def redis_port(self) -> int:
        line = next(ln for ln in self.output().splitlines() if ln.startswith("up: redis"))
        return int(line.split("redis://127.0.0.1:", 1)[1].split("/", 1)[0])

    def wait_exit(self) -> int:
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in children_of(self.proc.pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def up(tmp_path: Path):
    started = Up(tmp_path)
    yield started
    started.kill()


def test_up_serves_and_stops_everything_on_sigterm(up):
    kids = up.wait_running()
    out = up.output()
    assert f"http://127.0.0.1:{up.portal}/" in out
    assert f"http://127.0.0.1:{up.ums}/ums/ (UMS gateway)" in out
    assert f"127.0.0.1:{up.pm}" in out
    # Loopback by default (no imq.hostname given), and the broker says where it listens.
    assert f"port mapper listening on 127.0.0.1:{up.pm}" in out
    assert "service jms (tcp NORMAL) listening on 127.0.0.1:" in out
    # The HTTP tunnel as well, and up prints its URL.
    assert "service httpjms (http NORMAL) listening on 127.0.0.1:" in out
    assert "HTTP tunnel http://127.0.0.1:" in out
    assert f"celery worker on redis://127.0.0.1:{up.redis_port()}/0" in out
    assert "celery beat on redis://" in out
    assert redis_answers(up.redis_port())
    # The worker's pool processes are its children, not up's: all of them must go too.
    workers = [pid for pid, c in kids.items() if kind(c) == "worker"]
    pool = [pid for w in workers for pid in children_of(w)]

    up.proc.send_signal(signal.SIGTERM)
    assert up.wait_exit() == 0, up.output()
    assert "up: stopped" in up.output()
    assert not [pid for pid in kids if alive(pid)], (kids, up.output())
    assert not [pid for pid in pool if alive(pid)], (pool, up.output())
    assert refuses(up.portal) and refuses(up.ums) and refuses(up.pm)
    assert refuses(up.redis_port())


def test_a_dead_child_stops_the_others(tmp_path: Path):
    # A dead broker is restarted by default (tests/test_crash_up.py); not with 0 restarts.
    up = Up(tmp_path, "--broker-restarts", "0")
    try:
        _dead_broker_stops_the_others(up)
    finally:
        up.kill()


def _dead_broker_stops_the_others(up: Up) -> None:
    kids = up.wait_running()
    broker = next(pid for pid, cmd in kids.items() if "runbroker" in cmd)
    os.kill(broker, signal.SIGKILL)
    assert up.wait_exit() == 1, up.output()
    assert "the broker exited unexpectedly (killed by SIGKILL)" in up.output()
    assert not [pid for pid in kids if alive(pid)], (kids, up.output())
    assert refuses(up.portal)


def test_a_dead_celery_beat_stops_the_others(tmp_path: Path):
    # With --log-dir: each child's output in a file of its own, not in up's.
    logs = tmp_path / "logs"
    up = Up(tmp_path, "--log-dir", str(logs))
    try:
        _dead_beat_stops_the_others(up)
    finally:
        up.kill()
    names = ["beat", "broker", "portal", "redis", "ums", "worker"]
    assert sorted(p.stem for p in logs.iterdir()) == names
    for name in names:
        assert (logs / f"{name}.log").read_text().startswith(f"--- up: starting the {name} at ")
    assert f"port mapper listening on 127.0.0.1:{up.pm}" in (logs / "broker.log").read_text()
    assert "Ready to accept connections" in (logs / "redis.log").read_text()
    assert "port mapper listening" not in up.output()


def _dead_beat_stops_the_others(up: Up) -> None:
    kids = up.wait_running()
    beat = next(pid for pid, cmd in kids.items() if kind(cmd) == "beat")
    os.kill(beat, signal.SIGKILL)
    assert up.wait_exit() == 1, up.output()
    assert "the beat exited unexpectedly (killed by SIGKILL)" in up.output()
    assert not [pid for pid in kids if alive(pid)], (kids, up.output())
    assert refuses(up.portal) and refuses(up.pm)


def test_up_binds_loopback_unless_told_otherwise(tmp_path):
    from broker.management.commands.up import Command

    def broker_config(*defines: str):
        cmd = Command()
        cmd.opts = {
            "instance": "bindtest", "pm_port": None, "varhome": str(tmp_path),
            "reset": None, "loglevel": None, "defines": list(defines),
        }  # fmt: skip
        return cmd._broker_config()

    config, args = broker_config()
    assert config.get("imq.hostname") == "127.0.0.1" and "-Dimq.hostname=127.0.0.1" in args
    assert config.get(props.SERVICE_ACTIVELIST) == ["jms", "admin", "httpjms"]
    config, args = broker_config("imq.hostname=0.0.0.0")
    assert config.get("imq.hostname") == "0.0.0.0"
    assert not [a for a in args if a.startswith("-Dimq.hostname=127")]
    # Services chosen by the administrator are left as they are.
    config, args = broker_config("imq.service.activelist=jms,admin,ssljms")
    assert config.get(props.SERVICE_ACTIVELIST) == ["jms", "admin", "ssljms"]


def test_up_daemon_detaches_and_stops_on_sigterm(tmp_path: Path):
    logs = tmp_path / "logs"
    up = Up(tmp_path, "--daemon", "--log-dir", str(logs))
    daemon = None
    try:
        # The command returns once everything answers, leaving up in the background.
        assert up.wait_exit() == 0, up.output()
        pidfile = logs / "up.pid"
        daemon = int(pidfile.read_text())
        assert f"running in the background (pid {daemon}" in up.output()
        assert alive(daemon) and portal_answers(up.portal) and portal_answers(up.ums)
        assert portmapper_answers("127.0.0.1", up.pm)
        kids = children_of(daemon)
        assert sorted(kind(c) for c in kids.values()) == [
            "beat", "broker", "portal", "redis", "ums", "worker"
        ]  # fmt: skip
        # It left the terminal's session: a Ctrl-C there does not reach it.
        assert os.getsid(daemon) == daemon
        assert "up: running; Ctrl-C (or SIGTERM) stops everything" in (logs / "up.log").read_text()
        os.kill(daemon, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while alive(daemon) or [pid for pid in kids if alive(pid)]:
            assert time.monotonic() < deadline, (logs / "up.log").read_text()
            time.sleep(0.2)
        assert not pidfile.exists()
        assert "up: stopped" in (logs / "up.log").read_text()
        assert refuses(up.portal) and refuses(up.pm)
    finally:
        up.kill()
        if daemon is not None and alive(daemon):
            for pid in children_of(daemon):
                os.kill(pid, signal.SIGKILL)
            os.kill(daemon, signal.SIGKILL)


def test_up_daemon_needs_a_log_dir(tmp_path: Path):
    up = Up(tmp_path, "--daemon")
    assert up.wait_exit() == 1
    assert "--daemon needs --log-dir DIR" in up.output()
