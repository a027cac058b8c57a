"""Administration actions for the user repository and the access control rules.

The database-side counterpart of :mod:`broker.admintools.actions`: one function per
operation on users, groups and access rules, shared by the portal's pages, the REST API
and the command line.  Reads return plain dicts (or a queryset to filter and paginate,
with a ``*_dict`` function to render a row); changes take the acting user's name as
``actor``, check everything before they change anything, and are recorded in the log
with who made them, with one change event for the live pages
(:func:`broker.admintools.actions.record_change`).  Passwords never reach
the log.

They wrap :mod:`broker.security.users` and :mod:`broker.security.acl` (the single write
path for those tables) and keep the portal's own login records in step: a user removed
from the ``admin`` group, disabled or deleted loses the portal at once, token included.

Errors: :class:`~broker.admintools.actions.ActionError` for bad input, with the subclasses
:class:`NotFound` (no such user, group or rule) and :class:`Conflict` (it exists
already, or the change would lock every administrator out).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from broker.models import AccessRule, BrokerGroup, BrokerUser, validate_broker_username
from broker.security import acl, users
from broker.security.digest import password_digest
from broker.security.users import ADMIN_GROUP, ANONYMOUS_GROUP, USER_GROUP

from .actions import ActionError, record_change
from .portal_account import PORTAL_ACCOUNT, guarded_account

__all__ = [
    "BUILTIN_GROUPS",
    "Conflict",
    "NotFound",
    "create_group",
    "create_user",
    "delete_group",
    "delete_rule",
    "delete_user",
    "ensure_portal_account",
    "export_rules_file",
    "get_group",
    "get_rule",
    "get_user",
    "command_line_actor",
    "group_dict",
    "groups_queryset",
    "import_rules_file",
    "import_users_passwd",
    "load_users",
    "admin_lost_by",
    "list_groups",
    "list_rules",
    "list_users",
    "rule_dict",
    "rules_queryset",
    "set_rule",
    "update_group",
    "update_user",
    "user_dict",
    "users_queryset",
    "clean_group_name",
    "clean_instance",
    "clean_rule",
    "clean_username",
    "sync_portal_user",
]

BUILTIN_GROUPS = (ADMIN_GROUP, USER_GROUP, ANONYMOUS_GROUP)
MAX_GROUP_NAME = 100


def command_line_actor(command: str) -> str:
    """Who made a change from the command line, as the audit record names them: the
    operating-system user running ``command`` (the commands' ``-u`` names the user
    being changed, not the one changing it)."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (containers)
        who = f"uid {os.getuid()}"
    return f"{who} ({command})"


class NotFound(ActionError, LookupError):
    """No such user, group or rule; nothing was changed."""


class Conflict(ActionError):
    """The object exists already, or the change is refused as it stands; nothing changed."""


# --------------------------------------------------------------------------------------
# Users
# --------------------------------------------------------------------------------------


def user_dict(user: BrokerUser) -> dict[str, Any]:
    """A user as the portal and the REST API show it (never the credential)."""
    groups = sorted(g.name for g in user.groups.all())
    return {
        "username": user.username,
        "active": user.active,
        "groups": groups,
        "is_admin": ADMIN_GROUP in groups,
        "created": user.created,
        "updated": user.updated,
    }


def users_queryset(
    *, search: str | None = None, group: str | None = None, active: bool | None = None
):
    """The users (ordered by name, groups prefetched), optionally filtered: ``search`` in
    the name, member of ``group``, active or not."""
    qs = BrokerUser.objects.prefetch_related("groups").order_by("username")
    if search:
        qs = qs.filter(username__icontains=search)
    if group:
        qs = qs.filter(groups__name=group)
    if active is not None:
        qs = qs.filter(active=active)
    return qs


def list_users(**filters: Any) -> list[dict[str, Any]]:
    """Every user (see :func:`users_queryset` for the filters) as dicts."""
    return [user_dict(u) for u in users_queryset(**filters)]


def _user(username: str) -> BrokerUser:
    user = BrokerUser.objects.prefetch_related("groups").filter(username=username).first()
    if user is None:
        raise NotFound(f"user {username!r} does not exist")
    return user


