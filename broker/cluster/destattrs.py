"""Destination attributes as OpenMQ's brokers pass them to each other.

G_UPDATE_DESTINATION (and its change-record entries) carries a destination's attributes
as a property table, under the stock broker's internal names (``max_messages``,
``behaviour``, ``local``, ...) rather than the names an administrator uses
(``maxNumMsgs``, ``limitBehavior``, ``isLocalOnly``), together with fields that describe
the destination itself (``name``, ``type``, ``queue``, ``scope``, ``state``...).
:func:`to_wire` writes that table from ours; :func:`from_wire` reads one back into our
attribute names and values (a table of our own names, as our brokers sent before, is read
too).  Pure functions, no I/O.
"""

from __future__ import annotations

from broker.protocol.dest_attributes import BY_NAME, convert
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.types import LimitBehavior

# The stock broker's name -> ours (imqcmd's).
STOCK_TO_OURS: dict[str, str] = {
    "max_messages": "maxNumMsgs",
    "max_bytes": "maxTotalMsgBytes",
    "max_size": "maxBytesPerMsg",
    "behaviour": "limitBehavior",
    "max_producers": "maxNumProducers",
    "max_prefetch": "consumerFlowLimit",
    "max_active": "maxNumActiveConsumers",
    "max_failover": "maxNumBackupConsumers",
    "local": "isLocalOnly",
    "local_delivery_preferred": "localDeliveryPreferred",
    "useDMQ": "useDMQ",
    "max_shared_consumers": "maxNumSharedConsumers",
    "sharedPrefetch": "sharedConsumerFlowLimit",
    "validateXMLSchemaEnabled": "validateXMLSchemaEnabled",
    "XMLSchemaURIList": "XMLSchemaURIList",
    "reloadXMLSchemaOnFailure": "reloadXMLSchemaOnFailure",
}
OURS_TO_STOCK = {v: k for k, v in STOCK_TO_OURS.items()}
# Sizes travel as longs, counts as ints.
_SIZES = {"max_bytes", "max_size"}
# Queue-only and topic-only fields of the stock table.
_QUEUE_ONLY = {"max_active", "max_failover", "local_delivery_preferred"}
_TOPIC_ONLY = {"max_shared_consumers", "sharedPrefetch"}

# What the stock broker sends for an administrator-created destination with default
# attributes (the values ours fills in for attributes it has no value for).
_STOCK_DEFAULTS: dict[str, object] = {
    "temporary": False,
    "reloadXMLSchemaOnFailure": False,
    "internal": False,
    "validateXMLSchemaEnabled": False,
    "admin": False,
    "useDMQ": True,
    "local": False,
    "autocreated": False,
    "max_consumers": JInt(-1),
    "max_messages": JInt(-1),
    "scope": JInt(1),
    "max_producers": JInt(100),
    "behaviour": JInt(int(LimitBehavior.REJECT_NEWEST)),
    "state": JInt(1),
    "max_prefetch": JInt(1000),
    # queues
    "max_failover": JInt(0),
    "local_delivery_preferred": False,
    "max_active": JInt(-1),
    # topics
    "max_shared_consumers": JInt(-1),
    "sharedPrefetch": JInt(5),
}


def to_wire(name: str, is_queue: bool, attrs: dict[str, object]) -> dict[str, object]:
    """The stock broker's attribute table for destination ``name`` with our ``attrs``."""
    out: dict[str, object] = {
        k: v
        for k, v in _STOCK_DEFAULTS.items()
        if k not in (_TOPIC_ONLY if is_queue else _QUEUE_ONLY)
    }
    out.update(name=name, type=JInt(1 if is_queue else 2), queue=is_queue)
    for ours, value in attrs.items():
        stock = OURS_TO_STOCK.get(ours)
        if value is None:
            continue
        if stock is None:
            if ours in BY_NAME:  # ours alone (maxDeliveryCount): a stock broker ignores it
                out[ours] = value
            continue
        if stock in (_TOPIC_ONLY if is_queue else _QUEUE_ONLY):
            continue
        if stock == "behaviour":
            try:
                out[stock] = JInt(int(LimitBehavior[str(value)]))
            except KeyError:
                continue
        elif isinstance(value, bool) or isinstance(value, str):
            out[stock] = value
        elif isinstance(value, int):
            if stock in _SIZES:
                if value < 0:
                    out.pop(stock, None)  # unlimited: the stock broker leaves it out
                else:
                    out[stock] = JLong(value)
            else:
                out[stock] = JInt(value)
    return out


def from_wire(table: dict[str, object]) -> tuple[dict[str, object], list[str]]:
    """Our attributes from a received table, and the problems with the values that could
    not be used (each ``name: why``; the rest still applies)."""
    out: dict[str, object] = {}
    problems: list[str] = []
    for key, value in table.items():
        ours = STOCK_TO_OURS.get(key) or (key if key in BY_NAME else None)
        if ours is None:
            continue  # the destination's own description (name, type, state...)
        if ours == "limitBehavior" and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = LimitBehavior(int(value)).name
            except ValueError:
                problems.append(f"{key}: {value} is not a limit behaviour")
                continue
        try:
            out[ours] = convert(ours, value)
        except ValueError as exc:
            problems.append(f"{key}: {exc}")
    return out, problems


__all__ = ["OURS_TO_STOCK", "STOCK_TO_OURS", "from_wire", "to_wire"]
