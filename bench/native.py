"""Our broker with the stock OpenMQ C client beside ActiveMQ with its own Java client.

    .venv/bin/python bench/native.py                        # 3 rounds, interleaved
    .venv/bin/python bench/native.py --rounds 1 --count 5000 --workloads queue,topic

The compiled clients, each broker's own: bench/c/cbench.c on libmqcrt (see
bench/c_client.py) for ours, AUTO_ACKNOWLEDGE consumers (each ACKNOWLEDGE waits for its
reply, as the stock clients do), and bench/java/AmqBench.java on Debian's
``activemq-client`` (OpenWire, AUTO_ACKNOWLEDGE, whose acknowledgements are not waited
for) for ActiveMQ; ``--c-ack dups_ok`` makes the C consumers DUPS_OK_ACKNOWLEDGE, which must be running on
127.0.0.1:61616 (``--activemq`` to change).  The workloads of bench/compare.py: queue
1 -> 1 non-persistent, persistent (the stock clients wait for each persistent send's
reply; ActiveMQ's KahaDB syncs; ours runs twice, with ``imq.persist.file.sync.enabled``
false, OpenMQ's default, and true), topic 1 -> 4 non-persistent.  1 KB messages, the
consumers started first (C topic subscribers get 2 s to subscribe), the producer
unpaced.  Printed: producer msgs/s and consumers' deliveries/s, every subscriber counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from c_client import build  # noqa: E402

WORKLOADS = ("queue", "persistent", "topic")
AMQ_JARS = (
    "/usr/share/java/activemq-client.jar",
    "/usr/share/activemq/lib/geronimo-jms_1.1_spec.jar",
    "/usr/share/activemq/lib/geronimo-j2ee-management-1.1-spec.jar",
    "/usr/share/java/hawtbuf.jar",
    "/usr/share/java/slf4j-api.jar",
)


def build_java(out: Path) -> str:
    cp = ":".join(AMQ_JARS)
    subprocess.run(
        ["javac", "-d", str(out), "-cp", cp, str(HERE / "java" / "AmqBench.java")], check=True
    )
    return f"{out}:{cp}"


def _span(text: str) -> tuple[float, float]:
    line = next(x for x in text.splitlines() if x.startswith("span "))
    _, t0, t1 = line.split()
    return float(t0), float(t1)


def run_c(exe: Path, target: tuple[str, int], workload: str, count: int, size: int, ack: str):
    base = [str(exe), target[0], str(target[1])]
    topic = workload == "topic"
    env = {**os.environ, "CBENCH_TOPIC": "1" if topic else "0", "CBENCH_ACK": ack}
    name = f"nat.{uuid.uuid4().hex[:8]}"
    consumers = [
        subprocess.Popen(
            [*base, "consume", name, str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for _ in range(4 if topic else 1)
    ]
    if topic:
        time.sleep(2.0)  # a subscription made after a publish would miss it
    extra = ["persistent"] if workload == "persistent" else []
    out = subprocess.run(
        [*base, "produce", name, str(count), str(size), *extra],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    p0, p1 = _span(out)
    spans = [_span(c.communicate(timeout=600)[0]) for c in consumers]
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    total = count * len(consumers)
    return count / (p1 - p0), total / (last - first), total, total


def run_java(cp: str, url: str, workload: str, count: int, size: int):
    out = subprocess.run(
        ["java", "-cp", cp, "AmqBench", url, workload, str(count), str(size)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    w = out.strip().splitlines()[-1].split()
    # producer P msgs/s consumers C msgs/s received N of M
    return float(w[1]), float(w[4]), int(w[7]), int(w[9])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--persistent-count", type=int, default=5_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--c-ack",
        choices=["auto", "dups_ok"],
        default="auto",
        help="the C consumers' session mode (dups_ok: acknowledgements batched, no reply)",
    )
    ap.add_argument("--activemq", default="tcp://127.0.0.1:61616")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="imq-native-"))
    exe = build(tmp)
    cp = build_java(tmp)
    from broker.launcher import start_broker

    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    ours = start_broker(tmp / "a", "imq.log.level=WARNING")
    ours_sync = start_broker(
        tmp / "b", "imq.log.level=WARNING", "imq.persist.file.sync.enabled=true"
    )
    kinds = {
        "ours (C client)": lambda w, n: run_c(
            exe, (ours.host, ours.portmapper_port), w, n, args.size, args.c_ack
        ),
        "ours, sync on (C client)": lambda w, n: run_c(
            exe, (ours_sync.host, ours_sync.portmapper_port), w, n, args.size, args.c_ack
        ),
        "ActiveMQ (Java client)": lambda w, n: run_java(cp, args.activemq, w, n, args.size),
    }
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    workloads = [w for w in args.workloads.split(",") if w]
    try:
        for r in range(args.rounds):
            for w in workloads:
                n = args.persistent_count if w == "persistent" else args.count
                for kind, fn in kinds.items():
                    if "sync on" in kind and w != "persistent":
                        continue
                    p, c, got, want = fn(w, n)
                    results.setdefault((w, kind), []).append((p, c))
                    miss = "" if got == want else f"  MISSING {want - got:,} of {want:,}"
                    print(
                        f"round {r + 1} {w:10} {kind:26} producer {p:9,.0f} msgs/s  "
                        f"consumers {c:9,.0f} msgs/s{miss}",
                        flush=True,
                    )
    finally:
        ours.stop()
        ours_sync.stop()
    print()
    print("| workload | broker (client) | producer msgs/s | consumers msgs/s |")
    print("|---|---|---|---|")
    for (w, kind), rows in results.items():
        ps, cs = [x[0] for x in rows], [x[1] for x in rows]
        print(f"| {w} | {kind} | {min(ps):,.0f}–{max(ps):,.0f} | {min(cs):,.0f}–{max(cs):,.0f} |")
    print()
    for w in workloads:
        theirs = results.get((w, "ActiveMQ (Java client)"))
        for kind in ("ours (C client)", "ours, sync on (C client)"):
            mine = results.get((w, kind))
            if not mine or not theirs:
                continue
            pr = statistics.median(x[0] for x in mine) / statistics.median(x[0] for x in theirs)
            cr = statistics.median(x[1] for x in mine) / statistics.median(x[1] for x in theirs)
            print(f"{w}: {kind} / ActiveMQ (medians): producer {pr:.2f}x, consumers {cr:.2f}x")


if __name__ == "__main__":
    main()
