"""STOMP throughput (issue 38): stomp.py as the client of every broker, in one sitting.

Brokers: ours (the STOMP listener), the stock OpenMQ 6.9 broker's STOMP bridge
(third_party/openmq/realbroker), ActiveMQ's STOMP connector when Debian's ``activemq``
is installed (bench/jms.py's private instance with a stomp:// connector), and RabbitMQ's
STOMP plugin when Debian's ``rabbitmq-server`` is (a private node, see start_rabbitmq);
all on 127.0.0.1. Every connection speaks STOMP 1.0, which every one of them knows (the stock
bridge speaks 1.0 and 1.2, not 1.1, and has no NACK).

Workloads, 1 KB bodies:

* queue 1→1 non-persistent, ``ack:auto``: consumer msgs/s (first send to last receipt);
* the same with ``ack:client``, each message acknowledged;
* topic 1→4 non-persistent: deliveries/s over the four subscribers;
* persistent sends, each waiting for its RECEIPT: msgs/s.

    .venv/bin/python bench/stomp.py                  # all brokers
    .venv/bin/python bench/stomp.py --brokers ours --scale 0.2
    .venv/bin/python bench/stomp.py --workloads topic --clients threads --rounds 3
    .venv/bin/python bench/stomp.py --idle 10000     # our RSS with 10,000 idle connections

Each subscriber is a process of its own (``--clients processes``, the default: as
separate client programs are; the producer stays here) or a thread of this process
(``--clients threads``: one interpreter lock between the producer and every subscriber,
which holds all the clients to one CPU and so caps what a fast broker can show: with ours,
about 55-70% of two CPUs was used, bench/README.md).  Either way every broker gets the
same clients.  Rates are timed from the first send to the last delivery; besides them the
tables give the CPU the clients (every thread or process) and the broker (its process
and descendants, /proc) used a message, which a loaded machine distorts far less, and
from the scheduler where the time went: who ran, who was runnable, who slept waiting for
input.  ``--rounds N`` runs the workloads N times on one start of each broker (a JVM's
JIT warms up in the first).

``--idle N`` instead opens N STOMP 1.2 connections to our broker (CONNECT with login,
``heart-beat:0,0``, CONNECTED awaited; raw asyncio sockets, not stomp.py, whose reader
thread per connection would not scale), leaves them idle and prints the broker's resident
memory (VmRSS) before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# This file is bench/stomp.py: its directory must not hide the stomp.py package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

import stomp  # noqa: E402

# (bench/ is off the path here, where "stomp" must be stomp.py's package.)
from bench.jms import AMQ_HOME, start_activemq, stop_proc  # noqa: E402
from broker.launcher import free_port, missing_stock_broker, start_broker  # noqa: E402
from tests.stompkit import stock_stomp_broker  # noqa: E402

BODY = "x" * 1024
# A non-persistent SEND's headers.  RabbitMQ's plugin sends transient messages unless told
# otherwise, and its SEND with ``persistent:false`` to a /queue/ another connection
# subscribed to is refused (RESOURCE_LOCKED, connection closed): for it, none.
NON_PERSISTENT = {"persistent": "false"}
AMQ_STOMP_CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="bench"
          dataDirectory="{data}">
    <persistenceAdapter><kahaDB directory="{data}/kahadb"/></persistenceAdapter>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""


class Counter(stomp.ConnectionListener):
    """Counts MESSAGE frames (acknowledging each in client mode) and RECEIPTs."""

    def __init__(self, conn: Any, want: int, client_ack: bool = False) -> None:
        self.conn, self.want, self.client_ack = conn, want, client_ack
        self.got = 0
        self.last = 0.0  # perf_counter when the last wanted message came
        self.done = threading.Event()
        self.receipt = threading.Event()

    def on_message(self, frame: Any) -> None:
        self.got += 1
        if self.client_ack:
            h = frame.headers
            # 1.0 ACK with the subscription too: the stock bridge wants it (BSS4008).
            self.conn.send_frame(
                "ACK", {"message-id": h["message-id"], "subscription": h["subscription"]}
            )
        if self.got == self.want:
            self.last = time.perf_counter()
            self.done.set()

    def on_receipt(self, frame: Any) -> None:
        self.receipt.set()


def connect(port: int, want: int = 0, client_ack: bool = False) -> tuple[Any, Counter]:
    conn = stomp.Connection10([("127.0.0.1", port)])
    listener = Counter(conn, want, client_ack)
    conn.set_listener("c", listener)
    conn.connect("guest", "guest", wait=True)
    return conn, listener


def settle(conn: Any, listener: Counter) -> None:
    """Wait until the broker has handled what ``conn`` sent before (a RECEIPT)."""
    listener.receipt.clear()
    conn.send_frame("BEGIN", {"transaction": "settle", "receipt": uuid.uuid4().hex})
    listener.receipt.wait(60)
    conn.send_frame("ABORT", {"transaction": "settle"})


def cpu_self() -> float:
    """This process's CPU seconds (every thread), user and system."""
    t = os.times()
    return t.user + t.system


