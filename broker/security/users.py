"""The database user repository and the actions that change it.

The broker calls :class:`DatabaseUserRepository` from a worker thread at
authentication time (never on the per-message path).  The module-level functions write
the tables; the portal, the REST API and ``imqusermgr`` call them only through
:mod:`broker.admintools.security_actions` (audit record, last-admin guard, portal login).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, close_old_connections, transaction

from broker.models import BrokerGroup, BrokerUser, validate_broker_username
from broker.security.acl import ADMIN_GROUP

__all__ = [
    "ADMIN_GROUP",
    "ANONYMOUS_GROUP",
    "DEFAULT_USERS",
    "USER_GROUP",
    "DatabaseUserRepository",
    "DuplicateUserError",
    "UnknownUserError",
    "UserError",
    "UserRecord",
    "create_user",
    "delete_user",
    "ensure_default_users",
    "export_passwd",
    "import_passwd",
    "list_users",
    "passwd_group",
    "set_active",
    "set_groups",
    "set_password",
]

USER_GROUP = "user"
ANONYMOUS_GROUP = "anonymous"

_DEFAULT_GROUPS = {
    ADMIN_GROUP: "Administrators: may connect to ADMIN services (imqcmd).",
    USER_GROUP: "Ordinary messaging users.",
    ANONYMOUS_GROUP: "The anonymous (guest) user.",
}

# (username, password, group) as in OpenMQ's shipped passwd file (docs/developers/protocol.md).
DEFAULT_USERS: tuple[tuple[str, str, str], ...] = (
    ("admin", "admin", ADMIN_GROUP),
    ("guest", "guest", ANONYMOUS_GROUP),
)


class UserError(ValueError):
    """A user repository action that cannot be done."""


class DuplicateUserError(UserError):
    """The user already exists."""


class UnknownUserError(UserError, LookupError):
    """No such user."""


@dataclass(frozen=True)
class UserRecord:
    """What authentication and access control need to know about a user."""

    username: str
    password_digest: str
    active: bool
    groups: frozenset[str]

    @property
    def is_admin(self) -> bool:
        """Group ``admin`` carries OpenMQ's administrator principal."""
        return ADMIN_GROUP in self.groups


def _record(user: BrokerUser) -> UserRecord:
    return UserRecord(
        username=user.username,
        password_digest=user.password_digest,
        active=user.active,
        groups=frozenset(g.name for g in user.groups.all()),
    )


class DatabaseUserRepository:
    """Users from the ``BrokerUser``/``BrokerGroup`` tables (blocking: call off the loop)."""

    kind = "database"
    # The broker checks the password digest of the record lookup() finds.
    verify_basic = None

    def describe(self) -> str:
        return "database"

    def lookup(self, username: str) -> UserRecord | None:
        """Return the user (active or not), or None if there is no such user."""
        # Worker threads live long: drop a connection the server has closed under us.
        close_old_connections()
        user = BrokerUser.objects.prefetch_related("groups").filter(username=username).first()
        return _record(user) if user is not None else None

    def ensure_default_users(self) -> list[str]:
        """See :func:`ensure_default_users`."""
        return ensure_default_users()


# --------------------------------------------------------------------------------------
# Actions
# --------------------------------------------------------------------------------------


def _check_username(username: str) -> None:
    try:
        validate_broker_username(username)
    except ValidationError as exc:
        raise UserError(f"invalid user name {username!r}: {' '.join(exc.messages)}") from None


def _check_password(password: str) -> None:
    if not password:
        raise UserError("password must not be empty")


def _groups(names: Iterable[str]) -> list[BrokerGroup]:
    groups = []
    for name in dict.fromkeys(n.strip() for n in names):
        if not name or any(c in name for c in ":,\r\n"):
            raise UserError(f"invalid group name {name!r}")
        group, _ = BrokerGroup.objects.get_or_create(
            name=name, defaults={"description": _DEFAULT_GROUPS.get(name, "")}
        )
        groups.append(group)
    return groups


def _get(username: str) -> BrokerUser:
    try:
        return BrokerUser.objects.get(username=username)
    except BrokerUser.DoesNotExist:
        raise UnknownUserError(f"user {username!r} does not exist") from None


