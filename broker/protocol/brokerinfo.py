"""The BROKER_INFO body of a cluster link: OpenMQ's Java-serialised ``BrokerInfo``.

A broker's BROKER_INFO link packet, and the payload of its G_BROKER_INFO_REPLY, is one
``com.sun.messaging.jmq.jmsserver.multibroker.BrokerInfo`` written by
``ObjectOutputStream``: its ``brokerAddr`` a ``fullyconnected.BrokerAddressImpl`` (whose
superclass ``core.BrokerAddress`` holds a ``core.BrokerMQAddress``, an ``io.MQAddress``),
session ids as ``util.UID``, the cluster protocol version as an ``Integer``.

:meth:`BrokerInfo.encode` writes the bytes the stock OpenMQ 6.9 broker writes for the same
values (tests/vectors_cluster holds captured ones); :meth:`BrokerInfo.decode` reads any
such stream and raises only :class:`~broker.protocol.errors.ProtocolError`.  Decoding goes
through the generic reader of :mod:`.javaser`, which builds dicts, never objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import ProtocolError
from .javaser import JavaClass, JavaObject, ObjectStreamWriter, decode_object
from .jtypes import JInt

_STRING = "Ljava/lang/String;"
_PKG = "com.sun.messaging.jmq"

UID = JavaClass(f"{_PKG}.util.UID", -583620884703541778, (("J", "id", None),))
MQ_ADDRESS = JavaClass(
    f"{_PKG}.io.MQAddress",
    -8430608988259524061,
    (
        ("Z", "isHTTP", None),
        ("Z", "isWebSocket", None),
        ("I", "port", None),
        ("L", "addr", _STRING),
        ("L", "addrHost", _STRING),
        ("L", "props", "Ljava/util/Properties;"),
        ("L", "schemeName", _STRING),
        ("L", "serviceName", _STRING),
    ),
)
BROKER_MQ_ADDRESS = JavaClass(
    f"{_PKG}.jmsserver.core.BrokerMQAddress", 9061061210446233838, (), MQ_ADDRESS
)
BROKER_ADDRESS = JavaClass(
    f"{_PKG}.jmsserver.core.BrokerAddress",
    -8900410708742494160,
    (("L", "address", "Lcom/sun/messaging/jmq/jmsserver/core/BrokerMQAddress;"),),
)
_UID_SIG = "Lcom/sun/messaging/jmq/util/UID;"
BROKER_ADDRESS_IMPL = JavaClass(
    f"{_PKG}.jmsserver.multibroker.fullyconnected.BrokerAddressImpl",
    2088198635383118304,
    (
        ("Z", "HAEnabled", None),
        ("I", "port", None),
        ("L", "brokerID", _STRING),
        ("L", "brokerSessionUID", _UID_SIG),
        ("L", "hostName", _STRING),
        ("L", "instName", _STRING),
        ("L", "storeSessionUID", _UID_SIG),
    ),
    BROKER_ADDRESS,
)
BROKER_INFO = JavaClass(
    f"{_PKG}.jmsserver.multibroker.BrokerInfo",
    6384851141864345643,
    (
        ("I", "heartbeatInterval", None),
        ("I", "heartbeatPort", None),
        ("J", "startTime", None),
        ("Z", "storeDirtyFlag", None),
        ("L", "brokerAddr", "Lcom/sun/messaging/jmq/jmsserver/core/BrokerAddress;"),
        ("L", "clusterProtocolVersion", "Ljava/lang/Integer;"),
        ("L", "description", _STRING),
        ("L", "heartbeatHostAddress", _STRING),
    ),
)


class BrokerInfoError(ProtocolError):
    """A BROKER_INFO body that is not a BrokerInfo this broker can use."""


@dataclass
class BrokerInfo:
    """What a broker says of itself on a new cluster link."""

    host: str
    instance: str
    port: int  # the port mapper's
    session_uid: int
    start_time: int  # ms
    cluster_version: int | None = 500
    ha: bool = False
    broker_id: str | None = None
    store_session: int | None = None
    description: str | None = None
    heartbeat_host: str | None = None
    heartbeat_port: int = -1
    heartbeat_interval: int = 0
    store_dirty: bool = False
    # MQAddress.props as the stock broker fills them.
    address_props: dict[str, str] = field(default_factory=lambda: {"isHostTrusted": "false"})

    def encode(self) -> bytes:
        def uid(value: int | None) -> JavaObject | None:
            return None if value is None else JavaObject(UID, {"id": value})

        mq = JavaObject(
            BROKER_MQ_ADDRESS,
            {
                "port": self.port,
                "addr": f"{self.host}:{self.port}",
                "addrHost": self.host,
                "props": self.address_props,
                "schemeName": "mq",
                "serviceName": "",
            },
        )
        addr = JavaObject(
            BROKER_ADDRESS_IMPL,
            {
                "address": mq,
                "HAEnabled": self.ha,
                "port": self.port,
                "brokerID": self.broker_id,
                "brokerSessionUID": uid(self.session_uid),
                "hostName": self.host,
                "instName": self.instance,
                "storeSessionUID": uid(self.store_session),
            },
        )
        info = JavaObject(
            BROKER_INFO,
            {
                "heartbeatInterval": self.heartbeat_interval,
                "heartbeatPort": self.heartbeat_port,
                "startTime": self.start_time,
                "storeDirtyFlag": self.store_dirty,
                "brokerAddr": addr,
                "clusterProtocolVersion": (
                    None if self.cluster_version is None else JInt(self.cluster_version)
                ),
                "description": self.description,
                "heartbeatHostAddress": self.heartbeat_host,
            },
        )
        writer = ObjectStreamWriter()
        writer.java_object(info)
        return bytes(writer.out)

    @classmethod
    def decode(cls, body: bytes) -> BrokerInfo:
        """Read a BrokerInfo stream; BrokerInfoError (or another ProtocolError) if it is
        not one."""
        obj = decode_object(body, generic=True)
        info = _expect(obj, BROKER_INFO.name, "BROKER_INFO body")
        addr = _expect(info.get("brokerAddr"), BROKER_ADDRESS_IMPL.name, "brokerAddr")
        mq = _expect(addr.get("address"), BROKER_MQ_ADDRESS.name, "brokerAddr.address")
        host, instance = addr.get("hostName"), addr.get("instName")
        if not isinstance(host, str) or not isinstance(instance, str):
            raise BrokerInfoError("BrokerInfo without a host name or instance name")
        version = info.get("clusterProtocolVersion")
        props = mq.get("props")
        return cls(
            host,
            instance,
            _int(addr.get("port"), "port"),
            _uid(addr.get("brokerSessionUID"), "brokerSessionUID") or 0,
            _int(info.get("startTime"), "startTime"),
            None if version is None else _int(version, "clusterProtocolVersion"),
            bool(addr.get("HAEnabled")),
            _str(addr.get("brokerID"), "brokerID"),
            _uid(addr.get("storeSessionUID"), "storeSessionUID"),
            _str(info.get("description"), "description"),
            _str(info.get("heartbeatHostAddress"), "heartbeatHostAddress"),
            _int(info.get("heartbeatPort"), "heartbeatPort"),
            _int(info.get("heartbeatInterval"), "heartbeatInterval"),
            bool(info.get("storeDirtyFlag")),
            {str(k): str(v) for k, v in props.items()} if isinstance(props, Mapping) else {},
        )


def _expect(value: object, class_name: str, what: str) -> dict:
    if not isinstance(value, dict) or value.get("__class__") != class_name:
        got = value.get("__class__") if isinstance(value, dict) else type(value).__name__
        raise BrokerInfoError(f"{what} is a {got}, not a {class_name}")
    return value


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BrokerInfoError(f"BrokerInfo {what} is not a number")
    return int(value)


def _str(value: object, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BrokerInfoError(f"BrokerInfo {what} is not a string")
    return value


def _uid(value: object, what: str) -> int | None:
    if value is None:
        return None
    return _int(_expect(value, UID.name, what).get("id"), what)


__all__ = ["BrokerInfo", "BrokerInfoError"]
