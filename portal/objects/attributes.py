"""OpenMQ's administered object types, their attributes and defaults, and the JNDI
``javax.naming.Reference`` each one is stored as.

The attribute names, defaults and value kinds are those of OpenMQ's client
(``com.sun.messaging.ConnectionConfiguration`` with ``ConnectionFactory_defaults``, and
``DestinationConfiguration``).  The Reference is laid out as OpenMQ's
``ReferenceGenerator`` lays it out, so that OpenMQ's
``com.sun.messaging.naming.AdministeredObjectFactory`` rebuilds the object on a JNDI
lookup: class name the object's class, factory that class, address 0 ``version`` =
``3.0``, address 1 ``readOnly`` = ``true``/``false``, then one string address per
attribute (type = attribute name, content = its value, in any order: the factory sets
them by name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# The one rule for destination names (also the broker's and the portal forms').
from broker.protocol.destname import valid_admin_name as valid_destination_name

__all__ = [
    "AO_VERSION",
    "FACTORY",
    "TYPES",
    "AttrSpec",
    "ObjType",
    "InvalidAttribute",
    "defaults_for",
    "reference",
    "resolve_type",
    "validate_attributes",
    "valid_destination_name",
]

AO_VERSION = "3.0"
FACTORY = "com.sun.messaging.naming.AdministeredObjectFactory"


class InvalidAttribute(ValueError):
    """An unknown attribute or a value its attribute does not take."""


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: its name, OpenMQ default, kind of value and allowed values."""

    name: str
    default: str
    kind: str = "str"  # str, bool, int, long, list, addresslist, destname, boolopt
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    label: str = ""


def _cf(name: str, default: str, kind: str = "str", label: str = "", **kw) -> AttrSpec:
    return AttrSpec(name, default, kind, label=label, **kw)


# OpenMQ's ConnectionFactory_defaults.properties, in its order (also XAConnectionFactory).
CF_ATTRS: tuple[AttrSpec, ...] = (
    _cf("imqAddressList", "", "addresslist", "Message Server address list"),
    _cf("imqAddressListIterations", "1", "int", "Address list iterations", minimum=-1),
    _cf("imqReconnectEnabled", "false", "bool", "Enable auto-reconnect"),
    _cf("imqReconnectAttempts", "0", "int", "Reconnect attempts per address", minimum=-1),
    _cf("imqReconnectInterval", "3000", "long", "Reconnect interval (ms)", minimum=0),
    _cf(
        "imqAddressListBehavior",
        "PRIORITY",
        "list",
        "Address list behavior",
        choices=("PRIORITY", "RANDOM"),
    ),
    _cf("imqPingInterval", "30", "int", "Ping interval (s)"),
    _cf("imqPingAckTimeout", "0", "int", "Ping acknowledgement timeout (ms)", minimum=0),
    _cf("imqAbortOnPingAckTimeout", "false", "bool", "Abort on ping ack timeout"),
    _cf("imqConnectionType", "TCP", "list", "Connection type", choices=("TCP", "TLS", "HTTP")),
    _cf(
        "imqConnectionHandler",
        "com.sun.messaging.jmq.jmsclient.protocol.tcp.TCPStreamHandler",
        "str",
        "Connection handler class name",
    ),
    _cf("imqSocketConnectTimeout", "0", "int", "Socket connect timeout (ms)", minimum=0),
    _cf("imqPortMapperSoTimeout", "60000", "int", "Port mapper socket timeout (ms)", minimum=0),
    _cf("imqBrokerHostName", "localhost", "str", "Broker host name (pre-3.0)"),
    _cf("imqBrokerHostPort", "7676", "int", "Broker port (pre-3.0)", minimum=0, maximum=65535),
    _cf("imqBrokerServiceName", "", "str", "Broker service name (pre-3.0)"),
    _cf("imqBrokerServicePort", "0", "int", "Broker service port", minimum=0, maximum=65535),
    _cf(
        "imqSSLProviderClassname",
        "com.sun.net.ssl.internal.ssl.Provider",
        "str",
        "SSL provider class name",
    ),
    _cf("imqSSLIsHostTrusted", "false", "bool", "Trust any broker certificate"),
    _cf("imqConnectionURL", "http://localhost/imq/tunnel", "str", "HTTP tunnel URL"),
    _cf("imqAckTimeout", "0", "int", "Acknowledgement timeout (ms)", minimum=0),
    _cf(
        "imqAsyncSendCompletionWaitTimeout",
        "180000",
        "long",
        "Async send completion wait timeout (ms)",
        minimum=0,
    ),
    _cf("imqDefaultUsername", "guest", "str", "Default user name"),
    _cf("imqDefaultPassword", "guest", "str", "Default password"),
    _cf("imqDisableSetClientID", "false", "bool", "Disable setClientID"),
    _cf("imqConfiguredClientID", "", "str", "Client ID"),
    _cf("imqEnableSharedClientID", "false", "bool", "Enable shared client ID"),
    _cf("imqSetJMSXAppID", "false", "bool", "Set JMSXAppID"),
    _cf("imqSetJMSXUserID", "false", "bool", "Set JMSXUserID"),
    _cf("imqSetJMSXProducerTXID", "false", "bool", "Set JMSXProducerTXID"),
    _cf("imqSetJMSXConsumerTXID", "false", "bool", "Set JMSXConsumerTXID"),
    _cf("imqSetJMSXRcvTimestamp", "false", "bool", "Set JMSXRcvTimestamp"),
    _cf("imqAckOnProduce", "", "boolopt", "Acknowledge on produce"),
    _cf("imqAckOnAcknowledge", "", "boolopt", "Acknowledge on acknowledge"),
    _cf("imqConsumerFlowLimit", "1000", "int", "Consumer flow limit (messages)", minimum=0),
    _cf("imqConsumerFlowThreshold", "50", "int", "Consumer flow threshold (%)", minimum=0),
    _cf("imqConsumerFlowLimitPrefetch", "true", "bool", "Consumer flow limit prefetch"),
    _cf("imqConnectionFlowCount", "100", "int", "Connection flow count", minimum=0),
    _cf("imqConnectionFlowLimitEnabled", "false", "bool", "Connection flow limit enabled"),
    _cf("imqConnectionFlowLimit", "1000", "int", "Connection flow limit", minimum=0),
    _cf(
        "imqOnMessageExceptionRedeliveryAttempts",
        "1",
        "int",
        "onMessage exception redelivery attempts",
        minimum=0,
    ),
    _cf(
        "imqOnMessageExceptionRedeliveryIntervals",
        "500",
        "str",
        "onMessage exception redelivery intervals (ms)",
    ),
    _cf(
        "imqQueueBrowserRetrieveTimeout",
        "60000",
        "long",
        "Queue browser retrieve timeout (ms)",
        minimum=0,
    ),
    _cf(
        "imqQueueBrowserMaxMessagesPerRetrieve",
        "1000",
        "int",
        "Queue browser messages per retrieve",
        minimum=1,
    ),
    _cf("imqLoadMaxToServerSession", "true", "bool", "Load max to ServerSession"),
    _cf("imqOverrideJMSDeliveryMode", "false", "bool", "Override JMSDeliveryMode"),
    _cf(
        "imqJMSDeliveryMode",
        "PERSISTENT",
        "list",
        "JMSDeliveryMode",
        choices=("PERSISTENT", "NON_PERSISTENT"),
    ),
    _cf("imqOverrideJMSExpiration", "false", "bool", "Override JMSExpiration"),
    _cf("imqJMSExpiration", "0", "long", "JMSExpiration (ms)", minimum=0),
    _cf("imqOverrideJMSPriority", "false", "bool", "Override JMSPriority"),
    _cf("imqJMSPriority", "4", "int", "JMSPriority", minimum=0, maximum=9),
    _cf(
        "imqOverrideJMSHeadersToTemporaryDestinations",
        "false",
        "bool",
        "Override headers to temporary destinations",
    ),
)

