"""The metrics topics and the metrics report, on the broker's event loop.

:class:`MetricsTopics` publishes the ``mq.metrics.*`` maps (broker/core/monitoring.py)
as the broker itself: one to each new subscriber at once (to its subscription alone),
then one to every subscriber of a topic every ``imq.metrics.topic.interval`` seconds.
It costs nothing while nobody subscribes: it learns of metrics topics from the router's
consumer events, its timer runs only while one of them has a subscription, and a
destination's map is made only for a destination someone watches.

:class:`MetricsReport` writes OpenMQ's periodic metrics report to the broker log every
``imq.metrics.interval`` seconds (0, the default: never; ``imq.metrics.enabled=false``:
never).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import resource
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker import props
from broker.core import monitoring
from broker.core.errors import RouterError, now_ms
from broker.core.message import BODIES, Message
from broker.core.metrics import ServiceCounters
from broker.protocol.sysmsgid import ip_field
from broker.protocol.types import DEST_TOPIC

from .admin_service.connections import admin_connection_ids
from .admin_service.metrics import broker_counters

if TYPE_CHECKING:
    from broker.core.destination import TopicDestination
    from broker.core.session import Consumer

    from .broker import Broker

log = logging.getLogger("broker.metrics")

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# Maps with more entries than this (only a destination list gets there) are serialised
# off the event loop: 10,000 destinations take about half a second.
INLINE_ENTRIES = 500


def resident_memory() -> int:
    """The process's resident memory in bytes (its peak where /proc is missing)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def process_memory(broker: Broker) -> monitoring.ProcessMemory:
    """The figures ``mq.metrics.jvm`` and the metrics report give (see
    :class:`~broker.core.monitoring.ProcessMemory`)."""
    total = resident_memory()
    held = BODIES.bytes  # message bodies in memory (not those paged out)
    return monitoring.ProcessMemory(total, max(total - held, 0), broker.memory.budget)


def broker_address(broker: Broker) -> monitoring.BrokerAddress:
    """Where the metrics messages say the broker is: imq.hostname (else the machine's
    name) and its address, and the port mapper's port."""
    c = broker.config
    host = c.get(props.HOSTNAME) or socket.gethostname()
    try:
        ip = socket.gethostbyname(host)
    except OSError:
        ip = "127.0.0.1"
    port = broker.portmapper_port
    return monitoring.BrokerAddress(ip, host, port)


