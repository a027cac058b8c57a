"""Connecting to one broker of several, and reconnecting when it goes.

A broker of a cluster names the brokers operating with it in HELLO_REPLY's
``JMQBrokerList`` (``mq://host:port/,mq://host:port/``, port-mapper ports).
:func:`connect_any` connects to the first broker of an address list that answers.
:class:`FailoverConnection` is OpenMQ's ``imqReconnectEnabled`` with ``imqAddressList``:
when its broker goes it connects to the next one of its list (and of the cluster's), and
opens its sessions, producers and consumers again.  A persistent send whose SEND_REPLY
never came is sent again with the R bit (JMSRedelivered overridden to true, protocol
4.1's R bit) and its first SysMessageID, so nothing a producer was not told is stored is
lost, and a broker that had stored the first send answers NOT_MODIFIED and keeps it: one
copy.  Messages delivered but not acknowledged before the
failover come again from the broker that has them, flagged redelivered too.  Only
non-transacted sessions: a transaction open at the failover is lost with its broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from broker.protocol.names import JMQ_BROKER_LIST

from .connection import Connection, connect
from .destination import Destination
from .errors import IllegalStateException, JMSException
from .message import Message


def parse_address(text: str) -> tuple[str, int]:
    """``host:port``, ``mq://host:port/`` or ``mq://host:port/jms`` -> (host, port)."""
    rest = text.strip()
    if "://" in rest:
        rest = rest.split("://", 1)[1]
    rest = rest.split("/", 1)[0]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"not a broker address: {text!r}")
    return host, int(port)


def broker_list(conn: Connection) -> list[tuple[str, int]]:
    """The brokers ``conn``'s broker named in HELLO_REPLY (JMQBrokerList), if any."""
    hello = getattr(conn, "hello_reply", None) or {}
    text = str(hello.get(JMQ_BROKER_LIST) or "")
    out = []
    for part in text.split(","):
        if part.strip():
            try:
                out.append(parse_address(part))
            except ValueError:
                continue  # one bad entry does not hide the others
    return out


async def connect_any(
    addresses: Iterable[str | tuple[str, int]],
    *,
    attempts: int = 3,
    delay: float = 1.0,
    **options: Any,
) -> Connection:
    """Connect to the first broker of ``addresses`` that answers (port-mapper ports),
    going round the list up to ``attempts`` times with ``delay`` seconds between
    rounds.  ``options`` are :func:`~openmq_client.connect`'s."""
    targets = [a if isinstance(a, tuple) else parse_address(a) for a in addresses]
    if not targets:
        raise JMSException("no broker address to connect to")
    options.setdefault("connect_timeout", 10.0)
    errors: list[str] = []
    for round_ in range(max(1, attempts)):
        if round_:
            await asyncio.sleep(delay)
        for host, port in targets:
            try:
                return await connect(host, port, **options)
            except (JMSException, OSError, TimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc}")
    raise JMSException("no broker of the list answered: " + "; ".join(errors[-len(targets) :]))


