"""Portal login against the broker's user repository.

The portal's users are the broker's: the repository the broker uses for basic
authentication on its admin service (``imq.authentication.basic.user_repository``, per
service ``imq.admin.authentication.basic.user_repository``) — the database (default), an
OpenMQ passwd file, or LDAP.  A successful login creates or refreshes a Django user of the
same name whose ``is_staff`` says whether the user is in the broker's ``admin`` group:
only those administer (:func:`is_administrator`).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend

from broker.config import BrokerConfig, ConfigError
from broker.security.digest import basic_credential, constant_time_equals
from broker.security.repository import UserRepositories, repository_name
from broker.security.users import UserRecord

log = logging.getLogger("portal.auth")

ADMIN_SERVICE = "admin"


def broker_config() -> BrokerConfig:
    """The configuration of the broker instance the portal belongs to."""
    return BrokerConfig.load(settings.IMQ_INSTANCE, settings.IMQ_VARHOME)


def verify(username: str, password: str) -> UserRecord | None:
    """The user's record when the password is right and the user active, else None."""
    config = broker_config()
    repos = UserRepositories(config)
    name = repository_name(config, "basic", ADMIN_SERVICE)
    repo = repos.get(name)
    check = getattr(repo, "verify_basic", None)
    if check is not None:  # LDAP binds as the user
        record = check(username, password)
    else:
        record = repo.lookup(username)
        if record is not None and not constant_time_equals(
            basic_credential(username, password), record.password_digest
        ):
            record = None
    if record is None or not record.active:
        return None
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
        admin = record.is_admin
        if user.is_staff != admin or not user.is_active or user.has_usable_password():
            user.is_staff = admin
            user.is_active = True
            user.set_unusable_password()  # the repository stays the only password check
            user.save()
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
    """Administrators are authenticated members of the broker's admin group."""
    return bool(user and user.is_authenticated and user.is_active and user.is_staff)
