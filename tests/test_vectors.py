"""The vector-driven tests fail, never skip or check nothing, without third_party/openmq/vectors
(tests/vectors.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import vectors
from .vectors import MissingVector, missing_reason, vector_files

ROOT = Path(__file__).resolve().parent.parent


def test_the_vectors_are_here() -> None:
    assert missing_reason() is None
    files = vector_files("**/*.hex")
    assert len(files) > 100 and not any(isinstance(p, MissingVector) for p in files)


def test_missing_or_empty_directory_is_named(tmp_path: Path) -> None:
    assert "is not a directory" in (missing_reason(tmp_path / "absent") or "")
    (tmp_path / "README.md").write_text("no packets here")
    assert "holds no *.hex file" in (missing_reason(tmp_path) or "")


def test_a_glob_without_matches_gives_a_placeholder_that_fails_when_read() -> None:
    (placeholder,) = vector_files("no-such-capture-*.hex")
    assert isinstance(placeholder, MissingVector)
    with pytest.raises(pytest.fail.Exception, match="no vector matches no-such-capture"):
        placeholder.read_text()
    with pytest.raises(pytest.fail.Exception, match="no-such.hex is missing from"):
        vectors.vector("no-such.hex")


@pytest.mark.parametrize("state", ["missing", "empty"])
def test_vector_driven_tests_fail_without_vectors(tmp_path: Path, state: str) -> None:
    where = tmp_path / "vectors"
    if state == "empty":
        where.mkdir()
    env = dict(os.environ, IMQ_TEST_VECTORS=str(where))
    # One of each kind of vector-driven test (the rest of these files needs no vectors
    # and only costs time here).
    files = [
        "tests/test_protocol.py::test_every_vector_decodes",
        "tests/test_protocol.py::test_java_hello_fields",
        "tests/test_codec_errors.py::test_samples_decode",
        "tests/test_javaser.py::test_fuzz_mutated_bodies",
        "tests/test_javaser.py::test_every_truncation_is_rejected",
    ]
    # Without the plugins these tests do not use, the inner pytest starts in half the CPU.
    quiet = ["-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:anyio"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *files, "-q", *quiet, "-rfEs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    summary = out.strip().splitlines()[-1]
    assert "skipped" not in summary and "error" in summary, summary
    assert "the captured client packets are missing" in out
    # Each kind of vector-driven test is among the failures: a parametrized one (its
    # placeholder), a module marked NEEDS_VECTORS, and one that reads a single vector.
    assert "test_every_vector_decodes[<no vectors>]" in out
    assert "ERROR tests/test_codec_errors.py::" in out
    assert "tests/test_javaser.py::" in out
