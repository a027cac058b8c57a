"""Definitions: the whole configuration of a broker as one JSON document, and back.

The document has one section per kind of definition (``destinations``, ``groups``,
``users``, ``access_rules``, ``broker_properties``; administered objects plug in the same
way with :func:`register_section`).  Export reads each section; import first validates
every section and plans its changes (an error list names everything wrong, and nothing is
changed), then applies them: the database sections in one transaction, the broker's
(properties, destinations) through its admin service, undone again if a later step fails,
so a refused import leaves the broker and the database as they were.  A dry run returns
the plan without applying it.

Import adds and updates; what the document does not name stays.  Users carry their
stored credential (OpenMQ's MD5 form), never a plain password.  ``manage.py definitions``,
the portal's Definitions page and ``/api/definitions/`` call :func:`export_definitions`
and :func:`import_definitions`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from broker import props as imq
from broker.propcheck import property_value_problem
from broker.protocol.types import DEST_TOPIC

from .actions import ActionError, record_change
from .actions.common import dest_kind, dest_type_code
from .actions.destinations import list_destinations
from .broker_handle import BrokerAdmin

FORMAT = "openmq-py definitions"
VERSION = 1
# Broker properties that belong to one broker's address, not to its definitions.
NOT_EXPORTED = {"imq.portmapper.port"}
_DIGEST = re.compile(r"-?[0-9a-f]{1,64}")


class DefinitionsError(ActionError):
    """The document was refused; ``errors`` lists every reason, nothing was changed."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass
class Change:
    """One planned change: ``op`` is create, update or unchanged."""

    section: str
    op: str
    name: str
    detail: str = ""
    # What apply() needs (not part of the report).
    data: dict[str, Any] = field(default_factory=dict, repr=False)

    def report(self) -> dict[str, str]:
        return {"section": self.section, "op": self.op, "name": self.name, "detail": self.detail}


@dataclass
class Section:
    """One kind of definition.

    ``export(admin)`` returns the section's JSON value; ``plan(value, admin, errors)``
    checks a document's value (appending to ``errors``) and returns its changes;
    ``apply(changes, admin, actor)`` makes them and returns an undo callable (or None)
    for the broker-side sections; ``database`` sections run inside the import's
    transaction.  A Django app adds its own kinds in a module ``<app>.definitions`` that
    calls :func:`register_section` (found when the first export or import runs)."""

    name: str
    export: Callable[[BrokerAdmin], Any]
    plan: Callable[[Any, BrokerAdmin, list[str]], list[Change]]
    apply: Callable[[list[Change], BrokerAdmin, str], Callable[[], None] | None]
    database: bool = True


SECTIONS: dict[str, Section] = {}


def register_section(section: Section) -> None:
    """Add (or replace) a kind of definition; sections export and import in the order
    they were registered."""
    SECTIONS[section.name] = section


# --------------------------------------------------------------------------------------
# Groups and users
# --------------------------------------------------------------------------------------


def _export_groups(admin: BrokerAdmin) -> list[dict[str, Any]]:
    from broker.models import BrokerGroup

    return [
        {"name": g.name, "description": g.description} for g in BrokerGroup.objects.order_by("name")
    ]


def _items(value: Any, section: str, errors: list[str]) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        errors.append(f"{section}: must be a list of objects")
        return []
    return value


def _plan_groups(value: Any, admin: BrokerAdmin, errors: list[str]) -> list[Change]:
    from broker.models import BrokerGroup

    from .security_actions import clean_group_name

    existing = {g.name: g.description for g in BrokerGroup.objects.all()}
    changes = []
    for n, item in enumerate(_items(value, "groups", errors)):
        if not isinstance(item.get("name"), str):
            errors.append(f"groups[{n}]: a name (text) is required")
            continue
        try:
            name = clean_group_name(item["name"])
        except ActionError as exc:
            errors.append(f"groups[{n}]: {exc}")
            continue
        desc = item.get("description", "")
        if not isinstance(desc, str):
            errors.append(f"groups[{n}] {name}: description must be text")
            continue
        op = (
            "create"
            if name not in existing
            else "update"
            if existing[name] != desc
            else "unchanged"
        )
        changes.append(Change("groups", op, name, "", {"description": desc}))
    return changes


def _apply_groups(changes: list[Change], admin: BrokerAdmin, actor: str) -> None:
    from .security_actions import create_group, update_group

    for c in changes:
        if c.op == "create":
            create_group(actor, c.name, c.data["description"])
        elif c.op == "update":
            update_group(actor, c.name, c.data["description"])


