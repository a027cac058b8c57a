"""JMS messages: headers, typed properties and the six body types.

A received message keeps the :class:`~broker.protocol.packet.Packet` it arrived in and
decodes headers, properties and body only when they are first read, so a consumer
that only looks at the body pays for nothing else.  Property values carry their Java
type through :mod:`broker.protocol.jtypes` (``JInt``, ``JLong``, ``JShort``, ...); a
plain ``int`` is sent as Integer when it fits 32 bits (else Long), ``float`` as
Double, ``bool`` as Boolean and ``str`` as String.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from broker.protocol import javaser
from broker.protocol.jtypes import LONG_MAX, LONG_MIN, JByte, JChar, JFloat, JInt, JLong, JShort
from broker.protocol.packet import (
    VH_CORRELATIONID,
    VH_DELIVERY_COUNT,
    VH_DELIVERY_TIME,
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_REPLYTO,
    VH_REPLYTO_CLASS,
    VH_TYPE,
    Packet,
)
from broker.protocol.sysmsgid import SysMessageID
from broker.protocol.types import FLAG_P, FLAG_Q, FLAG_R, FLAG_Z, PacketType

from . import mqtypes
from .destination import Destination, destination_from_wire
from .errors import IllegalStateException, MessageFormatException

if TYPE_CHECKING:
    from .session import Session

_UNSET: Any = object()


class DeliveryMode:
    """JMSDeliveryMode values."""

    NON_PERSISTENT = 1
    PERSISTENT = 2


DEFAULT_PRIORITY = 4

_PROPERTY_TYPES = (bool, int, float, str)


def check_property(name: str, value: object) -> None:
    """Reject names and values a JMS property cannot have."""
    if not isinstance(name, str) or not name:
        raise MessageFormatException(f"property name must be a non-empty string: {name!r}")
    if value is None or not isinstance(value, _PROPERTY_TYPES) or isinstance(value, JChar):
        raise MessageFormatException(
            f"property {name}: {type(value).__name__} is not a JMS property type"
        )
    if type(value) is int and not LONG_MIN <= value <= LONG_MAX:
        raise MessageFormatException(f"property {name}: {value} does not fit a Java long")


class Message:
    """A message with headers and properties but no body (Java ``Message``)."""

    PACKET_TYPE: ClassVar[int] = PacketType.MESSAGE

    __slots__ = (
        "_pkt",
        "_props",
        "_session",
        "_consumer_id",
        "_hdr_loaded",
        "_correlation_id",
        "_reply_to",
        "_jms_type",
        "_destination",
        "_delivery_time",
        "_timestamp",
        "_expiration",
        "_priority",
        "_persistent",
        "_sysid",
    )

    def __init__(
        self,
        *,
        properties: Mapping[str, object] | None = None,
        correlation_id: str | None = None,
        reply_to: Destination | None = None,
        jms_type: str | None = None,
    ) -> None:
        self._pkt: Packet | None = None
        self._props: dict[str, object] | None = None
        if properties:
            for k, v in properties.items():
                check_property(k, v)
            self._props = dict(properties)
        self._session: Session | None = None
        self._consumer_id = 0
        self._hdr_loaded = True
        self._correlation_id = correlation_id
        self._reply_to = reply_to
        self._jms_type = jms_type
        self._destination: Destination | None = None
        self._delivery_time = 0
        self._timestamp = 0
        self._expiration = 0
        self._priority = DEFAULT_PRIORITY
        self._persistent = True
        self._sysid: SysMessageID | None = None

    # -- construction from the wire --------------------------------------------

    @staticmethod
    def _received(pkt: Packet, session: Session | None, consumer_id: int) -> Message:
        """Wrap a delivered packet without decoding anything beyond the fixed header."""
        cls = _BY_TYPE.get(pkt.type, Message)
        m = cls.__new__(cls)
        m._pkt = pkt
        m._props = None
        m._session = session
        m._consumer_id = consumer_id
        m._hdr_loaded = False
        m._sysid = None
        m._init_body()
        return m

    def _init_body(self) -> None:
        pass

    def _load_header(self) -> None:
        pkt = self._pkt
        assert pkt is not None
        f = pkt.fields
        self._correlation_id = f.get(VH_CORRELATIONID)  # type: ignore[assignment]
        rt = f.get(VH_REPLYTO)
        self._reply_to = (
            destination_from_wire(rt, f.get(VH_REPLYTO_CLASS), True)  # type: ignore[arg-type]
            if rt is not None
            else None
        )
        self._jms_type = f.get(VH_TYPE)  # type: ignore[assignment]
        dn = f.get(VH_DESTINATION)
        self._destination = (
            destination_from_wire(dn, f.get(VH_DESTINATION_CLASS), bool(pkt.flags & FLAG_Q))  # type: ignore[arg-type]
            if dn is not None
            else None
        )
        self._delivery_time = f.get(VH_DELIVERY_TIME, 0)  # type: ignore[assignment]
        self._hdr_loaded = True

    def _materialize(self) -> None:
        """Turn a received message into a free-standing one (before editing or resending)."""
        pkt = self._pkt
        if pkt is None:
            return
        if not self._hdr_loaded:
            self._load_header()
        props = self.properties
        props.pop("JMSXDeliveryCount", None)
        self._timestamp = pkt.timestamp
        self._expiration = pkt.expiration
        self._priority = pkt.priority
        self._persistent = bool(pkt.flags & FLAG_P)
        self._sysid = SysMessageID(pkt.timestamp, pkt.ip, pkt.port, pkt.sequence)
        self._load_body()
        self._pkt = None

    def _load_body(self) -> None:
        pass

    def _raw_body(self) -> bytes:
        """The received body, inflated if the sender compressed it."""
        pkt = self._pkt
        if pkt is None:
            return b""
        body = pkt.body
        if pkt.flags & FLAG_Z and body:
            body = zlib.decompress(body)
        return body

    def _encode_body(self) -> bytes:
        """The body bytes to send."""
        return b""

    # -- properties --------------------------------------------------------------

    @property
    def properties(self) -> dict[str, object]:
        """The message properties (plus ``JMSXDeliveryCount`` on a received message)."""
        props = self._props
        if props is None:
            pkt = self._pkt
            props = dict(pkt.properties) if pkt is not None else {}
            if pkt is not None:
                props["JMSXDeliveryCount"] = JInt(self.delivery_count)
            self._props = props
        return props

    def get_property(self, name: str, default: object = None) -> object:
        """One property's value, or ``default``."""
        return self.properties.get(name, default)

    def set_property(self, name: str, value: object) -> None:
        """Set a property; the Python type picks the Java type (see module docs)."""
        check_property(name, value)
        self._materialize()
        self.properties[name] = value

    def clear_properties(self) -> None:
        self._materialize()
        self._props = None

    def set_boolean_property(self, name: str, value: bool) -> None:
        self.set_property(name, bool(value))

    def set_byte_property(self, name: str, value: int) -> None:
        self.set_property(name, JByte(value))

    def set_short_property(self, name: str, value: int) -> None:
        self.set_property(name, JShort(value))

    def set_int_property(self, name: str, value: int) -> None:
        self.set_property(name, JInt(value))

    def set_long_property(self, name: str, value: int) -> None:
        self.set_property(name, JLong(value))

    def set_float_property(self, name: str, value: float) -> None:
        self.set_property(name, JFloat(value))

    def set_double_property(self, name: str, value: float) -> None:
        self.set_property(name, float(value))

    def set_string_property(self, name: str, value: str) -> None:
        self.set_property(name, str(value))

    # -- JMS headers ------------------------------------------------------------

    @property
    def message_id(self) -> str | None:
        """JMSMessageID: ``"ID:"`` + the SysMessageID string (None before sending)."""
        pkt = self._pkt
        if pkt is not None:
            return "ID:" + str(SysMessageID(pkt.timestamp, pkt.ip, pkt.port, pkt.sequence))
        return None if self._sysid is None else "ID:" + str(self._sysid)

    @property
    def sys_message_id(self) -> SysMessageID | None:
        pkt = self._pkt
        if pkt is not None:
            return SysMessageID(pkt.timestamp, pkt.ip, pkt.port, pkt.sequence)
        return self._sysid

    @property
    def timestamp(self) -> int:
        """JMSTimestamp (ms since the epoch)."""
        pkt = self._pkt
        return pkt.timestamp if pkt is not None else self._timestamp

    @property
    def expiration(self) -> int:
        """JMSExpiration (absolute ms, 0 = never)."""
        pkt = self._pkt
        return pkt.expiration if pkt is not None else self._expiration

    @property
    def priority(self) -> int:
        """JMSPriority (0-9)."""
        pkt = self._pkt
        return pkt.priority if pkt is not None else self._priority

    @property
    def persistent(self) -> bool:
        pkt = self._pkt
        return bool(pkt.flags & FLAG_P) if pkt is not None else self._persistent

    @property
    def delivery_mode(self) -> int:
        """JMSDeliveryMode: :attr:`DeliveryMode.PERSISTENT` or ``NON_PERSISTENT``."""
        return DeliveryMode.PERSISTENT if self.persistent else DeliveryMode.NON_PERSISTENT

    @property
    def redelivered(self) -> bool:
        """JMSRedelivered (the R flag)."""
        pkt = self._pkt
        return bool(pkt.flags & FLAG_R) if pkt is not None else False

    @property
    def delivery_count(self) -> int:
        """JMSXDeliveryCount from the variable header (1 on a first delivery)."""
        pkt = self._pkt
        if pkt is None:
            return 0
        n = pkt.fields.get(VH_DELIVERY_COUNT)
        if n:
            return n  # type: ignore[return-value]
        return 2 if pkt.flags & FLAG_R else 1

    @property
    def destination(self) -> Destination | None:
        """JMSDestination."""
        if not self._hdr_loaded:
            self._load_header()
        return self._destination

    @property
    def delivery_time(self) -> int:
        """JMSDeliveryTime (absolute ms; 0 if not delayed)."""
        if not self._hdr_loaded:
            self._load_header()
        return self._delivery_time

    @property
    def correlation_id(self) -> str | None:
        """JMSCorrelationID."""
        if not self._hdr_loaded:
            self._load_header()
        return self._correlation_id

    @correlation_id.setter
    def correlation_id(self, value: str | None) -> None:
        self._materialize()
        self._correlation_id = value

    @property
    def reply_to(self) -> Destination | None:
        """JMSReplyTo."""
        if not self._hdr_loaded:
            self._load_header()
        return self._reply_to

    @reply_to.setter
    def reply_to(self, value: Destination | None) -> None:
        self._materialize()
        self._reply_to = value

    @property
    def jms_type(self) -> str | None:
        """JMSType."""
        if not self._hdr_loaded:
            self._load_header()
        return self._jms_type

    @jms_type.setter
    def jms_type(self, value: str | None) -> None:
        self._materialize()
        self._jms_type = value

    @property
    def body(self) -> Any:
        """The body as its natural Python value (JMS 2.0 ``getBody``): None for a plain Message."""
        return None

    # -- IBM MQ replies and reports (mqtypes.py) -------------------------------

    def make_reply(self, reply: Message | None = None) -> Message:
        """The reply to this request, with the type and correlation id its report
        options ask for (openmq_client/mqtypes.py)."""
        return mqtypes.make_reply(self, reply if reply is not None else TextMessage())

    def make_report(self, feedback: int = 275, report: Message | None = None) -> Message | None:
        """A PAN (275, the default) or NAN (276) report about this message, or None
        when it did not ask for one (openmq_client/mqtypes.py)."""
        return mqtypes.make_report(self, feedback, report if report is not None else Message())

    # -- acknowledgement -------------------------------------------------------

    def acknowledge(self) -> Any:
        """CLIENT_ACKNOWLEDGE: acknowledge every unacknowledged message of the session.

        A coroutine under the asyncio API; a blocking call under :mod:`openmq_client.sync`.
        In other acknowledge modes it does nothing (as in JMS).
        """
        sess = self._session
        if sess is None:
            raise IllegalStateException("only a received message can be acknowledged")
        return sess._connection._maybe_sync(sess._client_acknowledge())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} id={self.message_id} dest={self.destination!r}>"