def get_user(username: str) -> dict[str, Any]:
    return user_dict(_user(username))


def clean_username(username: str) -> str:
    if not isinstance(username, str):
        raise ActionError("a user name is required")
    try:
        validate_broker_username(username)
    except ValidationError as exc:
        raise ActionError(f"invalid user name {username!r}: {' '.join(exc.messages)}") from None
    if len(username) > 150:
        raise ActionError("a user name has at most 150 characters")
    return username


def _clean_password(password: str) -> str:
    if not isinstance(password, str) or not password:
        raise ActionError("password must not be empty")
    if any(c in password for c in "\r\n\x00"):
        raise ActionError("a password must not contain line breaks or NUL")
    return password


def clean_group_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise ActionError("a group name is required")
    if any(c in name for c in ":,*\r\n\x00") or len(name) > MAX_GROUP_NAME:
        raise ActionError(
            f"invalid group name {name!r}: at most {MAX_GROUP_NAME} characters, "
            "none of ':', ',', '*' or line breaks"
        )
    return name


def _clean_groups(groups: Iterable[str]) -> list[str]:
    if isinstance(groups, str):
        raise ActionError("groups must be a list of group names")
    return list(dict.fromkeys(clean_group_name(g) for g in groups))


def _active_admins_without(username: str) -> int:
    # The portal's own account is no person: it cannot be the administrator who is left.
    return (
        BrokerUser.objects.filter(active=True, groups__name=ADMIN_GROUP)
        .exclude(username__in=(username, PORTAL_ACCOUNT))
        .distinct()
        .count()
    )


def _keep_the_portal(username: str, *, what: str, cuts_off: bool) -> None:
    """Refuse ``what`` (a change to ``username``) when it would cut the portal off the
    broker: ``username`` is the account the portal logs in with (see
    :mod:`broker.admintools.credentials`) and the change takes its password, its admin rights
    or the account away."""
    if not cuts_off:
        return
    account, why = guarded_account()
    if account == username:
        raise Conflict(f"refused to {what}: {why}")


def _keep_an_admin(username: str, still_admin: bool) -> None:
    """Refuse a change that leaves the repository without an active administrator."""
    if still_admin:
        return
    current = _user(username)
    was_admin = current.active and any(g.name == ADMIN_GROUP for g in current.groups.all())
    if was_admin and _active_admins_without(username) == 0:
        raise Conflict(
            f"{username} is the last active member of group {ADMIN_GROUP}: "
            "nobody could administer the broker after that"
        )


def sync_portal_user(username: str) -> None:
    """Keep the portal's login record of ``username`` in step with the repository: its
    administrator flag follows group ``admin``; a disabled or deleted user is logged out
    of the REST API (token dropped) and cannot use a session any more."""
    from django.contrib.auth import get_user_model

    portal_user = get_user_model().objects.filter(username=username).first()
    if portal_user is None:
        return
    record = BrokerUser.objects.prefetch_related("groups").filter(username=username).first()
    active = record is not None and record.active
    admin = active and any(g.name == ADMIN_GROUP for g in record.groups.all())
    if portal_user.is_staff != admin or portal_user.is_active != active:
        fields = ["is_staff", "is_active"]
        if not admin and (portal_user.is_staff or portal_user.is_active):
            # A new (unusable) password changes the session hash: every open session
            # ends, so giving the rights back later does not revive them -- the user
            # logs in again.
            portal_user.set_unusable_password()
            fields.append("password")
        portal_user.is_staff = admin
        portal_user.is_active = active
        portal_user.save(update_fields=fields)
    if not admin:
        try:
            from rest_framework.authtoken.models import Token
        except ImportError:  # the REST API is not installed
            return
        Token.objects.filter(user=portal_user).delete()


