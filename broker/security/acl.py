"""Access control: OpenMQ's ``accesscontrol.properties`` rules (docs/developers/protocol.md).

* :class:`AccessControl` - one parsed rule set and its checks (pure, cheap, no I/O);
* :func:`parse_file` / :func:`format_file` - the file format, both ways;
* :class:`AccessController` - what the broker holds: the rule sets of its services, from
  a file (``imq.accesscontrol.file.filename``) or the database (:class:`AccessRule`),
  re-read when they change;
* :func:`load_rules`, :func:`set_rule`, :func:`delete_rule`, :func:`import_rules`,
  :func:`export_rules` - the database rules; ``imqacl``, the portal and the REST API
  change them only through :mod:`broker.admintools.security_actions`.

No Django import at module level: the broker's event loop imports this.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from broker import props
from broker.config import format_properties, parse_properties
from broker.protocol.admin_types import ADMIN_QUEUES
from broker.protocol.types import TEMP_PREFIX

if TYPE_CHECKING:
    from broker.config import BrokerConfig

log = logging.getLogger("broker.acl")

VERSION_KEY = "version"
VERSION = "JMQFileAccessControlModel/100"
ADMIN_GROUP = "admin"

KINDS = ("queue", "topic")
DEST_OPS = {"queue": ("produce", "consume", "browse"), "topic": ("produce", "consume")}
SERVICE_TYPES = ("NORMAL", "ADMIN", "*")

# The accesscontrol.properties OpenMQ ships.
DEFAULT_RULES: dict[str, str] = {
    VERSION_KEY: VERSION,
    "connection.NORMAL.allow.user": "*",
    "connection.ADMIN.allow.group": ADMIN_GROUP,
    "queue.*.produce.allow.user": "*",
    "queue.*.consume.allow.user": "*",
    "queue.*.browse.allow.user": "*",
    "topic.*.produce.allow.user": "*",
    "topic.*.consume.allow.user": "*",
    "queue.create.allow.user": "*",
    "topic.create.allow.user": "*",
}

_FILE_HEADER = (
    "Access control rules (OpenMQ accesscontrol.properties format)\n"
    "connection.<NORMAL|ADMIN|*>.<allow|deny>.<user|group>=<list>\n"
    "<queue|topic>.<name|*>.<produce|consume|browse>.<allow|deny>.<user|group>=<list>\n"
    "<queue|topic>.create.<allow|deny>.<user|group>=<list>"
)


# --------------------------------------------------------------------------------------
# The file format
# --------------------------------------------------------------------------------------


def parse_file(text: str) -> dict[str, str]:
    """The rules of an ``accesscontrol.properties`` text (Java properties syntax)."""
    return parse_properties(text)


def format_file(rules: Mapping[str, str]) -> str:
    """``accesscontrol.properties`` text for ``rules``: the version line first, then the
    rules sorted; :func:`parse_file` gives back exactly ``rules``."""
    rest = {k: v for k, v in rules.items() if k != VERSION_KEY}
    text = format_properties({}, header=_FILE_HEADER)
    if VERSION_KEY in rules:
        text += format_properties({VERSION_KEY: rules[VERSION_KEY]})
    if rest:
        text += format_properties(rest)
    return text


@dataclass(frozen=True)
class RuleKey:
    """A parsed rule key.  ``scope`` is ``connection``, ``queue`` or ``topic``;
    ``target`` the service type or destination name (``*`` = all, None for create);
    ``op`` produce/consume/browse/create (None for connection rules)."""

    scope: str
    target: str | None
    op: str | None
    verdict: str  # allow | deny
    who: str  # user | group


def parse_key(key: str) -> RuleKey | None:
    """The rule a property key names, or None if it is not a rule key."""
    parts = key.split(".")
    if len(parts) < 4 or parts[-2] not in ("allow", "deny") or parts[-1] not in ("user", "group"):
        return None
    verdict, who = parts[-2], parts[-1]
    scope = parts[0]
    if scope == "connection":
        if len(parts) != 4 or parts[1] not in SERVICE_TYPES:
            return None
        return RuleKey(scope, parts[1], None, verdict, who)
    if scope not in KINDS:
        return None
    if len(parts) == 4 and parts[1] == "create":
        return RuleKey(scope, None, "create", verdict, who)
    if len(parts) < 5:
        return None
    op = parts[-3]
    name = ".".join(parts[1:-3])
    if op not in DEST_OPS[scope] or not name:
        return None
    return RuleKey(scope, name, op, verdict, who)


def unknown_keys(rules: Iterable[str]) -> list[str]:
    """The keys of ``rules`` that are neither ``version`` nor a rule."""
    return [k for k in rules if k != VERSION_KEY and parse_key(k) is None]


def _names(value: str) -> frozenset[str]:
    return frozenset(n.strip() for n in value.split(",") if n.strip())


# --------------------------------------------------------------------------------------
# One rule set
# --------------------------------------------------------------------------------------


class _Rule:
    """The four lists of one rule prefix (e.g. ``queue.orders.produce``)."""

    __slots__ = ("prefix", "allow_user", "deny_user", "allow_group", "deny_group")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.allow_user: frozenset[str] = frozenset()
        self.deny_user: frozenset[str] = frozenset()
        self.allow_group: frozenset[str] = frozenset()
        self.deny_group: frozenset[str] = frozenset()

    def decide(self, user: str, groups: frozenset[str]) -> tuple[bool | None, str]:
        """(decision or None, the entry that decided).  §3.3: a name in both allow and
        deny cancels; specific user > specific group > user ``*`` > group ``*``; two groups
        deciding differently cancel."""
        au, du = user in self.allow_user, user in self.deny_user
        if au != du:
            return au, f"{self.prefix}.{'allow' if au else 'deny'}.user={user}"
        found: dict[bool, str] = {}
        for g in groups:
            if g == "*":
                continue
            ag, dg = g in self.allow_group, g in self.deny_group
            if ag != dg:
                found.setdefault(ag, g)
        if len(found) == 1:
            ((decision, g),) = found.items()
            return decision, f"{self.prefix}.{'allow' if decision else 'deny'}.group={g}"
        au, du = "*" in self.allow_user, "*" in self.deny_user
        if au != du:
            return au, f"{self.prefix}.{'allow' if au else 'deny'}.user=*"
        ag, dg = "*" in self.allow_group, "*" in self.deny_group
        if ag != dg:
            return ag, f"{self.prefix}.{'allow' if ag else 'deny'}.group=*"
        return None, ""


def _wildcard_regex(name: str) -> re.Pattern[str] | None:
    """OpenMQ topic wildcard pattern -> regex; None if ``name`` is not a pattern."""
    levels = name.split(".")
    if not any(lv in ("*", ">", "**") for lv in levels) or name == "*":
        return None
    out = []
    for i, lv in enumerate(levels):
        if lv == "*":
            out.append(r"[^.]+")
        elif lv == "**" or (lv == ">" and i == len(levels) - 1):
            out.append(r".+")
        elif "*" in lv or ">" in lv:
            return None  # wildcards must be whole levels: a literal name then
        else:
            out.append(re.escape(lv))
    return re.compile(r"\.".join(out))


class AccessControl:
    """One rule set (the key=value pairs of an access control file)."""

    def __init__(self, props: Mapping[str, str], source: str = "access control rules") -> None:
        self.source = source
        self.rules = dict(props)
        self.error: str | None = None
        version = (props.get(VERSION_KEY) or "").strip()
        if version != VERSION:
            self.error = (
                f"{source}: version must be {VERSION}, "
                + (f"found {version!r}" if version else "the version line is missing")
                + ": every access check fails"
            )
            log.error("%s", self.error)
        self._conn: dict[str, _Rule] = {}
        self._dest: dict[tuple[str, str], dict[str, _Rule]] = {}
        self._wild: dict[str, list[tuple[re.Pattern[str], _Rule]]] = {}
        self._create: dict[str, _Rule] = {}
        for key, value in props.items():
            if key == VERSION_KEY:
                continue
            rk = parse_key(key)
            if rk is None:
                log.warning("%s: ignoring %s: not an access control rule", source, key)
                continue
            rule = self._rule_for(rk, key.rsplit(".", 2)[0])
            attr = f"{rk.verdict}_{rk.who}"
            setattr(rule, attr, _names(value))
        for name, rule in self._dest.get(("topic", "produce"), {}).items():
            self._add_wild(name, "produce", rule)
        for name, rule in self._dest.get(("topic", "consume"), {}).items():
            self._add_wild(name, "consume", rule)

    def _rule_for(self, rk: RuleKey, prefix: str) -> _Rule:
        if rk.scope == "connection":
            table = self._conn
            name = rk.target or "*"
        elif rk.op == "create":
            table = self._create
            name = rk.scope
        else:
            table = self._dest.setdefault((rk.scope, rk.op or ""), {})
            name = rk.target or "*"
        rule = table.get(name)
        if rule is None:
            rule = table[name] = _Rule(prefix)
        return rule

    def _add_wild(self, name: str, op: str, rule: _Rule) -> None:
        rx = _wildcard_regex(name)
        if rx is not None:
            self._wild.setdefault(op, []).append((rx, rule))

    @classmethod
    def refusing(cls, source: str, error: str) -> AccessControl:
        """A rule set that refuses every check because of ``error``, without reading any
        rules: the placeholder before the real rules load, or a missing file.  Logs
        nothing -- the caller decides whether ``error`` is worth telling."""
        acl = cls.__new__(cls)
        acl.source = source
        acl.rules = {}
        acl.error = error
        acl._conn, acl._dest, acl._wild, acl._create = {}, {}, {}, {}
        return acl

    @property
    def valid(self) -> bool:
        return self.error is None

    # -- evaluation ----------------------------------------------------------------

    def _evaluate(self, rules: Iterable[_Rule | None], user: str, groups: frozenset[str]):
        if self.error is not None:
            return False, f"the access control rules are unusable ({self.error})"
        if user == "*":
            return False, "a user named * is refused"
        decision: bool | None = None
        why = ""
        for rule in rules:
            if rule is None:
                continue
            d, w = rule.decide(user, groups)
            if d is not None:
                decision, why = d, w
        if decision is None:
            return False, "no rule allows it"
        return decision, why

    def connection_decision(
        self, service_type: str, user: str, groups: Iterable[str]
    ) -> tuple[bool, str]:
        """(allowed, the rule that decided) for a connection to a service of that type."""
        rules = (self._conn.get("*"), self._conn.get(service_type.upper()))
        return self._evaluate(rules, user, frozenset(groups))

    def decision(
        self, kind: str, name: str, op: str, user: str, groups: Iterable[str]
    ) -> tuple[bool, str]:
        """(allowed, the rule that decided) for ``op`` on destination ``name``."""
        table = self._dest.get((kind, op), {})
        rules: list[_Rule | None] = [table.get("*")]
        if name != "*":
            rules.append(table.get(name))
        if kind == "topic":
            named = table.get(name)
            rules.extend(
                r for rx, r in self._wild.get(op, ()) if r is not named and rx.fullmatch(name)
            )
        return self._evaluate(rules, user, frozenset(groups))

    def create_decision(self, kind: str, user: str, groups: Iterable[str]) -> tuple[bool, str]:
        """(allowed, the rule that decided) for auto-creating a ``kind`` destination."""
        return self._evaluate((self._create.get(kind),), user, frozenset(groups))

    def check_connection(self, service_type: str, user: str, groups: Iterable[str]) -> bool:
        return self.connection_decision(service_type, user, groups)[0]

    def check(self, kind: str, name: str, op: str, user: str, groups: Iterable[str]) -> bool:
        return self.decision(kind, name, op, user, groups)[0]

    def check_create(self, kind: str, user: str, groups: Iterable[str]) -> bool:
        return self.create_decision(kind, user, groups)[0]


# --------------------------------------------------------------------------------------
# The broker's view: per-service rule sets, reloaded when they change
# --------------------------------------------------------------------------------------


class _Source:
    """Where one rule set comes from: a file (mtime) or the database (row stamp)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.stamp: object = None
        # Until the first load: refuse everything, but no "version line missing" ERROR --
        # nothing has been read yet, so nothing is wrong with the rules.
        source = str(path) if path else "database rules"
        self.acl = AccessControl.refusing(source, f"{source}: not loaded yet")


