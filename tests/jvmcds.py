"""Class-data sharing for the JVMs the tests start: one JDK 17 dynamic AppCDS archive per
kind of JVM (the stock client's programs, the stock imqcmd, the stock broker), made once a
test run and used by every later start of that kind, in any xdist worker.

A JVM that lives seconds spends a good part of its CPU loading and verifying classes that
are the same in every start (the JDK's own archive holds only the JDK's commonest).  An
archive of what one start loaded maps them instead: a stock broker's start and stop
1.57 -> 1.13 s of CPU and ready in half the time; a client program or an imqcmd command
~0.1 s of its 0.6-1.8 s.

The files live in one directory for the run (``IMQ_TEST_JVM_SHARE``: the first process of
the run that imports this module makes it and removes it at its exit; the xdist workers and
everything else the tests start inherit the variable).  Kind ``K``'s JVMs take
``@DIR/K.args`` (a java argument file), empty until the archive is made and has been
checked, then naming it: a JVM given an archive that does not exist runs with no sharing
at all, not even the JDK's, and one given a truncated archive crashes, so no JVM is ever
given one before it is whole.  Making it is tried once a run (whoever first creates
``K.tried``); when it fails, every JVM of the kind runs as before: an archive is never the
reason a test fails.  ``IMQ_TEST_JVM_CDS=0`` leaves every argument file empty.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

ENV_DIR = "IMQ_TEST_JVM_SHARE"
ENABLED = os.environ.get("IMQ_TEST_JVM_CDS", "1") != "0"
# Every kind's argument file exists from the start (java stops on a missing one).
KINDS = ("client", "imqcmd", "broker")
# Messages about sharing (an archive the JVM cannot use, a class it skips while dumping)
# would land in a program's output, which the tests parse.
QUIET = "-Xlog:cds*=off"


def _share_dir() -> Path:
    named = os.environ.get(ENV_DIR)
    if named and Path(named).is_dir():
        return Path(named)
    made = Path(tempfile.mkdtemp(prefix="imq-jvm-share-"))
    os.environ[ENV_DIR] = str(made)
    atexit.register(shutil.rmtree, made, True)
    return made


SHARE = _share_dir()
for _kind in KINDS:
    (SHARE / f"{_kind}.args").touch()


def argfile(kind: str) -> str:
    """``@FILE``: the java argument that gives a JVM of ``kind`` its archive once it is
    made (nothing before)."""
    return f"@{SHARE / f'{kind}.args'}"


def ready(kind: str) -> bool:
    return (SHARE / f"{kind}.args").stat().st_size > 0


def make(kind: str, dump: Callable[[list[str]], Sequence[str] | None]) -> bool:
    """Makes ``kind``'s archive unless someone in this run has tried already; True when it
    is there.

    ``dump(options)`` runs one JVM of the kind with ``options`` added before its main class
    and returns when that JVM has ended (the archive is written as it exits): its command
    line up to the main class (java, its options, ``-cp`` with the jars first: a later
    start may add to the class path, not change it), None when it could not start one.
    """
    if not ENABLED:
        return False
    try:
        os.close(os.open(SHARE / f"{kind}.tried", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return ready(kind)
    part = SHARE / f"{kind}.{os.getpid()}.part"
    final = SHARE / f"{kind}.jsa"
    try:
        java = dump([QUIET, f"-XX:ArchiveClassesAtExit={part}"])
        if java is None:
            return False
        # -Xshare:on: exit 1 unless the archive maps with this class path.
        java = [a for a in java if not a.startswith(("@", "-Xlog:cds", "-XX:ArchiveClasses"))]
        check = [*java, QUIET, "-Xshare:on", f"-XX:SharedArchiveFile={part}", "-version"]
        if not part.is_file() or subprocess.run(check, capture_output=True, timeout=60).returncode:
            return False
        os.replace(part, final)
        args = SHARE / f"{kind}.args"
        tmp = args.with_suffix(f".{os.getpid()}")
        tmp.write_text(f"{QUIET} -XX:SharedArchiveFile={final}\n")
        os.replace(tmp, args)
        return True
    except (OSError, subprocess.SubprocessError, RuntimeError):
        # RuntimeError: a stock broker that did not start (broker.launcher)
        return False
    finally:
        part.unlink(missing_ok=True)


STOCK_BROKER_MAIN = "com.sun.messaging.jmq.jmsserver.Broker"


def _dump_stock_broker(options: list[str]) -> list[str] | None:
    """A stock broker started with ``options`` and stopped (SIGTERM) once ready; its java
    command line up to the main class."""
    from broker.launcher import start_stock_broker

    from .jvmflags import STOCK_BROKER_JVM

    os.environ["IMQ_JVM_ARGS"] = " ".join([STOCK_BROKER_JVM, *options])
    with tempfile.TemporaryDirectory(prefix="imq-cds-broker-") as tmp:
        b = start_stock_broker(Path(tmp))
        argv = Path(f"/proc/{b.proc.pid}/cmdline").read_bytes().decode().split("\0")
        b.stop()
    return argv[: argv.index(STOCK_BROKER_MAIN)] if STOCK_BROKER_MAIN in argv else None


def train_in_background(test_files: Iterable[str], stock: bool) -> None:
    """The stock broker's archive made beside the first tests when this run starts stock
    brokers (several stock-broker test files, or ``--interop-broker=stock``): a start and
    a stop of one, ~2.9 s of CPU, once a run (the first worker to get here), in a process
    of its own (killed if it outlives this one)."""
    files = {f for f in test_files if Path(f).name.startswith("test_stock_")}
    if not ENABLED or not (stock or len(files) >= 2):
        return
    try:
        os.close(os.open(SHARE / "broker.started", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return
    root = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.jvmcds", "broker"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def stop() -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()

    atexit.register(stop)


if __name__ == "__main__":
    if sys.argv[1:] == ["broker"]:
        make("broker", _dump_stock_broker)
