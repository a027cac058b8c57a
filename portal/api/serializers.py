"""Serializers of the REST API: what a request may carry (validated in full before any
action runs) and what each answer holds (the action's dict, as the OpenAPI schema says).

Output serializers render the plain dicts the actions return; the few rows whose shape
is the broker's (metrics, consumers, messages) declare the fields every row has and pass
the rest through.
"""

from __future__ import annotations

import base64
from datetime import date, datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from broker.admintools.actions.destinations import DEST_STATES, PAUSE_WHAT
from broker.loglevels import RECORD_LEVELS
from broker.models import LogRecord
from broker.props import parse_size
from broker.protocol import dest_attributes as attributes
from broker.protocol.types import BROKER_PREFIX, TEMP_PREFIX

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

DEST_TYPES = ("queue", "topic")
DEST_STATE_NAMES = tuple(DEST_STATES.values())
LOG_LEVELS = list(RECORD_LEVELS)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of a broker value (bytes as base64, times as ISO 8601)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items() if not str(k).startswith("__")}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return str(value)


# --------------------------------------------------------------------------------------
# Common
# --------------------------------------------------------------------------------------


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What went wrong, in one sentence.")
    errors = serializers.DictField(
        required=False, help_text="Per-field messages, for invalid input."
    )


class DoneSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What was done (as recorded in the log).")


class OpenRowSerializer(serializers.Serializer):
    """Declares the fields a broker row always has; every other field passes through."""

    def to_representation(self, instance):
        data = jsonable(dict(instance))
        data.update(super().to_representation(instance))
        return data


class FreeFormSerializer(serializers.Serializer):
    """A JSON object whose names are the broker's (metrics, properties)."""

    def to_representation(self, instance):
        return jsonable(dict(instance))


class MetricsSerializer(FreeFormSerializer):
    pass


# --------------------------------------------------------------------------------------
# Broker and services
# --------------------------------------------------------------------------------------


class ServiceSerializer(serializers.Serializer):
    name = serializers.CharField()
    protocol = serializers.CharField()
    type = serializers.ChoiceField(choices=["NORMAL", "ADMIN"])
    state = serializers.CharField(help_text="RUNNING, PAUSED, QUIESCED, STOPPED, ...")
    port = serializers.IntegerField()
    dynamic_port = serializers.BooleanField()
    connections = serializers.IntegerField()
    min_threads = serializers.IntegerField()
    max_threads = serializers.IntegerField(help_text="The service's connection limit.")


class ClusterBrokerSerializer(serializers.Serializer):
    """A broker of the conventional cluster the portal's broker belongs to."""

    address = serializers.CharField(help_text="host:port of the broker's port mapper.")
    instance = serializers.CharField(help_text="Its instance name (empty while unreachable).")
    state = serializers.CharField(help_text="OPERATING, or UNREACHABLE (no link to it now).")
    broker_id = serializers.CharField(allow_blank=True)
    is_self = serializers.BooleanField(help_text="The broker the portal is connected to.")


class ClusterReloadSerializer(serializers.Serializer):
    """What a cluster reload changed (imqcmd reload cls)."""

    added = serializers.ListField(
        child=serializers.CharField(), help_text="host:port of each broker now linked to."
    )
    removed = serializers.ListField(
        child=serializers.CharField(), help_text="host:port of each broker left."
    )


class BrokerSerializer(serializers.Serializer):
    instance = serializers.CharField()
    version = serializers.CharField(help_text="The OpenMQ release the broker reports.")
    product = serializers.CharField(
        allow_blank=True, help_text="The broker's own name and version."
    )
    host = serializers.CharField()
    port = serializers.IntegerField(help_text="The port mapper's port.")
    state = serializers.CharField()
    memory_state = serializers.CharField(allow_blank=True)
    store = serializers.CharField()
    services = ServiceSerializer(many=True)
    destinations = serializers.IntegerField(help_text="Destinations, temporary ones excluded.")
    messages = serializers.IntegerField()
    message_bytes = serializers.IntegerField()
    connections = serializers.IntegerField()
    properties = serializers.DictField(child=serializers.CharField(allow_blank=True))


class BrokerPropertiesSerializer(FreeFormSerializer):
    pass