class AccessController:
    """The access checks of a broker's services.  Checks run on the event loop against
    in-memory rules; :meth:`load` and :meth:`poll` (blocking) run in a worker thread."""

    def __init__(
        self, config: BrokerConfig, instance: str | None = None, *, in_worker: bool = True
    ) -> None:
        self.config = config
        self.instance = instance or config.instance
        # The broker loads rules in long-lived worker threads, which first drop a database
        # connection the server closed; a web request (the portal) must not close its own.
        self.in_worker = in_worker
        # Bumped on every reload: connections drop their cached send decisions.
        self.generation = 0
        self._sources: dict[str, _Source] = {}
        self._services: dict[str, tuple[bool, _Source]] = {}
        c = config
        kind = c.get(props.ACCESSCONTROL_TYPE).strip().lower()
        if kind != "file":
            log.warning("imq.accesscontrol.type=%s is not supported, using file rules", kind)

    def _file_for(self, service: str) -> Path | None:
        """The rule file of ``service``, or None for the database rules: the per-service
        (``imq.<service>.accesscontrol.file.filename`` / ``.dirpath``, as OpenMQ's
        AccessController reads them) or broker-wide filename and directory if set; the
        default name in the default directory only if that file exists."""
        c = self.config
        name = (c.service_prop(service, "accesscontrol.file.filename") or "").strip()
        own_dir = (c.service_prop(service, "accesscontrol.file.dirpath") or "").strip()
        explicit = bool(name or own_dir)
        if not name:
            # Set to nothing: no file (the database rules), so not read with its default.
            name = (c.get(props.ACCESSCONTROL_FILE_NAME.name) or "").strip()
            explicit |= bool(name) and name != props.ACCESSCONTROL_FILE_NAME.default
        if not name:
            return None
        dirpath = Path(own_dir or c.get(props.ACCESSCONTROL_FILE_DIRPATH) or c.instance_dir / "etc")
        path = dirpath / name
        if not explicit and not path.exists():
            return None
        return path

    def service(self, name: str) -> tuple[bool, _Source]:
        """(enabled, rule source) of service ``name`` (resolved once)."""
        entry = self._services.get(name)
        if entry is None:
            c = self.config
            enabled = c.get_bool(
                f"imq.{name}.accesscontrol.enabled", c.get(props.ACCESSCONTROL_ENABLED)
            )
            path = self._file_for(name)
            key = str(path) if path is not None else ""
            src = self._sources.get(key)
            if src is None:
                src = self._sources[key] = _Source(path)
            entry = self._services[name] = (enabled, src)
            where = f"rules from {path}" if path else "rules from the database"
            log.info("service %s: access control %s", name, where if enabled else "disabled")
        return entry

    # -- loading (blocking) ------------------------------------------------------------

    def prepare(self, services: Iterable[str]) -> None:
        for name in services:
            self.service(name)

    def poll(self) -> bool:
        """Reload every source whose file or rows changed; True if any did."""
        changed = False
        for src in list(self._sources.values()):
            try:
                changed |= self._reload(src)
            except Exception as exc:  # the old rules stay until the next try
                log.error("access control rules from %s: %s", src.acl.source, exc)
        if changed:
            self.generation += 1
        return changed

    load = poll

    def _reload(self, src: _Source) -> bool:
        if src.path is None:
            fresh = self.in_worker
            stamp = rules_stamp(self.instance, fresh_connection=fresh)
            if stamp == src.stamp:
                return False
            rules = load_rules(self.instance, fresh_connection=fresh)
            src.stamp = rules_stamp(self.instance, fresh_connection=fresh)
            src.acl = AccessControl(rules, "database rules")
        else:
            try:
                st = src.path.stat()
                stamp: object = (st.st_mtime_ns, st.st_size)
            except OSError:
                stamp = "missing"
            if stamp == src.stamp:
                return False
            src.stamp = stamp
            if stamp == "missing":
                log.error("access control file %s not found: every access check fails", src.path)
                src.acl = AccessControl.refusing(str(src.path), f"{src.path} not found")
            else:
                data = src.path.read_bytes()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = data.decode("latin-1")
                src.acl = AccessControl(parse_file(text), str(src.path))
        log.info("access control rules loaded from %s", src.acl.source)
        return True

    # -- checks (event loop) -----------------------------------------------------------

    def check_connection(
        self, service: str, service_type: str, user: str, groups: frozenset[str]
    ) -> tuple[bool, str]:
        enabled, src = self.service(service)
        if not enabled:
            if service_type.upper() == "ADMIN" and ADMIN_GROUP not in groups:
                return False, "the ADMIN service needs group admin"
            return True, "access control disabled"
        return src.acl.connection_decision(service_type, user, groups)

    def dest_enabled(self, service: str) -> bool:
        return self.service(service)[0]

    def check_dest(
        self,
        service: str,
        service_type: str,
        kind: str,
        name: str,
        op: str,
        user: str,
        groups: frozenset[str],
    ) -> tuple[bool, str]:
        enabled, src = self.service(service)
        if not enabled or name.startswith(TEMP_PREFIX):
            return True, ""
        if name in ADMIN_QUEUES and kind == "queue":
            if service_type.upper() == "ADMIN":
                return True, ""
            return False, f"{name} is only for ADMIN services"
        return src.acl.decision(kind, name, op, user, groups)

    def check_create(
        self, service: str, service_type: str, kind: str, name: str, user: str, groups
    ) -> tuple[bool, str]:
        enabled, src = self.service(service)
        if not enabled or name.startswith(TEMP_PREFIX):
            return True, ""
        if name in ADMIN_QUEUES and kind == "queue":
            return (True, "") if service_type.upper() == "ADMIN" else (False, name)
        return src.acl.create_decision(kind, user, groups)


