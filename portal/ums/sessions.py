"""Sids and the broker connections behind them.

OpenMQ's model: a ``login`` creates a client (a sid) with a JMS session of its own on a
cached connection of that user; up to ``max_clients_per_connection`` clients share one
connection, a further login opens another.  A request without sid is a one-shot on the
same pooled connections (a shared AUTO_ACKNOWLEDGE session).  Every connection is a real
connection of :mod:`openmq_client`, authenticated by the broker as any JMS client is, and
the broker's access control checks each producer and consumer.

Everything here runs on the portal process's event loop (Daphne's); a sweeper task closes
clients idle longer than the cache duration and then connections left without clients.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from dataclasses import dataclass, field

from openmq_client import (
    AckMode,
    Connection,
    Destination,
    JMSSecurityException,
    Message,
    MessageConsumer,
    MessageProducer,
    Queue,
    Session,
    Topic,
    connect,
)

from .config import UmsConfig

log = logging.getLogger("portal.ums")


class UnknownSid(LookupError):
    """The sid was never issued by this process, was closed, or expired."""


class SidLost(UnknownSid):
    """The sid's broker connection was lost (the broker stopped, crashed or restarted):
    its session is gone with it, an open transaction rolled back; log in again."""


# Sids remembered as lost (for the "log in again" answer) at most, and for how long
# beyond the cache duration.
MAX_LOST = 100_000


class LoginRefused(Exception):
    """The broker refused the user's credentials when the gateway connected."""


def destination(name: str, topic: bool) -> Destination:
    return Topic(name) if topic else Queue(name)


# Parked one-shot consumers per queue and connection: each may hold one message.
MAX_PARKED = 64


@dataclass(eq=False)
class OneShotProducer:
    """The producer of sends without sid to one destination, on a pooled connection's
    shared session; closed once idle for the cache duration, so the broker holds no
    producer on a destination nobody sends to (one kept open stops the broker from
    reaping an auto-created destination)."""

    producer: MessageProducer
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0


@dataclass(eq=False)
class PooledConnection:
    """One broker connection of one user, shared by up to N clients and the one-shots."""

    key: tuple[str, str]
    conn: Connection
    clients: int = 0
    last_used: float = field(default_factory=time.monotonic)
    _session: Session | None = None
    _producer: MessageProducer | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Queue name -> one-shot consumers waiting for the next receive, with when they were
    # parked.  Each has prefetch 1: the broker may push it one message, which the next
    # receive takes at once, or which goes back to the queue when it is closed.
    _parked: dict[str, list[tuple[MessageConsumer, float]]] = field(default_factory=dict)
    # (topic, name) -> the producer of sends without sid to that destination.
    _producers: dict[tuple[bool, str], OneShotProducer] = field(default_factory=dict)
    _producer_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, msg: Message, name: str, topic: bool) -> None:
        """A send without sid, on this destination's one-shot producer."""
        key = (topic, name)
        entry = self._producers.get(key)
        if entry is None:
            session, _ = await self.shared()
            async with self._producer_lock:
                entry = self._producers.get(key)
                if entry is None:
                    producer = await session.create_producer(destination(name, topic))
                    entry = self._producers[key] = OneShotProducer(producer)
        entry.busy += 1
        try:
            await entry.producer.send(msg)
        finally:
            entry.busy -= 1
            entry.last_used = time.monotonic()

    async def close_idle_producers(self, older_than: float) -> None:
        """Close one-shot producers last used before ``older_than`` (monotonic)."""
        for key, entry in list(self._producers.items()):
            if entry.busy or entry.last_used > older_than:
                continue
            del self._producers[key]
            if self.conn.is_closed:
                continue
            try:
                await entry.producer.close()
            except Exception as exc:  # the connection may be going away
                log.debug("UMS close of the producer of %s: %s", key[1], exc)

    async def one_shot_consumer(self, name: str, topic: bool) -> MessageConsumer:
        """A consumer for a receive without sid: a parked one of the queue, else new."""
        if not topic:
            stack = self._parked.get(name)
            while stack:
                cons, _ = stack.pop()
                if not cons.is_closed:
                    return cons
        session, _ = await self.shared()
        return await session.create_consumer(destination(name, topic), prefetch=1)

    async def done_with(self, cons: MessageConsumer, name: str, topic: bool, park: bool) -> None:
        """After a one-shot receive: park a queue's consumer, close any other (a topic
        subscriber would collect messages published between receives)."""
        if cons.is_closed or self.conn.is_closed:
            return
        stack = self._parked.setdefault(name, []) if park and not topic else None
        if stack is not None and len(stack) < MAX_PARKED:
            stack.append((cons, time.monotonic()))
            return
        await cons.close()

    async def close_parked(self, older_than: float) -> None:
        """Close consumers parked before ``older_than`` (monotonic): what the broker had
        pushed to them goes back to their queue."""
        for name, stack in list(self._parked.items()):
            keep = [(c, t) for c, t in stack if t > older_than and not c.is_closed]
            gone = [c for c, t in stack if t <= older_than and not c.is_closed]
            if keep:
                self._parked[name] = keep
            else:
                del self._parked[name]
            for cons in gone:
                if self.conn.is_closed:
                    return
                try:
                    await cons.close()
                except Exception as exc:  # the connection may be going away
                    log.debug("UMS close of a parked consumer of %s: %s", name, exc)

    async def shared(self) -> tuple[Session, MessageProducer]:
        """The one-shot session and its anonymous producer, made on first use."""
        if self._producer is None:
            async with self._lock:
                if self._producer is None:
                    self._session = await self.conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
                    self._producer = await self._session.create_producer(None)
        assert self._session is not None and self._producer is not None
        return self._session, self._producer


