"""The admin protocol's ``*Info`` objects (admin.md §4), as OpenMQ 6.9 serialises them.

Each shape lists the class's non-transient fields in declaration order with their Java
types; :class:`~broker.protocol.javaser.JavaClass` derives the stream order.  The bytes
were checked against JDK 17 writing same-shaped classes (tests/test_admin_protocol.py).
"""

from __future__ import annotations

from broker.protocol.javaser import JavaClass, JavaObject, encode_vector

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