def create_user(
    actor: str,
    username: str,
    password: str,
    groups: Iterable[str] = (USER_GROUP,),
    active: bool = True,
) -> dict[str, Any]:
    """Create a user in ``groups`` (created if missing)."""
    username = clean_username(username)
    password = _clean_password(password)
    names = _clean_groups(groups)
    if BrokerUser.objects.filter(username=username).exists():
        raise Conflict(f"user {username!r} already exists")
    try:
        users.create_user(username, password, names, active=bool(active))
    except users.DuplicateUserError as exc:
        raise Conflict(str(exc)) from None
    except users.UserError as exc:
        raise ActionError(str(exc)) from None
    sync_portal_user(username)
    state = "" if active else ", disabled"
    record_change(
        actor,
        f"created user {username} (groups: {', '.join(names) or 'none'}{state})",
        {"type": "user", "op": "create", "name": username, "groups": names, "active": bool(active)},
    )
    return get_user(username)


def update_user(
    actor: str,
    username: str,
    *,
    password: str | None = None,
    groups: Iterable[str] | None = None,
    active: bool | None = None,
) -> dict[str, Any]:
    """Change a user's password, groups (replaced) and/or active flag, all or nothing."""
    if password is None and groups is None and active is None:
        raise ActionError("nothing to change: give password, groups or active")
    user = _user(username)
    if password is not None:
        _clean_password(password)
    names = _clean_groups(groups) if groups is not None else None
    will_be_active = user.active if active is None else bool(active)
    will_be_admin = (
        ADMIN_GROUP in names
        if names is not None
        else any(g.name == ADMIN_GROUP for g in user.groups.all())
    )
    _keep_an_admin(username, will_be_active and will_be_admin)
    _keep_the_portal(
        username,
        what=f"change user {username}'s "
        + ("password" if password is not None else "groups or state"),
        cuts_off=password is not None or not (will_be_active and will_be_admin),
    )
    changes = []
    with transaction.atomic():
        if password is not None:
            users.set_password(username, password)
            changes.append("password")
        if names is not None:
            users.set_groups(username, names)
            changes.append(f"groups={','.join(names) or '(none)'}")
        if active is not None:
            if bool(active) != user.active:
                users.set_active(username, bool(active))
            changes.append("enabled" if active else "disabled")
    sync_portal_user(username)
    record_change(
        actor,
        f"updated user {username}: {', '.join(changes)}",
        {"type": "user", "op": "update", "name": username, "changes": changes},
    )
    return get_user(username)


def delete_user(actor: str, username: str) -> None:
    _user(username)
    _keep_an_admin(username, False)
    _keep_the_portal(username, what=f"delete user {username}", cuts_off=True)
    try:
        users.delete_user(username)
    except users.UnknownUserError as exc:
        raise NotFound(str(exc)) from None
    sync_portal_user(username)
    record_change(
        actor, f"deleted user {username}", {"type": "user", "op": "delete", "name": username}
    )


def ensure_portal_account(password: str, secret_path: str) -> str | None:
    """Make the portal's own broker account (:data:`PORTAL_ACCOUNT`) an active member of
    group admin whose password is ``password`` (the secret in ``secret_path``), creating
    it if missing; recorded when anything changed.  Returns "created", "updated" or None
    (it was so already).  Safe to race with another process reading the same secret."""
    user = BrokerUser.objects.prefetch_related("groups").filter(username=PORTAL_ACCOUNT).first()
    actor = "portal"
    if user is None:
        try:
            users.create_user(PORTAL_ACCOUNT, password, [ADMIN_GROUP])
        except users.DuplicateUserError:
            return ensure_portal_account(password, secret_path)  # another process's
        record_change(
            actor,
            f"created user {PORTAL_ACCOUNT} (groups: {ADMIN_GROUP}), the portal's own "
            f"broker account, with the secret in {secret_path}",
            {"type": "user", "op": "create", "name": PORTAL_ACCOUNT, "groups": [ADMIN_GROUP]},
        )
        return "created"
    changes = []
    with transaction.atomic():
        if user.password_digest != password_digest(PORTAL_ACCOUNT, password):
            users.set_password(PORTAL_ACCOUNT, password)
            changes.append("password")
        groups = {g.name for g in user.groups.all()}
        if ADMIN_GROUP not in groups:
            users.set_groups(PORTAL_ACCOUNT, sorted(groups | {ADMIN_GROUP}))
            changes.append(f"groups={','.join(sorted(groups | {ADMIN_GROUP}))}")
        if not user.active:
            users.set_active(PORTAL_ACCOUNT, True)
            changes.append("enabled")
    if not changes:
        return None
    sync_portal_user(PORTAL_ACCOUNT)
    record_change(
        actor,
        f"updated user {PORTAL_ACCOUNT}: {', '.join(changes)} (from the secret in {secret_path})",
        {"type": "user", "op": "update", "name": PORTAL_ACCOUNT, "changes": changes},
    )
    return "updated"