def subscriber(port: int, dest: str, sid: str, n: int, ack: str, pipe: Any) -> None:
    """One subscriber in a process of its own (``--clients processes``): says when it
    is subscribed, then when its ``n``-th message came and the CPU it used meanwhile."""
    c, lst = connect(port, n, client_ack=ack == "client")
    c.subscribe(dest, id=sid, ack=ack)
    settle(c, lst)
    cpu0 = cpu_self()
    s0 = sched([os.getpid()])
    pipe.send("ready")
    ok = lst.done.wait(600)
    pipe.send((lst.got, lst.last if ok else None, cpu_self() - cpu0, sched([os.getpid()]) - s0))
    c.disconnect()


class Sched:
    """Scheduler figures of some threads (/proc/PID/task/TID/schedstat and status): CPU
    seconds run, seconds runnable but waiting for a CPU, voluntary context switches
    (each a wait for input: a wake-up)."""

    __slots__ = ("run", "wait", "wakes")

    def __init__(self, run: float = 0.0, wait: float = 0.0, wakes: int = 0) -> None:
        self.run, self.wait, self.wakes = run, wait, wakes

    def __sub__(self, other: Sched) -> Sched:
        return Sched(self.run - other.run, self.wait - other.wait, self.wakes - other.wakes)

    def __add__(self, other: Sched) -> Sched:
        return Sched(self.run + other.run, self.wait + other.wait, self.wakes + other.wakes)


def sched(pids: list[int]) -> Sched:
    """The sum over every thread of ``pids`` (threads that ended are not counted)."""
    total = Sched()
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for t in tasks:
            try:
                run, wait, _ = (t / "schedstat").read_text().split()
                status = (t / "status").read_text()
            except (OSError, ValueError):
                continue
            at = status.index("voluntary_ctxt_switches:")
            wakes = int(status[at + 24 : status.index("\n", at)])
            total = total + Sched(int(run) / 1e9, int(wait) / 1e9, wakes)
    return total


# One workload's result: msgs (or deliveries) a second, how many, the clients' CPU seconds
# (every client thread or process, first send to last delivery), and where the time went
# from the first send to the last delivery (``Split``).
Result = tuple[float, int, float, "Split"]


class Split:
    """Where the time from the first send to the last delivery (``wall`` seconds; the
    producer's last send after ``sent``) went: the scheduler figures of the producer, the
    subscribers and the broker (threads mode: the producer's are every client's, the
    subscribers' None)."""

    __slots__ = ("wall", "sent", "producer", "subscribers", "broker")

    def __init__(
        self,
        wall: float,
        sent: float,
        producer: Sched,
        subscribers: Sched | None,
        broker: Sched,
    ) -> None:
        self.wall, self.sent = wall, sent
        self.producer, self.subscribers, self.broker = producer, subscribers, broker

    def busy(self) -> float:
        """The share of the machine's CPUs these processes ran on."""
        run = self.producer.run + self.broker.run + (self.subscribers or Sched()).run
        return run / self.wall / (os.cpu_count() or 1)

    def runnable(self) -> str:
        """How many threads of the producer (while it sent), the subscribers and the
        broker were runnable (running or waiting for a CPU) on average: what each would
        have kept busy on an idle machine; the rest of the time they waited for input."""
        p, s, b = self.producer, self.subscribers, self.broker
        cells = [(p.run + p.wait) / self.sent if s else None]
        cells.append((s.run + s.wait) / self.wall if s else (p.run + p.wait) / self.wall)
        cells.append((b.run + b.wait) / self.wall)
        return " / ".join("-" if c is None else f"{c:.2f}" for c in cells)


# The broker's process ids (it and its descendants), for its scheduler figures.
BROKER: dict[str, list[int]] = {"pids": []}


