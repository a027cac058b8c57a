"""Portal login against the broker's user repository, and who is an administrator now.

The portal's users are the broker's: the repository the broker uses for basic
authentication on its admin service (``imq.authentication.basic.user_repository``, per
service ``imq.admin.authentication.basic.user_repository``) — the database (default), an
OpenMQ passwd file, or LDAP.  A successful login creates or refreshes a Django user of the
same name (its ``is_staff`` mirrors the answer below, for Django's own use).

Who is an administrator is the broker's rule, not the portal's: a user the broker would
let connect to its admin service (``connection.ADMIN`` access rules of the service
``admin``, from the rules file or the database, as ``broker.security.acl`` applies them;
with access control disabled, a member of group ``admin``).  :func:`is_administrator`
is the one check the pages, the REST API (session and token), the live feed and
/metrics use.  It asks the repository on every request, so a user disabled, deleted or
moved out of an allowed group -- by the portal, the REST API, ``imqusermgr``, an edit
of the passwd file or a change in the directory -- is refused at the next request,
whatever their session or token says; a change of the rules counts within a second:

* database: the user and their groups, one query each;
* passwd file: a ``stat`` of the file, re-read only when it changed;
* LDAP: a search with the repository's search bind, remembered for
  ``PORTAL_LDAP_RECHECK_SECONDS`` (30 s by default) per user so that a page with many
  requests does not cost a directory round trip each; an unreachable directory refuses.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend

from broker.config import BrokerConfig, ConfigError
from broker.security.acl import AccessController
from broker.security.digest import constant_time_equals, password_digest
from broker.security.repository import UserRepositories, UserRepository, repository_name
from broker.security.users import UserRecord

log = logging.getLogger("portal.auth")

ADMIN_SERVICE = "admin"
# The access rules (a file's stat, or a query of the rules' stamp) are looked at again at
# most this often.
RULES_RECHECK_SECONDS = 1.0

# Set on the request's user object: the answer of is_administrator for this request.
_ANSWER = "_imq_administrator"


def broker_config() -> BrokerConfig:
    """The configuration of the broker instance the portal belongs to."""
    return BrokerConfig.load(settings.IMQ_INSTANCE, settings.IMQ_VARHOME)


class _AdminRepository:
    """The admin service's basic-authentication repository, built once per configuration
    (a passwd file repository keeps its parsed file, LDAP its server pool) and rebuilt
    when ``config.properties`` changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._built: tuple[str, UserRepository] | None = None
        self._rules: AccessController | None = None
        self._rules_read = 0.0
        self._ldap_seen: dict[str, tuple[float, bool]] = {}

    def _config_key(self) -> tuple:
        varhome = Path(settings.IMQ_VARHOME)
        path = varhome / "instances" / settings.IMQ_INSTANCE / "props" / "config.properties"
        try:
            st = path.stat()
            stamp: tuple = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = ()
        return (str(varhome), settings.IMQ_INSTANCE, stamp)

    def get(self) -> tuple[str, UserRepository]:
        """(repository name, repository); ConfigError when the configuration is unusable."""
        key = self._config_key()
        with self._lock:
            if self._key != key or self._built is None:
                config = broker_config()
                name = repository_name(config, "basic", ADMIN_SERVICE)
                self._built = (name, UserRepositories(config).get(name))
                self._rules = AccessController(config, in_worker=False)
                self._rules.prepare([ADMIN_SERVICE])
                self._rules_read = 0.0
                self._key = key
                self._ldap_seen.clear()
            return self._built

    def may_administer(self, record: UserRecord | None) -> bool:
        """Whether the broker would let ``record``'s user connect to its admin service."""
        if record is None or not record.active:
            return False
        if self._rules is None:  # callers built it with get() already, for this request
            self.get()
        with self._lock:
            rules = self._rules
            assert rules is not None
            now = time.monotonic()
            if now - self._rules_read >= RULES_RECHECK_SECONDS:
                rules.poll()
                self._rules_read = now
        ok, _why = rules.check_connection(ADMIN_SERVICE, "ADMIN", record.username, record.groups)
        return ok

    def remember(self, username: str, admin: bool) -> None:
        """What a login just learnt from the directory (saves the first re-check)."""
        with self._lock:
            self._ldap_seen[username] = (time.monotonic(), admin)

    def ldap_admin(self, repo, username: str) -> bool:
        ttl = float(getattr(settings, "PORTAL_LDAP_RECHECK_SECONDS", 30))
        with self._lock:
            seen = self._ldap_seen.get(username)
        if seen is not None and time.monotonic() - seen[0] < ttl:
            return seen[1]
        try:
            record = repo.find_user(username)
        except Exception:
            # Refused, and not asked again within the interval: a directory that does
            # not answer would otherwise hold every request for its time-out.
            self.remember(username, False)
            raise
        admin = self.may_administer(record)
        self.remember(username, admin)
        return admin