def import_users_passwd(actor: str, text: str) -> tuple[list[str], list[str]]:
    """Load a passwd file's users (hashes, group, active state) into the database, all or
    nothing; users missing from the file stay as they are.  Refused when it would leave
    no active administrator.  Returns (created, updated) user names."""
    from broker.security.filerepo import parse_passwd

    if not isinstance(text, str):
        raise ActionError("the passwd file must be text")
    entries = {e.username: e for e in parse_passwd(text)}
    return load_users(
        actor,
        [
            (n, e.password_digest, e.active, [e.group] if e.group else [])
            for n, e in entries.items()
        ],
        source="a passwd file",
    )


def admin_lost_by(changes: dict[str, tuple[bool, Iterable[str]]]) -> str | None:
    """Why applying ``changes`` (user -> (active, groups) after the change) would leave
    no active member of group admin, or None when one remains (or there was none)."""
    admins_before = set(
        BrokerUser.objects.filter(active=True, groups__name=ADMIN_GROUP)
        .exclude(username=PORTAL_ACCOUNT)
        .values_list("username", flat=True)
    )
    admins_after = {n for n in admins_before if n not in changes} | {
        n
        for n, (active, groups) in changes.items()
        if active and ADMIN_GROUP in set(groups) and n != PORTAL_ACCOUNT
    }
    if admins_before and not admins_after:
        return (
            f"no active member of group {ADMIN_GROUP} "
            f"({', '.join(sorted(admins_before))} would lose it): "
            "nobody could administer the broker after that"
        )
    return None


def load_users(
    actor: str,
    entries: list[tuple[str, str, bool, list[str]]],
    *,
    source: str,
) -> tuple[list[str], list[str]]:
    """Create or update users with their stored OpenMQ credentials (password digests,
    never passwords), active flags and groups (replaced), all or nothing: a passwd
    file's users, the definitions import's.  Refused when it would leave no active
    administrator.  Returns (created, updated) user names."""
    for name, _digest, _active, groups in entries:
        clean_username(name)
        for g in groups:
            clean_group_name(g)
    lost = admin_lost_by({n: (active, groups) for n, _d, active, groups in entries})
    if lost is not None:
        raise Conflict(f"{source} leaves {lost}")
    for name, digest, active, groups in entries:
        current = BrokerUser.objects.filter(username=name).first()
        _keep_the_portal(
            name,
            what=f"load {name} from {source}",
            cuts_off=current is not None
            and (digest != current.password_digest or not active or ADMIN_GROUP not in groups),
        )
    try:
        created, updated = users.put_stored_users(entries)
    except users.UserError as exc:
        raise ActionError(str(exc)) from None
    for name in created + updated:
        sync_portal_user(name)
    record_change(
        actor,
        f"imported users from {source} ({len(created)} added: "
        f"{', '.join(created) or 'none'}; {len(updated)} updated: {', '.join(updated) or 'none'})",
        {"type": "user", "op": "import", "created": created, "updated": updated},
    )
    return created, updated


# --------------------------------------------------------------------------------------
# Groups
# --------------------------------------------------------------------------------------


def group_dict(group: BrokerGroup, members: int | None = None) -> dict[str, Any]:
    if members is None:
        members = getattr(group, "members", None)
    if members is None:
        members = group.users.count()
    return {
        "name": group.name,
        "description": group.description,
        "members": members,
        "builtin": group.name in BUILTIN_GROUPS,
    }


