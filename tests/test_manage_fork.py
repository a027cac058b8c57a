"""tests/manage_fork.py stands in for ``subprocess.run([python, "manage.py", ...])``: the
same output, exit status, environment, working directory and stdin, in a process and
session of its own; a command over its timeout is killed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.manage_fork import ROOT, ForkedProcess, popen, run_manage

SHOW = (
    "import os, sys; "
    "print(os.environ['IMQ_FORK_PROBE'], os.getcwd(), sys.stdin.read().strip()); "
    "print('leader', os.getsid(0) == os.getpid()); "
    "print('pid', os.getpid()); "
    "sys.stderr.write('to stderr\\n'); "
    "sys.exit(int(os.environ['IMQ_FORK_EXIT']))"
)


@pytest.mark.parametrize("code", ["0", "3"])
def test_same_as_a_fresh_interpreter(tmp_path: Path, code: str) -> None:
    env = {**os.environ, "IMQ_FORK_PROBE": "probe", "IMQ_FORK_EXIT": code}
    args = ["shell", "-v", "0", "-c", SHOW]
    forked = run_manage(args, env=env, input="typed\n", timeout=120)
    fresh = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        input="typed\n",
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert forked.returncode == fresh.returncode == int(code), (forked, fresh)
    assert forked.stderr == fresh.stderr == "to stderr\n"
    lines = forked.stdout.splitlines()
    assert lines[:2] == fresh.stdout.splitlines()[:2] == [f"probe {ROOT} typed", "leader True"]
    assert lines[2] != f"pid {os.getpid()}"
    # Each call is a process of its own.
    again = run_manage(args, env=env, timeout=120)
    assert again.stdout.splitlines()[2] != lines[2]


def test_a_command_over_its_timeout_is_killed() -> None:
    # 2 s: the command sleeps 60, so it is over its timeout whether or not it has got as
    # far as its sleep by then.
    with pytest.raises(subprocess.TimeoutExpired):
        run_manage(["shell", "-c", "import time; print('started', flush=True); time.sleep(60)"],
                   timeout=2)  # fmt: skip


@pytest.mark.parametrize("how", ["forked", "fresh"])
def test_a_module_is_run_as_python_m_runs_it(tmp_path: Path, how: str) -> None:
    """``popen([python, "-m", MODULE, ...])`` (the portal's daphne, the UMS gateway) as
    ``python -m`` starts it: sys.argv and sys.orig_argv, a session of its own, and with
    PYTHONUNBUFFERED its output in the file as it is written."""
    flag = tmp_path / "flag"
    log = tmp_path / "out.txt"
    args = [sys.executable, "-m", "tests.fork_probe", str(flag), "x y"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        if how == "forked":
            proc = popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
            assert isinstance(proc, ForkedProcess)
        else:
            proc = subprocess.Popen(
                args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
    deadline = time.monotonic() + 60
    while "waiting" not in log.read_text() and time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    assert "waiting" in log.read_text(), "its output was not written as it came"
    flag.touch()
    assert proc.wait(60) == 3
    assert log.read_text().splitlines() == [
        f"argv fork_probe.py {flag} x y",
        f"orig -m tests.fork_probe {flag} x y",
        "leader True",
        "waiting",
    ]
