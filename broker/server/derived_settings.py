"""What the broker process derives from its properties: the router's settings
(auto-created destinations' attributes, the delivery policy, limits), the largest
packet a connection reads whole, and the memory manager's budget and thresholds.

Read at start-up and again when an administrator changes a property
(:meth:`broker.server.broker.Broker.apply_properties`).
"""

from __future__ import annotations

import os
import socket

from broker import props
from broker.config import BrokerConfig, ConfigError
from broker.core.memory import MemoryManager
from broker.core.router import RouterSettings

# imq.queue.deliverypolicy (administrator guide) as (maxNumActiveConsumers,
# maxNumBackupConsumers) presets for auto-created queues.
DELIVERY_POLICIES = {"single": (1, 0), "failover": (1, -1), "round-robin": (-1, 0)}


def router_settings(c: BrokerConfig) -> RouterSettings:
    """The router's settings under ``c``; raises ConfigError on a bad delivery policy."""
    attrs: dict[str, object] = {}
    for attr, prop in props.AUTOCREATE_DEST_ATTRIBUTES.items():
        if prop.name in c:  # (an unset maxDeliveryCount adds no attribute)
            attrs[attr] = c.get(prop)
    qattrs = dict(attrs)
    qattrs["maxNumActiveConsumers"] = c.get(props.AUTOCREATE_QUEUE_MAX_ACTIVE)
    qattrs["maxNumBackupConsumers"] = c.get(props.AUTOCREATE_QUEUE_MAX_BACKUP)
    policy = (c.get(props.QUEUE_DELIVERY_POLICY) or "").strip().lower()
    if policy:
        if policy not in DELIVERY_POLICIES:
            raise ConfigError(
                f"imq.queue.deliverypolicy: {policy!r} is not one of "
                + ", ".join(DELIVERY_POLICIES)
            )
        active, backup = DELIVERY_POLICIES[policy]
        qattrs["maxNumActiveConsumers"] = active
        qattrs["maxNumBackupConsumers"] = backup
    qattrs["consumerFlowLimit"] = c.get(props.AUTOCREATE_QUEUE_FLOW_LIMIT)
    if c.configured(props.AUTOCREATE_QUEUE_LOCAL_PREFERRED.name):
        qattrs["localDeliveryPreferred"] = c.get(props.AUTOCREATE_QUEUE_LOCAL_PREFERRED)
    tattrs = dict(attrs)
    tattrs["consumerFlowLimit"] = c.get(props.AUTOCREATE_TOPIC_FLOW_LIMIT)
    tattrs["maxNumSharedConsumers"] = c.get(props.AUTOCREATE_TOPIC_MAX_SHARED)
    tattrs["sharedConsumerFlowLimit"] = c.get(props.AUTOCREATE_TOPIC_SHARED_FLOW_LIMIT)
    return RouterSettings(
        autocreate_queue=c.get(props.AUTOCREATE_QUEUE),
        autocreate_topic=c.get(props.AUTOCREATE_TOPIC),
        queue_attributes=qattrs,
        topic_attributes=tattrs,
        producer_batch=c.get(props.PRODUCER_MAX_BATCH),
        max_message_size=c.get(props.MESSAGE_MAX_SIZE),
        system_max_count=c.get(props.SYSTEM_MAX_COUNT),
        system_max_size=c.get(props.SYSTEM_MAX_SIZE),
        broker_name=f"{c.get(props.HOSTNAME) or socket.gethostname()}:"
        f"{c.get(props.PORTMAPPER_PORT)}",
        dmq_truncate_body=c.get(props.DMQ_TRUNCATE_BODY),
        log_dead_messages=c.get(props.LOG_DEAD_MSGS),
        drop_log_interval=float(c.get(props.DROP_LOG_INTERVAL)),
        metrics_topics=c.get(props.METRICS_TOPIC_ENABLED),
        log_topic_capacity=c.get(props.LOG_DESTINATION_CAPACITY),
    )


def frame_limit(c: BrokerConfig) -> int:
    """The largest packet a connection reads whole: imq.message.max_size with room for
    the other packets a client sends (at least 1 MB of it); a larger one is read past and
    answered 423.  Without a message size limit, the largest a packet header can say."""
    max_size = c.get(props.MESSAGE_MAX_SIZE)
    if max_size < 0:
        return props.INT32_MAX
    return max(max_size, 1024 * 1024) + 64 * 1024


def memory_budget(c: BrokerConfig) -> int:
    """The bytes of message bodies the broker holds in memory at most."""
    budget = c.get(props.SYSTEM_MAX_SIZE)
    if budget <= 0:
        budget = c.get(props.MEMORY_LIMIT)
    if budget <= 0:
        # Like the JVM's default heap: a quarter of the machine's memory.
        budget = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    return budget


def memory_manager(c: BrokerConfig) -> MemoryManager:
    """The memory states' manager under ``c``; raises ConfigError on bad thresholds."""
    budget = memory_budget(c)
    thresholds = {lv: c.get(prop) for lv, prop in props.MEMORY_THRESHOLDS.items()}
    counts = {lv: c.get(prop) for lv, prop in props.MEMORY_COUNTS.items()}
    try:
        return MemoryManager(budget, thresholds, counts)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


__all__ = ["DELIVERY_POLICIES", "frame_limit", "memory_budget", "memory_manager", "router_settings"]
