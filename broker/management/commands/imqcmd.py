"""``python manage.py imqcmd``: OpenMQ's broker administration command.

Why one module (about 1,400 lines): it is one command with the whole of OpenMQ's imqcmd
grammar; the subcommand table, the option parsing and the table printers share one
option set and one output style, and each subcommand body is a few lines around an
action, so a split would scatter the grammar without making any part simpler.

Every subcommand is one call of an action in :mod:`broker.admin.actions` (the functions
the portal and the REST API call too), made over a :class:`~broker.admin.remote.BrokerAdmin`
connection to the broker's admin service as the ``-u`` user.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter

from broker import props as imq

from .imqtxn import parse_broker, read_passfile

USAGE = """\
Administer a running broker with OpenMQ's imqcmd syntax: imqcmd SUBCOMMAND ARGUMENT [options]

Broker:
  query bkr                              show the broker's state and main properties
  update bkr -o name=value [-o ...]      change broker properties at run time
  pause bkr / resume bkr                 pause or resume every NORMAL service
  quiesce bkr / unquiesce bkr            refuse, or accept again, new connections
  shutdown bkr [-nofailover]             stop the broker (HA: -nofailover, no takeover)
  restart bkr                            stop the broker and start it again
  takeover bkr -n BROKERID               HA: take over a failed or stopped broker's data now
  reset bkr [-rst METRICS|ALL]           reset the broker's metrics counters
  metrics bkr [-m ttl|rts|cxn] [-int SECONDS] [-msp COUNT]
  reload cls                             every broker of the cluster reads its broker
                                         list again (imq.cluster.brokerlist / .url)
  reload acl                             re-read the access control rules (ours)
Connection services:
  list svc                               the services, their ports and states
  query svc -n NAME                      one service
  update svc -n NAME -o port=N|minThreads=N|maxThreads=N [-o ...]
  pause svc -n NAME / resume svc -n NAME
  metrics svc -n NAME [-m ttl|rts|cxn] [-int SECONDS] [-msp COUNT]
Connections:
  list cxn [-svn SERVICE]                the client connections (-n SERVICE works too)
  query cxn -n ID / destroy cxn -n ID
Physical destinations:
  list dst [-t q|t] [-tmp]               -tmp: with temporary destinations
  query dst -t q|t -n NAME
  create dst -t q|t -n NAME [-o attr=value ...]
  update dst -t q|t -n NAME -o attr=value [-o ...]
  destroy dst -t q|t -n NAME / purge dst -t q|t -n NAME
  pause dst -t q|t -n NAME [-pst CONSUMERS|PRODUCERS|ALL] / resume dst -t q|t -n NAME
  compact dst [-t q|t -n NAME]           reclaim message store space (all, or one)
  metrics dst -t q|t -n NAME [-m ttl|rts|con|dsk] [-int SECONDS] [-msp COUNT]
  list cns -t q|t -n NAME                a destination's consumers (ours: not in OpenMQ)
  attributes (-o): {attributes}
Durable subscriptions:
  list dur [-d TOPIC]                    (OpenMQ needs -d; without it: all of them)
  purge dur -n NAME -c CLIENTID / destroy dur -n NAME -c CLIENTID
Transactions:
  list txn / query txn -n ID / commit txn -n ID / rollback txn -n ID

