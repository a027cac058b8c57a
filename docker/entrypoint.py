"""The image's entry point: one image, one process per container.

    entrypoint.py broker [runbroker options]   manage.py runbroker (log on stdout too)
    entrypoint.py portal                       daphne serving portal.asgi on 0.0.0.0
    entrypoint.py ums                          the UMS HTTP gateway (uvicorn, as manage.py up)
    entrypoint.py worker | beat                Celery's worker / beat (``celery -A portal``)
    entrypoint.py migrate                      migrate the database; the first time, admin's
                                               password from IMQ_INITIAL_ADMIN_PASSWORD; the
                                               portal's broker account from its secret (a
                                               one-shot before the rest)
    entrypoint.py spark-master | spark-worker  Spark's standalone master / worker, from the
                                               Spark that pyspark ships (same version as the
                                               rollup job's driver)
    entrypoint.py manage ARGS...               any manage.py command (imqcmd, imqusermgr, ...)
    entrypoint.py health WHAT                  exit 0 when WHAT (one of the above) serves
    entrypoint.py COMMAND ARGS...              anything else is executed as given

HTTPS: with ``PORTAL_HTTPS_CERT`` and ``PORTAL_HTTPS_KEY`` (paths, e.g. Docker secrets:
docker/https.yaml) the portal and the UMS gateway serve HTTPS, and their health checks
ask over HTTPS; an encrypted key's password is ``PORTAL_HTTPS_KEY_PASSWORD`` (or its
``_FILE``).  Bad key material stops the container with one line (exit 2).

Secrets: for each of SECRET_VARIABLES, ``NAME_FILE`` names a file (a Docker secret) whose
content becomes ``NAME``.  ``DATABASE_PASSWORD`` is put into ``DATABASE_URL``, so the URL
itself can sit in the compose file without its password.  ``IMQ_PORTAL_SECRET_FILE`` and
``IMQ_ADMIN_PASSWORD_FILE`` stay files: the portal reads them itself, again when they
change (broker/admintools/credentials.py).

The process is exec'd, not started as a child: it gets the container's signals itself.
"""

from __future__ import annotations

import os
import shlex
import socket
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
SECRET_VARIABLES = (
    "DJANGO_SECRET_KEY",
    "DATABASE_URL",
    "DATABASE_PASSWORD",
    "REDIS_URL",
    "IMQ_INITIAL_ADMIN_PASSWORD",
    "METRICS_TOKEN",
    "PORTAL_HTTPS_KEY_PASSWORD",
)
SERVICES = ("broker", "portal", "ums", "worker", "beat", "migrate", "spark-master", "spark-worker")
BEAT_PIDFILE = "/tmp/imq-celery-beat.pid"  # the container's own /tmp


class EntryError(Exception):
    """A configuration the entry point cannot start from (one line on stderr, exit 2)."""


def read_secrets(env: dict[str, str]) -> dict[str, str]:
    """``env`` with every ``NAME_FILE`` of SECRET_VARIABLES read into ``NAME`` and the
    database password put into the database URL."""
    env = dict(env)
    for name in SECRET_VARIABLES:
        path = env.pop(f"{name}_FILE", "")
        if not path:
            continue
        if env.get(name):
            raise EntryError(f"both {name} and {name}_FILE are set: give one")
        try:
            env[name] = Path(path).read_text().rstrip("\r\n")
        except OSError as exc:
            raise EntryError(f"{name}_FILE: cannot read {path}: {exc.strerror}") from None
    password = env.pop("DATABASE_PASSWORD", "")
    if password:
        env["DATABASE_URL"] = with_password(env.get("DATABASE_URL", ""), password)
    return env


