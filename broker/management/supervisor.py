"""``manage.py up``'s supervision of its children: starting each one (its output to
``--log-dir``/NAME.log or up's own), waiting for it to answer, watching them, restarting
a broker that dies (a back-off, at most ``--broker-restarts`` times within
``BROKER_RESTART_WINDOW`` seconds) and stopping them all, the last started first.

What the children are and how each is started is broker/management/commands/up.py's.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.launcher import portmapper_answers

ROOT = Path(__file__).resolve().parents[2]
GRACE = 10.0  # seconds a child gets between SIGTERM and SIGKILL
# A broker that dies is started again, at most this many times within the window (s).
BROKER_RESTARTS = 5
BROKER_RESTART_WINDOW = 600.0
BROKER_BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0)  # seconds before the 1st, 2nd, ... restart


class StartupFailed(Exception):
    """A child did not come up (the message says which and why)."""


class Stop(Exception):
    """Ctrl-C or SIGTERM arrived while starting."""


@dataclass
class Child:
    """A started child: its name, its process and where it serves (said to the user)."""

    name: str
    proc: subprocess.Popen
    where: str = ""


def _popen(name: str, args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    """Start a child in the project's directory, dying with this process."""
    try:
        return subprocess.Popen(args, cwd=ROOT, env=env, preexec_fn=_die_with_parent, **kwargs)
    except OSError as exc:
        raise StartupFailed(f"cannot start the {name}: {exc}") from exc