class BrokerUpdateSerializer(serializers.Serializer):
    properties = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=4096),
        allow_empty=False,
        help_text='Broker properties to change at run time, e.g. {"imq.log.level": "INFO"}; '
        "the broker refuses those it cannot change while running.",
    )

    def validate_properties(self, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            clean = name.strip()
            if not clean or len(clean) > 255 or any(c in clean for c in "\r\n\x00=: "):
                raise serializers.ValidationError(f"invalid property name {name!r}")
            if any(c in value[name] for c in "\r\n\x00"):
                raise serializers.ValidationError(f"the value of {name} must be one line")
        return value


class ServiceUpdateSerializer(serializers.Serializer):
    port = serializers.IntegerField(
        required=False, min_value=0, max_value=65535, help_text="0: a dynamic port."
    )
    min_threads = serializers.IntegerField(required=False, min_value=0, max_value=INT32_MAX)
    max_threads = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=INT32_MAX,
        help_text="The connection limit of the service.",
    )

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError("give port, min_threads or max_threads")
        low, high = attrs.get("min_threads"), attrs.get("max_threads")
        if low is not None and high is not None and low > high:
            raise serializers.ValidationError("min_threads must not exceed max_threads")
        return attrs


# --------------------------------------------------------------------------------------
# Destinations
# --------------------------------------------------------------------------------------


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": -1, "maximum": INT64_MAX},
            {"type": "string", "pattern": r"^\s*[+-]?\d{1,10}[bkmBKM]?\s*$"},
        ]
    }
)
class SizeField(serializers.Field):
    """Bytes: a number or an OpenMQ size string (100b, 10k, 5m); -1 = unlimited."""

    def to_internal_value(self, data):
        try:
            return parse_size(data, self.field_name or "size")
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value):
        return value


def _attribute_field(attr: attributes.DestinationAttribute) -> serializers.Field:
    kw: dict[str, Any] = {"required": False, "help_text": attr.doc}
    if attr.applies_to:
        kw["help_text"] += f" ({attr.applies_to}s only)"
    if attr.type == attributes.BOOL:
        return serializers.BooleanField(**kw)
    if attr.type == attributes.CHOICE:
        return serializers.ChoiceField(choices=attr.choices, **kw)
    if attr.type == attributes.STRING:
        return serializers.CharField(allow_blank=True, max_length=4096, **kw)
    if attr.type == attributes.SIZE:
        return SizeField(**kw)
    return serializers.IntegerField(min_value=-1, max_value=INT32_MAX, **kw)


class DestinationAttributesSerializer(serializers.Serializer):
    """The attributes a destination can be created or updated with (imqcmd -o names),
    checked by the same table the action uses (broker/protocol/dest_attributes.py)."""

    def get_fields(self):
        return {a.name: _attribute_field(a) for a in attributes.DESTINATION_ATTRIBUTES}

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(attributes.BY_NAME))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["not a destination attribute"] for name in unknown}
                )
        return super().to_internal_value(data)

    def validate(self, attrs):
        try:
            return attributes.convert_all(dict(attrs))
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


def _check_kind(attrs: dict, kind: str) -> None:
    """Attributes of the other kind of destination are refused (e.g. a topic's
    maxNumActiveConsumers)."""
    try:
        attributes.convert_all(dict(attrs), is_topic=kind == "topic")
    except ValueError as exc:
        raise serializers.ValidationError({"attributes": [str(exc)]}) from None


class DestinationSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=DEST_TYPES)
    temporary = serializers.BooleanField()
    dmq = serializers.BooleanField(help_text="The dead message queue.")
    auto_created = serializers.BooleanField()
    state = serializers.ChoiceField(choices=DEST_STATE_NAMES)
    messages = serializers.IntegerField()
    bytes = serializers.IntegerField()
    unacked = serializers.IntegerField()
    in_delay = serializers.IntegerField()
    in_transaction = serializers.IntegerField()
    producers = serializers.IntegerField()
    consumers = serializers.IntegerField()
    active_consumers = serializers.IntegerField()
    backup_consumers = serializers.IntegerField()
    paged = serializers.IntegerField(
        required=False,
        help_text="Of its messages, how many wait with their bodies paged out of memory "
        "to disk (one destination's details only).",
    )
    paged_bytes = serializers.IntegerField(
        required=False, help_text="The bytes of those paged out (details only)."
    )
    attributes = serializers.DictField(help_text="Attributes by their imqcmd names.")

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["attributes"] = jsonable(instance.get("attributes") or {})
        return data


