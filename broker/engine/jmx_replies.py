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
from broker.protocol.jrmp import encode_returned
from broker.protocol.jtypes import JByte, JChar, JInt, JLong, JShort

# Values whose type and equality say everything about their bytes (not float: 0.0 and
# -0.0 are equal but written differently; not the mutable or structured ones).
_SCALARS = frozenset({str, JChar, bool, int, JInt, JLong, JShort, JByte, type(None)})

# How many answers are kept before the memo starts again (MBeans that went away leave
# theirs behind until then).
LIMIT = 4096


def scalar_key(pairs: Sequence[tuple[str, object]]) -> tuple[object, ...] | None:
    """What makes ``pairs``' encoding unique: names, value types and values (None: a value
    that is not a plain scalar, not to be kept)."""
    key: list[object] = []
    for name, value in pairs:
        t = type(value)
        if t not in _SCALARS:
            return None
        key += (name, t, value)
    return tuple(key)


class ReplyMemo:
    """The encoded answers last sent, by what they answer (an MBean's name and the call);
    ``limit`` 0 keeps none."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._kept: dict[Hashable, tuple[object, bytes]] = {}

    def returned(self, slot: Hashable, key: object, make: Callable[[], object]) -> bytes:
        """The :func:`~broker.protocol.jrmp.encode_returned` bytes of ``make()``, kept in
        ``slot`` and reused while ``key`` is the same (None: never kept)."""
        if key is None or self.limit <= 0:
            return encode_returned(make())
        hit = self._kept.get(slot)
        if hit is not None and hit[0] == key:
            return hit[1]
        body = encode_returned(make())
        if len(self._kept) >= self.limit:
            self._kept.clear()
        self._kept[slot] = (key, body)
        return body

    def attribute_list(self, slot: Hashable, pairs: Sequence[tuple[str, object]]) -> bytes:
        """An AttributeList of ``pairs`` (name, value), encoded or as kept."""
        return self.returned(
            slot,
            scalar_key(pairs),
            lambda: jmxser.attribute_list([jmxser.attribute(n, v) for n, v in pairs]),
        )
