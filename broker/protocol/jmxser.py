"""The Java objects JMX over RMI carries, as javaser values: ObjectName, Attribute,
AttributeList, a HashSet of names, the RMI stubs (RMIServerImpl_Stub in the service URL,
RMIConnectionImpl_Stub from newClient), DGC's Lease, and the exceptions a client sees.

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
    JavaArray,
    JavaClass,
    JavaObject,
    JBlock,
    ObjectStreamWriter,
)
from broker.protocol.jrmp import ObjID
from broker.protocol.properties import encode_java_utf

_WM = SC_SERIALIZABLE | SC_WRITE_METHOD
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

EXCEPTIONS = {
    "SecurityException": _SECURITY,
    "IllegalArgumentException": _ILLEGAL_ARGUMENT,
    "InstanceNotFoundException": _INSTANCE_NOT_FOUND,
    "AttributeNotFoundException": _ATTRIBUTE_NOT_FOUND,
    "NoSuchObjectException": _NO_SUCH_OBJECT,
    "UnmarshalException": _UNMARSHAL,
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


def _unicast_ref(host: str, port: int, objid: ObjID, result: bool) -> bytes:
    def utf(text: str) -> bytes:
        raw = encode_java_utf(text)
        return struct.pack(">H", len(raw)) + raw

    return utf("UnicastRef") + utf(host) + struct.pack(">i", port) + objid.pack() + bytes([result])


def connection_stub(host: str, port: int, objid: ObjID) -> JavaObject:
    """The RMIConnectionImpl_Stub that newClient returns (a UnicastRef to host:port)."""
    return JavaObject(
        _CONNECTION_STUB,
        {},
        {_REMOTE_OBJECT.name: (JBlock(_unicast_ref(host, port, objid, False)),)},
    )


def server_stub_bytes(host: str, port: int, objid: ObjID) -> bytes:
    """The RMIServerImpl_Stub as the service URL's /stub/ path holds it: a plain
    ObjectOutputStream (no class annotations), base64 of which goes into the URL."""
    w = ObjectStreamWriter()
    w.value(
        JavaObject(
            _SERVER_STUB,
            {},
            {_REMOTE_OBJECT.name: (JBlock(_unicast_ref(host, port, objid, False)),)},
        )
    )
    return bytes(w.out)


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
