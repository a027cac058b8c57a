"""``python manage.py imqusermgr``: OpenMQ's user manager, over the shared database.

Subcommands as OpenMQ's ``imqusermgr``:

* ``add -u NAME -p PASSWORD [-g admin|user|anonymous]``
* ``delete -u NAME``
* ``list [-u NAME]``
* ``update -u NAME [-p PASSWORD] [-a true|false] [-g GROUP]``

and ours, to move users between a passwd file (docs/developers/protocol.md) and the database:

* ``import FILE``: load the file's users (hashes, group, active state)
* ``export FILE``: write the database's users in passwd format (``-`` = standard output)

``-f`` skips the confirmation question.  Every change is one call of the action layer
(:mod:`broker.admintools.security_actions`) that the portal and the REST API call too: it is
recorded in the log with the operating-system user who ran the command, the last active
administrator cannot be deleted, disabled or moved out of group ``admin``, and a user who
loses the administrator rights loses the portal and the REST API at once.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker.admintools import security_actions as sec

ROLES = ("admin", "user", "anonymous")


def _bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise CommandError(f"-a expects true or false, got {value!r}")


class Command(BaseCommand):
    help = (
        "Manage the broker's users (OpenMQ imqusermgr): add, delete, list, update, import, export."
    )
    # A command-line tool: the portal's URL checks are not its business.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "subcommand", choices=["add", "delete", "list", "update", "import", "export"]
        )
        parser.add_argument("file", nargs="?", help="passwd file (import, export)")
        parser.add_argument("-u", dest="user", help="user name")
        parser.add_argument("-p", dest="password", help="password")
        parser.add_argument("-g", dest="group", help="group: admin, user or anonymous")
        parser.add_argument("-a", dest="active", help="true (active) or false (inactive)")
        parser.add_argument("-i", dest="instance", help="broker instance (for the listing title)")
        parser.add_argument(
            "-f", dest="force", action="store_true", help="do not ask for confirmation"
        )

    def handle(self, *args, **opts) -> None:
        from broker.admintools.actions import ActionError
        from broker.admintools.security_actions import command_line_actor
        from broker.security import users

        sub = opts["subcommand"]
        self.opts = opts
        self.actor = command_line_actor("imqusermgr")
        try:
            getattr(self, f"do_{sub}")(users, opts)
        except (users.UserError, ActionError) as exc:
            raise CommandError(str(exc)) from exc

    # -- helpers --------------------------------------------------------------------------

    def _need_user(self, opts) -> str:
        if not opts["user"]:
            raise CommandError(f"imqusermgr {opts['subcommand']} needs -u <user name>")
        return opts["user"]

    def _role(self, users, group: str, username: str) -> str:
        if group not in ROLES:
            raise CommandError(f"group must be one of {', '.join(ROLES)}, not {group!r}")
        if group == users.ANONYMOUS_GROUP:
            others = [
                r.username
                for r in users.list_users()
                if users.ANONYMOUS_GROUP in r.groups and r.username != username
            ]
            if others:
                raise CommandError(f"there can be only one anonymous user ({others[0]})")
        return group

    def _confirm(self, question: str) -> bool:
        if self.opts["force"]:
            return True
        self.stdout.write(f"{question} (y/n)[n] ", ending="")
        self.stdout.flush()
        answer = sys.stdin.readline().strip().lower()
        return answer in ("y", "yes")

    # -- subcommands ----------------------------------------------------------------------

    def do_add(self, users, opts) -> None:
        name = self._need_user(opts)
        if not opts["password"]:
            raise CommandError("imqusermgr add needs -p <password>")
        group = self._role(users, opts["group"] or users.USER_GROUP, name)
        active = _bool(opts["active"]) if opts["active"] else True
        sec.create_user(self.actor, name, opts["password"], [group], active=active)
        self.stdout.write(f"User {name} successfully added.")

    def do_delete(self, users, opts) -> None:
        name = self._need_user(opts)
        sec.get_user(name)  # NotFound before asking
        if not self._confirm(f"Are you sure you want to delete user {name}?"):
            self.stdout.write("User not deleted.")
            return
        sec.delete_user(self.actor, name)
        self.stdout.write(f"User {name} successfully deleted.")

    def do_update(self, users, opts) -> None:
        name = self._need_user(opts)
        if not (opts["password"] or opts["active"] or opts["group"]):
            raise CommandError("imqusermgr update needs -p <password>, -a true|false or -g <group>")
        sec.get_user(name)  # NotFound before asking
        if opts["group"]:
            self._role(users, opts["group"], name)
        active = _bool(opts["active"]) if opts["active"] else None
        if not self._confirm(f"Are you sure you want to update user {name}?"):
            self.stdout.write("User not updated.")
            return
        sec.update_user(
            self.actor,
            name,
            password=opts["password"] or None,
            groups=[opts["group"]] if opts["group"] else None,
            active=active,
        )
        self.stdout.write(f"User {name} successfully updated.")

    def do_list(self, users, opts) -> None:
        records = users.list_users(opts["user"] or None)
        instance = opts["instance"] or settings.IMQ_INSTANCE
        rule = "-" * 52
        self.stdout.write(f"User repository for broker instance: {instance}")
        self.stdout.write(rule)
        self.stdout.write(f"{'User Name':<20}{'Group':<20}Active State")
        self.stdout.write(rule)
        for r in records:
            group = ",".join(sorted(r.groups)) or "-"
            self.stdout.write(f"{r.username:<20}{group:<20}{'true' if r.active else 'false'}")

    def do_import(self, users, opts) -> None:
        if not opts["file"]:
            raise CommandError("imqusermgr import needs a passwd file")
        try:
            text = Path(opts["file"]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {opts['file']}: {exc}") from exc
        created, updated = sec.import_users_passwd(self.actor, text)
        self.stdout.write(
            f"Imported {len(created) + len(updated)} users from {opts['file']} "
            f"({len(created)} added, {len(updated)} updated)."
        )

    def do_export(self, users, opts) -> None:
        if not opts["file"]:
            raise CommandError("imqusermgr export needs a file name (- for standard output)")
        text = users.export_passwd()
        if opts["file"] == "-":
            self.stdout.write(text, ending="")
            return
        path = Path(opts["file"])
        if path.exists() and not self._confirm(f"Overwrite {path}?"):
            self.stdout.write("Nothing exported.")
            return
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc}") from exc
        self.stdout.write(f"Exported {text.count(chr(10))} users to {path}.")
