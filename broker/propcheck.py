"""The broker's configuration checked against what it honours, said once at start; and
a value an administrator gives a property at run time checked before it is sent
(:func:`property_value_problem`).

Each property set in ``config.properties``, on the command line (``-D``) or in the
cluster configuration file that this broker does not honour gets one WARNING naming it
and why (:func:`broker.props.classify` finds its declaration); an ``imq.*`` name that
nothing declares (a typo, or a property of another product) gets one too, with the
nearest known name when there is one.  Names outside ``imq.*`` that nothing declares
are left alone: a ``config.properties`` may carry other programs' settings.

No Django import: the broker runtime, tests and tools use this directly.
"""

from __future__ import annotations

import difflib
import logging
from typing import NamedTuple

from broker import props
from broker.config import DEFAULTS, BrokerConfig, ConfigError
from broker.logsetup import parse_level
from broker.protocol.dest_attributes import LIMIT_BEHAVIORS

__all__ = [
    "Finding",
    "findings",
    "property_value_problem",
    "warn_unhonoured",
    "why_not_honoured",
]

log = logging.getLogger("broker.config")


class Finding(NamedTuple):
    """One property this broker does not honour: its name, where it was set, and why."""

    name: str
    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.name} (set {self.where}) is ignored: {self.why}"


def _known_names() -> list[str]:
    return sorted({*props.declared(), *DEFAULTS, *props.REPORTED})


def why_not_honoured(name: str) -> str | None:
    """None when this broker honours property ``name`` (perhaps differently: the
    reference says how); otherwise why not, as the start-time warning words it."""
    found = props.classify(name)
    if found is not None:
        return "not supported: " + found.why if found.status == props.IGNORED else None
    if name in props.REPORTED:
        return "the broker reports it; it is not configurable"
    if not name.startswith("imq."):
        return "not a property of this broker"
    near = difflib.get_close_matches(name, _known_names(), n=1, cutoff=0.85)
    return "unknown property" + (f" (did you mean {near[0]}?)" if near else "")


def findings(config: BrokerConfig) -> list[Finding]:
    """What ``config`` sets that this broker does not honour, by name (sorted); names
    outside ``imq.*`` that nothing declares are left alone."""
    out: list[Finding] = []
    for name, where in sorted(config.configured_names().items()):
        if props.classify(name) is None and not name.startswith("imq."):
            continue
        why = why_not_honoured(name)
        if why is not None:
            out.append(Finding(name, where, why))
    return out


def warn_unhonoured(config: BrokerConfig) -> list[Finding]:
    """Log one WARNING for each property :func:`findings` returns; returns them."""
    found = findings(config)
    for finding in found:
        log.warning("%s", finding)
    return found


def property_value_problem(name: str, kind: str, value: str) -> str | None:
    """Why ``value`` is not usable for broker property ``name`` (None if it is), ``kind``
    being its kind in :data:`broker.props.RUNTIME_PROPERTIES`."""
    probe = BrokerConfig({name: value})
    text = value.strip()
    declared = props.declared().get(name)
    try:
        if kind in ("count", "size") and declared is not None:
            # Read as the broker reads it at start (broker/props.py: Limit, Size).
            probe.get(declared)
        elif kind == "bool":
            if text.lower() not in ("true", "false"):
                return f"{name}: {value!r} is not true or false"
        elif kind in ("int", "count", "positive", "port"):
            number = probe.get_int(name, 0)
            if kind == "count" and number < -1:
                return f"{name}: {number} is negative (use -1 for unlimited)"
            if kind == "positive" and number < 1:
                return f"{name}: must be at least 1"
            if kind == "port" and not 0 < number < 65536:
                return f"{name}: {number} is not a port number"
        elif kind == "size":
            probe.get_size(name, 0)
        elif kind == "level":
            parse_level(text)
        elif kind == "behavior":
            if text not in LIMIT_BEHAVIORS:
                return f"{name}: {value!r} is not one of {', '.join(LIMIT_BEHAVIORS)}"
        elif kind == "policy":
            if text.lower() not in ("single", "failover", "round-robin"):
                return f"{name}: {value!r} is not single, failover or round-robin"
    except (ConfigError, ValueError) as exc:
        return str(exc) if name in str(exc) else f"{name}: {exc}"
    return None
