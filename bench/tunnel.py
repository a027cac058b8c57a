"""The HTTP tunnel against plain TCP: N stock-Java-client connections at once (issue 25).

    .venv/bin/python bench/tunnel.py                    # 100 clients, 50 round trips each
    .venv/bin/python bench/tunnel.py --clients 10 --messages 20
    .venv/bin/python bench/tunnel.py --stock            # also the stock broker behind
                                                        # OpenMQ's tunnel servlet

The program is bench/java/TunnelBench.java on the stock OpenMQ Java client
(third_party/openmq/realclient/java): CLIENTS connections in one JVM, each a producer and a
consumer on a queue of its own, sending a non-persistent 1 KB message and waiting for it
to come back before the next (one message in flight per client).  It prints the rate of
all clients together and the round trips' percentiles, first over TCP
(``mq://host:port/jms``), then through the tunnel (``http://host:port/imq/tunnel``), both
against one broker of ours started for the run.  With ``--stock`` the same two rows for
the stock OpenMQ 6.9 broker, its tunnel served by imq.jar's HttpTunnelServlet in the
Grizzly server the stock broker ships (tests/interop/stock_tunnel/StockTunnel.java).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from broker.launcher import (  # noqa: E402
    STOCK_SERVLET_JARS,
    free_port,
    read_portmapper,
    start_broker,
    start_stock_broker,
    terminate,
)
from broker.protocol.portmapper import parse_table  # noqa: E402
from broker.stock_paths import JAVA_CLIENT as CLIENT  # noqa: E402

JARS = [CLIENT / "imq.jar", CLIENT / "jakarta.jms-api-3.1.0.jar"]


def compile_java(out: Path) -> None:
    cp = ":".join(map(str, JARS))
    subprocess.run(
        ["javac", "-nowarn", "-cp", cp, "-d", str(out), str(HERE / "java" / "TunnelBench.java")],
        check=True,
    )


def run_bench(classes: Path, address: str, clients: int, messages: int, size: int) -> dict:
    cp = ":".join(map(str, [*JARS, classes]))
    cmd = ["java", "-Xss512k", "-Xmx1g", "-cp", cp, "TunnelBench"]
    cmd += [address, str(clients), str(messages), str(size)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    out: dict[str, float] = {}
    for line in p.stdout.splitlines():
        name, _, value = line.partition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    if p.returncode != 0 or "rate" not in out or out.get("failures"):
        print(f"FAILED {address}:\n{p.stdout}\n{p.stderr[-3000:]}")
        out["failed"] = 1
    return out


def stock_pair(tmp: Path) -> tuple[object, subprocess.Popen, str]:
    """The stock broker (httpjms) and the stock servlet in Grizzly; the tunnel URL."""
    servlet_port, http_port = free_port(), free_port()
    b = start_stock_broker(
        tmp,
        "imq.service.activelist=jms,admin,httpjms",
        f"imq.httpjms.http.servletPort={servlet_port}",
    )
    out = tmp / "servlet-classes"
    cp = ":".join(map(str, STOCK_SERVLET_JARS))
    src = ROOT / "tests" / "interop" / "stock_tunnel" / "StockTunnel.java"
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(src)], check=True)
    log = open(tmp / "servlet.txt", "wb")  # noqa: SIM115 - lives with the process
    proc = subprocess.Popen(
        ["java", "-cp", f"{cp}:{out}", "StockTunnel", str(http_port), str(servlet_port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{http_port}/imq/tunnel"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if b"Total available brokers = 1" in r.read():
                    return b, proc, url
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the stock broker did not link to the tunnel servlet")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--messages", type=int, default=50, help="round trips per client")
    ap.add_argument("--size", type=int, default=1024, help="message body bytes")
    ap.add_argument("--stock", action="store_true", help="also the stock broker and servlet")
    ap.add_argument("-D", dest="props", action="append", default=[], help="a property for ours")
    args = ap.parse_args()
    rows: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="bench-tunnel-") as d:
        tmp = Path(d)
        classes = tmp / "classes"
        compile_java(classes)
        (tmp / "ours").mkdir()
        b = start_broker(tmp / "ours", "imq.service.activelist=jms,admin,httpjms", *args.props)
        try:
            table = parse_table(read_portmapper(b.host, b.portmapper_port))
            http = {s.name: s for s in table.services}["httpjms"]
            tcp = f"mq://{b.host}:{b.portmapper_port}/jms"
            url = f"http://{b.host}:{http.port}/imq/tunnel"
            for name, address in (("ours tcp", tcp), ("ours http", url)):
                rows.append(
                    (name, run_bench(classes, address, args.clients, args.messages, args.size))
                )
        finally:
            b.stop()
        if args.stock:
            (tmp / "stock").mkdir()
            sb, proc, surl = stock_pair(tmp / "stock")
            try:
                stcp = f"mq://{sb.host}:{sb.portmapper_port}/jms"
                for name, address in (("stock tcp", stcp), ("stock http", surl)):
                    rows.append(
                        (name, run_bench(classes, address, args.clients, args.messages, args.size))
                    )
            finally:
                terminate(proc, 10)
                sb.stop()
    print(
        f"\n{args.clients} clients x {args.messages} round trips of {args.size} B "
        "(non-persistent, one in flight per client)\n"
    )
    print(f"{'':12} {'msgs/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'connect s':>10}")
    for name, r in rows:
        if r.get("failed"):
            print(f"{name:12} FAILED")
            continue
        print(
            f"{name:12} {r['rate']:9.0f} {r.get('p50_ms', 0):8.2f} {r.get('p99_ms', 0):8.2f} "
            f"{r.get('max_ms', 0):8.2f} {r.get('connect_s', 0):10.2f}"
        )
    return 1 if any(r.get("failed") for _, r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