def flow(port: int, n: int, dest: str, subscribers: int, ack: str) -> Result:
    """Deliveries/s: ``subscribers`` consumers of ``dest``, one producer of ``n``; the
    subscribers are threads of this process or processes of their own (CLIENTS)."""
    if CLIENTS["mode"] == "processes":
        ctx = multiprocessing.get_context("fork")
        pipes, procs = [], []
        for i in range(subscribers):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=subscriber, args=(port, dest, f"s{i}", n, ack, theirs))
            p.start()
            pipes.append(mine)
            procs.append(p)
        for mine in pipes:
            if not mine.poll(300) or mine.recv() != "ready":
                raise RuntimeError(f"{dest}: a subscriber did not subscribe")
        prod, plst = connect(port)
        me, brokers = [os.getpid()], BROKER["pids"]
        p0, b0 = sched(me), sched(brokers)
        cpu0 = cpu_self()
        start = time.perf_counter()
        for _ in range(n):
            prod.send(dest, BODY, headers=dict(NON_PERSISTENT))
        client_cpu = cpu_self() - cpu0
        p1, sent = sched(me), time.perf_counter() - start
        last = start
        subs_sched = Sched()
        for mine in pipes:
            if not mine.poll(660):
                raise RuntimeError(f"{dest}: a subscriber said nothing")
            got, when, cpu, ss = mine.recv()
            if when is None:
                raise RuntimeError(f"{dest}: {got} of {n} arrived")
            last = max(last, when)
            client_cpu += cpu
            subs_sched = subs_sched + ss
        split = Split(last - start, sent, p1 - p0, subs_sched, sched(brokers) - b0)
        for p in procs:
            p.join(60)
        prod.disconnect()
        return n * subscribers / (last - start), n * subscribers, client_cpu, split
    subs = [connect(port, n, client_ack=ack == "client") for _ in range(subscribers)]
    for i, (c, lst) in enumerate(subs):
        c.subscribe(dest, id=f"s{i}", ack=ack)
        settle(c, lst)
    prod, plst = connect(port)
    me, brokers = [os.getpid()], BROKER["pids"]
    p0, b0 = sched(me), sched(brokers)
    cpu0 = cpu_self()
    start = time.perf_counter()
    for _ in range(n):
        prod.send(dest, BODY, headers=dict(NON_PERSISTENT))
    sent = time.perf_counter() - start
    for _, lst in subs:
        if not lst.done.wait(600):
            raise RuntimeError(f"{dest}: {lst.got} of {n} arrived")
    elapsed = max(lst.last for _, lst in subs) - start
    client_cpu = cpu_self() - cpu0
    split = Split(elapsed, sent, sched(me) - p0, None, sched(brokers) - b0)
    for c, _ in [*subs, (prod, plst)]:
        c.disconnect()
    return n * subscribers / elapsed, n * subscribers, client_cpu, split


def receipts(port: int, n: int) -> Result:
    """Persistent sends/s, each waiting for its RECEIPT."""
    q = "/queue/bench.receipts." + uuid.uuid4().hex[:8]
    prod, lst = connect(port)
    me, brokers = [os.getpid()], BROKER["pids"]
    p0, b0 = sched(me), sched(brokers)
    cpu0 = cpu_self()
    start = time.perf_counter()
    for i in range(n):
        lst.receipt.clear()
        prod.send(q, BODY, headers={"persistent": "true", "receipt": str(i)})
        if not lst.receipt.wait(60):
            raise RuntimeError(f"no RECEIPT for send {i}")
    elapsed = time.perf_counter() - start
    client_cpu = cpu_self() - cpu0
    split = Split(elapsed, elapsed, sched(me) - p0, None, sched(brokers) - b0)
    drain, dl = connect(port, n)
    drain.subscribe(q, id="d", ack="auto")
    dl.done.wait(120)
    drain.disconnect()
    prod.disconnect()
    return n / elapsed, n, client_cpu, split