def _die_with_parent() -> None:
    """In the child, before exec: its own process group (Ctrl-C reaches only ``up``, which
    stops the children in order) and SIGTERM should ``up`` itself be killed (Linux)."""
    os.setpgid(0, 0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Supervisor:
    """The children of one ``up``: ``opts`` are its options (``startup_timeout``,
    ``broker_restarts``), ``stdout`` and ``stderr`` its output (Django's wrappers);
    ``signalled`` is set by its signal handler (Ctrl-C, SIGTERM)."""

    def __init__(self, opts: dict[str, Any], stdout: Any, stderr: Any) -> None:
        self.opts = opts
        self.stdout = stdout
        self.stderr = stderr
        self.children: list[Child] = []
        self.signalled: int | None = None
        # --log-dir: where each child's output goes (None: up's own output).
        self.log_dir: Path | None = None
        # How the broker was started (command, environment, host, port mapper port):
        # a restart after a crash starts it so again.
        self.broker_spawn: tuple[list[str], dict[str, str], str, int] | None = None

    def supervise(self) -> int:
        """Watch the children until a signal (0) or one dies for good (1); each is
        stopped before it returns."""
        restarts: list[float] = []  # when the broker was restarted (monotonic)
        while self.signalled is None:
            for child in self.children:
                status = child.proc.poll()
                if status is None:
                    continue
                if child.name == "broker" and status != 0:
                    if self._restart_broker(child, status, restarts):
                        break
                    if self.signalled is not None:
                        break
                    self.stop_all()
                    return 1
                self.stderr.write(
                    f"up: the {child.name} exited unexpectedly ({_status(status)}); "
                    "stopping the others"
                )
                self.stop_all()
                return 1
            else:
                time.sleep(0.2)
        name = signal.Signals(self.signalled).name
        self.say(
            f"up: {name}: stopping celery beat and worker, the UMS gateway, the portal, "
            "the broker and redis"
        )
        self.stop_all()
        self.say("up: stopped")
        return 0

    def _restart_broker(self, child: Child, status: int, restarts: list[float]) -> bool:
        """The broker died: start it again after a back-off, as long as it has not been
        restarted ``BROKER_RESTARTS`` times within ``BROKER_RESTART_WINDOW`` seconds.
        True once it serves again; False to give up (said why) or on Ctrl-C/SIGTERM."""
        while True:
            now = time.monotonic()
            restarts[:] = [t for t in restarts if now - t < BROKER_RESTART_WINDOW]
            limit = self.opts["broker_restarts"]
            if limit <= 0:
                self.stderr.write(
                    f"up: the broker exited unexpectedly ({_status(status)}); stopping the "
                    "others (--broker-restarts 0)"
                )
                return False
            if len(restarts) >= limit:
                self.stderr.write(
                    f"up: the broker exited unexpectedly ({_status(status)}) after "
                    f"{len(restarts)} restarts within {BROKER_RESTART_WINDOW:g} s; not "
                    "restarting it again, stopping the others (see the broker's log)"
                )
                return False
            delay = BROKER_BACKOFF[min(len(restarts), len(BROKER_BACKOFF) - 1)]
            self.stderr.write(
                f"up: the broker exited unexpectedly ({_status(status)}); restarting it in "
                f"{delay:g} s (restart {len(restarts) + 1} of at most {limit} "
                f"within {BROKER_RESTART_WINDOW:g} s); the portal, the UMS gateway and "
                "Celery keep running and answer 'broker unreachable' meanwhile"
            )
            self.stderr.flush()
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline:
                if self.signalled is not None:
                    return False
                time.sleep(0.1)
            restarts.append(time.monotonic())
            assert self.broker_spawn is not None  # (set when the broker was started)
            cmd, env, host, port = self.broker_spawn
            try:
                proc = self._popen_logged("broker", cmd, env)
            except StartupFailed as exc:
                why = exc.__cause__ or exc
                self.stderr.write(f"up: cannot restart the broker: {why}; stopping the others")
                return False
            child.proc = proc
            try:
                serves = functools.partial(portmapper_answers, host, port)
                self.wait(child, serves, f"serve port {port}")
            except Stop:
                return False
            except StartupFailed as exc:
                status = proc.poll()
                if status is None:  # did not come up in time: kill it and count a failure
                    self.stderr.write(f"up: {exc}; killing it")
                    _signal_group(proc, signal.SIGKILL)
                    status = proc.wait()
                continue
            self.say(f"up: broker  restarted (pid {proc.pid}); {child.where}")
            return True

    def stop_all(self) -> None:
        """Stop the children, the last started first: SIGTERM, wait, then SIGKILL."""
        for child in reversed(self.children):
            proc = child.proc
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
                try:
                    proc.wait(GRACE)
                except subprocess.TimeoutExpired:
                    self.stderr.write(f"up: the {child.name} did not stop in {GRACE:g} s; killed")
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait()

    def say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> Child:
        child = Child(name, self._popen_logged(name, args, env))
        self.children.append(child)
        return child

    def _popen_logged(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        """Start a child with no input; its output to ``--log-dir``/NAME.log (appended:
        a restarted broker goes on in the same file, and ``logrotate``'s copytruncate
        works) or, without --log-dir, to up's own output."""
        if self.log_dir is None:
            return _popen(name, args, env, stdin=subprocess.DEVNULL)
        path = self.log_dir / f"{name}.log"
        try:
            log = open(path, "ab")  # closed here: the child holds its own copy
        except OSError as exc:
            raise StartupFailed(f"cannot open the {name}'s log {path}: {exc}") from exc
        with log:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S %z")
            log.write(f"--- up: starting the {name} at {stamp}\n".encode())
            log.flush()
            return _popen(
                name, args, env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )

    def wait(self, child: Child, ready, what: str) -> None:
        deadline = time.monotonic() + self.opts["startup_timeout"]
        while not ready():
            if self.signalled is not None:
                raise Stop
            status = child.proc.poll()
            if status is not None:
                raise StartupFailed(f"the {child.name} exited while starting ({_status(status)})")
            if time.monotonic() > deadline:
                raise StartupFailed(
                    f"the {child.name} did not {what} within {self.opts['startup_timeout']:g} s"
                )
            time.sleep(0.1)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


__all__ = ["Child", "StartupFailed", "Stop", "Supervisor"]
