"""``python manage.py up``: the whole system on one machine, in one command.

It migrates the database, starts a private ``redis-server`` on loopback when
``REDIS_URL`` is unset (and hands its URL to the others), then the broker (``manage.py
runbroker`` with the broker options given here), the portal (``daphne`` on 127.0.0.1),
the UMS HTTP gateway (``uvicorn`` on 127.0.0.1: the same portal application, served with
uvloop and httptools for UMS throughput) and Celery's worker and beat (two processes: see ``_start_celery``), says where each
runs, and supervises them: Ctrl-C or SIGTERM stops them
all (SIGTERM, a grace period, then SIGKILL).  If the broker dies (killed, crashed, a
non-zero exit) ``up`` says so and starts it again with the same options (less
``-reset``: its store is recovered) after a back-off of 1, 2, 4, 8, 16 s, while the
portal, the UMS gateway and Celery keep running; more than ``--broker-restarts``
(``BROKER_RESTARTS``) restarts within ``BROKER_RESTART_WINDOW`` seconds, a broker that exits with status 0 (an
administrator shut it down) or any other child dying stops the others and ``up`` exits
non-zero.  ``--log-dir`` sends each child's output to a file of its own; ``--daemon``
(with it) detaches once everything answers, writes a pid file and logs to DIR/up.log.
``--https`` serves the portal and the UMS gateway over HTTPS with the broker's own key
material (``imqkeytool -broker``) or ``--https-cert``/``--https-key``
(broker/security/https.py).  The supervision itself (children started, watched, restarted,
stopped) is broker/management/supervisor.py's.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker import props
from broker.commandlines import (
    LOOPBACK,
    broker_command,
    celery_beat_command,
    celery_worker_command,
    java_problem,
    portal_command,
    ums_gateway_command,
)
from broker.config import BrokerConfig, ConfigError
from broker.launcher import portmapper_answers, read_portmapper
from broker.loglevels import LOGLEVEL_CHOICES
from broker.protocol.errors import ProtocolError
from broker.protocol.portmapper import parse_table
from broker.security.https import CERT_ENV, KEY_ENV, PASSWORD_ENV, HttpsError, HttpsKeys
from broker.security.tls import keystore_password, keystore_paths

from ..supervisor import (
    BROKER_RESTART_WINDOW,
    BROKER_RESTARTS,
    StartupFailed,
    Stop,
    Supervisor,
)
from .runbroker import parse_defines

REDIS_SERVER = "redis-server"
DEFAULT_ACTIVE = [s.strip() for s in (props.SERVICE_ACTIVELIST.default or "").split(",")]


def tunnel_where(host: str, port: int) -> str:
    """The HTTP tunnel's URL, as the broker's port mapper lists its httpjms service."""
    try:
        table = parse_table(read_portmapper(host, port))
    except (OSError, ProtocolError):
        return ""
    where = ""
    for svc in table.services:
        if svc.name in ("httpjms", "httpsjms") and svc.port and not where:
            scheme = "http" if svc.name == "httpjms" else "https"
            where = f"; HTTP tunnel {scheme}://{host}:{svc.port}/imq/tunnel"
    for svc in table.services:
        if svc.name == "stomp[bridge]" and svc.port:
            # With -Dimq.bridge.enabled=true -Dimq.bridge.activelist=stomp.
            where += f"; STOMP {host}:{svc.port}"
    return where


HELP = """\
Bring the system up on this machine: migrate the database, start a private redis-server
on loopback (only when REDIS_URL is unset; its URL is passed on in REDIS_URL), the broker
(manage.py runbroker with the broker options below), the portal (daphne on
127.0.0.1:--portal-port), the UMS HTTP gateway (uvicorn on 127.0.0.1:--ums-port), a
Celery worker and Celery beat (the background jobs: expiry reclamation, log rollover,
metrics rollups; schedules on the portal's Jobs page), print
where each runs, and stop them all on Ctrl-C or SIGTERM. If the broker dies (killed or a
non-zero exit), it is started again (same options, less -reset) after 1, 2, 4, 8, 16 s
while the others keep running, and each restart is reported; after 5 restarts within 10
minutes (--broker-restarts; 0: never), or if anything else dies (or the broker exits with status 0), the others are
stopped and the exit status is 1. With --log-dir DIR each child writes to DIR/NAME.log
(broker, portal, ums, worker, beat, redis) and up's own lines stay on its output (the
systemd unit deploy/systemd/openmq-py.service runs it so). With --daemon as well, up goes
to the background once everything answers: its own lines go to DIR/up.log, its pid to
--pidfile (default DIR/up.pid), and `kill $(cat DIR/up.pid)` stops everything.

