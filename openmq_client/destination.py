"""Destinations: queues, topics and their temporary variants.

The wire carries a destination as its name plus the Java class name of the client's
destination object (variable-header fields 1/6 and 4/7).  ``session.createQueue`` in
the Java client makes ``com.sun.messaging.BasicQueue``; temporary destinations are
``...jmsclient.TemporaryQueueImpl`` with a ``temporary_destination://`` name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    QUEUE_CLASS,
    TEMP_QUEUE_CLASS,
    TEMP_QUEUE_PREFIX,
    TEMP_TOPIC_CLASS,
    TEMP_TOPIC_PREFIX,
    TOPIC_CLASS,
)

from .errors import IllegalStateException

if TYPE_CHECKING:
    from .connection import Connection


class Destination:
    """A named queue or topic."""

    __slots__ = ("name",)

    is_queue: ClassVar[bool] = True
    is_temporary: ClassVar[bool] = False
    class_name: ClassVar[str] = QUEUE_CLASS

    def __init__(self, name: str) -> None:
        if not name:
            raise ValueError("destination name must not be empty")
        self.name = name

    @property
    def is_topic(self) -> bool:
        return not self.is_queue

    @property
    def dest_type(self) -> int:
        """The ``JMQDestType`` bits the client sends for this destination."""
        t = DEST_QUEUE if self.is_queue else DEST_TOPIC
        return t | DEST_TEMP if self.is_temporary else t

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Destination)
            and other.is_queue == self.is_queue
            and other.is_temporary == self.is_temporary
            and other.name == self.name
        )

    def __hash__(self) -> int:
        return hash((self.is_queue, self.is_temporary, self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Queue(Destination):
    """A point-to-point destination."""

    __slots__ = ()


class Topic(Destination):
    """A publish/subscribe destination."""

    __slots__ = ()
    is_queue = False
    class_name = TOPIC_CLASS


class _Temporary:
    """Shared behaviour of temporary destinations: they belong to one connection."""

    __slots__ = ()
    _connection: Connection | None

    def delete(self) -> Any:
        """Destroy the destination on the broker (a coroutine; blocking under the sync API)."""
        conn = self._connection
        if conn is None:
            raise IllegalStateException("this temporary destination was not created here")
        return conn._maybe_sync(conn._delete_temporary(self))  # type: ignore[arg-type]


class TemporaryQueue(_Temporary, Queue):
    """A queue that lives as long as the connection that created it."""

    __slots__ = ("_connection",)
    is_temporary = True
    class_name = TEMP_QUEUE_CLASS

    def __init__(self, name: str, connection: Connection | None = None) -> None:
        super().__init__(name)
        self._connection = connection


class TemporaryTopic(_Temporary, Topic):
    """A topic that lives as long as the connection that created it."""

    __slots__ = ("_connection",)
    is_temporary = True
    class_name = TEMP_TOPIC_CLASS

    def __init__(self, name: str, connection: Connection | None = None) -> None:
        super().__init__(name)
        self._connection = connection


def destination_from_wire(name: str, class_name: str | None, queue_flag: bool) -> Destination:
    """Rebuild a destination from a name and the Java class name sent with it.

    Mirrors the Java client: the class name decides; if it is unknown the
    ``temporary_destination://`` prefix does, and failing that the Q flag.
    """
    if class_name:
        if "TemporaryQueue" in class_name:
            return TemporaryQueue(name)
        if "TemporaryTopic" in class_name:
            return TemporaryTopic(name)
        if class_name.endswith("Queue"):
            return Queue(name)
        if class_name.endswith("Topic"):
            return Topic(name)
    if name.startswith(TEMP_QUEUE_PREFIX):
        return TemporaryQueue(name)
    if name.startswith(TEMP_TOPIC_PREFIX):
        return TemporaryTopic(name)
    return Queue(name) if queue_flag else Topic(name)


__all__ = [
    "Destination",
    "Queue",
    "TemporaryQueue",
    "TemporaryTopic",
    "Topic",
    "destination_from_wire",
]