@dataclass(eq=False)
class UmsClient:
    """A logged-in sid: its own session (transacted or not) on a pooled connection."""

    sid: str
    user: str
    transacted: bool
    pooled: PooledConnection
    session: Session
    producer: MessageProducer
    consumers: dict[tuple[bool, str], MessageConsumer] = field(default_factory=dict)
    receive_locks: dict[tuple[bool, str], asyncio.Lock] = field(default_factory=dict)
    # A transacted sid's operations run one at a time so commit sees every send before it.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0

    def touch(self) -> None:
        self.last_used = time.monotonic()

    async def consumer(self, name: str, topic: bool) -> MessageConsumer:
        key = (topic, name)
        cons = self.consumers.get(key)
        if cons is None or cons.is_closed:
            # prefetch 1: a message the broker pushes ahead stays one, and goes back to
            # the destination when the sid is closed or expires.
            cons = await self.session.create_consumer(destination(name, topic), prefetch=1)
            self.consumers[key] = cons
        return cons

    def receive_lock(self, name: str, topic: bool) -> asyncio.Lock:
        return self.receive_locks.setdefault((topic, name), asyncio.Lock())


def _key(user: str, password: str) -> tuple[str, str]:
    # The password is part of the key so a cached connection is only ever reused by
    # someone who gave the same password the broker accepted.
    return (user, hashlib.sha256(password.encode("utf-8")).hexdigest())


