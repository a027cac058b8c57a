"""Java boxed types as Python values.

The stock Java client casts property values to the exact boxed type it expects
(``JMQStatus`` must be an Integer, ``JMQConsumerID`` a Long), so a plain Python
``int`` is not enough to say what goes on the wire.  These thin subclasses carry
the Java type while behaving as ordinary numbers everywhere else.

Mapping used by the property codec and the Java-serialisation codec:

=============  ==================  =============================================
Java           Python              note
=============  ==================  =============================================
Boolean        ``bool``
Byte           ``JByte``
Short          ``JShort``
Character      ``JChar``           one-character ``str``
Integer        ``JInt`` / ``int``  a plain ``int`` is an Integer when it fits 32 bits
Long           ``JLong``           a plain ``int`` that does not fit 32 bits is a Long
Float          ``JFloat``
Double         ``float``
String         ``str``
byte[]         ``bytes``
=============  ==================  =============================================
"""

from __future__ import annotations

import struct

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class _JavaInteger(int):
    """What the Java integer types share: shown as ``JInt(5)``, written as ``5``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"

    # In text (logs, reasons, f-strings) the number, as Java's toString writes it.
    __str__ = int.__repr__


class JByte(_JavaInteger):
    """java.lang.Byte (-128..127)."""

    __slots__ = ()

    def __new__(cls, value: int) -> JByte:
        if not -128 <= value <= 127:
            raise ValueError(f"byte out of range: {value}")
        return super().__new__(cls, value)


class JShort(_JavaInteger):
    """java.lang.Short (-32768..32767)."""

    __slots__ = ()

    def __new__(cls, value: int) -> JShort:
        if not -32768 <= value <= 32767:
            raise ValueError(f"short out of range: {value}")
        return super().__new__(cls, value)


class JInt(_JavaInteger):
    """java.lang.Integer (32-bit signed)."""

    __slots__ = ()

    def __new__(cls, value: int) -> JInt:
        if not INT_MIN <= value <= INT_MAX:
            raise ValueError(f"int out of range: {value}")
        return super().__new__(cls, value)


class JLong(_JavaInteger):
    """java.lang.Long (64-bit signed)."""

    __slots__ = ()

    def __new__(cls, value: int) -> JLong:
        if not LONG_MIN <= value <= LONG_MAX:
            raise ValueError(f"long out of range: {value}")
        return super().__new__(cls, value)


class JFloat(float):
    """java.lang.Float; the value is rounded to IEEE-754 single precision."""

    __slots__ = ()

    def __new__(cls, value: float) -> JFloat:
        return super().__new__(cls, struct.unpack(">f", struct.pack(">f", value))[0])

    def __repr__(self) -> str:
        return f"JFloat({float(self)!r})"

    # In text the number (Python's shortest form, not Java's Float.toString).
    __str__ = float.__repr__


class JChar(str):
    """java.lang.Character: a one-character string in the Basic Multilingual Plane."""

    __slots__ = ()

    def __new__(cls, value: str) -> JChar:
        if len(value) != 1 or ord(value) > 0xFFFF:
            raise ValueError(f"char must be one BMP character: {value!r}")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"JChar({str(self)!r})"


def java_type_name(value: object) -> str:
    """The Java boxed type name a Python value is sent as (for messages and errors)."""
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, JByte):
        return "Byte"
    if isinstance(value, JShort):
        return "Short"
    if isinstance(value, JLong):
        return "Long"
    if isinstance(value, int):
        return "Integer" if INT_MIN <= value <= INT_MAX else "Long"
    if isinstance(value, JFloat):
        return "Float"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, JChar):
        return "Character"
    if isinstance(value, str):
        return "String"
    if isinstance(value, bytes | bytearray):
        return "byte[]"
    if value is None:
        return "null"
    raise TypeError(f"no Java type for {type(value).__name__}")
