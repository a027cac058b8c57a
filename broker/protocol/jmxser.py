"""The Java objects JMX over RMI carries, as javaser values: ObjectName, Attribute,
AttributeList, a HashSet of names, the RMI stubs (RMIServerImpl_Stub in the service URL,
RMIConnectionImpl_Stub from newClient), DGC's Lease, MBeanInfo and its feature infos,
ObjectInstance, notifications and NotificationResult, and the exceptions a client sees.

serialVersionUIDs and field lists are the JDK 17 classes' (javap -constants -p).
Reading takes the generic dicts of ``ObjectStreamReader``; a value of an unexpected
shape raises ProtocolError.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from broker.protocol.errors import ProtocolError
from broker.protocol.javaser import (
    SC_SERIALIZABLE,
    SC_WRITE_METHOD,
    SELF,
    TC_ENDBLOCKDATA,
    JavaArray,
    JavaClass,
    JavaObject,
    JavaSerializationError,
    JBlock,
    ObjectStreamWriter,
    decode_object,
)
from broker.protocol.jrmp import ObjID
from broker.protocol.jtypes import JInt
from broker.protocol.properties import encode_java_utf

_WM = SC_SERIALIZABLE | SC_WRITE_METHOD
_INT = struct.Struct(">i")
OBJECT_NAME = "javax.management.ObjectName"

_OBJECT_NAME = JavaClass(OBJECT_NAME, 1081892073854801359, (), flags=_WM)
_ATTRIBUTE = JavaClass(
    "javax.management.Attribute",
    2484220110589082382,
    (("L", "name", "Ljava/lang/String;"), ("L", "value", "Ljava/lang/Object;")),
)
_ARRAY_LIST = JavaClass(
    "java.util.ArrayList", 8683452581122892189, (("I", "size", None),), flags=_WM
)
_ATTRIBUTE_LIST = JavaClass(
    "javax.management.AttributeList", -4077085769279709076, (), superclass=_ARRAY_LIST
)
_HASH_SET = JavaClass("java.util.HashSet", -5024744406713321676, (), flags=_WM)
_STRING_ARRAY = JavaClass("[Ljava.lang.String;", -5921575005990323385, ())
_COMPOSITE_ARRAY = JavaClass(
    "[Ljavax.management.openmbean.CompositeData;", -1529710412985667102, ()
)

_REMOTE_OBJECT = JavaClass("java.rmi.server.RemoteObject", -3215090123894869218, (), flags=_WM)
_REMOTE_STUB = JavaClass(
    "java.rmi.server.RemoteStub", -1585587260594494182, (), superclass=_REMOTE_OBJECT
)
_SERVER_STUB = JavaClass(
    "javax.management.remote.rmi.RMIServerImpl_Stub", 2, (), superclass=_REMOTE_STUB
)
_CONNECTION_STUB = JavaClass(
    "javax.management.remote.rmi.RMIConnectionImpl_Stub", 2, (), superclass=_REMOTE_STUB
)

_UID = JavaClass(
    "java.rmi.server.UID",
    1086053664494604050,
    (("S", "count", None), ("I", "unique", None), ("J", "time", None)),
)
_VMID = JavaClass(
    "java.rmi.dgc.VMID",
    -538642295484486218,
    (("[", "addr", "[B"), ("L", "uid", "Ljava/rmi/server/UID;")),
)
_LEASE = JavaClass(
    "java.rmi.dgc.Lease",
    -5713411624328831948,
    (("J", "value", None), ("L", "vmid", "Ljava/rmi/dgc/VMID;")),
)

_THROWABLE = JavaClass(
    "java.lang.Throwable",
    -3042686055658047285,
    (
        ("L", "cause", "Ljava/lang/Throwable;"),
        ("L", "detailMessage", "Ljava/lang/String;"),
        ("[", "stackTrace", "[Ljava/lang/StackTraceElement;"),
        ("L", "suppressedExceptions", "Ljava/util/List;"),
    ),
    flags=_WM,
)
_EXCEPTION = JavaClass("java.lang.Exception", -3387516993124229948, (), superclass=_THROWABLE)
_RUNTIME = JavaClass("java.lang.RuntimeException", -7034897190745766939, (), superclass=_EXCEPTION)
_SECURITY = JavaClass("java.lang.SecurityException", 6878364983674394167, (), superclass=_RUNTIME)
_ILLEGAL_ARGUMENT = JavaClass(
    "java.lang.IllegalArgumentException", -5365630128856068164, (), superclass=_RUNTIME
)
_JM = JavaClass("javax.management.JMException", 350520924977331825, (), superclass=_EXCEPTION)
_OPERATIONS = JavaClass(
    "javax.management.OperationsException", -4967597595580536216, (), superclass=_JM
)
_INSTANCE_NOT_FOUND = JavaClass(
    "javax.management.InstanceNotFoundException", -882579438394773049, (), superclass=_OPERATIONS
)
_ATTRIBUTE_NOT_FOUND = JavaClass(
    "javax.management.AttributeNotFoundException", 6511584241791106926, (), superclass=_OPERATIONS
)
_IO_EXCEPTION = JavaClass("java.io.IOException", 7818375828146090155, (), superclass=_EXCEPTION)
_NO_SUCH_OBJECT = JavaClass(
    "java.rmi.NoSuchObjectException",
    6619395951570472985,
    (),
    superclass=JavaClass(
        "java.rmi.RemoteException",
        -5148567311918794206,
        (("L", "detail", "Ljava/lang/Throwable;"),),
        superclass=_IO_EXCEPTION,
    ),
)
_UNMARSHAL = JavaClass(
    "java.rmi.UnmarshalException", 594380845140740218, (), superclass=_NO_SUCH_OBJECT.superclass
)

_JM_RUNTIME = JavaClass(
    "javax.management.JMRuntimeException", 6573344628407841861, (), superclass=_RUNTIME
)
_INVALID_VALUE = JavaClass(
    "javax.management.InvalidAttributeValueException",
    2164571879317142449,
    (),
    superclass=_OPERATIONS,
)
_LISTENER_NOT_FOUND = JavaClass(
    "javax.management.ListenerNotFoundException", -7242605822448519061, (), superclass=_OPERATIONS
)
_UNSUPPORTED = JavaClass(
    "java.lang.UnsupportedOperationException", -1242599979055084673, (), superclass=_RUNTIME
)
_MBEAN_EXCEPTION = JavaClass(
    "javax.management.MBeanException",
    4066342430588744142,
    (("L", "exception", "Ljava/lang/Exception;"),),
    superclass=_JM,
)
_REFLECTION = JavaClass(
    "javax.management.ReflectionException",
    9170809325636915553,
    (("L", "exception", "Ljava/lang/Exception;"),),
    superclass=_JM,
)
_RUNTIME_OPERATIONS = JavaClass(
    "javax.management.RuntimeOperationsException",
    -8408923047489133588,
    (("L", "runtimeException", "Ljava/lang/RuntimeException;"),),
    superclass=_JM_RUNTIME,
)
_REFLECTIVE = JavaClass(
    "java.lang.ReflectiveOperationException", 123456789, (), superclass=_EXCEPTION
)
_NO_SUCH_METHOD = JavaClass(
    "java.lang.NoSuchMethodException", 5034388446362600923, (), superclass=_REFLECTIVE
)
_INVOCATION_TARGET = JavaClass(
    "java.lang.reflect.InvocationTargetException",
    4085088731926701167,
    (("L", "target", "Ljava/lang/Throwable;"),),
    superclass=_REFLECTIVE,
)

_NOT_BOUND = JavaClass(
    "java.rmi.NotBoundException", -1857741824849069317, (), superclass=_EXCEPTION
)
_ACCESS = JavaClass(
    "java.rmi.AccessException", 6314925228044966088, (), superclass=_NO_SUCH_OBJECT.superclass
)

EXCEPTIONS = {
    "NotBoundException": _NOT_BOUND,
    "AccessException": _ACCESS,
    "SecurityException": _SECURITY,
    "IllegalArgumentException": _ILLEGAL_ARGUMENT,
    "InstanceNotFoundException": _INSTANCE_NOT_FOUND,
    "AttributeNotFoundException": _ATTRIBUTE_NOT_FOUND,
    "InvalidAttributeValueException": _INVALID_VALUE,
    "ListenerNotFoundException": _LISTENER_NOT_FOUND,
    "UnsupportedOperationException": _UNSUPPORTED,
    "NoSuchMethodException": _NO_SUCH_METHOD,
    "Exception": _EXCEPTION,
    "NoSuchObjectException": _NO_SUCH_OBJECT,
    "UnmarshalException": _UNMARSHAL,
}
# Exceptions that carry another (javax.management's wrappers: their getCause() is it).
WRAPPERS = {
    "MBeanException": (_MBEAN_EXCEPTION, "exception"),
    "ReflectionException": (_REFLECTION, "exception"),
    "RuntimeOperationsException": (_RUNTIME_OPERATIONS, "runtimeException"),
}


def object_name(name: str) -> JavaObject:
    """An ObjectName: its writeObject writes the name as one String."""
    return JavaObject(_OBJECT_NAME, {}, {OBJECT_NAME: (name,)})


def attribute(name: str, value: object) -> JavaObject:
    return JavaObject(_ATTRIBUTE, {"name": name, "value": value})


def attribute_list(items: list[JavaObject]) -> JavaObject:
    """An AttributeList (an ArrayList: size field, then capacity and the elements)."""
    return JavaObject(
        _ATTRIBUTE_LIST,
        {"size": len(items)},
        {_ARRAY_LIST.name: (JBlock(struct.pack(">i", len(items))), *items)},
    )


def write_attribute_list(
    w: ObjectStreamWriter,
    pairs: Sequence[tuple[str, object]],
    spans: list[tuple[int, int]] | None = None,
) -> None:
    """What ``w.value(attribute_list([attribute(n, v) for n, v in pairs]))`` writes,
    in one pass (getAttributes' answer, every poll of a monitoring agent); ``spans``
    gets where in ``w.out`` each value's bytes start and end."""
    n = _INT.pack(len(pairs))
    w.begin_object(_ATTRIBUTE_LIST)
    w.out += n  # ArrayList.size, then its writeObject: capacity, elements
    w.block(n)
    out = w.out
    for name, value in pairs:
        w.begin_object(_ATTRIBUTE)
        w.field(name, _STRING)
        start = len(out)
        w.field(value, "Ljava/lang/Object;")
        if spans is not None:
            spans.append((start, len(out)))
        w.end_object()
    w.out.append(TC_ENDBLOCKDATA)
    w.end_object()


def hash_set(items: list[object]) -> JavaObject:
    """A HashSet: capacity, load factor and size, then the elements."""
    capacity = 16
    while capacity * 0.75 < len(items):
        capacity *= 2
    head = struct.pack(">ifi", capacity, 0.75, len(items))
    return JavaObject(_HASH_SET, {}, {_HASH_SET.name: (JBlock(head), *items)})


_OPEN_TYPE = JavaClass(
    "javax.management.openmbean.OpenType",
    -9195195325186646468,
    (
        ("L", "className", "Ljava/lang/String;"),
        ("L", "description", "Ljava/lang/String;"),
        ("L", "typeName", "Ljava/lang/String;"),
    ),
)
_SIMPLE_TYPE = JavaClass(
    "javax.management.openmbean.SimpleType", 2215577471957694503, (), superclass=_OPEN_TYPE
)
_TREE_MAP = JavaClass(
    "java.util.TreeMap",
    919286545866124006,
    (("L", "comparator", "Ljava/util/Comparator;"),),
    flags=_WM,
)
_ARRAY_TYPE = JavaClass(
    "javax.management.openmbean.ArrayType",
    720504429830309770,
    (
        ("I", "dimension", None),
        ("L", "elementType", "Ljavax/management/openmbean/OpenType;"),
        ("Z", "primitiveArray", None),
    ),
    superclass=_OPEN_TYPE,
)
_COMPOSITE_TYPE = JavaClass(
    "javax.management.openmbean.CompositeType",
    -5366242454346948798,
    (
        ("L", "nameToDescription", "Ljava/util/TreeMap;"),
        ("L", "nameToType", "Ljava/util/TreeMap;"),
    ),
    superclass=_OPEN_TYPE,
)
_COMPOSITE_DATA = JavaClass(
    "javax.management.openmbean.CompositeDataSupport",
    8003518976613702244,
    (
        ("L", "compositeType", "Ljavax/management/openmbean/CompositeType;"),
        ("L", "contents", "Ljava/util/SortedMap;"),
    ),
)
COMPOSITE_DATA = "javax.management.openmbean.CompositeData"


def _tree_map(entries: dict[str, object]) -> JavaObject:
    """A TreeMap with natural ordering: its size, then the entries in key order."""
    items: list[object] = []
    for key in sorted(entries):
        items += [key, entries[key]]
    return JavaObject(
        _TREE_MAP,
        {"comparator": None},
        {_TREE_MAP.name: (JBlock(struct.pack(">i", len(entries))), *items)},
    )


def simple_type(java_class: str) -> JavaObject:
    """A javax.management.openmbean.SimpleType (SimpleType.STRING & co: all three names
    are the class name; Java's readResolve makes it the canonical instance)."""
    return JavaObject(
        _SIMPLE_TYPE,
        {"className": java_class, "description": java_class, "typeName": java_class},
    )


def string_array_type() -> JavaObject:
    """``new ArrayType(1, SimpleType.STRING)`` (a String[] item of a CompositeData)."""
    name = "[Ljava.lang.String;"
    return JavaObject(
        _ARRAY_TYPE,
        {
            "className": name,
            "description": "1-dimension array of java.lang.String",
            "typeName": name,
            "dimension": 1,
            "elementType": simple_type("java.lang.String"),
            "primitiveArray": False,
        },
    )


# One CompositeData item: name, description, open type (a SimpleType's class name or an
# open type object), value.
Item = tuple[str, str, "str | JavaObject", object]


def composite(type_name: str, description: str, items: Sequence[Item]) -> JavaObject:
    """A CompositeDataSupport of ``items``: (name, description, open type, value) each;
    the open type is a SimpleType's Java class name or an open type object
    (:func:`string_array_type`)."""
    ctype = JavaObject(
        _COMPOSITE_TYPE,
        {
            "className": COMPOSITE_DATA,
            "description": description,
            "typeName": type_name,
            "nameToDescription": _tree_map({n: d for n, d, _t, _v in items}),
            "nameToType": _tree_map(
                {n: t if isinstance(t, JavaObject) else simple_type(t) for n, _d, t, _v in items}
            ),
        },
    )
    return JavaObject(
        _COMPOSITE_DATA,
        {"compositeType": ctype, "contents": _tree_map({n: v for n, _d, _t, v in items})},
    )


def composite_array(items: list[JavaObject]) -> JavaArray:
    """A ``CompositeData[]`` (what getConsumerInfo & co return)."""
    return JavaArray(_COMPOSITE_ARRAY, items)


def string_array(items: Iterable[str]) -> JavaArray:
    return JavaArray(_STRING_ARRAY, list(items))


def exception(kind: str, message: str) -> JavaObject:
    """A Throwable of one of :data:`EXCEPTIONS` (no cause, no stack trace: Java reads a
    null stack trace as an empty one)."""
    values: dict[str, object] = {"cause": SELF, "detailMessage": message}
    return JavaObject(EXCEPTIONS[kind], values)


def invocation_target(message: str) -> JavaObject:
    """What OpenMQ's MBeans throw when the broker refuses an operation (reflection's
    InvocationTargetException), its target a java.lang.Exception with ``message``."""
    target = exception("Exception", message)
    return JavaObject(_INVOCATION_TARGET, {"cause": SELF, "detailMessage": None, "target": target})


def wrapped(kind: str, message: str, inner: JavaObject) -> JavaObject:
    """One of :data:`WRAPPERS` around ``inner`` (an :func:`exception`)."""
    cls, field_name = WRAPPERS[kind]
    return JavaObject(cls, {"cause": SELF, "detailMessage": message, field_name: inner})


_SSL_CLIENT_FACTORY = JavaClass("javax.rmi.ssl.SslRMIClientSocketFactory", -8310631444933958385, ())


def _ref(host: str, port: int, objid: ObjID, tls: bool) -> tuple[object, ...]:
    """RemoteObject.writeObject's data for a stub to host:port: a UnicastRef, or with
    ``tls`` a UnicastRef2 whose endpoint names an SslRMIClientSocketFactory (as
    javax.rmi.ssl's server socket factory exports it), so the client connects with TLS."""

    def utf(text: str) -> bytes:
        raw = encode_java_utf(text)
        return struct.pack(">H", len(raw)) + raw

    tail = JBlock(objid.pack() + b"\0")  # ObjID, then isResultStream false
    if not tls:
        return (JBlock(utf("UnicastRef") + utf(host) + struct.pack(">i", port) + tail.data),)
    head = JBlock(utf("UnicastRef2") + b"\x01" + utf(host) + struct.pack(">i", port))
    return (head, JavaObject(_SSL_CLIENT_FACTORY, {}), tail)


def connection_stub(host: str, port: int, objid: ObjID, tls: bool = False) -> JavaObject:
    """The RMIConnectionImpl_Stub that newClient returns (a reference to host:port)."""
    return JavaObject(_CONNECTION_STUB, {}, {_REMOTE_OBJECT.name: _ref(host, port, objid, tls)})


def server_stub_bytes(host: str, port: int, objid: ObjID, tls: bool = False) -> bytes:
    """The RMIServerImpl_Stub as the service URL's /stub/ path holds it: a plain
    ObjectOutputStream (no class annotations), base64 of which goes into the URL."""
    w = ObjectStreamWriter()
    w.value(JavaObject(_SERVER_STUB, {}, {_REMOTE_OBJECT.name: _ref(host, port, objid, tls)}))
    return bytes(w.out)


def server_stub(host: str, port: int, objid: ObjID, tls: bool = False) -> JavaObject:
    """The RMIServerImpl_Stub as an object (what the RMI registry's lookup returns)."""
    return JavaObject(_SERVER_STUB, {}, {_REMOTE_OBJECT.name: _ref(host, port, objid, tls)})


def lease(vmid: object, duration_ms: int) -> JavaObject:
    """DGC dirty's answer: the client's VMID (as it sent it) and the granted duration."""
    if not isinstance(vmid, dict) or vmid.get("__class__") != _VMID.name:
        raise ProtocolError("lease without a VMID")
    uid = vmid.get("uid")
    addr = vmid.get("addr")
    if not isinstance(uid, dict) or not isinstance(addr, bytes | list):
        raise ProtocolError("malformed VMID")
    try:
        uid_obj = JavaObject(
            _UID, {"count": uid["count"], "unique": uid["unique"], "time": uid["time"]}
        )
        raw = bytes(b & 0xFF for b in addr)
    except (KeyError, TypeError, ValueError):
        raise ProtocolError("malformed VMID") from None
    return JavaObject(
        _LEASE, {"value": duration_ms, "vmid": JavaObject(_VMID, {"addr": raw, "uid": uid_obj})}
    )


def read_object_name(value: object) -> str | None:
    """The name string of a decoded ObjectName (None for null)."""
    if value is None:
        return None
    if isinstance(value, dict) and value.get("__class__") == OBJECT_NAME:
        custom = value.get(f"__custom__{OBJECT_NAME}")
        if isinstance(custom, list) and len(custom) == 1 and isinstance(custom[0], str):
            return custom[0]
    raise ProtocolError("expected a javax.management.ObjectName")


def read_marshalled_null(value: object) -> bool:
    """Whether a decoded java.rmi.MarshalledObject holds null (queryNames' query)."""
    if isinstance(value, dict) and value.get("__class__") == "java.rmi.MarshalledObject":
        data = value.get("objBytes")
        return data is None or data == b"\xac\xed\x00\x05\x70"
    if value is None:
        return True
    raise ProtocolError("expected a java.rmi.MarshalledObject")


def read_strings(value: object) -> list[str]:
    """A decoded String[] (newClient's credentials, getAttributes' names)."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ProtocolError("expected a String[]")


# -- MBeanInfo -------------------------------------------------------------------------

_MI = "javax.management."
_STRING = "Ljava/lang/String;"
_OBJECT_ARRAY = JavaClass("[Ljava.lang.Object;", -8012369246846506644, ())
_FEATURE = JavaClass(
    _MI + "MBeanFeatureInfo",
    3952882688968447265,
    (("L", "name", _STRING), ("L", "description", _STRING)),
    flags=_WM,
)
_PARAMETER = JavaClass(
    _MI + "MBeanParameterInfo", 7432616882776782338, (("L", "type", _STRING),), superclass=_FEATURE
)
_PARAMETER_ARRAY = JavaClass("[Ljavax.management.MBeanParameterInfo;", -3645552615691850186, ())
_ATTRIBUTE_INFO = JavaClass(
    _MI + "MBeanAttributeInfo",
    8644704819898565848,
    (
        ("L", "attributeType", _STRING),
        ("Z", "isWrite", None),
        ("Z", "isRead", None),
        ("Z", "is", None),
    ),
    superclass=_FEATURE,
)
_ATTRIBUTE_INFO_ARRAY = JavaClass("[Ljavax.management.MBeanAttributeInfo;", 4321019968077824321, ())
_OPERATION_INFO = JavaClass(
    _MI + "MBeanOperationInfo",
    -6178860474881375330,
    (
        ("L", "type", _STRING),
        ("[", "signature", "[Ljavax/management/MBeanParameterInfo;"),
        ("I", "impact", None),
    ),
    superclass=_FEATURE,
)
_OPERATION_INFO_ARRAY = JavaClass(
    "[Ljavax.management.MBeanOperationInfo;", -8714627307087638645, ()
)
_NOTIFICATION_INFO = JavaClass(
    _MI + "MBeanNotificationInfo",
    -3888371564530107064,
    (("[", "types", "[Ljava/lang/String;"),),
    superclass=_FEATURE,
)
_NOTIFICATION_INFO_ARRAY = JavaClass(
    "[Ljavax.management.MBeanNotificationInfo;", -8825277981800410961, ()
)
_CONSTRUCTOR_INFO_ARRAY = JavaClass(
    "[Ljavax.management.MBeanConstructorInfo;", -5424372952189953547, ()
)
_MBEAN_INFO = JavaClass(
    _MI + "MBeanInfo",
    -6451021435135161911,
    (
        ("L", "className", _STRING),
        ("L", "description", _STRING),
        ("[", "attributes", "[Ljavax/management/MBeanAttributeInfo;"),
        ("[", "operations", "[Ljavax/management/MBeanOperationInfo;"),
        ("[", "constructors", "[Ljavax/management/MBeanConstructorInfo;"),
        ("[", "notifications", "[Ljavax/management/MBeanNotificationInfo;"),
    ),
    flags=_WM,
)


def _empty_descriptor() -> tuple[object, ...]:
    """What MBeanFeatureInfo/MBeanInfo.writeObject write for ImmutableDescriptor.EMPTY:
    1 (an ImmutableDescriptor), then its names and values, both empty."""
    return (JBlock(b"\x01"), string_array([]), JavaArray(_OBJECT_ARRAY, []))


def _feature(cls: JavaClass, name: str, description: str, **values: object) -> JavaObject:
    return JavaObject(
        cls,
        {"name": name, "description": description, **values},
        {_FEATURE.name: _empty_descriptor()},
    )


def mbean_info(
    class_name: str,
    description: str,
    attributes: Iterable[tuple[str, str, str, bool, bool, bool]],
    operations: Iterable[tuple[str, str, str, int, Iterable[tuple[str, str, str]]]],
    notifications: Iterable[tuple[str, str, Iterable[str]]],
) -> JavaObject:
    """An MBeanInfo as a StandardMBean/DynamicMBean's: attributes (name, type,
    description, readable, writable, is), operations (name, return type, description,
    impact, parameters (name, type, description)), notifications (class, description,
    types); empty descriptors, no constructors."""
    attrs = [
        _feature(_ATTRIBUTE_INFO, n, d, attributeType=t, isRead=r, isWrite=w, **{"is": i})
        for n, t, d, r, w, i in attributes
    ]
    ops = [
        _feature(
            _OPERATION_INFO,
            n,
            d,
            type=t,
            impact=impact,
            signature=JavaArray(
                _PARAMETER_ARRAY, [_feature(_PARAMETER, pn, pd, type=pt) for pn, pt, pd in params]
            ),
        )
        for n, t, d, impact, params in operations
    ]
    notes = [
        _feature(_NOTIFICATION_INFO, n, d, types=string_array(types))
        for n, d, types in notifications
    ]
    return JavaObject(
        _MBEAN_INFO,
        {
            "className": class_name,
            "description": description,
            "attributes": JavaArray(_ATTRIBUTE_INFO_ARRAY, attrs),
            "operations": JavaArray(_OPERATION_INFO_ARRAY, ops),
            "constructors": JavaArray(_CONSTRUCTOR_INFO_ARRAY, []),
            "notifications": JavaArray(_NOTIFICATION_INFO_ARRAY, notes),
        },
        {_MBEAN_INFO.name: _empty_descriptor()},
    )


_OBJECT_INSTANCE = JavaClass(
    _MI + "ObjectInstance",
    -4099952623687795850,
    (("L", "name", "Ljavax/management/ObjectName;"), ("L", "className", _STRING)),
)


def object_instance(name: str, class_name: str) -> JavaObject:
    return JavaObject(_OBJECT_INSTANCE, {"name": object_name(name), "className": class_name})


_OBJECT_NAME_ARRAY = JavaClass("[Ljavax.management.ObjectName;", 1262009912426809838, ())
_INTEGER_ARRAY = JavaClass("[Ljava.lang.Integer;", -101421563860753893, ())


def object_name_array(names: Iterable[str]) -> JavaArray:
    return JavaArray(_OBJECT_NAME_ARRAY, [object_name(n) for n in names])


def integer_array(values: Iterable[int]) -> JavaArray:
    return JavaArray(_INTEGER_ARRAY, [JInt(v) for v in values])


# -- notifications ---------------------------------------------------------------------

_EVENT_OBJECT = JavaClass("java.util.EventObject", 5516075349620653480, ())
_NOTIFICATION = JavaClass(
    _MI + "Notification",
    -7516092053498031989,
    (
        ("L", "message", _STRING),
        ("J", "sequenceNumber", None),
        ("L", "source", "Ljava/lang/Object;"),
        ("J", "timeStamp", None),
        ("L", "type", _STRING),
        ("L", "userData", "Ljava/lang/Object;"),
    ),
    superclass=_EVENT_OBJECT,
    flags=_WM,
)
_MQ = "com.sun.messaging.jms.management.server."
_MQ_NOTIFICATION = JavaClass(
    _MQ + "MQNotification", 3072936528462565055, (), superclass=_NOTIFICATION
)
# OpenMQ's notification classes (imq.jar), by what they report: their own fields.
NOTIFICATION_CLASSES = {
    "destination": JavaClass(
        _MQ + "DestinationNotification",
        -2645291216521538038,
        (
            ("Z", "createdByAdmin", None),
            ("L", "destName", _STRING),
            ("L", "destType", _STRING),
            ("L", "pauseType", _STRING),
        ),
        superclass=_MQ_NOTIFICATION,
    ),
    "log": JavaClass(
        _MQ + "LogNotification",
        -7401876633002582521,
        (("L", "level", _STRING), ("L", "message", _STRING)),
        superclass=_MQ_NOTIFICATION,
    ),
    "service": JavaClass(
        _MQ + "ServiceNotification",
        -2684773764629684593,
        (("L", "name", _STRING),),
        superclass=_MQ_NOTIFICATION,
    ),
    "broker": JavaClass(
        _MQ + "BrokerNotification",
        369199942794379731,
        (
            ("L", "brokerAddress", _STRING),
            ("L", "brokerID", _STRING),
            ("L", "failedBrokerID", _STRING),
            ("L", "heapMemoryUsage", "Ljava/lang/management/MemoryUsage;"),
            ("L", "newResourceState", _STRING),
            ("L", "oldResourceState", _STRING),
        ),
        superclass=_MQ_NOTIFICATION,
    ),
    "cluster": JavaClass(
        _MQ + "ClusterNotification",
        8569120463426095123,
        (
            ("Z", "highlyAvailable", None),
            ("Z", "isMasterBroker", None),
            ("L", "brokerAddress", _STRING),
            ("L", "brokerID", _STRING),
            ("L", "clusterID", _STRING),
        ),
        superclass=_MQ_NOTIFICATION,
    ),
    "connection": JavaClass(
        _MQ + "ConnectionNotification",
        -189741809769726998,
        (
            ("L", "id", _STRING),
            ("L", "remoteHost", _STRING),
            ("L", "serviceName", _STRING),
            ("L", "userName", _STRING),
        ),
        superclass=_MQ_NOTIFICATION,
    ),
    "transaction": JavaClass(
        _MQ + "TransactionNotification",
        1053479492195775559,
        (("L", "transactionID", _STRING),),
        superclass=_MQ_NOTIFICATION,
    ),
    "attribute": JavaClass(
        _MI + "AttributeChangeNotification",
        535176054565814134,
        (
            ("L", "attributeName", _STRING),
            ("L", "attributeType", _STRING),
            ("L", "newValue", "Ljava/lang/Object;"),
            ("L", "oldValue", "Ljava/lang/Object;"),
        ),
        superclass=_NOTIFICATION,
    ),
}
_TARGETED = JavaClass(
    _MI + "remote.TargetedNotification",
    7676132089779300926,
    (("L", "id", "Ljava/lang/Integer;"), ("L", "notif", "Ljavax/management/Notification;")),
)
_TARGETED_ARRAY = JavaClass(
    "[Ljavax.management.remote.TargetedNotification;", 5854582293262324702, ()
)
_NOTIFICATION_RESULT = JavaClass(
    _MI + "remote.NotificationResult",
    1191800228721395279,
    (
        ("J", "earliestSequenceNumber", None),
        ("J", "nextSequenceNumber", None),
        ("[", "targetedNotifications", "[Ljavax/management/remote/TargetedNotification;"),
    ),
)


def notification(
    kind: str,
    notif_type: str,
    source: str,
    sequence: int,
    timestamp_ms: int,
    message: str | None,
    **fields: object,
) -> JavaObject:
    """A notification of :data:`NOTIFICATION_CLASSES` ``kind`` from MBean ``source``
    (its ObjectName, as the connector server puts it in place of the MBean)."""
    return JavaObject(
        NOTIFICATION_CLASSES[kind],
        {
            "type": notif_type,
            "source": object_name(source),
            "sequenceNumber": sequence,
            "timeStamp": timestamp_ms,
            "message": message,
            "userData": None,
            **fields,
        },
    )


def notification_result(
    earliest: int, next_sequence: int, targeted: Iterable[tuple[int, JavaObject]]
) -> JavaObject:
    """fetchNotifications' answer: (listener ID, notification) pairs."""
    items = [JavaObject(_TARGETED, {"id": JInt(lid), "notif": n}) for lid, n in targeted]
    return JavaObject(
        _NOTIFICATION_RESULT,
        {
            "earliestSequenceNumber": earliest,
            "nextSequenceNumber": next_sequence,
            "targetedNotifications": JavaArray(_TARGETED_ARRAY, items),
        },
    )


