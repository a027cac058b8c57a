"""The stock broker's MBeanInfo of each kind of MBean (type and subtype), for
getMBeanInfo, isInstanceOf, queryMBeans' class names and the writable attributes.

``jmx_stockinfo.json`` is what OpenMQ 6.9's broker answers to getMBeanInfo (read with the
JDK's client from every MBean of an idle broker with one destination, one connection
and a transacted session; every MBean of one type and subtype has the same info):
its class name and description, the attributes (name, Java type, description,
readable, writable, is-getter) in its order, the operations (name, return type,
description, impact, parameters) and the notifications (class, description, types).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from broker.engine.jmx_names import ObjectName
from broker.protocol import jmxser
from broker.protocol.javaser import JavaObject

_DATA = Path(__file__).with_name("jmx_stockinfo.json")

Attribute = tuple[str, str, str, bool, bool, bool]
Parameter = tuple[str, str, str]
Operation = tuple[str, str, str, int, list[Parameter]]
Notification = tuple[str, str, list[str]]


@dataclass(frozen=True)
class MBeanKind:
    """One kind of MBean (e.g. ``Destination/Config``) as the stock broker describes it."""

    key: str
    class_name: str
    description: str
    attributes: tuple[Attribute, ...]
    operations: tuple[Operation, ...]
    notifications: tuple[Notification, ...]

    def attribute(self, name: str) -> Attribute | None:
        for attr in self.attributes:
            if attr[0] == name:
                return attr
        return None

    def signatures(self, operation: str) -> list[tuple[str, ...]]:
        """The parameter types of each overload of ``operation``."""
        return [tuple(p[1] for p in op[4]) for op in self.operations if op[0] == operation]

    @property
    def notification_types(self) -> frozenset[str]:
        return frozenset(t for n in self.notifications for t in n[2])


@cache
def kinds() -> dict[str, MBeanKind]:
    raw = json.loads(_DATA.read_text(encoding="utf-8"))
    out = {}
    for key, v in raw.items():
        out[key] = MBeanKind(
            key,
            v["class"],
            v["description"],
            tuple(tuple(a) for a in v["attributes"]),
            tuple((o[0], o[1], o[2], o[3], [tuple(p) for p in o[4]]) for o in v["operations"]),
            tuple((n[0], n[1], list(n[2])) for n in v["notifications"]),
        )
    return out


def kind_key(name: ObjectName) -> str:
    keys = dict(name.keys)
    return f"{keys.get('type', '')}/{keys.get('subtype', '')}"


def kind_of(name: ObjectName) -> MBeanKind | None:
    """The kind of the MBean ``name`` (None: not one of OpenMQ's)."""
    return kinds().get(kind_key(name))


@cache
def info_object(key: str) -> JavaObject:
    """The serialisable MBeanInfo of kind ``key``."""
    k = kinds()[key]
    return jmxser.mbean_info(
        k.class_name, k.description, k.attributes, k.operations, k.notifications
    )


# What isInstanceOf answers true for besides the class itself: the interfaces every
# OpenMQ MBean implements (it extends NotificationBroadcasterSupport, implements
# DynamicMBean).
COMMON_TYPES = frozenset(
    {
        "java.lang.Object",
        "javax.management.DynamicMBean",
        "javax.management.NotificationBroadcaster",
        "javax.management.NotificationEmitter",
        "javax.management.NotificationBroadcasterSupport",
        "com.sun.messaging.jmq.jmsserver.management.mbeans.MQMBeanReadOnly",
    }
)