class TextMessage(Message):
    """A message whose body is a string (UTF-8 on the wire)."""

    PACKET_TYPE = PacketType.TEXT_MESSAGE
    __slots__ = ("_text",)

    def __init__(self, text: str | None = None, **headers: Any) -> None:
        super().__init__(**headers)
        self._text = text

    def _init_body(self) -> None:
        self._text = _UNSET

    def _load_body(self) -> None:
        self.text  # noqa: B018 - decodes into _text

    @property
    def text(self) -> str | None:
        t = self._text
        if t is _UNSET:
            pkt = self._pkt
            # A Java TextMessage with null text has no body at all.
            t = self._raw_body().decode("utf-8") if pkt is not None and pkt.body_size else None
            self._text = t
        return t

    @text.setter
    def text(self, value: str | None) -> None:
        self._materialize()
        self._text = value

    @property
    def body(self) -> str | None:
        return self.text

    def _encode_body(self) -> bytes:
        t = self.text
        return b"" if t is None else t.encode("utf-8")


class BytesMessage(Message):
    """A message whose body is opaque bytes (Java ``DataOutput`` data, by convention)."""

    PACKET_TYPE = PacketType.BYTES_MESSAGE
    __slots__ = ("_data",)

    def __init__(self, data: bytes | bytearray | memoryview = b"", **headers: Any) -> None:
        super().__init__(**headers)
        self._data = bytes(data)

    def _init_body(self) -> None:
        self._data = _UNSET

    def _load_body(self) -> None:
        self.data  # noqa: B018

    @property
    def data(self) -> bytes:
        d = self._data
        if d is _UNSET:
            d = self._data = self._raw_body()
        return d

    @data.setter
    def data(self, value: bytes) -> None:
        self._materialize()
        self._data = bytes(value)

    @property
    def body(self) -> bytes:
        return self.data

    def _encode_body(self) -> bytes:
        return self.data


