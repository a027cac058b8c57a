"""``python manage.py ARGS`` as its own process, forked from one that has the libraries
already imported.

A test that runs a command-line tool (imqcmd, imqdbmgr, imqusermgr, ...) the way an
administrator does pays a fresh interpreter's import of Django, Celery, kombu and DRF each
time: over a second of CPU a call, and the suite makes hundreds.  ``run_manage`` gives the
same thing -- a separate process in its own session, with the test's environment,
working directory, stdin and captured stdout/stderr, its exit status -- forked from a
server (``python -m tests.manage_fork SOCKET``, one per test process) that imported those
libraries and nothing that reads the settings or the environment.  The child sets the
environment and runs ``manage.py`` from the start: Django's settings, the apps and the
command are loaded there as in a fresh process.  Where the server cannot stand in
(another interpreter, other ``PYTHON*`` variables), it is a plain subprocess.
"""

from __future__ import annotations

import atexit
import gc
import io
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Imported by the server: the libraries every manage.py command loads, none of which
# reads django.conf.settings or the environment when imported (the server checks).
PRELOAD = (
    "django.core.management",
    "django.db.models",
    "django.http",
    "django.urls",
    "django.contrib.auth.hashers",
    "celery",
    "celery.app.base",
    "celery.schedules",
    "kombu",
    "kombu.serialization",
    "amqp",
    "billiard",
    "yaml",
    "sqlparse",
    "rest_framework",
    "django_filters",
    "dateutil.parser",
    "cron_descriptor",
    "asyncio",
    "email.message",
    "sqlite3",
    # Django's logging set-up (its default handlers import the debug views' templates)
    # and the SQLite backend, which every command loads once the settings exist.
    "django.views.debug",
    "django.db.backends.sqlite3.base",
    # The broker's own code (runbroker imports it once its settings exist, but none of it
    # reads the settings or the environment when imported: the server checks that no
    # module of ENV_MODULES came with it) and the libraries it starts with: the suite
    # starts hundreds of brokers, each then ready after half the CPU.
    "broker.server.broker",
    "broker.management.commands.runbroker",
    # Imported by the brokers that serve STOMP, WebSocket or the HTTP tunnel.
    "broker.server.stomp",
    "broker.server.websocket",
    "broker.server.tunnel",
    "uvloop",
    "pyarrow.parquet",
    # imqcmd's, less what needs the models.
    "broker.admintools.broker_handle",
    "broker.admintools.imqcmd.grammar",
    "broker.admintools.imqcmd.session",
    "broker.admintools.imqcmd.output",
    "broker.admintools.actions.broker_info",
    "broker.admintools.actions.cluster",
    "broker.admintools.actions.metrics",
    "broker.management.commands.imqtxn",
    "broker.management.commands.imqdbmgr",
)

# Run as `python -m MODULE ...` and forked too: the portal's server (daphne under
# portal/serve.py, started by tests/portal_server.py), which imports Django and DRF as
# a manage.py command does (twisted and daphne it imports in the child), the UMS gateway
# under uvicorn (tests/ums_stack.py) and Celery's worker and beat (tests/celery_procs.py).
FORKED_MODULES = ("portal.serve", "uvicorn", "celery")

# Start-up variables a forked child applies itself (_child), so a command given them is
# forked too (the portal's daphne log is written unbuffered).
CHILD_SETS = ("PYTHONUNBUFFERED",)

# Read the environment when imported: a module the server imported would keep the
# server's values in every command it forks.
ENV_MODULES = ("broker.settings", "portal.settings", "broker.stock_paths")

_FRAME = struct.Struct("!I")


def _send_json(sock: socket.socket, obj: object, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    msg = _FRAME.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [msg], fds)
    else:
        sock.sendall(msg)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("manage_fork server closed the connection")
        buf += chunk
    return buf


def _recv_json(sock: socket.socket) -> object:
    (n,) = _FRAME.unpack(_recv_exact(sock, _FRAME.size))
    return json.loads(_recv_exact(sock, n))


# -- the server ------------------------------------------------------------------------------


