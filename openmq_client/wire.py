"""What the connection and its producers share about the wire: the process-wide packet
sequence, when a write queue is flushed early, and a reply's status.

Its own module so that the producer does not import the connection (which makes
sessions, which make producers): nothing here imports the rest of the package.
"""

from __future__ import annotations

import itertools

from broker.protocol.names import JMQ_STATUS
from broker.protocol.packet import Packet

from .errors import JMSException

# Process-wide packet sequence number, like the JVM-global counter of the Java client;
# it is the last component of every SysMessageID this process produces.
_SEQUENCE = itertools.count(1)
next_sequence = _SEQUENCE.__next__

# Flush the write queue early (and let the loop breathe) once this much is queued,
# so a producer that never awaits cannot starve the reader or grow memory unbounded.
FLUSH_THRESHOLD = 256 * 1024


def reply_status(reply: Packet) -> int:
    """The JMQStatus of a reply; a reply without one is a protocol error."""
    status = reply.properties.get(JMQ_STATUS)
    if status is None:
        raise JMSException(f"{reply.type_name} without JMQStatus")
    return int(status)  # type: ignore[call-overload]
