"""The command line of each of the system's processes, built in one place for everyone
who starts them: ``manage.py up`` (broker/management/commands/up.py), the image's entry
point (docker/entrypoint.py), the test broker launcher (broker/launcher.py) and the
tests' helpers (tests/portal_server.py, tests/ums_stack.py, tests/celery_procs.py).

Each function returns an argv list; the caller chooses the environment and the working
directory.  What callers vary is a parameter (listen address, port, log level, Celery
pool...); where the tests start a process differently from production, the parameter
says why.  Standard library only, no Django: the entry point imports this before any
settings exist, in a container whose interpreter is the image's ``python`` (every
command runs ``sys.executable`` unless told another ``python``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = [
    "ASGI_APPLICATION",
    "CELERY_APP",
    "LOOPBACK",
    "MANAGE_PY",
    "BROKER_SETTINGS",
    "PORTAL_SETTINGS",
    "broker_command",
    "celery_beat_command",
    "celery_command",
    "celery_worker_command",
    "java_problem",
    "manage_command",
    "portal_command",
    "settings_module",
    "ums_gateway_command",
]

ROOT = Path(__file__).resolve().parent.parent
MANAGE_PY = str(ROOT / "manage.py")
LOOPBACK = "127.0.0.1"
ASGI_APPLICATION = "portal.asgi:application"  # the portal and the UMS gateway serve it
CELERY_APP = "portal"  # portal/celery.py
# The broker process runs under its own Django settings; every other process under the
# portal's, which extend them.
BROKER_SETTINGS = "broker.settings"
PORTAL_SETTINGS = "portal.settings"


def settings_module(command: str | None) -> str:
    """The settings module a ``manage.py`` command runs under: the broker's for
    ``runbroker``, the portal's for every other.  A module of the operator's that the
    environment's ``DJANGO_SETTINGS_MODULE`` names wins; ours are chosen by the command,
    whichever of them the environment names (the test process runs under the portal's,
    as pytest-django sets it, and the brokers it starts inherit its environment)."""
    named = os.environ.get("DJANGO_SETTINGS_MODULE")
    if named and named not in (BROKER_SETTINGS, PORTAL_SETTINGS):
        return named
    return BROKER_SETTINGS if command == "runbroker" else PORTAL_SETTINGS


def manage_command(*args: str, python: str | None = None) -> list[str]:
    """``manage.py ARGS`` (the project's manage.py, by its full path: any directory)."""
    return [python or sys.executable, MANAGE_PY, *args]


def broker_command(*args: str, python: str | None = None) -> list[str]:
    """The broker: ``manage.py runbroker -tty ARGS`` (``-tty``: its log on stdout too, as
    every starter here wants it; ARGS are runbroker's options, e.g. ``-name``, ``-port``,
    ``-varhome``, ``-Dprop=value``)."""
    return manage_command("runbroker", "-tty", *args, python=python)


def portal_command(port: int | str, host: str = LOOPBACK, *extra: str) -> list[str]:
    """The portal: daphne serving the ASGI application on ``host:port`` (``extra``:
    more daphne options, before the application), through portal/serve.py, which adds
    the read timeout daphne lacks and serves HTTPS when its environment names key
    material (broker/security/https.py)."""
    return [
        sys.executable, "-m", "portal.serve",
        "-b", host,
        "-p", str(port),
        *extra,
        ASGI_APPLICATION,
    ]  # fmt: skip


def ums_gateway_command(
    port: int | str,
    host: str = LOOPBACK,
    *,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> list[str]:
    """The UMS gateway process: the portal's application under uvicorn (uvloop,
    httptools), whose /ums/simple and /ums/xml skip Django (portal/ums/asgi.py).
    ``certfile``/``keyfile``: serve HTTPS with them (the key's password, if any, in the
    environment: broker/security/https.py)."""
    tls = ["--ssl-certfile", certfile, "--ssl-keyfile", keyfile or certfile] if certfile else []
    return [
        sys.executable, "-m", "uvicorn",
        "--host", host,
        "--port", str(port),
        "--loop", "uvloop",
        "--http", "httptools",
        # Lifespan: on shutdown the gateway closes its sids (transactions roll back).
        "--lifespan", "on",
        "--no-access-log",
        # Waiting receives get 5 s to be answered, then the process stops regardless.
        "--timeout-graceful-shutdown", "5",
        *tls,
        ASGI_APPLICATION,
    ]  # fmt: skip


def celery_command(*args: str) -> list[str]:
    """``celery -A portal ARGS`` (a worker, beat, or a control command such as
    ``inspect ping``)."""
    return [sys.executable, "-m", "celery", "-A", CELERY_APP, *args]


def celery_worker_command(
    hostname: str,
    *extra: str,
    loglevel: str = "INFO",
    concurrency: int | str | None = 2,
    pool: str | None = None,
    pidfile: str | None = None,
) -> list[str]:
    """A Celery worker named ``hostname`` (``name@host``).

    Production (``up``, the image) runs the default prefork pool with ``concurrency``
    processes.  The tests give ``pool="solo"`` and ``concurrency=None``: one process, so
    a test's SIGKILL leaves no orphaned pool children and a loaded test machine runs one
    interpreter per worker; and a hostname of their own, so workers of tests running at
    the same time on one Redis do not answer each other's control commands."""
    args = ["worker", "--loglevel", loglevel]
    if concurrency is not None:
        args += ["--concurrency", str(concurrency)]
    if pool is not None:
        args += ["--pool", pool]
    args += ["--hostname", hostname]
    if pidfile is not None:
        args += ["--pidfile", pidfile]
    return celery_command(*args, *extra)


def celery_beat_command(
    *extra: str, loglevel: str = "INFO", pidfile: str | None = None
) -> list[str]:
    """Celery beat (its schedules from the database: portal/celery.py).  ``pidfile``:
    where it writes its pid (``up`` waits for it, the image's health check reads it);
    None writes none (the tests wait for beat's output instead)."""
    args = ["beat", "--loglevel", loglevel]
    if pidfile is not None:
        args += ["--pidfile", pidfile]
    return celery_command(*args, *extra)


def java_problem() -> str | None:
    """Why Spark cannot start its JVM here (None: a Java runtime is found), in words an
    operator acts on."""
    home = os.environ.get("JAVA_HOME")
    if home:
        if (Path(home) / "bin" / "java").exists():
            return None
        return f"JAVA_HOME={home} has no bin/java"
    if shutil.which("java") is None:
        return (
            "Spark needs a Java runtime and none is on the PATH: apt-get install "
            "openjdk-17-jre-headless (make install does it), or set JAVA_HOME"
        )
    return None
