"""JMX values for the RMI connector (:mod:`broker.engine.jmx`): the ObjectName an
argument names, the class an MBean reports, Java type checks for attribute values and
operation signatures, notification filters, an operation's result as the Java value the
client gets, and the notification a successful operation sends.  Pure functions."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from broker.engine import jmx_stockinfo as jmx_info
from broker.engine.jmx_names import ObjectName
from broker.protocol import jmxser
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt, JLong


def name_arg(value: object) -> ObjectName:
    text = jmxser.read_object_name(value)
    if text is None:
        raise ProtocolError("null ObjectName")
    return _parse(text)


# A monitoring agent names the same MBeans every poll (an ObjectName is immutable).
_parse = lru_cache(maxsize=4096)(ObjectName.parse)


def class_name(name: ObjectName) -> str:
    kind = jmx_info.kind_of(name)
    return kind.class_name if kind is not None else "javax.management.DynamicMBean"


_TYPE_CHECKS: dict[str, Callable[[object], bool]] = {
    "java.lang.String": lambda v: isinstance(v, str),
    "java.lang.Integer": lambda v: isinstance(v, int) and not isinstance(v, bool | JLong),
    "java.lang.Long": lambda v: isinstance(v, int) and not isinstance(v, bool | JInt),
    "java.lang.Boolean": lambda v: isinstance(v, bool),
    "javax.management.AttributeList": lambda v: isinstance(v, dict | list),
}


def is_java_type(value: object, java_type: str) -> bool:
    """Whether a decoded ``value`` is of ``java_type`` (null fits any)."""
    if value is None:
        return True
    check = _TYPE_CHECKS.get(java_type)
    return check(value) if check is not None else True


def java_types_have_list(types: tuple[str, ...]) -> bool:
    return "javax.management.AttributeList" in types


def filter_types(value: object) -> tuple[str, ...] | None:
    """The types a NotificationFilterSupport enables (None: no filter, every type)."""
    if value is None:
        return None
    if (
        isinstance(value, dict)
        and value.get("__class__") == "javax.management.NotificationFilterSupport"
    ):
        enabled = value.get("enabledTypes")
        if isinstance(enabled, list) and all(isinstance(t, str) for t in enabled):
            return tuple(str(t) for t in enabled)
    cls = value.get("__class__") if isinstance(value, dict) else type(value).__name__
    raise ProtocolError(f"notification filter {cls} is not supported")


def java_value(value: object) -> object:
    """An operation's Python result as the Java value the client gets."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "ObjectName[]":
        return jmxser.object_name_array(value[1])
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return jmxser.string_array(value)
    if isinstance(value, int) and not isinstance(value, bool | JInt | JLong):
        return JInt(value)
    return value
