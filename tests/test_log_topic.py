"""The log on ``mq.log.broker`` (broker/server/log_topic.py), driven on an event loop in
process with the engine tests' broker: what is published, to whom, and that what the
broker logs while publishing is never published again.  The stock Java client's view,
against ours and the stock broker, is tests/interop/test_java_log_topic.py."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from broker.config import ConfigError
from broker.core.message import Message
from broker.core.monitoring import LOG_TOPIC
from broker.core.observers import MessageObserver
from broker.protocol.javaser import decode_map_body
from broker.protocol.packet import Packet
from broker.protocol.types import DEST_TOPIC, PacketType
from broker.server.broker import Broker
from broker.server.log_topic import QUEUE_LIMIT, LogTopic, output_level

from .routerkit import Conn, session
from .test_engine import broker as broker  # noqa: F401 - the engine tests' fixture

pytestmark = pytest.mark.fast

log = logging.getLogger("broker.logtest")


def _maps(conn: Conn) -> list[tuple[dict, dict]]:
    out = []
    for raw in conn.sent:
        pkt = Packet(raw)
        assert pkt.type == PacketType.MAP_MESSAGE
        out.append((decode_map_body(pkt.body), pkt.properties))
    return out


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.fixture(autouse=True)
def warnings_reach_handlers():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    yield
    root.setLevel(level)


def test_records_at_the_level_reach_subscribers(broker: Broker) -> None:  # noqa: F811
    broker.config.set("imq.hostname", "127.0.0.1")  # no name lookup

    async def run() -> None:
        topic = LogTopic(broker)
        try:
            log.warning("before anyone subscribes")
            await _turns()
            assert topic.published == 0 and not topic.subscribed
            conn = Conn(1)
            cons = broker.router.add_consumer(session(broker.router, conn), LOG_TOPIC, DEST_TOPIC)
            log.info("below the level")
            log.warning("disk %s is nearly full", "/var")
            log.error("a store write failed")
            await _turns()
            (warning, warning_props), (error, _) = _maps(conn)
            assert warning == {
                "level": "WARNING",
                "text": "WARNING broker.logtest: disk /var is nearly full",
            }
            assert error["level"] == "ERROR"
            assert warning_props["type"] == LOG_TOPIC
            assert warning_props["brokerInstance"] == broker.config.instance
            assert warning_props["broker"].startswith("127.0.0.1:")
            # The topic is made as OpenMQ's handler sets it up.
            dest = broker.router.lookup(LOG_TOPIC, DEST_TOPIC)
            assert dest is not None
            assert dest.attributes["limitBehavior"] == "REMOVE_OLDEST"
            assert dest.attributes["maxNumMsgs"] == 100
            broker.router.remove_consumer(cons, None)
            assert not topic.subscribed
            log.warning("after the last subscriber left")
            await _turns()
            assert len(conn.sent) == 2
        finally:
            topic.close()

    asyncio.run(run())


class _LogsOnArrival(MessageObserver):
    """A real router observer that logs a WARNING for every message that arrives on the
    log topic: what a publishing path that logs would do."""

    def __init__(self) -> None:
        self.heard = 0

    def arrived(self, dest, msg: Message) -> None:  # noqa: ANN001
        if dest.name == LOG_TOPIC:
            self.heard += 1
            log.warning("heard a log message")


def test_what_publishing_logs_is_not_published_again(broker: Broker) -> None:  # noqa: F811
    broker.config.set("imq.hostname", "127.0.0.1")  # no name lookup
    observer = _LogsOnArrival()
    broker.router.events.add(observer)

    async def run() -> None:
        topic = LogTopic(broker)
        try:
            conn = Conn(1)
            broker.router.add_consumer(session(broker.router, conn), LOG_TOPIC, DEST_TOPIC)
            log.warning("one")
            await _turns(20)
            assert observer.heard == 1
            assert [m["text"] for m, _ in _maps(conn)] == ["WARNING broker.logtest: one"]
            # Another thread's record while the loop is idle is published too.
            t = threading.Thread(target=log.warning, args=("from a thread",))
            t.start()
            t.join()
            for _ in range(200):
                if len(conn.sent) == 2:
                    break
                await asyncio.sleep(0.01)
            assert _maps(conn)[1][0]["text"] == "WARNING broker.logtest: from a thread"
        finally:
            topic.close()

    asyncio.run(run())


def test_the_queue_is_bounded(broker: Broker) -> None:  # noqa: F811
    broker.config.set("imq.hostname", "127.0.0.1")  # no name lookup

    async def run() -> None:
        topic = LogTopic(broker)
        try:
            conn = Conn(1)
            broker.router.add_consumer(session(broker.router, conn), LOG_TOPIC, DEST_TOPIC)
            # A burst while the loop does not turn: the oldest records go.
            for i in range(QUEUE_LIMIT + 50):
                log.warning("burst %d", i)
            assert topic.dropped == 50
            await _turns()
            texts = [m["text"] for m, _ in _maps(conn)]
            assert texts[0] == "WARNING broker.logtest: burst 50"
            # The topic holds 100 messages at most (imq.log.destination.capacity): a
            # subscriber that does not acknowledge gets no more than that.
            dest = broker.router.lookup(LOG_TOPIC, DEST_TOPIC)
            assert dest is not None and dest.limit("maxNumMsgs") == 100
            assert len(texts) <= 100
        finally:
            topic.close()

    asyncio.run(run())


def test_the_output_level() -> None:
    assert output_level("WARNING") == logging.WARNING
    assert output_level("error") == logging.ERROR
    with pytest.raises(ConfigError, match="imq.log.destination.output"):
        output_level("LOUD")


def test_none_publishes_nothing(broker: Broker) -> None:  # noqa: F811
    broker.config.set("imq.log.destination.output", "NONE")

    async def run() -> None:
        topic = LogTopic(broker)
        assert topic.handler is None
        topic.close()

    asyncio.run(run())
