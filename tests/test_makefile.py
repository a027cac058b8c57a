"""The Makefile's Debian installs wait for a dpkg lock someone else holds (unattended
upgrades, a second ``make``) instead of failing at once: every apt-get it runs, as make
expands the recipes, carries ``-o DPkg::Lock::Timeout``."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_every_apt_get_waits_for_the_dpkg_lock(tmp_path: Path) -> None:
    # -n prints the recipes without running them; -B takes every target as out of date
    # and a throwaway VENV keeps make from reading the real one's state.
    done = subprocess.run(
        ["make", "-n", "-B", f"VENV={tmp_path / 'venv'}", "install", "install-dev"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    calls = re.findall(r"apt-get[^;&|}]*", done.stdout)
    assert len(calls) >= 10, done.stdout
    assert [c for c in calls if "-o DPkg::Lock::Timeout=600 " not in c] == []


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("target", ["lint", "test"])
def test_lint_and_test_run_mypy_after_ruff(tmp_path: Path, target: str) -> None:
    # Issue 24: the type check runs in `make lint` and in `make test`, which CI (.ci/run) runs;
    # with no arguments mypy checks the packages pyproject.toml's [tool.mypy] names.
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["make", "-n", "-B", f"VENV={venv}", target],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    ruff = lines.index(f"{venv}/bin/ruff check .")
    assert lines.index(f"{venv}/bin/mypy") > ruff, done.stdout
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert set(mypy["files"]) >= {f"broker/{p}" for p in ("protocol", "engine", "core", "cluster")}
    assert mypy["warn_unused_ignores"] is True and "ignore_errors" not in mypy