def groups_queryset(*, search: str | None = None):
    from django.db.models import Count

    qs = BrokerGroup.objects.annotate(members=Count("users")).order_by("name")
    if search:
        qs = qs.filter(name__icontains=search)
    return qs


def list_groups(**filters: Any) -> list[dict[str, Any]]:
    return [group_dict(g) for g in groups_queryset(**filters)]


def _group(name: str) -> BrokerGroup:
    group = groups_queryset().filter(name=name).first()
    if group is None:
        raise NotFound(f"group {name!r} does not exist")
    return group


def get_group(name: str) -> dict[str, Any]:
    return group_dict(_group(name))


def create_group(actor: str, name: str, description: str = "") -> dict[str, Any]:
    name = clean_group_name(name)
    description = str(description or "")
    if BrokerGroup.objects.filter(name=name).exists():
        raise Conflict(f"group {name!r} already exists")
    BrokerGroup.objects.create(name=name, description=description)
    record_change(actor, f"created group {name}", {"type": "group", "op": "create", "name": name})
    return get_group(name)


def update_group(actor: str, name: str, description: str) -> dict[str, Any]:
    group = _group(name)
    group.description = str(description or "")
    group.save(update_fields=["description"])
    record_change(
        actor, f"updated group {name}: description", {"type": "group", "op": "update", "name": name}
    )
    return get_group(name)


def delete_group(actor: str, name: str) -> None:
    """Delete a group (its members stay, without it); the built-in groups stay."""
    group = _group(name)
    if name in BUILTIN_GROUPS:
        raise Conflict(f"group {name} is built in and cannot be deleted")
    members = list(group.users.values_list("username", flat=True))
    group.delete()
    for username in members:
        sync_portal_user(username)
    record_change(
        actor,
        f"deleted group {name}" + (f" ({len(members)} members)" if members else ""),
        {"type": "group", "op": "delete", "name": name, "members": members},
    )


# --------------------------------------------------------------------------------------
# Access control rules
# --------------------------------------------------------------------------------------


def _scope_label(instance: str) -> str:
    return f"broker {instance}" if instance else "all brokers"


def rule_dict(rule: AccessRule) -> dict[str, Any]:
    """A stored rule with its key taken apart (scope, target, operation, allow/deny,
    user/group); ``valid`` is False for keys the broker ignores."""
    parsed = acl.parse_key(rule.key)
    return {
        "key": rule.key,
        "value": rule.value,
        "instance": rule.broker_instance,
        "scope": parsed.scope if parsed else ("version" if rule.key == acl.VERSION_KEY else ""),
        "target": (parsed.target or "") if parsed else "",
        "operation": (parsed.op or "") if parsed else "",
        "verdict": parsed.verdict if parsed else "",
        "principal": parsed.who if parsed else "",
        "valid": parsed is not None or rule.key == acl.VERSION_KEY,
        "updated": rule.updated,
    }


def rules_queryset(*, instance: str | None = None, search: str | None = None):
    """The stored rules ordered by instance and key (the defaults are seeded into an
    empty table first, as the broker does); ``instance`` "" = the rules for all brokers."""
    acl.ensure_seeded()
    qs = AccessRule.objects.order_by("broker_instance", "key")
    if instance is not None:
        qs = qs.filter(broker_instance=instance)
    if search:
        from django.db.models import Q

        qs = qs.filter(Q(key__icontains=search) | Q(value__icontains=search))
    return qs


def list_rules(**filters: Any) -> list[dict[str, Any]]:
    return [rule_dict(r) for r in rules_queryset(**filters)]


def clean_instance(instance: str | None) -> str:
    instance = (instance or "").strip()
    if len(instance) > 255 or any(c in instance for c in "\r\n\x00/"):
        raise ActionError(f"invalid broker instance name {instance!r}")
    return instance


