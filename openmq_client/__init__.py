"""A JMS-shaped client for OpenMQ-compatible brokers (this one, or the Java broker).

asyncio API::

    from openmq_client import connect, Queue, TextMessage, AckMode
    conn = await connect("127.0.0.1", 7676, user="guest", password="guest")
    sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
    prod = await sess.create_producer(Queue("q1"))
    await prod.send(TextMessage("hi"), persistent=False)
    cons = await sess.create_consumer(Queue("q1"))
    await conn.start()
    msg = await cons.receive(timeout=5)
    await conn.close()

The blocking wrapper with the same method names is :mod:`openmq_client.sync`.  The
client speaks only the wire protocol and shares the sans-IO codec in
:mod:`broker.protocol` with the broker.
"""

from broker.protocol.jtypes import JByte, JChar, JFloat, JInt, JLong, JShort
from broker.protocol.types import AckMode

from .connection import Connection, connect, lookup_service
from .consumer import MessageConsumer, QueueBrowser
from .destination import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic
from .errors import (
    BrokerUnreachableException,
    IllegalStateException,
    InvalidClientIDException,
    InvalidDestinationException,
    InvalidSelectorException,
    JMSException,
    JMSSecurityException,
    MessageFormatException,
    ResourceAllocationException,
    TransactionRolledBackException,
)
from .message import (
    BytesMessage,
    DeliveryMode,
    MapMessage,
    Message,
    ObjectMessage,
    StreamMessage,
    TextMessage,
)
from .producer import MessageProducer
from .session import Session

__all__ = [
    "AckMode",
    "BrokerUnreachableException",
    "BytesMessage",
    "Connection",
    "DeliveryMode",
    "Destination",
    "IllegalStateException",
    "InvalidClientIDException",
    "InvalidDestinationException",
    "InvalidSelectorException",
    "JByte",
    "JChar",
    "JFloat",
    "JInt",
    "JLong",
    "JMSException",
    "JMSSecurityException",
    "JShort",
    "MapMessage",
    "Message",
    "MessageConsumer",
    "MessageFormatException",
    "MessageProducer",
    "ObjectMessage",
    "Queue",
    "QueueBrowser",
    "ResourceAllocationException",
    "Session",
    "StreamMessage",
    "TemporaryQueue",
    "TemporaryTopic",
    "TextMessage",
    "Topic",
    "TransactionRolledBackException",
    "connect",
    "lookup_service",
]