_repository = _AdminRepository()


def repository_says_admin(username: str) -> bool:
    """Whether ``username``, as the admin service's user repository has them right now,
    may administer (the broker's ``connection.ADMIN`` rule; see the module docstring
    for the cost)."""
    name, repo = _repository.get()
    if name == "database":
        from broker.models import BrokerUser

        # Not the repository's lookup: that one closes stale connections, which a
        # request must not do under its own feet.
        user = BrokerUser.objects.prefetch_related("groups").filter(username=username).first()
        if user is None:
            return False
        record = UserRecord(
            user.username,
            user.password_digest,
            user.active,
            frozenset(g.name for g in user.groups.all()),
        )
        return _repository.may_administer(record)
    if name == "ldap":
        return _repository.ldap_admin(repo, username)
    lookup = repo.lookup
    assert lookup is not None  # a passwd file: it holds the digests
    return _repository.may_administer(lookup(username))


def verify(username: str, password: str) -> UserRecord | None:
    """The user's record when the password is right and the user active, else None."""
    name, repo = _repository.get()
    check = repo.verify_basic
    if check is not None:  # LDAP binds as the user
        record = check(username, password)
    else:
        lookup = repo.lookup
        assert lookup is not None  # a UserRepository has one of the two
        record = lookup(username)
        if record is not None and not constant_time_equals(
            password_digest(username, password), record.password_digest
        ):
            record = None
    if record is None or not record.active:
        return None
    if name == "ldap":
        _repository.remember(username, _repository.may_administer(record))
    return record


class BrokerUserBackend(BaseBackend):
    """Authenticates portal logins against the broker's user repository."""

    def authenticate(self, request, username: str | None = None, password: str | None = None, **kw):
        if not username or password is None:
            return None
        try:
            record = verify(username, password)
        except ConfigError as exc:
            log.error("portal login for %s impossible: %s", username, exc)
            return None
        except Exception as exc:  # the directory is down, ...: a refused login, said once
            log.warning("portal login for %s failed: user repository error: %s", username, exc)
            return None
        where = request.META.get("REMOTE_ADDR", "?") if request is not None else "?"
        if record is None:
            log.warning("portal login refused for %s from %s", username, where)
            return None
        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(username=username)
        admin = _repository.may_administer(record)
        if user.is_staff != admin or not user.is_active or user.has_usable_password():
            user.is_staff = admin
            user.is_active = True
            user.set_unusable_password()  # the repository stays the only password check
            user.save()
        setattr(user, _ANSWER, admin)  # just read from the repository
        log.info(
            "portal login by %s from %s (%s)",
            username,
            where,
            "admin" if admin else "no admin rights",
        )
        return user

    def get_user(self, user_id: int):
        user_model = get_user_model()
        return user_model.objects.filter(pk=user_id, is_active=True).first()


def is_administrator(user) -> bool:
    """Whether ``user`` (a request's user) may administer: logged in, and allowed on the
    broker's admin service by its access rules, as the user repository and the rules
    are now -- not as they were at login.  Asked once per request (the answer stays on
    the request's user object)."""
    if not (user and user.is_authenticated and user.is_active):
        return False
    answer = getattr(user, _ANSWER, None)
    if answer is None:
        username = user.get_username()
        try:
            answer = repository_says_admin(username)
        except Exception as exc:  # refused while the repository cannot answer
            log.warning("cannot check %s's administrator rights: %s", username, exc)
            answer = False
        setattr(user, _ANSWER, answer)
    return answer
