"""Which user repository authenticates a connection service.

``imq.authentication.<type>.user_repository`` (broker-wide, per authentication type) and
``imq.<service>.authentication.<type>.user_repository`` (per service) name it:

* ``database`` (also ``db``): the users and groups of the shared data model (our
  default; OpenMQ's is ``file``);
* ``file``: OpenMQ's passwd file, ``imq.user_repository.file.dirpath`` +
  ``imq.user_repository.file.filename``;
* ``ldap``: ``imq.user_repository.ldap.*``, ``basic`` authentication only.

Each is a :class:`UserRepository`.  Repositories holding password hashes (database,
file) have ``lookup(username)``; LDAP has ``verify_basic(username, password)`` instead,
and the other is None.  :func:`check_auth_repository` is the start-up check that refuses
digest with LDAP.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from broker import props
from broker.config import BrokerConfig, ConfigError

if TYPE_CHECKING:
    from .users import UserRecord

__all__ = [
    "REPOSITORY_NAMES",
    "LoginThrottle",
    "UserRepositories",
    "UserRepository",
    "check_auth_repository",
    "repository_name",
]

AUTH_TYPES = ("basic", "digest")
_ALIASES = {"database": "database", "db": "database", "file": "file", "ldap": "ldap"}
REPOSITORY_NAMES = tuple(sorted(set(_ALIASES.values())))


def repository_name(config: BrokerConfig, auth_type: str, service: str | None = None) -> str:
    """The repository (database, file or ldap) for ``auth_type`` on ``service``."""
    prop = f"imq.authentication.{auth_type}.user_repository"
    value = config.get(prop)
    if service is not None:
        sprop = f"imq.{service}.authentication.{auth_type}.user_repository"
        if config.get(sprop):
            prop, value = sprop, config.get(sprop)
    name = (value or "database").strip().lower()
    if name not in _ALIASES:
        raise ConfigError(
            f"{prop}: unknown user repository {value!r} (database, file or ldap; jaas is Java-only)"
        )
    return _ALIASES[name]


def check_auth_repository(auth_type: str, name: str, service: str) -> None:
    """Refuse combinations that cannot authenticate anybody (digest needs stored hashes)."""
    if name == "ldap" and auth_type != "basic":
        raise ConfigError(
            f"LDAP needs basic authentication: service {service} uses {auth_type} "
            f"authentication with the ldap user repository (set imq.{service}."
            f"authentication.type=basic or imq.authentication.type=basic; the directory "
            "is checked by binding with the password, which digest never sends)"
        )


class UserRepository(Protocol):
    """What the broker asks of a user repository (blocking calls: off the event loop).

    Exactly one of ``lookup`` and ``verify_basic`` is a method, the other None: the
    broker compares the password digest of the record ``lookup`` finds itself (database,
    file), or the repository checks the password (LDAP binds as the user).
    """

    @property
    def kind(self) -> str:
        """Its name in ``user_repository``: database, file or ldap."""
        ...

    def describe(self) -> str:
        """Which one it is, for the start-up log (``file /path/passwd``)."""
        ...

    @property
    def lookup(self) -> Callable[[str], UserRecord | None] | None:
        """The user (with its password digest) by name, None if unknown."""
        ...

    @property
    def verify_basic(self) -> Callable[[str, str], UserRecord | None] | None:
        """The user if the repository accepts the password, else None."""
        ...


def passwd_path(config: BrokerConfig) -> Path:
    dirpath = config.get(props.USER_FILE_DIRPATH) or str(config.instance_dir / "etc")
    return Path(dirpath) / config.get(props.USER_FILE_NAME)


class UserRepositories:
    """The repositories a broker uses, built once each and shared between services."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._built: dict[str, UserRepository] = {}

    def get(self, name: str) -> UserRepository:
        repo = self._built.get(name)
        if repo is None:
            repo = self._built[name] = self._build(name)
        return repo

    def _build(self, name: str) -> UserRepository:
        if name == "database":
            from .users import DatabaseUserRepository

            return DatabaseUserRepository()
        if name == "file":
            from .filerepo import FileUserRepository

            return FileUserRepository(passwd_path(self.config))
        from .ldaprepo import LdapUserRepository

        return LdapUserRepository.from_config(self.config)

    def for_service(self, service: str, auth_type: str) -> UserRepository:
        """The repository for a service with ``auth_type``; ConfigError if unusable."""
        name = repository_name(self.config, auth_type, service)
        check_auth_repository(auth_type, name, service)
        return self.get(name)

    def check(self, services: list[str]) -> dict[str, str]:
        """Validate every service's choice before anything listens; {service: description}."""
        out = {}
        for service in services:
            auth = (
                self.config.service_prop(
                    service, "authentication.type", self.config.get(props.AUTH_TYPE)
                )
                or "digest"
            ).lower()
            if auth not in AUTH_TYPES:
                continue  # the broker reports unknown types itself
            repo = self.for_service(service, auth)
            out[service] = f"{auth} against {repo.describe()}"
        return out


class LoginThrottle:
    """Failed logins per remote address: after ``free`` failures within ``window``
    seconds, each further failure is answered later (1 s, 2 s, 4 s ... up to ``cap``).

    The broker answers the delayed refusal (413 INVALID_LOGIN) with ``loop.call_later``; nothing blocks.
    """

    def __init__(
        self, free: int = 3, window: float = 60.0, cap: float = 10.0, max_hosts: int = 10000
    ) -> None:
        self.free = free
        self.window = window
        self.cap = cap
        self.max_hosts = max_hosts
        self._failures: dict[str, list[float]] = {}

    def failed(self, host: str, now: float) -> tuple[int, float]:
        """Record a failure from ``host``; return (failures in the window, delay seconds)."""
        if len(self._failures) >= self.max_hosts and host not in self._failures:
            self._prune(now)
        recent = [t for t in self._failures.get(host, ()) if now - t < self.window]
        recent.append(now)
        self._failures[host] = recent
        extra = len(recent) - self.free
        delay = 0.0 if extra <= 0 else min(2.0 ** (extra - 1), self.cap)
        return len(recent), delay

    def _prune(self, now: float) -> None:
        for host, times in list(self._failures.items()):
            if not times or now - times[-1] >= self.window:
                del self._failures[host]
        while len(self._failures) >= self.max_hosts:  # still full: forget the oldest
            del self._failures[next(iter(self._failures))]
