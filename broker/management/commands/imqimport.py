"""``python manage.py imqimport``: move a stock OpenMQ broker instance to this broker.

* ``imqimport config STOCK_INSTANCE_DIR [-name INSTANCE] [-varhome DIR]``: the stock
  instance's ``props/config.properties`` (the properties this broker honours, into our
  instance's ``config.properties``), ``etc/passwd`` (users, groups and password hashes
  into the database), ``etc/accesscontrol.properties`` (the rules, for all brokers) and
  its JKS keystore (``--keystore FILE``, else where its properties say; converted to our
  PEM key material with the same password: ``--keystore-password``, ``--passfile`` or
  the stock passfile).  No broker needs to run.
* ``imqimport destinations --from HOST:PORT [-b HOST:PORT]``: the running stock broker's
  destinations (with their attributes) and durable subscriptions, made on our running
  broker.
* ``imqimport drain --from HOST:PORT [-b HOST:PORT] [--queue NAME ...]``: its queues'
  messages, moved to ours.

Each prints a report, one line per thing looked at -- ``taken``, ``adapted`` (how) or
``not taken`` (why) -- and a count; ``--dry-run`` (config, destinations) changes nothing.
Our broker is the one the portal administers (``IMQ_BROKER_HOST``/``IMQ_PORT``), reached
with the portal's own credential (``broker.admintools.credentials``) unless ``-b``, ``-u`` and
``-passfile`` say otherwise; the stock broker's administrator is ``--from-user`` (admin) with the password of
``--from-passfile`` (admin by default, as the stock broker ships).  A passfile holds a line
``imq.imqcmd.password=...``.  Every change goes through the action functions the portal and
the other tools call and is recorded in the log.  See docs/operators/migrating.md.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker.admintools.actions import ActionError
from broker.admintools.broker_handle import BrokerUnavailable
from broker.admintools.client import AdminError
from broker.admintools.credentials import broker_credentials
from broker.admintools.security_actions import command_line_actor
from broker.admintools.stock_report import Report
from broker.config import BrokerConfig, ConfigError, parse_properties
from openmq_client.errors import JMSException

IMQCMD_PASSWORD = "imq.imqcmd.password"


def _passfile(path: str, key: str) -> str:
    try:
        value = parse_properties(Path(path).read_text(encoding="latin-1")).get(key)
    except (OSError, ConfigError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc
    if value is None:
        raise CommandError(f"{path} has no line {key}=...")
    return value


def _address(text: str, default_host: str = "localhost") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, "7676"
    if not port.isdigit():
        raise CommandError(f"{text!r} is not HOST:PORT (the broker's port mapper)")
    return host or default_host, int(port)


class Command(BaseCommand):
    help = (
        "Import a stock OpenMQ broker instance: config (properties, users, access rules, "
        "keystore), destinations (and durable subscriptions), drain (queued messages)."
    )
    # A command-line tool: the portal's URL checks are not its business.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("subcommand", choices=["config", "destinations", "drain"])
        parser.add_argument("instance_dir", nargs="?", help="config: the stock instance directory")
        parser.add_argument("-name", dest="instance", help="config: our broker instance name")
        parser.add_argument("-varhome", dest="varhome", help="config: our brokers' var home")
        parser.add_argument(
            "--etchome", help="config: the stock installation's etc (its ${imq.etchome})"
        )
        parser.add_argument("--keystore", help="config: the stock broker's JKS keystore")
        parser.add_argument("--keystore-password", help="config: the keystore's password")
        parser.add_argument(
            "--passfile", help="config: a file with imq.keystore.password=... (the keystore's)"
        )
        parser.add_argument(
            "--replace-keystore", action="store_true", help="config: replace our key material"
        )
        parser.add_argument("--from", dest="source", help="the stock broker's HOST:PORT")
        parser.add_argument("--from-user", default="admin", help="its administrator (admin)")
        parser.add_argument(
            "--from-passfile", help="file with imq.imqcmd.password= for --from-user"
        )
        parser.add_argument("-b", dest="address", help="our broker's HOST:PORT (port mapper)")
        parser.add_argument("-u", dest="user", help="our administrator user name")
        parser.add_argument("-passfile", dest="our_passfile", help="imq.imqcmd.password= for -u")
        parser.add_argument("--queue", action="append", help="drain: only this queue (repeatable)")
        parser.add_argument(
            "--idle",
            type=float,
            default=5.0,
            help="drain: seconds without a message before a queue counts as empty (5)",
        )
        parser.add_argument("--dry-run", action="store_true", help="report only, change nothing")

    def handle(self, *args, **opts) -> None:
        self.actor = command_line_actor("imqimport")
        try:
            report = getattr(self, f"do_{opts['subcommand']}")(opts)
        except (ActionError, AdminError, BrokerUnavailable, ConfigError, JMSException) as exc:
            raise CommandError(str(exc)) from exc
        for line in report.lines():
            self.stdout.write(line)
        if opts["dry_run"]:
            self.stdout.write("(dry run: nothing changed)")

    def do_config(self, opts) -> Report:
        from broker.admintools.stock_import import StockInstance, import_configuration

        if not opts["instance_dir"]:
            raise CommandError("imqimport config needs the stock instance directory")
        stock = StockInstance.open(opts["instance_dir"], opts["etchome"])
        instance = opts["instance"] or settings.IMQ_INSTANCE
        varhome = Path(opts["varhome"] or settings.IMQ_VARHOME).resolve()
        config = BrokerConfig.load(instance, varhome)
        password = opts["keystore_password"]
        if password is None and opts["passfile"]:
            password = _passfile(opts["passfile"], "imq.keystore.password")
        self.stdout.write(
            f"Importing stock instance {stock.directory} into instance {instance} "
            f"({config.instance_dir}) and the database"
        )
        return import_configuration(
            self.actor,
            stock,
            config,
            keystore=Path(opts["keystore"]).resolve() if opts["keystore"] else None,
            keystore_password=password,
            replace_keystore=opts["replace_keystore"],
            dry_run=opts["dry_run"],
        )

    def _endpoints(self, opts):
        from broker.admintools.stock_objects import Endpoint

        if not opts["source"]:
            raise CommandError(
                f"imqimport {opts['subcommand']} needs --from HOST:PORT (the running stock broker)"
            )
        host, port = _address(opts["source"])
        stock_password = (
            _passfile(opts["from_passfile"], IMQCMD_PASSWORD) if opts["from_passfile"] else "admin"
        )
        stock = Endpoint(host, port, opts["from_user"], stock_password)
        ours_host, ours_port = settings.IMQ_BROKER_HOST, int(settings.IMQ_BROKER_PORT)
        if opts["address"]:
            ours_host, ours_port = _address(opts["address"], ours_host)
        if opts["our_passfile"]:
            ours_user = opts["user"] or "admin"
            ours_password = _passfile(opts["our_passfile"], IMQCMD_PASSWORD)
        else:
            # The account the portal reaches the broker with (its own, by default).
            creds = broker_credentials()
            ours_user, ours_password = creds.user, creds.password
        ours = Endpoint(ours_host, ours_port, ours_user, ours_password)
        if (stock.host, stock.port) == (ours.host, ours.port):
            raise CommandError(
                f"--from and -b both name {stock.address}: run this broker on another port "
                "while the stock broker still runs (see docs/operators/migrating.md)"
            )
        return stock, ours

    def do_destinations(self, opts) -> Report:
        from broker.admintools.stock_objects import import_destinations

        stock, ours = self._endpoints(opts)
        self.stdout.write(
            f"Importing destinations and durable subscriptions from {stock.address} "
            f"into {ours.address}"
        )
        return import_destinations(self.actor, stock, ours, dry_run=opts["dry_run"])

    def do_drain(self, opts) -> Report:
        from broker.admintools.stock_objects import drain_queues

        if opts["dry_run"]:
            raise CommandError("imqimport drain has no --dry-run: `destinations --dry-run` counts")
        stock, ours = self._endpoints(opts)
        self.stdout.write(f"Moving queued messages from {stock.address} to {ours.address}")
        return drain_queues(self.actor, stock, ours, opts["queue"], idle=opts["idle"])
