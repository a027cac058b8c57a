"""A reader and writer for the Java serialisation that JMS bodies and admin replies use.

Why one module (about 1,600 lines): the reader and the writer share the stream grammar
(type codes, handle numbering, class descriptors with their serialVersionUIDs) and the
writer must mirror the reader byte for byte; they change together.

OpenMQ clients put ``java.io.ObjectOutputStream`` output in MapMessage bodies (a
``java.util.HashMap``, or a ``Hashtable`` from old clients), StreamMessage bodies (a
sequence of boxed values) and a few broker replies (``Hashtable``).  Only the shapes
those carry are understood here: ``null``, ``String``, the eight boxed primitives,
``byte[]``, ``HashMap`` and ``Hashtable`` of String keys.  Class descriptors are parsed
generically, but an object of any other class is rejected: nothing here ever builds an
object from a class name found in the data.  Malformed input of any kind raises
:class:`JavaSerializationError` and nothing else.

``decode_object(data, generic=True)`` is the same reader with a wider policy, for the
admin client reading the broker's ``*Info`` / metrics objects: any Serializable class
with default field serialisation becomes a dict of its fields (superclass fields
included, ``__class__`` naming the class), and a subclass of ``HashMap``/``Hashtable``
gets its entries as extra keys.  It still only ever builds dicts, lists and the values
above, with the same nesting and size limits.

The writer reproduces Java 17's bytes exactly, including the handle numbering, the
``valueOf`` caches that make a Java client write a repeated ``Boolean.TRUE`` or small
``Integer`` as a back-reference, and the capacity, threshold and entry order that a
``new HashMap()`` / ``new Hashtable()`` filled by ``put`` calls would have.

Python types follow :mod:`broker.protocol.jtypes`: ``bool`` Boolean, ``JByte`` Byte,
``JShort`` Short, ``JChar`` Character, ``JInt`` (or a plain ``int`` that fits 32 bits)
Integer, ``JLong`` (or a larger plain ``int``) Long, ``JFloat`` Float, ``float``
Double, ``str`` String, ``bytes``/``bytearray`` byte[], ``None`` null.  Decoding
returns ``JInt``/``JLong`` rather than plain ints so that a value keeps its Java type
through a decode/encode round trip.
"""

from __future__ import annotations

import math
import re
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    JByte,
    JChar,
    JFloat,
    JInt,
    JLong,
    JShort,
)
from broker.protocol.properties import encode_java_utf

__all__ = [
    "JBlock",
    "JavaArray",
    "JavaStreamTruncated",
    "ObjectStreamReader",
    "SELF",
    "JavaClass",
    "JavaObject",
    "JavaSerializationError",
    "decode_hashtable",
    "decode_map_body",
    "decode_modified_utf8",
    "decode_object",
    "decode_properties_object",
    "decode_stream_body",
    "decode_vector",
    "encode_hashtable",
    "encode_map_body",
    "encode_object",
    "encode_properties_object",
    "encode_stream_body",
    "encode_vector",
    "ObjectStreamWriter",
    "string_record",
]


class JavaSerializationError(ProtocolError):
    """The data is not (or not a supported subset of) a Java serialisation stream."""


class JavaStreamTruncated(JavaSerializationError):
    """The data ends inside a value: on a stream transport, more bytes may complete it."""


STREAM_MAGIC = b"\xac\xed\x00\x05"

TC_NULL = 0x70
TC_REFERENCE = 0x71
TC_CLASSDESC = 0x72
TC_OBJECT = 0x73
TC_STRING = 0x74
TC_ARRAY = 0x75
TC_CLASS = 0x76
TC_BLOCKDATA = 0x77
TC_ENDBLOCKDATA = 0x78
TC_RESET = 0x79
TC_BLOCKDATALONG = 0x7A
TC_EXCEPTION = 0x7B
TC_LONGSTRING = 0x7C
TC_PROXYCLASSDESC = 0x7D
TC_ENUM = 0x7E

BASE_HANDLE = 0x7E0000

SC_WRITE_METHOD = 0x01
SC_SERIALIZABLE = 0x02
SC_EXTERNALIZABLE = 0x04
SC_ENUM = 0x10

_TC_NAMES = {
    TC_NULL: "TC_NULL",
    TC_REFERENCE: "TC_REFERENCE",
    TC_CLASSDESC: "TC_CLASSDESC",
    TC_OBJECT: "TC_OBJECT",
    TC_STRING: "TC_STRING",
    TC_ARRAY: "TC_ARRAY",
    TC_CLASS: "TC_CLASS",
    TC_BLOCKDATA: "TC_BLOCKDATA",
    TC_ENDBLOCKDATA: "TC_ENDBLOCKDATA",
    TC_RESET: "TC_RESET",
    TC_BLOCKDATALONG: "TC_BLOCKDATALONG",
    TC_EXCEPTION: "TC_EXCEPTION",
    TC_LONGSTRING: "TC_LONGSTRING",
    TC_PROXYCLASSDESC: "TC_PROXYCLASSDESC",
    TC_ENUM: "TC_ENUM",
}

# Guards against stack exhaustion from maliciously nested class descriptors/annotations.
_MAX_DEPTH = 64

HASHMAP = "java.util.HashMap"
HASHTABLE = "java.util.Hashtable"
LINKED_HASHMAP = "java.util.LinkedHashMap"
BYTE_ARRAY = "[B"


@dataclass(frozen=True, slots=True)
class _KnownClass:
    """What Java 17 writes as the descriptor of a whitelisted class."""

    name: str
    suid: int
    flags: int
    fields: tuple[tuple[str, str], ...]  # (type code, field name), in stream order
    superclass: _KnownClass | None = None


_NUMBER = _KnownClass("java.lang.Number", -0x79536AE2F46B1F75, SC_SERIALIZABLE, ())


def _boxed(name: str, suid: int, code: str, number: bool = True) -> _KnownClass:
    return _KnownClass(name, suid, SC_SERIALIZABLE, ((code, "value"),), _NUMBER if number else None)


# serialVersionUIDs are the JDK's fixed values (the boxed ones date from JDK 1.0.2/1.1).
_BOOLEAN = _boxed("java.lang.Boolean", -0x32DF8D7F2A630512, "Z", number=False)
_BYTE = _boxed("java.lang.Byte", -0x63B19F7B11AF0AE4, "B")
_SHORT = _boxed("java.lang.Short", 0x684D37133460DA52, "S")
_CHARACTER = _boxed("java.lang.Character", 0x348B47D96B1A2678, "C", number=False)
_INTEGER = _boxed("java.lang.Integer", 0x12E2A0A4F7818738, "I")
_LONG = _boxed("java.lang.Long", 0x3B8BE490CC8F23DF, "J")
_FLOAT = _boxed("java.lang.Float", -0x2512365D24C30F14, "F")
_DOUBLE = _boxed("java.lang.Double", -0x7F4C3DB5D69404FC, "D")

_MAP_FIELDS = (("F", "loadFactor"), ("I", "threshold"))
_HASHMAP = _KnownClass(HASHMAP, 0x0507DAC1C31660D1, SC_SERIALIZABLE | SC_WRITE_METHOD, _MAP_FIELDS)
_HASHTABLE = _KnownClass(
    HASHTABLE, 0x13BB0F25214AE4B8, SC_SERIALIZABLE | SC_WRITE_METHOD, _MAP_FIELDS
)
_LINKED_HASHMAP = _KnownClass(
    LINKED_HASHMAP,
    0x34C04E5C106CC0FB,
    SC_SERIALIZABLE,
    (("Z", "accessOrder"),),
    _HASHMAP,
)
_BYTES = _KnownClass(BYTE_ARRAY, -0x530CE807F9F7AB20, SC_SERIALIZABLE, ())

