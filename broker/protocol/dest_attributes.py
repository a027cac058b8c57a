"""Destination attributes by their OpenMQ names, and how they travel in a DestinationInfo.

One table, :data:`DESTINATION_ATTRIBUTES`, says for each attribute an administrator can
set (``imqcmd create dst -o name=value``): its value type, what it means, and the
``DestinationInfo`` field and update-mask bit that carry it in CREATE_DESTINATION /
UPDATE_DESTINATION (docs/developers/protocol.md).  The admin client builds requests from it
(:func:`destination_info_fields`), the broker reads them back
(:func:`attributes_from_info`), and forms and the REST API describe their fields with it.

Values may come as strings (a command line, a form): :func:`convert` turns them into
their Python value or raises ValueError saying what is wrong.  Counts and sizes are read
as OpenMQ's broker reads them, by the parsers of :mod:`broker.props`: sizes in bytes or as
a SizeString (``512``, ``100b``, ``10k``, ``5m``); a negative value is no limit (-1), and
0 means what it means on OpenMQ's broker (no limit for maxNumMsgs, maxTotalMsgBytes and
maxBytesPerMsg; refused for maxNumProducers and maxNumActiveConsumers).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker import props
from broker.protocol import admin_info as ai
from broker.protocol.destname import ADMIN_NAME_RULE, admin_name_problem, valid_admin_name
from broker.protocol.jtypes import JInt
from broker.protocol.properties import as_int
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, LimitBehavior

from .names import JMQ_MAX_DELIVERY_COUNT

# Value types.
INT = "int"  # a count; -1 = unlimited
SIZE = "size"  # bytes (or a size string); -1 = unlimited
BOOL = "bool"
CHOICE = "choice"  # one of ``choices``
STRING = "string"

LIMIT_BEHAVIORS: tuple[str, ...] = tuple(b.name for b in LimitBehavior)

# ClusterDeliveryPolicy (mqcomm-util .../util/ClusterDeliveryPolicy).
CDP_NA = 0
CDP_LOCAL_PREFERRED = 1
CDP_DISTRIBUTED = 2


@dataclass(frozen=True)
class DestinationAttribute:
    """One destination attribute: ``name`` as imqcmd spells it."""

    name: str
    type: str
    doc: str
    # The DestinationInfo field and update-mask bit (None: not carried by DestinationInfo).
    field: str | None
    mask: int
    # "queue", "topic" or None (both).
    applies_to: str | None = None
    choices: tuple[str, ...] = ()
    # Smallest allowed value of an INT/SIZE attribute (besides -1 = unlimited, and 0 when
    # ``zero_unlimited``).
    minimum: int = 0
    # 0 means no limit (stored as -1), as OpenMQ's broker takes it.
    zero_unlimited: bool = False

    def applies(self, is_topic: bool) -> bool:
        return self.applies_to is None or self.applies_to == ("topic" if is_topic else "queue")


DESTINATION_ATTRIBUTES: tuple[DestinationAttribute, ...] = (
    DestinationAttribute(
        "maxNumMsgs",
        INT,
        "Most unconsumed messages the destination holds (-1: unlimited).",
        "maxMessages",
        ai.DEST_MAX_MESSAGES,
        zero_unlimited=True,
    ),
    DestinationAttribute(
        "maxTotalMsgBytes",
        SIZE,
        "Most bytes of unconsumed messages (-1: unlimited; 100b, 10k, 5m accepted).",
        "maxMessageBytes",
        ai.DEST_MAX_MESSAGE_BYTES,
        zero_unlimited=True,
    ),
    DestinationAttribute(
        "maxBytesPerMsg",
        SIZE,
        "Largest message accepted, in bytes of the packet as sent (-1: unlimited; 100b, "
        "10k, 5m accepted).",
        "maxMessageSize",
        ai.DEST_MAX_MESSAGE_SIZE,
        zero_unlimited=True,
    ),
    DestinationAttribute(
        "limitBehavior",
        CHOICE,
        "What happens when a limit is reached: slow producers (FLOW_CONTROL), drop the "
        "oldest message (REMOVE_OLDEST), refuse the new one (REJECT_NEWEST) or drop the "
        "oldest of the lowest priority (REMOVE_LOW_PRIORITY).",
        "destLimitBehavior",
        ai.DEST_LIMIT,
        choices=LIMIT_BEHAVIORS,
    ),
    DestinationAttribute(
        "maxNumProducers",
        INT,
        "Most producers at once (-1: unlimited).",
        "maxProducers",
        ai.DEST_MAX_PRODUCERS,
        minimum=1,
    ),
    DestinationAttribute(
        "consumerFlowLimit",
        INT,
        "Messages sent to a consumer ahead of its acknowledgements (-1: unlimited).",
        "maxPrefetch",
        ai.DEST_PREFETCH,
    ),
    DestinationAttribute(
        "maxNumActiveConsumers",
        INT,
        "Queue: consumers receiving at once (-1: unlimited, 1: exclusive).",
        "maxActiveConsumers",
        ai.DEST_MAX_ACTIVE_CONSUMERS,
        applies_to="queue",
        minimum=1,
    ),
    DestinationAttribute(
        "maxNumBackupConsumers",
        INT,
        "Queue: consumers waiting to take over from an active one (-1: unlimited).",
        "maxFailoverConsumers",
        ai.DEST_MAX_FAILOVER_CONSUMERS,
        applies_to="queue",
    ),
    DestinationAttribute(
        "isLocalOnly",
        BOOL,
        "Not propagated to other brokers of a cluster.",
        "destScope",
        ai.DEST_SCOPE,
    ),
    DestinationAttribute(
        "localDeliveryPreferred",
        BOOL,
        "Queue, cluster: deliver to local consumers first.",
        "destCDP",
        ai.DEST_CDP,
        applies_to="queue",
    ),
    DestinationAttribute(
        "useDMQ",
        BOOL,
        "Dead messages (expired, removed by a limit, undeliverable) go to mq.sys.dmq.",
        "useDMQ",
        ai.DEST_USE_DMQ,
    ),
    DestinationAttribute(
        "maxNumSharedConsumers",
        INT,
        "Topic: most consumers sharing one shared subscription (-1: unlimited).",
        "maxNumSharedConsumers",
        ai.DEST_MAX_SHARED_CONSUMERS,
        applies_to="topic",
        minimum=1,
    ),
    DestinationAttribute(
        "sharedConsumerFlowLimit",
        INT,
        "Topic: messages sent ahead to each consumer of a shared subscription.",
        "sharedConsumerFlowLimit",
        ai.DEST_SHARE_FLOW_LIMIT,
        applies_to="topic",
    ),
    DestinationAttribute(
        "validateXMLSchemaEnabled",
        BOOL,
        "Validate XML text messages against a schema (recorded, not enforced here).",
        "validateXMLSchemaEnabled",
        ai.DEST_VALIDATE_XML_SCHEMA_ENABLED,
    ),
    DestinationAttribute(
        "XMLSchemaURIList",
        STRING,
        "Space-separated schema URIs for validateXMLSchemaEnabled.",
        "XMLSchemaUriList",
        ai.DEST_XML_SCHEMA_URI_LIST,
    ),
    DestinationAttribute(
        "reloadXMLSchemaOnFailure",
        BOOL,
        "Reload the schema when validation fails.",
        "reloadXMLSchemaOnFailure",
        ai.DEST_RELOAD_XML_SCHEMA_ON_FAILURE,
    ),
    DestinationAttribute(
        "maxDeliveryCount",
        INT,
        "This broker's own: deliveries before a message goes to the DMQ as undeliverable "
        "(-1: unlimited).",
        None,
        0,
        minimum=1,
    ),
)

BY_NAME: dict[str, DestinationAttribute] = {a.name: a for a in DESTINATION_ATTRIBUTES}

# Request properties (ours) carrying the attributes DestinationInfo has no field for.
EXTRA_PROPERTIES: dict[str, str] = {"maxDeliveryCount": JMQ_MAX_DELIVERY_COUNT}


def parse_bool(value: object, name: str = "value") -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"{name}: {value!r} is not true or false")


def convert(name: str, value: object) -> object:
    """The Python value of attribute ``name`` (int, bool, str); ValueError if unusable."""
    attr = BY_NAME.get(name)
    if attr is None:
        raise ValueError(
            f"unknown destination attribute {name!r} (known: {', '.join(sorted(BY_NAME))})"
        )
    if attr.type in (SIZE, INT):
        if attr.type == SIZE:
            number = props.parse_size(value, name)
        else:
            number = props.parse_count(value, name)
            if number > props.INT32_MAX:
                raise ValueError(f"{name}: {number} is too large")
        if number == 0 and attr.zero_unlimited:
            return props.UNLIMITED
        if 0 <= number < attr.minimum:
            raise ValueError(
                f"{name} can not be set to {number} (at least {attr.minimum}, or -1 for no limit)"
            )
        return number
    if attr.type == BOOL:
        return parse_bool(value, name)
    if attr.type == CHOICE:
        text = str(value).strip().upper()
        if text not in attr.choices:
            raise ValueError(f"{name}: {value!r} is not one of {', '.join(attr.choices)}")
        return text
    return "" if value is None else str(value)


def convert_each(
    attrs: dict[str, object], is_topic: bool | None = None
) -> tuple[dict[str, object], dict[str, str]]:
    """The attributes that convert, and why each other one is refused (by name), so a
    form can say every problem at once.  With ``is_topic`` given, attributes of the other
    kind of destination are refused."""
    out: dict[str, object] = {}
    errors: dict[str, str] = {}
    for name, value in attrs.items():
        try:
            out[name] = convert(name, value)
        except ValueError as exc:
            errors[name] = str(exc)
            continue
        attr = BY_NAME[name]
        if is_topic is not None and not attr.applies(is_topic):
            errors[name] = f"{name} applies to {attr.applies_to}s only"
            del out[name]
    return out, errors


def convert_all(attrs: dict[str, object], is_topic: bool | None = None) -> dict[str, object]:
    """Convert every attribute; one ValueError naming all the bad ones."""
    out, errors = convert_each(attrs, is_topic)
    if errors:
        raise ValueError("; ".join(errors.values()))
    return out


def valid_destination_name(name: str) -> bool:
    """The administrator's rule (:func:`broker.protocol.destname.valid_admin_name`)."""
    return valid_admin_name(name)