def workloads(scale: float, only: list[str] | None = None) -> list[Workload]:
    """(key, label, run) of each workload, those named in ``only`` (WORKLOADS) if given."""

    def n(base: int) -> int:
        return max(100, int(base * scale))

    def u(prefix: str) -> str:
        return f"/{prefix}/bench.{uuid.uuid4().hex[:8]}"

    every: list[Workload] = [
        (
            "auto",
            f"queue 1→1 non-persistent, ack:auto, {n(20000)} msgs: msgs/s",
            lambda p: flow(p, n(20000), u("queue"), 1, "auto"),
        ),
        (
            "client",
            f"queue 1→1 non-persistent, ack:client, {n(10000)} msgs: msgs/s",
            lambda p: flow(p, n(10000), u("queue"), 1, "client"),
        ),
        (
            "topic",
            f"topic 1→4 non-persistent, {n(5000)} msgs: deliveries/s",
            lambda p: flow(p, n(5000), u("topic"), 4, "auto"),
        ),
        (
            "receipts",
            f"persistent sends with receipts, {n(2000)} msgs: msgs/s",
            lambda p: receipts(p, n(2000)),
        ),
    ]
    return [w for w in every if only is None or w[0] in only]


Workload = tuple[str, str, Callable[[int], Result]]
WORKLOADS = ("auto", "client", "topic", "receipts")
# How the clients run (--clients): "threads" of this process (one interpreter, one lock
# between them) or "processes" (each subscriber a process of its own, the producer here).
CLIENTS = {"mode": "processes"}