def _child(req: dict, fds: list[int]) -> None:
    """In the forked grandchild: become the command's process, run manage.py, exit."""
    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    if os.environ.get("PYTHONUNBUFFERED"):  # as `python -u`: each write reaches the file
        for name, fd in (("stdout", 1), ("stderr", 2)):
            stream = getattr(sys, name)
            raw = io.FileIO(fd, "w", closefd=False)
            wrapper = io.TextIOWrapper(
                raw, encoding=stream.encoding, errors=stream.errors, write_through=True
            )
            setattr(sys, name, wrapper)
    sys.argv = list(req["argv"])
    # What a fresh `python manage.py ...` has (runbroker's restart execs it again).
    sys.orig_argv = [sys.executable, *sys.argv]
    code = 0
    try:
        import runpy

        if sys.argv[0] == "-m":  # `python -m MODULE ARGS` (the portal: FORKED_MODULES)
            sys.argv = sys.argv[1:]
            runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as the interpreter reports an uncaught one
        import traceback

        traceback.print_exc()
        code = 1
    try:
        # The interpreter's own exit, as a fresh process has it: wait for the threads
        # that are not daemons (a store's writer), then the atexit functions.
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _handle(conn: socket.socket) -> None:
    """In a forked child of the server: fork the command, report its pid, then its status."""
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    (n,) = _FRAME.unpack(msg[: _FRAME.size])
    body = msg[_FRAME.size :]
    while len(body) < n:
        body += _recv_exact(conn, n - len(body))
    req = json.loads(body)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(req, fds)
    for fd in fds:
        os.close(fd)
    _send_json(conn, {"pid": pid})
    _, status = os.waitpid(pid, 0)
    _send_json(conn, {"returncode": os.waitstatus_to_exitcode(status)})


def serve(path: str) -> None:
    """Import PRELOAD, then fork a handler per connection on the Unix socket ``path``."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from django.conf import settings

    if settings.configured:
        raise SystemExit("a preloaded module configured Django's settings")
    if loaded := [name for name in ENV_MODULES if name in sys.modules]:
        raise SystemExit(f"a preloaded module imported {', '.join(loaded)}")
    # What was imported lives as long as every forked command: out of the collector's
    # full collections (a broker's start makes one, broker/server/looplag.py), which
    # would walk it in each child and copy the pages they touch.
    gc.collect()
    gc.freeze()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    srv.settimeout(1)
    print("ready", flush=True)
    parent = os.getppid()
    while os.getppid() == parent:  # the test process gone (killed): no server left behind
        # Handlers are waited for (not left to SIGCHLD=SIG_IGN) so that the commands'
        # CPU time adds up in this process and, once it is stopped, in the test process.
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            continue
        conn.setblocking(True)
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            srv.close()
            try:
                _handle(conn)
            finally:
                os._exit(0)
        conn.close()


# -- the client ------------------------------------------------------------------------------

_server: tuple[subprocess.Popen, str] | None = None
_lock = threading.Lock()


def _stop_server() -> None:
    global _server
    if _server is not None:
        proc, path = _server
        proc.terminate()
        proc.wait(10)
        Path(path).unlink(missing_ok=True)
        Path(path).parent.rmdir()
        _server = None


def _server_path() -> str:
    """The running server's socket (started on first use)."""
    global _server
    with _lock:
        if _server is not None and _server[0].poll() is None:
            return _server[1]
        where = tempfile.mkdtemp(prefix="imq-manage-fork-")
        path = os.path.join(where, "sock")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.manage_fork", path],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.kill()
            proc.wait(10)
            raise RuntimeError(f"manage_fork server did not start: {line}{proc.stdout.read()}")
        if _server is None:
            atexit.register(_stop_server)
        _server = (proc, path)
        return path


def _same_interpreter(env: dict[str, str]) -> bool:
    """Whether a fork of the server behaves as ``sys.executable`` started with ``env``:
    the variables the interpreter reads at start-up are the server's."""
    mine = {k: v for k, v in os.environ.items() if k.startswith("PYTHON") and k not in CHILD_SETS}
    theirs = {k: v for k, v in env.items() if k.startswith("PYTHON") and k not in CHILD_SETS}
    return mine == theirs