def destination_name_problem(name: str) -> str | None:
    """Why the broker would refuse to create a destination of this name (None: it would
    not), as its admin service says it (:func:`broker.protocol.destname.admin_name_problem`),
    with the rule for a form or the REST API to show."""
    problem = admin_name_problem(name)
    if problem is not None and problem.startswith("[B4091]"):
        return f"{problem} ({ADMIN_NAME_RULE})"
    return problem


def destination_info_fields(attrs: dict[str, object]) -> tuple[dict[str, object], int, dict]:
    """(DestinationInfo field values, update mask, attributes without a field) for
    already converted ``attrs``."""
    fields: dict[str, object] = {}
    mask = 0
    extra: dict[str, object] = {}
    for name, value in attrs.items():
        attr = BY_NAME[name]
        if attr.field is None:
            extra[name] = value
            continue
        mask |= attr.mask
        if name == "limitBehavior":
            fields[attr.field] = int(LimitBehavior[str(value)])
        elif name == "isLocalOnly":
            fields[attr.field] = 0 if value else 1  # destScope: 0 local, 1 cluster
        elif name == "localDeliveryPreferred":
            fields[attr.field] = CDP_LOCAL_PREFERRED if value else CDP_DISTRIBUTED
        else:
            fields[attr.field] = value
    return fields, mask, extra


