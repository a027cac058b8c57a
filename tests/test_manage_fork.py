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

from tests.manage_fork import ROOT, run_manage

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


def test_a_module_is_forked_as_python_dash_m_runs_it(tmp_path: Path, monkeypatch) -> None:
    """``python -m MODULE`` (the portal's server, FORKED_MODULES) is forked too, with
    ``PYTHONUNBUFFERED`` applied in the child: its output is in the file at once."""
    from tests import manage_fork

    monkeypatch.setattr(manage_fork, "FORKED_MODULES", ("this",))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "out.txt"
    with open(out, "wb") as f:
        proc = manage_fork.popen(
            [sys.executable, "-m", "this"], cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT
        )
    assert isinstance(proc, manage_fork.ForkedProcess)
    assert proc.wait(120) == 0
    fresh = subprocess.run([sys.executable, "-m", "this"], capture_output=True, timeout=120)
    assert out.read_bytes() == fresh.stdout and b"Beautiful is better" in fresh.stdout

    # Unbuffered: the line is in the file while the command still runs.
    code = "print('started'); import time; time.sleep(60)"
    with open(out, "wb") as f:
        proc = manage_fork.popen(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c", code],
            cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        assert isinstance(proc, manage_fork.ForkedProcess)
        deadline = time.monotonic() + 120
        while out.read_bytes() != b"started\n" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert out.read_bytes() == b"started\n" and proc.poll() is None
    finally:
        proc.kill()
        proc.wait(30)
