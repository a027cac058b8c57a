"""The property section of a version-301 packet, and Java's (modified) UTF strings.

Layout (docs/developers/protocol.md, "Properties"): int32 format version (1), int32 count, then per
entry a ``writeUTF`` name, an int16 type code and the value.  Types 1-8 have no length
word, so an unknown type code cannot be skipped: the whole section is rejected.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import SupportsIndex, SupportsInt

from .errors import ProtocolError
from .jtypes import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, JByte, JChar, JFloat, JInt, JLong, JShort


class PropertyError(ProtocolError):
    """The property section could not be decoded or a value cannot be encoded."""


T_BOOLEAN = 1
T_BYTE = 2
T_SHORT = 3
T_INTEGER = 4
T_LONG = 5
T_FLOAT = 6
T_DOUBLE = 7
T_STRING = 8
T_OBJECT = 9

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_HEAD = struct.Struct(">ii")


_BOOL = struct.Struct(">?")
_I8 = struct.Struct(">b")
# Fixed-size value types: how many bytes, and the Python type they become.
_FIXED = {
    T_BOOLEAN: (_BOOL, bool),
    T_BYTE: (_I8, JByte),
    T_SHORT: (_I16, JShort),
    T_INTEGER: (_I32, JInt),
    T_LONG: (_I64, JLong),
    T_FLOAT: (_F32, JFloat),
    T_DOUBLE: (_F64, float),
}


class JavaObjectBytes(bytes):
    """A type-9 property value: Java-serialised bytes we carry but do not interpret."""

    __slots__ = ()


# ---------------------------------------------------------------------------
# Strings


def decode_java_utf(data: bytes) -> str:
    """Decode modified UTF-8 leniently (NUL as C0 80, non-BMP as surrogate pairs).

    Java's readUTF also takes a lone surrogate (written by writeUTF as 3 bytes); it
    becomes U+FFFD.  Bytes that are neither modified nor standard UTF-8 raise
    :class:`PropertyError`.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        fixed = data.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise PropertyError(
            f"{_shown(data)} is not valid modified UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    # Surrogate pairs written as two 3-byte sequences become one character.
    return fixed.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "replace")


def _shown(data: bytes, limit: int = 40) -> str:
    """The bytes as a log can show them: repr, cut at ``limit`` bytes."""
    return repr(data[:limit]) + ("..." if len(data) > limit else "")