def ensure_default_users() -> list[str]:
    """Create groups admin/user/anonymous and users admin/admin, guest/guest if missing.

    Idempotent and safe to race with another process; existing users (and changed
    passwords) are left alone.  Returns the names of the users it created.
    """
    created_users = []
    with transaction.atomic():
        _groups(_DEFAULT_GROUPS)
    for username, password, group in DEFAULT_USERS:
        try:
            with transaction.atomic():
                if BrokerUser.objects.filter(username=username).exists():
                    continue
                user = BrokerUser(username=username)
                user.set_password(password)
                user.save()
                user.groups.set(_groups([group]))
                created_users.append(username)
        except IntegrityError:
            # Another process created it between our check and insert: theirs stands.
            continue
    return created_users


def create_user(
    username: str,
    password: str,
    groups: Iterable[str] = (USER_GROUP,),
    active: bool = True,
) -> BrokerUser:
    """Create a user in ``groups`` (created if missing); raise :class:`UserError`."""
    _check_username(username)
    _check_password(password)
    try:
        with transaction.atomic():
            user = BrokerUser(username=username, active=active)
            user.set_password(password)
            user.save()
            user.groups.set(_groups(groups))
    except IntegrityError:
        raise DuplicateUserError(f"user {username!r} already exists") from None
    return user


def set_password(username: str, password: str) -> BrokerUser:
    """Change a user's password."""
    _check_password(password)
    user = _get(username)
    user.set_password(password)
    user.save(update_fields=["password_digest", "updated"])
    return user


def set_active(username: str, active: bool) -> BrokerUser:
    """Enable or disable a user (disabled users cannot log in)."""
    user = _get(username)
    user.active = active
    user.save(update_fields=["active", "updated"])
    return user


def delete_user(username: str) -> None:
    """Delete a user."""
    deleted, _ = BrokerUser.objects.filter(username=username).delete()
    if not deleted:
        raise UnknownUserError(f"user {username!r} does not exist")


def list_users(username: str | None = None) -> list[UserRecord]:
    """All users (or just ``username``; UnknownUserError if missing), ordered by name."""
    users = BrokerUser.objects.prefetch_related("groups").order_by("username")
    if username is not None:
        users = users.filter(username=username)
    records = [_record(u) for u in users]
    if username is not None and not records:
        raise UnknownUserError(f"user {username!r} does not exist")
    return records


def set_groups(username: str, groups: Iterable[str]) -> BrokerUser:
    """Replace a user's groups (created if missing)."""
    user = _get(username)
    with transaction.atomic():
        user.groups.set(_groups(groups))
        user.save(update_fields=["updated"])
    return user


def passwd_group(groups: Iterable[str]) -> str:
    """The one group a passwd line can hold: ``admin`` if present, else the first by name,
    ``user`` when there is none (the file needs four non-empty fields)."""
    names = sorted(groups)
    if ADMIN_GROUP in names:
        return ADMIN_GROUP
    return names[0] if names else USER_GROUP


def put_stored_users(
    entries: Iterable[tuple[str, str, bool, Iterable[str]]],
) -> tuple[list[str], list[str]]:
    """Create or update users from stored credentials: (name, OpenMQ password digest,
    active, groups -- replaced, made when missing), in one transaction.  Returns
    (created, updated) user names."""
    created, updated = [], []
    with transaction.atomic():
        for username, digest, active, groups in entries:
            _check_username(username)
            user, new = BrokerUser.objects.get_or_create(
                username=username, defaults={"password_digest": digest, "active": active}
            )
            if not new:
                user.password_digest = digest
                user.active = active
                user.save(update_fields=["password_digest", "active", "updated"])
            user.groups.set(_groups(groups))
            (created if new else updated).append(username)
    return created, updated


def import_passwd(text: str) -> tuple[list[str], list[str]]:
    """Load a passwd file's users (hashes, group, active) into the database.

    Existing users take the file's hash, group and state; users missing from the file
    are left alone.  Returns (created, updated) user names.
    """
    from .filerepo import parse_passwd

    return put_stored_users(
        (e.username, e.password_digest, e.active, [e.group] if e.group else [])
        for e in parse_passwd(text)
    )


def export_passwd() -> str:
    """The database's users as passwd file text (OpenMQ format, one group per user)."""
    from .filerepo import PasswdEntry, format_passwd

    return format_passwd(
        [
            PasswdEntry(r.username, r.password_digest, passwd_group(r.groups), r.active)
            for r in list_users()
        ]
    )
