"""``python manage.py definitions``: the broker's whole configuration as one JSON document.

* ``definitions export [FILE]``: destinations, groups, users (stored credentials, never
  plain passwords), access rules and run-time broker properties (stdout by default);
* ``definitions import FILE [--dry-run]``: validate the document (every error listed,
  nothing changed), then apply it all or nothing; ``--dry-run`` prints what would change.

The broker is the one the portal administers (``IMQ_BROKER_HOST``/``IMQ_PORT``, logged in
as :func:`broker.admintools.credentials.broker_credentials` says) unless ``-b host:port``, ``-u`` and
``-passfile`` (a line ``imq.imqcmd.password=...``) say otherwise.  Both are calls of
:mod:`broker.admintools.definitions`, as the portal and the REST API make them; an import is
recorded in the log with the operating-system user who ran the command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker.admintools import definitions
from broker.admintools.actions import ActionError
from broker.admintools.broker_handle import BrokerAdmin, BrokerUnavailable
from broker.admintools.client import AdminError
from broker.admintools.credentials import CredentialsError, broker_credentials
from broker.admintools.security_actions import command_line_actor


def _password(path: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "imq.imqcmd.password":
                return value.strip()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc}") from exc
    raise CommandError(f"{path} has no line imq.imqcmd.password=...")


class Command(BaseCommand):
    help = "Export or import the broker's definitions (one JSON document)."
    # As the other command-line tools: Django's system checks import the portal's URLs
    # (about a second of every run) and find nothing a definitions file depends on.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("subcommand", choices=["export", "import"])
        parser.add_argument("file", nargs="?", default="-")
        parser.add_argument("--dry-run", action="store_true", help="import: only report")
        parser.add_argument("-b", dest="address", help="broker host:port (the port mapper)")
        parser.add_argument("-u", dest="user", help="administrator user name")
        parser.add_argument("-passfile", dest="passfile", help="file with imq.imqcmd.password=")

    def handle(self, *args, **opts) -> None:
        host, port = settings.IMQ_BROKER_HOST, int(settings.IMQ_BROKER_PORT)
        if opts["address"]:
            h, _, p = opts["address"].rpartition(":")
            host, port = (h or "localhost"), int(p) if p.isdigit() else port
        if opts["user"] or opts["passfile"]:
            user = opts["user"] or "admin"
            password = _password(opts["passfile"]) if opts["passfile"] else "admin"
            admin = BrokerAdmin(host, port, user, password)
        else:
            try:
                creds = broker_credentials()
            except CredentialsError as exc:
                raise CommandError(str(exc)) from exc
            admin = BrokerAdmin(host, port, creds.user, creds.password, source=creds.source)
        try:
            if opts["subcommand"] == "export":
                self.export(admin, opts["file"])
            else:
                self.import_(admin, opts["file"], opts["dry_run"])
        except definitions.DefinitionsError as exc:
            raise CommandError(
                "the definitions were refused, nothing changed:\n  " + "\n  ".join(exc.errors)
            ) from exc
        except AdminError as exc:  # the broker refused a step; the others were undone
            raise CommandError(f"the broker refused: {exc}") from exc
        except (ActionError, BrokerUnavailable, OSError) as exc:
            raise CommandError(str(exc)) from exc
        finally:
            admin.close()

    def export(self, admin: BrokerAdmin, path: str) -> None:
        text = json.dumps(definitions.export_definitions(admin), indent=2) + "\n"
        if path == "-":
            self.stdout.write(text, ending="")
        else:
            Path(path).write_text(text, encoding="utf-8")
            self.stderr.write(f"definitions written to {path}")

    def import_(self, admin: BrokerAdmin, path: str, dry_run: bool) -> None:
        raw = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise CommandError(f"{path} is not JSON: {exc}") from exc
        result = definitions.import_definitions(
            admin, command_line_actor("definitions"), doc, dry_run=dry_run
        )
        for c in result["changes"]:
            if c["op"] != "unchanged":
                detail = f" ({c['detail']})" if c["detail"] else ""
                self.stdout.write(f"{c['op']:7} {c['section']}: {c['name']}{detail}")
        s = result["summary"]
        self.stdout.write(
            f"{s['create']} created, {s['update']} updated, {s['unchanged']} unchanged"
            f" ({'dry run: nothing changed' if dry_run else 'applied'})"
        )