# OpenMQ's DestinationConfiguration (IMQ_INITIAL_DESTINATION_*).
DEST_ATTRS: tuple[AttrSpec, ...] = (
    AttrSpec("imqDestinationName", "Untitled_Destination_Object", "destname", label="Name"),
    AttrSpec(
        "imqDestinationDescription",
        "A Description for the Destination Object",
        "str",
        label="Description",
    ),
)


@dataclass(frozen=True)
class ObjType:
    """An administered object type: imqobjmgr's -t code, the Java class a lookup
    builds, and its attributes."""

    code: str
    label: str
    class_name: str
    attrs: tuple[AttrSpec, ...]

    def spec(self, name: str) -> AttrSpec | None:
        return _SPECS[self.code].get(name)


TYPES: dict[str, ObjType] = {
    "q": ObjType("q", "Queue", "com.sun.messaging.Queue", DEST_ATTRS),
    "t": ObjType("t", "Topic", "com.sun.messaging.Topic", DEST_ATTRS),
    "cf": ObjType("cf", "ConnectionFactory", "com.sun.messaging.ConnectionFactory", CF_ATTRS),
    "xcf": ObjType("xcf", "XAConnectionFactory", "com.sun.messaging.XAConnectionFactory", CF_ATTRS),
}
_SPECS = {code: {a.name: a for a in t.attrs} for code, t in TYPES.items()}
_ALIASES = {
    "queue": "q",
    "topic": "t",
    "connectionfactory": "cf",
    "xaconnectionfactory": "xcf",
}
# OpenMQ's deprecated attribute names, accepted as their current ones.
DEPRECATED = {
    "imqReconnect": "imqReconnectEnabled",
    "imqReconnectRetries": "imqReconnectAttempts",
    "imqReconnectDelay": "imqReconnectInterval",
    "imqFlowControlCount": "imqConnectionFlowCount",
    "imqFlowControlIsLimited": "imqConnectionFlowLimitEnabled",
    "imqFlowControlLimit": "imqConnectionFlowLimit",
}
INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
MAX_VALUE_LENGTH = 4096