def _export_users(admin: BrokerAdmin) -> list[dict[str, Any]]:
    from broker.models import BrokerUser

    from .portal_account import PORTAL_ACCOUNT

    # The portal's own account is this installation's (its secret stays here): another
    # installation importing it would lock its own portal out.
    return [
        {
            "username": u.username,
            "password_digest": u.password_digest,
            "active": u.active,
            "groups": sorted(g.name for g in u.groups.all()),
        }
        for u in BrokerUser.objects.prefetch_related("groups").order_by("username")
        if u.username != PORTAL_ACCOUNT
    ]


def _plan_users(value: Any, admin: BrokerAdmin, errors: list[str]) -> list[Change]:
    from broker.models import BrokerUser

    from .portal_account import PORTAL_ACCOUNT
    from .security_actions import admin_lost_by, clean_group_name, clean_username

    existing = {
        u.username: (u.password_digest, u.active, sorted(g.name for g in u.groups.all()))
        for u in BrokerUser.objects.prefetch_related("groups")
    }
    changes = []
    for n, item in enumerate(_items(value, "users", errors)):
        where = f"users[{n}]"
        if "password" in item:
            errors.append(f"{where}: plain passwords are not accepted, give password_digest")
            continue
        try:
            name = clean_username(item.get("username"))
        except ActionError as exc:
            errors.append(f"{where}: {exc}")
            continue
        if name == PORTAL_ACCOUNT:
            errors.append(
                f"{where} {name}: the portal's own broker account is each installation's "
                "own (its password is that installation's secret); leave it out"
            )
            continue
        digest = item.get("password_digest")
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            errors.append(f"{where} {name}: password_digest must be OpenMQ's MD5 credential (hex)")
            continue
        active = item.get("active", True)
        groups = item.get("groups", [])
        if not isinstance(active, bool):
            errors.append(f"{where} {name}: active must be true or false")
            continue
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            errors.append(f"{where} {name}: groups must be a list of names")
            continue
        try:
            groups = sorted({clean_group_name(g) for g in groups})
        except ActionError as exc:
            errors.append(f"{where} {name}: {exc}")
            continue
        wanted = (digest, active, groups)
        old = existing.get(name)
        if old is None:
            op, detail = "create", f"groups {', '.join(groups) or '(none)'}"
        elif old == wanted:
            op, detail = "unchanged", ""
        else:
            what = [
                label
                for label, a, b in zip(("password", "active", "groups"), old, wanted, strict=True)
                if a != b
            ]
            op, detail = "update", ", ".join(what)
        existing[name] = wanted
        changes.append(
            Change(
                "users", op, name, detail, {"digest": digest, "active": active, "groups": groups}
            )
        )
    lost = admin_lost_by(
        {c.name: (c.data["active"], c.data["groups"]) for c in changes if c.op != "unchanged"}
    )
    if lost is not None:
        errors.append(f"users: the document leaves {lost}")
    return changes


def _apply_users(changes: list[Change], admin: BrokerAdmin, actor: str) -> None:
    from .security_actions import load_users

    entries = [
        (c.name, c.data["digest"], c.data["active"], c.data["groups"])
        for c in changes
        if c.op != "unchanged"
    ]
    if entries:
        load_users(actor, entries, source="the definitions")


# --------------------------------------------------------------------------------------
# Access rules
# --------------------------------------------------------------------------------------


def _export_rules(admin: BrokerAdmin) -> list[dict[str, str]]:
    from .security_actions import rules_queryset

    return [
        {"instance": r.broker_instance, "key": r.key, "value": r.value} for r in rules_queryset()
    ]


def _plan_rules(value: Any, admin: BrokerAdmin, errors: list[str]) -> list[Change]:
    from .security_actions import clean_instance, clean_rule, rules_queryset

    existing = {(r.broker_instance, r.key): r.value for r in rules_queryset()}
    changes = []
    for n, item in enumerate(_items(value, "access_rules", errors)):
        if not isinstance(item.get("instance", ""), str):
            errors.append(f"access_rules[{n}]: instance must be text")
            continue
        try:
            instance = clean_instance(item.get("instance", ""))
            key, val = clean_rule(str(item.get("key") or ""), item.get("value", ""))
        except ActionError as exc:
            errors.append(f"access_rules[{n}]: {exc}")
            continue
        old = existing.get((instance, key))
        op = "create" if old is None else "unchanged" if old == val else "update"
        label = f"{key} ({instance})" if instance else key
        changes.append(
            Change(
                "access_rules",
                op,
                label,
                f"= {val}",
                {"instance": instance, "key": key, "value": val},
            )
        )
    return changes


def _apply_rules(changes: list[Change], admin: BrokerAdmin, actor: str) -> None:
    from .security_actions import set_rule

    for c in changes:
        if c.op != "unchanged":
            set_rule(actor, c.data["key"], c.data["value"], c.data["instance"])


