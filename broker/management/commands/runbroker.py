"""``python manage.py runbroker``: start a broker, with imqbrokerd's common options."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker import props
from broker.config import BrokerConfig, ClusterFileError, ConfigError
from broker.loglevels import LOGLEVEL_CHOICES
from broker.logsetup import configure_logging
from broker.propcheck import warn_unhonoured


def parse_defines(values: list[str] | None) -> dict[str, str]:
    """``-Dname=value`` (or ``-D name=value``) arguments as a dict."""
    out: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CommandError(f"-D expects name=value, got {item!r}")
        out[name.strip()] = value
    return out


class Command(BaseCommand):
    help = "Start the message broker (options as imqbrokerd's)."
    # The broker serves no web page: the URL checks (which import the whole REST API)
    # would only add a second to every start.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("-name", dest="instance", help="broker instance name")
        parser.add_argument("-port", dest="pm_port", type=int, help="port mapper port")
        parser.add_argument(
            "-varhome", dest="varhome", help="where instances keep their store and logs"
        )
        parser.add_argument(
            "-reset",
            dest="reset",
            action="append",
            choices=["store", "props"],
            help="discard the message store, or the instance's properties",
        )
        parser.add_argument(
            "-backup",
            dest="backup",
            metavar="FILE",
            help="write the master broker's cluster change record to FILE, then exit",
        )
        parser.add_argument(
            "-restore",
            dest="restore",
            metavar="FILE",
            help="replace the master broker's cluster change record with FILE, then exit",
        )
        parser.add_argument(
            "-loglevel",
            dest="loglevel",
            choices=LOGLEVEL_CHOICES,
        )
        parser.add_argument(
            "-tty", dest="tty", action="store_true", help="also log to the terminal"
        )
        parser.add_argument(
            "-D",
            dest="defines",
            action="append",
            metavar="name=value",
            help="set a broker property",
        )

    def handle(self, *args, **opts) -> None:
        instance = opts["instance"] or settings.IMQ_INSTANCE
        varhome = Path(opts["varhome"] or settings.IMQ_VARHOME).resolve()
        overrides = dict(settings.IMQ_PORTS)
        overrides.update(parse_defines(opts["defines"]))
        if opts["pm_port"] is not None:
            overrides[props.PORTMAPPER_PORT.name] = str(opts["pm_port"])
        if opts["loglevel"]:
            overrides[props.LOG_LEVEL.name] = opts["loglevel"]
        try:
            config = BrokerConfig.load(instance, varhome, overrides)
        except ConfigError as exc:
            raise CommandError(str(exc)) from exc
        cluster_file = layer_cluster_file(config)
        for what in opts["reset"] or []:
            reset(config, what)
        if opts["backup"] or opts["restore"]:
            self.change_record(config, opts["backup"], opts["restore"])
            return
        try:
            configure_logging(config, opts["loglevel"], opts["tty"])
        except ConfigError as exc:
            raise CommandError(f"bad broker configuration: {exc}") from exc
        cluster_file()
        warn_unhonoured(config)

        from broker.management import schema
        from broker.security.repository import UserRepositories
        from broker.security.users import ensure_default_users

        # The embedded default must start on a fresh checkout: bring the schema up first.
        schema.migrate()
        created = ensure_default_users()
        if created:
            self.stderr.write(f"created default users: {', '.join(created)}")
        try:
            # imq[.<svc>].authentication.<type>.user_repository: checked (digest + LDAP is
            # refused) before anything listens.
            repositories = UserRepositories(config)
            services = config.get(props.SERVICE_ACTIVELIST)
            for svc, how in repositories.check(services).items():
                self.stderr.write(f"service {svc}: {how}")
            run(config, repositories)
        except ConfigError as exc:
            raise CommandError(f"bad broker configuration: {exc}") from exc

    def change_record(self, config: BrokerConfig, backup: str | None, restore: str | None) -> None:
        """imqbrokerd -backup / -restore: the cluster change record to or from a file."""
        from broker.cluster import changerecord

        try:
            if backup:
                n = changerecord.backup(config.instance_dir, Path(backup))
                self.stdout.write(f"backed up {n} change record(s) to {backup}")
            if restore:
                n = changerecord.restore(config.instance_dir, Path(restore))
                self.stdout.write(f"restored {n} change record(s) from {restore}")
        except (changerecord.ChangeRecordError, OSError) as exc:
            raise CommandError(str(exc)) from exc


def layer_cluster_file(config: BrokerConfig):
    """Layer the cluster configuration file (``imq.cluster.url``) under the broker's own
    properties; returns what to log about it once logging is set up.  As OpenMQ's broker,
    a file that cannot be read is said once and the broker starts without it."""

    log = logging.getLogger("broker.config")
    try:
        url = config.load_cluster_file()
    except ClusterFileError as exc:
        reason = str(exc)
        return lambda: log.warning(
            "%s; starting without the cluster configuration file's properties", reason
        )
    if url is None:
        return lambda: None
    given = config.cluster_file_properties
    own = config.cluster_file_shadowed()

    def say() -> None:
        log.info(
            "cluster configuration file %s: %d properties%s",
            url,
            len(given),
            f" (this broker's own value kept for {', '.join(own)})" if own else "",
        )
        if url.lower().startswith("http:"):
            log.warning(
                "imq.cluster.url %s is read over plain HTTP: whoever can change it on the way"
                " configures this broker; prefer a file: or https: URL",
                url,
            )

    return say


def reset(config: BrokerConfig, what: str) -> None:
    """``-reset store`` empties the message store; ``-reset props`` the instance file."""
    if what == "store":
        from broker.store import open_store

        open_store(config).reset()
    elif what == "props" and config.instance_file.exists():
        config.instance_file.unlink()


def run(config: BrokerConfig, repository) -> None:
    from broker.server.broker import Broker

    try:
        import uvloop
    except ImportError:  # uvloop is a dependency; plain asyncio still works without it
        uvloop = None

    restart = False

    async def main() -> None:
        nonlocal restart
        broker = Broker(config, repository)
        await broker.start()
        await broker.run_until_stopped()
        restart = broker.restart_requested

    if uvloop is not None:
        uvloop.run(main())
    else:
        asyncio.run(main())
    if restart:
        if config.configured(props.RESTART_CODE.name):
            # imqbrokerd's way: the exit status asks whatever supervises the broker
            # (systemd's RestartForceExitStatus=, a wrapper script) to start it again.
            code = config.get(props.RESTART_CODE)
            logging.getLogger("broker").info(
                "restart requested: exiting with imq.restart.code %d for the supervisor", code
            )
            logging.shutdown()
            raise SystemExit(code)
        restart_process()


def restart_process() -> None:
    """Start the broker again in this process (admin RESTART): the same command line,
    less ``-reset`` (a restart keeps the store and the properties)."""
    import os
    import sys

    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "-reset":
            skip = True
            continue
        if arg.startswith("-reset="):
            continue
        kept.append(arg)
    logging.getLogger("broker").info("restarting: %s", " ".join(kept))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *kept[1:]])
