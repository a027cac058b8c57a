"""A producer that costs next to nothing, to measure the broker rather than the client.

The Python client opens the connection, session and producer and sends one message the
ordinary way; its bytes become a template. Then the producer goes on with a blocking
socket on the same connection: it patches the template's timestamp and sequence number
(so every message has its own SysMessageID), sends it and reads the SEND_REPLY, checking
its status. Per message that is one ``sendall`` and one or two ``recv`` calls, the same
as the producers of bench/sync_floor.py, so the broker's rate can be read against the
floor without the Python client's own cost in it.
"""

from __future__ import annotations

import os
import socket
import struct
import time

from broker.protocol.packet import HEADER, Packet
from broker.protocol.types import PacketType, Status
from openmq_client import BytesMessage, Queue, connect

_TIMESTAMP_AT = 20  # offsets in the fixed header (docs/developers/protocol.md)
_SEQUENCE_AT = 48
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RawProducer:
    """One connection's producer, sending a fixed 1 KB message and waiting each time."""

    def __init__(self, conn, sock: socket.socket, template: bytes) -> None:
        self._conn = conn
        self._sock = sock
        self._msg = bytearray(template)
        self._seq = _I32.unpack_from(template, _SEQUENCE_AT)[0]
        self._buf = b""

    @classmethod
    async def open(
        cls, host: str, port: int, queue: str, persistent: bool, body: bytes
    ) -> RawProducer:
        conn = await connect(host, port, user="guest", password="guest")
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue(queue))
        sent: list[bytes] = []
        write_now = conn._write_now

        def capture(data: bytes) -> None:
            sent.append(bytes(data))
            write_now(data)

        conn._write_now = capture  # the one message's bytes, as the client wrote them
        await prod.send(BytesMessage(body), persistent=persistent, ack_on_produce=True)
        conn._write_now = write_now
        (template,) = sent
        conn._transport.pause_reading()  # from here the blocking socket reads the replies
        sock = socket.socket(fileno=os.dup(conn._transport.get_extra_info("socket").fileno()))
        sock.setblocking(True)
        return cls(conn, sock, template)

    def send(self) -> None:
        msg = self._msg
        self._seq = (self._seq + 1) & 0x7FFFFFFF
        _I32.pack_into(msg, _SEQUENCE_AT, self._seq)
        _I64.pack_into(msg, _TIMESTAMP_AT, int(time.time() * 1000))
        self._sock.sendall(msg)
        while True:
            reply = self._read_packet()
            if reply.type == PacketType.SEND_REPLY:
                break
            if reply.type != PacketType.PING:  # a PING may come first: the reply follows
                raise RuntimeError(f"unexpected {reply.type_name} from the broker")
        status = reply.properties.get("JMQStatus")
        if status != Status.OK:
            raise RuntimeError(f"SEND_REPLY status {status}")

    def _read_packet(self) -> Packet:
        buf = self._buf
        sock = self._sock
        while len(buf) < HEADER.size:
            buf += sock.recv(65536)
        size = _I32.unpack_from(buf, 8)[0]
        while len(buf) < size:
            buf += sock.recv(65536)
        self._buf = buf[size:]
        return Packet(bytes(buf[:size]))

    async def close(self) -> None:
        self._sock.setblocking(False)  # shares its flags with the transport's socket
        self._sock.close()
        self._conn._transport.resume_reading()
        await self._conn.close()
