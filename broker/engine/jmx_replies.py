"""The JMX answers a monitoring poll asks for again and again, kept encoded.

A monitoring agent asks each MBean for the same attributes every few seconds, and most
answers have not changed since the last poll (the Config MBeans, idle services and
destinations).  :class:`ReplyMemo` keeps, per MBean, the last AttributeList it encoded
and the values it held; when the values read now are the same (same Java types), the
kept bytes are sent again.  The values are always read: only their serialisation is
saved, and what is sent is byte for byte what encoding them would give.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from broker.protocol import jmxser
from broker.protocol.javaser import SELF, JavaArray, JavaObject, JBlock
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


class ReplyMemo:
    """The encoded answers last sent, by what they answer (an MBean's name and the call);
    ``limit`` 0 keeps none."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._kept: dict[Hashable, tuple[object, bytes]] = {}

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
        """An AttributeList of attributes ``names`` with ``values``, encoded or as kept."""
        return self.returned(
            slot,
            value_key(names, values),
            lambda: encode_returned_by(
                lambda w: jmxser.write_attribute_list(w, list(zip(names, values, strict=True)))
            ),
        )