class Gateway:
    """The process's sids and pooled connections (one per process, see :func:`gateway`)."""

    def __init__(self, config: UmsConfig) -> None:
        self.config = config
        self.clients: dict[str, UmsClient] = {}
        # Sids whose broker connection was lost -> when that was seen (monotonic).
        self.lost: dict[str, float] = {}
        # The broker could not be reached since (monotonic), None while it can: an
        # outage is logged once when it starts and once when it ends, not per request.
        self.unreachable_since: float | None = None
        self.pools: dict[tuple[str, str], list[PooledConnection]] = {}
        self._connecting: dict[tuple[str, str], asyncio.Lock] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._unparker: asyncio.Task[None] | None = None

    # -- connections -------------------------------------------------------------------

    def credentials(self, user: str | None, password: str | None) -> tuple[str, str]:
        """Who the gateway connects as: the caller (default guest/guest), or the gateway's
        own user when JMS authentication is off (OpenMQ's ums.service.authenticate)."""
        if not self.config.authenticate:
            return self.config.user, self.config.password
        return (user or "guest", password if password is not None else "guest")

    async def _open(self, key: tuple[str, str], user: str, password: str) -> PooledConnection:
        try:
            conn = await connect(
                self.config.broker_host,
                self.config.broker_port,
                user=user,
                password=password,
                connect_timeout=30.0,
            )
        except JMSSecurityException as exc:
            raise LoginRefused(f"the broker refused user {user!r}: {exc}") from exc
        await conn.start()
        self.note_reachable()
        pc = PooledConnection(key, conn)
        self.pools.setdefault(key, []).append(pc)
        log.debug("UMS connection opened for %s", user)
        return pc

    async def connection(self, user: str, password: str, *, slot: bool) -> PooledConnection:
        """A live connection of ``user``; ``slot`` takes one of its client places."""
        self.ensure_sweeper()
        key = _key(user, password)
        limit = self.config.max_clients_per_connection
        for pc in self.pools.get(key, ()):
            if not pc.conn.is_closed and (not slot or pc.clients < limit):
                break
        else:
            # One connect at a time per user: a burst of first requests shares it.
            lock = self._connecting.setdefault(key, asyncio.Lock())
            async with lock:
                for pc in self.pools.get(key, ()):
                    if not pc.conn.is_closed and (not slot or pc.clients < limit):
                        break
                else:
                    pc = await self._open(key, user, password)
        if slot:
            pc.clients += 1
        pc.last_used = time.monotonic()
        return pc

    def note_unreachable(self, exc: Exception) -> None:
        if self.unreachable_since is None:
            self.unreachable_since = time.monotonic()
            log.warning(
                "UMS: the broker at %s is not reachable (%s); requests get 503 until it is "
                "back, sids on lost connections 410",
                self.config.broker_address,
                exc,
            )

    def note_reachable(self) -> None:
        if self.unreachable_since is not None:
            down = time.monotonic() - self.unreachable_since
            self.unreachable_since = None
            log.warning(
                "UMS: the broker at %s is reachable again (after %.1f s); serving",
                self.config.broker_address,
                down,
            )

    def drop_if_dead(self, pc: PooledConnection) -> None:
        if pc.conn.is_closed:
            pool = self.pools.get(pc.key, [])
            if pc in pool:
                pool.remove(pc)

    # -- clients -----------------------------------------------------------------------

    async def login(self, user: str | None, password: str | None, transacted: bool) -> UmsClient:
        """A new sid with a session of its own."""
        user, password = self.credentials(user, password)
        pc = await self.connection(user, password, slot=True)
        try:
            session = await pc.conn.create_session(AckMode.AUTO_ACKNOWLEDGE, transacted)
            producer = await session.create_producer(None)
        except BaseException:
            pc.clients -= 1
            self.drop_if_dead(pc)
            raise
        sid = f"{self.config.node}.{secrets.token_urlsafe(18)}"
        client = UmsClient(sid, user, transacted, pc, session, producer)
        self.clients[sid] = client
        log.debug("UMS login %s sid=%s transacted=%s", user, sid, transacted)
        return client

    def client(self, sid: str) -> UmsClient:
        client = self.clients.get(sid)
        if client is None:
            if sid in self.lost:
                raise SidLost(sid)
            raise UnknownSid(sid)
        if client.pooled.conn.is_closed:
            self.forget_lost(client)
            raise SidLost(sid)
        client.touch()
        return client

    def forget_lost(self, client: UmsClient) -> None:
        """Drop a sid whose broker connection is gone; later requests with it are told
        it was lost (not just unknown) for the cache duration."""
        if self.clients.pop(client.sid, None) is None:
            return
        client.pooled.clients -= 1
        self.drop_if_dead(client.pooled)
        if len(self.lost) >= MAX_LOST:
            self.lost.pop(next(iter(self.lost)))
        self.lost[client.sid] = time.monotonic()
        log.info("UMS sid %s of %s lost with its broker connection", client.sid, client.user)

    def lost_connection(self, sid: str | None) -> bool:
        """Whether ``sid`` names a sid whose broker connection is gone (it is then
        forgotten as lost)."""
        if not sid:
            return False
        client = self.clients.get(sid)
        if client is not None and client.pooled.conn.is_closed:
            self.forget_lost(client)
            return True
        return sid in self.lost

    async def close_client(self, sid: str) -> bool:
        """Close a sid: its session (an open transaction rolls back, unacknowledged
        messages go back to their destinations); False if it was not there."""
        client = self.clients.pop(sid, None)
        if client is None:
            return False
        client.pooled.clients -= 1
        client.pooled.last_used = time.monotonic()
        try:
            if not client.session.is_closed:
                await client.session.close()
        except Exception as exc:  # the connection may be gone already
            log.debug("UMS close of sid %s: %s", sid, exc)
        self.drop_if_dead(client.pooled)
        return True

    # -- the sweeper -------------------------------------------------------------------

    def ensure_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            loop = asyncio.get_running_loop()
            self._sweeper = loop.create_task(self._sweep_forever())
            if self.config.receive_linger_ms > 0:
                self._unparker = loop.create_task(self._unpark_forever())

    async def _unpark_forever(self) -> None:
        linger = self.config.receive_linger_ms / 1000
        while True:
            await asyncio.sleep(linger / 2)
            try:
                older_than = time.monotonic() - linger
                for pool in list(self.pools.values()):
                    for pc in list(pool):
                        await pc.close_parked(older_than)
            except Exception:
                log.exception("UMS closing of parked consumers failed")

    async def _sweep_forever(self) -> None:
        interval = max(self.config.sweep_interval_ms, 10) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except Exception:
                log.exception("UMS sweep failed")

    async def sweep(self) -> None:
        """Close clients idle for the cache duration, then idle connections without clients."""
        now = time.monotonic()
        idle = self.config.cache_duration_ms / 1000
        for sid, seen in list(self.lost.items()):
            if now - seen >= idle:
                del self.lost[sid]
        for sid, client in list(self.clients.items()):
            if client.pooled.conn.is_closed:
                self.forget_lost(client)
                continue
            if client.busy == 0 and now - client.last_used >= idle:
                log.info("UMS sid %s of %s expired", sid, client.user)
                await self.close_client(sid)
        for key, pool in list(self.pools.items()):
            for pc in list(pool):
                if not pc.conn.is_closed:
                    await pc.close_idle_producers(now - idle)
                if pc.conn.is_closed or (pc.clients <= 0 and now - pc.last_used >= idle):
                    pool.remove(pc)
                    if not pc.conn.is_closed:
                        await pc.conn.close()
            if not pool:
                del self.pools[key]

    async def close(self) -> None:
        for task in (self._sweeper, self._unparker):
            if task is not None:
                task.cancel()
        for sid in list(self.clients):
            await self.close_client(sid)
        for pool in self.pools.values():
            for pc in pool:
                if not pc.conn.is_closed:
                    await pc.conn.close()
        self.pools.clear()


_gateway: Gateway | None = None


def gateway() -> Gateway:
    """The process's gateway, made on first use."""
    global _gateway
    if _gateway is None:
        from .config import ums_config

        _gateway = Gateway(ums_config())
    return _gateway


async def shutdown() -> None:
    """Close the process's gateway, if it was made (the server is stopping)."""
    global _gateway
    gw, _gateway = _gateway, None
    if gw is not None:
        await gw.close()