def _dest_name_field() -> serializers.CharField:
    return serializers.CharField(max_length=255, trim_whitespace=True)


class DestinationCreateSerializer(serializers.Serializer):
    name = _dest_name_field()
    type = serializers.ChoiceField(choices=DEST_TYPES)
    attributes = DestinationAttributesSerializer(required=False)

    def validate(self, data):
        _check_kind(data.get("attributes") or {}, data["type"])
        return data

    def validate_name(self, value: str) -> str:
        if value.startswith((TEMP_PREFIX, BROKER_PREFIX)):
            raise serializers.ValidationError("that name is reserved for the broker")
        # The broker's own rule for an administrator's destination (imqcmd create dst).
        problem = attributes.destination_name_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value


class DestinationUpdateSerializer(serializers.Serializer):
    attributes = DestinationAttributesSerializer()

    def validate_attributes(self, value):
        if not value:
            raise serializers.ValidationError("no attribute to change")
        return value


class PauseSerializer(serializers.Serializer):
    what = serializers.ChoiceField(
        choices=tuple(PAUSE_WHAT), default="all", help_text="What to pause."
    )


class ConsumerSerializer(serializers.Serializer):
    id = serializers.CharField()
    connection_id = serializers.CharField(allow_blank=True)
    client_id = serializers.CharField(allow_blank=True)
    user = serializers.CharField(allow_blank=True)
    host = serializers.CharField(allow_blank=True)
    service = serializers.CharField(allow_blank=True)
    ack_mode = serializers.CharField(allow_blank=True, help_text="e.g. AUTO_ACKNOWLEDGE")
    selector = serializers.CharField(allow_blank=True)
    durable = serializers.BooleanField()
    durable_name = serializers.CharField(allow_blank=True)
    durable_active = serializers.BooleanField()
    flow_paused = serializers.BooleanField()
    delivered = serializers.IntegerField(help_text="Messages delivered to it.")
    pending_acks = serializers.IntegerField(help_text="Delivered, not yet acknowledged.")
    last_ack = serializers.CharField(allow_blank=True, help_text="ISO 8601, empty if none.")
    destination = serializers.CharField(allow_blank=True)


class ProducerSerializer(serializers.Serializer):
    id = serializers.CharField()
    connection_id = serializers.CharField(allow_blank=True)
    session_id = serializers.CharField(allow_blank=True)
    user = serializers.CharField(allow_blank=True)
    host = serializers.CharField(allow_blank=True)
    service = serializers.CharField(allow_blank=True)
    flow_paused = serializers.BooleanField()
    destination = serializers.CharField(allow_blank=True)


class MessageSerializer(OpenRowSerializer):
    id = serializers.CharField(help_text="The JMSMessageID, ID:...")
    message_type = serializers.CharField(help_text="text, bytes, map, stream, object or message")
    priority = serializers.IntegerField()
    timestamp = serializers.IntegerField(help_text="JMSTimestamp, milliseconds since 1970.")
    expiration = serializers.IntegerField(help_text="JMSExpiration (0: never).")
    redelivered = serializers.BooleanField()
    properties = serializers.DictField(help_text="The message's properties.")
    body_size = serializers.IntegerField()
    preview = serializers.CharField(
        allow_blank=True,
        help_text="A bounded, safe preview: text as is, map and stream bodies decoded, "
        "bytes and objects as hex.",
    )
    mq_type = serializers.IntegerField(
        allow_null=True,
        help_text="IBM MQ's JMS_IBM_MsgType (1 request, 2 reply, 4 report, 8 datagram).",
    )
    mq_type_name = serializers.CharField(allow_blank=True, help_text="datagram, request, ...")
    report_options = serializers.CharField(
        allow_blank=True, help_text="The reports it asks for (JMS_IBM_Report_*), as text."
    )
    feedback = serializers.IntegerField(
        allow_null=True, help_text="A report's JMS_IBM_Feedback (MQFB_* or MQRC_* code)."
    )
    feedback_name = serializers.CharField(allow_blank=True)

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["properties"] = jsonable(instance.get("properties") or {})
        return data


class MessagePageSerializer(serializers.Serializer):
    start = serializers.IntegerField()
    limit = serializers.IntegerField()
    results = MessageSerializer(many=True)


