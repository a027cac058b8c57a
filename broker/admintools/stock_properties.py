"""Which properties of a stock OpenMQ ``config.properties`` the import takes.

The rule is the broker's own (:func:`broker.propcheck.why_not_honoured`, the start-time
warning's); the import adds only the properties that name where an instance lives, which
ours decides from its own ``-varhome`` and ``-name``.
"""

from __future__ import annotations

from broker import props as imq
from broker.propcheck import why_not_honoured

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


def property_support(name: str) -> str | None:
    """None when this broker honours property ``name``; otherwise why it does not."""
    if name in FIXED:
        return "fixed by the instance this broker runs as (its -varhome and -name)"
    return why_not_honoured(name)
