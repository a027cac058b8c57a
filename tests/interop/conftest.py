"""Harness for the stock OpenMQ C client (libmqcrt): the probe is built once per session.

The tests fail (never skip) when the compiler or the library is missing, saying what is
missing: `make test` installs gcc, libnspr4 and libnss3; the library itself is the one in
``third_party/openmq/realclient/c`` (or the directory ``OPENMQ_CCLIENT`` names).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import BrokerProcess
from broker.stock_paths import C_CLIENT as CCLIENT

HERE = Path(__file__).resolve().parent
C_SOURCES = HERE / "c"
ROOT = HERE.parent.parent
# libmqcrt.so there is a flattened symlink (a short text file), so the
# probe links the real file, libmqcrt.so.1, by path.
LIBRARY = CCLIENT / "lib" / "libmqcrt.so.1"
HEADER = CCLIENT / "include" / "mqcrt.h"


@dataclass
class ProbeResult:
    """One run of a probe: its exit status, lines and the checks it reported."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    @property
    def checks(self) -> dict[str, str]:
        """Check name -> "ok" or the failure reason."""
        out: dict[str, str] = {}
        for line in self.lines:
            if line.startswith("ok "):
                out[line[3:]] = "ok"
            elif line.startswith("fail "):
                name, _, why = line[5:].partition(": ")
                out[name] = why or "failed"
        return out

    def explain(self) -> str:
        return (
            f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr[-4000:]}"
        )

    def assert_ok(self, names: list[str]) -> None:
        """Exactly the checks ``names`` ran, each ``ok``, and the program exited 0."""
        assert self.checks == dict.fromkeys(names, "ok"), self.explain()
        assert self.returncode == 0, self.explain()


@dataclass
class CProbe:
    """A compiled C program linked against the stock library."""

    path: Path

    def run(
        self,
        b: BrokerProcess,
        *args: str,
        user: str = "guest",
        password: str = "guest",
        env: dict[str, str] | None = None,
    ) -> ProbeResult:
        """Run it against a broker's port mapper, as an application configured with host/port."""
        cmd = [str(self.path), b.host, str(b.portmapper_port), user, password, *args]
        # The library logs to stderr, kept for explain().
        p = subprocess.run(
            cmd, capture_output=True, timeout=180, check=False, env={**os.environ, **(env or {})}
        )
        return ProbeResult(
            p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        )


def missing_toolchain() -> list[str]:
    """What is needed to build and run the probes and is not on this machine."""
    missing = []
    if shutil.which("gcc") is None:
        missing.append("gcc (apt-get install gcc; `make install-dev` does it)")
    if not LIBRARY.is_file():
        missing.append(f"the OpenMQ C client library {LIBRARY}")
    if not HEADER.is_file():
        missing.append(f"the OpenMQ C client headers {HEADER.parent}")
    if LIBRARY.is_file() and shutil.which("ldd"):
        ldd = subprocess.run(["ldd", str(LIBRARY)], capture_output=True, text=True, check=False)
        for line in ldd.stdout.splitlines():
            if "not found" in line:
                lib = line.split()[0]
                missing.append(
                    f"{lib}, needed by libmqcrt (apt-get install libnspr4 libnss3; "
                    "`make install-dev` does it)"
                )
    return missing


def compile_probe(source: Path, out_dir: Path) -> CProbe:
    """Compile one tests/interop/c/*.c program against the stock library."""
    exe = out_dir / source.stem
    cmd = [
        "gcc",
        "-std=c99",
        "-O1",
        "-Wall",
        # The library's headers define static string constants a program need not use.
        "-Wno-unused-variable",
        "-o",
        str(exe),
        str(source),
        f"-I{HEADER.parent}",
        str(LIBRARY),
        f"-Wl,-rpath,{LIBRARY.parent}",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        pytest.fail(f"compiling {source.name} against the OpenMQ C client failed:\n{p.stderr}")
    return CProbe(exe)


@pytest.fixture(scope="session")
def c_build_dir() -> Iterator[Path]:
    missing = missing_toolchain()
    if missing:
        pytest.fail(
            "the C-client interoperability tests cannot run; missing: " + "; ".join(missing),
            pytrace=False,
        )
    d = Path(tempfile.mkdtemp(prefix="imq-cclient-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def c_probe(c_build_dir: Path) -> CProbe:
    """tests/interop/c/probe.c, compiled once per test session."""
    return compile_probe(C_SOURCES / "probe.c", c_build_dir)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The stock broker's class-data archive, made beside the first tests when this run
    starts stock brokers (tests/jvmcds.py)."""
    from tests import jvmcds

    from .jvm import broker_kind

    files = {item.nodeid.split("::", 1)[0] for item in session.items}
    stock = broker_kind(session.config) == "stock" and any("interop/" in f for f in files)
    jvmcds.train_in_background(files, stock)


@pytest.fixture(scope="session")
def java_programs() -> Any:
    """tests/interop/java/*.java compiled once per test run (for every xdist worker)
    against imq.jar."""
    from .jvm import JavaPrograms, require_java, shared_programs

    require_java()
    return JavaPrograms(shared_programs())


@pytest.fixture(scope="module")
def interop_broker(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One broker per test module: ours, or the stock one with --interop-broker=stock.

    A module asks for properties with ``pytestmark = pytest.mark.broker_props("a=b", ...)``.
    """
    from .jvm import broker_kind, start_either

    marker = request.node.get_closest_marker("broker_props")
    props = marker.args if marker else ()
    tmp = Path(tempfile.mkdtemp(prefix="imq-interop-"))
    b = start_either(broker_kind(request.config), tmp, *props)
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def broker_kind_name(request: pytest.FixtureRequest) -> str:
    """``ours`` or ``stock``, for the few expectations that differ deliberately."""
    from .jvm import broker_kind

    return broker_kind(request.config)