class FailoverConnection:
    """A connection that reconnects over an address list (see the module docstring)."""

    def __init__(
        self,
        addresses: Iterable[str | tuple[str, int]],
        *,
        attempts: int = 10,
        delay: float = 1.0,
        **options: Any,
    ) -> None:
        self.addresses = [a if isinstance(a, tuple) else parse_address(a) for a in addresses]
        self.attempts = attempts
        self.delay = delay
        self.options = options
        self.reconnects = 0
        self.connection: Connection | None = None
        self._sessions: list[FailoverSession] = []
        self._started = False
        self._closed = False
        self._lock = asyncio.Lock()

    @classmethod
    async def open(
        cls, addresses: Iterable[str | tuple[str, int]], **kwargs: Any
    ) -> FailoverConnection:
        fc = cls(addresses, **kwargs)
        await fc._connect()
        return fc

    async def _connect(self) -> None:
        conn = await connect_any(
            self.addresses, attempts=self.attempts, delay=self.delay, **self.options
        )
        for a in broker_list(conn):  # the cluster's brokers join the list
            if a not in self.addresses:
                self.addresses.append(a)
        self.connection = conn

    def lost(self, conn: Connection) -> bool:
        """``conn`` is this connection's and its broker went (not closed by us)."""
        return not self._closed and conn.is_closed

    async def recover(self, failed: Connection) -> None:
        """Connect again (once, whoever notices first) and reopen everything."""
        async with self._lock:
            if self._closed:
                raise IllegalStateException("connection is closed")
            if self.connection is not failed:
                return  # another task reconnected already
            await self._connect()
            self.reconnects += 1
            for sess in self._sessions:
                await sess._reopen()
            if self._started:
                await self.connection.start()  # type: ignore[union-attr]

    async def create_session(self, ack_mode: int = 1) -> FailoverSession:
        assert self.connection is not None
        sess = FailoverSession(self, ack_mode)
        await sess._reopen()
        self._sessions.append(sess)
        return sess

    async def start(self) -> None:
        self._started = True
        assert self.connection is not None
        await self.connection.start()

    async def close(self) -> None:
        self._closed = True
        if self.connection is not None and not self.connection.is_closed:
            await self.connection.close()


class FailoverSession:
    """A non-transacted session of a :class:`FailoverConnection`."""

    def __init__(self, fc: FailoverConnection, ack_mode: int) -> None:
        self.fc = fc
        self.ack_mode = ack_mode
        self.session: Any = None
        self._producers: list[FailoverProducer] = []
        self._consumers: list[FailoverConsumer] = []

    async def _reopen(self) -> None:
        assert self.fc.connection is not None
        self.session = await self.fc.connection.create_session(self.ack_mode)
        for p in self._producers:
            p.producer = await self.session.create_producer(p.destination)
        for c in self._consumers:
            c.consumer = await self.session.create_consumer(c.destination, c.selector)

    async def create_producer(self, destination: Destination) -> FailoverProducer:
        p = FailoverProducer(self, destination)
        p.producer = await self.session.create_producer(destination)
        self._producers.append(p)
        return p

    async def create_consumer(
        self, destination: Destination, selector: str | None = None
    ) -> FailoverConsumer:
        c = FailoverConsumer(self, destination, selector)
        c.consumer = await self.session.create_consumer(destination, selector)
        self._consumers.append(c)
        return c


class FailoverProducer:
    """Sends through whichever broker the connection is on now."""

    def __init__(self, session: FailoverSession, destination: Destination) -> None:
        self.session = session
        self.destination = destination
        self.producer: Any = None
        self.resent = 0  # sends repeated after a failover (R bit)

    async def send(self, message: Message, **options: Any) -> None:
        fc = self.session.fc
        again = False
        while True:
            conn = fc.connection
            assert conn is not None
            try:
                await self.producer.send(message, redelivered=again, **options)
                return
            except JMSException:
                if not fc.lost(conn):
                    raise
            await fc.recover(conn)
            again = True
            self.resent += 1


class FailoverConsumer:
    """Receives from whichever broker the connection is on now."""

    def __init__(
        self, session: FailoverSession, destination: Destination, selector: str | None
    ) -> None:
        self.session = session
        self.destination = destination
        self.selector = selector
        self.consumer: Any = None

    async def receive(self, timeout: float | None = None) -> Message | None:
        """The next message, or None after ``timeout`` seconds (across a failover)."""
        fc = self.session.fc
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            conn = fc.connection
            assert conn is not None
            left = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                m = await self.consumer.receive(left)
            except JMSException:
                if not fc.lost(conn):
                    raise
                m = None
            if m is not None or not fc.lost(conn):
                return m
            await fc.recover(conn)


__all__ = [
    "FailoverConnection",
    "FailoverConsumer",
    "FailoverProducer",
    "FailoverSession",
    "broker_list",
    "connect_any",
    "parse_address",
]