# Admin bodies (admin.md): java.util.Properties and java.util.Vector (of Hashtables).
PROPERTIES = "java.util.Properties"
VECTOR = "java.util.Vector"
OBJECT_ARRAY = "[Ljava.lang.Object;"
_PROPERTIES = _KnownClass(
    PROPERTIES, 0x3912D07A70363E98, SC_SERIALIZABLE, (("L", "defaults"),), _HASHTABLE
)
_VECTOR = _KnownClass(
    VECTOR,
    -0x266882A47FC450FF,
    SC_SERIALIZABLE | SC_WRITE_METHOD,
    (("I", "capacityIncrement"), ("I", "elementCount"), ("[", "elementData")),
)
_OBJECT_ARRAY = _KnownClass(OBJECT_ARRAY, -0x6F31A760EF8CD694, SC_SERIALIZABLE, ())
# Admin replies may hold an ArrayList; message bodies never do (generic policy only).
ARRAY_LIST = "java.util.ArrayList"
_ARRAY_LIST = _KnownClass(
    ARRAY_LIST, 0x7881D21D99C7619D, SC_SERIALIZABLE | SC_WRITE_METHOD, (("I", "size"),)
)
# Field type strings of the descriptors above (written after each field name).
_FIELD_TYPES = {
    (PROPERTIES, "defaults"): "Ljava/util/Properties;",
    (VECTOR, "elementData"): "[Ljava/lang/Object;",
}


@dataclass(frozen=True, slots=True)
class JavaClass:
    """A plain Serializable class (default field serialisation, no writeObject) to write.

    ``fields`` are (type code, name, type signature or None) in declaration order; the
    stream order (primitives then objects, each sorted by name, as ObjectStreamClass
    does) is derived.  Object fields take str, None, a Mapping (written as a Hashtable,
    or a Properties for a field of that type) or a :class:`JavaObject`."""

    name: str
    suid: int
    fields: tuple[tuple[str, str, str | None], ...]
    superclass: JavaClass | None = None
    flags: int = SC_SERIALIZABLE  # | SC_WRITE_METHOD: a writeObject class (see JavaObject.custom)

    @property
    def stream_fields(self) -> list[tuple[str, str, str | None]]:
        return sorted(self.fields, key=lambda f: (f[0] in "L[", f[1]))


@dataclass(frozen=True, slots=True)
class JavaObject:
    """An instance of a :class:`JavaClass`: field values by name (missing: 0/false/null).

    ``custom`` holds, by class name, what a writeObject class writes after its fields
    (values, :class:`JBlock` block data, :data:`SELF` for the object itself)."""

    cls: JavaClass
    values: Mapping[str, object]
    custom: Mapping[str, Sequence[object]] | None = None


@dataclass(frozen=True, slots=True)
class JBlock:
    """Primitive data written with writeInt/writeUTF & co (a block-data record)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class JavaArray:
    """An array of objects of class ``cls`` (e.g. ``[Ljava.lang.String;``)."""

    cls: JavaClass
    items: Sequence[object]


class _Self:
    def __repr__(self) -> str:
        return "SELF"


SELF = _Self()  # a field or custom value that refers back to the object being written


_PRIMITIVES = {
    "I": ">i",
    "J": ">q",
    "Z": ">?",
    "B": ">b",
    "S": ">h",
    "C": ">H",
    "F": ">f",
    "D": ">d",
}

_BOXED_BY_NAME = {
    c.name: c for c in (_BOOLEAN, _BYTE, _SHORT, _CHARACTER, _INTEGER, _LONG, _FLOAT, _DOUBLE)
}
_MAPS_BY_NAME = {HASHMAP: _HASHMAP, HASHTABLE: _HASHTABLE}
_NO_MAPS: frozenset[str] = frozenset()
_ANY_MAP = frozenset(_MAPS_BY_NAME)

_LOAD_FACTOR = 0.75
_I8 = struct.Struct(">b")
_U16 = struct.Struct(">H")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_PACKERS = {code: struct.Struct(fmt) for code, fmt in _PRIMITIVES.items()}
_STRING_HEAD = struct.Struct(">BH")  # TC_STRING and the length
# Types value() sends straight to the boxes (no other isinstance test matches them).
_BOX_TYPES = frozenset({bool, int, JInt, JLong, JShort, JByte, JFloat, float})


@dataclass(frozen=True, slots=True)
class _Level:
    """One class of a chain as its objects' data is written: primitive fields (name and
    packer, None for an unknown type code), then object fields (name and signature)."""

    name: str
    primitives: tuple[tuple[str, struct.Struct | None], ...]
    objects: tuple[tuple[str, str | None], ...]
    write_method: bool
    code_of: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Plan:
    """What writing a :class:`JavaClass` needs, worked out once: its descriptor's bytes
    around the field signatures (written as shared strings), every field name of its
    chain and each level's fields in stream order, top superclass first."""

    cls: JavaClass  # held, so that the id keying it is not reused
    desc_head: bytes
    desc_fields: tuple[tuple[bytes, str | None], ...]
    error: str | None
    known: frozenset[str]
    levels: tuple[_Level, ...]


_plans: dict[int, _Plan] = {}


def _plan(cls: JavaClass) -> _Plan:
    plan = _plans.get(id(cls))
    if plan is not None and plan.cls is cls:
        return plan
    if len(_plans) >= 4096:  # classes made on the fly (tests): start again
        _plans.clear()
    fields = cls.stream_fields
    error = None
    name = encode_java_utf(cls.name)
    if len(name) > 0xFFFF:
        error = f"name too long for writeUTF: {len(name)} bytes"
    head = _U16.pack(len(name)) + name + _I64.pack(cls.suid) + bytes([cls.flags])
    head += _I16.pack(len(fields))
    desc_fields = []
    for code, field_name, signature in fields:
        raw = encode_java_utf(field_name)
        if len(raw) > 0xFFFF and error is None:
            error = f"name too long for writeUTF: {len(raw)} bytes"
        sig = None
        if code in "L[":
            if not signature and error is None:
                error = f"{cls.name}.{field_name} needs a type signature"
            sig = signature
        desc_fields.append((code.encode("ascii") + _U16.pack(len(raw)) + raw, sig))
    chain: list[JavaClass] = []
    c: JavaClass | None = cls
    while c is not None:
        chain.append(c)
        c = c.superclass
    levels = []
    for c in reversed(chain):
        stream = c.stream_fields
        levels.append(
            _Level(
                c.name,
                tuple((n, _PACKERS.get(code)) for code, n, _ in stream if code not in "L["),
                tuple((n, sig) for code, n, sig in stream if code in "L["),
                bool(c.flags & SC_WRITE_METHOD),
                {n: code for code, n, _ in stream},
            )
        )
    known = frozenset(n for c in chain for _, n, _ in c.fields)
    plan = _Plan(cls, head, tuple(desc_fields), error, known, tuple(levels))
    _plans[id(cls)] = plan
    return plan


def _to_f32(value: float) -> float:
    return _F32.unpack(_F32.pack(value))[0]


# ---------------------------------------------------------------------------
# Modified UTF-8 (DataInput.readUTF / DataOutput.writeUTF)
# ---------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")
# Java has no 4-byte forms: a lead byte F0..FF is malformed (Python's UTF-8 would accept F0..F4).
_FOUR_BYTE_LEAD = re.compile(b"[\xf0-\xff]")


def decode_modified_utf8(raw: bytes) -> str:
    """Decode Java's modified UTF-8; surrogate pairs are joined, lone surrogates are kept.

    Stricter than ``readUTF`` in one way: overlong forms other than C0 80, which no Java
    writer produces, are rejected.
    """
    if raw.isascii():
        return raw.decode("ascii")
    if _FOUR_BYTE_LEAD.search(raw):
        raise JavaSerializationError("malformed modified UTF-8: 4-byte sequence")
    try:
        text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise JavaSerializationError(f"malformed modified UTF-8: {exc.reason}") from exc
    if _SURROGATE.search(text):
        # A Java String is UTF-16: pairs written as two 3-byte sequences form one character.
        text = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return text


