"""The broker's own topics, by name: the metrics topics (``mq.metrics.*``) and the log
topic (``mq.log.broker``), and the attributes the router makes them with.

Apart from :mod:`broker.core.monitoring`, which builds their maps from the router's
state, so the router can make them without importing what reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, Status

from .errors import RouterError

if TYPE_CHECKING:
    from .destination import Destination

METRICS_PREFIX = "mq.metrics."
BROKER_TOPIC = "mq.metrics.broker"
JVM_TOPIC = "mq.metrics.jvm"
DESTINATION_LIST_TOPIC = "mq.metrics.destination_list"
QUEUE_PREFIX = "mq.metrics.destination.queue."
TOPIC_PREFIX = "mq.metrics.destination.topic."

# What a metrics topic is made with: it is this broker's alone (not shared in a
# cluster), takes no producers, and its maps, which expire, never go to the DMQ.
TOPIC_ATTRIBUTES = {"isLocalOnly": True, "maxNumProducers": 0, "useDMQ": False}

# The map messages' priority, as OpenMQ's broker sends them.
PRIORITY = 5

# The broker's log as messages (imq.log.destination.*, broker/server/log_topic.py).
LOG_TOPIC = "mq.log.broker"


def log_topic_attributes(capacity: int) -> dict[str, object]:
    """What ``mq.log.broker`` is made with, as OpenMQ's log handler sets it: the metrics
    topics' attributes, holding ``capacity`` messages at most (the oldest dropped)."""
    return {**TOPIC_ATTRIBUTES, "maxNumMsgs": capacity, "limitBehavior": "REMOVE_OLDEST"}


class MetricsTopic(NamedTuple):
    """What a metrics topic's name asks for: ``kind`` is ``broker``, ``jvm``,
    ``destination_list`` or ``destination``; a destination's are ``target`` (its name)
    and ``target_type`` (DEST_QUEUE or DEST_TOPIC)."""

    kind: str
    target: str | None = None
    target_type: int = 0


def parse_topic(name: str) -> MetricsTopic | None:
    """The metrics topic ``name`` names, or None when it names none (``mq.metrics.x``,
    ``mq.metrics.broker.x``, ``mq.metrics.destination.queue.`` without a name)."""
    if not name.startswith(METRICS_PREFIX):
        return None
    if name == BROKER_TOPIC:
        return MetricsTopic("broker")
    if name == JVM_TOPIC:
        return MetricsTopic("jvm")
    if name == DESTINATION_LIST_TOPIC:
        return MetricsTopic("destination_list")
    for prefix, dest_type in ((QUEUE_PREFIX, DEST_QUEUE), (TOPIC_PREFIX, DEST_TOPIC)):
        if name.startswith(prefix) and len(name) > len(prefix):
            return MetricsTopic("destination", name[len(prefix) :], dest_type)
    return None


def is_metrics_topic(dest: Destination) -> bool:
    """Whether ``dest`` is one of the metrics topics."""
    return not dest.is_queue and dest.name.startswith(METRICS_PREFIX)


def internal_attributes(
    name: str, is_topic: bool, *, enabled: bool, may_watch: Callable[[str, int], bool]
) -> dict[str, object]:
    """The attributes a destination named ``mq.*`` (not the DMQ) is auto-created with:
    only a metrics topic may be, and only while ``enabled`` (imq.metrics.topic.enabled).
    Raises RouterError otherwise, with the reason.  ``may_watch(name, dest_type)`` says
    whether a destination may be watched: it exists or may be auto-created (a
    destination's metrics topic is refused otherwise, as OpenMQ's broker refuses it)."""
    # OpenMQ's broker answers an mq.* queue 500 and a topic it has no metrics for 400
    # (B2084), in these words.
    if not is_topic:
        raise RouterError(
            Status.ERROR,
            f"Only topics are supported for monitoring ({name}: names starting with "
            "mq. are reserved for the broker)",
        )
    topic = parse_topic(name)
    if topic is None:
        raise RouterError(
            Status.BAD_REQUEST,
            f"[B2084]: Unknown monitor destination name {name} [Topic] (the metrics "
            "topics are mq.metrics.broker, mq.metrics.jvm, mq.metrics.destination_list, "
            "mq.metrics.destination.queue.<name> and mq.metrics.destination.topic.<name>)",
        )
    if not enabled:
        raise RouterError(
            Status.ERROR, f"{name}: the metrics topics are off (imq.metrics.topic.enabled=false)"
        )
    if topic.kind == "destination" and not may_watch(topic.target or "", topic.target_type):
        kind = "queue" if topic.target_type == DEST_QUEUE else "topic"
        raise RouterError(
            Status.FORBIDDEN,
            f"{name}: {kind} {topic.target} may not be auto-created, so it is not monitored",
        )
    return dict(TOPIC_ATTRIBUTES)


__all__ = [
    "BROKER_TOPIC",
    "DESTINATION_LIST_TOPIC",
    "JVM_TOPIC",
    "LOG_TOPIC",
    "METRICS_PREFIX",
    "PRIORITY",
    "QUEUE_PREFIX",
    "TOPIC_ATTRIBUTES",
    "TOPIC_PREFIX",
    "MetricsTopic",
    "internal_attributes",
    "is_metrics_topic",
    "log_topic_attributes",
    "parse_topic",
]
