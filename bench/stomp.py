"""STOMP throughput (issue 38): stomp.py as the client of every broker, in one sitting.

Brokers: ours (the STOMP listener), the stock OpenMQ 6.9 broker's STOMP bridge
(third_party/openmq/realbroker), and ActiveMQ's STOMP connector when Debian's ``activemq``
is installed (bench/jms.py's private instance with a stomp:// connector); all on
127.0.0.1. Every connection speaks STOMP 1.0, the one version the stock bridge knows.

Workloads, 1 KB bodies:

* queue 1→1 non-persistent, ``ack:auto``: consumer msgs/s (first send to last receipt);
* the same with ``ack:client``, each message acknowledged;
* topic 1→4 non-persistent: deliveries/s over the four subscribers;
* persistent sends, each waiting for its RECEIPT: msgs/s.

    .venv/bin/python bench/stomp.py                  # all brokers
    .venv/bin/python bench/stomp.py --brokers ours --scale 0.2
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
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
        if self.got >= self.want:
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


def flow(port: int, n: int, dest: str, subscribers: int, ack: str) -> float:
    """Deliveries/s: ``subscribers`` consumers of ``dest``, one producer of ``n``."""
    subs = [connect(port, n, client_ack=ack == "client") for _ in range(subscribers)]
    for i, (c, lst) in enumerate(subs):
        c.subscribe(dest, id=f"s{i}", ack=ack)
        settle(c, lst)
    prod, plst = connect(port)
    start = time.perf_counter()
    for _ in range(n):
        prod.send(dest, BODY, headers={"persistent": "false"})
    for _, lst in subs:
        if not lst.done.wait(600):
            raise RuntimeError(f"{dest}: {lst.got} of {n} arrived")
    elapsed = time.perf_counter() - start
    for c, _ in [*subs, (prod, plst)]:
        c.disconnect()
    return n * subscribers / elapsed


def receipts(port: int, n: int) -> float:
    """Persistent sends/s, each waiting for its RECEIPT."""
    q = "/queue/bench.receipts." + uuid.uuid4().hex[:8]
    prod, lst = connect(port)
    start = time.perf_counter()
    for i in range(n):
        lst.receipt.clear()
        prod.send(q, BODY, headers={"persistent": "true", "receipt": str(i)})
        if not lst.receipt.wait(60):
            raise RuntimeError(f"no RECEIPT for send {i}")
    elapsed = time.perf_counter() - start
    drain, dl = connect(port, n)
    drain.subscribe(q, id="d", ack="auto")
    dl.done.wait(120)
    drain.disconnect()
    prod.disconnect()
    return n / elapsed


def workloads(scale: float) -> list[tuple[str, Callable[[int], float]]]:
    def n(base: int) -> int:
        return max(100, int(base * scale))

    def u(prefix: str) -> str:
        return f"/{prefix}/bench.{uuid.uuid4().hex[:8]}"

    return [
        (
            f"queue 1→1 non-persistent, ack:auto, {n(20000)} msgs: msgs/s",
            lambda p: flow(p, n(20000), u("queue"), 1, "auto"),
        ),
        (
            f"queue 1→1 non-persistent, ack:client, {n(10000)} msgs: msgs/s",
            lambda p: flow(p, n(10000), u("queue"), 1, "client"),
        ),
        (
            f"topic 1→4 non-persistent, {n(5000)} msgs: deliveries/s",
            lambda p: flow(p, n(5000), u("topic"), 4, "auto"),
        ),
        (
            f"persistent sends with receipts, {n(2000)} msgs: msgs/s",
            lambda p: receipts(p, n(2000)),
        ),
    ]


def activemq_installed() -> bool:
    return (AMQ_HOME / "bin" / "activemq.jar").is_file() and Path(
        "/usr/share/java/activemq-stomp.jar"
    ).is_file()


def run_one(name: str, tmp: Path, scale: float) -> list[float]:
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
            return [fn(port) for _, fn in workloads(scale)]
        finally:
            b.stop()
    if name == "stock":
        with stock_stomp_broker() as (_, port):
            return [fn(port) for _, fn in workloads(scale)]
    port, proc = start_activemq(tmp / "activemq", AMQ_STOMP_CONFIG)
    try:
        return [fn(port) for _, fn in workloads(scale)]
    finally:
        stop_proc(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="ours,stock,activemq")
    ap.add_argument("--scale", type=float, default=1.0, help="message counts times this")
    args = ap.parse_args()
    names = [n for n in args.brokers.split(",") if n]
    if "stock" in names and missing_stock_broker():
        print("stock broker missing:", missing_stock_broker(), file=sys.stderr)
        names.remove("stock")
    if "activemq" in names and not activemq_installed():
        print("ActiveMQ (Debian's activemq) not installed: left out", file=sys.stderr)
        names.remove("activemq")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-stomp-"))
    results: dict[str, list[float]] = {}
    try:
        for name in names:
            results[name] = run_one(name, tmp, args.scale)
            print(f"{name}: " + ", ".join(f"{r:,.0f}" for r in results[name]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    labels = [label for label, _ in workloads(args.scale)]
    head = "| workload | " + " | ".join(names)
    if "ours" in results:
        head += "".join(f" | ours/{n}" for n in names if n != "ours")
    print(head + " |")
    print("|---" * (head.count("|")) + "|")
    for i, label in enumerate(labels):
        row = f"| {label} | " + " | ".join(f"{results[n][i]:,.0f}" for n in names)
        if "ours" in results:
            row += "".join(
                f" | {results['ours'][i] / results[n][i]:.2f}×" for n in names if n != "ours"
            )
        print(row + " |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