# --------------------------------------------------------------------------------------
# Broker properties (those that can change at run time) and destinations
# --------------------------------------------------------------------------------------


def _runtime_names() -> dict[str, str]:
    return {k: v for k, v in imq.RUNTIME_PROPERTIES.items() if k not in NOT_EXPORTED}


def _export_props(admin: BrokerAdmin) -> dict[str, str]:
    props = admin.broker_props()
    return {name: props[name] for name in sorted(_runtime_names()) if name in props}


def _plan_props(value: Any, admin: BrokerAdmin, errors: list[str]) -> list[Change]:
    if not isinstance(value, dict):
        errors.append("broker_properties: must be an object of name: value")
        return []
    names = _runtime_names()
    current = admin.broker_props()
    changes = []
    for name, val in value.items():
        if name not in names:
            errors.append(f"broker_properties: {name} cannot be set at run time")
            continue
        if not isinstance(val, str):
            errors.append(f"broker_properties: {name}: the value must be a string")
            continue
        why = property_value_problem(name, names[name], val)
        if why is not None:
            errors.append(f"broker_properties: {why}")
            continue
        old = current.get(name)
        op = "unchanged" if old == val.strip() else "update"
        changes.append(
            Change(
                "broker_properties",
                op,
                name,
                f"{old} -> {val}" if op == "update" else "",
                {"old": old, "value": val},
            )
        )
    return changes


def _apply_props(
    changes: list[Change], admin: BrokerAdmin, actor: str
) -> Callable[[], None] | None:
    todo = {c.name: c.data["value"] for c in changes if c.op == "update"}
    if not todo:
        return None
    admin.update_broker_props(todo)  # the broker applies all of them or none
    old = {c.name: c.data["old"] for c in changes if c.op == "update" and c.data["old"] is not None}
    return (lambda: admin.update_broker_props(old)) if old else None


def _own_attributes(dest: dict[str, Any]) -> dict[str, Any]:
    """The attributes of a destination's kind (a DestinationInfo carries all of them)."""
    from broker.protocol.dest_attributes import BY_NAME

    is_topic = dest["type"] == "topic"
    return {
        k: v for k, v in dest["attributes"].items() if k in BY_NAME and BY_NAME[k].applies(is_topic)
    }


def _export_destinations(admin: BrokerAdmin) -> list[dict[str, Any]]:
    return [
        {"name": d["name"], "type": d["type"], "attributes": _own_attributes(d)}
        for d in list_destinations(admin, show_temporary=False)
        if not d["temporary"]
    ]


def _plan_destinations(value: Any, admin: BrokerAdmin, errors: list[str]) -> list[Change]:
    from broker.protocol.dest_attributes import convert_all

    existing = {(d["type"], d["name"]): d for d in list_destinations(admin, show_temporary=False)}
    changes = []
    for n, item in enumerate(_items(value, "destinations", errors)):
        name = item.get("name")
        name = name.strip() if isinstance(name, str) else ""
        where = f"destinations[{n}] {name}".rstrip()
        if not name:
            errors.append(f"{where}: a name is required")
            continue
        try:
            code = dest_type_code(item.get("type", ""))
        except ActionError as exc:
            errors.append(f"{where}: {exc}")
            continue
        attrs = item.get("attributes", {})
        if not isinstance(attrs, dict):
            errors.append(f"{where}: attributes must be an object")
            continue
        try:
            attrs = convert_all(attrs, is_topic=code == DEST_TOPIC)
        except ValueError as exc:
            errors.append(f"{where}: {exc}")
            continue
        kind = dest_kind(code)
        old = existing.get((kind, name))
        label = f"{kind} {name}"
        if old is None:
            changes.append(
                Change(
                    "destinations",
                    "create",
                    label,
                    "",
                    {"code": code, "name": name, "attributes": attrs},
                )
            )
            continue
        if old["temporary"]:
            errors.append(f"{where}: a temporary destination of that name exists")
            continue
        diff = {k: v for k, v in attrs.items() if old["attributes"].get(k) != v}
        changes.append(
            Change(
                "destinations",
                "update" if diff else "unchanged",
                label,
                ", ".join(f"{k}: {old['attributes'].get(k)} -> {v}" for k, v in diff.items()),
                {
                    "code": code,
                    "name": name,
                    "attributes": diff,
                    "old": {k: old["attributes"][k] for k in diff if k in old["attributes"]},
                },
            )
        )
    return changes