class MapMessage(Message):
    """A message whose body is a map of names to Java-typed values (a serialised HashMap)."""

    PACKET_TYPE = PacketType.MAP_MESSAGE
    __slots__ = ("_map",)

    def __init__(self, values: Mapping[str, object] | None = None, **headers: Any) -> None:
        super().__init__(**headers)
        self._map: dict[str, object] = dict(values or {})

    def _init_body(self) -> None:
        self._map = _UNSET

    def _load_body(self) -> None:
        self.map  # noqa: B018

    @property
    def map(self) -> dict[str, object]:
        m = self._map
        if m is _UNSET:
            raw = self._raw_body()
            try:
                m = javaser.decode_map_body(raw, nested=True) if raw else {}
            except javaser.JavaSerializationError as exc:
                raise MessageFormatException(f"undecodable MapMessage body: {exc}") from exc
            self._map = m
        return m

    @property
    def body(self) -> dict[str, object]:
        return self.map

    def get(self, name: str, default: object = None) -> object:
        return self.map.get(name, default)

    def set(self, name: str, value: object) -> None:
        self._materialize()
        self.map[name] = value

    def _encode_body(self) -> bytes:
        try:
            return javaser.encode_map_body(self.map)
        except (javaser.JavaSerializationError, TypeError, ValueError) as exc:
            raise MessageFormatException(f"cannot encode MapMessage: {exc}") from exc