Options:
  -b host:port   the broker's port mapper (default localhost:7676)
  -u user        the administrator (default admin); changes are logged under this name
  -passfile FILE a file with a line imq.imqcmd.password=PASSWORD (otherwise prompted)
  -f             do not ask "Are you sure ...?" before a change
  -s             silent: no output but errors (and the question, without -f)
  -rtm SECONDS   how long to wait for each reply (default 10)
  -secure        over the broker's TLS admin service (ssladmin), its certificate verified
  -truststore FILE  with -secure, a PEM file of the certificates to trust, e.g. the broker's
                 keystore.crt (ours; default: the system's CAs and this machine's broker
                 certificate, IMQ_VARHOME/IMQ_INSTANCE's keystore.crt)
  -rtr N, -javahome DIR   accepted for compatibility and ignored
"""


def _usage() -> str:
    import textwrap

    from broker.protocol.dest_attributes import DESTINATION_ATTRIBUTES

    names = ", ".join(a.name for a in DESTINATION_ATTRIBUTES)
    names += " (sizes in bytes or 100b, 10k, 5m; -1: unlimited)"
    text = "\n    ".join(textwrap.wrap(names, 84))
    return USAGE.replace("{attributes}", text)


PAUSE_TYPES = ("CONSUMERS", "PRODUCERS", "ALL")
SERVICE_OPTIONS = {"port": "port", "minThreads": "min_threads", "maxThreads": "max_threads"}
METRIC_TYPES = {
    "bkr": ("ttl", "rts", "cxn"),
    "svc": ("ttl", "rts", "cxn"),
    "dst": ("ttl", "rts", "con", "dsk"),
}
SUCCESS = "Successfully performed the requested operation."


@dataclass(frozen=True)
class Spec:
    """One subcommand: its handler and the options it cannot do without."""

    handler: str
    needs: tuple[str, ...] = ()


NEEDS_TEXT = {
    "dest_type": "-t q|t (the destination type)",
    "name": "-n <name>",
    "client_id": "-c <client ID>",
    "attrs": "-o name=value",
}

COMMANDS: dict[tuple[str, str], Spec] = {
    ("query", "bkr"): Spec("query_bkr"),
    ("list", "bkr"): Spec("list_bkr"),
    ("update", "bkr"): Spec("update_bkr", ("attrs",)),
    ("pause", "bkr"): Spec("pause_bkr"),
    ("resume", "bkr"): Spec("resume_bkr"),
    ("quiesce", "bkr"): Spec("quiesce_bkr"),
    ("unquiesce", "bkr"): Spec("unquiesce_bkr"),
    ("shutdown", "bkr"): Spec("shutdown_bkr"),
    ("takeover", "bkr"): Spec("takeover_bkr", needs=("name",)),
    ("restart", "bkr"): Spec("restart_bkr"),
    ("reset", "bkr"): Spec("reset_bkr"),
    ("metrics", "bkr"): Spec("metrics_bkr"),
    ("reload", "acl"): Spec("reload_acl"),
    ("reload", "cls"): Spec("reload_cls"),
    ("list", "svc"): Spec("list_svc"),
    ("query", "svc"): Spec("query_svc", ("name",)),
    ("update", "svc"): Spec("update_svc", ("name", "attrs")),
    ("pause", "svc"): Spec("pause_svc", ("name",)),
    ("resume", "svc"): Spec("resume_svc", ("name",)),
    ("metrics", "svc"): Spec("metrics_svc", ("name",)),
    ("list", "cxn"): Spec("list_cxn"),
    ("query", "cxn"): Spec("query_cxn", ("name",)),
    ("destroy", "cxn"): Spec("destroy_cxn", ("name",)),
    ("list", "dst"): Spec("list_dst"),
    ("list", "cns"): Spec("list_cns", ("dest_type", "name")),
    ("query", "dst"): Spec("query_dst", ("dest_type", "name")),
    ("create", "dst"): Spec("create_dst", ("dest_type", "name")),
    ("update", "dst"): Spec("update_dst", ("dest_type", "name", "attrs")),
    ("destroy", "dst"): Spec("destroy_dst", ("dest_type", "name")),
    ("purge", "dst"): Spec("purge_dst", ("dest_type", "name")),
    ("pause", "dst"): Spec("pause_dst", ("dest_type", "name")),
    ("resume", "dst"): Spec("resume_dst", ("dest_type", "name")),
    ("compact", "dst"): Spec("compact_dst"),
    ("metrics", "dst"): Spec("metrics_dst", ("dest_type", "name")),
    ("list", "dur"): Spec("list_dur"),
    ("purge", "dur"): Spec("purge_dur", ("name", "client_id")),
    ("destroy", "dur"): Spec("destroy_dur", ("name", "client_id")),
    ("list", "txn"): Spec("list_txn"),
    ("query", "txn"): Spec("query_txn", ("name",)),
    ("commit", "txn"): Spec("commit_txn", ("name",)),
    ("rollback", "txn"): Spec("rollback_txn", ("name",)),
}


def unlimited(value: object) -> str:
    """OpenMQ shows -1 (and absent limits) as "unlimited"."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if value is None or value == "" or (isinstance(value, int) and value < 0):
        return "unlimited"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def unlimited_or_zero(value: object) -> str:
    """OpenMQ shows 0 and -1 as "unlimited" for the broker-wide limits and log rollover."""
    if isinstance(value, str) and value.strip() == "0":
        return "unlimited"
    return unlimited(value)


def yes_no(value: object) -> str:
    return "true" if value else "false"


def rate(latest: int, previous: int, secs: float) -> str:
    """Per-second rate of a counter between two samples, as OpenMQ prints it."""
    diff = latest - previous
    per_sec = int(diff / secs) if secs > 0 else 0
    if per_sec == 0:
        return "< 1" if diff else "0"
    return str(per_sec)


def kbytes(n: int) -> str:
    if n == 0:
        return "0"
    return "< 1" if n < 1024 else str(n // 1024)


def num(values: dict[str, Any], *keys: str) -> int:
    """The first of ``keys`` present in a metrics dict, as an int (0 when none is)."""
    for key in keys:
        value = values.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
    return 0


class Table:
    """A table printed like OpenMQ's BrokerCmdPrinter: a dashed line, one or two title rows
    (the first may span columns), a dashed line, then the rows."""

    def __init__(self, columns: int, gap: int = 3, *, center: bool = False) -> None:
        self.columns = columns
        self.gap = gap
        self.center = center
        self.titles: list[tuple[list[str], list[int] | None]] = []
        self.rows: list[list[str]] = []

    def title(self, cells: Sequence[str], spans: Sequence[int] | None = None) -> Table:
        self.titles.append(([str(c) for c in cells], list(spans) if spans else None))
        return self

    def add(self, row: Sequence[object]) -> None:
        self.rows.append([str(c) for c in row])

    def _widths(self) -> list[int]:
        widths = [0] * self.columns
        for cells, spans in self.titles:
            for i, cell in enumerate(cells):
                if spans is None or spans[i] == 1:
                    widths[i] = max(widths[i], len(cell))
        for row in self.rows:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))
        for cells, spans in self.titles:
            if spans is None:
                continue
            for i, span in enumerate(spans):
                if span > 1:
                    room = sum(widths[i : i + span]) + self.gap * (span - 1)
                    if len(cells[i]) > room:
                        widths[i + span - 1] += len(cells[i]) - room
        return widths

    def _cell(self, text: str, width: int, center: bool) -> str:
        return text.center(width) if center else text.ljust(width)

    def lines(self, *, with_title: bool = True) -> list[str]:
        widths = self._widths()
        sep = " " * self.gap
        dashes = "-" * (sum(widths) + self.gap * (self.columns - 1))
        out: list[str] = []
        if with_title:
            out.append(dashes)
            for cells, spans in self.titles:
                parts = []
                for i, cell in enumerate(cells):
                    span = 1 if spans is None else spans[i]
                    if span == 0:
                        continue
                    width = sum(widths[i : i + span]) + self.gap * (span - 1)
                    parts.append(self._cell(cell, width, self.center or spans is not None))
                out.append(sep.join(parts).rstrip())
            out.append(dashes)
        for row in self.rows:
            out.append(
                sep.join(
                    self._cell(c, w, self.center) for c, w in zip(row, widths, strict=True)
                ).rstrip()
            )
        return out


class HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    pass


class Cancelled(Exception):
    """The administrator answered no: nothing was changed."""


