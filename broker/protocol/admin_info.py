"""The admin protocol's ``*Info`` objects, as OpenMQ 6.9 serialises them.

The protocol around them: docs/developers/protocol.md, "The admin protocol".

Each shape lists the class's non-transient fields in declaration order with their Java
types; :class:`~broker.protocol.javaser.JavaClass` derives the stream order.  The bytes
were checked against JDK 17 writing same-shaped classes (tests/test_admin_protocol.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from broker.protocol.javaser import (
    BYTE_ARRAY,
    JavaClass,
    JavaObject,
    ObjectStreamWriter,
    encode_vector,
)

PACKAGE = "com.sun.messaging.jmq.util.admin."
STRING = "Ljava/lang/String;"
HASHTABLE = "Ljava/util/Hashtable;"

ADMIN_INFO = JavaClass(PACKAGE + "AdminInfo", 6731577042303829252, (("I", "updateMask", None),))

DESTINATION_INFO = JavaClass(
    PACKAGE + "DestinationInfo",
    7043096792121903858,
    (
        ("I", "nMessages", None),
        ("J", "nMessageBytes", None),
        ("I", "nConsumers", None),
        ("I", "nProducers", None),
        ("I", "naConsumers", None),
        ("I", "nfConsumers", None),
        ("Z", "autocreated", None),
        ("I", "destState", None),
        ("L", "name", STRING),
        ("I", "type", None),
        ("I", "fulltype", None),
        ("I", "maxMessages", None),
        ("J", "maxMessageBytes", None),
        ("J", "maxMessageSize", None),
        ("I", "destScope", None),
        ("I", "destLimitBehavior", None),
        ("I", "maxPrefetch", None),
        ("I", "destCDP", None),
        ("I", "maxActiveConsumers", None),
        ("I", "maxFailoverConsumers", None),
        ("I", "maxProducers", None),
        ("I", "maxNumSharedConsumers", None),
        ("I", "sharedConsumerFlowLimit", None),
        ("Z", "useDMQ", None),
        ("I", "nUnackMessages", None),
        ("I", "nInDelayMessages", None),
        ("J", "nInDelayMessageBytes", None),
        ("I", "nTxnMessages", None),
        ("J", "nTxnMessageBytes", None),
        ("L", "consumerWildcards", HASHTABLE),
        ("L", "producerWildcards", HASHTABLE),
        ("Z", "validateXMLSchemaEnabled", None),
        ("L", "XMLSchemaUriList", STRING),
        ("Z", "reloadXMLSchemaOnFailure", None),
        ("I", "nRemoteMessages", None),
        ("J", "nRemoteMessageBytes", None),
    ),
    ADMIN_INFO,
)

SERVICE_INFO = JavaClass(
    PACKAGE + "ServiceInfo",
    -8845478839645199012,
    (
        ("L", "name", STRING),
        ("L", "protocol", STRING),
        ("I", "type", None),
        ("I", "state", None),
        ("I", "nConnections", None),
        ("I", "currentThreads", None),
        ("Z", "dynamicPort", None),
        ("L", "metrics", "Lcom/sun/messaging/jmq/util/MetricCounters;"),
        ("I", "port", None),
        ("I", "minThreads", None),
        ("I", "maxThreads", None),
    ),
    ADMIN_INFO,
)


def destination_info(**values: object) -> JavaObject:
    return JavaObject(DESTINATION_INFO, values)


def service_info(**values: object) -> JavaObject:
    return JavaObject(SERVICE_INFO, values)


def encode_infos(items: list[JavaObject]) -> bytes:
    """A ``java.util.Vector`` of ``*Info`` objects (a GET_* reply body)."""
    return encode_vector(items)


# --------------------------------------------------------------------------------------
# Update masks (AdminInfo.updateMask): which fields a CREATE/UPDATE request sets
# --------------------------------------------------------------------------------------

# DestinationInfo
DEST_NAME = 0x1
DEST_TYPE = 0x2
DEST_MAX_MESSAGES = 0x4
DEST_MAX_MESSAGE_BYTES = 0x8
DEST_MAX_MESSAGE_SIZE = 0x10
DEST_SCOPE = 0x20
DEST_LIMIT = 0x40
DEST_PREFETCH = 0x80
DEST_CDP = 0x100
DEST_MAX_ACTIVE_CONSUMERS = 0x200
DEST_MAX_FAILOVER_CONSUMERS = 0x400
DEST_MAX_PRODUCERS = 0x800
DEST_MAX_SHARED_CONSUMERS = 0x1000
DEST_SHARE_FLOW_LIMIT = 0x2000
DEST_USE_DMQ = 0x4000
DEST_VALIDATE_XML_SCHEMA_ENABLED = 0x8000
DEST_XML_SCHEMA_URI_LIST = 0x10000
DEST_RELOAD_XML_SCHEMA_ON_FAILURE = 0x20000

# ServiceInfo
SERVICE_PORT = 0x1
SERVICE_MIN_THREADS = 0x2
SERVICE_MAX_THREADS = 0x4


# --------------------------------------------------------------------------------------
# GET_DURABLES: DurableInfo with ConsumerInfo / ConnectionInfo inside
# --------------------------------------------------------------------------------------

CONNECTION_INFO = JavaClass(
    PACKAGE + "ConnectionInfo",
    # No serialVersionUID is declared: this is what the JVM computes for the class as
    # OpenMQ declares it (serialver on a same-shaped copy; see the admin tests).
    -6255154649160893876,
    (
        ("[", "id", BYTE_ARRAY),
        ("J", "uuid", None),
        ("I", "nconsumers", None),
        ("I", "nproducers", None),
        ("I", "remPort", None),
        ("[", "remoteIP", BYTE_ARRAY),
        ("L", "metrics", "Lcom/sun/messaging/jmq/util/MetricCounters;"),
        ("L", "user", STRING),
        ("L", "clientID", STRING),
        ("L", "userAgent", STRING),
        ("L", "service", STRING),
    ),
    ADMIN_INFO,
)
# OpenMQ 4.x declared the class "implements java.io.Serializable" as well, which changes
# the JVM's computed serialVersionUID (serialver on that declaration); a 4.x admin tool
# refuses the newer value, so it is sent this one.
CONNECTION_INFO_4 = replace(CONNECTION_INFO, suid=-5120820610052343118)

CONSUMER_INFO = JavaClass(
    PACKAGE + "ConsumerInfo",
    -3322006453099714245,
    (
        ("[", "id", BYTE_ARRAY),
        ("L", "uidString", STRING),
        ("L", "subuidString", STRING),
        ("L", "brokerAddressShortString", STRING),
        ("L", "destination", STRING),
        ("I", "type", None),
        ("L", "selector", STRING),
        ("L", "connection", "Lcom/sun/messaging/jmq/util/admin/ConnectionInfo;"),
    ),
    ADMIN_INFO,
)

DURABLE_INFO = JavaClass(
    PACKAGE + "DurableInfo",
    2435222814345146809,
    (
        ("L", "name", STRING),
        ("L", "clientID", STRING),
        ("I", "nMessages", None),
        ("Z", "isActive", None),
        ("Z", "isDurable", None),
        ("Z", "isShared", None),
        ("Z", "isJMSShared", None),
        ("I", "activeCount", None),
        ("L", "uidString", STRING),
        ("L", "activeConsumers", "Ljava/util/Map;"),
        ("L", "consumer", "Lcom/sun/messaging/jmq/util/admin/ConsumerInfo;"),
    ),
)


def connection_info(uuid: int, *, openmq4: bool = False) -> JavaObject:
    """A ConnectionInfo as GET_DURABLES fills it in: only the connection id; the String
    fields keep the class's shared ``""`` initialiser.  ``openmq4``: for an OpenMQ 4.x
    admin client (its class computes another serialVersionUID)."""
    empty = Shared("")
    return JavaObject(
        CONNECTION_INFO_4 if openmq4 else CONNECTION_INFO,
        {"uuid": uuid, "user": empty, "clientID": empty, "userAgent": empty, "service": empty},
    )


def consumer_info(**values: object) -> JavaObject:
    return JavaObject(CONSUMER_INFO, values)


def durable_info(**values: object) -> JavaObject:
    """A DurableInfo; ``activeConsumers`` is a mapping written as a ``LinkedHashMap``."""
    active = values.get("activeConsumers")
    if isinstance(active, Mapping) and not isinstance(active, LinkedHashMap):
        values["activeConsumers"] = LinkedHashMap(active)
    return JavaObject(DURABLE_INFO, values)


# --------------------------------------------------------------------------------------
# Maps inside admin replies
# --------------------------------------------------------------------------------------


class HashMap(dict):
    """Written as a ``java.util.HashMap`` (null values allowed)."""


class Hashtable(dict):
    """Written as a ``java.util.Hashtable`` (what a plain dict becomes, too)."""


class LinkedHashMap(dict):
    """Written as a ``java.util.LinkedHashMap`` (insertion order, null values allowed)."""


class Shared(str):
    """A String that is one object in the Java program: written once, then referred to
    (a field initialised from a literal, a map key that is also a field of its value)."""


class _AdminWriter(ObjectStreamWriter):
    """The javaser writer plus what admin replies hold beyond it: maps nested in maps,
    HashMap / LinkedHashMap values (nulls allowed) and :class:`Shared` strings."""

    def __init__(self) -> None:
        super().__init__()
        self._shared: dict[str, int] = {}
        self._depth = 0

    def string(self, text: str) -> None:
        if isinstance(text, Shared):
            handle = self._shared.get(str(text))
            if handle is not None:
                self._reference(handle)
                return
            self._shared[str(text)] = self._next_handle
        super().string(text)

    def value(self, value: object) -> None:
        if isinstance(value, Mapping):
            self.map(value, hashtable=not isinstance(value, HashMap | LinkedHashMap))
        else:
            super().value(value)

    def map(self, values: Mapping[str, object], hashtable: bool, linked: bool = False) -> None:
        super().map(
            values,
            hashtable and not isinstance(values, HashMap | LinkedHashMap),
            linked or isinstance(values, LinkedHashMap),
        )

    def _entries(self, values: Mapping[str, object], order: list[str]) -> None:
        # Keys of a reply's own rows are literals in the Java program (one object each);
        # keys of nested maps (message properties) are not.
        intern, self.intern_keys = self.intern_keys, self.intern_keys and self._depth == 0
        self._depth += 1
        try:
            for key in order:
                self.key(key)
                self.value(values[key])
        finally:
            self._depth -= 1
            self.intern_keys = intern


def encode_admin_vector(items: list[object]) -> bytes:
    """A ``java.util.Vector`` reply body whose elements may be ``*Info`` objects or maps
    (a plain dict is a Hashtable; :class:`HashMap` / :class:`LinkedHashMap` as named),
    maps nested in maps included."""
    writer = _AdminWriter()
    writer.intern_keys = True
    writer.vector(items)
    return bytes(writer.out)


def encode_admin_object(value: object) -> bytes:
    """One top-level object (a map as its marker class says; a plain dict a Hashtable)."""
    writer = _AdminWriter()
    writer.intern_keys = True
    writer.value(value)
    return bytes(writer.out)
