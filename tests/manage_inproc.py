"""A ``manage.py`` command run inside the test process, returned as ``run_manage`` returns
it (tests/manage_fork.py): for the many calls of a network client (imqcmd) whose test is
about what it prints and its exit status, where a process of its own (a fork that loads
Django's settings, the apps and the command: about a second of CPU) adds nothing.

Only for commands that talk to a broker over the network and read no file, database or
environment of the broker's: the test process's settings are not the broker's.  Whatever a
command does at start-up or prints outside its own stdout and stderr is seen only by a
real process, so each test module that uses this keeps real runs (run_manage) too.
"""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import threading
from importlib import import_module

from django.core.management import get_commands

# sys.stdout and sys.stderr are swapped for the duration of a call: one call at a time.
_LOCK = threading.Lock()


def call_manage(args: list[str]) -> subprocess.CompletedProcess:
    """``manage.py *args`` in this process: its stdout, stderr and exit status (a
    ``SystemExit`` code, 0 when it returns)."""
    name = args[0]
    module = import_module(f"{get_commands()[name]}.management.commands.{name}")
    out, err = io.StringIO(), io.StringIO()
    # Commands set up loggers as a fresh process would (imqcmd quietens the client
    # library's): put them back so the next test in this process sees them as they were.
    loggers = [logging.getLogger(n) for n in ("openmq_client", "broker", "")]
    saved = [(lg, list(lg.handlers), lg.propagate, lg.level) for lg in loggers]
    with _LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            module.Command(stdout=out, stderr=err).run_from_argv(["manage.py", *args])
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:  # as the interpreter does with sys.exit("message")
                err.write(f"{exc.code}\n")
                code = 1
        finally:
            for lg, handlers, propagate, level in saved:
                lg.handlers[:] = handlers
                lg.propagate = propagate
                lg.setLevel(level)
    return subprocess.CompletedProcess(["manage.py", *args], code, out.getvalue(), err.getvalue())
