"""The floor for a consumer's acknowledgement round trip, driven by the stock C client.

    .venv/bin/python bench/ack_floor.py                 # 50,000 messages, 3 rounds
    .venv/bin/python bench/ack_floor.py --count 20000 --rounds 5

An AUTO_ACKNOWLEDGE consumer of the stock OpenMQ clients waits for the broker's reply to
every ACKNOWLEDGE, so its rate is one over that round trip.  This measures the round trip
two ways, alternately, with the same C consumer (bench/c/cbench.c, libmqcrt):

- **floor**: a minimal asyncio (uvloop) server in this file that speaks just enough of the
  protocol to be a broker to that consumer (port mapper, HELLO, basic AUTHENTICATE, a reply
  of status 200 to every request) and, once the consumer has started, hands it copies of
  one 1 KB BYTES message within the consumer's and the connection's flow windows.  Each
  ACKNOWLEDGE gets its reply in the same loop turn; nothing else happens.  Each
  connection is given ``--count`` messages, as if the queue had been filled beforehand.  No broker can
  answer faster than this on the same machine.
- **broker**: our broker (a fresh process, file store, defaults) with the queue filled
  beforehand by a C producer, drained by the same consumer.

It prints each run's msgs/s and microseconds per message, and the broker's round trip as a
ratio to the floor's (issue 12's target: within 1.3x).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from c_client import build  # noqa: E402

from broker.protocol.jtypes import JInt, JLong  # noqa: E402
from broker.protocol.packet import (  # noqa: E402
    OFF_CONSUMER_ID,
    OFF_FLAGS,
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    PacketReader,
    build_packet,
)
from broker.protocol.portmapper import PortMapperTable, ServiceEntry  # noqa: E402
from broker.protocol.types import FLAG_A, FLAG_C, FLAG_F, FLAG_Q, PacketType  # noqa: E402

_SEQ = struct.Struct(">i")
_FLAGS_CID = struct.Struct(">Hq")
# The sysmessageID's sequence number: after timestamp (8), address (16) and port (4).
OFF_SEQUENCE = 20 + 8 + 16 + 4
REPLY_PROPS = {
    PacketType.CREATE_SESSION: lambda n: {"JMQSessionID": JLong(n)},
    PacketType.ADD_PRODUCER: lambda n: {"JMQProducerID": JLong(n)},
}


class FloorConnection(asyncio.Protocol):
    """One client connection to the floor server (see the module docstring)."""

    def __init__(self, template: bytes, available: int) -> None:
        self.reader = PacketReader()
        self.template = template
        # Like a queue filled beforehand: the C client resumes flow as soon as it has
        # read a batch, so an endless supply would flood it.
        self.available = available
        self.seq = 0
        self.ids = 0
        self.consumer: int | None = None
        self.prefetch = -1
        self.credit = 0
        self.conn_window = -1
        self.conn_left = -1
        self.started = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        out: list[bytes] = []
        for pkt in self.reader.feed(data):
            self.handle(pkt, out)
        self.pump(out)
        if out:
            self.transport.write(b"".join(out))

    def reply(self, pkt, out: list[bytes], props: dict | None = None) -> None:
        p = {"JMQStatus": JInt(200)}
        if props:
            p.update(props)
        out.append(build_packet(pkt.type + 1, props=p, consumer_id=pkt.consumer_id))

    def handle(self, pkt, out: list[bytes]) -> None:
        t = pkt.type
        if t == PacketType.ACKNOWLEDGE:
            if pkt.flags & FLAG_A:
                out.append(self.ack_reply(pkt.consumer_id))
            return
        props = pkt.properties
        if t == PacketType.HELLO:
            size = props.get("JMQSize", props.get("JMQRBufferSize"))
            self.conn_window = self.conn_left = int(size) if isinstance(size, int) else -1
            self.reply(
                pkt,
                out,
                {"JMQConnectionID": JLong(1), "JMQProtocolLevel": JInt(500), "JMQSize": JInt(-1)},
            )
            out.append(
                build_packet(
                    PacketType.AUTHENTICATE_REQUEST,
                    props={"JMQAuthType": "basic", "JMQChallenge": True, "JMQStatus": JInt(200)},
                    consumer_id=pkt.consumer_id,
                )
            )
        elif t == PacketType.ADD_CONSUMER:
            self.ids += 1
            self.consumer = self.ids
            size = props.get("JMQSize")
            self.prefetch = int(size) if isinstance(size, int) else -1
            self.credit = self.prefetch
            self.reply(
                pkt, out, {"JMQConsumerID": JLong(self.consumer), "JMQSize": JInt(self.prefetch)}
            )
        elif t == PacketType.START:
            self.started = True
            if pkt.flags & FLAG_A:
                self.reply(pkt, out)
        elif t == PacketType.STOP:
            self.started = False
            self.reply(pkt, out)
        elif t == PacketType.RESUME_FLOW:
            if props.get("JMQConsumerID") is not None:
                self.credit = self.prefetch
            else:
                self.conn_left = self.conn_window
        elif t == PacketType.GOODBYE:
            self.reply(pkt, out)
            self.transport.close()
        elif pkt.flags & FLAG_A:
            self.ids += 1
            extra = REPLY_PROPS.get(t)
            self.reply(pkt, out, extra(self.ids) if extra else None)

    def ack_reply(self, cid: int) -> bytes:
        return build_packet(
            PacketType.ACKNOWLEDGE_REPLY, props={"JMQStatus": JInt(200)}, consumer_id=cid
        )

    def pump(self, out: list[bytes]) -> None:
        """Hand out messages while both flow windows allow (the last before a pause
        carries C for the consumer's window, F for the connection's)."""
        if not self.started or self.consumer is None:
            return
        while self.credit != 0 and self.conn_left != 0 and self.available > 0:
            self.available -= 1
            flags = FLAG_Q
            if self.credit > 0:
                self.credit -= 1
                if self.credit == 0:
                    flags |= FLAG_C
            if self.conn_left > 0:
                self.conn_left -= 1
                if self.conn_left == 0:
                    flags |= FLAG_F
            buf = bytearray(self.template)
            self.seq += 1
            _SEQ.pack_into(buf, OFF_SEQUENCE, self.seq)
            _FLAGS_CID.pack_into(buf, OFF_FLAGS, flags, self.consumer)
            out.append(bytes(buf))


class PortMapper(asyncio.Protocol):
    def __init__(self, jms_port: int) -> None:
        self.jms_port = jms_port

    def connection_made(self, transport) -> None:
        table = PortMapperTable(
            "floor", "301", [ServiceEntry("jms", "tcp", "NORMAL", self.jms_port)]
        )
        # The client reads the table up to EOF, as from OpenMQ's port mapper.
        transport.write(table.encode())
        transport.close()


async def serve_floor(queue: str, size: int, count: int, ready: asyncio.Future) -> None:
    loop = asyncio.get_running_loop()
    template = build_packet(
        PacketType.BYTES_MESSAGE,
        body=bytes(size),
        flags=FLAG_Q,
        fields={VH_DESTINATION: queue, VH_DESTINATION_CLASS: "com.sun.messaging.BasicQueue"},
        ip=bytes(10) + b"\xff\xff\x7f\x00\x00\x01",
        port=1,
    )
    assert OFF_CONSUMER_ID == OFF_FLAGS + 2
    jms = await loop.create_server(lambda: FloorConnection(template, count), "127.0.0.1", 0)
    jms_port = jms.sockets[0].getsockname()[1]
    pm = await loop.create_server(lambda: PortMapper(jms_port), "127.0.0.1", 0)
    ready.set_result(pm.sockets[0].getsockname()[1])
    await asyncio.Event().wait()


def run_floor_server(queue: str, size: int, count: int, conn) -> None:
    """Child process: the floor server; sends its port mapper port through ``conn``."""
    import uvloop

    async def main() -> None:
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(serve_floor(queue, size, count, ready))
        conn.send(await ready)
        await task

    uvloop.run(main())


def consume(exe: Path, port: int, queue: str, count: int) -> float:
    out = subprocess.run(
        [str(exe), "127.0.0.1", str(port), "consume", queue, str(count)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return count / float(out.split()[-2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import multiprocessing as mp

    from broker.launcher import start_broker

    tmp = Path(tempfile.mkdtemp(prefix="ackfloor-"))
    exe = build(tmp)
    parent, child = mp.Pipe()
    floor = mp.get_context("fork").Process(
        target=run_floor_server, args=("floorq", args.size, args.count, child), daemon=True
    )
    floor.start()
    floor_port = parent.recv()
    (tmp / "broker").mkdir()
    broker = start_broker(tmp / "broker")
    rates: dict[str, list[float]] = {"floor": [], "broker": []}
    try:
        for r in range(args.rounds):
            rate = consume(exe, floor_port, "floorq", args.count)
            rates["floor"].append(rate)
            q = f"ackfloor{uuid.uuid4().hex[:8]}"
            subprocess.run(
                [
                    str(exe),
                    "127.0.0.1",
                    str(broker.portmapper_port),
                    "produce",
                    q,
                    str(args.count),
                    str(args.size),
                ],
                check=True,
                capture_output=True,
                timeout=600,
            )
            rate_b = consume(exe, broker.portmapper_port, q, args.count)
            rates["broker"].append(rate_b)
            print(
                f"round {r + 1}: floor {rate:,.0f} msgs/s ({1e6 / rate:.1f} us/msg), "
                f"broker {rate_b:,.0f} msgs/s ({1e6 / rate_b:.1f} us/msg)",
                flush=True,
            )
    finally:
        broker.stop()
        floor.kill()
    f = statistics.median(rates["floor"])
    b = statistics.median(rates["broker"])
    print(
        f"median: floor {f:,.0f} msgs/s, broker {b:,.0f} msgs/s; "
        f"broker round trip = {f / b:.2f}x the floor's "
        f"(C client, AUTO_ACKNOWLEDGE, {args.size} B, {args.count} messages, pid {os.getpid()})"
    )


if __name__ == "__main__":
    main()