def encode_java_utf(text: str) -> bytes:
    """Encode as Java's writeUTF body does (without the length word)."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    parts = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            parts.append(chr(0xD800 + (cp >> 10)))
            parts.append(chr(0xDC00 + (cp & 0x3FF)))
        else:
            parts.append(ch)
    return "".join(parts).encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def write_utf(text: str) -> bytes:
    """Java ``DataOutputStream.writeUTF``: uint16 length + modified UTF-8."""
    data = encode_java_utf(text)
    if len(data) > 0xFFFF:
        raise PropertyError(f"string too long for writeUTF: {len(data)} bytes")
    return _U16.pack(len(data)) + data


def read_utf(buf: bytes | memoryview, pos: int) -> tuple[str, int]:
    """Java ``readUTF`` from ``buf`` at ``pos``; returns the string and the next position."""
    if pos + 2 > len(buf):
        raise PropertyError("truncated string length")
    (n,) = _U16.unpack_from(buf, pos)
    end = pos + 2 + n
    if end > len(buf):
        raise PropertyError("truncated string")
    return decode_java_utf(bytes(buf[pos + 2 : end])), end


# ---------------------------------------------------------------------------
# Property table


# Strings that recur, by their bytes: a producer sends the same few property names (and
# destination names: packet.py) again and again.  Look up, then remember() on a miss.
TEXTS: dict[bytes, str] = {}
# Decoded JInt/JShort/JByte values, shared (they are immutable): type codes, options and
# flags recur.  Keyed by (code, bytes); longs are left out, being mostly times and ids.
_VALUES: dict[tuple[int, bytes], object] = {}
_CACHE_MAX = 4096
# The bound of a connection's own caches (a STOMP reader's heads, its SEND shapes): with
# thousands of connections each keeps only a producer's working set.
CONNECTION_CACHE = 32


def remember(cache: dict, key: object, value: object, limit: int = _CACHE_MAX) -> None:
    """Keep ``value`` in a bounded cache (``limit`` entries): emptied when full, the
    working set refills it."""
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value


# Fixed-size value types by code: size, struct and Python type; the type's range is the
# wire size's, so the constructor's range check is skipped (int.__new__).
_DECODERS = {
    code: (st.size, st.unpack_from, make, integral, integral and st.size <= 4)
    for code, (st, make) in _FIXED.items()
    for integral in (issubclass(make, int) and make is not bool,)
}


def decode_properties(buf: bytes | memoryview, start: int = 0, size: int | None = None) -> dict:
    """Decode a version-1 property table occupying ``buf[start:start+size]``."""
    end = len(buf) if size is None else start + size
    if size == 0:
        return {}
    if end > len(buf) or end - start < 8:
        raise PropertyError("property section too short")
    # One copy of the section (a slice of bytes is a copy too); then plain indexing.
    data = buf[start:end] if type(buf) is bytes else bytes(buf[start:end])
    version, count = _HEAD.unpack_from(data, 0)
    if version != 1:
        raise PropertyError(f"unsupported property table version {version}")
    if count < 0:
        raise PropertyError(f"negative property count {count}")
    end = len(data)
    pos = 8
    props: dict[str, object] = {}
    names, values = TEXTS, _VALUES
    for _ in range(count):
        if pos + 2 > end:
            raise PropertyError("truncated property name")
        n = (data[pos] << 8) | data[pos + 1]
        if n == 0:
            # The Java reader stops at an empty name.
            break
        name_end = pos + 2 + n
        if name_end + 2 > end:
            raise PropertyError("truncated property entry")
        raw = data[pos + 2 : name_end]
        name = names.get(raw)
        if name is None:
            try:
                name = decode_java_utf(raw)
            except PropertyError as exc:
                raise PropertyError(f"property name {exc}") from None
            remember(names, raw, name)
        code = (data[name_end] << 8) | data[name_end + 1]
        if code & 0x8000:
            code -= 0x10000
        pos = name_end + 2
        if code == T_STRING:
            if pos + 2 > end:
                raise PropertyError(f"truncated value of {name}")
            vend = pos + 2 + ((data[pos] << 8) | data[pos + 1])
            if vend > end:
                raise PropertyError(f"truncated value of {name}")
            try:
                value: object = decode_java_utf(data[pos + 2 : vend])
            except PropertyError as exc:
                raise PropertyError(f"value of {name}: {exc}") from None
            pos = vend
        elif code == T_OBJECT:
            if pos + 4 > end:
                raise PropertyError(f"truncated value of {name}")
            (on,) = _I32.unpack_from(data, pos)
            if on < 0 or pos + 4 + on > end:
                raise PropertyError(f"bad object length for {name}")
            value = JavaObjectBytes(data[pos + 4 : pos + 4 + on])
            pos += 4 + on
        else:
            dec = _DECODERS.get(code)
            if dec is None:
                raise PropertyError(f"unknown property type {code} for {name}")
            vsize, unpack, make, integral, shared = dec
            vend = pos + vsize
            if vend > end:
                raise PropertyError(f"truncated value of {name}")
            if shared:
                key = (code, data[pos:vend])
                value = values.get(key)
                if value is None:
                    value = int.__new__(make, unpack(data, pos)[0])
                    remember(values, key, value)
            elif integral:
                value = int.__new__(make, unpack(data, pos)[0])
            else:
                value = make(unpack(data, pos)[0])
            pos = vend
        props[name] = value
    return props


def _encode_value(name: str, value: object) -> bytes:
    if isinstance(value, bool):
        return b"\x00\x01" + (b"\x01" if value else b"\x00")
    if isinstance(value, JByte):
        return b"\x00\x02" + struct.pack(">b", value)
    if isinstance(value, JShort):
        return b"\x00\x03" + _I16.pack(value)
    if isinstance(value, int):
        if not LONG_MIN <= value <= LONG_MAX:
            raise PropertyError(f"property {name}: {value} does not fit a Java long")
        if INT_MIN <= value <= INT_MAX and not isinstance(value, JLong):
            return b"\x00\x04" + _I32.pack(value)
        return b"\x00\x05" + _I64.pack(value)
    if isinstance(value, JFloat):
        return b"\x00\x06" + _F32.pack(value)
    if isinstance(value, float):
        return b"\x00\x07" + _F64.pack(value)
    if isinstance(value, JavaObjectBytes):
        return b"\x00\x09" + _I32.pack(len(value)) + value
    if isinstance(value, JChar):
        # Character is not a property type in JMS; the Java client sends it as a String.
        return b"\x00\x08" + write_utf(str(value))
    if isinstance(value, str):
        return b"\x00\x08" + write_utf(value)
    raise PropertyError(f"property {name}: cannot encode {type(value).__name__}")


def encode_properties(props: Mapping[str, object] | None) -> bytes:
    """Encode a property table; ``None`` or empty gives no section at all (size 0)."""
    if not props:
        return b""
    parts = [_HEAD.pack(1, len(props))]
    for name, value in props.items():
        if value is None:
            raise PropertyError(f"property {name}: null values cannot be sent")
        parts.append(write_utf(name))
        parts.append(_encode_value(name, value))
    return b"".join(parts)


def optional_str(value: object) -> str | None:
    """A property that should be a String, as text (None stays None): a client that sent
    another type gets the value's text rather than a key of the wrong type."""
    return value if value is None or isinstance(value, str) else str(value)


class NotAnInteger(PropertyError, TypeError):
    """A property a client sent where a number belongs that is not one: bad input (a
    ProtocolError, which is a ValueError), and a TypeError for callers that expect
    ``int``'s errors."""


def as_int(value: object) -> int:
    """``int(value)`` for a property or field value of any Java type, typed: the same
    result as ``int`` gives, or :class:`NotAnInteger` where ``int`` raises (a String
    that is not a number, NaN, an infinite float, a serialized object): the client's
    mistake, not the broker's."""
    try:
        if isinstance(value, (int, float, str, bytes, bytearray)):
            return int(value)
        if isinstance(value, (SupportsInt, SupportsIndex)):
            return int(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise NotAnInteger(f"{_shown_value(value)} is not an integer ({exc})") from None
    raise NotAnInteger(f"a {type(value).__name__} value where an integer belongs")


def _shown_value(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text[:limit] + ("..." if len(text) > limit else "")


def empty_properties() -> bytes:
    """An empty (but present) table: what Java writes for a table with no entries."""
    return _HEAD.pack(1, 0)


__all__ = [
    "TEXTS",
    "JavaObjectBytes",
    "as_int",
    "NotAnInteger",
    "optional_str",
    "PropertyError",
    "decode_java_utf",
    "decode_properties",
    "empty_properties",
    "encode_java_utf",
    "encode_properties",
    "read_utf",
    "remember",
    "write_utf",
    "JInt",
    "JLong",
]
