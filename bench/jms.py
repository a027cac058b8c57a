"""Ours against the stock OpenMQ broker and ActiveMQ with one JMS program (issue 23).

    .venv/bin/python bench/jms.py                       # every workload, 2 rounds, interleaved
    .venv/bin/python bench/jms.py --quick               # smaller counts, 1 round: about a minute
    .venv/bin/python bench/jms.py --workloads queue-auto,steady-auto --rounds 3
    .venv/bin/python bench/jms.py --brokers ours,stock --count 20000

The program is bench/java/JmsBench.java: the stock OpenMQ Java client
(third_party/openmq/realclient/java) against our broker (broker.launcher.start_broker) and the stock
OpenMQ 6.9 broker (third_party/openmq/realbroker/run.sh), and, when Debian's ``activemq`` package is
installed, the same source with javax.jms against ActiveMQ with its own client (a private
instance on a free loopback port, KahaDB in a temporary directory).  Every broker runs on its
defaults (the persistent sync-on rows: ``imq.persist.file.sync.enabled=true`` for both
OpenMQ-protocol brokers; ActiveMQ syncs its journal by default).  1 KB messages; consumers on
connections of their own in the same JVM, subscribed before the first send.  Runs are
interleaved: every workload on every broker in turn, the order rotating each round.

The steady rows pace the producer and measure each message's latency from the time it was
due, not from when ``send()`` ran: a broker that holds the producer back (flow control)
would otherwise move its backlog into the producer, out of sight of the latency figures.
Each steady run also prints the rate the producer achieved.

Each run checks its counts: a message never delivered (or one delivered twice outside
DUPS_OK) is printed as FAILED with the run's output, and the script exits 1 at the end.
The table shows each figure's range over the rounds and ours as a ratio to each peer
(rates: ours / theirs; latencies: theirs / ours, so above 1 is ours better either way).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from broker.launcher import (  # noqa: E402
    free_port,
    missing_stock_broker,
    start_broker,
    start_stock_broker,
)
from broker.stock_paths import JAVA_CLIENT as CLIENT  # noqa: E402

OPENMQ_JARS = [CLIENT / "imq.jar", CLIENT / "jakarta.jms-api-3.1.0.jar"]
AMQ_HOME = Path("/usr/share/activemq")
AMQ_JARS = [
    Path("/usr/share/java/activemq-client.jar"),
    AMQ_HOME / "lib" / "geronimo-jms_1.1_spec.jar",
    AMQ_HOME / "lib" / "geronimo-j2ee-management-1.1-spec.jar",
    Path("/usr/share/java/hawtbuf.jar"),
    Path("/usr/share/java/slf4j-api.jar"),
]
AMQ_CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="bench"
          dataDirectory="{data}">
    <persistenceAdapter><kahaDB directory="{data}/kahadb"/></persistenceAdapter>
    <transportConnectors>
      <transportConnector name="openwire" uri="tcp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""


@dataclass(frozen=True)
class Workload:
    label: str
    args: tuple[str, ...]
    count: int
    quick: int
    kind: str  # "consumer" (deliveries/s), "producer" (msgs/s) or "latency"
    sync: bool = False


WORKLOADS: dict[str, Workload] = {
    "queue-auto": Workload(
        "queue 1→1 non-persistent, {n} unpaced, AUTO_ACKNOWLEDGE: consumer msgs/s",
        ("dest=queue", "ack=auto"),
        100_000,
        20_000,
        "consumer",
    ),
    "queue-dups": Workload(
        "same, DUPS_OK: consumer msgs/s",
        ("dest=queue", "ack=dups_ok"),
        100_000,
        20_000,
        "consumer",
    ),
    "topic": Workload(
        "topic 1→4 non-persistent, {n}: deliveries/s",
        ("dest=topic", "consumers=4", "ack=auto"),
        20_000,
        5_000,
        "consumer",
    ),
    "steady-auto": Workload(
        "queue at a steady 5,000 msgs/s, AUTO: p50 / p99 / max from each message's due time",
        ("dest=queue", "ack=auto", "rate=5000"),
        60_000,
        20_000,
        "latency",
    ),
    "steady-dups": Workload(
        "same, DUPS_OK: p50 / p99 / max",
        ("dest=queue", "ack=dups_ok", "rate=5000"),
        60_000,
        20_000,
        "latency",
    ),
    "persistent": Workload(
        "queue persistent, sync off (OpenMQ's default; ActiveMQ syncs), 1 producer: msgs/s",
        ("dest=queue", "ack=dups_ok", "persistent=1"),
        20_000,
        5_000,
        "producer",
    ),
    "sync-1": Workload(
        "queue persistent, imq.persist.file.sync.enabled=true, 1 producer: msgs/s",
        ("dest=queue", "ack=dups_ok", "persistent=1"),
        10_000,
        3_000,
        "producer",
        sync=True,
    ),
    "sync-8": Workload(
        "same, 8 producers: msgs/s",
        ("dest=queue", "ack=dups_ok", "persistent=1", "producers=8"),
        40_000,
        10_000,
        "producer",
        sync=True,
    ),
}
BROKERS = ("ours", "stock", "activemq")
# A steady run's second is "slow" when its worst delivery took longer (issue 23's max target).
SLOW_MS = 20.0
TITLES = {
    "ours": "ours (stock client)",
    "stock": "stock OpenMQ 6.9 (stock client)",
    "activemq": "ActiveMQ (its client)",
}


@dataclass
class Target:
    name: str
    url: str
    classpath: str
    provider: str
    stop: object = None


@dataclass
class Figures:
    runs: list[dict[str, float]] = field(default_factory=list)
    failed: int = 0


def missing_tools() -> list[str]:
    missing = [t for t in ("java", "javac") if shutil.which(t) is None]
    missing += [str(j) for j in OPENMQ_JARS if not j.is_file()]
    return missing


def activemq_installed() -> bool:
    return (AMQ_HOME / "bin" / "activemq.jar").is_file() and all(j.is_file() for j in AMQ_JARS)


def compile_bench(out: Path) -> tuple[str, str | None]:
    """JmsBench for the OpenMQ client and, if ActiveMQ is installed, its javax twin."""
    src = HERE / "java" / "JmsBench.java"
    omq = out / "openmq"
    omq.mkdir(parents=True)
    cp = ":".join(str(j) for j in OPENMQ_JARS)
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(omq), str(src)], check=True)
    amq_cp = None
    if activemq_installed():
        amq = out / "activemq"
        amq.mkdir()
        (amq / "JmsBench.java").write_text(src.read_text().replace("jakarta.jms", "javax.jms"))
        jars = ":".join(str(j) for j in AMQ_JARS)
        subprocess.run(
            ["javac", "-nowarn", "-cp", jars, "-d", str(amq), str(amq / "JmsBench.java")],
            check=True,
        )
        amq_cp = f"{jars}:{amq}"
    return f"{cp}:{omq}", amq_cp


def start_activemq(tmp: Path, config: str = AMQ_CONFIG) -> tuple[int, subprocess.Popen]:
    """A private ActiveMQ listening on a free 127.0.0.1 port: openwire only, or the one
    transport connector ``config`` (an activemq.xml with ``{data}`` and ``{port}``)
    names (bench/stomp.py's STOMP)."""
    port = free_port()
    tmp.mkdir(parents=True)
    conf = tmp / "activemq.xml"
    conf.write_text(config.format(data=tmp / "data", port=port))
    log = open(tmp / "activemq.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(
        [
            "java",
            "-Xms512M",
            "-Xmx512M",
            f"-Dactivemq.home={AMQ_HOME}",
            f"-Dactivemq.base={tmp}",
            f"-Dactivemq.conf={tmp}",
            f"-Dactivemq.data={tmp / 'data'}",
            "-jar",
            str(AMQ_HOME / "bin" / "activemq.jar"),
            "start",
            f"xbean:file:{conf}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ActiveMQ exited:\n{(tmp / 'activemq.log').read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return port, proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("ActiveMQ did not start listening within 90 s")


def stop_proc(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def start_targets(
    targets: list[Target],
    names: list[str],
    sync: bool,
    tmp: Path,
    cps: tuple[str, str | None],
    amq_port: int | None,
) -> None:
    """Start the brokers named (appended to ``targets`` as each is up, so the caller
    stops those that started even when a later one fails)."""
    props = ["imq.persist.file.sync.enabled=true"] if sync else []
    tag = "sync" if sync else "default"
    for name in names:
        home = tmp / f"{name}-{tag}"
        home.mkdir()
        if name == "ours":
            b = start_broker(home, "imq.log.level=WARNING", *props)
            url = f"mq://127.0.0.1:{b.portmapper_port}/jms"
            targets.append(Target(name, url, cps[0], "openmq", b.stop))
        elif name == "stock":
            s = start_stock_broker(home, *props, args=("-loglevel", "WARNING"))
            url = f"mq://127.0.0.1:{s.portmapper_port}/jms"
            targets.append(Target(name, url, cps[0], "openmq", s.stop))
        elif name == "activemq" and amq_port is not None and cps[1] is not None:
            targets.append(Target(name, f"tcp://127.0.0.1:{amq_port}", cps[1], "activemq"))


def run_one(t: Target, w: Workload, count: int) -> tuple[dict[str, float], bool]:
    cmd = [
        "java",
        "-cp",
        t.classpath,
        "JmsBench",
        f"provider={t.provider}",
        f"url={t.url}",
        f"count={count}",
        *w.args,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    seconds = [x for x in p.stdout.splitlines() if x.startswith("second ")]
    ok = p.returncode == 0 and line is not None
    if not ok:
        print(f"\n*** FAILED: {w.label.format(n=count)} on {t.name} (exit {p.returncode})")
        print(p.stdout[-4000:], p.stderr[-2000:], sep="\n")
    if line is None:
        return {}, False
    fig = {k: float(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
    if seconds:
        worst = [float(x.split("worst ")[1].split()[0]) for x in seconds]
        fig["seconds"] = worst  # type: ignore[assignment]
        fig["slow_seconds"] = sum(1 for v in worst if v > SLOW_MS)
        fig["n_seconds"] = len(worst)
    return fig, ok


def summary(fig: dict[str, float], kind: str) -> str:
    if not fig:
        return "no result"
    lost = ""
    if fig["missing"]:
        lost = f", {fig['missing']:,.0f} NEVER DELIVERED"
    if kind == "latency":
        return (
            f"p50 {fig['p50_ms']:.2f} p99 {fig['p99_ms']:.2f} max {fig['max_ms']:.1f} ms, "
            f"producer {fig['producer_rate']:,.0f}/s "
            f"(received {fig['received']:,.0f} of {fig['expected']:,.0f}{lost})"
        )
    return (
        f"producer {fig['producer_rate']:,.0f}/s consumer {fig['consumer_rate']:,.0f}/s "
        f"(received {fig['received']:,.0f} of {fig['expected']:,.0f}{lost})"
    )


def _span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return (
        fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"
    )


def _rate(v: float) -> str:
    return f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"


def cell(f: Figures, kind: str) -> str:
    if not f.runs:
        return "—"
    if kind == "latency":
        p50 = _span([r["p50_ms"] for r in f.runs], "{:.2f}")
        p99 = _span([r["p99_ms"] for r in f.runs], "{:.1f}")
        mx = _span([r["max_ms"] for r in f.runs], "{:.0f}")
        slow = sum(int(r.get("slow_seconds", 0)) for r in f.runs)
        secs = sum(int(r.get("n_seconds", 0)) for r in f.runs)
        text = f"{p50} / {p99} / {mx} ms ({slow} of {secs} s worse than {SLOW_MS:.0f} ms)"
    else:
        key = "consumer_rate" if kind == "consumer" else "producer_rate"
        vals = [r[key] for r in f.runs]
        lo, hi = _rate(min(vals)), _rate(max(vals))
        text = lo if lo == hi else f"{lo}–{hi}"
    if f.failed:
        text += f", **{f.failed} run(s) lost messages**"
    return text


def ratio(ours: Figures, other: Figures, kind: str) -> str:
    if not ours.runs or not other.runs:
        return "—"
    if kind == "latency":
        # theirs / ours on p99: above 1, ours has the shorter tail.
        a = [r["p99_ms"] for r in other.runs]
        b = [r["p99_ms"] for r in ours.runs]
        lo, hi = min(a) / max(max(b), 1e-6), max(a) / max(min(b), 1e-6)
    else:
        key = "consumer_rate" if kind == "consumer" else "producer_rate"
        a = [r[key] for r in ours.runs]
        b = [r[key] for r in other.runs]
        lo, hi = min(a) / max(b), max(a) / min(b)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="comma-separated, of: " + ", ".join(WORKLOADS),
    )
    ap.add_argument(
        "--brokers", default=",".join(BROKERS), help="comma-separated, of: " + ", ".join(BROKERS)
    )
    ap.add_argument("--rounds", type=int, default=None, help="default 2 (1 with --quick)")
    ap.add_argument("--count", type=int, default=None, help="messages per run (every workload)")
    ap.add_argument("--quick", action="store_true", help="smaller counts and one round")
    ap.add_argument(
        "--seconds", action="store_true", help="print each second's worst latency of steady runs"
    )
    args = ap.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    brokers = [b for b in args.brokers.split(",") if b]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}")
    for b in brokers:
        if b not in BROKERS:
            ap.error(f"unknown broker {b!r}")
    rounds = args.rounds or (1 if args.quick else 2)
    missing = missing_tools()
    if "stock" in brokers:
        missing += missing_stock_broker()
    if missing:
        sys.exit("bench/jms.py cannot run; missing: " + "; ".join(missing))
    if "activemq" in brokers and not activemq_installed():
        print("ActiveMQ is not installed (apt-get install -y activemq): its column stays empty")
        brokers.remove("activemq")

    tmp = Path(tempfile.mkdtemp(prefix="jmsbench-"))
    figures: dict[tuple[str, str], Figures] = {
        (w, b): Figures() for w in workloads for b in brokers
    }
    counts = {
        w: args.count or (WORKLOADS[w].quick if args.quick else WORKLOADS[w].count)
        for w in workloads
    }
    amq_proc = None
    failed = 0
    try:
        cps = compile_bench(tmp / "classes")
        amq_port = None
        if "activemq" in brokers:
            amq_port, amq_proc = start_activemq(tmp / "activemq")
        for sync in (False, True):
            group = [w for w in workloads if WORKLOADS[w].sync == sync]
            if not group:
                continue
            targets: list[Target] = []
            try:
                start_targets(targets, brokers, sync, tmp, cps, amq_port)
                for r in range(rounds):
                    for w in group:
                        wl = WORKLOADS[w]
                        order = targets[r % len(targets) :] + targets[: r % len(targets)]
                        for t in order:
                            fig, ok = run_one(t, wl, counts[w])
                            print(
                                f"round {r + 1} {w:12} {t.name:9} {summary(fig, wl.kind)}",
                                flush=True,
                            )
                            worst = fig.pop("seconds", None)
                            if worst and args.seconds:
                                text = " ".join(f"{v:.1f}" for v in worst)  # type: ignore[union-attr]
                                print(f"    each second's worst (ms): {text}")
                            f = figures[(w, t.name)]
                            if fig:
                                f.runs.append(fig)
                            if not ok:
                                f.failed += 1
                                failed += 1
            finally:
                for t in targets:
                    if t.stop is not None:
                        t.stop()  # type: ignore[operator]
    finally:
        if amq_proc is not None:
            stop_proc(amq_proc)
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {rounds} round(s), 1 KB messages, ranges over the rounds:"
    )
    print()
    heads = ["workload", *(TITLES[b] for b in brokers)]
    if "ours" in brokers:
        heads += [
            f"ours / {'OpenMQ' if b == 'stock' else 'ActiveMQ'}" for b in brokers if b != "ours"
        ]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for w in workloads:
        wl = WORKLOADS[w]
        row = [wl.label.format(n=f"{counts[w]:,}")]
        row += [cell(figures[(w, b)], wl.kind) for b in brokers]
        if "ours" in brokers:
            row += [
                ratio(figures[(w, "ours")], figures[(w, b)], wl.kind)
                for b in brokers
                if b != "ours"
            ]
        print("| " + " | ".join(row) + " |")
    print()
    print("Ratios: rates ours / theirs; latency rows theirs / ours on p99 (above 1: ours better).")
    if failed:
        print(f"\nFAILED: {failed} run(s) did not deliver every message (see above)")
        sys.exit(1)


if __name__ == "__main__":
    main()
