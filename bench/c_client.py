"""Queue rates with the stock OpenMQ C client (libmqcrt): 1 KB non-persistent messages.

    .venv/bin/python bench/c_client.py                  # 50,000 messages
    .venv/bin/python bench/c_client.py --count 20000 --host 127.0.0.1 --port 7676

Compiles bench/c/cbench.c against third_party/openmq/realclient/c (or $OPENMQ_CCLIENT) and runs,
on a queue each: a producer alone (the queue fills), a consumer alone (it drains that
queue), then a consumer and a producer together (end to end, the consumer's rate). Each
C process is one connection and one AUTO_ACKNOWLEDGE session.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from broker.stock_paths import C_CLIENT as CCLIENT  # noqa: E402


def build(out: Path) -> Path:
    # libmqcrt.so there is a flattened symlink; link the real file by path.
    lib = CCLIENT / "lib" / "libmqcrt.so.1"
    exe = out / "cbench"
    subprocess.run(
        [
            "gcc",
            "-std=c99",
            "-O2",
            "-Wno-unused-variable",
            "-o",
            str(exe),
            str(HERE / "c" / "cbench.c"),
            f"-I{CCLIENT / 'include'}",
            str(lib),
            f"-Wl,-rpath,{lib.parent}",
        ],
        check=True,
    )
    return exe


def seconds(line: str) -> float:
    # "<mode> N messages in S s"
    return float(line.split()[-2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--host", default=None, help="use a running broker (port mapper host)")
    ap.add_argument("--port", type=int, default=7676, help="its port mapper port")
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    broker = None
    host, port = args.host, args.port
    tmp = Path(tempfile.mkdtemp(prefix="imq-cbench-"))
    exe = build(tmp)
    if host is None:
        from broker.launcher import start_broker

        broker = start_broker(tmp, "imq.log.level=WARNING")
        host, port = broker.host, broker.portmapper_port
    base = [str(exe), host, str(port)]
    n, size = str(args.count), str(args.size)

    def run(*cmd: str) -> str:
        return subprocess.run(
            [*base, *cmd], check=True, capture_output=True, text=True
        ).stdout.strip()

    try:
        run("produce", "cbench.warmup", "2000", size)
        run("consume", "cbench.warmup", "2000")
        q = f"cbench.{uuid.uuid4().hex[:8]}"
        alone_p = seconds(run("produce", q, n, size))
        alone_c = seconds(run("consume", q, n))
        q2 = f"cbench.{uuid.uuid4().hex[:8]}"
        consumer = subprocess.Popen(
            [*base, "consume", q2, n], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        both_p = seconds(run("produce", q2, n, size))
        out, _ = consumer.communicate(timeout=600)
        both_c = seconds(out.strip())
        c = args.count
        print(f"C client (libmqcrt), {c:,} x {args.size} B non-persistent, queue, AUTO_ACK:")
        print(f"  producer alone:   {c / alone_p:10,.0f} msgs/s ({alone_p:.2f} s)")
        print(f"  consumer alone:   {c / alone_c:10,.0f} msgs/s ({alone_c:.2f} s)")
        print(f"  both, producer:   {c / both_p:10,.0f} msgs/s ({both_p:.2f} s)")
        print(f"  both, end to end: {c / both_c:10,.0f} msgs/s ({both_c:.2f} s)")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
