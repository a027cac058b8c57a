"""The JMX answers a monitoring poll asks for again and again, kept encoded.

A monitoring agent asks each MBean for the same attributes every few seconds, and most
answers have not changed since the last poll (the Config MBeans, idle services and
destinations).  :class:`ReplyMemo` keeps, per MBean, the last AttributeList it encoded
and the values it held; when the values read now are the same (same Java types), the
kept bytes are sent again.  The values are always read: only their serialisation is
saved, and what is sent is byte for byte what encoding them would give.

Under traffic the counters change between polls (messages in and out, bytes, memory)
while the rest of the answer does not.  With each AttributeList the memo keeps its
*layout* (:class:`_Layout`): the answer's bytes cut around the values that may change
without moving any other byte — a Long or Integer outside the range Java shares
(-128..127: written as new objects, not back-references), one within it that no equal
one comes before (see :func:`layout_key`) and a String (a new handle, whatever its
text).  When values change but the layout key (the names, those values'
Java types and every other value) is the same, only the changed parts are written
between the kept ones.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from broker.protocol import jmxser
from broker.protocol.javaser import (
    SELF,
    STREAM_MAGIC,
    JavaArray,
    JavaObject,
    JBlock,
    ObjectStreamWriter,
    string_record,
)
from broker.protocol.jrmp import encode_returned, encode_returned_by
from broker.protocol.jtypes import JByte, JChar, JInt, JLong, JShort

# Values whose type and equality say everything about their bytes (not float: 0.0 and
# -0.0 are equal but written differently).
_SCALARS = frozenset({str, JChar, bool, int, JInt, JLong, JShort, JByte, type(None)})

# How many answers are kept before the memo starts again (MBeans that went away leave
# theirs behind until then).
LIMIT = 4096


class _Unkeyed(Exception):
    """A value whose bytes its equality does not settle (a float, an unknown type)."""


def _key(value: object) -> object:
    t = type(value)
    if t in _SCALARS:
        return (t, value)
    if t is JavaObject:
        obj: JavaObject = value  # type: ignore[assignment]
        custom = None
        if obj.custom is not None:
            custom = tuple((k, tuple(map(_key, items))) for k, items in obj.custom.items())
        return (t, obj.cls, tuple((k, _key(v)) for k, v in obj.values.items()), custom)
    if t is JavaArray:
        arr: JavaArray = value  # type: ignore[assignment]
        return (t, arr.cls, tuple(map(_key, arr.items)))
    if t is JBlock:
        return (t, value.data)  # type: ignore[attr-defined]
    if value is SELF:
        return (t,)
    if t is dict:
        return (t, tuple((k, _key(v)) for k, v in value.items()))  # type: ignore[attr-defined]
    raise _Unkeyed


def value_key(names: Sequence[str], values: Sequence[object]) -> object | None:
    """What makes the encoding of attributes ``names`` with ``values`` unique: the names,
    the values and the Java type of each, nested values (CompositeData) included (None:
    a value this cannot tell, not to be kept)."""
    types = tuple(map(type, values))
    if _SCALARS.issuperset(types):
        return (tuple(names), types, tuple(values))
    try:
        return tuple(zip(names, map(_key, values), strict=True))
    except _Unkeyed:
        return None


_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# A value type whose bytes can change in place -> how many trailing bytes are the value
# (0: all of them, a String) and what writes them.
_IN_PLACE: dict[type, tuple[int, Callable[[Any], bytes]]] = {
    str: (0, string_record),
    JLong: (8, _I64.pack),
    JInt: (4, _I32.pack),
}


# The values an AttributeList of only these holds has no object inside another: its
# boxed Longs and Integers are the only ones Java shares (back-references) among them.
_FLAT = frozenset({str, JInt, JLong, bool, type(None)})
# Marks a Long or Integer within -128..127 in a layout key of flat values (a str: no
# _key tuple starts with one).
_SMALL = "small"


def layout_key(names: Sequence[str], values: Sequence[object]) -> object | None:
    """What fixes every byte of an AttributeList but the values written in place: the
    names, the type of each in-place value (a String, a Long or Integer beyond -128..127)
    and every other value's own key (None: a value this cannot tell).

    A Long or Integer within -128..127 is one object Java shares: written once, then
    referred to.  Among flat values (:data:`_FLAT`) what its bytes depend on is only
    whether an equal one came before (then a reference to the first, whose bytes are
    fixed) or not (then written in place, as a larger one): the key holds that, not the
    value, so a counter moving within the range keeps its layout.  With a nested value
    (a CompositeData holding boxes of its own) each such value is keyed by itself."""
    parts: list[object] = []
    flat = _FLAT.issuperset(map(type, values))
    firsts: dict[tuple[type, int], int] = {}
    for i, v in enumerate(values):
        t = type(v)
        if t is str:
            parts.append(t)  # a type, where _key gives tuples: the two never collide
        elif t is JLong or t is JInt:
            if not -128 <= v <= 127:  # type: ignore[operator]
                parts.append(t)
            elif flat:
                first = firsts.setdefault((t, v), i)  # type: ignore[arg-type]
                parts.append((_SMALL, t, -1 if first == i else first))
            else:
                parts.append((t, v))
        else:
            try:
                parts.append(_key(v))
            except _Unkeyed:
                return None
    return (tuple(names), tuple(parts))


def _in_place(part: object) -> bool:
    """Whether the value a layout key's ``part`` stands for is written in place."""
    if type(part) is type:
        return True
    return type(part) is tuple and part[0] == _SMALL and part[2] < 0


