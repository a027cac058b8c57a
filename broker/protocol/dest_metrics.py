"""OpenMQ's ``com.sun.messaging.jmq.util.DestMetricsCounters`` as Java serialises it.

A ``java.util.HashMap`` subclass (String keys to Integer or Long values) with one field of
its own, ``long timeStamp``.  Two replies carry one: the admin GET_METRICS of a
destination (broker/server/admin_service/metrics.py) and a BROWSE_REPLY to a BROWSE that
asked for ``JMQMetrics`` (broker/engine/messages.py).  Written byte for byte as JDK 17
writes OpenMQ's own (tests/test_metrics_events.py holds the JDK's bytes).
"""

from __future__ import annotations

from collections.abc import Mapping

from . import javaser as _js

DEST_METRICS_COUNTERS = "com.sun.messaging.jmq.util.DestMetricsCounters"
DEST_METRICS_UID = 8342915311065017568


class _HashMapSubclassWriter(_js.ObjectStreamWriter):
    """javaser's writer plus one shape it lacks: a HashMap subclass with its own fields
    (ObjectOutputStream writes the HashMap's data first, then the subclass's)."""

    def dest_metrics(self, values: Mapping[str, object], timestamp: int) -> None:
        self.out.append(_js.TC_OBJECT)
        self.out.append(_js.TC_CLASSDESC)
        self._classes[DEST_METRICS_COUNTERS] = self._assign()
        self.utf(DEST_METRICS_COUNTERS)
        self.out += _js._I64.pack(DEST_METRICS_UID)
        self.out.append(_js.SC_SERIALIZABLE)
        self.out += _js._I16.pack(1)
        self.out += b"J"
        self.utf("timeStamp")
        self.out.append(_js.TC_ENDBLOCKDATA)
        self.classdesc(_js._HASHMAP)
        self._assign()  # the object itself
        capacity, threshold, order = _js._hashmap_layout(list(values))
        self.out += _js._F32.pack(0.75) + _js._I32.pack(threshold)
        self.out += bytes((_js.TC_BLOCKDATA, 8)) + _js._I32.pack(capacity)
        self.out += _js._I32.pack(len(values))
        for key in order:
            self.key(key)
            self.value(values[key])
        self.out.append(_js.TC_ENDBLOCKDATA)
        self.out += _js._I64.pack(timestamp)


def encode_dest_metrics_map(values: Mapping[str, object], timestamp: int) -> bytes:
    """One serialised ``DestMetricsCounters`` holding ``values`` (already boxed: JInt or
    JLong, in the order OpenMQ puts them) and ``timeStamp`` = ``timestamp`` (ms)."""
    writer = _HashMapSubclassWriter()
    writer.dest_metrics(values, timestamp)
    return bytes(writer.out)