def _apply_destinations(
    changes: list[Change], admin: BrokerAdmin, actor: str
) -> Callable[[], None]:
    done: list[Change] = []

    def undo() -> None:
        for c in reversed(done):
            if c.op == "create":
                admin.destroy(c.data["name"], c.data["code"])
            elif c.data["old"]:
                admin.update_destination(c.data["name"], c.data["code"], c.data["old"])

    try:
        for c in changes:
            if c.op == "create":
                admin.create_destination(c.data["name"], c.data["code"], c.data["attributes"])
            elif c.op == "update":
                admin.update_destination(c.data["name"], c.data["code"], c.data["attributes"])
            else:
                continue
            done.append(c)
    except Exception:
        undo()
        raise
    return undo


register_section(Section("groups", _export_groups, _plan_groups, _apply_groups))
register_section(Section("users", _export_users, _plan_users, _apply_users))
register_section(Section("access_rules", _export_rules, _plan_rules, _apply_rules))
register_section(
    Section("broker_properties", _export_props, _plan_props, _apply_props, database=False)
)
register_section(
    Section(
        "destinations",
        _export_destinations,
        _plan_destinations,
        _apply_destinations,
        database=False,
    )
)


# --------------------------------------------------------------------------------------
# The document
# --------------------------------------------------------------------------------------


_discovered = False


def _discover() -> None:
    """Import every installed app's ``definitions`` module (its sections register)."""
    global _discovered
    if _discovered:
        return
    import importlib
    import importlib.util

    from django.apps import apps

    for config in apps.get_app_configs():
        name = f"{config.name}.definitions"
        if name != __name__ and importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    _discovered = True


def export_definitions(admin: BrokerAdmin) -> dict[str, Any]:
    """The whole configuration as a JSON-ready dict (see the module docstring)."""
    _discover()
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "exported": datetime.now(UTC).isoformat(timespec="seconds"),
        "broker": admin.address,
    }
    for section in SECTIONS.values():
        doc[section.name] = section.export(admin)
    return doc


def plan_definitions(admin: BrokerAdmin, doc: Any) -> list[Change]:
    """Every change ``doc`` would make; DefinitionsError listing all that is wrong."""
    _discover()
    errors: list[str] = []
    if not isinstance(doc, dict):
        raise DefinitionsError(["the document must be a JSON object"])
    if doc.get("format", FORMAT) != FORMAT:
        errors.append(f"format must be {FORMAT!r}")
    if doc.get("version", VERSION) != VERSION:
        errors.append(
            f"version {doc.get('version')!r} is not supported (this broker reads {VERSION})"
        )
    if _has_nul(doc):
        raise DefinitionsError(["the document holds a NUL character"])
    known = {"format", "version", "exported", "broker", *SECTIONS}
    unknown = sorted(k for k in doc if k not in known)
    if unknown:
        errors.append("unknown sections: " + ", ".join(unknown))
    changes: list[Change] = []
    for section in SECTIONS.values():
        if section.name in doc:
            changes += section.plan(doc[section.name], admin, errors)
    if errors:
        raise DefinitionsError(errors)
    return changes


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def summary(changes: list[Change]) -> dict[str, int]:
    counts = {"create": 0, "update": 0, "unchanged": 0}
    for c in changes:
        counts[c.op] = counts.get(c.op, 0) + 1
    return counts


def import_definitions(
    admin: BrokerAdmin, actor: str, doc: Any, *, dry_run: bool = False
) -> dict[str, Any]:
    """Validate ``doc``, then (unless ``dry_run``) apply it all or nothing; returns
    ``{"dry_run", "summary", "changes"}``.  DefinitionsError when refused."""
    from django.db import transaction

    changes = plan_definitions(admin, doc)
    result = {
        "dry_run": dry_run,
        "summary": summary(changes),
        "changes": [c.report() for c in changes],
    }
    if dry_run:
        return result
    by_section: dict[str, list[Change]] = {}
    for c in changes:
        by_section.setdefault(c.section, []).append(c)
    undos: list[Callable[[], None]] = []
    try:
        with transaction.atomic():
            for section in SECTIONS.values():
                if section.name in by_section:
                    undo = section.apply(by_section[section.name], admin, actor)
                    if undo is not None:
                        undos.append(undo)
    except Exception:
        for undo in reversed(undos):
            try:
                undo()
            except Exception as exc:  # the broker went away: say so, keep the first error
                import logging

                logging.getLogger("broker.audit").error("undoing a refused import: %s", exc)
        raise
    if any(c.section == "access_rules" and c.op != "unchanged" for c in changes):
        admin.reload_access_control()
    counts = result["summary"]
    record_change(
        actor,
        f"imported definitions: {counts['create']} created, {counts['update']} updated, "
        f"{counts['unchanged']} unchanged",
        {"type": "definitions", "op": "import", "summary": counts},
    )
    return result