def with_password(url: str, password: str) -> str:
    """``url`` (postgres://user@host/db) with ``password`` in it, quoted for a URL."""
    parts = urlsplit(url)
    if not parts.hostname or not parts.username:
        raise EntryError("DATABASE_PASSWORD needs a DATABASE_URL with a user and a host")
    if parts.password:
        raise EntryError("DATABASE_URL already holds a password; DATABASE_PASSWORD too")
    host = parts.netloc.rsplit("@", 1)[1]
    netloc = f"{parts.username}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def spark_home() -> str:
    """The Spark distribution inside the pyspark package (its bin/ and jars/)."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent)


def _project_importable() -> None:
    """Run as a script, Python puts docker/ first on the path, not the project."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def command(service: str, args: list[str], env: dict[str, str]) -> list[str]:
    """The command line a service runs (also what the tests run outside containers); the
    project's processes as broker/commandlines.py builds them for every starter."""
    _project_importable()
    from broker import commandlines as cl

    if service == "broker":
        opts: list[str] = []
        if env.get("IMQ_CLUSTER_BROKERLIST"):
            opts.append(f"-Dimq.cluster.brokerlist={env['IMQ_CLUSTER_BROKERLIST']}")
        if env.get("IMQ_CLUSTER_HOSTNAME"):
            opts.append(f"-Dimq.cluster.hostname={env['IMQ_CLUSTER_HOSTNAME']}")
        if env.get("IMQ_SHIPPED_LOOPBACK_ONLY"):
            loopback_only = env["IMQ_SHIPPED_LOOPBACK_ONLY"]
            opts.append(f"-Dimq.user.shipped_passwords.loopback_only={loopback_only}")
        opts += shlex.split(env.get("IMQ_BROKER_OPTS", ""))
        return cl.broker_command(*opts, *args)
    if service == "portal":
        bind = env.get("PORTAL_BIND") or "0.0.0.0"  # inside the container
        port = env.get("PORTAL_PORT") or "8000"
        return cl.portal_command(port, bind, *args)
    if service == "ums":
        bind = env.get("UMS_BIND") or "0.0.0.0"
        cert = env.get("PORTAL_HTTPS_CERT") or None
        cmd = cl.ums_gateway_command(
            int(env.get("UMS_PORT") or 8001),
            bind,
            certfile=cert,
            keyfile=(env.get("PORTAL_HTTPS_KEY") or cert) if cert else None,
        )
        return [*cmd, *args]
    if service == "worker":
        return cl.celery_worker_command(
            worker_name(env),
            *args,
            loglevel=env.get("CELERY_LOGLEVEL") or "INFO",
            concurrency=env.get("CELERY_CONCURRENCY") or "2",
        )
    if service == "beat":
        return cl.celery_beat_command(
            *args,
            loglevel=env.get("CELERY_LOGLEVEL") or "INFO",
            pidfile=env.get("CELERY_BEAT_PIDFILE") or BEAT_PIDFILE,
        )
    if service == "migrate":
        return [sys.executable, str(Path(__file__).resolve()), "_migrate", *args]
    if service == "spark-master":
        return [
            f"{spark_home()}/bin/spark-class", "org.apache.spark.deploy.master.Master",
            "--host", env.get("SPARK_MASTER_HOST") or "0.0.0.0",
            "--port", env.get("SPARK_MASTER_PORT") or "7077",
            "--webui-port", env.get("SPARK_MASTER_WEBUI_PORT") or "8080",
            *args,
        ]  # fmt: skip
    if service == "spark-worker":
        master = env.get("SPARK_MASTER") or ""
        if not master.startswith("spark://"):
            raise EntryError(f"spark-worker needs SPARK_MASTER=spark://host:port, not {master!r}")
        return [
            f"{spark_home()}/bin/spark-class", "org.apache.spark.deploy.worker.Worker",
            "--webui-port", env.get("SPARK_WORKER_WEBUI_PORT") or "8081",
            *args, master,
        ]  # fmt: skip
    if service == "manage":
        return cl.manage_command(*args)
    raise EntryError(f"unknown service {service!r}")


def https_environment(env: dict[str, str]) -> dict[str, str]:
    """The portal's or the UMS gateway's environment with its HTTPS key material checked
    (EntryError saying what is wrong) and handed on as the servers take it."""
    _project_importable()
    from broker.security.https import HttpsError, HttpsKeys

    try:
        keys = HttpsKeys.from_env(env)
        if keys is None:
            return env
        keys.server_context()
    except HttpsError as exc:
        raise EntryError(str(exc)) from None
    return {**env, **keys.environment()}


def worker_name(env: dict[str, str]) -> str:
    return f"imq-worker@{env.get('HOSTNAME') or socket.gethostname()}"


def migrate() -> None:
    """Bring the schema up; the first time (admin still on its shipped password), make
    IMQ_INITIAL_ADMIN_PASSWORD admin's password -- never again, so a password changed on
    the Users page or with imqusermgr stays; and make the portal's own broker account
    follow its secret (IMQ_PORTAL_SECRET_FILE)."""
    import django

    _project_importable()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    from django.core.management import call_command

    from broker.admintools.credentials import broker_credentials
    from broker.security.users import ensure_default_users

    call_command("migrate", interactive=False, verbosity=1)
    created = ensure_default_users()
    if created:
        print(f"migrate: created default users: {', '.join(created)}", flush=True)
    password = os.environ.get("IMQ_INITIAL_ADMIN_PASSWORD", "")
    if password:
        print(f"migrate: {first_admin_password(password)}", flush=True)
    creds = broker_credentials()  # creates or updates the portal's own account
    print(f"migrate: the portal reaches the broker as {creds.user}, {creds.source}", flush=True)


