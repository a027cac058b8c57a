"""tests/jvmcds.py: a JVM is given a class-data archive only once it is whole and checked,
and making one is tried once a run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import jvmcds


@pytest.fixture
def share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run's shared directory of the test's own."""
    monkeypatch.setattr(jvmcds, "SHARE", tmp_path)
    monkeypatch.setattr(jvmcds, "ENABLED", True)
    (tmp_path / "k.args").touch()
    return tmp_path


def java_version(share: Path) -> subprocess.CompletedProcess:
    """``java @k.args -version`` with sharing required: exit 1 unless the archive maps."""
    cmd = ["java", "-Xshare:on", jvmcds.argfile("k"), "-version"]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_an_archive_is_given_once_checked_and_made_once(share: Path) -> None:
    dumps = []

    def dump(options: list[str]) -> list[str]:
        dumps.append(options)
        subprocess.run(["java", *options, "-version"], capture_output=True, check=True)
        return ["java"]

    assert java_version(share).returncode == 0  # the argument file is there, empty
    assert not jvmcds.ready("k")
    assert jvmcds.make("k", dump)
    assert jvmcds.make("k", dump)  # made already: not again
    assert len(dumps) == 1
    assert jvmcds.ready("k")
    assert f"-XX:SharedArchiveFile={share / 'k.jsa'}" in (share / "k.args").read_text()
    run = java_version(share)
    assert run.returncode == 0 and "sharing" in run.stderr, run.stderr
    assert sorted(p.name for p in share.iterdir()) == ["k.args", "k.jsa", "k.tried"]


@pytest.mark.parametrize("written", [b"", b"not an archive" * 1000, None])
def test_a_partial_or_missing_archive_is_never_given(share: Path, written: bytes | None) -> None:
    """A JVM given a truncated archive crashes; one given none that exists shares nothing."""

    def dump(options: list[str]) -> list[str]:
        part = Path(options[-1].split("=", 1)[1])
        if written is not None:
            part.write_bytes(written)
        return ["java"]

    assert not jvmcds.make("k", dump)
    assert not jvmcds.ready("k")
    assert not jvmcds.make("k", dump)  # tried once a run
    assert sorted(p.name for p in share.iterdir()) == ["k.args", "k.tried"]
    run = java_version(share)
    assert run.returncode == 0 and "sharing" in run.stderr, run.stderr