def run_manage(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | str = ROOT,
    input: str | None = None,
    timeout: float | None = None,
    python: str | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess:
    """``python manage.py *args`` in its own session, as ``subprocess.run`` with
    ``capture_output=True, text=True`` returns it (``check``: CalledProcessError on a
    non-zero exit)."""
    done = _run(args, env, cwd, input, timeout, python)
    if check:
        done.check_returncode()
    return done


def _run(
    args: list[str],
    env: dict[str, str] | None,
    cwd: Path | str,
    input: str | None,
    timeout: float | None,
    python: str | None,
) -> subprocess.CompletedProcess:
    env = dict(os.environ if env is None else env)
    argv = ["manage.py", *args]
    if (python or sys.executable) != sys.executable or not _same_interpreter(env):
        return subprocess.run(
            [python or sys.executable, *argv],
            cwd=cwd,
            env=env,
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    with (
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as stdout,
        tempfile.TemporaryFile() as stderr,
    ):
        stdin.write((input or "").encode())
        stdin.flush()
        stdin.seek(0)
        sock, pid = _start(argv, env, cwd, [stdin.fileno(), stdout.fileno(), stderr.fileno()])
        try:
            sock.settimeout(timeout)
            try:
                code = _recv_json(sock)["returncode"]  # type: ignore[index]
            except TimeoutError:
                os.killpg(pid, signal.SIGKILL)
                sock.settimeout(30)
                _recv_json(sock)
                stdout.seek(0)
                stderr.seek(0)
                raise subprocess.TimeoutExpired(
                    argv, timeout or 0, stdout.read(), stderr.read()
                ) from None
        finally:
            sock.close()
        stdout.seek(0)
        stderr.seek(0)
        return subprocess.CompletedProcess(argv, code, _text(stdout.read()), _text(stderr.read()))


class ForkedProcess:
    """What a ``subprocess.Popen`` of ``manage.py`` offers the launcher and the tests
    (pid, poll, wait, send_signal, terminate, kill, returncode) for a command started
    through the server; its exit status comes over the socket."""

    def __init__(self, sock: socket.socket, pid: int, args: list[str]) -> None:
        self._sock = sock
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def _collect(self, timeout: float | None) -> bool:
        if self.returncode is not None:
            return True
        ready, _, _ = select.select([self._sock], [], [], timeout)
        if not ready:
            return False
        try:
            self.returncode = _recv_json(self._sock)["returncode"]  # type: ignore[index]
        except EOFError:  # the handler is gone (the server was stopped): it was killed
            self.returncode = -signal.SIGKILL
        self._sock.close()
        return True

    def poll(self) -> int | None:
        self._collect(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._collect(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _start(
    argv: list[str], env: dict[str, str], cwd: Path | str, fds: list[int]
) -> tuple[socket.socket, int]:
    """Fork ``argv`` (manage.py and its arguments) from the server with ``fds`` as its
    stdin, stdout and stderr: the connection its status will come on, and its pid."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(_server_path())
    _send_json(sock, {"argv": argv, "env": env, "cwd": str(cwd)}, fds)
    return sock, _recv_json(sock)["pid"]  # type: ignore[index]


def popen(
    args: list[str],
    *,
    cwd: Path | str,
    env: dict[str, str],
    stdout: Any,
    stderr: Any,
) -> subprocess.Popen | ForkedProcess:
    """``subprocess.Popen(args, ...)`` for a long-running ``python manage.py ...`` (a
    broker, tests/conftest.py hands it to broker/launcher.py): forked from the server
    when ``args`` is this interpreter running the project's manage.py, else Popen.
    ``stdout`` and ``stderr`` are open files (``stderr`` may be subprocess.STDOUT)."""
    manage = {str(ROOT / "manage.py"), "manage.py"}
    module = len(args) > 2 and args[1] == "-m" and args[2] in FORKED_MODULES
    if (
        len(args) < 2
        or args[0] != sys.executable
        or not (args[1] in manage or module)
        or Path(cwd).resolve() != ROOT
        or not _same_interpreter(env)
    ):
        return subprocess.Popen(args, cwd=cwd, env=env, stdout=stdout, stderr=stderr)
    out = stdout.fileno()
    err = out if stderr == subprocess.STDOUT else stderr.fileno()
    argv = args[1:] if module else ["manage.py", *args[2:]]
    with open(os.devnull, "rb") as stdin:
        sock, pid = _start(argv, env, cwd, [stdin.fileno(), out, err])
    return ForkedProcess(sock, pid, args)


def _text(data: bytes) -> str:
    """As ``text=True`` reads a pipe: decoded, universal newlines."""
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    serve(sys.argv[1])
