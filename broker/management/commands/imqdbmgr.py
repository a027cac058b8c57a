"""``python manage.py imqdbmgr``: OpenMQ's database manager, for the database store.

    manage.py imqdbmgr <subcommand> <argument> [<options>]

Subcommands (OpenMQ's syntax): ``create all``, ``create tbl``, ``delete tbl``, ``recreate
tbl``, ``reset lck``, ``remove bkr -n ID``, ``query``, ``backup -dir D``, ``restore -dir
D``, ``upgrade store``.  Options: ``-b`` instance, ``-varhome``, ``-D name=value`` (the
broker configuration they name: its HA broker id), ``-n`` broker id, ``-u`` and
``-passfile`` (the database user and password, over ``DATABASE_URL``'s), ``-h``,
``-v``.  The work is done by :mod:`broker.store.dbmgr` on the database (no broker is
asked: the tool is for a store no broker holds); this module parses OpenMQ's command
line, prints OpenMQ's messages and records each change in the audit log.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker.config import parse_properties

# How the usage text names the command: "imqdbmgr" run as the console command
# (broker/management/console.py), "manage.py imqdbmgr" run through manage.py.
MANAGE_NAME = "manage.py imqdbmgr"


def help_hint(name: str = MANAGE_NAME) -> str:
    return f'Please type "{name} -h" for help.'


USAGE = """\
imqdbmgr usage:

{name} <subcommand> <argument> [<options>]
{name} -h|-help
{name} -v|-version

imqdbmgr subcommands and arguments:
    create all      : Create database and tables for the persist store.
    create tbl      : Create tables for the persist store.
    delete tbl      : Delete tables for the persist store.
    recreate tbl    : Delete and then create tables for the persist store.
    remove bkr      : Remove a broker and its data from the persist store (-n).
    reset lck       : Reset the lock so that the persist store can be used
                      by other processes.
    upgrade store   : Upgrade old persistent store (nothing to do here).
    backup          : Backup the persist store to file based backup files (-dir).
    restore         : Restore the persist store from file based backup (-dir).
    query           : Query and display information of the persistent store.

imqdbmgr options:
    -D<property>=<value> : Set broker property <property> to <value>.
    -b <name>            : Specify the broker instance name and use
                           the corresponding property configuration.
    -n <brokerid>        : Specify the broker ID (remove bkr, reset lck).
    -h, -help            : Display usage help.
    -passfile <file>     : Specify a file containing the database password
                           (imq.persist.jdbc.password=...).
    -u <user>            : Specify the database username.
    -v, -version         : Display version information.
    -varhome <dir>       : Specify an alternate var home to use.
    -dir <directory>     : Backup directory for backup or restore the persist store.

