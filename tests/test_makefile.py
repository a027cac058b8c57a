"""The Makefile's Debian installs wait for a dpkg lock someone else holds (unattended
upgrades, a second ``make``) instead of failing at once: every apt-get it runs, as make
expands the recipes, carries ``-o DPkg::Lock::Timeout``."""

from __future__ import annotations

import re
import shutil
import subprocess
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
