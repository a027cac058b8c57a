"""The Makefile: its Debian installs wait for a dpkg lock someone else holds (unattended
upgrades, a second ``make``) instead of failing at once -- every apt-get it runs, as make
expands the recipes, carries ``-o DPkg::Lock::Timeout`` -- and ``make test-fast`` installs
the Python side of what ``make test`` installs (no PostgreSQL, slapd, Chromium or JDK),
then runs the tests marked ``fast`` and only those."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _dry_run(tmp_path: Path, *targets: str) -> str:
    """The recipes make would run for ``targets``, without running them: -n prints them,
    -B takes every target as out of date and a throwaway VENV keeps make from reading
    the real one's state."""
    assert shutil.which("make"), "make is not installed: apt-get install make"
    done = subprocess.run(
        ["make", "-n", "-B", f"VENV={tmp_path / 'venv'}", *targets],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_apt_get_waits_for_the_dpkg_lock(tmp_path: Path) -> None:
    out = _dry_run(tmp_path, "install", "install-dev")
    calls = re.findall(r"apt-get[^;&|}]*", out)
    assert len(calls) >= 10, out
    assert [c for c in calls if "-o DPkg::Lock::Timeout=600 " not in c] == []


@pytest.mark.parametrize("target", ["lint", "test"])
def test_lint_and_test_run_mypy_after_ruff(tmp_path: Path, target: str) -> None:
    # Issue 24: the type check runs in `make lint` and in `make test`, which CI (.ci/run) runs;
    # with no arguments mypy checks the packages pyproject.toml's [tool.mypy] names.
    venv = tmp_path / "venv"
    lines = _dry_run(tmp_path, target).splitlines()
    ruff = lines.index(f"{venv}/bin/ruff check .")
    assert lines.index(f"{venv}/bin/mypy") > ruff, lines
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert set(mypy["files"]) >= {f"broker/{p}" for p in ("protocol", "engine", "core", "cluster")}
    assert mypy["warn_unused_ignores"] is True and "ignore_errors" not in mypy


def test_test_fast_installs_only_python_and_runs_the_fast_marker(tmp_path: Path) -> None:
    fast = _dry_run(tmp_path, "test-fast").splitlines()
    full = _dry_run(tmp_path, "test").splitlines()
    pytest_line = [line for line in fast if " -m pytest " in line and "--collect-only" not in line]
    assert len(pytest_line) == 1, fast
    assert re.search(r" -m pytest -m fast( |$)", pytest_line[0]), pytest_line
    # The Python side of make test's installs (requirements-dev.lock, the checkout, its
    # bytecode), then ruff and mypy; none of the Debian packages the slower tiers start.
    setup = [line for line in fast if line not in pytest_line]
    assert setup and all(line in full for line in setup), (setup, full)
    assert any("requirements-dev.lock" in line for line in setup), fast
    assert not [line for line in setup if "apt-get" in line and "python3-venv" not in line], fast
    everything = "\n".join(full)
    for package in ("postgresql", "slapd", "chromium", "openjdk-17-jdk-headless"):
        assert f"install -y -q {package}" in everything
        assert f"install -y -q {package}" not in "\n".join(fast)


@pytest.mark.parametrize("target", ["test", "test-fast"])
def test_asserts_are_rewritten_once_before_the_run(tmp_path: Path, target: str) -> None:
    # With PYTHONDONTWRITEBYTECODE set (CI), every xdist worker would rewrite every test
    # module's asserts again; one collection with bytecode on writes pytest's cache first.
    lines = _dry_run(tmp_path, target).splitlines()
    warm = [i for i, line in enumerate(lines) if "--collect-only" in line]
    run = [i for i, line in enumerate(lines) if " -m pytest " in line and i not in warm]
    assert len(warm) == 1 and len(run) == 1 and warm[0] < run[0], lines
    assert lines[warm[0]].startswith("env -u PYTHONDONTWRITEBYTECODE "), lines[warm[0]]