def clean_rule(key: str, value: str) -> tuple[str, str]:
    key = (key or "").strip()
    value = "" if value is None else str(value).strip()
    if not key:
        raise ActionError("a rule key is required")
    if len(key) > 400:
        raise ActionError("a rule key has at most 400 characters")
    if key == acl.VERSION_KEY:
        if value != acl.VERSION:
            raise ActionError(f"version must be {acl.VERSION}: any other makes every check fail")
        return key, value
    if acl.parse_key(key) is None:
        raise ActionError(
            f"{key!r} is not an access control rule key: connection.<NORMAL|ADMIN|*>."
            "<allow|deny>.<user|group>, <queue|topic>.<name|*>.<produce|consume|browse>."
            "<allow|deny>.<user|group> or <queue|topic>.create.<allow|deny>.<user|group>"
        )
    if any(c in value for c in "\r\n\x00"):
        raise ActionError("a rule value is one line of comma-separated names")
    return key, value


def get_rule(key: str, instance: str = "") -> dict[str, Any]:
    instance = clean_instance(instance)
    row = rules_queryset(instance=instance).filter(key=key).first()
    if row is None:
        raise NotFound(f"no rule {key} for {_scope_label(instance)}")
    return rule_dict(row)


def set_rule(actor: str, key: str, value: str, instance: str = "") -> tuple[dict[str, Any], bool]:
    """Create or change one rule; (the rule, whether it was created)."""
    instance = clean_instance(instance)
    key, value = clean_rule(key, value)
    acl.ensure_seeded()
    created = not AccessRule.objects.filter(broker_instance=instance, key=key).exists()
    try:
        acl.set_rule(key, value, instance)
    except ValueError as exc:
        raise ActionError(str(exc)) from None
    record_change(
        actor,
        f"{'added' if created else 'changed'} access rule {key}={value} ({_scope_label(instance)})",
        _rule_event("create" if created else "update", instance, key=key, value=value),
    )
    return get_rule(key, instance), created


def _rule_event(op: str, instance: str, **fields: Any) -> dict[str, Any]:
    """An access rule's change event (``instance`` "": the rules of all brokers)."""
    return {"type": "access_rule", "op": op, "instance": instance, **fields}


def delete_rule(actor: str, key: str, instance: str = "") -> None:
    instance = clean_instance(instance)
    if key == acl.VERSION_KEY and not instance:
        raise Conflict("the version rule of all brokers cannot be deleted: every check would fail")
    if not acl.delete_rule(key, instance):
        raise NotFound(f"no rule {key} for {_scope_label(instance)}")
    record_change(
        actor,
        f"deleted access rule {key} ({_scope_label(instance)})",
        _rule_event("delete", instance, key=key),
    )


def export_rules_file(instance: str = "") -> str:
    """The stored rules of ``instance`` ("" = all brokers) as accesscontrol.properties."""
    return acl.export_rules(clean_instance(instance))


def import_rules_file(actor: str, text: str, *, replace: bool = True, instance: str = "") -> int:
    """Load an accesscontrol.properties text (replacing the stored rules of ``instance``
    unless ``replace`` is False).  Refused whole, before any change, when a key is not a
    rule, a value spans lines or the version is wrong; returns the number of rules."""
    instance = clean_instance(instance)
    if not isinstance(text, str):
        raise ActionError("the rules must be text")
    try:
        rules = acl.parse_file(text)
    except ValueError as exc:
        raise ActionError(f"unreadable rules: {exc}") from None
    bad = acl.unknown_keys(rules)
    if bad:
        shown = ", ".join(repr(k) for k in bad[:5]) + (" ..." if len(bad) > 5 else "")
        raise ActionError(f"not access control rules: {shown}")
    for key, value in rules.items():
        clean_rule(key, value)
    if replace and not instance and acl.VERSION_KEY not in rules:
        raise ActionError(f"the rules for all brokers need the line version={acl.VERSION}")
    acl.import_rules(text, replace=replace, instance=instance)
    record_change(
        actor,
        f"{'replaced' if replace else 'merged'} the access rules of {_scope_label(instance)} "
        f"({len(rules)} rules)",
        _rule_event("replace" if replace else "merge", instance, rules=len(rules)),
    )
    return len(rules)