# --------------------------------------------------------------------------------------
# Database rules (blocking; Django imported on use)
# --------------------------------------------------------------------------------------


def _scope(instance: str | None):
    from django.db.models import Q

    q = Q(broker_instance="")
    if instance:
        q |= Q(broker_instance=instance)
    return q


def ensure_seeded() -> bool:
    """Fill an empty rule table with :data:`DEFAULT_RULES` (for all brokers)."""
    from broker.models import AccessRule

    if AccessRule.objects.exists():
        return False
    AccessRule.objects.bulk_create(
        [AccessRule(broker_instance="", key=k, value=v) for k, v in DEFAULT_RULES.items()],
        ignore_conflicts=True,
    )
    return True


def rules_stamp(instance: str | None, *, fresh_connection: bool = True) -> tuple:
    """Changes whenever a rule of ``instance`` (or of all brokers) changes
    (``fresh_connection``: first drop a stale database connection, see AccessController)."""
    from django.db import close_old_connections
    from django.db.models import Count, Max

    from broker.models import AccessRule

    if fresh_connection:
        close_old_connections()
    agg = AccessRule.objects.filter(_scope(instance)).aggregate(n=Count("id"), m=Max("updated"))
    return (agg["n"], agg["m"])


def load_rules(instance: str | None = None, *, fresh_connection: bool = True) -> dict[str, str]:
    """The database rules for ``instance``: rules for all brokers, overridden by the
    instance's own.  Seeds :data:`DEFAULT_RULES` if the table is empty."""
    from django.db import close_old_connections

    from broker.models import AccessRule

    if fresh_connection:
        close_old_connections()
    ensure_seeded()
    rules: dict[str, str] = {}
    rows = AccessRule.objects.filter(_scope(instance)).order_by("broker_instance", "key")
    for row in rows:  # "" sorts first: the instance's own rules win
        rules[row.key] = row.value
    return rules


