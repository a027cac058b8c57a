"""The floor for a consumer's acknowledgement round trip, driven by the stock C or Java client.

    .venv/bin/python bench/ack_floor.py --client java        # 50,000 messages, 3 rounds
    .venv/bin/python bench/ack_floor.py --client c --count 20000 --rounds 5
    .venv/bin/python bench/ack_floor.py --client java --stock  # and the stock broker
    .venv/bin/python bench/ack_floor.py --baseline DIR         # and ours from another checkout
    .venv/bin/python bench/ack_floor.py --client java --tail --rate 5000 --seconds 20

An AUTO_ACKNOWLEDGE consumer of the stock OpenMQ clients waits for the broker's reply to
every ACKNOWLEDGE, so its rate is one over that round trip.  This measures the round trip
with the same consumer against, alternately in each round:

- **floor**: a minimal asyncio (uvloop) server in this file that speaks just enough of the
  protocol to be a broker to that consumer (port mapper, HELLO, basic AUTHENTICATE, a reply
  of status 200 to every request that asks for one) and, once the consumer has started,
  hands it copies of one 1 KB BYTES message within the consumer's and the connection's flow
  windows.  Each ACKNOWLEDGE gets its reply in the same loop turn; nothing else happens.
  Each connection is given ``--count`` messages, as if the queue had been filled
  beforehand.  No broker can answer faster than this on the same machine.
- **broker**: our broker (a fresh process, file store, defaults) with the queue filled
  beforehand by a producer of the same client, drained by the same consumer.
- **stock** (``--stock``): the stock OpenMQ 6.9 broker (third_party/openmq/realbroker), likewise.
- **baseline** (``--baseline DIR``): our broker from another checkout, likewise (before/after:
  ``git archive OLD | tar -x -C DIR``).

Each drain also prints the server's CPU time per message (user + system, /proc): on a busy
machine a steadier figure than the rate, which also counts waiting for a core.  The Java
consumer's rate is the median of its whole seconds after the first three (the JVM runs the
client interpreted at first).

The C consumer is bench/c/cbench.c (libmqcrt); the Java consumer is bench/java/JmsBench.java
with ``producers=0`` (it only drains).  Each body starts with CLOCK_MONOTONIC nanoseconds
(what Java's System.nanoTime() reads on Linux) and the message's number, JmsBench's layout.

``--tail`` is the steady-rate test instead: the floor sends ``--rate`` messages a second
(each stamped with the time it was due, so a message held back by flow control counts
its wait; the loop's timers tick per millisecond, so a floor latency includes up to 1 ms
of that), and JmsBench with a producer at the same rate runs against our broker and the
stock broker; each prints every second's worst latency, p50, p99 and max.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
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
from broker.stock_paths import JAVA_CLIENT  # noqa: E402

JARS = [JAVA_CLIENT / "imq.jar", JAVA_CLIENT / "jakarta.jms-api-3.1.0.jar"]

_SEQ = struct.Struct(">i")
_FLAGS_CID = struct.Struct(">Hq")
_STAMP = struct.Struct(">qi")
# The sysmessageID's sequence number: after timestamp (8), address (16) and port (4).
OFF_SEQUENCE = 20 + 8 + 16 + 4
REPLY_PROPS = {
    PacketType.CREATE_SESSION: lambda n: {"JMQSessionID": JLong(n)},
    PacketType.ADD_PRODUCER: lambda n: {"JMQProducerID": JLong(n)},
    PacketType.GET_LICENSE: lambda n: {"JMQLicense": "unl", "JMQLicenseDesc": "floor"},
}


class FloorConnection(asyncio.Protocol):
    """One client connection to the floor server (see the module docstring)."""

    def __init__(self, template: bytes, size: int, available: int, rate: float) -> None:
        self.reader = PacketReader()
        self.template = template
        # The body's offset: JmsBench reads a send time and a number there.
        self.body_at = len(template) - size
        # Like a queue filled beforehand: the C client resumes flow as soon as it has
        # read a batch, so an endless supply would flood it.
        self.available = available
        self.rate = rate
        self.due = 0 if rate else available  # messages that may go out by now
        self.t0 = 0
        self.tick: asyncio.TimerHandle | None = None
        self.held = 0  # paced: ticks that left due messages behind (no flow credit)
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

    def connection_lost(self, exc) -> None:
        if self.tick is not None:
            self.tick.cancel()
        if self.rate and self.seq:
            print(
                f"floor: sent {self.seq} at {self.rate:.0f}/s; {self.held} ticks (1 ms) left due "
                "messages waiting for flow credit",
                file=sys.stderr,
                flush=True,
            )

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
            self.conn_window = self.conn_left = (
                int(size) if isinstance(size, int) and size > 0 else -1
            )
            self.reply(
                pkt,
                out,
                {
                    "JMQConnectionID": JLong(1),
                    "JMQProtocolLevel": props.get("JMQProtocolLevel", JInt(500)),
                    "JMQSize": JInt(-1),
                },
            )
            # Basic: both clients then send the password as OpenMQ's basic scheme does;
            # the Java client would use digest unless asked for basic.
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
            self.prefetch = int(size) if isinstance(size, int) and size > 0 else -1
            self.credit = self.prefetch
            self.reply(
                pkt, out, {"JMQConsumerID": JLong(self.consumer), "JMQSize": JInt(self.prefetch)}
            )
        elif t == PacketType.START:
            if not self.started and self.rate and self.tick is None:
                self.t0 = time.monotonic_ns()
                self.tick = asyncio.get_running_loop().call_later(0.001, self.on_tick)
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

    def on_tick(self) -> None:
        """Paced mode: let out what is due by now (the loop's timers tick per ms)."""
        self.due = min(self.available, int((time.monotonic_ns() - self.t0) * self.rate / 1e9) + 1)
        out: list[bytes] = []
        self.pump(out)
        if out:
            self.transport.write(b"".join(out))
        if self.seq < self.due:
            self.held += 1
        if self.seq < self.available:
            self.tick = asyncio.get_running_loop().call_later(0.001, self.on_tick)
        else:
            self.tick = None

    def pump(self, out: list[bytes]) -> None:
        """Hand out messages while both flow windows allow (the last before a pause
        carries C for the consumer's window, F for the connection's)."""
        if not self.started or self.consumer is None:
            return
        while self.credit != 0 and self.conn_left != 0 and self.seq < self.due:
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
            # The time it was due (paced) or now (drained), and its number.
            stamp = self.t0 + int(self.seq * 1e9 / self.rate) if self.rate else time.monotonic_ns()
            _STAMP.pack_into(buf, self.body_at, stamp, self.seq)
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


async def serve_floor(
    queue: str, size: int, count: int, rate: float, ready: asyncio.Future
) -> None:
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
    jms = await loop.create_server(
        lambda: FloorConnection(template, size, count, rate), "127.0.0.1", 0
    )
    jms_port = jms.sockets[0].getsockname()[1]
    pm = await loop.create_server(lambda: PortMapper(jms_port), "127.0.0.1", 0)
    ready.set_result(pm.sockets[0].getsockname()[1])
    await asyncio.Event().wait()


def run_floor_server(queue: str, size: int, count: int, rate: float, conn) -> None:
    """Child process: the floor server; sends its port mapper port through ``conn``."""
    import uvloop

    async def main() -> None:
        ready: asyncio.Future = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(serve_floor(queue, size, count, rate, ready))
        conn.send(await ready)
        await task

    uvloop.run(main())


class Floor:
    """The floor server in a child process (fork), for one kind of run."""

    def __init__(self, size: int, count: int, rate: float = 0) -> None:
        import multiprocessing as mp

        parent, child = mp.Pipe()
        self.proc = mp.get_context("fork").Process(
            target=run_floor_server, args=("floorq", size, count, rate, child), daemon=True
        )
        self.proc.start()
        self.port: int = parent.recv()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.join(5)


# -- the C consumer -------------------------------------------------------------------


def c_consume(exe: Path, port: int, queue: str, count: int) -> float:
    out = subprocess.run(
        [str(exe), "127.0.0.1", str(port), "consume", queue, str(count)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return count / float(out.split()[-2])


def c_produce(exe: Path, port: int, queue: str, count: int, size: int) -> None:
    subprocess.run(
        [str(exe), "127.0.0.1", str(port), "produce", queue, str(count), str(size)],
        check=True,
        capture_output=True,
        timeout=600,
    )


# -- the Java consumer (bench/java/JmsBench.java) ---------------------------------------


def missing_java() -> list[str]:
    missing = [f"{t} (a JDK 17)" for t in ("javac", "java") if not _which(t)]
    missing += [f"the stock OpenMQ Java client jar {j}" for j in JARS if not j.is_file()]
    return missing


def _which(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None


def compile_jmsbench(out: Path) -> Path:
    missing = missing_java()
    if missing:
        sys.exit("cannot run the Java client; missing: " + "; ".join(missing))
    cp = os.pathsep.join(map(str, JARS))
    subprocess.run(
        ["javac", "-nowarn", "-cp", cp, "-d", str(out), str(ROOT / "bench/java/JmsBench.java")],
        check=True,
    )
    return out


class JavaRun:
    """One JmsBench run: its RESULT line as numbers, and every line it printed."""

    def __init__(self, classes: Path, port: int, jvm: list[str], **opts: object) -> None:
        cp = os.pathsep.join([*map(str, JARS), str(classes)])
        args = [f"{k}={v}" for k, v in opts.items()]
        p = subprocess.run(
            ["java", *jvm, "-cp", cp, "JmsBench", f"url=mq://127.0.0.1:{port}/jms", *args],
            capture_output=True,
            text=True,
            timeout=900,
        )
        self.lines = p.stdout.splitlines()
        result = [ln for ln in self.lines if ln.startswith("RESULT ")]
        if p.returncode != 0 or not result:
            sys.exit(f"JmsBench {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        self.result = {k: float(v) for k, v in (kv.split("=") for kv in result[-1].split()[1:])}
        self.seconds = [
            (int(m[1]), int(m[2]), float(m[3]))
            for ln in self.lines
            if (m := re.match(r"second (\d+): (\d+) deliveries, worst ([\d.]+) ms", ln))
        ]


WARM_UP_SECONDS = 3


def java_drain(
    classes: Path, port: int, queue: str, count: int, jvm: list[str], ack: str = "auto"
) -> tuple[float, list[int]]:
    """The consumer's steady rate: the median of its whole seconds after the first
    WARM_UP_SECONDS (the JVM runs the client interpreted at first: a few hundred msgs/s),
    or its overall rate when the run was too short for that; and each second's count."""
    # rate=1 only makes JmsBench print each second's count (it has no producer here).
    run = JavaRun(
        classes, port, jvm, producers=0, consumers=1, count=count, name=queue, ack=ack, rate=1
    )
    counts = [n for _s, n, _w in run.seconds]
    steady = counts[WARM_UP_SECONDS:-1]
    if len(steady) < 3:
        return run.result["consumer_rate"], counts
    return statistics.median(steady), counts


def java_fill(classes: Path, port: int, queue: str, count: int, size: int) -> None:
    JavaRun(classes, port, [], producers=1, consumers=0, count=count, size=size, name=queue)


# Runs in another checkout (--baseline DIR): its own broker.launcher starts its broker.
_BASELINE = """
import sys, tempfile
from pathlib import Path
from broker.launcher import start_broker
b = start_broker(Path(tempfile.mkdtemp(prefix="ackfloor-baseline-")))
print(b.portmapper_port, b.proc.pid, flush=True)
sys.stdin.read()
b.stop()
"""


class Baseline:
    """Our broker as another checkout has it (e.g. ``git archive OLD | tar -x -C DIR``),
    started with this venv's Python; stopped when this closes its stdin."""

    def __init__(self, checkout: Path) -> None:
        self.helper = subprocess.Popen(
            [sys.executable, "-c", _BASELINE],
            cwd=checkout,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        port, pid = self.helper.stdout.readline().split()  # type: ignore[union-attr]
        self.portmapper_port, self.pid = int(port), int(pid)

    def stop(self) -> None:
        self.helper.stdin.close()  # type: ignore[union-attr]
        self.helper.wait(60)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its threads so far (a steadier figure than a rate
    on a busy machine: what the server spent, not what it waited)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- main -------------------------------------------------------------------------------


def drain_rounds(args, tmp: Path) -> None:
    from broker.launcher import start_broker, start_stock_broker

    java = args.client == "java"
    if java:
        classes = compile_jmsbench(tmp / "classes")
    else:
        exe = build(tmp)
    jvm = args.jvm_arg or []

    def drain(port: int, queue: str) -> float:
        if java:
            rate, counts = java_drain(classes, port, queue, args.count, jvm, args.ack)
            # The client's own warm-up, whatever the server: slow at first.
            warm[queue] = counts[: WARM_UP_SECONDS + 1]
            return rate
        return c_consume(exe, port, queue, args.count)

    warm: dict[str, list[int]] = {}

    def fill(port: int, queue: str) -> None:
        if java:
            java_fill(classes, port, queue, args.count, args.size)
        else:
            c_produce(exe, port, queue, args.count, args.size)

    floor = Floor(args.size, args.count)
    (tmp / "broker").mkdir()
    targets: dict[str, int] = {"floor": floor.port}
    pids: dict[str, int] = {"floor": floor.proc.pid}  # type: ignore[dict-item]
    started = []
    try:
        broker = start_broker(tmp / "broker")
        started.append(broker)
        targets["broker"] = broker.portmapper_port
        pids["broker"] = broker.proc.pid
        if args.baseline:
            base = Baseline(args.baseline)
            started.append(base)
            targets["baseline"] = base.portmapper_port
            pids["baseline"] = base.pid
        if args.stock:
            (tmp / "stock").mkdir()
            stock = start_stock_broker(tmp / "stock")
            started.append(stock)
            targets["stock"] = stock.portmapper_port
            pids["stock"] = stock.proc.pid
        rates: dict[str, list[float]] = {k: [] for k in targets}
        cpu: dict[str, list[float]] = {k: [] for k in targets}
        for r in range(args.rounds):
            line = []
            for name, port in targets.items():
                if name == "floor":
                    queue = "floorq"
                else:
                    queue = f"ackfloor{uuid.uuid4().hex[:8]}"
                    fill(port, queue)
                c0 = cpu_seconds(pids[name])
                rate = drain(port, queue)
                used = 1e6 * (cpu_seconds(pids[name]) - c0) / args.count
                rates[name].append(rate)
                cpu[name].append(used)
                line.append(
                    f"{name} {rate:,.0f} msgs/s ({1e6 / rate:.1f} us/msg, server CPU {used:.1f} us/msg)"
                )
            print(f"round {r + 1}: " + ", ".join(line), flush=True)
            if warm:
                print(f"  deliveries in the first seconds: {list(warm.values())}", flush=True)
                warm.clear()
    finally:
        for b in started:
            b.stop()
        floor.stop()
    f = statistics.median(rates["floor"])
    b = statistics.median(rates["broker"])
    summary = (
        f"median: floor {f:,.0f} msgs/s, broker {b:,.0f} msgs/s; "
        f"broker round trip = {f / b:.2f}x the floor's"
    )
    summary += "; server CPU per message (median): " + ", ".join(
        f"{k} {statistics.median(v):.1f} us" for k, v in cpu.items()
    )
    if "baseline" in rates:
        summary += f"; baseline {statistics.median(rates['baseline']):,.0f} msgs/s"
    if "stock" in rates:
        s = statistics.median(rates["stock"])
        summary += f"; stock {s:,.0f} msgs/s, broker = {b / s:.2f}x the stock broker"
    print(
        f"{summary} ({args.client} client, {args.ack} acknowledge, {args.size} B, "
        f"{args.count} messages, pid {os.getpid()})"
    )


def tail_rounds(args, tmp: Path) -> None:
    from broker.launcher import start_broker, start_stock_broker

    classes = compile_jmsbench(tmp / "classes")
    jvm = args.jvm_arg or []
    count = int(args.rate * args.seconds)
    started = []
    try:
        (tmp / "broker").mkdir()
        broker = start_broker(tmp / "broker")
        started.append(broker)
        (tmp / "stock").mkdir()
        stock = start_stock_broker(tmp / "stock")
        started.append(stock)
        for r in range(args.rounds):
            for name in ("broker", "floor", "stock"):
                common = {"count": count, "size": args.size, "rate": args.rate, "ack": args.ack}
                if name == "floor":
                    floor = Floor(args.size, count, args.rate)
                    try:
                        c0 = cpu_seconds(floor.proc.pid)  # type: ignore[arg-type]
                        run = JavaRun(
                            classes, floor.port, jvm, producers=0, name="floorq", **common
                        )
                        used = cpu_seconds(floor.proc.pid) - c0  # type: ignore[arg-type]
                    finally:
                        floor.stop()
                else:
                    server = broker if name == "broker" else stock
                    queue = f"tail{uuid.uuid4().hex[:8]}"
                    c0 = cpu_seconds(server.proc.pid)
                    run = JavaRun(classes, server.portmapper_port, jvm, name=queue, **common)
                    used = cpu_seconds(server.proc.pid) - c0
                res = run.result
                worst = " ".join(f"{w:.1f}" for _s, _n, w in run.seconds)
                late = [w for _s, _n, w in run.seconds[args.warm_up :]]
                print(
                    f"round {r + 1} {name}: p50 {res['p50_ms']:.3f} ms, p99 {res['p99_ms']:.3f} ms, "
                    f"max {res['max_ms']:.1f} ms, consumer {res['consumer_rate']:.0f} msgs/s, "
                    f"server CPU {1e6 * used / count:.0f} us/msg; "
                    f"after the first {args.warm_up} s: worst {max(late, default=0):.1f} ms, "
                    f"median second's worst {statistics.median(late) if late else 0:.1f} ms; "
                    f"worst per second (ms): {worst}",
                    flush=True,
                )
                if args.verbose:
                    print("\n".join(run.lines), flush=True)
    finally:
        for b in started:
            b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--client", choices=("java", "c"), default="java")
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stock", action="store_true", help="also drain the stock OpenMQ broker")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="also drain our broker from another checkout (before/after, interleaved)",
    )
    ap.add_argument("--tail", action="store_true", help="the steady-rate test (Java client)")
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument(
        "--ack", default="auto", help="JmsBench's ack mode (auto, dups_ok; java client)"
    )
    ap.add_argument(
        "--warm-up", type=int, default=5, help="--tail: seconds left out of the summary (JIT)"
    )
    ap.add_argument("--jvm-arg", action="append", help="e.g. -Xlog:gc (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true", help="--tail: JmsBench's output")
    args = ap.parse_args()
    # SIGTERM: stop the brokers and the floor this run started (the finally blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tmp = Path(tempfile.mkdtemp(prefix="ackfloor-"))
    if args.tail:
        tail_rounds(args, tmp)
    else:
        drain_rounds(args, tmp)


if __name__ == "__main__":
    main()
