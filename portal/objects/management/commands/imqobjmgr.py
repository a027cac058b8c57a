"""``python manage.py imqobjmgr``: OpenMQ's object manager for administered objects.

Subcommands and options as OpenMQ's ``imqobjmgr``:

* ``add -t TYPE -l LOOKUPNAME [-o attr=value ...] [-r true|false] [-j prop=value ...]``
* ``delete -l LOOKUPNAME [-t TYPE] [-j ...]``
* ``list [-t TYPE] [-j ...]``
* ``query -l LOOKUPNAME [-t TYPE] [-j ...]``
* ``update -l LOOKUPNAME [-t TYPE] [-o attr=value ...] [-r true|false] [-j ...]``

TYPE is ``q`` (Queue), ``t`` (Topic), ``cf`` (ConnectionFactory) or ``xcf``
(XAConnectionFactory).  ``-j`` names the object store (``java.naming.factory.initial``,
``java.naming.provider.url``, ``java.naming.security.*``); without it the objects are kept
in the database only.  ``-f`` answers the questions with yes, ``-s`` prints nothing but
errors, ``-pre`` shows what would be done and changes nothing, ``-i FILE`` reads the
command from a properties file (``cmdtype``, ``obj.type``, ``obj.lookupName``,
``obj.readOnly``, ``obj.attrs.NAME``, ``objstore.attrs.NAME``, ``force``, ``silent``,
``preview``); the command line wins over the file.  Every change is one call of
:mod:`portal.objects.actions`, as the portal and the REST API make it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

SUBCOMMANDS = ("add", "delete", "list", "query", "update")


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CommandError(f"{option} expects name=value, not {item!r}")
        out[name.strip()] = value
    return out


def _bool(value: str, option: str) -> bool:
    v = str(value).strip().lower()
    if v == "true":
        return True
    if v == "false":
        return False
    raise CommandError(f"{option} expects true or false, not {value!r}")


class Command(BaseCommand):
    help = (
        "Manage administered objects (OpenMQ imqobjmgr): add, delete, list, query, update "
        "connection factories, queues and topics in a JNDI object store."
    )
    # A command-line tool: the portal's URL checks are not its business.
    requires_system_checks: list[str] = []
    # The object's attributes (-o) and the object store's (-j), set by handle().
    attrs: dict[str, str]
    store_props: dict[str, str]

    def add_arguments(self, parser) -> None:
        parser.add_argument("subcommand", nargs="?", choices=SUBCOMMANDS)
        parser.add_argument("-t", dest="type", help="object type: q, t, cf or xcf")
        parser.add_argument("-l", dest="lookup", help="lookup name (LDAP: cn=NAME)")
        parser.add_argument(
            "-o", dest="attrs", action="append", help="object attribute name=value (repeat)"
        )
        parser.add_argument(
            "-j", dest="store", action="append", help="object store property name=value (repeat)"
        )
        parser.add_argument("-r", dest="read_only", help="read-only: true or false")
        parser.add_argument("-i", dest="input", help="read the command from this properties file")
        parser.add_argument("-f", dest="force", action="store_true", help="do not ask")
        parser.add_argument("-s", dest="silent", action="store_true", help="silent mode")
        parser.add_argument(
            "-pre", dest="preview", action="store_true", help="preview: change nothing"
        )

    # -- helpers --------------------------------------------------------------------------

    def _say(self, text: str = "") -> None:
        if not self.opts["silent"]:
            self.stdout.write(text)

    def _confirm(self, question: str) -> bool:
        if self.opts["force"]:
            return True
        if self.opts["silent"]:
            return False  # nobody to ask: the safe answer
        self.stdout.write(f"{question} (y/n)[n] ", ending="")
        self.stdout.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    def _merge_input_file(self, opts: dict[str, Any]) -> None:
        from broker.config import parse_properties

        try:
            props = parse_properties(Path(opts["input"]).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {opts['input']}: {exc}") from exc
        opts["subcommand"] = opts["subcommand"] or props.get("cmdtype")
        opts["type"] = opts["type"] or props.get("obj.type")
        opts["lookup"] = opts["lookup"] or props.get("obj.lookupName")
        if opts["read_only"] is None and "obj.readOnly" in props:
            opts["read_only"] = props["obj.readOnly"]
        attrs = {k[len("obj.attrs.") :]: v for k, v in props.items() if k.startswith("obj.attrs.")}
        store = {
            k[len("objstore.attrs.") :]: v
            for k, v in props.items()
            if k.startswith("objstore.attrs.")
        }
        self.attrs = {**attrs, **self.attrs}
        self.store_props = {**store, **self.store_props}
        for key in ("force", "silent", "preview"):
            if props.get(key, "").strip().lower() == "true":
                opts[key] = True

    def _store_lines(self) -> None:
        self._say("Using the object store specified by:")
        if not self.store_props:
            self._say("    (none: the database only)")
        for key, value in self.store_props.items():
            shown = "********" if key == "java.naming.security.credentials" else value
            self._say(f"    {key:<38}{shown}")
        self._say()

    def _print_object(self, obj: dict[str, Any]) -> None:
        self._say(f"Lookup name:       {obj['lookup_name']}")
        self._say(f"Object type:       {obj['type_label']} ({obj['class_name']})")
        self._say(f"Read-only:         {'true' if obj['read_only'] else 'false'}")
        self._say(f"Object store:      {obj['store']}")
        self._say("Attributes:")
        for name in sorted(obj["effective"]):
            self._say(f"    {name:<46}{obj['effective'][name]}")
        self._say()

    # -- entry ----------------------------------------------------------------------------

    def handle(self, *args, **opts) -> None:
        from broker.admintools.actions import ActionError
        from broker.admintools.security_actions import command_line_actor

        self.opts = opts
        self.attrs = _pairs(opts["attrs"], "-o")
        self.store_props = _pairs(opts["store"], "-j")
        if opts["input"]:
            self._merge_input_file(opts)
        sub = opts["subcommand"]
        if sub not in SUBCOMMANDS:
            raise CommandError(
                f"a subcommand is required: {', '.join(SUBCOMMANDS)}"
                + (f" (not {sub!r})" if sub else "")
            )
        self.actor = command_line_actor("imqobjmgr")
        try:
            getattr(self, f"do_{sub}")(opts)
        except ActionError as exc:
            raise CommandError(str(exc)) from exc

    def _need(self, opts, key: str, option: str) -> str:
        if not opts[key]:
            raise CommandError(f"imqobjmgr {opts['subcommand']} needs {option}")
        return opts[key]

    # -- subcommands ----------------------------------------------------------------------

    def do_add(self, opts) -> None:
        from portal.objects import actions
        from portal.objects.attributes import InvalidAttribute, resolve_type

        kind = self._need(opts, "type", "-t <type: q, t, cf or xcf>")
        name = self._need(opts, "lookup", "-l <lookup name>")
        read_only = _bool(opts["read_only"], "-r") if opts["read_only"] is not None else False
        try:
            label = resolve_type(kind).label
        except InvalidAttribute as exc:
            raise CommandError(str(exc)) from exc
        self._say(f"Adding a {label} object with the following attributes:")
        for key, value in self.attrs.items():
            self._say(f"    {key:<46}{value}")
        self._say(f"Using the following lookup name:\n    {name}")
        self._say(f"The object's read-only state: {'true' if read_only else 'false'}")
        self._store_lines()
        if opts["preview"]:
            self._say("Preview only: nothing was changed.")
            return
        overwrite = False
        exists = True
        try:
            actions.get_object(name, store=self.store_props or None)
        except actions.NotFound:
            exists = False
        if exists:
            if not self._confirm(f"Object {name} already exists. Overwrite it?"):
                self._say("The object was not added.")
                return
            overwrite = True
        actions.add_object(
            self.actor,
            name,
            kind,
            self.attrs,
            read_only=read_only,
            store=self.store_props or None,
            overwrite=overwrite,
        )
        self._say("Object successfully added.")

    def do_delete(self, opts) -> None:
        from portal.objects import actions

        name = self._need(opts, "lookup", "-l <lookup name>")
        self._say(f"Deleting the object with the lookup name:\n    {name}")
        self._store_lines()
        obj = actions.get_object(name, store=self.store_props or None, obj_type=opts["type"])
        if opts["preview"]:
            self._say(f"Preview only: {obj['type_label']} {name} was not deleted.")
            return
        if not self._confirm(f"Are you sure you want to delete {name}?"):
            self._say("The object was not deleted.")
            return
        actions.delete_object(
            self.actor, name, obj_type=opts["type"], store=self.store_props or None
        )
        self._say("Object successfully deleted.")

    def do_list(self, opts) -> None:
        from portal.objects import actions

        rows = actions.list_objects(store=self.store_props or None, obj_type=opts["type"])
        self._say("Listing the objects of the object store specified by:")
        self._store_lines()
        width = max([len(r["lookup_name"]) for r in rows] + [len("Lookup Name")]) + 2
        self._say(f"{'Lookup Name':<{width}}Object Type")
        self._say("-" * (width + 20))
        for r in rows:
            self._say(f"{r['lookup_name']:<{width}}{r['type_label']}")
        self._say(f"\n{len(rows)} object(s).")

    def do_query(self, opts) -> None:
        from portal.objects import actions

        name = self._need(opts, "lookup", "-l <lookup name>")
        obj = actions.get_object(name, store=self.store_props or None, obj_type=opts["type"])
        self._print_object(obj)

    def do_update(self, opts) -> None:
        from portal.objects import actions

        name = self._need(opts, "lookup", "-l <lookup name>")
        read_only = _bool(opts["read_only"], "-r") if opts["read_only"] is not None else None
        if not self.attrs and read_only is None:
            raise CommandError("imqobjmgr update needs -o attr=value or -r true|false")
        self._say(f"Updating the object {name} with:")
        for key, value in self.attrs.items():
            self._say(f"    {key:<46}{value}")
        if read_only is not None:
            self._say(f"The object's read-only state: {'true' if read_only else 'false'}")
        self._store_lines()
        if opts["preview"]:
            self._say("Preview only: nothing was changed.")
            return
        if not self._confirm(f"Are you sure you want to update {name}?"):
            self._say("The object was not updated.")
            return
        actions.update_object(
            self.actor,
            name,
            attributes=self.attrs or None,
            read_only=read_only,
            obj_type=opts["type"],
            store=self.store_props or None,
        )
        self._say("Object successfully updated.")