def attributes_from_info(info: dict[str, object]) -> dict[str, object]:
    """The attributes a received DestinationInfo sets (its update mask says which);
    ValueError when a value is out of range."""
    mask = as_int(info.get("updateMask") or 0)
    out: dict[str, object] = {}
    for attr in DESTINATION_ATTRIBUTES:
        if attr.field is None or not mask & attr.mask:
            continue
        value = info.get(attr.field)
        if attr.name == "limitBehavior":
            try:
                value = LimitBehavior(as_int(value)).name
            except (TypeError, ValueError):
                raise ValueError(f"limitBehavior: unknown value {value!r}") from None
        elif attr.name == "isLocalOnly":
            value = value == 0
        elif attr.name == "localDeliveryPreferred":
            value = value == CDP_LOCAL_PREFERRED
        out[attr.name] = convert(attr.name, value)
    return out


def attributes_of_info(
    info: dict[str, object], extra: dict[str, object] | None = None
) -> dict[str, object]:
    """Every attribute of a GET_DESTINATIONS DestinationInfo (whatever its update mask)
    that applies to its kind of destination, plus ``extra`` ones (maxDeliveryCount)."""
    is_topic = bool(as_int(info.get("type") or 0) & 2)
    every = 0
    for attr in DESTINATION_ATTRIBUTES:
        every |= attr.mask
    values = attributes_from_info({**info, "updateMask": every})
    out = {name: v for name, v in values.items() if BY_NAME[name].applies(is_topic)}
    for name, value in (extra or {}).items():
        out[name] = convert(name, value)
    return out


def destination_request(
    name: str, dest_type: int, attrs: dict[str, object]
) -> tuple[bytes, dict[str, object]]:
    """A CREATE/UPDATE_DESTINATION body (DestinationInfo with its update mask) and the
    request properties for attributes it has no field for."""
    if not name:
        raise ValueError("a destination name is needed")
    if not dest_type & (DEST_QUEUE | DEST_TOPIC):
        raise ValueError(f"dest_type {dest_type} is neither a queue (1) nor a topic (2)")
    values = convert_all(attrs, is_topic=bool(dest_type & DEST_TOPIC))
    fields, mask, extra = destination_info_fields(values)
    info = ai.destination_info(
        updateMask=ai.DEST_NAME | ai.DEST_TYPE | mask, name=name, type=int(dest_type), **fields
    )
    props: dict[str, object] = {}
    for attr, value in extra.items():
        props[EXTRA_PROPERTIES[attr]] = JInt(int(value))
    return ai.encode_admin_object(info), props


def describe() -> list[dict[str, object]]:
    """The table as plain data (forms, the REST API)."""
    return [
        {
            "name": a.name,
            "type": a.type,
            "doc": a.doc,
            "applies_to": a.applies_to or "both",
            **({"choices": list(a.choices)} if a.choices else {}),
        }
        for a in DESTINATION_ATTRIBUTES
    ]


__all__ = [
    "BY_NAME",
    "DESTINATION_ATTRIBUTES",
    "DestinationAttribute",
    "EXTRA_PROPERTIES",
    "LIMIT_BEHAVIORS",
    "attributes_from_info",
    "attributes_of_info",
    "convert",
    "convert_all",
    "convert_each",
    "describe",
    "destination_info_fields",
    "destination_request",
    "destination_name_problem",
    "parse_bool",
    "valid_destination_name",
]