class StreamMessage(Message):
    """A message whose body is a sequence of Java-typed values (one serialisation stream)."""

    PACKET_TYPE = PacketType.STREAM_MESSAGE
    __slots__ = ("_values",)

    def __init__(self, values: Iterable[object] | None = None, **headers: Any) -> None:
        super().__init__(**headers)
        self._values: list[object] = list(values or [])

    def _init_body(self) -> None:
        self._values = _UNSET

    def _load_body(self) -> None:
        self.values  # noqa: B018

    @property
    def values(self) -> list[object]:
        v = self._values
        if v is _UNSET:
            raw = self._raw_body()
            try:
                v = javaser.decode_stream_body(raw) if raw else []
            except javaser.JavaSerializationError as exc:
                raise MessageFormatException(f"undecodable StreamMessage body: {exc}") from exc
            self._values = v
        return v

    @property
    def body(self) -> list[object]:
        return self.values

    def write(self, value: object) -> None:
        self._materialize()
        self.values.append(value)

    def _encode_body(self) -> bytes:
        v = self.values
        if not v:
            # The Java client sends no body when nothing was written.
            return b""
        try:
            return javaser.encode_stream_body(v)
        except (javaser.JavaSerializationError, TypeError, ValueError) as exc:
            raise MessageFormatException(f"cannot encode StreamMessage: {exc}") from exc


