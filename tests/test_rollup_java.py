"""The rollup's Java runtime check (broker/commandlines.py, asked by portal/pipeline/rollup.py and manage.py up): a machine without one gets
a message that says what to install, not PySpark's "Java gateway process exited"."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from broker.commandlines import java_problem

pytestmark = pytest.mark.fast


def test_no_java_on_the_path_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no java on it
    problem = java_problem()
    assert problem is not None and "openjdk-17-jre-headless" in problem


def test_a_java_home_without_java(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert java_problem() == f"JAVA_HOME={tmp_path} has no bin/java"


def test_this_machines_java_is_found(monkeypatch) -> None:
    java = shutil.which("java")
    assert java is not None, "a JDK is installed for the tests (make install-dev)"
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(os.path.realpath(java)))
    assert java_problem() is None