The database is the one DATABASE_URL names (SQLite or PostgreSQL).
"""

# subcommand -> the arguments it takes (OpenMQ's; the ones in NOT_HERE are refused).
SUBCOMMANDS = {
    "create": ("all", "tbl", "sharecc_tbl"),
    "delete": ("tbl", "oldtbl", "sharecc_tbl"),
    "recreate": ("tbl", "sharecc_tbl"),
    "remove": ("bkr", "jmsbridge"),
    "reset": ("lck",),
    "upgrade": ("store", "hastore"),
}
NOT_HERE = {
    "delete oldtbl": "there is no old persistent store here: the tables have had one"
    " format, kept current by manage.py migrate",
    "remove jmsbridge": "there is no JMS bridge here",
    "create sharecc_tbl": "the cluster's change record is the master broker's file, not a"
    " shared table",
    "delete sharecc_tbl": "the cluster's change record is the master broker's file, not a"
    " shared table",
    "recreate sharecc_tbl": "the cluster's change record is the master broker's file, not a"
    " shared table",
    "backup sharecc_tbl": "the master broker's change record is backed up with"
    " `manage.py runbroker -backup FILE`",
    "restore sharecc_tbl": "the master broker's change record is restored with"
    " `manage.py runbroker -restore FILE`",
}
# OpenMQ's first line when these fail (BrokerResources B3073, B3075, B3076).
FAILED = {
    "create all": "Failed to create database table(s)",
    "create tbl": "Failed to create database table(s)",
    "delete tbl": "Failed to delete all database tables",
    "recreate tbl": "Failed to recreate all database tables",
}
PASSWORD_KEYS = ("imq.persist.jdbc.password", "imq.persist.jdbc.postgresql.password")


class UsageError(Exception):
    """A command line imqdbmgr cannot take (OpenMQ's message, without the help hint)."""


@dataclass
class DbMgrArgs:
    """A parsed imqdbmgr command line."""

    command: str = ""  # "create all", "query", "backup", ...
    directory: str | None = None
    instance: str | None = None
    broker_id: str | None = None
    user: str | None = None
    passfile: str | None = None
    varhome: str | None = None
    defines: dict[str, str] = field(default_factory=dict)
    help: bool = False
    version: bool = False


def parse_args(argv: list[str]) -> DbMgrArgs:
    """OpenMQ's DBTool grammar: one subcommand with its argument, options anywhere."""
    out = DbMgrArgs()
    out.help = any(a in ("-h", "-help") for a in argv)
    out.version = any(a in ("-v", "-version") for a in argv)
    if out.help or out.version:
        return out

    def take(i: int, what: str, *, option: bool) -> str:
        if i >= len(argv):
            kind = "option" if option else "subcommand"
            raise UsageError(f"An argument was expected for {kind}: {what}")
        return argv[i]

    def one_command(word: str) -> None:
        if out.command:
            raise UsageError(f"Only one subcommand allowed, extra subcommand specified: {word}")

    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in SUBCOMMANDS:
            one_command(arg)
            i += 1
            value = take(i, arg, option=False)
            if value not in SUBCOMMANDS[arg]:
                raise UsageError(f"Invalid argument specified for subcommand {arg}: {value}")
            out.command = f"{arg} {value}"
        elif arg in ("backup", "restore"):
            one_command(arg)
            i += 1
            value = take(i, arg, option=False)
            if value == "sharecc_tbl":
                out.command = f"{arg} {value}"
            elif value == "-dir":
                i += 1
                out.command, out.directory = arg, take(i, "-dir", option=True)
            else:
                raise UsageError(f"Invalid argument specified for subcommand {arg}: {value}")
        elif arg == "query":
            one_command(arg)
            out.command = arg
        elif arg in ("-b", "-n", "-u", "-passfile", "-varhome"):
            i += 1
            value = take(i, arg, option=True)
            attr = {"-b": "instance", "-n": "broker_id", "-u": "user"}.get(arg, arg[1:])
            setattr(out, attr, value)
        elif arg in ("-p", "-pw"):
            raise UsageError(
                f"Due to security implications the {arg} command line option is\n"
                "no longer supported. Please use the -passfile option."
            )
        elif arg.startswith("-D"):
            text = arg[2:]
            if not text:  # "-D name=value", as runbroker also takes it
                i += 1
                text = take(i, "-D", option=True)
            name, _sep, value = text.partition("=")
            if name.strip():
                out.defines[name.strip()] = value
        else:
            raise UsageError(f"Unrecognized command line option: {arg}")
        i += 1
    if not out.command:
        raise UsageError("A subcommand was expected:")
    return out


def read_db_password(path: str) -> str:
    """The database password in an OpenMQ passfile."""
    try:
        values = parse_properties(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        raise DbMgrFailed(f"Exception occurred while reading from passfile {path}: {exc}") from exc
    for key in PASSWORD_KEYS:
        if key in values:
            return values[key]
    raise DbMgrFailed(f"passfile {path} has no {PASSWORD_KEYS[0]}=... line")


class DbMgrFailed(Exception):
    """What went wrong, for standard error; exit status 1."""


class Command(BaseCommand):
    help = "OpenMQ's imqdbmgr for the database store: create, delete, query, back up, restore."
    requires_system_checks: list[str] = []
    name = MANAGE_NAME

    def run_from_argv(self, argv: list[str]) -> None:
        """OpenMQ's own command-line grammar (``-v`` is the version, ``-dir`` goes with
        its subcommand), not Django's: the options are parsed here."""
        if os.path.basename(argv[0]) == "imqdbmgr":
            self.name = "imqdbmgr"
        try:
            args = parse_args(argv[2:])
        except UsageError as exc:
            self.stderr.write(f"{exc}\n{help_hint(self.name)}")
            sys.exit(1)
        sys.exit(self.main(args))

    def handle(self, *args: str, **options: object) -> None:
        try:
            parsed = parse_args(list(args))
        except UsageError as exc:
            raise CommandError(f"{exc}\n{help_hint(self.name)}") from None
        code = self.main(parsed)
        if code:
            sys.exit(code)

    def add_arguments(self, parser) -> None:
        parser.add_argument("args", nargs="*")

    # -- the work -----------------------------------------------------------------------

    def main(self, args: DbMgrArgs) -> int:
        if args.help:
            self.stdout.write(USAGE.format(name=self.name), ending="")
            return 0
        if args.version:
            self.stdout.write(version_text())
            return 0
        try:
            self.run(args)
        except DbMgrFailed as exc:
            self.stderr.write(str(exc))
            return 1
        return 0

    def run(self, args: DbMgrArgs) -> None:
        from broker.store import dbmgr

        if args.command in NOT_HERE:
            raise DbMgrFailed(
                f"imqdbmgr {args.command}: not supported here: {NOT_HERE[args.command]}"
            )
        self.use_credentials(args)
        say = self.stdout.write
        try:
            if args.command == "upgrade store":
                say(
                    "The persistent store is current: its tables are created and changed by"
                    " `manage.py migrate`; there is no older store to upgrade."
                )
            elif args.command == "upgrade hastore":
                say(
                    "The persistent store is shared already: every broker instance, and the"
                    " brokers of an HA cluster, keep their rows in the same tables."
                )
            elif args.command == "create all":
                dbmgr.create_all()
                self.record("created the database and the store's tables", "create")
                say("Database tables created.")
            elif args.command == "create tbl":
                tables = dbmgr.create_tables()
                self.record(f"created the store's tables {', '.join(tables)}", "create")
                say("Database tables created.")
            elif args.command == "delete tbl":
                tables = dbmgr.delete_tables()
                self.record(f"deleted the store's tables {', '.join(tables)}", "delete")
                say("Database tables deleted.")
            elif args.command == "recreate tbl":
                dbmgr.recreate_tables()
                self.record("deleted and created the store's tables", "recreate")
                say("Database tables created.")
            elif args.command == "reset lck":
                instance = args.broker_id or self.store_instance(args)
                text = dbmgr.reset_lock("default", instance)
                if "has been reset" in text:
                    self.record(f"reset the store lock of broker instance {instance}", "reset_lock")
                say(text)
            elif args.command == "remove bkr":
                if not args.broker_id:
                    raise DbMgrFailed(f"Option -n was expected.\n{help_hint(self.name)}")
                counts = dbmgr.remove_broker("default", args.broker_id)
                self.record(
                    f"removed broker {args.broker_id} from the store ({said(counts)})",
                    "remove_broker",
                )
                say(f"Broker {args.broker_id} has been removed from the store ({said(counts)}).")
            elif args.command == "query":
                self.query(args, dbmgr.query())
            elif args.command == "backup":
                done = dbmgr.backup("default", Path(args.directory or ""))
                self.record(f"backed the store up to {args.directory}", "backup")
                for name, counts in done.items():
                    say(f"Backed up broker instance {name}: {said(counts)}.")
                say(f"Persistent store backed up to {args.directory}.")
            elif args.command == "restore":
                done = dbmgr.restore("default", Path(args.directory or ""))
                self.record(f"restored the store from {args.directory}", "restore")
                for name, counts in done.items():
                    say(f"Restored broker instance {name}: {said(counts)}.")
                say(f"Persistent store restored from {args.directory}.")
            else:  # parse_args knows no other
                raise DbMgrFailed(
                    f"Unrecognized subcommand: {args.command}\n{help_hint(self.name)}"
                )
        except dbmgr.DbMgrError as exc:
            failed = FAILED.get(args.command)
            if failed:  # OpenMQ says what failed on which database, then why
                raise DbMgrFailed(f"{failed} - {dbmgr.database_url()}:\n{exc}") from exc
            raise DbMgrFailed(str(exc)) from exc
        except Exception as exc:  # the database is away, a file cannot be written...
            from django.db import DatabaseError

            if not isinstance(exc, DatabaseError | OSError):
                raise
            raise DbMgrFailed(f"imqdbmgr {args.command} failed: {exc}") from exc

    def record(self, what: str, op: str) -> None:
        """The change in the audit log, with the operating-system user who made it."""
        from broker.admintools.actions import record_change
        from broker.admintools.security_actions import command_line_actor

        record_change(command_line_actor("imqdbmgr"), what, {"type": "store", "op": op})

    def use_credentials(self, args: DbMgrArgs) -> None:
        """-u / -passfile: the database user and password instead of DATABASE_URL's."""
        if not (args.user or args.passfile):
            return
        from django.db import connections

        conn = connections["default"]
        conn.close()
        if args.user:
            conn.settings_dict["USER"] = args.user
        if args.passfile:
            conn.settings_dict["PASSWORD"] = read_db_password(args.passfile)

    def config(self, args: DbMgrArgs):
        from broker.config import BrokerConfig, ConfigError

        instance = args.instance or settings.IMQ_INSTANCE
        varhome = Path(args.varhome or settings.IMQ_VARHOME)
        if args.instance and not (varhome / "instances" / instance).is_dir():
            raise DbMgrFailed(f'The broker instance "{instance}" does not exist.')
        try:
            return BrokerConfig.load(instance, varhome, args.defines)
        except ConfigError as exc:
            raise DbMgrFailed(str(exc)) from exc

    def store_instance(self, args: DbMgrArgs) -> str:
        """The name the -b instance's rows go by (its broker id in an HA cluster)."""
        from broker.config import ConfigError
        from broker.store import ha_settings

        config = self.config(args)
        try:
            ha = ha_settings(config)
        except ConfigError as exc:
            raise DbMgrFailed(str(exc)) from exc
        return ha.broker_id if ha is not None else config.instance

    def query(self, args: DbMgrArgs, report) -> None:
        from broker.config import ConfigError
        from broker.store import ha_settings

        say = self.stdout.write
        config = self.config(args)
        try:
            ha = ha_settings(config)
        except ConfigError:
            ha = None
        if ha is not None:
            say(
                f"Broker {ha.broker_id} is running in HA mode as part of the {ha.cluster_id} cluster"
            )
        else:
            say("Running in standalone mode.")
        say(f"Database: {report.database}")
        say(report.status)
        for table, rows in report.tables.items():
            say(f"  {table}: {'missing' if rows is None else f'{rows} rows'}")
        for inst in report.instances:
            if inst.owner == "running":
                beat = "never" if inst.age is None else f"{inst.age:.1f} s ago"
                held = f"held by the broker at {inst.address} (last heartbeat {beat}"
                held += ", looks stopped: `reset lck`)" if inst.stale else ")"
            else:
                held = "not held by a broker"
            say(f"Broker instance {inst.name}: {said(inst.counts)}; {held}")


def said(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {what}" for what, n in counts.items())


def version_text() -> str:
    import importlib.metadata

    try:
        version = importlib.metadata.version("openmq-py")
    except importlib.metadata.PackageNotFoundError:
        version = "0+source"
    return (
        f"imqdbmgr (openmq-py {version}), for the database store of an OpenMQ 6.9 compatible broker"
    )
