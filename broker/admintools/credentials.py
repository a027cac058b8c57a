"""Who the portal, the REST API, ``/metrics``, the jobs and ``manage.py definitions`` log
in to the broker's admin service as: :func:`broker_credentials`, the one place that says.

Two ways, chosen by the environment (portal/settings.py):

* **The portal's own account** (the default): user ``imq.portal`` in group ``admin``,
  whose password is a random secret kept in ``IMQ_PORTAL_SECRET_FILE`` (default
  ``<IMQ_VARHOME>/portal.secret``, created at first use with mode 0600; in Docker a
  secret), as RabbitMQ keeps its cookie.  No person logs in with it, so a person changing
  a password (Users page, REST API, ``imqusermgr``) never touches what the portal uses;
  the action layer refuses the changes that would cut the portal off (its password,
  groups, active flag, deletion) and says what to do instead
  (:mod:`broker.admintools.portal_account`).  The account in the
  database follows the file: created at first use, set again whenever the file changes
  (a rotated secret).
* **An account the operator gives**: ``IMQ_ADMIN_USER`` (default ``admin``) with
  ``IMQ_ADMIN_PASSWORD`` or ``IMQ_ADMIN_PASSWORD_FILE``, for accounts the portal's database
  does not hold (an LDAP directory, a passwd file, a broker on another database).  The
  portal does not manage it: the action layer refuses to change that account's password,
  groups or state from a process that uses it, naming the variable to change instead.

:func:`default_admin` is the process-wide admin connection made with it (the portal's
pages, the REST API, /metrics).

Nothing is cached for the process's lifetime: each call looks at the file (one
``stat``) and reads it again when it changed, so a new secret is used without a restart;
after the broker refused a login the account is set from the file again.
"""

from __future__ import annotations

import logging
import os
import secrets
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from .broker_handle import BrokerAdmin, BrokerUnavailable, settings_ssl_context
from .portal_account import PORTAL_ACCOUNT

__all__ = [
    "PORTAL_ACCOUNT",
    "BrokerCredentials",
    "CredentialsError",
    "broker_credentials",
    "default_admin",
    "read_secret_file",
]

log = logging.getLogger(__name__)


class CredentialsError(BrokerUnavailable):
    """The credential cannot be had (an unreadable or empty file, a half-given setting):
    the broker cannot be logged in to, and the message says what to fix."""


@dataclass(frozen=True)
class BrokerCredentials:
    """A user name and password for the broker's admin service, and where they come from
    (for messages: ``the portal's own account (secret in /var/imq/portal.secret)``)."""

    user: str
    password: str
    source: str
    own_account: bool

    def __repr__(self) -> str:  # never the password, in a traceback or a log line
        return f"BrokerCredentials(user={self.user!r}, source={self.source!r})"


_lock = threading.Lock()
# path -> ((inode, mtime_ns, size), password): one read per change of the file.
_files: dict[str, tuple[tuple[int, int, int], str]] = {}
# path -> the file state whose password the database account was last set to.
_synced: dict[str, tuple[int, int, int]] = {}


