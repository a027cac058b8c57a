"""``manage.py up`` when its broker is SIGKILLed: up says so, starts the broker again
after a back-off (same ports, var home and store, less ``-reset``), and the portal, the
UMS gateway, Celery and Redis keep running and serve again by themselves; a persistent
message sent through UMS before the crash is still there.  One death more than
``--broker-restarts`` allows stops everything (exit status 1)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import requests

from .test_up import Up, alive, children_of, kind, refuses

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("needs_redis_server")]


def broker_pid(up: Up) -> int:
    return next(pid for pid, cmd in children_of(up.proc.pid).items() if kind(cmd) == "broker")


def test_up_restarts_a_killed_broker_and_the_others_keep_serving(tmp_path: Path) -> None:
    up = Up(tmp_path, "--broker-restarts", "1")
    try:
        kids = up.wait_running()
        others = {pid: kind(cmd) for pid, cmd in kids.items() if kind(cmd) != "broker"}
        ums = f"http://127.0.0.1:{up.ums}/ums/simple"
        portal = f"http://127.0.0.1:{up.portal}"

        def send(text: str) -> requests.Response:
            params = {"service": "send", "destination": "up.crash"}
            return requests.post(ums, params=params, data=text.encode(), timeout=60)

        assert send("before").status_code == 200
        sid = requests.post(ums, params={"service": "login"}, timeout=60).text
        token = requests.post(
            f"{portal}/api/token/", json={"username": "admin", "password": "admin"}, timeout=60
        ).json()["token"]
        api = {"Authorization": f"Token {token}"}

        old = broker_pid(up)
        os.kill(old, signal.SIGKILL)
        # Until the broker is back: prompt answers, "unreachable" or served, nothing else.
        ums_seen, api_seen, ok = set(), set(), set()
        deadline = time.monotonic() + 150
        i = 0
        while True:
            assert up.proc.poll() is None, up.output()
            assert time.monotonic() < deadline, up.output()
            r = send(f"during-{i}")
            ums_seen.add(r.status_code)
            if r.status_code == 200:
                ok.add(f"during-{i}")
            elif r.status_code == 503:
                assert "not reachable" in r.text, r.text
            i += 1
            a = requests.get(f"{portal}/api/broker/", headers=api, timeout=60)
            api_seen.add(a.status_code)
            if "broker  restarted" in up.output() and r.status_code == 200 and a.ok:
                break
            time.sleep(0.1)
        assert ums_seen <= {200, 503} and api_seen <= {200, 503}, (ums_seen, api_seen)
        out = up.output()
        said = "the broker exited unexpectedly (killed by SIGKILL); restarting it in 1 s"
        assert f"{said} (restart 1 of at most 1 within 600 s)" in out, out
        assert out.count("restarting it in") == 1, out
        new = broker_pid(up)
        assert new != old
        assert all(alive(pid) for pid in others), (others, up.output())

        got = set()
        while True:
            params = {"service": "receive", "destination": "up.crash", "timeout": "2000"}
            r = requests.post(ums, params=params, timeout=60)
            if r.headers["ums.status"] == "404":
                break
            got.add(r.text)
        assert {"before", *ok} <= got, sorted({"before", *ok} - got)
        r = requests.post(ums, params={"service": "send", "sid": sid, "destination": "x"})
        assert r.status_code == 410 and "log in again" in r.text, r.text

        # A second death within the window is one more than --broker-restarts 1 allows.
        os.kill(new, signal.SIGKILL)
        assert up.wait_exit() == 1, up.output()
        assert "not restarting it again" in up.output()
        assert not [pid for pid in others if alive(pid)], (others, up.output())
        assert refuses(up.portal) and refuses(up.ums)
    finally:
        up.kill()
