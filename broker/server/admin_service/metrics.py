"""Admin GET_METRICS (52) and RESET_BROKER (84), and the Java shapes of their replies.

GET_METRICS (OpenMQ's ``GetMetricsHandler``):

* ``JMQDestination`` (+ ``JMQDestType``; a missing type means not-a-queue, as OpenMQ's
  ``DestType.isQueue(0)``): the destination's ``DestMetricsCounters``, reply property
  ``JMQBodyType`` = ``"DESTINATION"``;
* ``JMQServiceName``: that service's ``MetricCounters``, ``JMQBodyType`` = ``"SERVICE"``;
* neither: the broker's total ``MetricCounters`` (the sum over its services).  OpenMQ
  sets no ``JMQBodyType`` on this reply, and imqcmd reads a missing body type as a
  ``MetricCounters``; so neither do we.

An unknown destination or service is 404.  RESET_BROKER with ``JMQResetType`` missing,
empty or the string ``JMQMetrics`` (what imqcmd's ``reset bkr -t metrics`` sends; ``"metrics"`` is
accepted too) zeroes the service and destination counters; any other type is 500.

Both ``com.sun.messaging.jmq.util`` classes are written byte for byte as JDK 17 writes
OpenMQ's own (same serialVersionUIDs, fields and superclasses; tests hold JDK hex):
``MetricCounters`` is a plain Serializable class; ``DestMetricsCounters`` extends
``java.util.HashMap`` (its values are Integer or Long entries under fixed keys, put in
the order OpenMQ's constructor and ``Destination.getMetrics()`` put them) and adds one
field, ``long timeStamp``.

The handlers take ``(connection, request properties)`` and return ``(reply properties,
body)`` like the others (``handler.py`` holds the table); errors are raised as
``RouterError`` (status, reason), which the admin handler turns into the reply's
JMQStatus/JMQErrorString.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.core import queries
from broker.core.admin_views import broker_counters, destination_metric_values
from broker.core.errors import RouterError
from broker.core.message import BODIES
from broker.core.metrics import (
    DEST_METRICS_KEYS,
    reset_destination,
)
from broker.protocol.dest_metrics import encode_dest_metrics_map
from broker.protocol.javaser import JavaClass, JavaObject, encode_object
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_BODIES_IN_MEMORY,
    JMQ_BODY_TYPE,
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_GC_PAUSE_MAX,
    JMQ_LOOP_LAG_MAX,
    JMQ_LOOP_LAG_P99,
    JMQ_METRICS,
    JMQ_PAGED_MESSAGE_BYTES,
    JMQ_PAGED_MESSAGES,
    JMQ_PAGED_OUT,
    JMQ_READ_BACK,
    JMQ_RESET_TYPE,
    JMQ_SERVICE_NAME,
)
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, Status

if TYPE_CHECKING:
    from ..broker import Broker
    from ..connection import ClientConnection

log = logging.getLogger("broker.admin")


# JMQResetType value that imqcmd sends (MessageType.JMQ_METRICS).
RESET_METRICS = JMQ_METRICS

UTIL = "com.sun.messaging.jmq.util."

METRIC_COUNTERS = JavaClass(
    UTIL + "MetricCounters",
    -6326807264269230289,
    (
        ("J", "messagesIn", None),
        ("J", "messagesOut", None),
        ("J", "messageBytesIn", None),
        ("J", "messageBytesOut", None),
        ("J", "packetsIn", None),
        ("J", "packetsOut", None),
        ("J", "packetBytesIn", None),
        ("J", "packetBytesOut", None),
        ("J", "totalMemory", None),
        ("J", "freeMemory", None),
        ("I", "threadsActive", None),
        ("I", "threadsHighWater", None),
        ("I", "threadsLowWater", None),
        ("J", "timeStamp", None),
        ("I", "nConnections", None),
    ),
)

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def encode_metric_counters(values: Mapping[str, object]) -> bytes:
    """A GET_METRICS SERVICE/broker reply body: one serialised ``MetricCounters``."""
    return encode_object(JavaObject(METRIC_COUNTERS, dict(values)))


def encode_dest_metrics(values: Mapping[str, int], timestamp: int) -> bytes:
    """A GET_METRICS DESTINATION reply body: one serialised ``DestMetricsCounters``.

    ``values`` are by OpenMQ key name (:data:`DEST_METRICS_KEYS`; a missing key is 0)."""
    boxed: dict[str, object] = {}
    for key, code in DEST_METRICS_KEYS:
        value = int(values.get(key, 0))
        if code == "I":
            value = max(_INT_MIN, min(_INT_MAX, value))  # Java's (int) of a huge count
            boxed[key] = JInt(value)
        else:
            boxed[key] = JLong(value)
    return encode_dest_metrics_map(boxed, timestamp)


# --------------------------------------------------------------------------------------
# What the broker reports
# --------------------------------------------------------------------------------------


def reset_metrics(broker: Broker) -> None:
    """Zero every service's and destination's counters (RESET_BROKER metrics)."""
    for svc in broker.services:
        svc.metrics.reset()
    router = broker.router
    for dest in queries.destinations(router):
        reset_destination(dest)
    events = broker.events
    if events is not None:
        events.counters_reset()


# --------------------------------------------------------------------------------------
# The admin commands
# --------------------------------------------------------------------------------------

Result = tuple[dict[str, object], bytes]


def get_metrics(conn: ClientConnection, props: dict) -> Result:
    broker = conn.broker
    name = props.get(JMQ_DESTINATION)
    if isinstance(name, str):
        dtype = props.get(JMQ_DEST_TYPE)
        dtype = int(dtype) if isinstance(dtype, int) else 0  # type: ignore[arg-type]
        is_queue = bool(dtype & DEST_QUEUE)
        dest = conn.router.lookup(name, DEST_QUEUE if is_queue else DEST_TOPIC)
        if dest is None:
            kind = "queue" if is_queue else "topic"
            raise RouterError(Status.NOT_FOUND, f"{kind} {name} not found")
        values, paged, paged_bytes = destination_metric_values(conn.router, dest)
        body = encode_dest_metrics(values, int(time.time() * 1000))
        # Ours (OpenMQ's tools ignore unknown properties): the count too.
        return {
            JMQ_BODY_TYPE: "DESTINATION",
            JMQ_PAGED_MESSAGES: JInt(paged),
            JMQ_PAGED_MESSAGE_BYTES: JLong(paged_bytes),
        }, body
    service = props.get(JMQ_SERVICE_NAME)
    if isinstance(service, str):
        chosen = [s for s in broker.services if s.name == service]
        if not chosen:
            raise RouterError(Status.NOT_FOUND, f"service {service} not found")
        return {JMQ_BODY_TYPE: "SERVICE"}, encode_metric_counters(broker_counters(broker, chosen))
    # Ours, beside OpenMQ's MetricCounters (whose serialized shape is fixed): the last
    # window's event-loop lag in microseconds; OpenMQ's tools ignore unknown properties.
    # And paging: bodies in memory, how many were paged out and read back so far.
    reply: dict[str, object] = {JMQ_BODIES_IN_MEMORY: JLong(BODIES.bytes)}
    lag = broker.loop_lag
    if lag is not None:
        reply.update(
            {
                JMQ_LOOP_LAG_MAX: JLong(round(lag.lag.max * 1e6)),
                JMQ_LOOP_LAG_P99: JLong(round(lag.lag.p99 * 1e6)),
                JMQ_GC_PAUSE_MAX: JLong(round(lag.gc_max * 1e6)),
            }
        )
    if broker.paging is not None:
        st = broker.paging.pager.stats
        reply.update({JMQ_PAGED_OUT: JLong(st.paged_out), JMQ_READ_BACK: JLong(st.read_back)})
    return reply, encode_metric_counters(broker_counters(broker))


def reset_broker(conn: ClientConnection, props: dict) -> Result:
    kind = props.get(JMQ_RESET_TYPE)
    if kind is None or kind == "" or kind == RESET_METRICS or str(kind).lower() == "metrics":
        reset_metrics(conn.broker)
        log.info("metrics reset by %s (%s)", conn.user, conn.peer)
        return {}, b""
    raise RouterError(Status.ERROR, f"invalid reset type {kind}")