class Command(BaseCommand):
    help = _usage()
    # A command-line client of a running broker: a portal page under construction (the
    # URL checks) must not stop it.
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name, subcommand, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("command", metavar="SUBCOMMAND", help="list, query, create, ...")
        parser.add_argument("object", metavar="ARGUMENT", help="bkr, svc, cxn, dst, dur, txn")
        parser.add_argument("-t", dest="dest_type", help="destination type: q (queue), t (topic)")
        parser.add_argument("-n", dest="name", help="destination, service, durable, ID, ...")
        parser.add_argument("-c", dest="client_id", help="client ID (purge/destroy dur)")
        parser.add_argument(
            "-nofailover",
            dest="nofailover",
            action="store_true",
            help="shutdown bkr: no other broker of an HA cluster takes over its data",
        )
        parser.add_argument("-d", dest="topic", help="topic (list dur)")
        parser.add_argument("-svn", dest="service", help="service name (list cxn)")
        parser.add_argument("-o", dest="attrs", action="append", default=[], metavar="name=value")
        parser.add_argument(
            "-pst", dest="pause_type", default="ALL", help="pause dst: " + "|".join(PAUSE_TYPES)
        )
        parser.add_argument(
            "-rst", dest="reset_type", default="METRICS", help="reset bkr: METRICS|ALL"
        )
        parser.add_argument(
            "-tmp", dest="temporary", action="store_true", help="list dst: temporary ones too"
        )
        parser.add_argument(
            "-m", dest="metric_type", help="metrics: ttl, rts, cxn (bkr, svc), con, dsk (dst)"
        )
        parser.add_argument(
            "-int", dest="interval", type=int, default=5, help="metrics: seconds between samples"
        )
        parser.add_argument(
            "-msp",
            dest="samples",
            type=int,
            default=-1,
            help="metrics: number of samples (default: until Ctrl-C)",
        )
        parser.add_argument("-b", dest="broker", default="localhost:7676", help="host:port")
        parser.add_argument("-u", dest="user", default="admin", help="administrator user")
        parser.add_argument("-passfile", dest="passfile", help="file with imq.imqcmd.password=...")
        parser.add_argument("-f", dest="force", action="store_true", help="no confirmation")
        parser.add_argument("-s", dest="silent", action="store_true", help="silent mode")
        parser.add_argument(
            "-rtm", dest="timeout", type=float, default=10.0, help="seconds to wait for each reply"
        )
        parser.add_argument(
            "-secure",
            dest="secure",
            action="store_true",
            help="use the broker's TLS admin service (ssladmin)",
        )
        parser.add_argument(
            "-truststore",
            dest="truststore",
            metavar="FILE",
            help="with -secure: PEM certificates to trust (e.g. the broker's keystore.crt)",
        )
        parser.add_argument("-rtr", dest="retries", type=int, help=argparse.SUPPRESS)
        parser.add_argument("-javahome", dest="javahome", help=argparse.SUPPRESS)

    # -- plumbing ------------------------------------------------------------------------

    def run_from_argv(self, argv) -> None:
        self._cli = True
        super().run_from_argv(argv)

    def execute(self, *args, **options):
        """From the command line an error is one line on stderr and exit status 1."""
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            if not getattr(self, "_cli", False) or options.get("traceback"):
                raise
            self.stderr.write(str(exc))
            sys.exit(exc.returncode)

    def handle(self, *args, **opts) -> None:
        from broker.admin.actions import ActionError, AdminError, BrokerUnavailable
        from broker.admin.remote import BrokerAdmin, admin_ssl_context
        from broker.config import ConfigError

        self.opts = opts
        # The client library's warnings (a connection lost after a refused login, ...) would
        # repeat the one error line this command prints.
        logging.getLogger("openmq_client").addHandler(logging.NullHandler())
        logging.getLogger("openmq_client").propagate = False
        key = (opts["command"], opts["object"])
        spec = COMMANDS.get(key)
        if spec is None:
            raise CommandError(self._unknown(key))
        self.what = f"{key[0]} {key[1]}"
        self._check(key, spec)
        self.host, self.port = parse_broker(opts["broker"])
        if opts["truststore"] and not opts["secure"]:
            raise CommandError("Error: -truststore goes with -secure (the ssladmin service)")
        try:
            context = admin_ssl_context(opts["truststore"]) if opts["secure"] else None
        except ConfigError as exc:
            raise CommandError(f"Error: {exc}") from exc
        if opts["passfile"]:
            password = read_passfile(opts["passfile"])
        else:
            try:
                password = getpass.getpass(f"Password for {opts['user']}: ")
            except (EOFError, KeyboardInterrupt):
                raise CommandError("Error: no password given (use -passfile FILE)") from None
        admin = BrokerAdmin(
            self.host, self.port, opts["user"], password, timeout=opts["timeout"], ssl=context
        )
        try:
            getattr(self, spec.handler)(admin)
        except Cancelled:
            self.say("Cancelled: nothing was changed.")
        except ActionError as exc:
            raise CommandError(f"Error {self.what}: {exc}") from exc
        except AdminError as exc:
            raise CommandError(
                f"Error {self.what}: {exc.text or 'failed'} (status {exc.status})"
            ) from exc
        except BrokerUnavailable as exc:
            raise CommandError(f"Error {self.what}: {exc}") from exc
        except (TimeoutError, OSError) as exc:
            raise CommandError(f"Error {self.what}: the broker did not answer: {exc}") from exc
        finally:
            admin.close()

    def _unknown(self, key: tuple[str, str]) -> str:
        objects = sorted({o for c, o in COMMANDS if c == key[0]})
        if not objects:
            verbs = ", ".join(sorted({c for c, _ in COMMANDS}))
            return f"Error: unknown subcommand {key[0]!r}; one of: {verbs}"
        return f"Error: imqcmd {key[0]} takes {' or '.join(objects)}, not {key[1]!r}"

    def _check(self, key: tuple[str, str], spec: Spec) -> None:
        """Refuse incomplete or bad options before anything is sent (or asked)."""
        opts = self.opts
        if key == ("list", "cxn") and opts["name"] and not opts["service"]:
            opts["service"] = opts["name"]  # `list cxn -n jms` as well as `-svn jms`
        missing = [NEEDS_TEXT[n] for n in spec.needs if not opts.get(n)]
        if missing:
            raise CommandError(f"Error: imqcmd {self.what} needs {' and '.join(missing)}")
        if opts["dest_type"] is not None and opts["dest_type"].lower() not in (
            "q",
            "t",
            "queue",
            "topic",
        ):
            raise CommandError(
                f"Error: -t must be q (queue) or t (topic), not {opts['dest_type']!r}"
            )
        if key == ("compact", "dst") and bool(opts["name"]) != bool(opts["dest_type"]):
            raise CommandError("Error: imqcmd compact dst takes both -t and -n, or neither")
        pst = opts["pause_type"].upper()
        if pst not in PAUSE_TYPES:
            raise CommandError(
                f"Error: -pst must be one of {', '.join(PAUSE_TYPES)}, not {opts['pause_type']!r}"
            )
        opts["pause_type"] = pst
        if opts["reset_type"].upper() not in ("METRICS", "ALL"):
            raise CommandError(f"Error: -rst must be METRICS or ALL, not {opts['reset_type']!r}")
        if key[0] == "metrics":
            kinds = METRIC_TYPES[key[1]]
            opts["metric_type"] = (opts["metric_type"] or "ttl").lower()
            if opts["metric_type"] not in kinds:
                raise CommandError(
                    f"Error: metrics {key[1]} -m takes {', '.join(kinds)}, not {opts['metric_type']!r}"
                )
            if opts["interval"] < 1:
                raise CommandError("Error: -int must be at least 1 (seconds)")
            if opts["samples"] == 0 or opts["samples"] < -1:
                raise CommandError("Error: -msp must be a positive number of samples")
        self.attrs = self._attributes(opts["attrs"])
        if key[0] in ("query", "destroy", "commit", "rollback") and key[1] in ("cxn", "txn"):
            try:
                int(opts["name"])
            except ValueError:
                what = "connection" if key[1] == "cxn" else "transaction"
                raise CommandError(
                    f"Error: -n must be a {what} ID (a number), not {opts['name']!r}"
                ) from None

    def _attributes(self, items: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise CommandError(f"Error: -o expects name=value, got {item!r}")
            out[name.strip()] = value.strip()
        return out

    # -- output --------------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        if not self.opts["silent"]:
            self.stdout.write(text)

    def show(self, table: Table, *, with_title: bool = True) -> None:
        for line in table.lines(with_title=with_title):
            self.say(line)

    def pairs(self, items: Sequence[tuple[str, object]]) -> None:
        width = max(len(k) for k, _ in items)
        for k, v in items:
            self.say(f"{k.ljust(width)}    {'' if v is None else v}".rstrip())

    def broker_info(self) -> None:
        table = Table(2, 4).title(("Host", "Primary Port"))
        table.add((self.host, self.port))
        self.show(table)
        self.say()

    def done(self) -> None:
        self.say()
        self.say(SUCCESS)

    def confirm(self, question: str) -> None:
        """OpenMQ's "Are you sure ...? (y/n)[n]" unless -f; no (the default) cancels."""
        if self.opts["force"]:
            return
        self.stdout.write(f"{question} (y/n)[n] ", ending="")
        self.stdout.flush()
        answer = sys.stdin.readline().strip().lower() or "n"
        if not sys.stdin.isatty():
            self.stdout.write("")  # the answer was not echoed: end the question's line
        if answer in ("y", "yes"):
            return
        if answer in ("n", "no"):
            raise Cancelled
        raise CommandError(f"Error: unrecognised answer {answer!r}; nothing was changed")

    @property
    def actor(self) -> str:
        return self.opts["user"]

    def dest(self) -> tuple[str, str, str]:
        """(name, kind code as the actions take it, "queue"/"topic")."""
        kind = self.opts["dest_type"].lower()[:1]
        return self.opts["name"], kind, "queue" if kind == "q" else "topic"

    # -- broker --------------------------------------------------------------------------

    def list_bkr(self, admin) -> None:
        from broker.admin.cluster_actions import list_brokers

        rows = list_brokers(admin)
        self.say("Listing all the brokers in the cluster that the following broker is a member of:")
        self.say()
        self.broker_info()
        if any(r["num_msgs"] is not None for r in rows):  # an HA cluster, as OpenMQ's
            table = Table(6, 3).title(
                (
                    "Broker ID",
                    "Address",
                    "State",
                    "Msgs in store",
                    "Taken over by",
                    "Since heartbeat",
                )
            )
            now = time.time() * 1000
            for r in rows:
                beat = r["status_timestamp"]
                since = f"{max(0.0, (now - beat) / 1000):.0f} s" if beat is not None else ""
                table.add(
                    (
                        r["broker_id"],
                        r["address"],
                        r["state"],
                        r["num_msgs"],
                        r["takeover_broker_id"] or "",
                        since,
                    )
                )
        else:
            table = Table(3, 4).title(("Address", "Instance Name", "State"))
            for r in rows:
                table.add((r["address"], r["instance"], r["state"]))
        self.show(table)
        self.done()

    def query_bkr(self, admin) -> None:
        from broker.admin import actions

        info = actions.query_broker(admin)
        props = info["properties"]
        self.say("Querying the broker specified by:")
        self.say()
        self.broker_info()

        def prop(name: str) -> str:
            return str(props.get(name, ""))

        # OpenMQ's rows, labels and order (CmdRunner.printDisplayableBrokerAttrs) ...
        items: list[tuple[str, object]] = [
            ("Version", info["version"] or "Version information not available"),
            ("Instance Name", info["instance"]),
            ("Broker ID", prop(imq.BROKER_ID.name)),
            ("Primary Port", info["port"]),
            ("Broker is Embedded", prop(imq.EMBEDDED)),
            ("Instance Configuration/Data Root Directory", prop(imq.VARHOME.name)),
            ("", ""),
            ("Current Number of Messages in System", info["messages"]),
            ("Current Total Message Bytes in System", info["message_bytes"]),
            ("", ""),
            ("Current Number of Messages in Dead Message Queue", prop(imq.DMQ_CURRENT_COUNT)),
            ("Current Total Message Bytes in Dead Message Queue", prop(imq.DMQ_CURRENT_SIZE)),
            ("", ""),
            ("Log Dead Messages", prop(imq.LOG_DEAD_MSGS.name)),
            (
                "Truncate Message Body in Dead Message Queue",
                prop(imq.DMQ_TRUNCATE_BODY.name),
            ),
            ("", ""),
            (
                "Max Number of Messages in System",
                unlimited_or_zero(prop(imq.SYSTEM_MAX_COUNT.name)),
            ),
            (
                "Max Total Message Bytes in System",
                unlimited_or_zero(prop(imq.SYSTEM_MAX_SIZE.name)),
            ),
            ("Max Message Size", unlimited_or_zero(prop(imq.MESSAGE_MAX_SIZE.name))),
            ("", ""),
            ("Auto Create Queues", prop(imq.AUTOCREATE_QUEUE.name)),
            ("Auto Create Topics", prop(imq.AUTOCREATE_TOPIC.name)),
            (
                "Auto Created Queue Max Number of Active Consumers",
                unlimited(prop(imq.AUTOCREATE_QUEUE_MAX_ACTIVE.name)),
            ),
            (
                "Auto Created Queue Max Number of Backup Consumers",
                unlimited(prop(imq.AUTOCREATE_QUEUE_MAX_BACKUP.name)),
            ),
            ("Auto Created Destination useDMQ", prop(imq.AUTOCREATE_USE_DMQ.name)),
            ("", ""),
            ("Cluster ID", prop(imq.CLUSTER_ID.name)),
            ("Cluster is Highly Available", str(props.get(imq.CLUSTER_HA.name, "null"))),
            ("Cluster Broker List (active)", prop(imq.CLUSTER_BROKERLIST_ACTIVE)),
            ("Cluster Broker List (configured)", prop(imq.CLUSTER_BROKERLIST.name)),
            ("Cluster Master Broker", prop(imq.CLUSTER_MASTERBROKER.name)),
            ("Cluster URL", prop(imq.CLUSTER_URL.name)),
            ("", ""),
            ("Log Level", prop(".level") or prop(imq.LOG_LEVEL.name)),
            (
                "Log Rollover Interval (seconds)",
                unlimited_or_zero(prop(imq.LOG_ROLLOVER_SECS.name)),
            ),
            (
                "Log Rollover Size (bytes)",
                unlimited_or_zero(prop("java.util.logging.FileHandler.limit")),
            ),
            # ... then ours.
            ("", ""),
            ("Product", info["product"]),
            ("Broker State", info["state"]),
            ("Memory State", info["memory_state"]),
            ("Message Store", info["store"]),
            ("Current Number of Destinations", info["destinations"]),
            ("Current Number of Connections", info["connections"]),
        ]
        self.pairs(items)
        self.done()

    def update_bkr(self, admin) -> None:
        from broker.admin import actions

        self.say("Updating the broker specified by:")
        self.say()
        self.broker_info()
        self.pairs(list(self.attrs.items()))
        self.say()
        self.confirm("Are you sure you want to update the broker?")
        actions.update_broker(admin, self.actor, self.attrs)
        self.done()

    def _broker_op(self, question: str | None, doing: str, action: Callable[..., None]) -> None:
        self.say(f"{doing} the broker specified by:")
        self.say()
        self.broker_info()
        if question:
            self.confirm(question)
        action()
        self.done()

    def pause_bkr(self, admin) -> None:
        from broker.admin import actions

        self._broker_op(
            "Are you sure you want to pause the broker?",
            "Pausing",
            lambda: actions.pause_broker(admin, self.actor),
        )

    def resume_bkr(self, admin) -> None:
        from broker.admin import actions

        self._broker_op(None, "Resuming", lambda: actions.resume_broker(admin, self.actor))

    def quiesce_bkr(self, admin) -> None:
        from broker.admin import actions

        self._broker_op(
            "Are you sure you want to quiesce the broker?",
            "Quiescing",
            lambda: actions.quiesce_broker(admin, self.actor),
        )

    def unquiesce_bkr(self, admin) -> None:
        from broker.admin import actions

        self._broker_op(
            "Are you sure you want to unquiesce the broker?",
            "Unquiescing",
            lambda: actions.unquiesce_broker(admin, self.actor),
        )

    def shutdown_bkr(self, admin) -> None:
        from broker.admin import actions

        self._broker_op(
            "Are you sure you want to shutdown the broker?",
            "Shutting down",
            lambda: actions.shutdown_broker(
                admin, self.actor, no_failover=bool(self.opts.get("nofailover"))
            ),
        )

    def takeover_bkr(self, admin) -> None:
        from broker.admin import actions

        target = self.opts["name"]
        self._broker_op(
            f"Are you sure you want to take over broker {target}?",
            f"Taking over broker {target} with",
            lambda: actions.takeover_broker(admin, self.actor, target),
        )

    def restart_bkr(self, admin) -> None:
        from broker.admin import actions

        self._broker_op(
            "Are you sure you want to restart the broker?",
            "Restarting",
            lambda: actions.restart_broker(admin, self.actor),
        )

    def reset_bkr(self, admin) -> None:
        from broker.admin import actions

        self._broker_op(
            "Are you sure you want to reset the metrics of the broker?",
            "Resetting",
            lambda: actions.reset_metrics(admin, self.actor),
        )

    def reload_cls(self, admin) -> None:
        from broker.admin import actions

        self.say("Reloading the cluster configuration of the cluster the following broker is")
        self.say("a member of:")
        self.say()
        self.broker_info()
        changed = actions.reload_cluster(admin, self.actor)
        for what in ("added", "removed"):
            if changed[what]:
                self.say(f"Brokers {what}: {', '.join(changed[what])}")
        self.done()

    def reload_acl(self, admin) -> None:
        from broker.admin import actions

        self._broker_op(
            None,
            "Reloading the access control rules of",
            lambda: actions.reload_access_control(admin, self.actor),
        )

    # -- metrics -------------------------------------------------------------------------

    def metrics_bkr(self, admin) -> None:
        from broker.admin import actions

        self.say("Listing metrics for the broker specified by:")
        self.say()
        self.broker_info()
        self._metrics(lambda: actions.broker_metrics(admin), self._counter_table, self._counter_row)

    def metrics_svc(self, admin) -> None:
        from broker.admin import actions

        name = self.opts["name"]
        self.say("Listing metrics for the service:")
        self.say()
        self.show(self._one("Service Name", name))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        self._metrics(
            lambda: actions.service_metrics(admin, name), self._counter_table, self._counter_row
        )

    def metrics_dst(self, admin) -> None:
        from broker.admin import actions

        name, kind, _ = self.dest()
        self.say("Listing metrics for the destination:")
        self.say()
        self.show(self._dest_table(name, kind))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        self._metrics(
            lambda: actions.destination_metrics(admin, kind, name),
            self._dest_metric_table,
            self._dest_metric_row,
        )

    def _metrics(
        self,
        sample: Callable[[], dict[str, Any]],
        make_table: Callable[[], Table],
        make_row: Callable[[dict[str, Any], dict[str, Any] | None, float], list[str]],
    ) -> None:
        """OpenMQ's loop: a sample now and every -int seconds, one row each, the titles
        again every 20 rows, until -msp samples (or Ctrl-C)."""
        interval, samples = self.opts["interval"], self.opts["samples"]
        previous: dict[str, Any] | None = None
        previous_at = 0.0
        printed = 0
        try:
            while True:
                latest = sample()
                now = time.monotonic()
                secs = now - previous_at
                stamps = (num(latest, "timeStamp"), num(previous or {}, "timeStamp"))
                if previous is not None and stamps[0] > stamps[1] > 0:
                    secs = (stamps[0] - stamps[1]) / 1000  # the broker's own clock
                table = make_table()
                table.add(make_row(latest, previous, secs))
                self.show(table, with_title=printed % 20 == 0)
                self.stdout.flush()
                previous, previous_at = latest, now
                printed += 1
                if samples > 0 and printed >= samples:
                    break
                time.sleep(interval)
        except KeyboardInterrupt:
            pass
        self.done()

    def _counter_table(self) -> Table:
        kind = self.opts["metric_type"]
        table = Table(8 if kind != "cxn" else 6, 2, center=True)
        if kind == "cxn":
            table.title(
                ("Num of", "JVM Heap (in bytes)", "", "Threads", "", ""), (1, 2, 0, 3, 0, 0)
            )
            table.title(("Connections", "Total", "Free", "Active", "Low", "High"))
            return table
        if kind == "ttl":
            heads = ("Msgs", "Msg Bytes", "Pkts", "Pkt Bytes")
        else:
            heads = ("Msgs/sec", "Msg Bytes/sec", "Pkts/sec", "Pkt Bytes/sec")
        table.title([c for h in heads for c in (h, "")], (2, 0) * 4)
        table.title(("In", "Out") * 4)
        return table

    COUNTERS = (
        "messagesIn",
        "messagesOut",
        "messageBytesIn",
        "messageBytesOut",
        "packetsIn",
        "packetsOut",
        "packetBytesIn",
        "packetBytesOut",
    )

    def _counter_row(self, latest: dict, previous: dict | None, secs: float) -> list[str]:
        kind = self.opts["metric_type"]
        if kind == "cxn":
            return [
                str(num(latest, "nConnections")),
                str(num(latest, "totalMemory")),
                str(num(latest, "freeMemory")),
                str(num(latest, "threadsActive")),
                str(num(latest, "threadsLowWater")),
                str(num(latest, "threadsHighWater")),
            ]
        if kind == "ttl":
            return [str(num(latest, k)) for k in self.COUNTERS]
        if previous is None:
            return ["0"] * 8
        return [rate(num(latest, k), num(previous, k), secs) for k in self.COUNTERS]

    def _dest_metric_table(self) -> Table:
        kind = self.opts["metric_type"]
        if kind == "dsk":
            # OpenMQ's disk figures; here: all its bytes, those paged out of memory.
            table = Table(3, center=True)
            table.title(("Disk Reserved", "Disk Used", "Utilization Ratio"))
            return table
        if kind == "con":
            queue = self.dest()[1] == "q"
            heads = (
                ("Active Consumers", "Backup Consumers", "Msg Count")
                if queue
                else ("Consumers", "Msg Count")
            )
            table = Table(3 * len(heads), 2, center=True)
            table.title([c for h in heads for c in (h, "", "")], (3, 0, 0) * len(heads))
            table.title(("Current", "Peak", "Avg") * len(heads))
            return table
        table = Table(11, 2, center=True)
        first = ("Msgs", "Msg Bytes") if kind == "ttl" else ("Msgs/sec", "Msg Bytes/sec")
        table.title(
            (
                first[0],
                "",
                first[1],
                "",
                "Msg Count",
                "",
                "",
                "Total Msg Bytes (k)",
                "",
                "",
                "Largest",
            ),
            (2, 0, 2, 0, 3, 0, 0, 3, 0, 0, 1),
        )
        table.title(("In", "Out", "In", "Out") + ("Current", "Peak", "Avg") * 2 + ("Msg (k)",))
        return table

    def _dest_metric_row(self, latest: dict, previous: dict | None, secs: float) -> list[str]:
        kind = self.opts["metric_type"]
        if kind == "dsk":
            return [
                str(num(latest, "diskReserved")),
                str(num(latest, "diskUsed")),
                str(num(latest, "diskUtilizationRatio")),
            ]
        # DestMetricsCounters' map keys (numMsgsIn, msgBytesIn, numMsgs, peakNumMsgs, ...).
        counts = [
            str(num(latest, "numMsgs")),
            str(num(latest, "peakNumMsgs")),
            str(num(latest, "avgNumMsgs")),
        ]
        if kind == "con":
            if self.dest()[1] != "q":
                return [
                    str(num(latest, "numConsumers", "numActiveConsumers")),
                    str(num(latest, "peakNumConsumers", "peakNumActiveConsumers")),
                    str(num(latest, "avgNumConsumers", "avgNumActiveConsumers")),
                    *counts,
                ]
            return [
                str(num(latest, "numActiveConsumers")),
                str(num(latest, "peakNumActiveConsumers")),
                str(num(latest, "avgNumActiveConsumers")),
                str(num(latest, "numBackupConsumers")),
                str(num(latest, "peakNumBackupConsumers")),
                str(num(latest, "avgNumBackupConsumers")),
                *counts,
            ]
        flows = ("numMsgsIn", "numMsgsOut", "msgBytesIn", "msgBytesOut")
        if kind == "ttl":
            head = [str(num(latest, k)) for k in flows]
        elif previous is None:
            head = ["0"] * 4
        else:
            head = [rate(num(latest, k), num(previous, k), secs) for k in flows]
        sizes = [
            kbytes(num(latest, "totalMsgBytes")),
            kbytes(num(latest, "peakTotalMsgBytes")),
            kbytes(num(latest, "avgTotalMsgBytes")),
            kbytes(num(latest, "peakMsgBytes")),
        ]
        return head + counts + sizes

    # -- services ------------------------------------------------------------------------

    def _one(self, label: str, value: object) -> Table:
        table = Table(1, 4).title((label,))
        table.add((value,))
        return table

    @staticmethod
    def _port(svc: dict[str, Any]) -> str:
        if svc["port"] < 0:
            return "-"
        return f"{svc['port']} ({'dynamic' if svc['dynamic_port'] else 'static'})"

    def list_svc(self, admin) -> None:
        from broker.admin import actions

        rows = actions.list_services(admin)
        self.say("Listing all the services on the broker specified by:")
        self.say()
        self.broker_info()
        table = Table(3, 4).title(("Service Name", "Port Number", "Service State"))
        for s in rows:
            table.add((s["name"], self._port(s), s["state"]))
        self.show(table)
        self.done()

    def query_svc(self, admin) -> None:
        from broker.admin import actions

        s = actions.query_service(admin, self.opts["name"])
        self.say("Querying the service where:")
        self.say()
        self.show(self._one("Service Name", s["name"]))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        self.pairs(
            [
                ("Service Name", s["name"]),
                ("Service Type", s["type"]),
                ("Service Protocol", s["protocol"]),
                ("Service State", s["state"]),
                ("Port Number", self._port(s)),
                ("", ""),
                ("Current Number of Connections", s["connections"]),
                ("", ""),
                ("Min Number of Threads", s["min_threads"]),
                ("Max Number of Threads", s["max_threads"]),
            ]
        )
        self.done()

    def update_svc(self, admin) -> None:
        from broker.admin import actions

        name = self.opts["name"]
        values: dict[str, int] = {}
        for key, value in self.attrs.items():
            if key not in SERVICE_OPTIONS:
                raise CommandError(
                    f"Error update svc: unknown attribute {key!r}; one of port, minThreads, maxThreads"
                )
            try:
                values[SERVICE_OPTIONS[key]] = int(value)
            except ValueError:
                raise CommandError(
                    f"Error update svc: {key} must be a number, not {value!r}"
                ) from None
        self.say("Updating the service where:")
        self.say()
        self.show(self._one("Service Name", name))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        self.pairs(list(self.attrs.items()))
        self.say()
        self.confirm(f"Are you sure you want to update the service {name}?")
        actions.update_service(admin, self.actor, name, **values)
        self.done()

    def pause_svc(self, admin) -> None:
        from broker.admin import actions

        name = self.opts["name"]
        self.say("Pausing the service where:")
        self.say()
        self.show(self._one("Service Name", name))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        self.confirm(f"Are you sure you want to pause the service {name}?")
        actions.pause_service(admin, self.actor, name)
        self.done()

    def resume_svc(self, admin) -> None:
        from broker.admin import actions

        name = self.opts["name"]
        self.say("Resuming the service where:")
        self.say()
        self.show(self._one("Service Name", name))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        actions.resume_service(admin, self.actor, name)
        self.done()

    # -- connections ---------------------------------------------------------------------

    def list_cxn(self, admin) -> None:
        from broker.admin import actions

        service = self.opts["service"]
        rows = actions.list_connections(admin, service)
        if service:
            self.say("Listing all the connections on the service where:")
            self.say()
            self.show(self._one("Service Name", service))
            self.say()
            self.say("On the broker specified by:")
        else:
            self.say("Listing all the connections on the broker specified by:")
        self.say()
        self.broker_info()
        table = Table(6, 3).title(
            ("Connection ID", "User", "Service", "Producers", "Consumers", "Host")
        )
        for c in rows:
            table.add(
                (
                    c["id"],
                    c["user"],
                    c["service"],
                    c["producers"],
                    c["consumers"],
                    c["address"] or c["host"],
                )
            )
        self.show(table)
        self.done()

    def query_cxn(self, admin) -> None:
        from broker.admin import actions

        c = actions.query_connection(admin, int(self.opts["name"]))
        self.say("Querying the connection where:")
        self.say()
        self.show(self._one("Connection ID", self.opts["name"]))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        self.pairs(
            [
                ("Connection ID", c["id"]),
                ("User", c["user"]),
                ("Service", c["service"]),
                ("Client ID", c["client_id"]),
                ("Client Platform", c["platform"]),
                ("Producers", c["producers"]),
                ("Consumers", c["consumers"]),
                ("Sessions", c["sessions"]),
                ("Host", c["host"]),
                ("Port", c["port"]),
            ]
        )
        self.done()

    def destroy_cxn(self, admin) -> None:
        from broker.admin import actions

        cid = int(self.opts["name"])
        self.say("Destroying the connection where:")
        self.say()
        self.show(self._one("Connection ID", cid))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        self.confirm(f"Are you sure you want to destroy the connection {cid}?")
        actions.destroy_connection(admin, self.actor, cid)
        self.done()

    # -- destinations --------------------------------------------------------------------

    def _dest_table(self, name: str, kind: str) -> Table:
        table = Table(2, 4).title(("Destination Name", "Destination Type"))
        table.add((name, "Queue" if kind == "q" else "Topic"))
        return table

    def _dest_header(self, doing: str) -> None:
        name, kind, _ = self.dest()
        self.say(f"{doing} the destination where:")
        self.say()
        self.show(self._dest_table(name, kind))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()

    def list_dst(self, admin) -> None:
        from broker.admin import actions

        kind = self.opts["dest_type"]
        rows = actions.list_destinations(admin, kind=kind, show_temporary=self.opts["temporary"])
        self.say("Listing all the destinations on the broker specified by:")
        self.say()
        self.broker_info()
        # OpenMQ 6.9's columns; a temporary destination (listed with -tmp only) is typed
        # "Queue (temporary)" as CmdRunner.listDests does.
        table = Table(12, 2).title(
            ("Name", "Type", "State", "Producers", "", "Consumers", "", "Msgs", "", "", "", ""),
            (1, 1, 1, 2, 0, 2, 0, 5, 0, 0, 0, 0),
        )
        table.title(
            (
                "",
                "",
                "",
                "Total",
                "Wildcard",
                "Total",
                "Wildcard",
                "Count",
                "Remote",
                "UnAck",
                "InDelay",
                "Avg Size",
            )
        )
        for d in rows:
            count = d["messages"] - d["in_transaction"]
            avg = d["bytes"] / count if count > 0 else 0.0
            kind = d["type"].capitalize()
            table.add(
                (
                    d["name"],
                    f"{kind} (temporary)" if d["temporary"] else kind,
                    d["state"],
                    d["producers"],
                    0 if d["type"] == "topic" else "-",
                    d["consumers"],
                    0 if d["type"] == "topic" else "-",
                    count,
                    0,
                    d["unacked"],
                    d["in_delay"],
                    f"{avg:.1f}",
                )
            )
        self.show(table)
        self.done()

    def list_cns(self, admin) -> None:
        from broker.admin import actions

        name, kind, _ = self.dest()
        rows = actions.list_consumers(admin, kind, name)
        self._dest_header("Listing the consumers of")
        table = Table(8, 3).title(
            ("Consumer ID", "Connection ID", "User", "Host", "Ack Mode", "Selector",
             "Delivered", "Unacked"),
        )  # fmt: skip
        for c in rows:
            table.add(
                (
                    c["id"],
                    c["connection_id"],
                    c["user"] or "-",
                    c["host"] or "-",
                    c["ack_mode"] or "-",
                    c["selector"] or "-",
                    c["delivered"],
                    c["pending_acks"],
                )
            )
        self.show(table)
        self.done()

    def query_dst(self, admin) -> None:
        from broker.admin import actions

        name, kind, _ = self.dest()
        d = actions.query_destination(admin, kind, name)
        a = d["attributes"] or {}
        self._dest_header("Querying")
        items: list[tuple[str, object]] = [
            ("Destination Name", d["name"]),
            ("Destination Type", d["type"].capitalize()),
            ("Destination State", d["state"]),
            ("Created Administratively", yes_no(not d["auto_created"])),
            ("", ""),
            ("Current Number of Messages", ""),
            ("   Actual", d["messages"]),
            ("   Held in Transaction", d["in_transaction"]),
            ("   In Delayed Delivery", d["in_delay"]),
            ("   Unacknowledged", d["unacked"]),
            ("   Paged Out to Disk", d["paged"]),
            ("Current Message Bytes", ""),
            ("   Actual", d["bytes"]),
            ("   Paged Out to Disk", d["paged_bytes"]),
            ("", ""),
            ("Current Number of Producers", d["producers"]),
            ("Current Number of Active Consumers", d["active_consumers"]),
            ("Current Number of Backup Consumers", d["backup_consumers"]),
            ("Current Number of Consumers", d["consumers"]),
            ("", ""),
            ("Max Number of Messages", unlimited(a.get("maxNumMsgs"))),
            ("Max Total Message Bytes", unlimited(a.get("maxTotalMsgBytes"))),
            ("Max Bytes per Message", unlimited(a.get("maxBytesPerMsg"))),
            ("Max Number of Producers", unlimited(a.get("maxNumProducers"))),
        ]
        if d["type"] == "queue":
            items += [
                ("Max Number of Active Consumers", unlimited(a.get("maxNumActiveConsumers"))),
                ("Max Number of Backup Consumers", unlimited(a.get("maxNumBackupConsumers"))),
                ("Local Delivery is Preferred", yes_no(a.get("localDeliveryPreferred"))),
            ]
        else:
            items += [
                ("Max Number of Shared Consumers", unlimited(a.get("maxNumSharedConsumers"))),
                ("Shared Consumer Flow Limit", unlimited(a.get("sharedConsumerFlowLimit"))),
            ]
        items += [
            ("Consumer Flow Limit", unlimited(a.get("consumerFlowLimit"))),
            ("Limit Behavior", a.get("limitBehavior", "")),
            ("Local Only", yes_no(a.get("isLocalOnly"))),
            ("Use Dead Message Queue", yes_no(a.get("useDMQ", True))),
            ("XML schema validation enabled", yes_no(a.get("validateXMLSchemaEnabled"))),
            ("XML schema URI List", a.get("XMLSchemaURIList") or "-"),
            ("Reload XML schema on failure", yes_no(a.get("reloadXMLSchemaOnFailure"))),
        ]
        self.pairs(items)
        self.done()

    def create_dst(self, admin) -> None:
        from broker.admin import actions

        name, kind, _ = self.dest()
        self._dest_header("Creating")
        if self.attrs:
            self.say("With the attributes:")
            self.pairs(list(self.attrs.items()))
            self.say()
        actions.create_destination(admin, self.actor, kind, name, self.attrs)
        self.done()

    def update_dst(self, admin) -> None:
        from broker.admin import actions

        name, kind, what = self.dest()
        self._dest_header("Updating")
        self.say("With the attributes:")
        self.pairs(list(self.attrs.items()))
        self.say()
        self.confirm(f"Are you sure you want to update this {what}: {name}?")
        actions.update_destination(admin, self.actor, kind, name, self.attrs)
        self.done()

    def destroy_dst(self, admin) -> None:
        from broker.admin import actions

        name, kind, what = self.dest()
        self._dest_header("Destroying")
        self.confirm(f"Are you sure you want to destroy this {what}: {name}?")
        actions.destroy_destination(admin, self.actor, kind, name)
        self.done()

    def purge_dst(self, admin) -> None:
        from broker.admin import actions

        name, kind, what = self.dest()
        self._dest_header("Purging")
        self.confirm(f"Are you sure you want to purge this {what}: {name}?")
        actions.purge_destination(admin, self.actor, kind, name)
        self.done()

    def pause_dst(self, admin) -> None:
        from broker.admin import actions

        name, kind, what = self.dest()
        pst = self.opts["pause_type"]
        self._dest_header(f"Pausing ({pst})")
        self.confirm(f"Are you sure you want to pause ({pst}) this {what}: {name}?")
        actions.pause_destination(admin, self.actor, kind, name, pst.lower())
        self.done()

    def resume_dst(self, admin) -> None:
        from broker.admin import actions

        name, kind, _ = self.dest()
        self._dest_header("Resuming")
        actions.resume_destination(admin, self.actor, kind, name)
        self.done()

    def compact_dst(self, admin) -> None:
        from broker.admin import actions

        if self.opts["name"]:
            name, kind, what = self.dest()
            self._dest_header("Compacting")
            self.confirm(f"Are you sure you want to compact this {what}: {name}?")
            actions.compact_destination(admin, self.actor, kind, name)
        else:
            self.say("Compacting all the destinations on the broker specified by:")
            self.say()
            self.broker_info()
            self.confirm("Are you sure you want to compact all the destinations?")
            actions.compact_destination(admin, self.actor)
        self.done()

    # -- durable subscriptions ---------------------------------------------------------

    def list_dur(self, admin) -> None:
        from broker.admin import actions

        topic = self.opts["topic"]
        rows = actions.list_durables(admin, topic)
        if topic:
            self.say(f"Listing all the durable subscriptions on the topic: {topic}")
        else:
            self.say("Listing all the durable subscriptions")
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()
        table = Table(5, 3).title(
            ("Name", "Client ID", "Topic", "Number of Messages", "Durable Sub State")
        )
        for d in rows:
            state = "ACTIVE" if d["active"] else "INACTIVE"
            table.add((d["name"], d["client_id"] or "-", d["topic"] or "-", d["messages"], state))
        self.show(table)
        self.done()

    def _dur_header(self, doing: str) -> None:
        self.say(f"{doing} the durable subscription where:")
        self.say()
        table = Table(2, 4).title(("Durable Subscription Name", "Client ID"))
        table.add((self.opts["name"], self.opts["client_id"]))
        self.show(table)
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()

    def purge_dur(self, admin) -> None:
        from broker.admin import actions

        name, cid = self.opts["name"], self.opts["client_id"]
        self._dur_header("Purging all the messages of")
        self.confirm(f"Are you sure you want to purge the durable subscription {name} ({cid})?")
        actions.purge_durable(admin, self.actor, name, cid)
        self.done()

    def destroy_dur(self, admin) -> None:
        from broker.admin import actions

        name, cid = self.opts["name"], self.opts["client_id"]
        self._dur_header("Destroying")
        self.confirm(f"Are you sure you want to destroy the durable subscription {name} ({cid})?")
        actions.destroy_durable(admin, self.actor, name, cid)
        self.done()

    # -- transactions ------------------------------------------------------------------

    @staticmethod
    def _created(txn: dict[str, Any]) -> str:
        if not txn["created"]:
            return "-"
        when = datetime.fromisoformat(txn["created"]).astimezone(UTC)
        return when.strftime("%Y-%m-%d %H:%M:%S UTC")

    def list_txn(self, admin) -> None:
        from broker.admin import actions

        rows = actions.list_transactions(admin)
        self.say("Listing all the transactions on the broker specified by:")
        self.say()
        self.broker_info()
        if not rows:
            self.say("There are no transactions.")
            self.done()
            return
        table = Table(5, 3).title(
            ("Transaction ID", "State", "User name", "# Msgs/# Acks", "Creation time")
        )
        for t in rows:
            table.add(
                (
                    t["id"],
                    t["state"],
                    t["user"] or "-",
                    f"{t['messages']}/{t['acks']}",
                    self._created(t),
                )
            )
        self.show(table)
        self.done()

    def _txn_header(self, doing: str) -> None:
        self.say(f"{doing} the transaction where:")
        self.say()
        self.show(self._one("Transaction ID", self.opts["name"]))
        self.say()
        self.say("On the broker specified by:")
        self.say()
        self.broker_info()

    def query_txn(self, admin) -> None:
        from broker.admin import actions

        t = actions.query_transaction(admin, int(self.opts["name"]))
        self._txn_header("Querying")
        self.pairs(
            [
                ("Transaction ID", t["id"]),
                ("XID", t["xid"] or "-"),
                ("State", t["state"]),
                ("User name", t["user"] or "-"),
                ("Client ID", t["client_id"] or "-"),
                ("Connection", t["connection"] or "-"),
                ("Connection ID", t["connection_id"] or "-"),
                ("Number of messages", t["messages"]),
                ("Number of acknowledgments", t["acks"]),
                ("Creation time", self._created(t)),
            ]
        )
        self.done()

    def commit_txn(self, admin) -> None:
        from broker.admin import actions

        tid = int(self.opts["name"])
        self._txn_header("Committing")
        self.confirm(f"Are you sure you want to commit the transaction {tid}?")
        actions.commit_transaction(admin, self.actor, tid)
        self.done()

    def rollback_txn(self, admin) -> None:
        from broker.admin import actions

        tid = int(self.opts["name"])
        self._txn_header("Rolling back")
        self.confirm(f"Are you sure you want to roll back the transaction {tid}?")
        actions.rollback_transaction(admin, self.actor, tid)
        self.done()
