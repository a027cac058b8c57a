"""The LDAP user repository (``imq.user_repository.ldap.*``, docs/reference/security.md).

The broker never sees a password hash here: it binds to the directory as the user with
the password the client sent (so only ``basic`` authentication can work), then finds
the user's groups with a group search.  Blocking (ldap3, synchronous strategy): the
broker calls :meth:`LdapUserRepository.verify_basic` from its worker threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ldap3 import BASE, NONE, SUBTREE, Connection, Server, ServerPool
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars

from broker import props
from broker.config import BrokerConfig, ConfigError

from .users import UserRecord

__all__ = ["LdapSettings", "LdapUserRepository"]

PREFIX = props.LDAP_PREFIX


@dataclass(frozen=True)
class LdapSettings:
    servers: tuple[tuple[str, int], ...]
    principal: str = ""
    password: str = ""
    base: str = ""
    uidattr: str = "uid"
    usrformat: str = ""
    usrfilter: str = ""
    grpsearch: bool = True
    grpbase: str = ""
    gidattr: str = "cn"
    memattr: str = "uniquemember"
    grpfilter: str = ""
    timeout: int = 180
    ssl: bool = False

    @classmethod
    def from_config(cls, config: BrokerConfig) -> LdapSettings:
        def get(suffix: str, default: str = "") -> str:
            return (config.get(PREFIX + suffix) or default).strip()

        ssl = config.get_bool(PREFIX + "ssl.enabled", False)
        server = get("server")
        if not server:
            raise ConfigError(f"{PREFIX}server: required for the LDAP user repository")
        servers = []
        for item in server.split():
            item = item.removeprefix("ldaps://").removeprefix("ldap://").rstrip("/")
            host, sep, port = item.rpartition(":")
            if not sep:
                host, port = item, ""
            try:
                servers.append((host, int(port) if port else (636 if ssl else 389)))
            except ValueError:
                raise ConfigError(f"{PREFIX}server: not host:port: {item!r}") from None
        s = cls(
            servers=tuple(servers),
            principal=get("principal"),
            password=config.get(PREFIX + "password") or "",
            base=get("base"),
            uidattr=get("uidattr", "uid"),
            usrformat=get("usrformat").lower(),
            usrfilter=get("usrfilter"),
            grpsearch=config.get_bool(PREFIX + "grpsearch", True),
            grpbase=get("grpbase"),
            gidattr=get("gidattr", "cn"),
            memattr=get("memattr", "uniquemember"),
            grpfilter=get("grpfilter"),
            timeout=config.get_int(PREFIX + "timeout", 180),
            ssl=ssl,
        )
        if s.usrformat not in ("", "dn"):
            raise ConfigError(f"{PREFIX}usrformat: only empty or 'dn', not {s.usrformat!r}")
        if not s.base and s.usrformat != "dn":
            raise ConfigError(f"{PREFIX}base: required unless {PREFIX}usrformat=dn")
        if s.grpsearch and not s.grpbase:
            raise ConfigError(f"{PREFIX}grpbase: required when {PREFIX}grpsearch is true")
        return s


def _filter(*parts: str) -> str:
    parts = tuple(p if p.startswith("(") else f"({p})" for p in parts if p)
    return parts[0] if len(parts) == 1 else "(&" + "".join(parts) + ")"


class LdapUserRepository:
    """Authenticate by binding as the user; groups from the group search."""

    kind = "ldap"
    # No password digests to give: verify_basic() binds as the user.
    lookup = None

    def __init__(self, settings: LdapSettings) -> None:
        self.settings = settings
        timeout = max(min(settings.timeout, 60), 1)
        servers = [
            Server(h, port=p, use_ssl=settings.ssl, get_info=NONE, connect_timeout=timeout)
            for h, p in settings.servers
        ]
        self.server = servers[0] if len(servers) == 1 else ServerPool(servers, active=1)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> LdapUserRepository:
        return cls(LdapSettings.from_config(config))

    def describe(self) -> str:
        hosts = " ".join(f"{h}:{p}" for h, p in self.settings.servers)
        return f"ldap{'s' if self.settings.ssl else ''} {hosts}"

    def _connection(self, user: str | None = None, password: str | None = None) -> Connection:
        s = self.settings
        return Connection(
            self.server,
            user=user,
            password=password,
            auto_bind=False,
            receive_timeout=max(s.timeout, 1),
            raise_exceptions=False,
        )

    def _search_bind(self) -> Connection:
        s = self.settings
        if s.principal:
            conn = self._connection(s.principal, s.password)
        else:
            conn = self._connection()
        if not conn.bind():
            raise LDAPException(
                f"search bind as {s.principal or 'anonymous'} failed: {conn.result}"
            )
        return conn

    def _find_dn(self, conn: Connection, username: str) -> str | None:
        s = self.settings
        flt = _filter(f"{s.uidattr}={escape_filter_chars(username)}", s.usrfilter)
        conn.search(s.base, flt, SUBTREE, attributes=[], time_limit=s.timeout, size_limit=2)
        found = [e["dn"] for e in conn.response or [] if e.get("type") == "searchResEntry"]
        return found[0] if len(found) == 1 else None

    def _groups(self, conn: Connection, dn: str) -> frozenset[str]:
        s = self.settings
        flt = _filter(f"{s.memattr}={escape_filter_chars(dn)}", s.grpfilter)
        conn.search(s.grpbase, flt, SUBTREE, attributes=[s.gidattr], time_limit=s.timeout)
        groups: set[str] = set()
        for entry in conn.response or []:
            if entry.get("type") != "searchResEntry":
                continue
            value = entry["attributes"].get(s.gidattr)
            for v in value if isinstance(value, list) else [value]:
                if v:
                    groups.add(str(v))
        return frozenset(groups)

    def find_user(self, username: str) -> UserRecord | None:
        """The user as the directory has them now, found with the search bind (no
        password): None when the directory no longer has them.  For re-checking a user
        who logged in earlier; raises :class:`LDAPException` like :meth:`verify_basic`."""
        s = self.settings
        search = self._search_bind()
        try:
            if s.usrformat == "dn":
                search.search(
                    username, "(objectClass=*)", BASE, attributes=[], time_limit=s.timeout
                )
                found = any(e.get("type") == "searchResEntry" for e in search.response or [])
                dn = username if found else None
            else:
                dn = self._find_dn(search, username)
            if dn is None:
                return None
            groups = self._groups(search, dn) if s.grpsearch else frozenset()
            return UserRecord(username, "", True, groups)
        finally:
            search.unbind()

    def verify_basic(self, username: str, password: str) -> UserRecord | None:
        """The user with their LDAP groups if the directory accepts the password, else None.

        Raises :class:`LDAPException` when the directory cannot be reached or searched
        (the broker answers that as "repository unavailable", not as a wrong password).
        """
        if not username or not password:
            # An empty password would be an unauthenticated (anonymous) bind: refuse.
            return None
        s = self.settings
        search = None
        try:
            if s.usrformat == "dn":
                dn = username
            else:
                search = self._search_bind()
                dn = self._find_dn(search, username)
                if dn is None:
                    return None
            user_conn = self._connection(dn, password)
            try:
                if not user_conn.bind():
                    return None
            finally:
                user_conn.unbind()
            groups: frozenset[str] = frozenset()
            if s.grpsearch:
                if search is None:
                    search = self._search_bind()
                groups = self._groups(search, dn)
            return UserRecord(username, "", True, groups)
        finally:
            if search is not None:
                search.unbind()