class MetricsTopics:
    """Publishes the metrics topics' maps while they have subscribers."""

    def __init__(self, broker: Broker) -> None:
        c = broker.config
        self.broker = broker
        self.router = broker.router
        self.interval = max(c.get(props.METRICS_TOPIC_INTERVAL), 1)
        self.persistent = c.get(props.METRICS_TOPIC_PERSIST)
        self.ttl_ms = max(c.get(props.METRICS_TOPIC_TIMETOLIVE), 0) * 1000
        # Known once the port mapper is bound: made with the first map.
        self._address: monitoring.BrokerAddress | None = None
        self._ip = b""
        self._sequence = itertools.count(1)
        # The metrics topics someone subscribed to, by name, until none does.
        self.watched: dict[str, TopicDestination] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.published = 0
        self.router.observers.add_consumer_observer(self)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.router.observers.remove_consumer_observer(self)

    # -- who listens ------------------------------------------------------------------

    def consumer_event(self, what: str, cons: Consumer) -> None:
        dest = cons.destination
        if what != "added" or not monitoring.is_metrics_topic(dest):
            return
        self.watched[dest.name] = dest  # type: ignore[assignment]
        loop = asyncio.get_running_loop()
        # After the ADD_CONSUMER reply: the client must know the consumer first.
        loop.call_soon(self._welcome, cons)
        if self._timer is None:
            self._timer = loop.call_later(self.interval, self._tick)

    def _welcome(self, cons: Consumer) -> None:
        name = cons.destination.name

        def deliver(msg: Message) -> None:
            sub = cons.subscription
            if cons.closed or sub is None:
                return  # it left before its first map was made
            try:
                self.router.deliver_to(sub, msg)
                self.published += 1
            except RouterError as exc:
                log.info("metrics map for %s not delivered: %s", name, exc.reason)

        if not cons.closed:
            self._make(name, deliver)

    # -- the interval -----------------------------------------------------------------

    def _tick(self) -> None:
        self._timer = None
        for name, dest in list(self.watched.items()):
            if self.router.lookup(name, DEST_TOPIC) is not dest or not dest.subscriptions:
                # Nobody listens any more (a durable subscription still does).
                del self.watched[name]
                continue
            try:
                self._make(name, self._publish)
            except Exception:  # one topic's failure must not stop the others
                log.exception("metrics map for %s failed", name)
        if self.watched:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self._tick)

    def _publish(self, msg: Message) -> None:
        """Route a map to every subscriber of its topic."""
        try:
            self.router.route(msg, None, DEST_TOPIC, internal=True)
            self.published += 1
        except RouterError as exc:
            log.info("metrics map for %s not published: %s", msg.destination, exc.reason)

    def _make(self, name: str, then: Callable[[Message], None]) -> None:
        """Make the map of metrics topic ``name`` now and hand its message to ``then``
        (nothing when the monitored destination does not exist).  The router is read
        here, on the loop; a big map (a destination list of thousands) is serialised in
        the broker's thread pool, and ``then`` runs back on the loop."""
        topic = monitoring.parse_topic(name)
        if topic is None:
            return
        broker = self.broker
        counters = ServiceCounters.total(s.metrics for s in broker.services)
        connections = sum(len(s.connections) for s in broker.services)
        values = monitoring.topic_map(
            self.router,
            topic,
            counters,
            connections,
            process_memory(broker) if topic.kind == "jvm" else _NO_MEMORY,
            admin_connection_ids(broker),
        )
        if values is None:
            return
        if self._address is None:
            self._address = broker_address(broker)
            self._ip = ip_field(self._address.ip)
        build = functools.partial(
            monitoring.metrics_message,
            name,
            values,
            self._address,
            now=now_ms(),
            sequence=next(self._sequence),
            ip_field=self._ip,
            persistent=self.persistent,
            ttl_ms=self.ttl_ms,
        )
        if len(values) <= INLINE_ENTRIES:
            then(build())
            return

        def built(fut: asyncio.Future[Message]) -> None:
            if fut.cancelled():
                return
            exc = fut.exception()
            if exc is not None:
                log.error("metrics map for %s failed: %s", name, exc)
                return
            then(fut.result())

        asyncio.get_running_loop().run_in_executor(broker.executor, build).add_done_callback(built)


_NO_MEMORY = monitoring.ProcessMemory(0, 0, 0)


class MetricsReport:
    """Writes the metrics report to the broker log every ``imq.metrics.interval`` s."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._before = self._counters()
        self._at = time.monotonic()

    def _counters(self) -> ServiceCounters:
        return ServiceCounters.total(s.metrics for s in self.broker.services)

    def report(self) -> str:
        """Log one report (rates since the previous one) and return its text."""
        broker = self.broker
        now, at = self._counters(), time.monotonic()
        figures = broker_counters(broker)
        text = monitoring.report_text(
            now,
            self._before,
            at - self._at,
            figures["nConnections"],
            process_memory(broker),
            (figures["threadsActive"], figures["threadsLowWater"], figures["threadsHighWater"]),
        )
        self._before, self._at = now, at
        log.info("%s", text)
        return text


def report_interval(broker: Broker) -> int:
    """Seconds between two metrics reports; 0: none (imq.metrics.enabled,
    imq.metrics.interval)."""
    c = broker.config
    if not c.get(props.METRICS_ENABLED):
        return 0
    return max(c.get(props.METRICS_INTERVAL), 0)


__all__ = [
    "MetricsReport",
    "MetricsTopics",
    "broker_address",
    "process_memory",
    "report_interval",
    "resident_memory",
]
