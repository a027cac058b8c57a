"""Which properties of a stock OpenMQ ``config.properties`` this broker honours.

:func:`property_support` is the one place the import from a stock instance
(:mod:`broker.admin.stock_import`) asks; it reads the declarations of
:mod:`broker.props` as they are.  Everything else here only words the reason.
"""

from __future__ import annotations

import re

from broker import props as imq

__all__ = ["FIXED", "property_support"]

# Where an instance lives: ours decides them from its own -varhome and -name.
FIXED = frozenset(
    {
        imq.INSTANCE_NAME.name,
        imq.VARHOME.name,
        imq.INSTANCES_HOME.name,
        imq.ETCHOME.name,
        "imq.home",
        "imq.libhome",
        "imq.javahome",
    }
)

# Declared in broker/props.py (OpenMQ's default.properties lists them) and read nowhere.
_DECLARED_NOT_READ = frozenset(
    p.name
    for p in (
        *imq._FILE_STORE_TUNING,
        *imq._LOG_OUTPUTS,
        *imq._RESTART,
        *imq.TUNNEL_SERVLET_PROPS,
    )
)

# Families of stock properties this broker has no counterpart for, with why.
_UNSUPPORTED = (
    (
        "imq.jmx.",
        "JMX is not supported by this broker (its admin protocol, REST API and /metrics are)",
    ),
    ("imq.bridge.", "the bridge service (JMS and STOMP bridges) is not supported"),
    (
        "imq.persist.jdbc.",
        "the database store uses the portal's database (DATABASE_URL), not OpenMQ's JDBC settings",
    ),
    ("imq.user_repository.jaas.", "JAAS user repositories are not supported"),
    ("imq.instanceconfig.", "the stock broker's own bookkeeping of its configuration file"),
    ("imq.partitionmode.", "the stock broker's partitioned store is not supported"),
    ("imq.storemigration.", "the stock broker's store migration settings do not apply"),
)

_SERVICE_NAMES = frozenset(s[0] for s in imq.SERVICES)
# imq.<service>.<suffix> read by this broker (broker/config.py service_prop's callers).
_SERVICE_SUFFIX = re.compile(
    r"(protocoltype|servicetype|max_threads|max_connections|authentication\.type"
    r"|authentication\.(basic|digest)\.user_repository|accesscontrol\.enabled"
    r"|accesscontrol\.file\.filename|accesscontrol\.file\.dirpath"
    r"|(tcp|tls|http|https|ws|wss)\.(port|hostname|backlog))"
)
_THREAD_POOL = ("min_threads", "threadpool_model")


def property_support(name: str) -> str | None:
    """None when this broker honours property ``name``; otherwise why it does not."""
    if name in FIXED:
        return "fixed by the instance this broker runs as (its -varhome and -name)"
    if name in _DECLARED_NOT_READ:
        return "known to this broker, which does not act on it"
    for prefix, why in _UNSUPPORTED:
        if name.startswith(prefix):
            return why
    if name in imq.declared() or name.startswith(imq.LDAP_PREFIX):
        return None
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "imq" and parts[1] in _SERVICE_NAMES:
        suffix = parts[2]
        if suffix in _THREAD_POOL:
            return "a Java thread-pool setting: this broker has no thread pools"
        if _SERVICE_SUFFIX.fullmatch(suffix):
            return None
        if name in imq.listed_defaults():
            return "known to this broker, which does not act on it"
    if name in imq.listed_defaults():
        return None
    return "not a property this broker knows"