def resolve_type(value: str) -> ObjType:
    """imqobjmgr's -t code (``q``, ``t``, ``cf``, ``xcf``) or a type's name."""
    key = str(value or "").strip()
    code = _ALIASES.get(key.lower(), key.lower())
    if code not in TYPES:
        raise InvalidAttribute(
            f"unknown object type {value!r}: q (queue), t (topic), cf (ConnectionFactory) "
            "or xcf (XAConnectionFactory)"
        )
    return TYPES[code]


def defaults_for(obj_type: ObjType) -> dict[str, str]:
    return {a.name: a.default for a in obj_type.attrs}


def _check_int(spec: AttrSpec, value: str, bounds: tuple[int, int]) -> str:
    try:
        number = int(value.strip())
    except ValueError:
        raise InvalidAttribute(f"{spec.name} takes a whole number, not {value!r}") from None
    low = bounds[0] if spec.minimum is None else spec.minimum
    high = bounds[1] if spec.maximum is None else spec.maximum
    if not low <= number <= high:
        raise InvalidAttribute(f"{spec.name} must be between {low} and {high}, not {number}")
    return str(number)


def check_value(spec: AttrSpec, value: object) -> str:
    """``value`` as the string OpenMQ stores, or :class:`InvalidAttribute`."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, int):
        value = str(value)
    if not isinstance(value, str):
        raise InvalidAttribute(f"{spec.name} takes a string value")
    if len(value) > MAX_VALUE_LENGTH or any(c in value for c in "\x00\r\n"):
        raise InvalidAttribute(
            f"{spec.name}: at most {MAX_VALUE_LENGTH} characters, no line breaks or NUL"
        )
    kind = spec.kind
    if kind == "bool":
        if value.strip().lower() not in ("true", "false"):
            raise InvalidAttribute(f"{spec.name} takes true or false, not {value!r}")
        return value.strip().lower()
    if kind == "boolopt":
        if value.strip().lower() not in ("", "true", "false"):
            raise InvalidAttribute(f"{spec.name} takes true, false or nothing, not {value!r}")
        return value.strip().lower()
    if kind == "int":
        return _check_int(spec, value, INT_RANGE)
    if kind == "long":
        return _check_int(spec, value, LONG_RANGE)
    if kind == "list":
        if value not in spec.choices:
            raise InvalidAttribute(
                f"{spec.name} takes one of {', '.join(spec.choices)}, not {value!r}"
            )
        return value
    if kind == "destname":
        if not valid_destination_name(value):
            raise InvalidAttribute(
                f"invalid destination name {value!r}: it starts with a letter, '_' or '$' "
                "and holds only letters, digits, '_', '$' and '.'"
            )
        return value
    if kind == "addresslist":
        parts = [p.strip() for p in value.split(",")] if value.strip() else []
        for part in parts:
            if not part or any(c.isspace() for c in part):
                raise InvalidAttribute(
                    f"imqAddressList is a comma-separated list of addresses such as "
                    f"mq://host:7676/jms, not {value!r}"
                )
        return ",".join(parts)
    return value


def validate_attributes(obj_type: ObjType, attrs: Mapping[str, object]) -> dict[str, str]:
    """Checked attribute values (deprecated names mapped to the current ones); unknown
    names and bad values are refused, all of them in one message."""
    if not isinstance(attrs, Mapping):
        raise InvalidAttribute("attributes must be a mapping of name to value")
    clean: dict[str, str] = {}
    errors: list[str] = []
    for raw_name, value in attrs.items():
        name = DEPRECATED.get(str(raw_name), str(raw_name))
        spec = obj_type.spec(name)
        if spec is None:
            errors.append(
                f"{raw_name} is not an attribute of a {obj_type.label} object"
                + (" (see the list of its attributes)" if not name.startswith("imq") else "")
            )
            continue
        try:
            clean[name] = check_value(spec, value)
        except InvalidAttribute as exc:
            errors.append(str(exc))
    if errors:
        raise InvalidAttribute("; ".join(errors))
    return clean


def reference(
    obj_type: ObjType, attrs: Mapping[str, str], read_only: bool
) -> tuple[str, str, list[tuple[str, str]]]:
    """(class name, factory class name, [(address type, content), ...]) of the
    ``javax.naming.Reference`` OpenMQ stores for this object: every attribute, the
    defaults filled in."""
    values = {**defaults_for(obj_type), **attrs}
    addrs = [("version", AO_VERSION), ("readOnly", "true" if read_only else "false")]
    addrs += [(a.name, values[a.name]) for a in obj_type.attrs]
    return obj_type.class_name, FACTORY, addrs
