"""``python manage.py imqacl``: the access control rules in the database.

* ``imqacl import FILE [--merge]``: load an ``accesscontrol.properties`` file (replacing
  the stored rules unless ``--merge``);
* ``imqacl export [FILE]``: write the rules in that format (stdout by default);
* ``imqacl list``: one ``key=value`` per line;
* ``imqacl set KEY VALUE`` / ``imqacl delete KEY``: change one rule.

``-name INSTANCE`` works on the rules of one broker instance instead of those for all
brokers.  Running brokers pick changes up within seconds.  Every change is one call of
the action layer (:mod:`broker.admintools.security_actions`) that the portal and the REST API
call too, recorded in the log with the operating-system user who ran the command; a file
that is not all rules (or lacks the version line for all brokers) is refused whole.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from broker.admintools import security_actions as sec
from broker.admintools.actions import ActionError


class Command(BaseCommand):
    help = "Import, export, list and change the access control rules (accesscontrol.properties)."
    # A command-line tool: the portal's URL checks are not its business.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("subcommand", choices=["import", "export", "list", "set", "delete"])
        parser.add_argument("args", nargs="*")
        parser.add_argument(
            "--merge", action="store_true", help="import: keep rules not in the file"
        )
        parser.add_argument(
            "-name", dest="instance", default="", help="rules of one broker instance only"
        )

    def handle(self, *args, **opts) -> None:
        sub = opts["subcommand"]
        instance = opts["instance"] or ""
        want = {"import": (1, 1), "export": (0, 1), "list": (0, 0), "set": (2, 2), "delete": (1, 1)}
        lo, hi = want[sub]
        if not lo <= len(args) <= hi:
            raise CommandError(f"imqacl {sub}: wrong number of arguments")
        self.actor = sec.command_line_actor("imqacl")
        try:
            getattr(self, f"do_{sub}")(list(args), opts, instance)
        except (ActionError, ValueError) as exc:
            raise CommandError(str(exc)) from exc

    def do_import(self, args: list[str], opts, instance: str) -> None:
        path = args[0]
        try:
            data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
        n = sec.import_rules_file(self.actor, text, replace=not opts["merge"], instance=instance)
        self.stdout.write(f"{n} rule(s) imported from {path}")

    def do_export(self, args: list[str], opts, instance: str) -> None:
        text = sec.export_rules_file(instance)
        if not args or args[0] == "-":
            self.stdout.write(text, ending="")
            return
        try:
            Path(args[0]).write_text(text, encoding="ascii")
        except OSError as exc:
            raise CommandError(f"cannot write {args[0]}: {exc}") from exc

    def do_list(self, args: list[str], opts, instance: str) -> None:
        for row in sec.rules_queryset(instance=instance):
            self.stdout.write(f"{row.key}={row.value}")

    def do_set(self, args: list[str], opts, instance: str) -> None:
        sec.set_rule(self.actor, args[0], args[1], instance=instance)

    def do_delete(self, args: list[str], opts, instance: str) -> None:
        sec.delete_rule(self.actor, args[0], instance=instance)