def _check_rule(key: str, value: str) -> None:
    if key == VERSION_KEY:
        return
    if parse_key(key) is None:
        raise ValueError(f"{key!r} is not an access control rule key")
    if "\n" in value or "\r" in value:
        raise ValueError("a rule value is one line")


def set_rule(key: str, value: str, instance: str = "") -> None:
    """Create or change one rule (``instance`` empty: for all brokers)."""
    from broker.models import AccessRule

    _check_rule(key, value)
    ensure_seeded()
    AccessRule.objects.update_or_create(
        broker_instance=instance, key=key, defaults={"value": value}
    )


def delete_rule(key: str, instance: str = "") -> bool:
    """Delete one rule; False if there was none."""
    from broker.models import AccessRule

    ensure_seeded()
    n, _ = AccessRule.objects.filter(broker_instance=instance, key=key).delete()
    return n > 0


def import_rules(text: str, replace: bool = True, instance: str = "") -> list[str]:
    """Load an ``accesscontrol.properties`` text; ``replace`` drops the rules not in it
    (merge otherwise).  Every key is stored; returns warnings for keys that are not rules
    or a missing/wrong version."""
    from django.db import transaction

    from broker.models import AccessRule

    rules = parse_file(text)
    warnings = [f"{k}: not an access control rule (kept, ignored)" for k in unknown_keys(rules)]
    with transaction.atomic():
        if replace:
            AccessRule.objects.filter(broker_instance=instance).delete()
            if instance:
                ensure_seeded()
        else:
            ensure_seeded()
        for key, value in rules.items():
            AccessRule.objects.update_or_create(
                broker_instance=instance, key=key, defaults={"value": value}
            )
    effective = load_rules(instance or None)
    if (effective.get(VERSION_KEY) or "").strip() != VERSION:
        warnings.append(f"version is not {VERSION}: every access check will fail")
    return warnings


def export_rules(instance: str = "") -> str:
    """The rules stored for ``instance`` (empty: for all brokers) as a file text."""
    from broker.models import AccessRule

    ensure_seeded()
    rows = AccessRule.objects.filter(broker_instance=instance).order_by("key")
    return format_file({r.key: r.value for r in rows})