HTTPS: --https serves the portal and the UMS gateway over HTTPS on the same ports, with
the broker's own key material (its keystore.pem, made by manage.py imqkeytool -broker,
unlocked by imq.keystore.password or the broker's passfile) unless --https-cert and
--https-key name other PEM files (an encrypted key's password in PORTAL_HTTPS_KEY_PASSWORD).
--bind chooses the address the portal and the UMS gateway listen on (default 127.0.0.1).
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def portal_answers(port: int, https: bool = False, host: str = LOOPBACK) -> bool:
    """Whether the portal (or the UMS gateway) on ``port`` answers /healthz."""
    context = None
    if https:
        # Our own child on this machine, asked whether it is up: its certificate names
        # the host clients use, which need not be this address.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    scheme = "https" if https else "http"
    where = f"[{host}]" if ":" in host else host
    if where in ("0.0.0.0", "[::]"):
        where = LOOPBACK
    try:
        with urllib.request.urlopen(
            f"{scheme}://{where}:{port}/healthz", timeout=2, context=context
        ) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


class Command(BaseCommand):
    help = HELP

    def create_parser(self, prog_name, subcommand, **kwargs):
        import argparse

        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--portal-port", type=int, default=8000, help="the portal's port (default 8000)"
        )
        parser.add_argument(
            "--ums-port",
            type=int,
            default=8001,
            help="the UMS HTTP gateway's port (default 8001; 0: no gateway process, UMS is "
            "still served by the portal at its /ums/)",
        )
        parser.add_argument(
            "--redis-port",
            type=int,
            default=0,
            help="port of the private redis-server (default: a free one)",
        )
        parser.add_argument(
            "--startup-timeout",
            type=float,
            default=90.0,
            help="seconds each process may take to start answering (default 90)",
        )
        parser.add_argument(
            "--broker-restarts",
            type=int,
            default=BROKER_RESTARTS,
            help="restart a broker that dies at most this many times within "
            f"{BROKER_RESTART_WINDOW:g} s (default {BROKER_RESTARTS}; 0: a dead broker "
            "stops everything)",
        )
        parser.add_argument(
            "--log-dir",
            metavar="DIR",
            help="write each child's output to DIR/NAME.log (broker, portal, ums, worker, "
            "beat, redis; appended to, created if missing) instead of up's own output",
        )
        parser.add_argument(
            "--daemon",
            action="store_true",
            help="detach once everything answers (needs --log-dir; up's own lines go to "
            "DIR/up.log); exit 0 then, or 1 if something did not start",
        )
        parser.add_argument(
            "--pidfile",
            metavar="FILE",
            help="with --daemon: where up writes its pid (default DIR/up.pid); removed at exit",
        )
        parser.add_argument(
            "--bind",
            metavar="ADDRESS",
            default=LOOPBACK,
            help=f"the address the portal and the UMS gateway listen on (default {LOOPBACK}; "
            "0.0.0.0: every interface)",
        )
        parser.add_argument(
            "--https",
            action="store_true",
            help="serve the portal and the UMS gateway over HTTPS, with the broker's key "
            "material (imqkeytool -broker) unless --https-cert/--https-key are given",
        )
        parser.add_argument(
            "--https-cert",
            metavar="FILE",
            help=f"PEM certificate (and chain) for HTTPS (implies --https; default: {CERT_ENV})",
        )
        parser.add_argument(
            "--https-key",
            metavar="FILE",
            help=f"PEM private key for HTTPS (default: {KEY_ENV}, else the --https-cert "
            f"file; its password, if encrypted, in {PASSWORD_ENV})",
        )
        broker = parser.add_argument_group("broker options (passed to runbroker)")
        broker.add_argument("-name", dest="instance", help="broker instance name")
        broker.add_argument("-port", dest="pm_port", type=int, help="port mapper port")
        broker.add_argument("-varhome", dest="varhome", help="broker var home")
        broker.add_argument("-reset", dest="reset", action="append", choices=["store", "props"])
        broker.add_argument(
            "-loglevel",
            dest="loglevel",
            choices=LOGLEVEL_CHOICES,
        )
        broker.add_argument(
            "-D", dest="defines", action="append", metavar="name=value", help="a broker property"
        )

    # -- the supervisor ---------------------------------------------------------------

    def handle(self, *args, **opts) -> None:
        self.opts = opts
        # The children, started, watched and stopped (broker/management/supervisor.py).
        self.sup = Supervisor(opts, self.stdout, self.stderr)
        self.tell_parent: int | None = None  # --daemon: the pipe to the waiting parent
        if opts.get("daemon"):
            self._daemonize()
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            code = self._run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if code:
            sys.exit(code)

    def _daemonize(self) -> None:
        """--daemon: fork; the parent waits for the child's word (everything answers, or
        not) and exits with it, the child leaves the terminal's session and writes its
        output to DIR/up.log and its pid to the pid file."""
        if not self.opts.get("log_dir"):
            raise CommandError("--daemon needs --log-dir DIR (where the logs go)")
        log_dir = Path(self.opts["log_dir"]).resolve()
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            out = os.open(log_dir / "up.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise CommandError(f"--log-dir {log_dir}: {exc}") from exc
        pidfile = Path(self.opts.get("pidfile") or log_dir / "up.pid").resolve()
        self.stdout.flush()
        self.stderr.flush()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid:
            os.close(write_end)
            os.close(out)
            with os.fdopen(read_end, "rb") as word:
                said = word.read().decode(errors="replace")
            if said.startswith("ok"):
                self.stdout.write(f"up: running in the background (pid {pid}, {pidfile})")
                self.stdout.write(f"up: logs in {log_dir}; stop with: kill $(cat {pidfile})")
                os._exit(0)
            self.stderr.write(f"up: did not start; see {log_dir}/up.log")
            os._exit(1)
        os.close(read_end)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(devnull)
        os.close(out)
        try:
            pidfile.parent.mkdir(parents=True, exist_ok=True)
            pidfile.write_text(f"{os.getpid()}\n")
        except OSError as exc:
            os.close(write_end)
            raise CommandError(f"--pidfile {pidfile}: {exc}") from exc
        atexit.register(_remove_pidfile, pidfile, os.getpid())
        self.tell_parent = write_end
        stamp = time.strftime("%Y-%m-%d %H:%M:%S %z")
        self.sup.say(f"--- up: starting in the background at {stamp} (pid {os.getpid()})")

    def _detached(self) -> None:
        """--daemon: everything answers; the waiting parent may exit 0."""
        if self.tell_parent is not None:
            os.write(self.tell_parent, b"ok\n")
            os.close(self.tell_parent)
            self.tell_parent = None

    def _on_signal(self, signum: int, frame) -> None:
        self.sup.signalled = signum

    def _run(self) -> int:
        env = dict(os.environ)
        if self.opts.get("log_dir"):
            self.sup.log_dir = Path(self.opts["log_dir"]).resolve()
            try:
                self.sup.log_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CommandError(f"--log-dir {self.sup.log_dir}: {exc}") from exc
            self.sup.say(f"up: the children's output goes to {self.sup.log_dir}/NAME.log")
        # Before anything starts: bad key material stops up with one line.
        self.https = self._https_keys(self._broker_config()[0])
        try:
            self._migrate()
            self._start_redis(env)
            self._start_broker(env)
            self._start_portal(env)
            self._start_ums(env)
            self._start_celery(env)
        except Stop:
            self.sup.say("up: stopping (interrupted while starting)")
            self.sup.stop_all()
            return 0
        except StartupFailed as exc:
            self.stderr.write(f"up: {exc}; stopping the others")
            self.sup.stop_all()
            return 1
        except BaseException:
            self.sup.stop_all()
            raise
        for child in self.sup.children:
            self.sup.say(f"up: {child.name:<7} {child.where}  (pid {child.proc.pid})")
        self.sup.say("up: running; Ctrl-C (or SIGTERM) stops everything")
        self._detached()
        return self.sup.supervise()

    # -- the children -------------------------------------------------------------------

    def _migrate(self) -> None:
        from django.core.management import call_command
        from django.db import connections

        self.sup.say("up: migrating the database")
        call_command("migrate", interactive=False, verbosity=0)
        connections.close_all()

    def _start_redis(self, env: dict[str, str]) -> None:
        if env.get("REDIS_URL"):
            self.sup.say(f"up: redis   {env['REDIS_URL']} (REDIS_URL: not started here)")
            return
        binary = shutil.which(REDIS_SERVER) or (
            "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
        )
        if binary is None:
            raise CommandError(
                "redis-server is not installed: apt-get install redis-server (make run does "
                "it), or set REDIS_URL to a Redis server"
            )
        port = self.opts["redis_port"] or _free_port()
        workdir = Path(settings.IMQ_VARHOME) / "redis"
        workdir.mkdir(parents=True, exist_ok=True)
        # Loopback only, nothing written to disk (no RDB snapshots, no AOF), log in its dir.
        args = [
            binary,
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--dir", str(workdir),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--logfile", str((self.sup.log_dir or workdir) / "redis.log"),
        ]  # fmt: skip
        child = self.sup.spawn("redis", args, env)
        url = f"redis://127.0.0.1:{port}/0"
        child.where = url
        self.sup.wait(child, lambda: redis_answers(port), f"answer PING on port {port}")
        env["REDIS_URL"] = url

    def _broker_config(self) -> tuple[BrokerConfig, list[str]]:
        """The broker's effective configuration (as runbroker will load it) and the
        runbroker arguments."""
        opts = self.opts
        args: list[str] = []
        if opts["instance"]:
            args += ["-name", opts["instance"]]
        if opts["pm_port"] is not None:
            args += ["-port", str(opts["pm_port"])]
        if opts["varhome"]:
            args += ["-varhome", opts["varhome"]]
        for what in opts["reset"] or []:
            args += ["-reset", what]
        if opts["loglevel"]:
            args += ["-loglevel", opts["loglevel"]]
        for define in opts["defines"] or []:
            args.append(f"-D{define}")
        overrides = dict(settings.IMQ_PORTS)
        overrides.update(parse_defines(opts["defines"]))
        if opts["pm_port"] is not None:
            overrides[props.PORTMAPPER_PORT.name] = str(opts["pm_port"])
        instance = opts["instance"] or settings.IMQ_INSTANCE
        varhome = Path(opts["varhome"] or settings.IMQ_VARHOME).resolve()
        try:
            config = BrokerConfig.load(instance, varhome, overrides)
            if not (config.get(props.HOSTNAME) or "").strip():
                # A development start must not open the broker to the network by
                # surprise: loopback unless imq.hostname says otherwise (runbroker alone
                # listens on all interfaces, as imqbrokerd does).
                args.append(f"-D{props.HOSTNAME.name}={LOOPBACK}")
                overrides[props.HOSTNAME.name] = LOOPBACK
                config = BrokerConfig.load(instance, varhome, overrides)
            active = config.get(props.SERVICE_ACTIVELIST)
            if active == DEFAULT_ACTIVE:
                # The HTTP tunnel too (on the same address as the rest), unless the
                # administrator chose the services.
                active = [*active, "httpjms"]
                args.append(f"-D{props.SERVICE_ACTIVELIST.name}={','.join(active)}")
                overrides[props.SERVICE_ACTIVELIST.name] = ",".join(active)
                config = BrokerConfig.load(instance, varhome, overrides)
            return config, args
        except ConfigError as exc:
            raise CommandError(str(exc)) from exc

    def _start_broker(self, env: dict[str, str]) -> None:
        config, args = self._broker_config()
        port = config.get(props.PORTMAPPER_PORT)
        bound = (config.get(props.HOSTNAME) or "").strip()
        host = bound if bound not in ("", "0.0.0.0", "::", "*") else "127.0.0.1"
        # The portal administers this broker: same port mapper, instance and var home.
        env["IMQ_PORT"] = str(port)
        env["IMQ_BROKER_HOST"] = host
        env["IMQ_INSTANCE"] = config.instance
        env["IMQ_VARHOME"] = str(config.varhome)
        cmd = broker_command(*args)
        child = self.sup.spawn("broker", cmd, env)
        # A restart after a crash: the same command less -reset (the store is recovered,
        # not wiped again), the same environment.
        self.sup.broker_spawn = (_without_reset(cmd), dict(env), host, port)
        child.where = (
            f"port mapper on {bound or '*'}:{port} "
            f"(mq://{host}:{port}/jms, instance {config.instance})"
        )
        self.sup.wait(child, lambda: portmapper_answers(host, port), f"serve port {port}")
        child.where += tunnel_where(host, port)

    def _https_keys(self, config: BrokerConfig) -> HttpsKeys | None:
        """The HTTPS key material: --https-cert/--https-key, else the broker's own
        keystore and password; checked here, so a bad file or password stops ``up``
        with one line before anything serves."""
        opts = self.opts
        cert_file = opts["https_cert"] or os.environ.get(CERT_ENV)
        key_file = opts["https_key"] or os.environ.get(KEY_ENV)
        if key_file and not cert_file:
            raise CommandError(f"--https-key ({KEY_ENV}) needs --https-cert ({CERT_ENV})")
        if not (opts["https"] or cert_file):
            return None
        if cert_file:
            cert = Path(cert_file).resolve()
            key = Path(key_file).resolve() if key_file else cert
            keys = HttpsKeys(cert, key, os.environ.get(PASSWORD_ENV) or None)
        else:
            paths = keystore_paths(config)
            if not paths.keystore.is_file():
                raise CommandError(
                    f"--https: the broker has no key material at {paths.keystore}: create "
                    f"it with 'manage.py imqkeytool -broker -name {config.instance}', or "
                    "give --https-cert and --https-key"
                )
            try:
                password = keystore_password(config)
            except ConfigError as exc:
                raise CommandError(f"--https with the broker's keystore: {exc}") from exc
            keys = HttpsKeys(paths.keystore, paths.keystore, password)
        try:
            keys.server_context()
        except HttpsError as exc:
            raise CommandError(f"--https: {exc}") from exc
        return keys

    def _web_env(self, env: dict[str, str]) -> dict[str, str]:
        """The environment of the portal and the UMS gateway: with HTTPS, its key
        material (the other children do not get the key's password)."""
        if self.https is None:
            return env
        return {**env, **self.https.environment()}

    def _web_where(self, port: int, path: str = "/") -> str:
        scheme = "https" if self.https is not None else "http"
        host = self.opts["bind"]
        shown = f"[{host}]" if ":" in host else host
        return f"{scheme}://{shown}:{port}{path}"

    def _start_portal(self, env: dict[str, str]) -> None:
        port = self.opts["portal_port"]
        host = self.opts["bind"]
        https = self.https is not None
        child = self.sup.spawn("portal", portal_command(port, host), self._web_env(env))
        child.where = self._web_where(port)
        self.sup.wait(
            child, lambda: portal_answers(port, https, host), f"answer /healthz on port {port}"
        )

    def _start_ums(self, env: dict[str, str]) -> None:
        """The UMS gateway: the portal's application under uvicorn (uvloop, httptools),
        whose /ums/simple and /ums/xml skip Django (portal/ums/asgi.py).  A process of its
        own with its own sids, like a second portal behind a load balancer."""
        port = self.opts["ums_port"]
        if not port:
            return
        host = self.opts["bind"]
        keys = self.https
        cmd = ums_gateway_command(
            port,
            host,
            certfile=str(keys.cert) if keys else None,
            keyfile=str(keys.key) if keys else None,
        )
        child = self.sup.spawn("ums", cmd, self._web_env(env))
        child.where = self._web_where(port, "/ums/") + " (UMS gateway)"
        self.sup.wait(
            child,
            lambda: portal_answers(port, keys is not None, host),
            f"answer /healthz on port {port}",
        )

    def _start_celery(self, env: dict[str, str]) -> None:
        """A worker and beat as two processes, not ``worker -B``: Celery documents the
        embedded beat as for development, a second worker could then be added without a
        second scheduler, and a dead beat (no more schedules) shows on its own line."""
        problem = java_problem() if not env.get("SPARK_MASTER") else None
        if problem is not None:
            self.stderr.write(f"up: warning: the hourly metrics rollup will fail: {problem}")
        workdir = Path(env.get("IMQ_VARHOME") or settings.IMQ_VARHOME) / "celery"
        workdir.mkdir(parents=True, exist_ok=True)
        for name in ("worker", "beat"):
            pidfile = workdir / f"{name}.pid"
            pidfile.unlink(missing_ok=True)
            if name == "worker":
                hostname = f"imq-worker@{socket.gethostname()}"
                cmd = celery_worker_command(hostname, pidfile=str(pidfile))
            else:
                cmd = celery_beat_command(pidfile=str(pidfile))
            child = self.sup.spawn(name, cmd, env)
            child.where = f"celery {name} on {env.get('REDIS_URL', '')}" + (
                " (DatabaseScheduler: the portal's Jobs page)" if name == "beat" else ""
            )
            self.sup.wait(child, pidfile.exists, "write its pid file")


def _remove_pidfile(path: Path, pid: int) -> None:
    """At exit of the daemon: its pid file, unless another up has written its own."""
    try:
        if path.read_text().strip() == str(pid):
            path.unlink()
    except OSError:
        pass


def _without_reset(cmd: list[str]) -> list[str]:
    """``cmd`` less its ``-reset X`` options."""
    out: list[str] = []
    skip = False
    for arg in cmd:
        if skip:
            skip = False
        elif arg == "-reset":
            skip = True
        else:
            out.append(arg)
    return out
