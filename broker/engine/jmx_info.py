"""The CompositeData the stock broker's manager MBeans return from their info operations:
ConsumerManager's ``getConsumerIDs``/``getConsumerInfo``/``getConsumerInfoByID`` and
ProducerManager's ``getProducerIDs``/``getProducerInfo``/``getProducerInfoByID``.

Item names, open types and the composite type names are OpenMQ's (ConsumerUtil /
ProducerUtil: ``ConsumerMonitorInfo``, ``ProducerMonitorInfo``; the constants of
com.sun.messaging.jms.management.server.ConsumerInfo / ProducerInfo). Values come from
the same rows imqcmd's ``list cxn``/``GET_CONSUMERS`` read (broker/server/admin_service).
The operations that return them are wired with the others (invoke).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from broker.core import queries
from broker.engine.base import EngineBase
from broker.protocol import jmxser
from broker.protocol.javaser import JavaObject
from broker.protocol.jtypes import JInt, JLong

if TYPE_CHECKING:
    from broker.core.session import Consumer, Producer

STRING = "java.lang.String"
INTEGER = "java.lang.Integer"
LONG = "java.lang.Long"
BOOLEAN = "java.lang.Boolean"

# jakarta.jms.Session's modes and OpenMQ's labels (ConsumerUtil.toExternalAckModeString).
ACK_LABELS = {
    0: "SESSION_TRANSACTED",
    1: "AUTO_ACKNOWLEDGE",
    2: "CLIENT_ACKNOWLEDGE",
    3: "DUPS_OK_ACKNOWLEDGE",
    32768: "NO_ACKNOWLEDGE",
}


def _consumers(broker: Any) -> Iterator[Any]:
    for conn in list(broker.connections.values()):
        for session in conn.all_sessions():
            yield from session.consumers.values()


def _producers(broker: Any) -> Iterator[Any]:
    yield from broker.router.producers.values()


def client_link(link: object) -> EngineBase | None:
    """The client connection a consumer, producer or transaction is on; None for one
    whose link is another broker's (the cluster's RemoteLinkRef: no address, service or
    user here), as broker/server/admin_service/consumers.py tells them apart."""
    return link if isinstance(link, EngineBase) else None


def _host(local: EngineBase | None) -> str | None:
    peer = str(local.peer or "") if local is not None else ""
    return peer.rpartition(":")[0] or peer or None


def _service(local: EngineBase | None) -> str | None:
    return None if local is None else local.service.name


def _user(local: EngineBase | None) -> str | None:
    return None if local is None else local.user


def _dest_type(dest: Any) -> str:
    return "q" if dest.is_queue else "t"


def _wildcard(dest: Any) -> bool:
    return "*" in dest.name or ">" in dest.name


def consumer_ids(broker: Any) -> list[str]:
    """ConsumerManager's getConsumerIDs (the stock broker answers null for none)."""
    return [str(c.id) for c in _consumers(broker)]


def consumer_info(broker: Any, consumer_id: str) -> JavaObject | None:
    """getConsumerInfoByID: None when there is no such consumer."""
    for c in _consumers(broker):
        if str(c.id) == consumer_id:
            return _consumer(c)
    return None


def consumer_infos(broker: Any) -> list[JavaObject]:
    """getConsumerInfo: one CompositeData per consumer."""
    return [_consumer(c) for c in _consumers(broker)]


def _consumer(c: Consumer) -> JavaObject:
    link = c.link
    local = client_link(link)
    dest = c.destination
    sub = c.subscription
    durable_key = sub.durable_key if sub is not None else None
    durable = durable_key is not None
    selector = c.selector.text if c.selector is not None else None
    if sub is not None:
        selector = sub.selector_text
    mode = int(c.session.ack_mode)
    pending = queries.pending_acks(c)
    items: list[tuple[str, str | JavaObject, object]] = [
        ("AcknowledgeMode", INTEGER, JInt(mode)),
        ("AcknowledgeModeLabel", STRING, ACK_LABELS.get(mode, "UNKNOWN")),
        ("ClientID", STRING, link.client_id),
        ("ConnectionID", STRING, str(link.id)),
        ("ConsumerID", STRING, str(c.id)),
        # The broker does not keep a consumer's creation time.
        ("CreationTime", LONG, None),
        ("DestinationName", STRING, dest.name),
        ("DestinationNames", jmxser.string_array_type(), jmxser.string_array([dest.name])),
        ("DestinationType", STRING, _dest_type(dest)),
        ("Durable", BOOLEAN, durable),
        ("DurableActive", BOOLEAN, True if durable else None),
        ("DurableName", STRING, durable_key[1] if durable_key is not None else None),
        ("FlowPaused", BOOLEAN, c.credit == 0),
        ("Host", STRING, _host(local)),
        ("LastAckTime", LONG, JLong(0)),
        ("NumMsgs", LONG, JLong(c.delivered)),
        ("NumMsgsPending", LONG, JLong(pending)),
        ("NumMsgsPendingAcks", LONG, JLong(pending)),
        ("Selector", STRING, selector),
        ("ServiceName", STRING, _service(local)),
        ("User", STRING, _user(local)),
        ("Wildcard", BOOLEAN, _wildcard(dest)),
        ("NextMessageID", STRING, None),
    ]
    return jmxser.composite(
        "ConsumerMonitorInfo", "ConsumerMonitorInfo", [(n, n, t, v) for n, t, v in items]
    )


def producer_ids(broker: Any) -> list[str]:
    """ProducerManager's getProducerIDs."""
    return [str(p.id) for p in _producers(broker)]


def producer_info(broker: Any, producer_id: str) -> JavaObject | None:
    """getProducerInfoByID: None when there is no such producer."""
    for p in _producers(broker):
        if str(p.id) == producer_id:
            return _producer(broker, p)
    return None


def producer_infos(broker: Any) -> list[JavaObject]:
    """getProducerInfo: one CompositeData per producer."""
    return [_producer(broker, p) for p in _producers(broker)]


def _producer(broker: Any, p: Producer) -> JavaObject:
    link = p.session.link
    local = client_link(link)
    dest = p.destination
    items: list[tuple[str, str | JavaObject, object]] = [
        ("ConnectionID", STRING, str(link.id)),
        ("CreationTime", LONG, None),
        ("DestinationName", STRING, dest.name),
        ("DestinationNames", jmxser.string_array_type(), jmxser.string_array([dest.name])),
        ("DestinationType", STRING, _dest_type(dest)),
        ("FlowPaused", BOOLEAN, queries.producer_waiting(dest, p.id)),
        ("Host", STRING, _host(local)),
        # Not counted per producer here (the services and destinations count messages).
        ("NumMsgs", LONG, None),
        ("ProducerID", STRING, str(p.id)),
        ("ServiceName", STRING, _service(local)),
        ("User", STRING, _user(local)),
        ("Wildcard", BOOLEAN, _wildcard(dest)),
    ]
    return jmxser.composite(
        "ProducerMonitorInfo", "ProducerMonitorInfo", [(n, n, t, v) for n, t, v in items]
    )