def _state(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def read_secret_file(path: Path, what: str) -> tuple[str, tuple[int, int, int]]:
    """The secret in ``path`` (its first line, surrounding blanks dropped) and the file's
    state; read again only when the file changed.  :class:`CredentialsError` when it
    cannot be read or is empty."""
    key = str(path)
    try:
        st = path.stat()
        state = _state(st)
        with _lock:
            cached = _files.get(key)
        if cached is not None and cached[0] == state:
            return cached[1], state
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CredentialsError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    lines = text.strip().splitlines()
    password = lines[0].strip() if lines else ""
    if not password:
        raise CredentialsError(f"{what}: {path} is empty")
    with _lock:
        _files[key] = (state, password)
    return password, state


def _create_secret(path: Path) -> None:
    """Write a new random secret to ``path`` (mode 0600) unless the file exists; two
    processes starting at once agree on one (the file appears whole or not at all)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".portal-secret-", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(tmp, path)  # fails if another process made it first: theirs stands
        except FileExistsError:
            return
        log.info("created the portal's broker secret %s (mode 0600)", path)
    finally:
        os.unlink(tmp)


def _own_account(path: Path, resync: bool) -> BrokerCredentials:
    if not path.exists():
        try:
            _create_secret(path)
        except OSError as exc:
            raise CredentialsError(
                f"the portal's broker secret {path} does not exist and cannot be created: "
                f"{exc.strerror or exc} (set IMQ_PORTAL_SECRET_FILE to a writable place)"
            ) from None
    password, state = read_secret_file(path, "IMQ_PORTAL_SECRET_FILE")
    key = str(path)
    with _lock:
        synced = _synced.get(key) == state
    if resync or not synced:
        from .security_actions import ensure_portal_account

        ensure_portal_account(password, str(path))
        with _lock:
            _synced[key] = state
    return BrokerCredentials(
        PORTAL_ACCOUNT, password, f"the portal's own account (secret in {path})", True
    )


def _given(user: str, password: str, password_file: str) -> BrokerCredentials:
    user = user or "admin"
    if password and password_file:
        raise CredentialsError(
            "both IMQ_ADMIN_PASSWORD and IMQ_ADMIN_PASSWORD_FILE are set: give one"
        )
    if password_file:
        secret, _ = read_secret_file(Path(password_file), "IMQ_ADMIN_PASSWORD_FILE")
        return BrokerCredentials(user, secret, f"IMQ_ADMIN_PASSWORD_FILE ({password_file})", False)
    if not password:
        raise CredentialsError(
            f"IMQ_ADMIN_USER={user} is set without IMQ_ADMIN_PASSWORD or "
            "IMQ_ADMIN_PASSWORD_FILE: give its password, or unset IMQ_ADMIN_USER so the "
            f"portal uses its own account {PORTAL_ACCOUNT}"
        )
    return BrokerCredentials(user, password, "IMQ_ADMIN_PASSWORD", False)


def broker_credentials(*, resync: bool = False) -> BrokerCredentials:
    """The user and password to log in to the broker's admin service with, as the
    settings say now (see the module docstring).  ``resync``: set the portal's own
    account from its secret even if the file did not change (the broker refused it)."""
    from django.conf import settings

    user = getattr(settings, "IMQ_ADMIN_USER", "")
    password = getattr(settings, "IMQ_ADMIN_PASSWORD", "")
    password_file = getattr(settings, "IMQ_ADMIN_PASSWORD_FILE", "")
    if user or password or password_file:
        return _given(user, password, password_file)
    return _own_account(Path(settings.IMQ_PORTAL_SECRET_FILE), resync)


_default: BrokerAdmin | None = None
_default_tls: tuple[bool, str | None] = (False, None)
_default_lock = threading.Lock()


def default_admin() -> BrokerAdmin:
    """The process-wide admin connection to the broker named by the settings
    (IMQ_BROKER_HOST, IMQ_PORT), logged in as :func:`broker_credentials` says now, over
    ``ssladmin`` with IMQ_ADMIN_SECURE (trusting IMQ_ADMIN_TRUSTSTORE: see
    :func:`broker.admintools.broker_handle.admin_ssl_context`): a changed credential (a new secret) or
    setting opens a new connection."""
    global _default, _default_tls
    from django.conf import settings

    with _default_lock:
        # After a refused login the broker's account is set from the secret again (a
        # database restored from an older backup, say), not only when the secret changes.
        creds = broker_credentials(resync=_default is not None and _default.refused)
        wanted = (
            settings.IMQ_BROKER_HOST,
            int(settings.IMQ_BROKER_PORT),
            creds.user,
            creds.password,
        )
        tls = (
            bool(getattr(settings, "IMQ_ADMIN_SECURE", False)),
            getattr(settings, "IMQ_ADMIN_TRUSTSTORE", None) or None,
        )
        if (
            _default is None
            or (_default.host, _default.port, _default.user, _default.password) != wanted
            or _default_tls != tls
        ):
            context = settings_ssl_context()
            if _default is not None:
                _default.close()
            _default = BrokerAdmin(*wanted, source=creds.source, ssl=context)
            _default_tls = tls
        return _default
