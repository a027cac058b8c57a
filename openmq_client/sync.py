"""A blocking wrapper over the asyncio client, for code without an event loop.

Each connection gets a daemon thread running its own event loop (uvloop's when it is
installed); the wrapper objects below forward every call to that loop and wait for
the result.  Method names are those of the asyncio API, without ``await``::

    from openmq_client.sync import connect
    conn = connect("127.0.0.1", 7676, user="guest", password="guest")
    sess = conn.create_session()
    prod = sess.create_producer(Queue("q1"))
    prod.send(TextMessage("hi"), persistent=False)

Message listeners run in a per-session worker thread (never on the loop thread), so a
listener may call the blocking API, including ``message.acknowledge()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from broker.protocol.types import AckMode

from . import connection as _aconn
from .consumer import MessageConsumer, QueueBrowser
from .destination import Destination, Queue, TemporaryQueue, TemporaryTopic, Topic
from .errors import IllegalStateException, JMSException
from .message import Message
from .producer import MessageProducer
from .session import Session

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a project dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class _Runner:
    """An event loop in a daemon thread, and a way to run coroutines on it from outside."""

    def __init__(self) -> None:
        self.loop = _new_loop()
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._main, args=(ready,), name="openmq-client-loop", daemon=True
        )
        self.thread.start()
        ready.wait()

    def _main(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it finishes."""
        if self.in_loop_thread():
            coro.close()
            raise IllegalStateException("blocking client call from the client's own loop thread")
        if self.loop.is_closed():
            coro.close()
            raise IllegalStateException("connection is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        """Run a plain function on the loop thread and return its result."""

        async def wrapper() -> T:
            return fn()

        return self.run(wrapper())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.in_loop_thread():
            self.thread.join(10)
            self.loop.close()


def connect(
    host: str = "127.0.0.1",
    port: int = 7676,
    *,
    exception_listener: Callable[[JMSException], Any] | None = None,
    **options: Any,
) -> SyncConnection:
    """Blocking :func:`openmq_client.connect`; same arguments."""
    runner = _Runner()
    try:
        conn = runner.run(_aconn.connect(host, port, **options))
    except BaseException:
        runner.stop()
        raise
    conn._sync_runner = runner
    sc = SyncConnection(conn, runner)
    if exception_listener is not None:
        sc.set_exception_listener(exception_listener)
    return sc


class SyncConnection:
    """Blocking view of a :class:`~openmq_client.connection.Connection`."""

    def __init__(self, conn: _aconn.Connection, runner: _Runner) -> None:
        self._conn = conn
        self._runner = runner
        self._executors: list[concurrent.futures.ThreadPoolExecutor] = []

    @property
    def async_connection(self) -> _aconn.Connection:
        return self._conn

    @property
    def connection_id(self) -> int | None:
        return self._conn.connection_id

    @property
    def client_id(self) -> str | None:
        return self._conn.client_id

    @property
    def is_closed(self) -> bool:
        return self._conn.is_closed

    def set_client_id(
        self, client_id: str, *, shared: bool | None = None, namespace: str | None = None
    ) -> None:
        self._runner.run(self._conn.set_client_id(client_id, shared=shared, namespace=namespace))

    def set_exception_listener(self, listener: Callable[[JMSException], Any] | None) -> None:
        """The listener is called in a worker thread."""
        if listener is None:
            self._conn.set_exception_listener(None)
            return

        def on_error(exc: JMSException) -> None:
            threading.Thread(target=listener, args=(exc,), daemon=True).start()

        self._conn.set_exception_listener(on_error)

    def create_session(
        self,
        ack_mode: int = AckMode.AUTO_ACKNOWLEDGE,
        transacted: bool = False,
        **options: Any,
    ) -> SyncSession:
        s = self._runner.run(self._conn.create_session(ack_mode, transacted, **options))
        executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="openmq-session")
        self._executors.append(executor)
        return SyncSession(s, self._runner, executor)

    def start(self) -> None:
        self._runner.run(self._conn.start())

    def stop(self) -> None:
        self._runner.run(self._conn.stop())

    def create_temporary_queue(self) -> TemporaryQueue:
        return self._runner.run(self._conn.create_temporary_queue())

    def create_temporary_topic(self) -> TemporaryTopic:
        return self._runner.run(self._conn.create_temporary_topic())

    def close(self) -> None:
        """Close the connection and stop its loop thread."""
        if self._runner.loop.is_closed():
            return
        try:
            self._runner.run(self._conn.close())
        finally:
            for ex in self._executors:
                ex.shutdown(wait=False)
            self._runner.stop()

    def __enter__(self) -> SyncConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncSession:
    """Blocking view of a :class:`~openmq_client.session.Session`."""

    def __init__(
        self, session: Session, runner: _Runner, executor: concurrent.futures.ThreadPoolExecutor
    ) -> None:
        self._session = session
        self._runner = runner
        self._executor = executor

    @property
    def async_session(self) -> Session:
        return self._session

    @property
    def ack_mode(self) -> AckMode:
        return self._session.ack_mode

    @property
    def transacted(self) -> bool:
        return self._session.transacted

    @property
    def session_id(self) -> int:
        return self._session.session_id

    queue = staticmethod(Queue)
    topic = staticmethod(Topic)

    def create_producer(
        self, destination: Destination | None = None, **options: Any
    ) -> SyncProducer:
        p = self._runner.run(self._session.create_producer(destination, **options))
        return SyncProducer(p, self._runner)

    def create_consumer(
        self, destination: Destination, selector: str | None = None, **options: Any
    ) -> SyncConsumer:
        c = self._runner.run(self._session.create_consumer(destination, selector, **options))
        return SyncConsumer(c, self._runner, self._executor)

    def create_durable_subscriber(
        self, topic: Topic, name: str, selector: str | None = None, **options: Any
    ) -> SyncConsumer:
        c = self._runner.run(
            self._session.create_durable_subscriber(topic, name, selector, **options)
        )
        return SyncConsumer(c, self._runner, self._executor)

    def create_shared_consumer(
        self, topic: Topic, name: str, selector: str | None = None, **options: Any
    ) -> SyncConsumer:
        c = self._runner.run(self._session.create_shared_consumer(topic, name, selector, **options))
        return SyncConsumer(c, self._runner, self._executor)

    def create_shared_durable_consumer(
        self, topic: Topic, name: str, selector: str | None = None, **options: Any
    ) -> SyncConsumer:
        c = self._runner.run(
            self._session.create_shared_durable_consumer(topic, name, selector, **options)
        )
        return SyncConsumer(c, self._runner, self._executor)

    def unsubscribe(self, name: str) -> None:
        self._runner.run(self._session.unsubscribe(name))

    def create_browser(self, queue: Queue, selector: str | None = None) -> SyncBrowser:
        b = self._runner.run(self._session.create_browser(queue, selector))
        return SyncBrowser(b, self._runner)

    def create_temporary_queue(self) -> TemporaryQueue:
        return self._runner.run(self._session.create_temporary_queue())

    def create_temporary_topic(self) -> TemporaryTopic:
        return self._runner.run(self._session.create_temporary_topic())

    def request(
        self, destination: Destination, message: Message, timeout: float | None = None, **kw: Any
    ) -> Message | None:
        return self._runner.run(self._session.request(destination, message, timeout, **kw))

    def acknowledge(self) -> None:
        self._runner.run(self._session.acknowledge())

    def recover(self) -> None:
        self._runner.run(self._session.recover())

    def commit(self) -> None:
        self._runner.run(self._session.commit())

    def rollback(self) -> None:
        self._runner.run(self._session.rollback())

    def close(self) -> None:
        self._runner.run(self._session.close())

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncProducer:
    """Blocking view of a :class:`~openmq_client.producer.MessageProducer`."""

    def __init__(self, producer: MessageProducer, runner: _Runner) -> None:
        self._producer = producer
        self._runner = runner

    @property
    def destination(self) -> Destination | None:
        return self._producer.destination

    def send(self, message: Message, **options: Any) -> None:
        self._runner.run(self._producer.send(message, **options))

    def close(self) -> None:
        self._runner.run(self._producer.close())

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncConsumer:
    """Blocking view of a :class:`~openmq_client.consumer.MessageConsumer`."""

    def __init__(
        self,
        consumer: MessageConsumer,
        runner: _Runner,
        executor: concurrent.futures.ThreadPoolExecutor,
    ) -> None:
        self._consumer = consumer
        self._runner = runner
        self._executor = executor

    @property
    def destination(self) -> Destination:
        return self._consumer.destination

    @property
    def consumer_id(self) -> int:
        return self._consumer.consumer_id

    def receive(self, timeout: float | None = None) -> Message | None:
        return self._runner.run(self._consumer.receive(timeout))

    def receive_no_wait(self) -> Message | None:
        return self._runner.run(self._consumer.receive(0))

    def set_listener(self, listener: Callable[[Message], Any] | None) -> None:
        """Run ``listener`` in the session's worker thread for each message."""
        if listener is None:
            self._runner.call(lambda: self._consumer.set_listener(None))
            return
        executor = self._executor
        loop = self._runner.loop

        async def relay(msg: Message) -> None:
            await loop.run_in_executor(executor, listener, msg)

        self._runner.call(lambda: self._consumer.set_listener(relay))

    def close(self) -> None:
        self._runner.run(self._consumer.close())

    def __iter__(self) -> Iterator[Message]:
        while True:
            m = self.receive()
            if m is None:
                return
            yield m

    def __enter__(self) -> SyncConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncBrowser:
    """Blocking view of a :class:`~openmq_client.consumer.QueueBrowser`."""

    def __init__(self, browser: QueueBrowser, runner: _Runner) -> None:
        self._browser = browser
        self._runner = runner

    def messages(self) -> list[Message]:
        return self._runner.run(self._browser.messages())

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages())

    def close(self) -> None:
        self._runner.run(self._browser.close())


__all__ = [
    "SyncBrowser",
    "SyncConnection",
    "SyncConsumer",
    "SyncProducer",
    "SyncSession",
    "connect",
]