class _Layout:
    """An AttributeList's bytes cut around its in-place values: ``fixed`` holds the
    bytes before, between and after them, ``slots`` which value goes in each gap and
    its writer."""

    __slots__ = ("key", "fixed", "slots")

    def __init__(self, key: object, names: Sequence[str], values: Sequence[object]) -> None:
        spans: list[tuple[int, int]] = []
        w = ObjectStreamWriter(annotate=True)
        jmxser.write_attribute_list(w, list(zip(names, values, strict=True)), spans)
        out = memoryview(w.out)
        skip = len(STREAM_MAGIC)  # as encode_returned: the stream's first object on
        fixed: list[bytes] = []
        slots: list[tuple[int, Callable[[Any], bytes]]] = []
        at = skip
        for i, (v, (start, end)) in enumerate(zip(values, spans, strict=True)):
            kind = _IN_PLACE.get(type(v)) if _in_place(key[1][i]) else None  # type: ignore[index]
            if kind is None:
                continue
            size, write = kind
            cut = end - size if size else start
            fixed.append(bytes(out[at:cut]))
            slots.append((i, write))
            at = end
        fixed.append(bytes(out[at:]))
        self.key = key
        self.fixed = fixed
        self.slots = slots

    def fill(self, values: Sequence[object]) -> bytes:
        """The AttributeList's bytes with ``values`` (of this layout's key)."""
        fixed = self.fixed
        parts = [fixed[0]]
        for (i, write), after in zip(self.slots, fixed[1:], strict=True):
            parts.append(write(values[i]))
            parts.append(after)
        return b"".join(parts)


class ReplyMemo:
    """The encoded answers last sent, by what they answer (an MBean's name and the call);
    ``limit`` 0 keeps none."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._kept: dict[Hashable, tuple[object, bytes]] = {}
        self._layouts: dict[Hashable, _Layout] = {}
        # (MBean name, id of the names asked for) -> (those names, what the values
        # follow from, the answer): the answers of the MBeans whose values are settled
        # by the configuration (jmx_mbeans.settled), sent without reading them again.
        self._settled: dict[tuple[Hashable, int], tuple[object, object, bytes]] = {}

    def settled(self, slot: Hashable, names: object, stamp: object) -> bytes | None:
        """The answer kept by :meth:`settle` for MBean ``slot`` asked for ``names`` (the
        decoded call's String[], the same object each time a kept call comes again)
        while ``stamp`` is unchanged; None: read the values."""
        hit = self._settled.get((slot, id(names)))
        if hit is not None and hit[0] is names and hit[1] == stamp:
            return hit[2]
        return None

    def settle(self, slot: Hashable, names: object, stamp: object, body: bytes) -> None:
        """Keep ``body``, the answer for ``slot`` and ``names`` with the values ``stamp``
        settles (the names object is held, so its id is not reused meanwhile)."""
        if self.limit <= 0:
            return
        if len(self._settled) >= self.limit:
            self._settled.clear()
        self._settled[(slot, id(names))] = (names, stamp, body)

    def returned(self, slot: Hashable, key: object, encode: Callable[[], bytes]) -> bytes:
        """``encode()`` (:func:`~broker.protocol.jrmp.encode_returned` bytes), kept in
        ``slot`` and reused while ``key`` is the same (None: never kept)."""
        if key is None or self.limit <= 0:
            return encode()
        hit = self._kept.get(slot)
        if hit is not None and hit[0] == key:
            return hit[1]
        body = encode()
        if len(self._kept) >= self.limit:
            self._kept.clear()
        self._kept[slot] = (key, body)
        return body

    def value(self, slot: Hashable, key: object, make: Callable[[], object]) -> bytes:
        """The value ``make()`` gives, encoded or as kept in ``slot`` for ``key``."""
        return self.returned(slot, key, lambda: encode_returned(make()))

    def attribute_list(
        self, slot: Hashable, names: Sequence[str], values: Sequence[object]
    ) -> bytes:
        """An AttributeList of attributes ``names`` with ``values``: as kept, or its
        kept layout filled with the values that changed, or encoded."""
        return self.returned(
            slot, value_key(names, values), lambda: self._layout(slot, names, values)
        )

    def _layout(self, slot: Hashable, names: Sequence[str], values: Sequence[object]) -> bytes:
        key = layout_key(names, values) if self.limit > 0 else None
        if key is None:
            return encode_returned_by(
                lambda w: jmxser.write_attribute_list(w, list(zip(names, values, strict=True)))
            )
        layout = self._layouts.get(slot)
        if layout is None or layout.key != key:
            layout = _Layout(key, names, values)
            if len(self._layouts) >= self.limit:
                self._layouts.clear()
            self._layouts[slot] = layout
        return layout.fill(values)
