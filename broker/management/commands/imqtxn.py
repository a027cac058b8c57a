"""``python manage.py imqtxn``: the transactions an administrator must see.

* ``imqtxn list [-name INSTANCE]``: the open XA, PREPARED and in-doubt transactions the
  broker instance recorded in the shared data model;
* ``imqtxn commit -t ID`` / ``imqtxn rollback -t ID``: finish one through the running
  broker's ADMIN service (port mapper ``-b host:port``, default localhost:7676), as an
  administrator (``-u admin``, password from ``-passfile`` or the prompt), with the same
  actions as ``imqcmd commit txn`` / ``rollback txn`` (broker/admintools/actions/transactions.py).  The
  broker lets an administrator finish a PREPARED transaction whoever started it.
"""

from __future__ import annotations

import getpass
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker import props
from broker.admintools.actions import ActionError, AdminError, BrokerUnavailable
from broker.admintools.actions.transactions import commit_transaction, rollback_transaction

PASSFILE_KEY = props.IMQCMD_PASSWORD.name


def read_passfile(path: str) -> str:
    """The password in an OpenMQ passfile (``imq.imqcmd.password=...``)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CommandError(f"cannot read passfile {path}: {exc}") from exc
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    for line in lines:
        name, sep, value = line.partition("=")
        if sep and name.strip() == PASSFILE_KEY:
            return value.strip()
    raise CommandError(f"passfile {path} has no {PASSFILE_KEY}=... line")


def parse_broker(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        return value or "localhost", 7676
    try:
        return host or "localhost", int(port)
    except ValueError:
        raise CommandError(f"-b expects host:port, got {value!r}") from None


class Command(BaseCommand):
    help = "List the broker's XA/prepared transactions, or commit or roll one back."
    # A command-line tool: the portal's URL checks are not its business.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("subcommand", choices=["list", "commit", "rollback"])
        parser.add_argument("-t", dest="txn_id", type=int, help="transaction id (JMQTransactionID)")
        parser.add_argument("-name", dest="instance", help="broker instance (list)")
        parser.add_argument("-b", dest="broker", default="localhost:7676", help="host:port")
        parser.add_argument("-u", dest="user", default="admin", help="administrator user")
        parser.add_argument("-passfile", dest="passfile", help="file with imq.imqcmd.password")
        parser.add_argument(
            "-f", dest="force", action="store_true", help="do not ask for confirmation"
        )

    def handle(self, *args, **opts) -> None:
        if opts["subcommand"] == "list":
            self.list_transactions(opts["instance"] or settings.IMQ_INSTANCE)
            return
        if opts["txn_id"] is None:
            raise CommandError(f"imqtxn {opts['subcommand']} needs -t <transaction id>")
        self.finish(opts)

    # -- list --------------------------------------------------------------------------

    def list_transactions(self, instance: str) -> None:
        from broker.models import BrokerTransaction

        rows = list(BrokerTransaction.objects.filter(broker_instance=instance))
        header = ("Transaction ID", "State", "XA", "In doubt", "User", "Client ID", "Xid")
        table = [
            (
                str(r.txn_id),
                r.state,
                "yes" if r.is_xa else "no",
                "yes" if r.in_doubt else "no",
                r.user or "-",
                r.client_id or "-",
                r.xid or "-",
            )
            for r in rows
        ]
        widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
        self.stdout.write(f"Transactions on broker {instance}: {len(table)}")
        line = "-" * (sum(widths) + 2 * (len(widths) - 1))
        self.stdout.write(line)
        for i, cells in enumerate([header, *table]):
            text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
            self.stdout.write(text.rstrip())
            if i == 0:
                self.stdout.write(line)

    # -- commit / rollback ------------------------------------------------------------

    def finish(self, opts: dict) -> None:
        """Commit or roll back through the action layer (the admin protocol's
        COMMIT/ROLLBACK_TRANSACTION, as imqcmd commit/rollback txn), as the -u user."""
        from broker.admintools.broker_handle import BrokerAdmin

        what = opts["subcommand"]
        tid = opts["txn_id"]
        host, port = parse_broker(opts["broker"])
        password = read_passfile(opts["passfile"]) if opts["passfile"] else None
        if password is None:
            password = getpass.getpass(f"Password for {opts['user']}: ")
        action = commit_transaction if what == "commit" else rollback_transaction
        admin = BrokerAdmin(host, port, opts["user"], password)
        try:
            action(admin, opts["user"], tid)
        except AdminError as exc:
            raise CommandError(f"could not {what} transaction {tid}: {exc}") from exc
        except (ActionError, BrokerUnavailable) as exc:
            raise CommandError(f"could not {what} transaction {tid}: {exc}") from exc
        finally:
            admin.close()
        done = "committed" if what == "commit" else "rolled back"
        self.stdout.write(f"Transaction {tid} {done}.")
