"""What JMX monitoring costs the message rate (issue 39's monitoring check).

    .venv/bin/python bench/jmx_poll.py                  # 3 rounds, queue-auto, 100,000 messages
    .venv/bin/python bench/jmx_poll.py --rounds 2 --count 50000 --workload topic

One broker of ours with JMX on (``imq.jmx.connector.activelist=jmxrmi``).  Each round runs
bench/jms.py's workload (bench/java/JmsBench.java, the stock client) twice, in turn without
and with tests/interop/java/JmxPoll.java polling: the JDK's javax.management with the stock
AdminConnectionFactory, listing every MBean and reading every attribute of each once a
second for as long as the traffic runs.  The order alternates each round.  Prints each
run's rate and the broker's CPU time per 1000 messages (its process tree, from /proc: the
poller's own JVM runs on the same machine, so on few cores the rate ratio also counts
the poller's CPU; the broker's CPU per message is what answering the polls costs it),
the polled/unpolled ratios of the medians, the poller's totals (rounds, values read; a
failed check fails the run) and the load average beside each figure.

``--stock`` measures the stock OpenMQ 6.9 broker the same way.  ``--idle SECONDS`` runs no
traffic: the broker's CPU over SECONDS without, then with the poller, and the difference
per poll round (what one round costs the broker, JRMP and event loop included).

Each polled run also prints the poller JVM's own CPU per round (its process, from /proc):
on a machine with few cores that CPU is taken from the broker and the traffic's JVMs, so
it lowers the rate whatever the broker does.  ``--warmup SECONDS`` starts the poller that
long before the traffic (default 3 s: connected; a JVM's first minute is mostly its JIT
compiling, which an agent that has run for a while is past).  ``--jvm-flags`` gives the poller's JVM
options (what a monitoring agent would run with, e.g. ``-XX:+UseSerialGC
-XX:TieredStopAtLevel=1``).  ``--elsewhere`` adds a third run per round in which the
poller polls a second, idle broker of ours: the traffic's broker then answers no poll,
and its CPU per message and rate show what a poller and a polled broker on the same
cores cost it by their presence alone.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from jms import WORKLOADS, Target, compile_bench, run_one  # noqa: E402

from broker.launcher import start_broker, start_stock_broker  # noqa: E402
from broker.stock_paths import JAVA_CLIENT  # noqa: E402

POLLER = ROOT / "tests" / "interop" / "java"


def compile_poller(out: Path) -> str:
    jars = [str(JAVA_CLIENT / "imq.jar"), str(JAVA_CLIENT / "jakarta.jms-api-3.1.0.jar")]
    cp = ":".join(jars)
    out.mkdir(parents=True)
    sources = [str(POLLER / "JmxPoll.java"), str(POLLER / "Checks.java")]
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), *sources], check=True)
    return ":".join([str(out), *jars])


def start(tmp: Path, stock: bool) -> tuple[int, object, int]:
    if stock:
        s = start_stock_broker(tmp, args=("-loglevel", "WARNING"))
        return s.portmapper_port, s.stop, s.proc.pid
    b = start_broker(tmp, "imq.log.level=WARNING", "imq.jmx.connector.activelist=jmxrmi")
    return b.portmapper_port, b.stop, b.proc.pid


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` and its descendants, from /proc."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(d.name)] = int(fields[1])
        ticks[int(d.name)] = int(fields[11]) + int(fields[12])
    tree = {pid}
    grew = True
    while grew:
        more = {p for p, pp in parents.items() if pp in tree} - tree
        grew = bool(more)
        tree |= more
    return sum(ticks.get(p, 0) for p in tree) / os.sysconf("SC_CLK_TCK")


def idle_cost(seconds: float, stock: bool, flags: list[str]) -> None:
    """Print the broker's CPU per poll round with no traffic: CPU over ``seconds`` with
    the poller, less the CPU over as long without it."""
    tmp = Path(tempfile.mkdtemp(prefix="jmxpoll-idle-"))
    stop = None
    try:
        poll_cp = compile_poller(tmp / "poll")
        (tmp / "broker").mkdir()
        port, stop, pid = start(tmp / "broker", stock)
        time.sleep(2)  # started and settled
        cpu = cpu_seconds(pid)
        time.sleep(seconds)
        quiet = cpu_seconds(pid) - cpu
        rounds = int(seconds)
        poller = _poller(poll_cp, port, rounds + 3, flags)
        assert poller.stdout is not None
        lines: list[str] = []
        cpu = pcpu = 0.0
        for line in poller.stdout:
            lines.append(line)
            # From the end of the third round (connected, MBeanInfos fetched) to the end
            # of the last: ``rounds`` rounds.
            if line.startswith("round 2 "):
                cpu = cpu_seconds(pid)
                pcpu = cpu_seconds(poller.pid)
            if line.startswith(f"round {rounds + 2} "):
                cpu = cpu_seconds(pid) - cpu
                pcpu = cpu_seconds(poller.pid) - pcpu
                break
        poller.wait(timeout=60)
        fails = [x for x in lines if x.startswith("fail ")]
        mbeans = next((x.split()[3] for x in lines if x.startswith("round ")), "?")
        per_round = (cpu - quiet) / rounds * 1000
        print(
            f"{'stock' if stock else 'ours'}: {mbeans} MBeans, broker CPU {cpu:.2f} s polled, "
            f"{quiet:.2f} s quiet over {rounds} s: {per_round:.1f} ms per poll round; "
            f"the poller's JVM {pcpu / rounds * 1000:.1f} ms per round "
            f"(load {os.getloadavg()[0]:.2f})" + (f" FAILED: {fails}" if fails else "")
        )
        if fails:
            sys.exit(1)
    finally:
        if callable(stop):
            stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _poller(poll_cp: str, port: int, seconds: int, flags: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["java", *flags, "-cp", poll_cp, "JmxPoll", "127.0.0.1", str(port), str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


# Each run's mode: no poller; the poller polling the broker under traffic; the poller
# polling a second, idle broker (``--elsewhere``: what the poller's JVM and a polled
# broker on the same cores cost the traffic's broker without it answering a poll).
UNPOLLED, POLLED, ELSEWHERE = "unpolled", "polled", "elsewhere"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--workload", default="queue-auto", choices=sorted(WORKLOADS))
    ap.add_argument("--stock", action="store_true", help="the stock broker instead of ours")
    ap.add_argument(
        "--idle", type=float, metavar="SECONDS", help="no traffic: broker CPU per poll round"
    )
    ap.add_argument(
        "--elsewhere",
        action="store_true",
        help="also runs with the poller polling a second, idle broker instead",
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="how long the poller polls before the traffic starts (default 3: connected; "
        "a monitoring agent that has run for a while has its JIT work behind it)",
    )
    ap.add_argument(
        "--jvm-flags",
        default="",
        metavar="FLAGS",
        help='the poller JVM\'s options (e.g. "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")',
    )
    args = ap.parse_args()
    flags = shlex.split(args.jvm_flags)
    if args.idle:
        idle_cost(args.idle, args.stock, flags)
        return
    w = WORKLOADS[args.workload]
    tmp = Path(tempfile.mkdtemp(prefix="jmxpoll-bench-"))
    stops: list[object] = []
    try:
        bench_cp, _ = compile_bench(tmp / "bench")
        poll_cp = compile_poller(tmp / "poll")
        (tmp / "broker").mkdir()
        port, stop, pid = start(tmp / "broker", args.stock)
        stops.append(stop)
        other = 0
        modes = [UNPOLLED, POLLED]
        if args.elsewhere:
            (tmp / "other").mkdir()
            other, stop2, _pid2 = start(tmp / "other", args.stock)
            stops.append(stop2)
            modes.append(ELSEWHERE)
        target = Target(
            "stock" if args.stock else "ours", f"mq://127.0.0.1:{port}/jms", bench_cp, "openmq"
        )
        rates: dict[str, list[float]] = {m: [] for m in modes}
        costs: dict[str, list[float]] = {m: [] for m in modes}
        key = "producer_rate" if w.kind in ("producer", "latency") else "consumer_rate"
        polls: list[tuple[float, int]] = []  # polled runs: (broker CPU s, poll rounds)
        poller_cpu: dict[str, list[float]] = {POLLED: [], ELSEWHERE: []}  # ms per round
        failed = False
        print(
            f"{target.name}: {w.label.format(n=args.count)}"
            + (f"; poller JVM flags: {args.jvm_flags}" if flags else "")
            + (
                f"; poller started {args.warmup:.0f} s before the traffic"
                if args.warmup != 3
                else ""
            )
        )
        for r in range(args.rounds):
            # The order rotates each round.
            for mode in modes[r % len(modes) :] + modes[: r % len(modes)]:
                poller = None
                if mode != UNPOLLED:
                    poller = _poller(poll_cp, port if mode == POLLED else other, 3600, flags)
                    time.sleep(args.warmup)  # connected and polling before the traffic
                cpu = cpu_seconds(pid)
                pcpu = cpu_seconds(poller.pid) if poller is not None else 0.0
                began = time.monotonic()
                fig, ok = run_one(target, w, args.count)
                cpu = cpu_seconds(pid) - cpu
                # The poller polls once a second: the rounds the CPU figure saw.
                seen = int(time.monotonic() - began)
                load = os.getloadavg()[0]
                summary = ""
                if poller is not None:
                    pcpu = cpu_seconds(poller.pid) - pcpu
                    poller.terminate()
                    out, _ = poller.communicate(timeout=30)
                    rounds = [x.split() for x in out.splitlines() if x.startswith("round ")]
                    fails = [x for x in out.splitlines() if x.startswith("fail ")]
                    reads = sum(int(x[5]) for x in rounds)
                    if mode == POLLED:
                        polls.append((cpu, seen))
                    if seen:
                        poller_cpu[mode].append(pcpu / seen * 1000)
                    summary = (
                        f"  poller: {len(rounds)} rounds, {reads} values read, "
                        f"its JVM {pcpu / max(seen, 1) * 1000:.0f} ms CPU a round"
                    )
                    if fails:
                        failed = True
                        summary += f", FAILED: {fails}"
                if not ok:
                    failed = True
                    continue
                value = fig[key]
                rates[mode].append(value)
                per_k = cpu * 1000 / args.count * 1000  # broker CPU ms per 1000 messages
                costs[mode].append(per_k)
                print(
                    f"  round {r + 1} {mode:<9} {value:10,.0f} msgs/s  broker CPU "
                    f"{per_k:6.1f} ms/1000 msgs  load {load:.2f}{summary}"
                )
        if rates[UNPOLLED] and rates[POLLED]:
            off, on = statistics.median(rates[UNPOLLED]), statistics.median(rates[POLLED])
            c_off, c_on = statistics.median(costs[UNPOLLED]), statistics.median(costs[POLLED])
            print(
                f"median unpolled {off:,.0f}, polled {on:,.0f} msgs/s: ratio {on / off:.3f}; "
                f"broker CPU per 1000 msgs {c_off:.1f} / {c_on:.1f} ms: ratio {c_on / c_off:.3f} "
                f"(load average now {os.getloadavg()[0]:.2f})"
            )
            # What the polls added: each polled run's CPU beyond the unpolled CPU per
            # message, over the rounds polled meanwhile.
            extra = [(cpu - c_off * args.count / 1_000_000) / n * 1000 for cpu, n in polls if n]
            if extra:
                print(f"broker CPU per poll round under traffic: {statistics.median(extra):.1f} ms")
            if poller_cpu[POLLED]:
                print(
                    f"poller JVM CPU per poll round: {statistics.median(poller_cpu[POLLED]):.1f} ms"
                )
        if rates.get(ELSEWHERE) and rates[UNPOLLED]:
            off, there = statistics.median(rates[UNPOLLED]), statistics.median(rates[ELSEWHERE])
            c_off, c_there = statistics.median(costs[UNPOLLED]), statistics.median(costs[ELSEWHERE])
            print(
                f"polling another broker: {there:,.0f} msgs/s, ratio {there / off:.3f}; broker "
                f"CPU per 1000 msgs {c_there:.1f} ms: ratio {c_there / c_off:.3f}"
            )
        if failed:
            sys.exit(1)
    finally:
        for stop in stops:
            if callable(stop):
                stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