class MessageQuerySerializer(serializers.Serializer):
    start = serializers.IntegerField(default=0, min_value=0, max_value=INT32_MAX)
    limit = serializers.IntegerField(default=50, min_value=1, max_value=1000)
    mq_type = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Only messages of this IBM MQ type: datagram, request, reply, report, or "
        "a JMS_IBM_MsgType number.",
    )


# --------------------------------------------------------------------------------------
# Connections, durables, transactions
# --------------------------------------------------------------------------------------


class ConnectionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    user = serializers.CharField(allow_blank=True)
    host = serializers.CharField(allow_blank=True)
    port = serializers.IntegerField()
    address = serializers.CharField(allow_blank=True)
    service = serializers.CharField(allow_blank=True)
    client_id = serializers.CharField(allow_blank=True)
    platform = serializers.CharField(allow_blank=True)
    sessions = serializers.IntegerField()
    producers = serializers.IntegerField()
    consumers = serializers.IntegerField()


class DurableSerializer(serializers.Serializer):
    name = serializers.CharField()
    client_id = serializers.CharField(allow_blank=True, help_text="Empty: no client ID.")
    topic = serializers.CharField(allow_blank=True)
    messages = serializers.IntegerField()
    active = serializers.BooleanField()
    durable = serializers.BooleanField()
    shared = serializers.BooleanField()
    active_consumers = serializers.IntegerField()
    selector = serializers.CharField(allow_blank=True)
    uid = serializers.CharField(allow_blank=True)


class TransactionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    xid = serializers.CharField(allow_blank=True)
    state = serializers.CharField(help_text="STARTED, PREPARED (in doubt), COMMITTED, ...")
    user = serializers.CharField(allow_blank=True)
    client_id = serializers.CharField(allow_blank=True)
    connection = serializers.CharField(allow_blank=True)
    connection_id = serializers.IntegerField()
    messages = serializers.IntegerField()
    acks = serializers.IntegerField()
    created = serializers.CharField(allow_blank=True, help_text="ISO 8601, empty if unknown.")


# --------------------------------------------------------------------------------------
# Users, groups, access rules, log records, tokens
# --------------------------------------------------------------------------------------


def _group_names_field(**kw) -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField(max_length=100), max_length=100, **kw)


class UserSerializer(serializers.Serializer):
    username = serializers.CharField()
    active = serializers.BooleanField()
    groups = serializers.ListField(child=serializers.CharField())
    is_admin = serializers.BooleanField(help_text="Member of group admin.")
    created = serializers.DateTimeField()
    updated = serializers.DateTimeField()


class UserCreateSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150, trim_whitespace=False)
    password = serializers.CharField(
        write_only=True, trim_whitespace=False, max_length=1024, style={"input_type": "password"}
    )
    groups = _group_names_field(default=["user"])
    active = serializers.BooleanField(default=True)


class UserUpdateSerializer(serializers.Serializer):
    password = serializers.CharField(
        write_only=True,
        required=False,
        trim_whitespace=False,
        max_length=1024,
        style={"input_type": "password"},
    )
    groups = _group_names_field(required=False, help_text="Replaces the user's groups.")
    active = serializers.BooleanField(required=False)


class GroupSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    members = serializers.IntegerField()
    builtin = serializers.BooleanField()


class GroupCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(allow_blank=True, default="", max_length=4096)


class GroupUpdateSerializer(serializers.Serializer):
    description = serializers.CharField(allow_blank=True, max_length=4096)


class RuleSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="e.g. queue.orders.consume.allow.group")
    value = serializers.CharField(allow_blank=True, help_text="Comma-separated names; * = all.")
    instance = serializers.CharField(allow_blank=True, help_text="Empty: every broker.")
    scope = serializers.CharField(allow_blank=True, help_text="connection, queue, topic or version")
    target = serializers.CharField(allow_blank=True)
    operation = serializers.CharField(allow_blank=True)
    verdict = serializers.CharField(allow_blank=True)
    principal = serializers.CharField(allow_blank=True)
    valid = serializers.BooleanField()
    updated = serializers.DateTimeField()


def _instance_field(**kw) -> serializers.CharField:
    return serializers.CharField(
        allow_blank=True,
        default="",
        max_length=255,
        help_text="The broker instance the rule is for; empty: every broker.",
        **kw,
    )


