"""The MBeans served over JMX: OpenMQ's names (com.sun.messaging.jms.server) and
attributes, read from the running broker each time a client asks.

Only the Broker Config and Monitor MBeans exist so far (docs/reference/jmx.md); their
attribute names and Java types are the stock broker's (MBeanBrokerConfig /
MBeanBrokerMonitor, read from OpenMQ 6.9 with getMBeanInfo).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker import props
from broker.engine.jmx_names import ObjectName
from broker.protocol.jtypes import JInt
from broker.protocol.types import OPENMQ_VERSION

DOMAIN = "com.sun.messaging.jms.server"
# What javax.management's MBeanServer answers when created without a domain.
DEFAULT_DOMAIN = "DefaultDomain"

Getter = Callable[[Any], object]


@dataclass(frozen=True)
class MBean:
    """One MBean: its name and its attributes (name -> getter of the broker)."""

    name: ObjectName
    attributes: dict[str, Getter]


def _host(b: Any) -> str:
    return b.config.get(props.HOSTNAME) or socket.gethostname()


def _broker_id(b: Any) -> str | None:
    return b.config.get(props.BROKER_ID) or None


_COMMON: dict[str, Getter] = {
    "BrokerID": _broker_id,
    "Version": lambda b: OPENMQ_VERSION,
    "InstanceName": lambda b: b.config.instance,
    "Port": lambda b: JInt(b.portmapper_port),
    "Host": _host,
}


def broker_mbeans() -> list[MBean]:
    """The MBeans of one broker, in OpenMQ's names."""
    config = ObjectName.parse(f"{DOMAIN}:type=Broker,subtype=Config")
    monitor = ObjectName.parse(f"{DOMAIN}:type=Broker,subtype=Monitor")
    return [
        MBean(config, dict(_COMMON)),
        MBean(monitor, {**_COMMON, "Embedded": lambda b: False}),
    ]


class Registry:
    """The MBeans by canonical name, and the queries the RMI connection answers."""

    def __init__(self, mbeans: list[MBean]) -> None:
        self._by_name = {m.name.canonical: m for m in mbeans}

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: ObjectName) -> MBean | None:
        return None if name.is_pattern else self._by_name.get(name.canonical)

    def query(self, pattern: ObjectName | None) -> list[ObjectName]:
        names = [m.name for m in self._by_name.values()]
        if pattern is None:
            return names
        return [n for n in names if pattern.matches(n)]