# -- reading what a client sends -------------------------------------------------------


def read_marshalled(value: object) -> object:
    """The object a decoded java.rmi.MarshalledObject holds (None for null)."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("__class__") != "java.rmi.MarshalledObject":
        raise ProtocolError("expected a java.rmi.MarshalledObject")
    data = value.get("objBytes")
    if data is None:
        return None
    if not isinstance(data, bytes):
        raise ProtocolError("malformed MarshalledObject")
    try:
        return decode_object(data, generic=True)
    except JavaSerializationError as exc:
        raise ProtocolError(f"unreadable MarshalledObject: {exc}") from None


def read_attribute(value: object) -> tuple[str, object]:
    """A decoded javax.management.Attribute: (name, value)."""
    if isinstance(value, dict) and value.get("__class__") == _ATTRIBUTE.name:
        name = value.get("name")
        if isinstance(name, str):
            return name, value.get("value")
    raise ProtocolError("expected a javax.management.Attribute")


def read_attribute_list(value: object) -> list[tuple[str, object]]:
    """A decoded AttributeList (the generic reader gives an ArrayList's elements)."""
    if isinstance(value, dict) and value.get("__class__") == _ATTRIBUTE_LIST.name:
        custom = value.get(f"__custom__{_ARRAY_LIST.name}")
        if isinstance(custom, list):
            return [read_attribute(v) for v in custom if not isinstance(v, JBlock)]
    if isinstance(value, list):
        return [read_attribute(v) for v in value]
    raise ProtocolError("expected a javax.management.AttributeList")


def read_list(value: object) -> list[object]:
    """A decoded Object[] (null: empty)."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise ProtocolError("expected an array")
