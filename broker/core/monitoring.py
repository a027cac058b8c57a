"""The metrics topics: OpenMQ's message-based monitoring (``mq.metrics.*``).

A client that subscribes to one of these topics gets a MapMessage from the broker every
``imq.metrics.topic.interval`` seconds, and one at once when it subscribes:

* ``mq.metrics.broker`` -- connections, messages and packets in and out, messages held,
  destinations (:func:`broker_map`);
* ``mq.metrics.jvm`` -- memory (:func:`jvm_map`; the broker's process, see there);
* ``mq.metrics.destination_list`` -- every destination, each a nested map of its type,
  name and whether it is temporary (:func:`destination_list_map`);
* ``mq.metrics.destination.queue.<name>`` / ``mq.metrics.destination.topic.<name>`` --
  that destination's ``DestMetricsCounters`` (:func:`destination_map`).

Keys and value types are the stock OpenMQ 6.9 broker's (what its metrics messages
carry, seen by the stock Java client).  Every message has the string properties
``type`` (the topic's name), ``brokerAddress`` (``mq://ip:port/``) and ``brokerHost``,
the Long ``timestamp`` and the Integer ``brokerPort`` (:func:`metrics_message`).

Everything here is pure: the builders read the router through its named queries
(:mod:`broker.core.queries`) and counters (:mod:`broker.core.metrics`); the server's
publisher (broker/server/metrics_topics.py) decides when and routes the messages.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, NamedTuple

from broker.protocol.destname import INTERNAL_PREFIX
from broker.protocol.javaser import encode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import VH_DESTINATION, VH_DESTINATION_CLASS, Packet, build_packet
from broker.protocol.types import (
    BROKER_PREFIX,
    DMQ_NAME,
    FLAG_P,
    TOPIC_CLASS,
    PacketType,
)

from . import queries
from .message import Message
from .metrics import DEST_METRICS_KEYS, destination_metrics

# The topics' names and attributes are topicnames.py's (the router makes the topics).
from .topicnames import (
    BROKER_TOPIC,
    DESTINATION_LIST_TOPIC,
    JVM_TOPIC,
    LOG_TOPIC,
    METRICS_PREFIX,
    PRIORITY,
    QUEUE_PREFIX,
    TOPIC_ATTRIBUTES,
    TOPIC_PREFIX,
    MetricsTopic,
    internal_attributes,
    is_metrics_topic,
    log_topic_attributes,
    parse_topic,
)

if TYPE_CHECKING:
    from .destination import Destination
    from .metrics import ServiceCounters
    from .router import MessageRouter

# -- the maps -------------------------------------------------------------------------


def _listed(dest: Destination, hidden_owners: Collection[int]) -> bool:
    # OpenMQ leaves out its internal destinations (mq.*, but the DMQ), its admin ones
    # and the reply queues of administration tools.
    name = dest.name
    if name.startswith(INTERNAL_PREFIX) and name != DMQ_NAME:
        return False
    if name.startswith(BROKER_PREFIX):
        return False
    return dest.temporary_owner is None or dest.temporary_owner not in hidden_owners


def listed_destinations(
    router: MessageRouter, hidden_owners: Collection[int] = ()
) -> list[Destination]:
    """The destinations the metrics maps count and list: not the metrics topics, the
    broker's own, nor the temporary ones of the connections ``hidden_owners`` names
    (administration tools')."""
    return [d for d in queries.destinations(router) if _listed(d, hidden_owners)]


def broker_map(
    router: MessageRouter,
    counters: ServiceCounters,
    connections: int,
    hidden_owners: Collection[int] = (),
) -> dict[str, object]:
    """``mq.metrics.broker``: the broker's traffic (``counters``: every service's
    total), its ``connections``, the messages it holds and its destinations; all Long."""
    totals = router.totals
    return {
        "numConnections": JLong(connections),
        "numMsgsIn": JLong(counters.messages_in),
        "numMsgsOut": JLong(counters.messages_out),
        "numMsgs": JLong(totals.count),
        "msgBytesIn": JLong(counters.message_bytes_in),
        "msgBytesOut": JLong(counters.message_bytes_out),
        "numPktsIn": JLong(counters.packets_in),
        "numPktsOut": JLong(counters.packets_out),
        "pktBytesIn": JLong(counters.packet_bytes_in),
        "pktBytesOut": JLong(counters.packet_bytes_out),
        "totalMsgBytes": JLong(totals.bytes),
        "numDestinations": JLong(len(listed_destinations(router, hidden_owners))),
    }


class ProcessMemory(NamedTuple):
    """The broker's memory figures for ``mq.metrics.jvm`` (bytes)."""

    # The process's resident memory: what it holds now (Java: the heap it has).
    total: int
    # The part of it not holding messages (Java: the heap not in use).
    free: int
    # The budget the memory states are measured against (Java: the largest heap).
    max: int


def jvm_map(memory: ProcessMemory) -> dict[str, object]:
    """``mq.metrics.jvm``: freeMemory, maxMemory and totalMemory, all Long.  A Python
    broker has no JVM heap; the figures are the process's (see :class:`ProcessMemory`),
    so ``totalMemory - freeMemory`` is the message memory the memory states count, and
    its share of ``maxMemory`` is theirs, as used heap over max heap is OpenMQ's."""
    return {
        "freeMemory": JLong(memory.free),
        "maxMemory": JLong(memory.max),
        "totalMemory": JLong(memory.total),
    }


def destination_list_map(
    router: MessageRouter, hidden_owners: Collection[int] = ()
) -> dict[str, object]:
    """``mq.metrics.destination_list``: for each listed destination, under the name of
    its metrics topic, a map of ``type`` (``queue`` or ``topic``), ``name`` and
    ``isTemporary`` (Boolean)."""
    out: dict[str, object] = {}
    for dest in listed_destinations(router, hidden_owners):
        prefix, kind = (QUEUE_PREFIX, "queue") if dest.is_queue else (TOPIC_PREFIX, "topic")
        out[prefix + dest.name] = {
            "type": kind,
            "name": dest.name,
            "isTemporary": dest.is_temporary,
        }
    return out


def destination_map(dest: Destination) -> dict[str, object]:
    """``mq.metrics.destination.queue|topic.<name>``: the destination's
    ``DestMetricsCounters``, each value boxed as OpenMQ boxes it (Integer or Long)."""
    values = destination_metrics(dest)
    return {key: (JLong if code == "J" else JInt)(values[key]) for key, code in DEST_METRICS_KEYS}


def topic_map(
    router: MessageRouter,
    topic: MetricsTopic,
    counters: ServiceCounters,
    connections: int,
    memory: ProcessMemory,
    hidden_owners: Collection[int] = (),
) -> dict[str, object] | None:
    """The map for one metrics topic now; None when there is nothing to say (the
    monitored destination does not exist)."""
    if topic.kind == "broker":
        return broker_map(router, counters, connections, hidden_owners)
    if topic.kind == "jvm":
        return jvm_map(memory)
    if topic.kind == "destination_list":
        return destination_list_map(router, hidden_owners)
    assert topic.target is not None
    dest = router.lookup(topic.target, topic.target_type)
    return destination_map(dest) if dest is not None else None


# -- the message ----------------------------------------------------------------------


class BrokerAddress(NamedTuple):
    """Where the broker is, as its metrics messages say: ``brokerAddress`` is
    ``mq://<ip>:<port>/``, ``brokerHost`` ``host``, ``brokerPort`` ``port`` (the port
    mapper's)."""

    ip: str
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"mq://{self.ip}:{self.port}/"


def metrics_message(
    name: str,
    values: dict[str, object],
    address: BrokerAddress,
    *,
    now: int,
    sequence: int,
    ip_field: bytes,
    persistent: bool = False,
    ttl_ms: int = 300_000,
) -> Message:
    """The MapMessage for metrics topic ``name``: ``values`` as a serialised Hashtable
    (a nested dict as a nested Hashtable), priority 5, expiring ``ttl_ms`` after ``now``
    (0: never), with the ``type``/``timestamp``/``broker*`` properties.  Its
    JMSMessageID is made of ``now``, ``ip_field`` (16 bytes), port 0 and ``sequence``."""
    properties = {
        "type": name,
        "timestamp": JLong(now),
        "brokerAddress": address.url,
        "brokerHost": address.host,
        "brokerPort": JInt(address.port),
    }
    body = encode_hashtable(values, nested=True)
    return _topic_map_message(name, properties, body, now, sequence, ip_field, persistent, ttl_ms)


def log_message(
    level: str,
    text: str,
    broker: str,
    instance: str,
    *,
    now: int,
    sequence: int,
    ip_field: bytes,
    persistent: bool = False,
    ttl_ms: int = 300_000,
) -> Message:
    """The MapMessage of one log record on ``mq.log.broker``, shaped as OpenMQ's
    broker sends it: ``level`` (its OpenMQ name) and ``text`` in the map; ``broker``
    (host:port), ``brokerInstance``, ``type`` (the topic) and ``timestamp`` properties;
    priority 5, expiring ``ttl_ms`` after ``now`` (0: never)."""
    properties = {
        "broker": broker,
        "brokerInstance": instance,
        "type": LOG_TOPIC,
        "timestamp": JLong(now),
    }
    body = encode_hashtable({"level": level, "text": text})
    return _topic_map_message(
        LOG_TOPIC, properties, body, now, sequence, ip_field, persistent, ttl_ms
    )


def _topic_map_message(
    topic: str,
    properties: dict[str, object],
    body: bytes,
    now: int,
    sequence: int,
    ip_field: bytes,
    persistent: bool,
    ttl_ms: int,
) -> Message:
    """A MapMessage the broker publishes on ``topic`` itself (metrics, log): priority 5,
    expiring ``ttl_ms`` after ``now`` (0: never); its JMSMessageID made of ``now``,
    ``ip_field``, port 0 and ``sequence``."""
    raw = build_packet(
        PacketType.MAP_MESSAGE,
        props=properties,
        body=body,
        flags=FLAG_P if persistent else 0,
        fields={VH_DESTINATION: topic, VH_DESTINATION_CLASS: TOPIC_CLASS},
        priority=PRIORITY,
        expiration=now + ttl_ms if ttl_ms > 0 else 0,
        timestamp=now,
        ip=ip_field,
        port=0,
        sequence=sequence & 0x7FFFFFFF,
    )
    return Message(Packet(raw), topic, 0)


# -- the periodic report in the broker log (imq.metrics.interval) -----------------------


def report_text(
    now: ServiceCounters,
    before: ServiceCounters,
    seconds: float,
    connections: int,
    memory: ProcessMemory,
    threads: tuple[int, int, int],
) -> str:
    """The broker log's metrics report, laid out as OpenMQ's: totals since the start
    (or the last reset), rates since the previous report (``before``, ``seconds`` ago),
    memory (``Memory:`` where OpenMQ says ``JVM Heap:``) and ``threads`` as (active,
    low, high)."""
    secs = max(seconds, 0.001)

    def rate(n: int, b: int) -> int:
        # A counter below its previous value was reset: count from zero.
        return int((n - b if n >= b else n) / secs)

    active, low, high = threads
    return (
        f"\nConnections: {connections}    Memory: {memory.total} bytes ({memory.free} free)"
        f" Threads: {active} ({low}-{high})\n"
        f"      In: {now.messages_in} msgs ({now.message_bytes_in} bytes)"
        f"  {now.packets_in} pkts ({now.packet_bytes_in} bytes)\n"
        f"     Out: {now.messages_out} msgs ({now.message_bytes_out} bytes)"
        f"  {now.packets_out} pkts ({now.packet_bytes_out} bytes)\n"
        f" Rate In: {rate(now.messages_in, before.messages_in)} msgs/sec"
        f" ({rate(now.message_bytes_in, before.message_bytes_in)} bytes/sec)"
        f"  {rate(now.packets_in, before.packets_in)} pkts/sec"
        f" ({rate(now.packet_bytes_in, before.packet_bytes_in)} bytes/sec)\n"
        f"Rate Out: {rate(now.messages_out, before.messages_out)} msgs/sec"
        f" ({rate(now.message_bytes_out, before.message_bytes_out)} bytes/sec)"
        f"  {rate(now.packets_out, before.packets_out)} pkts/sec"
        f" ({rate(now.packet_bytes_out, before.packet_bytes_out)} bytes/sec)"
    )


__all__ = [
    "BROKER_TOPIC",
    "DESTINATION_LIST_TOPIC",
    "JVM_TOPIC",
    "LOG_TOPIC",
    "METRICS_PREFIX",
    "QUEUE_PREFIX",
    "TOPIC_ATTRIBUTES",
    "TOPIC_PREFIX",
    "BrokerAddress",
    "MetricsTopic",
    "ProcessMemory",
    "broker_map",
    "destination_list_map",
    "destination_map",
    "internal_attributes",
    "is_metrics_topic",
    "jvm_map",
    "listed_destinations",
    "log_message",
    "log_topic_attributes",
    "metrics_message",
    "parse_topic",
    "report_text",
    "topic_map",
]
