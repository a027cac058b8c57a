"""Admin GET_CONSUMERS (OpenMQ's GetConsumersHandler): a destination's consumers,
or with our JMQProducers=true its producers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.core import queries
from broker.engine.base import EngineBase
from broker.protocol.admin_info import HashMap, encode_admin_vector
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import JMQ_DEST_TYPE, JMQ_DESTINATION, JMQ_PRODUCERS
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, Status

from .common import AdminError, Result, host_of, lookup

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


def get_consumers(conn: ConnectionEngine, props: dict) -> Result:
    """GET_CONSUMERS: a Vector of HashMap, one per consumer (GetConsumersHandler's
    keys).  With our JMQProducers=true: the destination's producers instead."""
    if not isinstance(props.get(JMQ_DESTINATION), str) or JMQ_DEST_TYPE not in props:
        raise AdminError(Status.BAD_REQUEST, f"{JMQ_DESTINATION} and {JMQ_DEST_TYPE} are needed")
    dest = lookup(conn, props)
    if props.get(JMQ_PRODUCERS) is True:
        rows = [_producer_row(dest, p) for p in dest.producers.values()]
    else:
        rows = [_consumer_row(dest, c) for c in dest.consumers()]
    return {}, encode_admin_vector(rows)


def _client(link: object) -> EngineBase | None:
    """The client connection a consumer or producer is on; None for one on another
    broker (its link is the cluster's RemoteLinkRef: no address, service or user here)."""
    return link if isinstance(link, EngineBase) else None


def _consumer_row(dest, cons) -> HashMap:
    link = cons.link
    local = _client(link)
    sub = cons.subscription
    durable = sub is not None and sub.durable_key is not None
    selector = cons.selector.text if cons.selector is not None else None
    if sub is not None:
        selector = sub.selector_text
    # Session ack modes are jakarta.jms.Session's numbers (0: SESSION_TRANSACTED).
    mode = cons.session.ack_mode
    pending = queries.pending_acks(cons)
    return HashMap(
        AcknowledgeMode=JInt(mode),
        ClientID=link.client_id,
        ConnectionID=str(link.id),
        ConsumerID=str(cons.id),
        DestinationName=dest.name,
        DestinationType=JInt(DEST_QUEUE if dest.is_queue else DEST_TOPIC),
        Durable=durable,
        DurableActive=durable,
        DurableName=sub.durable_key[1] if durable else None,
        FlowPaused=cons.credit == 0,
        Host=host_of(local.peer if local else ""),
        LastAckTime=JLong(0),
        NumMsgs=JLong(cons.delivered),
        NumMsgsPendingAcks=JLong(pending),
        Selector=selector,
        ServiceName=local.service.name if local else None,
        User=local.user if local else None,
    )


def _producer_row(dest, prod) -> HashMap:
    link = prod.session.link
    local = _client(link)
    waiting = queries.producer_waiting(dest, prod.id)
    return HashMap(
        ProducerID=str(prod.id),
        ConnectionID=str(link.id),
        SessionID=str(prod.session.id),
        DestinationName=dest.name,
        DestinationType=JInt(DEST_QUEUE if dest.is_queue else DEST_TOPIC),
        FlowPaused=waiting,
        Host=host_of(local.peer if local else ""),
        ServiceName=local.service.name if local else None,
        User=local.user if local else None,
    )