# ---------------------------------------------------------------------------
# Reader
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ClassDesc:
    """A class descriptor as found in the stream (not yet checked against the whitelist)."""

    name: str
    suid: int
    flags: int
    fields: tuple[tuple[str, str], ...]
    superclass: _ClassDesc | None


@dataclass(frozen=True, slots=True)
class _Unreferenceable:
    """Handle-table entry for something that may not be used through TC_REFERENCE."""

    what: str


_PENDING = _Unreferenceable("an object that is still being read")
_PRIMITIVE_CODES = frozenset("BCDFIJSZ")


def _java_type_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "java.util.Map"
    for py_type, java_name in _DECODED_TYPE_NAMES:
        if isinstance(value, py_type):
            return java_name
    return type(value).__name__  # pragma: no cover - the reader produces no other types


_DECODED_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "java.lang.Boolean"),
    (JByte, "java.lang.Byte"),
    (JShort, "java.lang.Short"),
    (JInt, "java.lang.Integer"),
    (JLong, "java.lang.Long"),
    (JFloat, "java.lang.Float"),
    (float, "java.lang.Double"),
    (JChar, "java.lang.Character"),
    (str, "java.lang.String"),
    (bytes, "byte[]"),
)


class _Reader:
    """Sequential parser of one stream with its handle table.

    ``generic`` selects the wider policy of ``decode_object(generic=True)``; the
    ``maps`` arguments below only restrict the strict one."""

    def __init__(self, data: bytes, generic: bool = False) -> None:
        self._data = bytes(data)
        self._pos = 0
        self._handles: list[object] = []
        self._depth = 0
        self._generic = generic
        # The map classes a map's value may be (a broker's metrics map nests Hashtables).
        self.value_maps: frozenset[str] = _NO_MAPS

    # -- primitives -------------------------------------------------------

    def at_end(self) -> bool:
        return self._pos >= len(self._data)

    def remaining(self) -> int:
        return len(self._data) - self._pos

    def _take(self, n: int) -> bytes:
        if n < 0:
            raise JavaSerializationError(f"negative length {n} at offset {self._pos}")
        if n > self.remaining():
            raise JavaStreamTruncated(
                f"truncated data: need {n} bytes at offset {self._pos}, have {self.remaining()}"
            )
        start = self._pos
        self._pos += n
        return self._data[start : self._pos]

    def _unpack(self, fmt: struct.Struct) -> Any:
        if fmt.size > self.remaining():
            raise JavaStreamTruncated(f"truncated data at offset {self._pos}")
        (value,) = fmt.unpack_from(self._data, self._pos)
        self._pos += fmt.size
        return value

    def u8(self) -> int:
        if self._pos >= len(self._data):
            raise JavaStreamTruncated(f"truncated data at offset {self._pos}")
        value = self._data[self._pos]
        self._pos += 1
        return value

    def peek(self) -> int:
        if self._pos >= len(self._data):
            raise JavaStreamTruncated(f"truncated data at offset {self._pos}")
        return self._data[self._pos]

    def i8(self) -> int:
        return self._unpack(_I8)

    def u16(self) -> int:
        return self._unpack(_U16)

    def i16(self) -> int:
        return self._unpack(_I16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def i64(self) -> int:
        return self._unpack(_I64)

    def f32(self) -> float:
        return self._unpack(_F32)

    def f64(self) -> float:
        return self._unpack(_F64)

    def utf(self) -> str:
        return decode_modified_utf8(self._take(self.u16()))

    def magic(self) -> None:
        if self._take(min(4, self.remaining())) != STREAM_MAGIC:
            raise JavaSerializationError("not a Java serialisation stream (bad magic/version)")

    # -- handles ----------------------------------------------------------

    def _reserve(self) -> int:
        self._handles.append(_PENDING)
        return len(self._handles) - 1

    def _lookup(self) -> object:
        handle = self.i32()
        index = handle - BASE_HANDLE
        if not 0 <= index < len(self._handles):
            raise JavaSerializationError(f"reference to unknown handle 0x{handle & 0xFFFFFFFF:x}")
        return self._handles[index]

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > _MAX_DEPTH:
            raise JavaSerializationError("stream nested too deeply")

    # -- grammar ----------------------------------------------------------

    def content(self, maps: frozenset[str]) -> object:
        """One object: null, a back-reference, String, byte[], or a whitelisted object.

        ``maps`` names the map classes allowed here (only at the top of a body).
        """
        tc = self.u8()
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            entry = self._lookup()
            if isinstance(entry, _ClassDesc):
                raise JavaSerializationError(
                    "reference to a class descriptor where an object belongs"
                )
            if isinstance(entry, _Unreferenceable):
                raise JavaSerializationError(f"back-reference to {entry.what} is not supported")
            return entry
        if tc in (TC_STRING, TC_LONGSTRING):
            return self._string(tc)
        if tc == TC_OBJECT:
            return self._object(maps)
        if tc == TC_ARRAY:
            return self._array()
        if tc == TC_ENUM:
            if self._generic:
                return self._enum()
            desc = self._classdesc()
            name = desc.name if desc else "null"
            raise JavaSerializationError(f"enum constant of {name} is not supported")
        if tc in (TC_BLOCKDATA, TC_BLOCKDATALONG):
            raise JavaSerializationError("unexpected primitive block data where an object belongs")
        name = _TC_NAMES.get(tc, f"unknown type code 0x{tc:02x}")
        raise JavaSerializationError(f"{name} is not supported (offset {self._pos - 1})")

    def _string(self, tc: int) -> str:
        if tc == TC_STRING:
            length = self.u16()
        else:
            length = self.i64()
        value = decode_modified_utf8(self._take(length))
        self._handles.append(value)
        return value

    def _classdesc(self) -> _ClassDesc | None:
        tc = self.u8()
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            entry = self._lookup()
            if not isinstance(entry, _ClassDesc):
                raise JavaSerializationError(
                    "reference to a non-class-descriptor where one belongs"
                )
            return entry
        if tc == TC_CLASSDESC:
            return self._new_classdesc()
        if tc == TC_PROXYCLASSDESC:
            raise JavaSerializationError("dynamic proxy classes are not supported")
        name = _TC_NAMES.get(tc, f"0x{tc:02x}")
        raise JavaSerializationError(f"expected a class descriptor, found {name}")

    def _new_classdesc(self) -> _ClassDesc:
        self._enter()
        handle = self._reserve()  # Java numbers the descriptor before its field type strings
        name = self.utf()
        suid = self.i64()
        flags = self.u8()
        count = self.i16()
        if count < 0:
            raise JavaSerializationError(f"{name}: negative field count {count}")
        fields = []
        for _ in range(count):
            code = chr(self.u8())
            field_name = self.utf()
            if code in "L[":
                self._type_string()
            elif code not in _PRIMITIVE_CODES:
                raise JavaSerializationError(f"{name}: bad field type code {code!r}")
            fields.append((code, field_name))
        self._skip_annotation()
        superclass = self._classdesc()
        desc = _ClassDesc(name, suid, flags, tuple(fields), superclass)
        self._handles[handle] = desc
        self._depth -= 1
        return desc

    def _type_string(self) -> None:
        tc = self.u8()
        if tc in (TC_STRING, TC_LONGSTRING):
            self._string(tc)
        elif tc == TC_REFERENCE:
            if not isinstance(self._lookup(), str):
                raise JavaSerializationError("field type name is not a string")
        elif tc != TC_NULL:
            raise JavaSerializationError(f"bad field type name token 0x{tc:02x}")

    def _skip_annotation(self) -> list[object]:
        """Read class annotation or custom data up to TC_ENDBLOCKDATA: its objects, and
        its block data as :class:`JBlock` (RMI streams annotate each class with a null)."""
        items: list[object] = []
        while True:
            tc = self.peek()
            if tc == TC_ENDBLOCKDATA:
                self._pos += 1
                return items
            if tc in (TC_BLOCKDATA, TC_BLOCKDATALONG):
                self._pos += 1
                items.append(JBlock(self._take(self.u8() if tc == TC_BLOCKDATA else self.i32())))
            else:
                items.append(self.content(_NO_MAPS))

    def _block_data(self, size: int) -> bytes:
        """Exactly ``size`` bytes of custom data, which Java may split over several blocks."""
        chunks = []
        have = 0
        while have < size:
            tc = self.u8()
            if tc == TC_BLOCKDATA:
                length = self.u8()
            elif tc == TC_BLOCKDATALONG:
                length = self.i32()
            else:
                raise JavaSerializationError(
                    f"expected block data, found {_TC_NAMES.get(tc, hex(tc))}"
                )
            chunks.append(self._take(length))
            have += length
        if have != size:
            raise JavaSerializationError(f"block data of {have} bytes where {size} were expected")
        return b"".join(chunks)

    def _check_desc(self, desc: _ClassDesc, known: _KnownClass) -> None:
        """Reject a descriptor that differs from what the JDK class has (as Java would)."""
        found: _ClassDesc | None = desc
        expected: _KnownClass | None = known
        while expected is not None:
            if found is None or found.name != expected.name:
                what = found.name if found else "none"
                raise JavaSerializationError(
                    f"{known.name}: superclass {what} where {expected.name} was expected"
                )
            if found.suid != expected.suid:
                raise JavaSerializationError(
                    f"{found.name}: serialVersionUID {found.suid & 0xFFFFFFFFFFFFFFFF:#x} does "
                    f"not match {expected.suid & 0xFFFFFFFFFFFFFFFF:#x}"
                )
            if found.flags != expected.flags:
                raise JavaSerializationError(
                    f"{found.name}: unexpected class flags 0x{found.flags:02x}"
                )
            if found.fields != expected.fields:
                raise JavaSerializationError(f"{found.name}: unexpected fields {found.fields}")
            found, expected = found.superclass, expected.superclass
        if found is not None:
            raise JavaSerializationError(f"{known.name}: unexpected superclass {found.name}")

    def _object(self, maps: frozenset[str]) -> object:
        self._enter()
        desc = self._classdesc()
        if desc is None:
            raise JavaSerializationError("object without a class descriptor")
        known = _BOXED_BY_NAME.get(desc.name)
        if known is not None:
            self._check_desc(desc, known)
            handle = self._reserve()
            value = self._boxed_value(known.fields[0][0])
            self._handles[handle] = value
        elif self._generic:
            value = self._any_object(desc)
        elif desc.name in maps and desc.name in _MAPS_BY_NAME:
            self._check_desc(desc, _MAPS_BY_NAME[desc.name])
            value = self._map(desc.name)
        elif desc.name == PROPERTIES and PROPERTIES in maps:
            self._check_desc(desc, _PROPERTIES)
            value = self._map(HASHTABLE)
            if self.content(_NO_MAPS) is not None:  # Properties.defaults
                raise JavaSerializationError("java.util.Properties with defaults is not supported")
            for key, item in value.items():
                if type(item) is not str:
                    raise JavaSerializationError(f"{PROPERTIES}: value of {key!r} is not a String")
        elif desc.name == VECTOR and VECTOR in maps:
            self._check_desc(desc, _VECTOR)
            value = self._vector()
        elif desc.name in _MAPS_BY_NAME:
            if maps:
                wanted = " or ".join(sorted(maps))
                raise JavaSerializationError(f"expected {wanted}, found {desc.name}")
            raise JavaSerializationError(f"{desc.name} is only supported as the whole body")
        else:
            raise JavaSerializationError(f"class {desc.name} is not allowed (not whitelisted)")
        self._depth -= 1
        return value

    def _boxed_value(self, code: str) -> object:
        if code == "Z":
            return self.u8() != 0
        if code == "B":
            return JByte(self.i8())
        if code == "S":
            return JShort(self.i16())
        if code == "C":
            return JChar(chr(self.u16()))
        if code == "I":
            return JInt(self.i32())
        if code == "J":
            return JLong(self.i64())
        if code == "F":
            return JFloat(self.f32())
        return self.f64()  # "D": the whitelist has no other codes

    def _map(self, class_name: str) -> dict[Any, object]:
        handle = self._reserve()
        result = self._map_data(class_name)
        # Strict: a map is a body, not a value, so nothing may refer back to it.
        self._handles[handle] = result if self._generic else _Unreferenceable(class_name)
        return result

    def _map_data(self, class_name: str) -> dict[Any, object]:
        """A HashMap's or Hashtable's fields and writeObject data (the entries)."""
        load_factor = self.f32()
        self.i32()  # threshold: recomputed by Java's readObject, so ignored like there
        if not load_factor > 0:  # also catches NaN
            raise JavaSerializationError(f"{class_name}: illegal load factor {load_factor}")
        _capacity, size = struct.unpack(">ii", self._block_data(8))
        if size < 0:
            raise JavaSerializationError(f"{class_name}: negative size {size}")
        if size > self.remaining() // 2:  # each key and value takes at least one byte
            raise JavaStreamTruncated(f"{class_name}: size {size} exceeds the data")
        is_hashtable = class_name == HASHTABLE
        result: dict[Any, object] = {}
        for _ in range(size):
            key = self.content(_NO_MAPS)
            if type(key) is not str and not (self._generic and _hashable(key)):
                raise JavaSerializationError(
                    f"{class_name}: key of type {_java_type_of(key)}; only String keys are supported"
                )
            value = self.content(self.value_maps)
            if is_hashtable:
                # Hashtable.readObject rejects these too (NullPointerException / corrupt stream).
                if value is None:
                    raise JavaSerializationError(f"{class_name}: null value for key {key!r}")
                if key in result:
                    raise JavaSerializationError(f"{class_name}: duplicate key {key!r}")
            result[key] = value
        if self.u8() != TC_ENDBLOCKDATA:
            raise JavaSerializationError(f"{class_name}: extra data after the entries")
        return result

    def _vector(self) -> list[object]:
        handle = self._reserve()
        self.i32()  # capacityIncrement
        count = self.i32()
        if self.u8() != TC_ARRAY:
            raise JavaSerializationError(f"{VECTOR}: elementData is not an array")
        desc = self._classdesc()
        if desc is None or desc.name != OBJECT_ARRAY:
            raise JavaSerializationError(f"{VECTOR}: elementData is not an Object[]")
        self._check_desc(desc, _OBJECT_ARRAY)
        array_handle = self._reserve()
        length = self.i32()
        if not 0 <= count <= length:
            raise JavaSerializationError(f"{VECTOR}: bad element count {count} of {length}")
        if length > self.remaining():
            raise JavaStreamTruncated(f"{VECTOR}: {length} elements exceed the data")
        items = [self.content(frozenset(_MAPS_BY_NAME)) for _ in range(length)]
        if any(item is not None for item in items[count:]):
            raise JavaSerializationError(f"{VECTOR}: elements beyond elementCount")
        if self.u8() != TC_ENDBLOCKDATA:
            raise JavaSerializationError(f"{VECTOR}: extra data after the fields")
        value = items[:count]
        if self._generic:
            self._handles[handle], self._handles[array_handle] = value, items
        else:
            self._handles[handle] = _Unreferenceable(VECTOR)
            self._handles[array_handle] = _Unreferenceable(OBJECT_ARRAY)
        return value

    def _array(self) -> bytes | list[object]:
        desc = self._classdesc()
        if desc is None:
            raise JavaSerializationError("array without a class descriptor")
        if desc.name != BYTE_ARRAY:
            if self._generic:
                return self._any_array(desc)
            raise JavaSerializationError(f"array class {desc.name} is not allowed (only byte[])")
        self._check_desc(desc, _BYTES)
        handle = self._reserve()
        length = self.i32()
        if length < 0:
            raise JavaSerializationError(f"negative array length {length}")
        value = self._take(length)
        self._handles[handle] = value
        return value

    # -- generic policy ---------------------------------------------------

    def _any_object(self, desc: _ClassDesc) -> object:
        """The JDK collections as dicts and lists, any other object as a dict of fields."""
        name = desc.name
        if name in _MAPS_BY_NAME:
            self._check_desc(desc, _MAPS_BY_NAME[name])
            return self._map(name)
        if name == LINKED_HASHMAP:
            self._check_desc(desc, _LINKED_HASHMAP)
            value = self._map(HASHMAP)
            self.u8()  # accessOrder
            return value
        if name == PROPERTIES:
            self._check_desc(desc, _PROPERTIES)
            value = self._map(HASHTABLE)
            self.content(_NO_MAPS)  # defaults: not part of the admin data, dropped
            return value
        if name == VECTOR:
            self._check_desc(desc, _VECTOR)
            return self._vector()
        if name == ARRAY_LIST:
            self._check_desc(desc, _ARRAY_LIST)
            return self._array_list()
        return self._fields_object(desc)

    def _fields_object(self, desc: _ClassDesc) -> dict[object, object]:
        handle = self._reserve()
        chain = []
        cls: _ClassDesc | None = desc
        while cls is not None:
            chain.append(cls)
            cls = cls.superclass
        fields: dict[object, object] = {"__class__": desc.name}
        entries: dict[Any, object] = {}
        for cls in reversed(chain):  # superclass data first
            if cls.flags & SC_EXTERNALIZABLE or not cls.flags & SC_SERIALIZABLE:
                raise JavaSerializationError(f"{cls.name} does not use default serialisation")
            known_map = _MAPS_BY_NAME.get(cls.name)
            if known_map is not None:
                # A HashMap subclass (DestMetricsCounters): its entries are its data.
                self._check_desc(cls, known_map)
                entries = self._map_data(cls.name)
                continue
            for code, field_name in cls.fields:
                fields[field_name] = self._field(code)
            if cls.flags & SC_WRITE_METHOD:
                # Custom data (ObjectName's name string): kept raw for the caller to read.
                custom = self._skip_annotation()
                if custom:
                    fields[f"__custom__{cls.name}"] = custom
        fields.update(entries)
        self._handles[handle] = fields
        return fields

    def _field(self, code: str) -> object:
        # Plain values, not JInt & co: what admin callers have always got for fields.
        if code in "L[":
            return self.content(_NO_MAPS)
        if code == "Z":
            return self.u8() != 0
        return self._unpack(_FIELD_FORMATS[code])

    def _array_list(self) -> list[object]:
        handle = self._reserve()
        size = self.i32()
        if size < 0:
            raise JavaSerializationError(f"{ARRAY_LIST}: bad size {size}")
        if size > self.remaining():
            raise JavaStreamTruncated(f"{ARRAY_LIST}: size {size} exceeds the data")
        self._block_data(4)  # capacity
        items = [self.content(_NO_MAPS) for _ in range(size)]
        if self.u8() != TC_ENDBLOCKDATA:
            raise JavaSerializationError(f"{ARRAY_LIST}: extra data after the elements")
        self._handles[handle] = items
        return items

    def _any_array(self, desc: _ClassDesc) -> list[object]:
        code = desc.name[1:2] if desc.name.startswith("[") else ""
        if code not in _PRIMITIVE_CODES and code not in ("L", "["):
            raise JavaSerializationError(f"{desc.name} is not an array class")
        self._enter()
        handle = self._reserve()
        length = self.i32()
        size = _FIELD_FORMATS[code].size if code in _FIELD_FORMATS else 1
        if length < 0:
            raise JavaSerializationError(f"{desc.name}: bad array length {length}")
        if length > self.remaining() // size:
            raise JavaStreamTruncated(f"{desc.name}: bad array length {length} (beyond the data)")
        items = [self._field(code) for _ in range(length)]
        self._handles[handle] = items
        self._depth -= 1
        return items

    def _enum(self) -> str:
        """An enum constant, as its name."""
        self._enter()
        desc = self._classdesc()
        if desc is None or not desc.flags & SC_ENUM:
            raise JavaSerializationError("enum constant without an enum class descriptor")
        handle = self._reserve()
        name = self.content(_NO_MAPS)
        if type(name) is not str:
            raise JavaSerializationError(f"{desc.name}: enum constant name is not a String")
        self._handles[handle] = name
        self._depth -= 1
        return name


_FIELD_FORMATS = {"B": _I8, "S": _I16, "C": _U16, "I": _I32, "J": _I64, "F": _F32, "D": _F64}


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _open(data: bytes, generic: bool = False) -> _Reader:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise JavaSerializationError(f"expected bytes, got {type(data).__name__}")
    reader = _Reader(data, generic)
    reader.magic()
    return reader


def _single(data: bytes, maps: frozenset[str], generic: bool = False) -> object:
    reader = _open(data, generic)
    value = reader.content(maps)
    if not reader.at_end():
        raise JavaSerializationError(
            f"{reader.remaining()} bytes of trailing data after the object"
        )
    return value


def _expect_map(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise JavaSerializationError(f"expected {what}, found {_java_type_of(value)}")
    return value


def decode_map_body(data: bytes, *, nested: bool = False) -> dict[str, object]:
    """Decode a MapMessage body: a serialised ``HashMap`` (or ``Hashtable``) of String keys.
    With ``nested``, a value may itself be a ``Hashtable`` (a dict), as in the broker's
    ``mq.metrics.destination_list`` maps; applications' maps never hold one."""
    reader = _open(data)
    if nested:
        reader.value_maps = frozenset({HASHTABLE})
    value = reader.content(_ANY_MAP)
    if not reader.at_end():
        raise JavaSerializationError(
            f"{reader.remaining()} bytes of trailing data after the object"
        )
    return _expect_map(value, "a java.util.HashMap or java.util.Hashtable")


def decode_hashtable(data: bytes) -> dict[str, object]:
    """Decode a serialised ``java.util.Hashtable`` of String keys (INFO and similar bodies)."""
    return _expect_map(_single(data, frozenset({HASHTABLE})), "a java.util.Hashtable")


def decode_properties_object(data: bytes) -> dict[str, str]:
    """Decode a serialised ``java.util.Properties`` (String keys and values, no defaults)."""
    value = _expect_map(_single(data, frozenset({PROPERTIES})), "a java.util.Properties")
    return value  # type: ignore[return-value]


def decode_vector(data: bytes) -> list[object]:
    """Decode a serialised ``java.util.Vector`` whose elements are whitelisted values or
    ``Hashtable``/``HashMap`` objects (admin reply bodies)."""
    value = _single(data, frozenset({VECTOR}))
    if not isinstance(value, list):
        raise JavaSerializationError(f"expected a java.util.Vector, found {_java_type_of(value)}")
    return value


def decode_stream_body(data: bytes) -> list[object]:
    """Decode a StreamMessage body: the values read by successive ``readObject`` calls."""
    if not data:
        return []
    reader = _open(data)
    values = []
    while not reader.at_end():
        values.append(reader.content(_NO_MAPS))
    return values


def decode_object(data: bytes, *, generic: bool = False) -> object:
    """Decode one whitelisted object (String, boxed value, byte[], HashMap, Hashtable or null).

    ``generic`` also accepts any Serializable class (see the module docstring): for
    admin replies, whose classes are not whitelisted one by one."""
    return _single(data, _ANY_MAP, generic)


# ---------------------------------------------------------------------------
# Writer
# ---------------------------------------------------------------------------

_NAN32 = b"\x7f\xc0\x00\x00"  # Float.floatToIntBits(NaN): Java writes the canonical NaN
_NAN64 = b"\x7f\xf8\x00\x00\x00\x00\x00\x00"


def _java_hash(text: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit number (computed over UTF-16 units)."""
    units: Sequence[int]
    if text.isascii():
        units = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _hashmap_layout(keys: list[str]) -> tuple[int, int, list[str]]:
    """(capacity, threshold, iteration order) of ``new HashMap()`` after ``put`` of each key.

    Entries sit in bucket ``spread(hash) & (capacity - 1)``, in insertion order within a
    bucket (resizes split buckets preserving order).  A put into a bucket already holding 8
    entries makes Java resize a table of under 64 slots instead of building a tree, which
    changes the capacity written.  In a table of 64+ slots such a bucket becomes a tree
    whose order is not reproduced here (it needs many colliding hashes; the capacity and
    threshold still match, and Java readers do not depend on order).
    """
    if not keys:
        return 16, 0, []  # no table yet: threshold 0, capacity() reports the default 16
    spread = []
    for key in keys:
        h = _java_hash(key)
        spread.append(h ^ (h >> 16))
    capacity, threshold = 16, 12
    bins: Counter[int] = Counter()
    for size, h in enumerate(spread, start=1):
        old_capacity = capacity
        index = h & (capacity - 1)
        crowded = bins[index] >= 8 and capacity < 64  # treeifyBin() resizes a small table
        bins[index] += 1
        if crowded:
            capacity, threshold = capacity * 2, threshold * 2
        if size > threshold:  # checked after the treeify resize, as in putVal
            capacity, threshold = capacity * 2, threshold * 2
        if capacity != old_capacity:
            bins = Counter(x & (capacity - 1) for x in spread[:size])
    order = sorted(range(len(keys)), key=lambda i: spread[i] & (capacity - 1))
    return capacity, threshold, [keys[i] for i in order]


def _hashtable_layout(keys: list[str]) -> tuple[int, int, list[str]]:
    """(capacity, threshold, write order) of ``new Hashtable()`` after ``put`` of each key.

    Hashtable prepends to a bucket's chain, ``rehash`` walks the old buckets from the top
    prepending again, and ``writeObject`` stacks the entries before writing, so the write
    order is the reverse of the table walk.
    """
    hashes = [_java_hash(key) & 0x7FFFFFFF for key in keys]
    capacity, threshold = 11, 8
    # Each bucket lists its chain tail-first, so prepending is an append.
    buckets: list[list[int]] = [[] for _ in range(capacity)]
    for i in range(len(keys)):
        if i >= threshold:  # addEntry checks the count before adding
            new_capacity = capacity * 2 + 1
            new_buckets: list[list[int]] = [[] for _ in range(new_capacity)]
            for bucket in reversed(buckets):
                for entry in reversed(bucket):
                    new_buckets[hashes[entry] % new_capacity].append(entry)
            capacity, buckets = new_capacity, new_buckets
            # (int) (newCapacity * loadFactor) in float arithmetic
            threshold = int(_to_f32(capacity * _LOAD_FACTOR))
        buckets[hashes[i] % capacity].append(i)
    walk = [entry for bucket in buckets for entry in reversed(bucket)]
    return capacity, threshold, [keys[i] for i in reversed(walk)]


def _properties_layout(keys: list[str]) -> tuple[int, list[str]]:
    """(length, write order) of a ``new Properties()`` filled by ``setProperty`` calls.

    JDK 9+ keeps the entries in a ``ConcurrentHashMap(8)`` (16 bins, resized at 3/4
    full) and ``writeHashtable`` writes them in reverse iteration order, with the length
    that ``Hashtable.readObject`` would pick.  A resize splits each bin as
    ``ConcurrentHashMap.transfer`` does (nodes before the "last run" are reversed).
    Bins that would become trees (8+ colliding entries) are not modelled.
    """
    spread = {key: (_java_hash(key) ^ (_java_hash(key) >> 16)) & 0x7FFFFFFF for key in keys}
    n = 16
    bins: list[list[str]] = [[] for _ in range(n)]
    for count, key in enumerate(keys, start=1):
        bins[spread[key] & (n - 1)].append(key)
        if count >= n - (n >> 2):
            new_bins: list[list[str]] = [[] for _ in range(2 * n)]
            for i, chain in enumerate(bins):
                if not chain:
                    continue
                bits = [spread[k] & n for k in chain]
                last = len(chain) - 1
                while last > 0 and bits[last - 1] == bits[last]:
                    last -= 1
                low = chain[last:] if bits[last] == 0 else []
                high = chain[last:] if bits[last] else []
                for k, bit in zip(chain[:last], bits[:last], strict=True):
                    if bit:
                        high = [k, *high]
                    else:
                        low = [k, *low]
                new_bins[i], new_bins[i + n] = low, high
            n, bins = 2 * n, new_bins
    walk = [key for chain in bins for key in chain]
    size = len(keys)
    length = int(_to_f32(size / _LOAD_FACTOR)) + size // 20 + 3
    if length > size and length % 2 == 0:
        length -= 1
    return length, list(reversed(walk))


def _classify(value: object) -> tuple[_KnownClass, bytes, bool]:
    """Class, field bytes, and whether ``valueOf`` would return a cached (shared) instance."""
    if isinstance(value, bool):
        return _BOOLEAN, b"\x01" if value else b"\x00", True
    if isinstance(value, JByte):
        return _BYTE, _I8.pack(value), True
    if isinstance(value, JShort):
        return _SHORT, _I16.pack(value), -128 <= value <= 127
    if isinstance(value, JLong):
        return _LONG, _I64.pack(value), -128 <= value <= 127
    if isinstance(value, int):
        if INT_MIN <= value <= INT_MAX:
            return _INTEGER, _I32.pack(value), -128 <= value <= 127
        if LONG_MIN <= value <= LONG_MAX:
            return _LONG, _I64.pack(value), -128 <= value <= 127
        raise JavaSerializationError(f"integer {value} does not fit a Java long")
    if isinstance(value, JFloat):
        return _FLOAT, _NAN32 if math.isnan(value) else _F32.pack(value), False
    if isinstance(value, float):
        return _DOUBLE, _NAN64 if math.isnan(value) else _F64.pack(value), False
    if isinstance(value, JChar):
        if len(value) != 1 or ord(value) > 0xFFFF:
            raise JavaSerializationError(f"Character must be one BMP character: {value!r}")
        return _CHARACTER, _U16.pack(ord(value)), ord(value) <= 127
    raise JavaSerializationError(f"no Java type for a value of type {type(value).__name__}")


def string_record(text: str) -> bytes:
    """A String as writeObject writes it: TC_STRING (TC_LONGSTRING past 65,535 bytes),
    the length and the modified UTF-8 (it takes one handle)."""
    raw = text.encode() if text.isascii() and "\0" not in text else encode_java_utf(text)
    n = len(raw)
    if n <= 0xFFFF:
        return _STRING_HEAD.pack(TC_STRING, n) + raw
    return bytes((TC_LONGSTRING,)) + _I64.pack(n) + raw


class ObjectStreamWriter:
    """Emits one stream, numbering handles exactly as ObjectOutputStream does."""

    def __init__(self, annotate: bool = False) -> None:
        # ``annotate``: RMI's MarshalOutputStream, which writes a codebase (null) per class.
        self.annotate = annotate
        self._current: list[int] = []
        self.out = bytearray(STREAM_MAGIC)
        self._next_handle = BASE_HANDLE
        self._classes: dict[str, int] = {}
        self._cached_boxes: dict[tuple[str, bytes], int] = {}
        self.intern_keys = False
        self.nested_maps = False  # a Mapping value in a map is written as a Hashtable
        self._keys: dict[str, int] = {}
        self._type_strings: dict[str, int] = {}

    def _assign(self) -> int:
        handle = self._next_handle
        self._next_handle += 1
        return handle

    def _reference(self, handle: int) -> None:
        self.out.append(TC_REFERENCE)
        self.out += _I32.pack(handle)

    def utf(self, text: str) -> None:
        raw = encode_java_utf(text)
        if len(raw) > 0xFFFF:
            raise JavaSerializationError(f"name too long for writeUTF: {len(raw)} bytes")
        self.out += _U16.pack(len(raw)) + raw

    def classdesc(self, cls: _KnownClass | None) -> None:
        if cls is None:
            self.out.append(TC_NULL)
            return
        handle = self._classes.get(cls.name)
        if handle is not None:
            self._reference(handle)
            return
        self.out.append(TC_CLASSDESC)
        self._classes[cls.name] = self._assign()
        self.utf(cls.name)
        self.out += _I64.pack(cls.suid)
        self.out.append(cls.flags)
        self.out += _I16.pack(len(cls.fields))
        for code, name in cls.fields:
            self.out += code.encode("ascii")
            self.utf(name)
            if code in "L[":
                self._type_string(_FIELD_TYPES[(cls.name, name)])
        if self.annotate:
            self.out.append(TC_NULL)
        self.out.append(TC_ENDBLOCKDATA)  # annotateClass writes nothing
        self.classdesc(cls.superclass)

    def string(self, text: str) -> None:
        self._next_handle += 1
        self.out += string_record(text)

    def key(self, text: str) -> None:
        """A map key; with ``intern_keys`` a repeated key is a back-reference, as the same
        literal (interned) String is when a Java program fills several maps."""
        if self.intern_keys:
            handle = self._keys.get(text)
            if handle is not None:
                self._reference(handle)
                return
            self._keys[text] = self._next_handle
        self.string(text)

    def properties(self, values: Mapping[str, str]) -> None:
        if not isinstance(values, Mapping):
            raise JavaSerializationError(f"expected a mapping, got {type(values).__name__}")
        for key, item in values.items():
            if not isinstance(key, str) or not isinstance(item, str):
                raise JavaSerializationError(f"Properties need str keys and values ({key!r})")
        length, order = _properties_layout(list(values))
        self.out.append(TC_OBJECT)
        self.classdesc(_PROPERTIES)
        self._assign()
        # Hashtable's fields as defaultWriteHashtable sets them from the written length.
        threshold = int(_to_f32(length * _LOAD_FACTOR))
        self.out += _F32.pack(_LOAD_FACTOR) + _I32.pack(threshold)
        self.out += bytes((TC_BLOCKDATA, 8)) + struct.pack(">ii", length, len(order))
        for key in order:
            self.string(key)
            self.string(values[key])
        self.out.append(TC_ENDBLOCKDATA)
        self.out.append(TC_NULL)  # Properties.defaults

    def vector(self, items: Sequence[object]) -> None:
        if isinstance(items, str | bytes | bytearray | Mapping):
            raise JavaSerializationError("expected a sequence of elements")
        capacity = 10  # new Vector(), doubling as elements are added
        while capacity < len(items):
            capacity *= 2
        self.out.append(TC_OBJECT)
        self.classdesc(_VECTOR)
        self._assign()
        self.out += _I32.pack(0) + _I32.pack(len(items))  # capacityIncrement, elementCount
        self.out.append(TC_ARRAY)
        self.classdesc(_OBJECT_ARRAY)
        self._assign()
        self.out += _I32.pack(capacity)
        for item in items:
            if isinstance(item, Mapping):
                self.map(item, hashtable=True)
            else:
                self.value(item)
        self.out += bytes([TC_NULL]) * (capacity - len(items))
        self.out.append(TC_ENDBLOCKDATA)

    def value(self, value: object) -> None:
        """writeObject of one body value (no maps)."""
        t = type(value)
        if t is str:
            self.string(value)  # type: ignore[arg-type]
        elif t is JavaObject:
            self.java_object(value)  # type: ignore[arg-type]
        elif value is None:
            self.out.append(TC_NULL)
        elif t in _BOX_TYPES:
            self._box(value)
        elif isinstance(value, str) and not isinstance(value, JChar):
            self.string(value)
        elif isinstance(value, JavaObject):
            self.java_object(value)
        elif isinstance(value, JavaArray):
            self.java_array(value)
        elif value is SELF:
            if not self._current:
                raise JavaSerializationError("SELF outside an object")
            self._reference(self._current[-1])
        elif isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            self.out.append(TC_ARRAY)
            self.classdesc(_BYTES)
            self._assign()
            self.out += _I32.pack(len(data)) + data
        else:
            self._box(value)

    def _box(self, value: object) -> None:
        """A boxed primitive (Integer, Long, Boolean & co)."""
        t = type(value)
        if t is JInt:  # the usual attribute values first (JInt and JLong check their range)
            cls, field_bytes, shared = _INTEGER, _I32.pack(value), -128 <= value <= 127  # type: ignore[operator]
        elif t is JLong:
            cls, field_bytes, shared = _LONG, _I64.pack(value), -128 <= value <= 127  # type: ignore[operator]
        elif t is bool:
            cls, field_bytes, shared = _BOOLEAN, b"\x01" if value else b"\x00", True
        else:
            cls, field_bytes, shared = _classify(value)
        key = (cls.name, field_bytes)
        handle = self._cached_boxes.get(key) if shared else None
        if handle is not None:
            # Boolean.valueOf & co return one instance, which Java writes only once.
            self._reference(handle)
            return
        self.out.append(TC_OBJECT)
        self.classdesc(cls)
        handle = self._assign()
        if shared:
            self._cached_boxes[key] = handle
        self.out += field_bytes

    def _type_string(self, text: str) -> None:
        # Field signatures are interned by the JDK, so a repeated one is a back-reference.
        handle = self._type_strings.get(text)
        if handle is not None:
            self._reference(handle)
            return
        self._type_strings[text] = self._next_handle
        self.string(text)

    def java_classdesc(self, cls: JavaClass | None) -> None:
        if cls is None:
            self.out.append(TC_NULL)
            return
        handle = self._classes.get(cls.name)
        if handle is not None:
            self._reference(handle)
            return
        plan = _plan(cls)
        self.out.append(TC_CLASSDESC)
        self._classes[cls.name] = self._assign()
        if plan.error is not None:
            raise JavaSerializationError(plan.error)
        self.out += plan.desc_head
        for field_bytes, signature in plan.desc_fields:
            self.out += field_bytes
            if signature is not None:
                self._type_string(signature)
        if self.annotate:
            self.out.append(TC_NULL)
        self.out.append(TC_ENDBLOCKDATA)
        self.java_classdesc(cls.superclass)

    def block(self, data: bytes) -> None:
        """Primitive data as block-data records (at most 255 bytes in a short record)."""
        for start in range(0, len(data), 1024):
            chunk = data[start : start + 1024]
            if len(chunk) <= 0xFF:
                self.out += bytes((TC_BLOCKDATA, len(chunk)))
            else:
                self.out.append(TC_BLOCKDATALONG)
                self.out += _I32.pack(len(chunk))
            self.out += chunk

    def java_array(self, arr: JavaArray) -> None:
        self.out.append(TC_ARRAY)
        self.java_classdesc(arr.cls)
        self._assign()
        self.out += _I32.pack(len(arr.items))
        if arr.cls.name == "[I":  # an int[]: the values themselves
            self.out += struct.pack(f">{len(arr.items)}i", *arr.items)
            return
        for item in arr.items:
            self.value(item)

    def java_object(self, obj: JavaObject) -> None:
        self.begin_object(obj.cls)
        try:
            self._object_data(obj)
        finally:
            self._current.pop()

    def begin_object(self, cls: JavaClass) -> None:
        """An object of ``cls`` whose data the caller writes (its fields' values in
        stream order with :meth:`field`, as :meth:`java_object` would), then ends with
        :meth:`end_object`: for a value written often, without a JavaObject."""
        self.out.append(TC_OBJECT)
        self.java_classdesc(cls)
        self._current.append(self._next_handle)
        self._next_handle += 1

    def end_object(self) -> None:
        self._current.pop()

    def field(self, value: object, signature: str | None) -> None:
        """The value of an object field of type ``signature``."""
        t = type(value)
        if value is None:
            self.out.append(TC_NULL)
        elif t is str:
            self.string(value)  # type: ignore[arg-type]
        elif t in _BOX_TYPES:
            self._box(value)
        elif isinstance(value, Mapping) and signature == "Ljava/util/Properties;":
            self.properties(value)
        elif isinstance(value, Mapping):
            self.map(value, hashtable=True)
        else:
            self.value(value)

    def _object_data(self, obj: JavaObject) -> None:
        plan = _plan(obj.cls)
        values = obj.values
        if not plan.known.issuperset(values):
            unknown = set(values) - plan.known
            raise JavaSerializationError(f"{obj.cls.name} has no field {sorted(unknown)[0]}")
        out = self.out
        for level in plan.levels:  # superclass data first
            for name, packer in level.primitives:
                value = values.get(name)
                try:
                    out += packer.pack(value or 0)  # type: ignore[union-attr]
                except (struct.error, AttributeError, TypeError) as exc:
                    # No packer: a type code Java does not have (KeyError, as before).
                    why = KeyError(level.code_of[name]) if packer is None else exc
                    raise JavaSerializationError(
                        f"bad value for {level.name}.{name}: {why}"
                    ) from None
            for name, signature in level.objects:
                self.field(values.get(name), signature)
            if level.write_method:
                for item in (obj.custom or {}).get(level.name, ()):
                    if isinstance(item, JBlock):
                        self.block(item.data)
                    else:
                        self.value(item)
                out.append(TC_ENDBLOCKDATA)

    def map(self, values: Mapping[str, object], hashtable: bool, linked: bool = False) -> None:
        """A Hashtable, a HashMap or (``linked``) a LinkedHashMap in insertion order."""
        if not isinstance(values, Mapping):
            raise JavaSerializationError(f"expected a mapping, got {type(values).__name__}")
        hashtable = hashtable and not linked
        keys = list(values)
        for key in keys:
            if not isinstance(key, str):
                raise JavaSerializationError(f"map keys must be str, got {type(key).__name__}")
            if hashtable and values[key] is None:
                raise JavaSerializationError(f"a Hashtable cannot hold null (key {key!r})")
        if hashtable:
            capacity, threshold, order = _hashtable_layout(keys)
        else:
            capacity, threshold, order = _hashmap_layout(keys)
            if linked:
                order = keys
        self.out.append(TC_OBJECT)
        self.classdesc(_LINKED_HASHMAP if linked else _HASHTABLE if hashtable else _HASHMAP)
        self._assign()
        self.out += _F32.pack(_LOAD_FACTOR) + _I32.pack(threshold)
        self.out += bytes((TC_BLOCKDATA, 8)) + struct.pack(">ii", capacity, len(keys))
        self._entries(values, order)
        self.out.append(TC_ENDBLOCKDATA)
        if linked:
            self.out.append(0)  # LinkedHashMap.accessOrder

    def _entries(self, values: Mapping[str, object], order: list[str]) -> None:
        for key in order:
            self.key(key)
            entry = values[key]
            if isinstance(entry, Mapping):
                if not self.nested_maps:
                    raise JavaSerializationError(f"nested maps are not supported (key {key!r})")
                self.map(entry, hashtable=True)
                continue
            self.value(entry)


class ObjectStreamReader:
    """One stream read as ObjectInputStream reads it: primitives from block data
    (``primitive``), objects (``read_object``, the generic policy of
    ``decode_object(generic=True)``) in the order they were written.  Raises
    :class:`JavaStreamTruncated` when the data ends early."""

    def __init__(self, data: bytes) -> None:
        if len(data) < len(STREAM_MAGIC) and STREAM_MAGIC.startswith(bytes(data)):
            raise JavaStreamTruncated("truncated stream header")
        self._r = _Reader(data, generic=True)
        self._r.magic()
        self._left = 0  # bytes left in the current block-data record

    @property
    def offset(self) -> int:
        return self._r._pos

    def primitive(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            if self._left == 0:
                tc = self._r.u8()
                if tc == TC_BLOCKDATA:
                    self._left = self._r.u8()
                elif tc == TC_BLOCKDATALONG:
                    self._left = self._r.i32()
                    if self._left < 0:
                        raise JavaSerializationError(f"negative block length {self._left}")
                else:
                    raise JavaSerializationError(
                        f"expected primitive data, found {_TC_NAMES.get(tc, hex(tc))}"
                    )
                continue
            take = min(self._left, n - len(out))
            out += self._r._take(take)
            self._left -= take
        return bytes(out)

    def read_object(self) -> object:
        if self._left:
            raise JavaSerializationError("an object where primitive data remains")
        return self._r.content(_NO_MAPS)

    def at_end(self) -> bool:
        return self._left == 0 and self._r.at_end()


def encode_map_body(values: Mapping[str, object]) -> bytes:
    """Encode a MapMessage body: a ``java.util.HashMap`` exactly as Java 17 writes it."""
    writer = ObjectStreamWriter()
    writer.map(values, hashtable=False)
    return bytes(writer.out)


def encode_hashtable(values: Mapping[str, object], nested: bool = False) -> bytes:
    """Encode a ``java.util.Hashtable`` exactly as Java 17 writes it (no None values);
    with ``nested``, a Mapping value is itself written as a Hashtable."""
    writer = ObjectStreamWriter()
    writer.nested_maps = nested
    writer.map(values, hashtable=True)
    return bytes(writer.out)


def encode_properties_object(values: Mapping[str, str]) -> bytes:
    """Encode a ``java.util.Properties`` (no defaults) exactly as Java 17 writes one filled
    by ``setProperty`` in the mapping's order (see :func:`_properties_layout`)."""
    writer = ObjectStreamWriter()
    writer.properties(values)
    return bytes(writer.out)


def encode_vector(items: Sequence[object]) -> bytes:
    """Encode a ``java.util.Vector`` filled by ``add``; Mapping elements become
    ``Hashtable`` objects whose (literal) keys are shared across elements."""
    writer = ObjectStreamWriter()
    writer.intern_keys = True
    writer.vector(items)
    return bytes(writer.out)


def encode_stream_body(values: Sequence[object]) -> bytes:
    """Encode a StreamMessage body (one ``writeObject`` per value); empty input gives b""."""
    if isinstance(values, str | bytes | bytearray | Mapping):
        raise JavaSerializationError("expected a sequence of values")
    if not values:
        return b""
    writer = ObjectStreamWriter()
    for value in values:
        if isinstance(value, Mapping):
            raise JavaSerializationError("a StreamMessage cannot hold a map")
        writer.value(value)
    return bytes(writer.out)


def encode_object(value: object) -> bytes:
    """Encode one value as a top-level object; a Mapping becomes a ``java.util.HashMap``."""
    writer = ObjectStreamWriter()
    if isinstance(value, Mapping):
        writer.map(value, hashtable=False)
    else:
        writer.value(value)
    return bytes(writer.out)