def first_admin_password(password: str) -> str:
    """Give admin ``password`` while admin is still on its shipped one (a new database);
    what was done, as a line for the log."""
    from broker.admintools import security_actions
    from broker.models import BrokerUser
    from broker.security.digest import password_digest
    from broker.security.shipped import on_shipped_password

    record = BrokerUser.objects.filter(username="admin").first()
    if record is None:
        return "no user admin: IMQ_INITIAL_ADMIN_PASSWORD not applied"
    if record.password_digest == password_digest("admin", password):
        return "admin's password is the one of IMQ_INITIAL_ADMIN_PASSWORD"
    if not on_shipped_password("admin", record.password_digest):
        return (
            "admin's password was changed after the first start: IMQ_INITIAL_ADMIN_PASSWORD "
            "(secret imq_admin_password) only sets the first one and is not applied again; "
            "change passwords on the portal's Users page or with imqusermgr"
        )
    actor = security_actions.command_line_actor("docker migrate")
    security_actions.update_user(actor, "admin", password=password)
    return "admin's first password set from IMQ_INITIAL_ADMIN_PASSWORD"


# -- health checks ------------------------------------------------------------------------


def http_answers(url: str) -> bool:
    context = None
    if url.startswith("https:"):
        # The container asks itself: its certificate names the host clients use, not
        # 127.0.0.1, and may be signed by a CA the image does not carry.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as r:  # our own URL
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def pid_alive(pidfile: str) -> bool:
    try:
        pid = int(Path(pidfile).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def healthy(what: str, env: dict[str, str]) -> bool:
    """Whether ``what`` serves, checked from inside its container."""
    if what == "broker":
        _project_importable()
        from broker.launcher import portmapper_answers

        return portmapper_answers("127.0.0.1", int(env.get("IMQ_PORT") or 7676), timeout=5)
    scheme = "https" if env.get("PORTAL_HTTPS_CERT") else "http"
    if what == "portal":
        return http_answers(f"{scheme}://127.0.0.1:{env.get('PORTAL_PORT') or 8000}/healthz")
    if what == "ums":
        return http_answers(f"{scheme}://127.0.0.1:{env.get('UMS_PORT') or 8001}/healthz")
    if what == "worker":
        import subprocess

        # Answers only once it consumes from Redis: the worker's own readiness.
        _project_importable()
        from broker.commandlines import celery_command

        ping = celery_command(
            "inspect", "ping", "--destination", worker_name(env), "--timeout", "10"
        )
        done = subprocess.run(ping, cwd=ROOT, env=env, capture_output=True, timeout=60)
        return done.returncode == 0
    if what == "beat":
        return pid_alive(env.get("CELERY_BEAT_PIDFILE") or BEAT_PIDFILE)
    if what == "spark-master":
        return http_answers(f"http://127.0.0.1:{env.get('SPARK_MASTER_WEBUI_PORT') or 8080}/")
    if what == "spark-worker":
        return http_answers(f"http://127.0.0.1:{env.get('SPARK_WORKER_WEBUI_PORT') or 8081}/")
    raise EntryError(f"no health check for {what!r}: one of {', '.join(SERVICES)}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    service, args = argv[0], argv[1:]
    try:
        env = read_secrets(dict(os.environ))
        os.environ.clear()
        os.environ.update(env)
        os.chdir(ROOT)
        if service == "health":
            return 0 if args and healthy(args[0], env) else 1
        if service == "_migrate":
            migrate()
            return 0
        if service in SERVICES or service == "manage":
            if service.startswith("spark-"):
                env.setdefault("SPARK_HOME", spark_home())
                # Spark's default work dir is inside its (root-owned) installation.
                env.setdefault("SPARK_WORKER_DIR", "/tmp/spark-worker")
            if service in ("portal", "ums"):
                env = https_environment(env)
            cmd = command(service, args, env)
        else:
            cmd = [service, *args]
    except EntryError as exc:
        print(f"entrypoint: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    try:
        os.execvpe(cmd[0], cmd, env)  # the container's one process
    except OSError as exc:
        print(f"entrypoint: cannot run {cmd[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
