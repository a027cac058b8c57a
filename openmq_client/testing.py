"""A scriptable stand-in broker, for client tests that must not need the real broker.

It answers like the recorder that captured ``shared/vectors`` (a port-mapper table,
HELLO_REPLY + AUTHENTICATE_REQUEST, and a ``type + 1`` reply with JMQStatus 200 to
every request with the A flag), records every packet the client sends, and lets a
test override the answer to any packet type or push packets of its own.  It runs its
own event loop in a thread so both the asyncio and the blocking client can talk to it.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable

from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_AUTH_TYPE,
    JMQ_BYTES,
    JMQ_CHALLENGE,
    JMQ_CONNECTION_ID,
    JMQ_CONSUMER_ID,
    JMQ_PRODUCER_ID,
    JMQ_PROTOCOL_LEVEL,
    JMQ_SEQUENCE,
    JMQ_SERVICE,
    JMQ_SESSION_ID,
    JMQ_SIZE,
    JMQ_STATUS,
    JMQ_TRANSACTION_ID,
    JMQ_VERSION,
)
from broker.protocol.packet import Packet, PacketReader, build_packet
from broker.protocol.sysmsgid import IP_ZERO
from broker.protocol.types import FLAG_A, MESSAGE_TYPES, PacketType, reply_type

Handler = Callable[[Packet], "list[bytes] | None"]


class StandIn:
    """Port mapper + JMS service on 127.0.0.1 ephemeral ports."""

    SESSION_ID = 1001
    PRODUCER_ID = 1002
    CONNECTION_ID = 4242424242
    TRANSACTION_ID = 3001

    def __init__(
        self,
        *,
        auth: str = "basic",
        nonce: bytes = b"1234567890",
        hello_size: int = -1,
        producer_size: int = -1,
    ) -> None:
        self.auth = auth
        self.nonce = nonce
        self.hello_size = hello_size
        self.producer_size = producer_size
        self.received: list[Packet] = []
        self.portmapper_requests: list[bytes] = []
        self.on: dict[int, Handler] = {}
        self._consumer_ids = itertools.count(2001)
        self._transport: asyncio.Transport | None = None
        self._cond = threading.Condition()
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    # ------------------------------------------------------------ plumbing

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self._ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        self._jms = await self.loop.create_server(lambda: _JmsProto(self), "127.0.0.1", 0)
        self.jms_port = self._jms.sockets[0].getsockname()[1]
        self._pm = await asyncio.start_server(self._portmapper, "127.0.0.1", 0)
        self.portmapper_port = self._pm.sockets[0].getsockname()[1]

    async def _portmapper(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 2)
        except TimeoutError:
            line = b""
        self.portmapper_requests.append(line)
        table = (
            f"101 imqbroker 301\n"
            f"portmapper tcp PORTMAPPER {self.portmapper_port} [imqbroker=imqbroker]\n"
            f"jms tcp NORMAL {self.jms_port}\n"
            f"admin tcp ADMIN {self.jms_port}\n"
            f"cluster_discovery tcp CLUSTER_DISCOVERY 0\n.\n"
        )
        writer.write(table.encode("ascii"))
        await writer.drain()
        try:
            await asyncio.wait_for(reader.read(), 2)
        except TimeoutError:
            pass
        writer.close()

    def close(self) -> None:
        def stop() -> None:
            if self._transport is not None:
                self._transport.close()
            self._jms.close()
            self._pm.close()
            self.loop.stop()

        self.loop.call_soon_threadsafe(stop)
        self._thread.join(5)

    def push(self, *packets: bytes) -> None:
        """Write packets to the connected client (thread-safe)."""

        def write() -> None:
            assert self._transport is not None, "no client connected"
            for p in packets:
                self._transport.write(p)

        self.loop.call_soon_threadsafe(write)

    def drop(self) -> None:
        """Close the client's socket abruptly."""
        self.loop.call_soon_threadsafe(lambda: self._transport and self._transport.abort())

    def _received(self, pkt: Packet) -> None:
        with self._cond:
            self.received.append(pkt)
            self._cond.notify_all()

    def wait_for(
        self,
        ptype: int,
        count: int = 1,
        timeout: float = 5.0,
        pred: Callable[[Packet], bool] | None = None,
    ) -> list[Packet]:
        """Block until ``count`` packets of ``ptype`` (matching ``pred``) were received."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [p for p in self.received if p.type == ptype and (pred is None or pred(p))]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    types = [p.type_name for p in self.received]
                    raise AssertionError(f"no {count}x {PacketType(ptype).name}; got {types}")
                self._cond.wait(left)

    async def await_for(
        self, ptype: int, count: int = 1, timeout: float = 5.0, pred=None
    ) -> list[Packet]:
        return await asyncio.to_thread(self.wait_for, ptype, count, timeout, pred)

    def types(self) -> list[str]:
        with self._cond:
            return [p.type_name for p in self.received]

    # ------------------------------------------------------------- answers

    @staticmethod
    def packet(ptype: int, props: dict | None = None, body: bytes = b"", **kw) -> bytes:
        return build_packet(ptype, props=props, body=body, ip=IP_ZERO, **kw)

    def reply(
        self, req: Packet, status: int = 200, ptype: int | None = None, body: bytes = b"", **props
    ) -> bytes:
        """A reply to ``req`` carrying JMQStatus and ``props`` (values already Java-typed)."""
        p: dict[str, object] = {JMQ_STATUS: JInt(status)}
        p.update(props)
        return self.packet(
            reply_type(req.type) if ptype is None else ptype, p, body, consumer_id=req.consumer_id
        )

    def default_answer(self, pkt: Packet) -> list[bytes]:
        t = pkt.type
        if t == PacketType.HELLO:
            hello = self.reply(
                pkt,
                **{
                    JMQ_CONNECTION_ID: JLong(self.CONNECTION_ID),
                    JMQ_PROTOCOL_LEVEL: JInt(500),
                    JMQ_VERSION: "6.9.0",
                    JMQ_SERVICE: "jms",
                    JMQ_SIZE: JInt(self.hello_size),
                },
            )
            challenge = self.packet(
                PacketType.AUTHENTICATE_REQUEST,
                {
                    JMQ_SEQUENCE: JInt(0),
                    JMQ_CHALLENGE: True,
                    JMQ_AUTH_TYPE: self.auth,
                    JMQ_STATUS: JInt(200),
                },
                self.nonce if self.auth == "digest" else b"",
                consumer_id=pkt.consumer_id,
            )
            return [hello, challenge]
        if not pkt.flags & FLAG_A:
            return []
        if t in MESSAGE_TYPES:
            return [self.reply(pkt)]
        if t == PacketType.CREATE_SESSION:
            return [self.reply(pkt, **{JMQ_SESSION_ID: JLong(self.SESSION_ID)})]
        if t == PacketType.ADD_PRODUCER:
            return [
                self.reply(
                    pkt,
                    **{
                        JMQ_PRODUCER_ID: JLong(self.PRODUCER_ID),
                        JMQ_SIZE: JInt(self.producer_size),
                        JMQ_BYTES: JLong(-1),
                    },
                )
            ]
        if t == PacketType.ADD_CONSUMER:
            return [self.reply(pkt, **{JMQ_CONSUMER_ID: JLong(next(self._consumer_ids))})]
        if t == PacketType.START_TRANSACTION:
            return [self.reply(pkt, **{JMQ_TRANSACTION_ID: JLong(self.TRANSACTION_ID)})]
        return [self.reply(pkt)]

    def _answer(self, pkt: Packet) -> None:
        handler = self.on.get(pkt.type)
        out = handler(pkt) if handler is not None else None
        if out is None:
            out = self.default_answer(pkt)
        assert self._transport is not None
        for data in out:
            self._transport.write(data)
        if pkt.type == PacketType.GOODBYE and pkt.flags & FLAG_A and handler is None:
            self._transport.close()


class _JmsProto(asyncio.Protocol):
    def __init__(self, standin: StandIn) -> None:
        self.s = standin
        self.reader = PacketReader()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.s._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for pkt in self.reader.feed(data):
            assert isinstance(pkt, Packet), pkt
            self.s._received(pkt)
            self.s._answer(pkt)


def message_packet(
    ptype: int = PacketType.TEXT_MESSAGE,
    body: bytes = b"x",
    *,
    consumer_id: int,
    sequence: int,
    flags: int = 0,
    dest: str = "q",
    dest_class: str = "com.sun.messaging.BasicQueue",
    props: dict | None = None,
    timestamp: int = 1_700_000_000_000,
    delivery_count: int = 1,
    correlation_id: str | None = None,
) -> bytes:
    """A delivery as a broker would send it (sender header kept, consumer id set)."""
    fields: dict[int, object] = {9: 1002, 1: dest, 6: dest_class, 11: delivery_count}
    if correlation_id is not None:
        fields[3] = correlation_id
    return build_packet(
        ptype,
        props=props,
        body=body,
        flags=flags,
        consumer_id=consumer_id,
        fields=fields,
        priority=4,
        timestamp=timestamp,
        ip=b"\x00" * 10 + b"\xff\xff" + bytes([10, 0, 0, 7]),
        port=40000,
        sequence=sequence,
    )