class ObjectMessage(Message):
    """A message carrying one Java-serialised object, kept as opaque bytes."""

    PACKET_TYPE = PacketType.OBJECT_MESSAGE
    __slots__ = ("_data",)

    def __init__(self, data: bytes | None = None, **headers: Any) -> None:
        super().__init__(**headers)
        self._data = None if data is None else bytes(data)

    def _init_body(self) -> None:
        self._data = _UNSET

    def _load_body(self) -> None:
        self.data  # noqa: B018

    @property
    def data(self) -> bytes | None:
        """The serialised object bytes (``AC ED 00 05 ...``), or None for a null object."""
        d = self._data
        if d is _UNSET:
            pkt = self._pkt
            d = self._raw_body() if pkt is not None and pkt.body_size else None
            self._data = d
        return d

    @data.setter
    def data(self, value: bytes | None) -> None:
        self._materialize()
        self._data = None if value is None else bytes(value)

    @property
    def body(self) -> bytes | None:
        return self.data

    def get_object(self) -> object:
        """Decode the object if it is one of the whitelisted simple Java types."""
        d = self.data
        if d is None:
            return None
        try:
            return javaser.decode_object(d)
        except javaser.JavaSerializationError as exc:
            raise MessageFormatException(f"object is not a simple Java value: {exc}") from exc

    @classmethod
    def from_value(cls, value: object, **headers: Any) -> ObjectMessage:
        """An ObjectMessage holding a String, boxed primitive, byte[] or map."""
        return cls(javaser.encode_object(value), **headers)

    def _encode_body(self) -> bytes:
        return self.data or b""


_BY_TYPE: dict[int, type[Message]] = {
    PacketType.TEXT_MESSAGE: TextMessage,
    PacketType.BYTES_MESSAGE: BytesMessage,
    PacketType.MAP_MESSAGE: MapMessage,
    PacketType.STREAM_MESSAGE: StreamMessage,
    PacketType.OBJECT_MESSAGE: ObjectMessage,
    PacketType.MESSAGE: Message,
}


def message_from_packet(pkt: Packet) -> Message:
    """Wrap a captured or received JMS message packet (no session: cannot be acked)."""
    return Message._received(pkt, None, pkt.consumer_id)


__all__ = [
    "BytesMessage",
    "DeliveryMode",
    "MapMessage",
    "Message",
    "ObjectMessage",
    "StreamMessage",
    "TextMessage",
    "message_from_packet",
]