def tree_pids(pid: int) -> tuple[list[int], float]:
    """Process ``pid`` and every descendant (a JVM's run.sh, RabbitMQ's beam under its
    scripts), and their CPU seconds, user and system."""
    kids: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        f = stat[stat.rindex(")") + 2 :].split()
        kids.setdefault(int(f[1]), []).append(int(d.name))
        times[int(d.name)] = (int(f[11]) + int(f[12])) / tick
    pids, total, todo = [], 0.0, [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        total += times.get(p, 0.0)
        todo.extend(kids.get(p, []))
    return pids, total


def tree_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and every descendant, user and system."""
    return tree_pids(pid)[1]


RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")


def rabbitmq_installed() -> bool:
    return (RABBIT_BIN / "rabbitmq-server").is_file()


def rabbitmq_env(tmp: Path, amqp: int, stomp_port: int) -> dict[str, str]:
    """A private RabbitMQ node on 127.0.0.1 only (AMQP, STOMP, epmd and the Erlang
    distribution port), its files in ``tmp``; the stomp plugin its one plugin."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "enabled_plugins").write_text("[rabbitmq_stomp].\n")
    (tmp / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{amqp}\n"
        f"stomp.listeners.tcp.1 = 127.0.0.1:{stomp_port}\n"
        "loopback_users.guest = true\n"
    )
    return {
        **os.environ,
        "HOME": str(tmp),
        "RABBITMQ_NODENAME": f"benchstomp{stomp_port}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "RABBITMQ_DIST_PORT": str(free_port()),
        "RABBITMQ_CONFIG_FILE": str(tmp / "rabbitmq.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(tmp / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(tmp / "mnesia"),
        "RABBITMQ_LOG_BASE": str(tmp / "log"),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    }


def start_rabbitmq(tmp: Path) -> tuple[int, dict[str, str], subprocess.Popen]:
    """Debian's rabbitmq-server with its STOMP plugin, waited for (a loaded machine
    takes minutes to boot Erlang and the plugin)."""
    port = free_port()
    env = rabbitmq_env(tmp, free_port(), port)
    log = (tmp / "server.txt").open("wb")
    proc = subprocess.Popen(
        [str(RABBIT_BIN / "rabbitmq-server")], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"rabbitmq-server exited: {(tmp / 'server.txt').read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return port, env, proc
        except OSError:
            time.sleep(1)
    stop_rabbitmq(env, proc)
    raise RuntimeError("rabbitmq-server's STOMP listener did not come up in 600 s")


def stop_rabbitmq(env: dict[str, str], proc: subprocess.Popen) -> None:
    subprocess.run(
        [str(RABBIT_BIN / "rabbitmqctl"), "stop"], env=env, capture_output=True, timeout=120
    )
    stop_proc(proc)


def activemq_installed() -> bool:
    return (AMQ_HOME / "bin" / "activemq.jar").is_file() and Path(
        "/usr/share/java/activemq-stomp.jar"
    ).is_file()


# A broker's result per workload: the Result, the broker's CPU seconds and the load
# average after it.
Measured = list[tuple[float, int, float, float, Split, str]]


def run_all(pid: int, port: int, scale: float, only: list[str]) -> Measured:
    out = []
    for _, _, fn in workloads(scale, only):
        BROKER["pids"], cpu0 = tree_pids(pid)
        rate, count, client_cpu, split = fn(port)
        out.append((rate, count, client_cpu, tree_cpu(pid) - cpu0, split, loadavg()))
    return out


@contextlib.contextmanager
def serving(name: str, tmp: Path) -> Iterator[tuple[int, int]]:
    """Broker ``name`` (ours, stock, rabbitmq, activemq) started in ``tmp``: its process
    id and STOMP port, stopped on leaving."""
    if name == "ours":
        port = free_port()
        (tmp / "ours").mkdir(parents=True)
        b = start_broker(
            tmp / "ours",
            "imq.bridge.enabled=true",
            "imq.bridge.activelist=stomp",
            f"imq.bridge.stomp.tcp.port={port}",
            tty=False,
        )
        try:
            yield b.proc.pid, port
        finally:
            b.stop()
    elif name == "stock":
        with stock_stomp_broker() as (sb, port):
            yield sb.proc.pid, port
    elif name == "rabbitmq":
        port, env, rproc = start_rabbitmq(tmp / "rabbitmq")
        NON_PERSISTENT.clear()
        try:
            yield rproc.pid, port
        finally:
            NON_PERSISTENT["persistent"] = "false"
            stop_rabbitmq(env, rproc)
    else:
        port, proc = start_activemq(tmp / "activemq", AMQ_STOMP_CONFIG)
        try:
            yield proc.pid, port
        finally:
            stop_proc(proc)


def run_one(name: str, tmp: Path, scale: float, only: list[str], rounds: int) -> list[Measured]:
    """``rounds`` rounds of the workloads on one start of broker ``name`` (a JVM's JIT
    warms up in the first)."""
    with serving(name, tmp) as (pid, port):
        out = []
        for _ in range(rounds):
            out.append(run_all(pid, port, scale, only))
            print(f"{name}: " + ", ".join(f"{r[0]:,.0f}" for r in out[-1]), flush=True)
        return out


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


CONNECT_FRAME = (
    b"CONNECT\naccept-version:1.2\nhost:localhost\nlogin:guest\npasscode:guest\n"
    b"heart-beat:0,0\n\n\x00"
)


async def open_idle(port: int, count: int, parallel: int = 200) -> tuple[list, list]:
    """``count`` connected STOMP connections (their writers) and the errors."""
    keep: list = []
    sem = asyncio.Semaphore(parallel)

    async def one() -> None:
        async with sem:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(CONNECT_FRAME)
            got = b""
            while b"\x00" not in got:
                data = await reader.read(4096)
                if not data:
                    raise ConnectionError(f"closed after {got!r}")
                got += data
            if not got.startswith(b"CONNECTED"):
                raise ConnectionError(got.decode(errors="replace"))
            keep.append(writer)

    results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    return keep, [r for r in results if isinstance(r, BaseException)]


def idle(count: int) -> None:
    """Our broker's RSS with ``count`` idle STOMP connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the broker inherits it
    tmp = Path(tempfile.mkdtemp(prefix="bench-stomp-idle-"))
    port = free_port()
    b = start_broker(
        tmp,
        "imq.bridge.enabled=true",
        "imq.bridge.activelist=stomp",
        f"imq.bridge.stomp.tcp.port={port}",
        "imq.log.level=WARNING",
        tty=False,
    )
    try:
        pid = b.proc.pid

        async def run() -> None:
            base = rss_mb(pid)
            t0 = time.perf_counter()
            keep, errors = await open_idle(port, count)
            elapsed = time.perf_counter() - t0
            await asyncio.sleep(2)
            rss = rss_mb(pid)
            print(
                f"{len(keep)} idle STOMP connections ({len(errors)} failed) in {elapsed:.1f} s; "
                f"broker RSS {rss:.0f} MB (was {base:.0f} MB before: "
                f"{(rss - base) * 1024 / max(len(keep), 1):.1f} KB per connection); "
                f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
            )
            if errors:
                print("first error:", repr(errors[0]))
            for w in keep:
                w.close()

        asyncio.run(run())
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="ours,stock,activemq,rabbitmq")
    ap.add_argument("--scale", type=float, default=1.0, help="message counts times this")
    ap.add_argument(
        "--workloads", default=",".join(WORKLOADS), help="some of " + ",".join(WORKLOADS)
    )
    ap.add_argument(
        "--clients",
        choices=("threads", "processes"),
        default=CLIENTS["mode"],
        help="subscribers as threads of one process or processes of their own",
    )
    ap.add_argument("--rounds", type=int, default=1, help="rounds on each broker's one start")
    ap.add_argument("--idle", type=int, default=0, help="only: RSS with this many idle conns")
    args = ap.parse_args()
    if args.idle:
        idle(args.idle)
        return
    CLIENTS["mode"] = args.clients
    only = [w for w in args.workloads.split(",") if w]
    if bad := set(only) - set(WORKLOADS):
        ap.error(f"unknown workloads {sorted(bad)}")
    names = [n for n in args.brokers.split(",") if n]
    if "stock" in names and missing_stock_broker():
        print("stock broker missing:", missing_stock_broker(), file=sys.stderr)
        names.remove("stock")
    if "activemq" in names and not activemq_installed():
        print("ActiveMQ (Debian's activemq) not installed: left out", file=sys.stderr)
        names.remove("activemq")
    if "rabbitmq" in names and not rabbitmq_installed():
        print("RabbitMQ (Debian's rabbitmq-server) not installed: left out", file=sys.stderr)
        names.remove("rabbitmq")
    print(f"clients: {args.clients}; load average before: {loadavg()}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-stomp-"))
    rounds: dict[str, list[Measured]] = {}
    try:
        for name in names:
            rounds[name] = run_one(name, tmp, args.scale, only, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    labels = [label for _, label, _ in workloads(args.scale, only)]
    for r in range(args.rounds):
        if args.rounds > 1:
            print(f"\n### Round {r + 1} of {args.rounds}")
        report(labels, names, {n: rounds[n][r] for n in names})
    print(f"\nload average after: {loadavg()}")


def report(labels: list[str], names: list[str], results: dict[str, Measured]) -> None:
    """The rates, the CPU a message and where the time went, as Markdown tables."""
    print()
    head = "| workload | " + " | ".join(names)
    if "ours" in results:
        head += "".join(f" | ours/{n}" for n in names if n != "ours")
    print(head + " |")
    print("|---" * (head.count("|")) + "|")
    for i, label in enumerate(labels):
        row = f"| {label} | " + " | ".join(f"{results[n][i][0]:,.0f}" for n in names)
        if "ours" in results:
            row += "".join(
                f" | {results['ours'][i][0] / results[n][i][0]:.2f}×" for n in names if n != "ours"
            )
        print(row + " |")
    print("\nCPU µs per message (per delivery for topic), clients / broker:\n")
    print("| workload | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for i, label in enumerate(labels):
        cells = []
        for n in names:
            _, count, client, broker, _, _ = results[n][i]
            cells.append(f"{1e6 * client / count:,.0f} / {1e6 * broker / count:,.0f}")
        print(f"| {label.rsplit(': ', 1)[0]} | " + " | ".join(cells) + " |")
    print(
        "\nFirst send to last delivery, from the scheduler (/proc/*/task/*/schedstat): "
        "CPU µs a message run by the producer (threads: every client) / the subscribers / "
        "the broker; their threads runnable (running or waiting for a CPU) on average, "
        "producer (while it sent) / subscribers (threads: every client) / broker; wake-ups "
        "(voluntary context switches) a message, subscribers / broker; the seconds to the "
        "last send and to the last delivery; busy: their CPU over that time and the CPUs "
        "(a loaded machine's other jobs take the rest); the load average after:\n"
    )
    print("| workload | broker | CPU µs a message | runnable | wake-ups | s | busy | load |")
    print("|---|---|---|---|---|---|---|---|")
    for i, label in enumerate(labels):
        for n in names:
            _, count, _, _, sp, load = results[n][i]
            subs = sp.subscribers
            us = [1e6 * sp.producer.run / count, 1e6 * subs.run / count if subs else None]
            us.append(1e6 * sp.broker.run / count)
            cpu = " / ".join("-" if u is None else f"{u:,.0f}" for u in us)
            wakes = f"{subs.wakes / count:.2f}" if subs else "-"
            print(
                f"| {label.rsplit(': ', 1)[0]} | {n} | {cpu} | {sp.runnable()} | "
                f"{wakes} / {sp.broker.wakes / count:.2f} | {sp.sent:.1f} / {sp.wall:.1f} | "
                f"{100 * sp.busy():.0f}% | {load} |"
            )


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