class RuleCreateSerializer(serializers.Serializer):
    key = serializers.CharField(max_length=400)
    value = serializers.CharField(allow_blank=True, max_length=65536)
    instance = _instance_field()


class RuleUpdateSerializer(serializers.Serializer):
    value = serializers.CharField(allow_blank=True, max_length=65536)


class InstanceQuerySerializer(serializers.Serializer):
    instance = _instance_field()


class AclFileSerializer(serializers.Serializer):
    instance = serializers.CharField(allow_blank=True)
    text = serializers.CharField(allow_blank=True, help_text="accesscontrol.properties text.")


class AclFileUpdateSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, max_length=200_000, trim_whitespace=False)
    replace = serializers.BooleanField(
        default=True, help_text="Drop the stored rules not in the text (merge when false)."
    )
    instance = _instance_field()


class AclFileResultSerializer(AclFileSerializer):
    rules = serializers.IntegerField(help_text="How many rules the text held.")


class LogRecordSerializer(serializers.ModelSerializer):
    instance = serializers.CharField(source="broker_instance")

    class Meta:
        model = LogRecord
        fields = ["id", "timestamp", "level", "logger", "message", "instance"]


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150, trim_whitespace=False)
    password = serializers.CharField(
        max_length=1024, trim_whitespace=False, style={"input_type": "password"}
    )


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text='Send as "Authorization: Token <token>".')
    username = serializers.CharField()
    administrator = serializers.BooleanField()


# --------------------------------------------------------------------------------------
# Query parameters of the broker lists (filtered and ordered in Python)
# --------------------------------------------------------------------------------------


def ordering_field(*names: str) -> serializers.ChoiceField:
    choices = [n for name in names for n in (name, f"-{name}")]
    return serializers.ChoiceField(
        choices=choices,
        required=False,
        help_text="Sort by this field (a leading - for descending).",
    )


def search_field(what: str) -> serializers.CharField:
    return serializers.CharField(
        required=False, max_length=255, help_text=f"Only rows whose {what} contains this text."
    )


class DestinationQuerySerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=DEST_TYPES, required=False)
    search = search_field("name")
    state = serializers.ChoiceField(
        choices=[v for k, v in DEST_STATES.items() if k >= 0], required=False
    )
    temporary = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="true: only temporary destinations; false: none of them.",
    )
    ordering = serializers.ChoiceField(
        choices=["name", "-messages"],
        default="name",
        help_text="name: queues then topics by name; -messages: the deepest first.",
    )


class ClusterBrokerQuerySerializer(serializers.Serializer):
    search = search_field("address or instance name")
    ordering = ordering_field("address", "instance", "state")


class ServiceQuerySerializer(serializers.Serializer):
    search = search_field("name")
    ordering = ordering_field("name", "port", "connections", "state")


class ConnectionQuerySerializer(serializers.Serializer):
    service = serializers.CharField(required=False, max_length=255)
    search = search_field("user, address or client ID")
    ordering = ordering_field(
        "id", "user", "service", "client_id", "sessions", "producers", "consumers"
    )


class DurableQuerySerializer(serializers.Serializer):
    topic = serializers.CharField(required=False, max_length=255)
    search = search_field("name or client ID")
    ordering = ordering_field("name", "client_id", "topic", "messages")


class TransactionQuerySerializer(serializers.Serializer):
    state = serializers.CharField(required=False, max_length=32, help_text="e.g. PREPARED")
    search = search_field("user, client ID or XID")
    ordering = ordering_field("id", "state", "user", "created", "messages")


class HABrokerSerializer(serializers.Serializer):
    """A member of an HA cluster as the shared store records it (ha_actions)."""

    broker_id = serializers.CharField()
    cluster_id = serializers.CharField()
    address = serializers.CharField()
    state = serializers.CharField(help_text="OPERATING, FAILOVER_COMPLETE, SHUTDOWN_COMPLETE...")
    running = serializers.BooleanField()
    heartbeat = serializers.DateTimeField(allow_null=True)
    heartbeat_age = serializers.FloatField(allow_null=True, help_text="Seconds since it beat.")
    interval = serializers.FloatField()
    epoch = serializers.IntegerField()
    pid = serializers.IntegerField(allow_null=True)
    taken_over_by = serializers.CharField(allow_blank=True)
    taken_over_at = serializers.DateTimeField(allow_null=True)
