"""What the administration tools read of the broker: the values of imqcmd's ``list``,
``query`` and ``metrics`` replies (GET_DESTINATIONS' DestinationInfo fields, GET_METRICS'
counters), computed once here for the admin service (broker/server/admin_service) and the
JMX MBeans (broker/engine/jmx_mbeans.py), so both answer the same."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from broker.core import queries
from broker.core.message import BODIES
from broker.core.metrics import ServiceCounters, consumer_counts, destination_metrics
from broker.core.monitoring import is_metrics_topic
from broker.protocol import dest_attributes as dattrs
from broker.protocol.admin_info import destination_info as destination_info_object
from broker.protocol.admin_types import ADMIN_QUEUES
from broker.protocol.javaser import JavaObject
from broker.protocol.types import DestType

if TYPE_CHECKING:
    from broker.core.destination import Destination
    from broker.core.router import MessageRouter


def flag(value: object, default: bool) -> bool:
    """A destination attribute read as a boolean ("true" in any case)."""
    if isinstance(value, bool):
        return value
    if value is None:
        return default
    return str(value).strip().lower() == "true"


# DestinationInfo.type is the full type less these (GetDestinationsHandler): TEMP, DMQ and
# the queue/topic bits stay, so imqcmd can hide temporaries and skip the DMQ.
_DEST_PRIVATE_BITS = int(DestType.INTERNAL | DestType.AUTO | DestType.ADMIN)


def destination_info(dest: Destination, delayed: list[int], held: list[int]) -> JavaObject:
    """A ``DestinationInfo`` for GET_DESTINATIONS (sizes in bytes, -1 = unlimited).

    ``held``: [count, bytes] of the messages sent to it in open transactions, which
    OpenMQ counts in the destination already (nMessages, nTxnMessages and UnAck: imqcmd
    shows Count = nMessages - nTxnMessages), and ``delayed`` those in delivery delay."""
    _all, active, backups = consumer_counts(dest)
    if dest.is_queue:
        cdp = (
            dattrs.CDP_LOCAL_PREFERRED
            if flag(dest.attributes.get("localDeliveryPreferred"), False)
            else dattrs.CDP_DISTRIBUTED
        )
    else:
        cdp = dattrs.CDP_NA
    uris = dest.attributes.get("XMLSchemaURIList")
    full = dest.dest_type | (int(DestType.AUTO) if dest.auto else 0)
    return destination_info_object(
        nMessages=dest.msg_count + held[0],
        nMessageBytes=dest.msg_bytes + held[1],
        nConsumers=active + backups,
        naConsumers=active,
        nfConsumers=backups,
        autocreated=bool(dest.auto or dest.is_dmq or dest.is_temporary),
        destState=int(dest.state),
        name=dest.name,
        type=full & ~_DEST_PRIVATE_BITS,
        fulltype=full,
        maxMessages=dest.limit("maxNumMsgs"),
        maxMessageBytes=dest.limit("maxTotalMsgBytes"),
        maxMessageSize=dest.limit("maxBytesPerMsg"),
        destScope=0 if flag(dest.attributes.get("isLocalOnly"), False) else 1,
        destLimitBehavior=int(dest.limit_behavior),
        maxPrefetch=dest.limit("consumerFlowLimit"),
        destCDP=cdp,
        maxActiveConsumers=dest.limit("maxNumActiveConsumers") if dest.is_queue else -1,
        maxFailoverConsumers=dest.limit("maxNumBackupConsumers", 0) if dest.is_queue else 0,
        maxProducers=dest.limit("maxNumProducers"),
        maxNumSharedConsumers=dest.limit("maxNumSharedConsumers"),
        sharedConsumerFlowLimit=dest.limit("sharedConsumerFlowLimit", 5),
        useDMQ=False if dest.is_dmq else flag(dest.attributes.get("useDMQ"), True),
        nInDelayMessageBytes=delayed[1],
        **destination_held_counts(dest, delayed, held),
        validateXMLSchemaEnabled=flag(dest.attributes.get("validateXMLSchemaEnabled"), False),
        XMLSchemaUriList=str(uris) if uris else None,
        reloadXMLSchemaOnFailure=flag(dest.attributes.get("reloadXMLSchemaOnFailure"), False),
    )


def destination_held_counts(
    dest: Destination, delayed: list[int], held: list[int]
) -> dict[str, int]:
    """The ``DestinationInfo`` fields of what ``dest`` holds besides what waits (in open
    transactions, delayed, unacknowledged) and its producers; what the JMX Destination
    Monitor reads of the DestinationInfo (``delayed``/``held`` as for
    :func:`destination_info`)."""
    pending = queries.waiting_count(dest)
    return {
        "nTxnMessages": held[0],
        "nTxnMessageBytes": held[1],
        "nProducers": len(dest.producers),
        "nUnackMessages": max(0, dest.msg_count - pending - delayed[0]) + held[0],
        "nInDelayMessages": delayed[0],
    }


def listed_by_admin(router: MessageRouter) -> list[Destination]:
    """The destinations imqcmd's ``list dst`` (and JMX's DestinationManager) show."""
    return [d for d in queries.destinations(router) if is_listed_by_admin(d)]


def is_listed_by_admin(dest: Destination) -> bool:
    """Whether :func:`listed_by_admin` lists ``dest``."""
    # The metrics topics are the broker's: OpenMQ lists them neither (a query by name
    # shows one).
    return dest.name not in ADMIN_QUEUES and not is_metrics_topic(dest)


def destination_info_values(
    router: MessageRouter,
    dest: Destination,
    delayed_by: queries.DestCounts | None = None,
    held_by: queries.DestCounts | None = None,
) -> dict[str, Any]:
    """The ``DestinationInfo`` fields of one destination, as GET_DESTINATIONS sends them;
    ``delayed_by``/``held_by``: queries.delayed_by_destination and held_in_transactions
    when the caller has them already (a reader of several destinations' figures)."""
    delayed, held = _delayed_and_held(router, dest, delayed_by, held_by)
    return dict(destination_info(dest, delayed, held).values)


def destination_held_values(
    router: MessageRouter,
    dest: Destination,
    delayed_by: queries.DestCounts | None = None,
    held_by: queries.DestCounts | None = None,
) -> dict[str, int]:
    """:func:`destination_held_counts` of one destination (the arguments as for
    :func:`destination_info_values`)."""
    delayed, held = _delayed_and_held(router, dest, delayed_by, held_by)
    return destination_held_counts(dest, delayed, held)


def _delayed_and_held(
    router: MessageRouter,
    dest: Destination,
    delayed_by: queries.DestCounts | None,
    held_by: queries.DestCounts | None,
) -> tuple[list[int], list[int]]:
    """``dest``'s (count, bytes) delayed and held in open transactions, from the
    caller's tallies or, without them, from new ones."""
    key = (dest.name, not dest.is_queue)
    if delayed_by is None:
        delayed_by = queries.delayed_by_destination(router)
    if held_by is None:
        held_by = queries.held_in_transactions(router)
    return delayed_by.get(key, [0, 0]), held_by.get(key, [0, 0])


def destination_metric_values(
    router: MessageRouter, dest: Destination, held_by: queries.DestCounts | None = None
) -> tuple[dict[str, int], int, int]:
    """A destination's ``DestMetricsCounters`` values (by OpenMQ key), with the messages
    held in open transactions counted and the disk figures; and (paged-out count, bytes).
    What imqcmd's ``metrics dst`` and the JMX Destination Monitor MBean read
    (``held_by``: as in :func:`destination_info_values`)."""
    is_queue = dest.is_queue
    values = destination_metrics(dest)
    if held_by is None:
        held_by = queries.held_in_transactions(router)
    n, size = held_by.get((dest.name, not is_queue), (0, 0))
    if n:  # counted from the send on, as OpenMQ's (see queries.held_in_transactions)
        for key, add in (
            ("numMsgsIn", n),
            ("numMsgs", n),
            ("msgBytesIn", size),
            ("totalMsgBytes", size),
        ):
            values[key] += add
        values["peakNumMsgs"] = max(values["peakNumMsgs"], values["numMsgs"])
        values["peakTotalMsgBytes"] = max(values["peakTotalMsgBytes"], values["totalMsgBytes"])
    # OpenMQ's disk figures tell what of it is paged out (docs/reference/imqcmd.md):
    # Disk Used the bytes only on disk, Disk Reserved all its bytes.
    paged, paged_bytes = queries.paged_out(dest)
    values["diskUsed"] = paged_bytes
    values["diskReserved"] = values["totalMsgBytes"]
    total = values["totalMsgBytes"]
    values["diskUtilizationRatio"] = paged_bytes * 100 // total if total else 0
    return values, paged, paged_bytes


# OpenMQ's dedicated thread model (its default) gives each connection a reader and a
# writer thread; an asyncio broker has none, and reports the threads OpenMQ would use.
THREADS_PER_CONNECTION = 2


def service_threads(broker: Any, svc: Any) -> tuple[int, int]:
    """(low, high) water of a service's "thread pool": its configured min/max_threads
    (the same defaults GET_SERVICES shows); active: THREADS_PER_CONNECTION each."""
    admin = svc.type == "ADMIN"
    c = broker.config
    low = c.get_int(f"imq.{svc.name}.min_threads", 4 if admin else 10)
    high = c.get_int(f"imq.{svc.name}.max_threads", 10 if admin else 1000)
    return low, high


def memory_figures(broker: Any) -> tuple[int, int]:
    """(total, free) memory as :func:`broker_counters` reports it."""
    budget = broker.memory.budget
    return budget, max(budget - BODIES.bytes, 0)


def broker_counters(broker: Any, services: list[Any] | None = None) -> dict[str, int]:
    """``MetricCounters`` field values for ``services`` (default: all, the broker total).

    totalMemory/freeMemory are the broker's message memory budget and what of it is not
    held by message bodies in memory (OpenMQ reports the JVM heap)."""
    chosen = broker.services if services is None else services
    total = ServiceCounters.total(s.metrics for s in chosen)
    active = low = high = 0
    for svc in chosen:
        lo, hi = service_threads(broker, svc)
        low += lo
        high += hi
        active += THREADS_PER_CONNECTION * len(svc.connections)
    budget, free = memory_figures(broker)
    return {
        "messagesIn": total.messages_in,
        "messagesOut": total.messages_out,
        "messageBytesIn": total.message_bytes_in,
        "messageBytesOut": total.message_bytes_out,
        "packetsIn": total.packets_in,
        "packetsOut": total.packets_out,
        "packetBytesIn": total.packet_bytes_in,
        "packetBytesOut": total.packet_bytes_out,
        "totalMemory": budget,
        "freeMemory": free,
        "threadsActive": active,
        "threadsHighWater": high,
        "threadsLowWater": low,
        "timeStamp": int(time.time() * 1000),
        "nConnections": sum(len(s.connections) for s in chosen),
    }
