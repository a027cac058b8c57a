"""``python manage.py up`` when one of its children dies (everything stops, exit status
1), and ``--daemon`` (detached, stopped by SIGTERM): each test an up of its own, which it
ends.  The Up helper and the other tests of up: tests/test_up.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from broker.management.commands.up import portmapper_answers

from .test_up import Up, alive, children_of, kind, portal_answers, refuses

pytestmark = [
    pytest.mark.timeout(240),
    # manage.py up starts a redis-server: without one the tests fail naming it.
    pytest.mark.usefixtures("needs_redis_server"),
]


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
            time.sleep(0.05)
        assert not pidfile.exists()
        assert "up: stopped" in (logs / "up.log").read_text()
        assert refuses(up.portal) and refuses(up.pm)
    finally:
        up.kill()
        if daemon is not None and alive(daemon):
            for pid in children_of(daemon):
                os.kill(pid, signal.SIGKILL)
            os.kill(daemon, signal.SIGKILL)
