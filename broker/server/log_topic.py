"""The broker's log on the topic ``mq.log.broker`` (``imq.log.destination.*``), as
OpenMQ's broker publishes it: each record at ``imq.log.destination.output`` or above
becomes a MapMessage (:func:`broker.core.monitoring.log_message`) for the topic's
subscribers; nothing is made while nobody subscribes.

Records come from any thread.  :class:`LogTopicHandler` only checks that someone
subscribes, formats the record and puts it on a bounded queue (the oldest dropped past
:data:`QUEUE_LIMIT`, counted); the event loop makes and routes the messages in one
batch per loop turn (:meth:`LogTopic.drain`).  What the router logs while it routes
them is not published again (no recursion), and the topic itself holds
``imq.log.destination.capacity`` messages at most, the oldest dropped (OpenMQ's
REMOVE_OLDEST), so a subscriber that does not read costs a bounded amount of memory.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import threading
from typing import TYPE_CHECKING

from broker import props
from broker.config import ConfigError
from broker.core import monitoring
from broker.core.errors import RouterError, now_ms
from broker.loglevels import NONE
from broker.logsetup import openmq_level_name, parse_level
from broker.protocol.sysmsgid import ip_field
from broker.protocol.types import DEST_TOPIC

if TYPE_CHECKING:
    from broker.core.session import Consumer

    from .broker import Broker

# Records waiting for the event loop at most (a burst of warnings from another thread
# while the loop is busy); older ones are dropped first.
QUEUE_LIMIT = 1000

log = logging.getLogger("broker.log_topic")


def output_level(text: str) -> int:
    """``imq.log.destination.output`` as a logging level: a level name (that level and
    above, as OpenMQ's handler takes it), ``ALL``, or ``NONE`` (nothing)."""
    try:
        return parse_level(text)
    except ConfigError as exc:
        raise ConfigError(f"{props.LOG_DESTINATION_OUTPUT.name}: {exc}") from None


class LogTopicHandler(logging.Handler):
    """Hands log records to :class:`LogTopic` while ``mq.log.broker`` has subscribers."""

    def __init__(self, topic: LogTopic, level: int) -> None:
        super().__init__(level)
        self.topic = topic

    def emit(self, record: logging.LogRecord) -> None:
        topic = self.topic
        if not topic.subscribed:
            return
        if topic.publishing and record.thread == topic.loop_thread:
            return  # logged while routing the log's own messages: never again
        try:
            text = record.getMessage()
            if record.exc_info:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
            level = openmq_level_name(record.levelno)
            # OpenMQ's text starts with the level (but INFO's), as its log lines do.
            tag = "" if level == "INFO" else level + " "
            topic.put(level, f"{tag}{record.name}: {text}")
        except Exception:
            self.handleError(record)


class LogTopic:
    """Publishes the queued log records to ``mq.log.broker`` on the broker's loop."""

    def __init__(self, broker: Broker) -> None:
        c = broker.config
        self.broker = broker
        self.router = broker.router
        self.level = output_level(c.get(props.LOG_DESTINATION_OUTPUT))
        self.persistent = c.get(props.LOG_DESTINATION_PERSIST)
        self.ttl_ms = max(c.get(props.LOG_DESTINATION_TIMETOLIVE), 0) * 1000
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        # Read by the handler on any thread: set on the loop as subscribers come and go.
        self.subscribed = False
        self.publishing = False
        self.published = 0
        self.dropped = 0
        self._queue: collections.deque[tuple[str, str]] = collections.deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._sequence = itertools.count(1)
        self._broker_field = ""
        self._ip = b""
        self.handler: LogTopicHandler | None = None
        if self.level < NONE:
            self.handler = LogTopicHandler(self, self.level)
            logging.getLogger().addHandler(self.handler)
            self.router.observers.add_consumer_observer(self)

    def close(self) -> None:
        """Stop publishing: the handler leaves the root logger."""
        self.subscribed = False
        if self.handler is not None:
            logging.getLogger().removeHandler(self.handler)
            self.handler = None
        self.router.observers.remove_consumer_observer(self)

    # -- who listens ------------------------------------------------------------------

    def consumer_event(self, what: str, cons: Consumer) -> None:
        dest = cons.destination
        if dest.is_queue or dest.name != monitoring.LOG_TOPIC:
            return
        # As OpenMQ's handler: only while the topic has a consumer (a durable
        # subscription without one gets nothing).
        self.subscribed = bool(dest.consumers()) if what == "removed" else True

    # -- any thread -------------------------------------------------------------------

    def put(self, level: str, text: str) -> None:
        """Queue one record for the loop (any thread)."""
        with self._lock:
            if len(self._queue) >= QUEUE_LIMIT:
                self._queue.popleft()
                self.dropped += 1
            self._queue.append((level, text))
            if self._scheduled:
                return
            self._scheduled = True
        try:
            if threading.get_ident() == self.loop_thread:
                self.loop.call_soon(self.drain)
            else:
                self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop is closed: the broker is gone
            with self._lock:
                self._scheduled = False
                self._queue.clear()

    # -- the loop ---------------------------------------------------------------------

    def drain(self) -> None:
        """Publish every queued record to the topic's subscribers (the event loop)."""
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
            self._scheduled = False
        dest = self.router.lookup(monitoring.LOG_TOPIC, DEST_TOPIC)
        if dest is None or not dest.consumers():
            self.subscribed = False
            return
        if not self._broker_field:
            from .metrics_topics import broker_address

            address = broker_address(self.broker)
            self._broker_field = f"{address.host}:{address.port}"
            self._ip = ip_field(address.ip)
        instance = self.broker.config.instance
        self.publishing = True
        try:
            for level, text in items:
                msg = monitoring.log_message(
                    level,
                    text,
                    self._broker_field,
                    instance,
                    now=now_ms(),
                    sequence=next(self._sequence),
                    ip_field=self._ip,
                    persistent=self.persistent,
                    ttl_ms=self.ttl_ms,
                )
                try:
                    self.router.route(msg, None, DEST_TOPIC, internal=True)
                    self.published += 1
                except RouterError as exc:
                    self.dropped += 1
                    log.debug("log message not published: %s", exc.reason)
        finally:
            self.publishing = False


__all__ = ["QUEUE_LIMIT", "LogTopic", "LogTopicHandler", "output_level"]
