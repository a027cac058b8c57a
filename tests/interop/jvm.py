"""Harness for the stock OpenMQ Java client (imq.jar): JMS programs compiled at test time.

The programs are ``tests/interop/java/*.java`` (default package), compiled together once
per test session against ``imq.jar`` and the Jakarta Messaging API. Each one takes the
broker's host and port-mapper port as its first two arguments, runs many checks and
prints one line per check (``ok NAME`` or ``fail NAME: why``; see ``Checks.java``), so one
JVM start covers many checks.

``--interop-broker=stock`` (or ``INTEROP_BROKER=stock``) runs the same programs against
the stock OpenMQ 6.9 broker (``third_party/openmq/realbroker``), so every expectation in them is
known to hold for OpenMQ itself. The tests fail (never skip) naming what is missing: a JDK
(``make install-dev`` installs one), the jars, or the stock broker.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from broker.launcher import start_broker, start_stock_broker
from broker.stock_paths import JAVA_CLIENT
from tests import jvmcds
from tests.jvmflags import JAVAC

from .conftest import ProbeResult

JAVA_SOURCES = Path(__file__).resolve().parent / "java"
JARS = [JAVA_CLIENT / "imq.jar", JAVA_CLIENT / "jakarta.jms-api-3.1.0.jar"]
ADMIN_JAR = JAVA_CLIENT / "imqadmin.jar"


class Broker(Protocol):
    """What a program needs of a broker: where its port mapper listens."""

    host: str
    portmapper_port: int


def missing_java() -> list[str]:
    """What compiling and running the Java programs needs and this machine lacks."""
    missing = []
    for tool in ("javac", "java"):
        if shutil.which(tool) is None:
            missing.append(
                f"{tool} (a JDK 17: apt-get install openjdk-17-jdk-headless; `make install-dev` does it)"
            )
    for jar in (*JARS, ADMIN_JAR):
        if not jar.is_file():
            missing.append(f"the stock OpenMQ Java client jar {jar}")
    return missing


def require_java() -> None:
    """Fail the test (never skip) naming what is missing."""
    missing = missing_java()
    if missing:
        pytest.fail(
            "the Java-client interoperability tests cannot run; missing: " + "; ".join(missing),
            pytrace=False,
        )


def classpath(*extra: Path | str) -> str:
    return os.pathsep.join(str(p) for p in (*JARS, *extra))


def compile_programs(out_dir: Path, sources: Path = JAVA_SOURCES) -> Path:
    """javac every program of ``sources`` into ``out_dir`` (one javac run for all)."""
    require_java()
    files = sorted(str(p) for p in sources.glob("*.java"))
    p = subprocess.run(
        [*JAVAC, "-encoding", "UTF-8", "-cp", classpath(), "-d", str(out_dir), *files],
        capture_output=True,
        text=True,
        check=False,
    )
    if p.returncode != 0:
        pytest.fail(
            f"compiling the Java programs against imq.jar failed:\n{p.stderr}", pytrace=False
        )
    return out_dir


def shared_programs() -> Path:
    """The programs compiled once a test run for every xdist worker: ``programs.jar`` in
    the run's shared directory (tests/jvmcds.py), its first user compiling it while the
    others wait (javac of them all: ~4 s of CPU), then making the programs' class-data
    archive (a jar, not a directory: a directory cannot be archived)."""
    jar = jvmcds.SHARE / "programs.jar"
    with open(jvmcds.SHARE / "programs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not jar.is_file():
            build = jvmcds.SHARE / "programs"
            shutil.rmtree(build, ignore_errors=True)
            build.mkdir()
            compile_programs(build)
            part = jar.with_suffix(".part")
            with zipfile.ZipFile(part, "w") as z:
                for f in sorted(build.rglob("*.class")):
                    z.write(f, f.relative_to(build).as_posix())
            os.replace(part, jar)
            shutil.rmtree(build, ignore_errors=True)
            _make_archive(JavaPrograms(jar))
    return jar


def _make_archive(programs: JavaPrograms) -> None:
    """The programs' archive, from a start of Smoke against a port where nothing listens:
    the client's classes up to its first connection attempt, and never a broker's state
    touched."""
    nowhere = Closed("127.0.0.1", 1)
    base = programs.command("Smoke", nowhere)
    java = base[: base.index("Smoke")]

    def dump(options: list[str]) -> list[str]:
        cmd = programs.command("Smoke", nowhere, jvm_args=tuple(options))
        subprocess.run(cmd, capture_output=True, timeout=120, check=False)
        return java

    jvmcds.make("client", dump)


@dataclass
class Closed:
    host: str
    portmapper_port: int


@dataclass
class JavaPrograms:
    """The compiled programs (their jar, or a directory); ``run`` starts one JVM for one
    program."""

    classes: Path

    def command(
        self,
        main: str,
        b: Broker,
        *args: str,
        jvm_args: tuple[str, ...] = (),
        extra_classpath: tuple[Path | str, ...] = (),
    ) -> list[str]:
        """The command line that runs ``main`` with the broker's host and port-mapper
        port, then ``args``."""
        return [
            "java",
            "-Xss512k",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            jvmcds.argfile("client"),
            *jvm_args,
            "-cp",
            classpath(self.classes, *extra_classpath),
            main,
            b.host,
            str(b.portmapper_port),
            *args,
        ]

    def run(
        self,
        main: str,
        b: Broker,
        *args: str,
        jvm_args: tuple[str, ...] = (),
        extra_classpath: tuple[Path | str, ...] = (),
        timeout: float = 240,
        env: dict[str, str] | None = None,
    ) -> ProbeResult:
        """Run ``main`` with the broker's host and port-mapper port, then ``args``."""
        cmd = self.command(main, b, *args, jvm_args=jvm_args, extra_classpath=extra_classpath)
        p = subprocess.run(
            cmd,
            capture_output=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **(env or {})},
        )
        return ProbeResult(
            p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        )


class Paused:
    """A program run (``JavaPrograms.command``) that stops at a line of its own and waits
    for one on its standard input before it goes on (a broker restart, a memory reading
    in between)."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.before: list[str] = []

    def until(self, prefix: str) -> bool:
        """Reads its lines to the first starting with ``prefix``: False when it ended
        first (a check failed)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.before.append(line.rstrip("\n"))
            if line.startswith(prefix):
                return True
        return False

    def finish(self, timeout: float = 300) -> ProbeResult:
        """Lets it go on and waits for its end."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        out, err = self.proc.communicate(timeout=timeout)
        return ProbeResult(self.proc.returncode, "\n".join([*self.before, out]), err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def broker_kind(config: pytest.Config) -> str:
    """``ours`` (default) or ``stock``: which broker the Java programs run against."""
    kind = (
        config.getoption("--interop-broker", default=None)
        or os.environ.get("INTEROP_BROKER")
        or "ours"
    )
    if kind not in ("ours", "stock"):
        raise pytest.UsageError(f"--interop-broker must be 'ours' or 'stock', not {kind!r}")
    return kind


def start_either(kind: str, tmp: Path, *props: str, **kw: Any) -> Any:
    """Our broker or the stock one, with the same ``-D`` properties.

    ``kw`` goes to our launcher only (the stock broker has no database); both have
    ``host``, ``portmapper_port`` and ``stop()``.
    """
    if kind == "stock":
        try:
            return start_stock_broker(tmp, *props)
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
    return start_broker(tmp, *props, **kw)
