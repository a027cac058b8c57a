"""End-to-end latency on a queue at a steady rate, with the stock OpenMQ C client.

    .venv/bin/python bench/latency.py                          # 5,000 msgs/s, 60,000 messages
    .venv/bin/python bench/latency.py --rate 2000 --count 20000 --repeat 3
    .venv/bin/python bench/latency.py --profile /tmp/lat       # + py-spy of the broker
    .venv/bin/python bench/latency.py -D imq.loop.lag.warn=5   # broker properties

A fresh broker (unless ``--host``) and bench/c/cbench.c (see bench/c_client.py): one C
process receives in AUTO_ACKNOWLEDGE (the stock client waits for the reply to each
ACKNOWLEDGE), another sends 1 KB non-persistent messages at the steady ``--rate``, each
body starting with its CLOCK_MONOTONIC send time; the receiver prints p50/p99/p99.9/max.
No warm-up is left out unless ``--warmup`` says so (the issue's runs had none). The
broker's event-loop lag (imq.loop.lag.window=1) is read over the admin service every
second of a run; the worst and median window figures are printed.  ``--profile DIR`` records the broker with py-spy (in the
venv: ``pip install py-spy``; it needs ptrace rights) for the whole run, as a
speedscope file and a flame graph.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from c_client import build  # noqa: E402


class LagWatch(threading.Thread):
    """Reads the broker's loop lag (1 s windows) every second during a run."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(daemon=True)
        self.host, self.port = host, port
        self.p99: list[float] = []
        self.max: list[float] = []
        self.gc: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from broker.admintools.broker_handle import BrokerAdmin

        admin = BrokerAdmin(self.host, self.port)
        try:
            while not self.stop.wait(1.0):
                m = admin.metrics()
                self.p99.append(m.get("loopLagP99", 0) / 1000)
                self.max.append(m.get("loopLagMax", 0) / 1000)
                self.gc.append(m.get("gcPauseMax", 0) / 1000)
        finally:
            admin.close()

    def summary(self) -> str:
        if not self.max:
            return "loop lag: not read"
        return (
            f"loop lag (1 s windows): p99 worst {max(self.p99):.2f} ms, "
            f"median {statistics.median(self.p99):.2f} ms; max worst {max(self.max):.2f} ms; "
            f"longest GC {max(self.gc):.2f} ms"
        )


def one_run(exe: Path, host: str, port: int, args, pid: int | None, tag: str) -> str:
    base = [str(exe), host, str(port)]
    q = f"lat.{uuid.uuid4().hex[:8]}"
    if args.warmup:
        w = f"lat.warm.{uuid.uuid4().hex[:8]}"
        c = subprocess.Popen([*base, "latency", w, str(args.warmup)], stdout=subprocess.PIPE)
        subprocess.run([*base, "pace", w, str(args.warmup), str(args.size), str(args.rate)])
        c.communicate(timeout=600)
    consumer = subprocess.Popen(
        [*base, "latency", q, str(args.count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    spy = None
    if args.profile and pid is not None:
        out = Path(args.profile)
        out.mkdir(parents=True, exist_ok=True)
        spy_bin = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        spy = subprocess.Popen(
            [spy_bin, "record", "-p", str(pid), "-r", "200", "-f", "speedscope",
             "-o", str(out / f"broker-{tag}.speedscope.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        subprocess.run(
            [*base, "pace", q, str(args.count), str(args.size), str(args.rate)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        out_text, _ = consumer.communicate(timeout=600)
    finally:
        if spy is not None:
            spy.send_signal(2)
            spy.wait(60)
    lines = out_text.strip().splitlines()
    if args.by_second:
        return lines[1] + "\n    " + lines[0]
    return lines[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--host", default=None, help="use a running broker (port mapper host)")
    ap.add_argument("--port", type=int, default=7676, help="its port mapper port")
    ap.add_argument("--count", type=int, default=60_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--warmup", type=int, default=0, help="messages sent first, not counted")
    ap.add_argument("--settle", type=float, default=4.0, help="seconds between start and run")
    ap.add_argument("--repeat", type=int, default=1, help="runs, each on a fresh broker")
    ap.add_argument(
        "--by-second", action="store_true", help="also print each second's worst latency"
    )
    ap.add_argument("--profile", default=None, help="py-spy the broker into this directory")
    ap.add_argument("-D", dest="props", action="append", default=[], help="broker property")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="imq-lat-"))
    exe = build(tmp)
    print(
        f"C client, queue, {args.count:,} x {args.size} B non-persistent at {args.rate:,.0f} "
        f"msgs/s, AUTO_ACKNOWLEDGE consumer, warm-up {args.warmup}:"
    )
    for i in range(args.repeat):
        broker = None
        host, port, pid = args.host, args.port, None
        if host is None:
            from broker.launcher import start_broker

            (tmp / f"b{i}").mkdir()
            broker = start_broker(
                tmp / f"b{i}", "imq.log.level=WARNING", "imq.loop.lag.window=1", *args.props
            )
            host, port, pid = broker.host, broker.portmapper_port, broker.proc.pid
        # Start-up (migrations, imports, the broker's own start-up collection) is not
        # part of the steady run: wait, then watch.
        time.sleep(args.settle)
        watch = LagWatch(host, port)
        watch.start()
        try:
            result = one_run(exe, host, port, args, pid, str(i))
            watch.stop.set()
            watch.join(10)
            print(f"  run {i + 1}: {result}; {watch.summary()}")
        finally:
            if broker is not None:
                broker.stop()


if __name__ == "__main__":
    main()
