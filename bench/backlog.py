"""A backlog bigger than memory: ours (paging, issue 34), the stock OpenMQ broker, ActiveMQ.

    .venv/bin/python bench/backlog.py                     # 200,000 × 10 KB, queue, every broker
    .venv/bin/python bench/backlog.py --quick             # 20,000 × 10 KB, budget 16m: minutes
    .venv/bin/python bench/backlog.py --restart           # and a restart between fill and drain
    .venv/bin/python bench/backlog.py --scenario durable  # an inactive durable subscription
    .venv/bin/python bench/backlog.py --brokers ours,stock --count 50000 --budget 32m

For each broker in turn, in one sitting (a fresh broker and instance directory each):

1. start it: ours with ``imq.memory.limit=--budget`` (64m), the stock OpenMQ 6.9 broker with
   its default heap (run.sh: 192 MB), ActiveMQ as bench/jms.py runs it (512 MB heap, KahaDB);
2. fill: one producer of the stock OpenMQ Java client (ActiveMQ's for ActiveMQ:
   bench/java/JmsBench.java, ``consumers=0``) sends ``--count`` persistent messages of
   ``--size`` bytes to a queue nobody consumes (``--scenario durable``: to a topic whose
   durable subscription was created and closed just before).  No progress for ``--stall``
   seconds ends the fill as a stall.  The broker's resident memory (VmRSS of its process and
   its children, /proc) is sampled every 0.5 s: before the fill (baseline) and its peaks;
3. ``--restart``: SIGTERM, then the same broker on the same instance directory (ours and the
   stock broker; ActiveMQ is not restarted): the time to stop, the time from start to ready;
4. drain: one DUPS_OK_ACKNOWLEDGE consumer of the same client (JmsBench ``producers=0``)
   checks that every number 0..count-1 arrives; the drain rate, and the time from the
   consumer's creation to its first message.

Ours also runs a second time with nothing paged (``imq.swap.enabled=false`` and a budget that
holds the whole backlog, ``--unpaged-budget``): the reference for "producing while paging"
and "draining a paged backlog".  Both OpenMQ-protocol brokers get
``imq.autocreate.destination.maxNumMsgs=-1``: OpenMQ's default for an auto-created
destination (100,000 messages, then REJECT_NEWEST) would refuse the backlog itself.

Prints a table per broker with ratios (ours / stock, ours / ActiveMQ), the paging issue's
targets beside ours, and the command line.  Exits 1 when a message was lost (duplicates are
DUPS_OK's to make and are only counted) or a run could not be completed.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from jms import (  # noqa: E402
    activemq_installed,
    compile_bench,
    missing_tools,
    start_activemq,
    stop_proc,
)

from broker.launcher import (  # noqa: E402
    missing_stock_broker,
    start_broker,
    start_stock_broker,
    terminate,
)

MB = 1024 * 1024
BROKERS = ("ours", "stock", "activemq")
QUEUE = "backlog.queue"
TOPIC = "backlog.topic"
SUBSCRIPTION = "backlog-sub"
CLIENT_ID = "backlog"
# OpenMQ's auto-created destinations stop at 100,000 messages (REJECT_NEWEST) by default.
OPENMQ_PROPS = ("imq.autocreate.destination.maxNumMsgs=-1",)
# How long a broker may take over a clean shutdown with a large backlog before SIGKILL.
STOP_GRACE = 300.0
SAMPLE_EVERY = 0.5
# The paging issue's targets for ours.
RSS_HEADROOM = 100 * MB
FILL_TARGET = 0.70
DRAIN_TARGET = 0.50
READY_TARGET_S = 10.0
FIRST_TARGET_MS = 1000.0


def parse_size(text: str) -> int:
    """``64m``, ``4g``, ``512k`` or bytes."""
    m = re.fullmatch(r"(\d+)([kmg]?)b?", text.strip().lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(m[1]) * {"": 1, "k": 1024, "m": MB, "g": 1024 * MB}[m[2]]


def broker_size(n: int) -> str:
    """``n`` bytes as OpenMQ's size properties take it: they know b, k and m, not g."""
    return f"{n // MB}m" if n % MB == 0 else (f"{n // 1024}k" if n % 1024 == 0 else str(n))


# -- resident memory of a process tree -------------------------------------------------


def _vmrss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss(pid: int) -> int:
    """VmRSS of ``pid`` and all its descendants, in bytes (ours may start helpers; the
    stock broker's run.sh execs its JVM, ActiveMQ is the JVM itself)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ")".
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += _vmrss(p)
        todo += children.get(p, [])
    return total


class RssSampler:
    """Samples the broker's tree RSS every SAMPLE_EVERY seconds on a thread of its own,
    keeping the peak of each phase (the phase and the PID change as the run goes on)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.phase: str | None = None
        self.peaks: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample()

    def sample(self) -> int:
        with self._lock:
            pid, phase = self.pid, self.phase
        if pid is None:
            return 0
        rss = tree_rss(pid)
        with self._lock:
            if phase is not None and phase == self.phase:
                self.peaks[phase] = max(self.peaks.get(phase, 0), rss)
        return rss

    def watch(self, pid: int | None, phase: str | None) -> None:
        with self._lock:
            self.pid, self.phase = pid, phase

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


# -- brokers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One column: which broker, with which properties."""

    key: str
    kind: str  # ours, stock or activemq
    title: str
    memory: str  # what bounds its memory, for the table
    props: tuple[str, ...] = ()


@dataclass
class Live:
    """A running broker and how JmsBench reaches it."""

    url: str
    classpath: str
    provider: str
    proc: subprocess.Popen


def start(spec: Spec, home: Path, cps: tuple[str, str | None]) -> Live:
    """Start ``spec``'s broker with its instance in ``home`` (again: the same instance)."""
    if spec.kind == "ours":
        home.mkdir(parents=True, exist_ok=True)
        # (A restart with a deep backlog on a shared machine can take minutes.)
        b = start_broker(home, "imq.log.level=WARNING", *spec.props, ready_timeout=600)
        return Live(f"mq://127.0.0.1:{b.portmapper_port}/jms", cps[0], "openmq", b.proc)
    if spec.kind == "stock":
        s = start_stock_broker(home, *spec.props, args=("-loglevel", "WARNING"))
        return Live(f"mq://127.0.0.1:{s.portmapper_port}/jms", cps[0], "openmq", s.proc)
    assert cps[1] is not None
    port, proc = start_activemq(home / "activemq")
    return Live(f"tcp://127.0.0.1:{port}", cps[1], "activemq", proc)


def stop(live: Live) -> tuple[float, bool]:
    """SIGTERM and wait (SIGKILL after STOP_GRACE): seconds taken, and whether it
    exited by itself."""
    t0 = time.monotonic()
    terminate(live.proc, STOP_GRACE)
    return time.monotonic() - t0, live.proc.returncode != -9


# -- JmsBench ----------------------------------------------------------------------------


@dataclass
class BenchRun:
    """One JmsBench process: its output, RESULT figures and how it ended."""

    lines: list[str]
    result: dict[str, float]
    returncode: int
    sent: int  # the last "progress" figures
    received: int
    seconds: float
    moved: float  # seconds from the start to the last change of the watched figure
    stalled: bool


def jmsbench(live: Live, args: list[str], stall: float, watch: str) -> BenchRun:
    """Run JmsBench with ``progress=1``; kill it when its ``watch`` figure (sent or
    received) has not moved for ``stall`` seconds."""
    cmd = ["java", "-cp", live.classpath, "JmsBench", f"provider={live.provider}"]
    cmd += [f"url={live.url}", *args, "progress=1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    state = {"sent": 0, "received": 0, "moved": time.monotonic()}
    lock = threading.Lock()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            if line.startswith("progress "):
                sent, received = (int(x) for x in line.split()[1:3])
                with lock:
                    new = {"sent": sent, "received": received}
                    if new[watch] != state[watch]:
                        state["moved"] = time.monotonic()
                    state.update(new)
            else:
                lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    t0 = time.monotonic()
    reader.start()
    stalled = False
    while proc.poll() is None:
        time.sleep(0.25)
        with lock:
            idle = time.monotonic() - state["moved"]
        if idle > stall and proc.poll() is None:
            stalled = True
            proc.kill()
    proc.wait()
    reader.join(10)
    seconds = time.monotonic() - t0
    moved = state["moved"] - t0
    result: dict[str, float] = {}
    for line in lines:
        if line.startswith("RESULT "):
            result = {k: float(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
    return BenchRun(
        lines,
        result,
        proc.returncode,
        int(state["sent"]),
        int(state["received"]),
        seconds,
        moved,
        stalled,
    )


def dest_args(scenario: str) -> list[str]:
    if scenario == "durable":
        return ["dest=topic", f"name={TOPIC}", f"durable={SUBSCRIPTION}", f"clientid={CLIENT_ID}"]
    return ["dest=queue", f"name={QUEUE}"]


# -- one broker's run --------------------------------------------------------------------


@dataclass
class Outcome:
    """What one column measured (None: not measured)."""

    fill_rate: float | None = None
    sent: int = 0
    stall: str | None = None  # why the fill ended short
    rss_base: int | None = None
    rss_fill: int | None = None
    rss_ready: int | None = None
    rss_drain: int | None = None
    stop_s: float | None = None
    stop_clean: bool = True
    ready_s: float | None = None
    first_ms: float | None = None
    drain_rate: float | None = None
    received: int | None = None
    expected: int | None = None
    duplicates: int | None = None
    lost: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def run_broker(
    spec: Spec,
    home: Path,
    cps: tuple[str, str | None],
    args: argparse.Namespace,
    rss: RssSampler,
) -> Outcome:
    """Start, fill, (restart,) drain and stop one broker; never raises for the broker's
    own failures (they are the result)."""
    out = Outcome()
    live: Live | None = None
    say = lambda text: print(f"[{spec.key}] {text}", flush=True)  # noqa: E731
    try:
        t0 = time.monotonic()
        live = start(spec, home, cps)
        say(f"started in {time.monotonic() - t0:.1f} s ({spec.memory})")
        rss.watch(live.proc.pid, None)
        dest = dest_args(args.scenario)
        if args.scenario == "durable":
            # The subscription exists, inactive, before the first message is sent.
            sub = jmsbench(live, [*dest, "producers=0", "consumers=1", "count=0"], 60, "sent")
            if sub.returncode != 0:
                raise RuntimeError("creating the durable subscription failed:\n" + _tail(sub))
        time.sleep(1.0)  # let the start-up settle before the baseline
        out.rss_base = rss.sample()
        rss.watch(live.proc.pid, f"{spec.key}:fill")
        say(f"filling {args.count:,} × {args.size:,} B persistent (RSS {out.rss_base / MB:.0f} MB)")
        fill = jmsbench(
            live,
            [
                *dest,
                "producers=1",
                "consumers=0",
                f"count={args.count}",
                f"size={args.size}",
                "persistent=1",
            ],
            args.stall,
            "sent",
        )
        out.rss_fill = rss.peaks.get(f"{spec.key}:fill", out.rss_base)
        # JmsBench's own "sent N in S s" when it got that far, else its last progress line.
        done = next(
            (m for ln in fill.lines if (m := re.match(r"sent (\d+) in ([\d.]+) s", ln))), None
        )
        if done is not None:
            out.sent = int(done[1])
            out.fill_rate = out.sent / max(float(done[2]), 1e-9)
        else:
            # Up to the last progress: the stall itself is reported apart (JVM start included).
            out.sent = fill.sent
            out.fill_rate = fill.sent / fill.moved if fill.moved > 0 else None
        if not (fill.result and fill.returncode == 0):
            if fill.stalled:
                out.stall = (
                    f"stalled: no message sent for {args.stall:.0f} s after "
                    f"{out.sent:,} of {args.count:,}"
                )
            else:
                out.stall = (
                    f"the producer stopped after {out.sent:,} of {args.count:,} "
                    f"(exit {fill.returncode})"
                )
            say(out.stall)
            if fill.lines:
                say("its output:\n" + _tail(fill))
        say(
            f"fill: {out.sent:,} sent, {out.fill_rate or 0:,.0f} msgs/s, "
            f"RSS peak {out.rss_fill / MB:.0f} MB"
        )
        if live.proc.poll() is not None:
            raise RuntimeError(f"the broker exited during the fill (status {live.proc.returncode})")

        rss.watch(live.proc.pid, f"{spec.key}:drain")
        if args.restart and spec.kind != "activemq":
            rss.watch(None, None)
            out.stop_s, out.stop_clean = stop(live)
            say(f"stopped in {out.stop_s:.1f} s" + ("" if out.stop_clean else " (SIGKILL)"))
            t0 = time.monotonic()
            live = start(spec, home, cps)
            out.ready_s = time.monotonic() - t0
            # What recovery alone costs in memory, before a consumer reads anything.
            rss.watch(live.proc.pid, None)
            out.rss_ready = rss.sample()
            say(f"restarted: ready in {out.ready_s:.1f} s, RSS {out.rss_ready / MB:.0f} MB")
            rss.watch(live.proc.pid, f"{spec.key}:drain")
        elif args.restart:
            out.notes.append("not restarted (bench/jms.py's ActiveMQ starts in a new directory)")

        # After a short fill the message being sent when it ended may or may not be there.
        count = out.sent if out.stall is None else out.sent + 1
        say(f"draining {count:,} (DUPS_OK)")
        drain = jmsbench(
            live,
            [
                *dest,
                "producers=0",
                "consumers=1",
                f"count={count}",
                "ack=dups_ok",
                f"idle={int(args.stall)}",
            ],
            args.stall + 30,  # JmsBench gives up itself after `idle`; this is a backstop
            "received",
        )
        out.rss_drain = rss.peaks.get(f"{spec.key}:drain")
        check_drain(out, drain, count, say)
        if live.proc.poll() is not None:
            raise RuntimeError(
                f"the broker exited during the drain (status {live.proc.returncode})"
            )
    except Exception as e:  # noqa: BLE001 - a broker's failure is this column's result
        out.error = f"{type(e).__name__}: {e}"
        say(f"FAILED: {out.error}")
    finally:
        rss.watch(None, None)
        if live is not None:
            if spec.kind == "activemq":
                stop_proc(live.proc)
            else:
                terminate(live.proc, STOP_GRACE)
    return out


def check_drain(out: Outcome, drain: BenchRun, count: int, say: Callable[[str], None]) -> None:
    """Fill in the drain's figures; a number never delivered counts as lost, except the
    one that was in flight when a short fill ended."""
    r = drain.result
    if not r:
        raise RuntimeError(
            f"the drain printed no result (exit {drain.returncode}):\n{_tail(drain)}"
        )
    out.drain_rate = r["consumer_rate"]
    out.received = int(r["received"])
    out.expected = int(r["expected"])
    out.duplicates = int(r["duplicates"])
    for line in drain.lines:
        if line.startswith("first delivery "):
            out.first_ms = float(line.split()[2])
    missing = int(r["missing"])
    numbers = next(
        (ln.split(":")[1].split() for ln in drain.lines if ln.startswith("missing ")), []
    )
    if out.stall is not None and missing == 1 and numbers == [str(count - 1)]:
        missing = 0  # the send that never completed
    strays = next(
        (int(m[1]) for ln in drain.lines if (m := re.search(r"(\d+) numbered outside", ln))), 0
    )
    out.lost = missing
    if strays:
        out.notes.append(f"{strays} deliveries numbered outside 0..{count - 1}")
        out.lost += strays
    say(
        f"drain: {out.received:,} of {out.expected:,} at {out.drain_rate:,.0f} msgs/s, "
        f"first after {out.first_ms if out.first_ms is not None else float('nan'):.0f} ms, "
        f"{out.duplicates} duplicates, {out.lost} lost"
    )
    if out.lost:
        say("LOST MESSAGES; the drain's output:\n" + _tail(drain))


def _tail(run: BenchRun) -> str:
    return "\n".join(run.lines[-40:])


# -- the report --------------------------------------------------------------------------


def _mb(v: int | None) -> str:
    """Resident memory in MiB (written MB, as /proc and ps mean it)."""
    return "—" if v is None else f"{v / MB:,.0f} MB"


def _num(v: float | None, fmt: str) -> str:
    return "—" if v is None else fmt.format(v)


def _ratio(a: float | int | None, b: float | int | None) -> str:
    return "—" if a is None or b is None or not b else f"{a / b:.2f}"


def report(specs: list[Spec], outcomes: dict[str, Outcome], args: argparse.Namespace) -> None:
    total = args.count * args.size
    print()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores; "
        f"{args.count:,} persistent × {args.size:,} B = {total / 1e9:.2f} GB, "
        f"scenario {args.scenario}, restart {'yes' if args.restart else 'no'}; "
        f"load average {args.load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    print()
    peers = [s for s in specs if s.kind != "ours"]
    heads = ["", *(s.title for s in specs)]
    ours = outcomes.get("ours")
    if ours is not None:
        heads += [f"ours / {'OpenMQ' if s.kind == 'stock' else 'ActiveMQ'}" for s in peers]
    rows: list[tuple[str, Callable[[Outcome], str], Callable[[Outcome], float | None] | None]] = [
        ("memory bound", lambda o: "", None),
        ("fill: producer msgs/s", lambda o: _num(o.fill_rate, "{:,.0f}"), lambda o: o.fill_rate),
        ("fill: stalled", lambda o: "—" if o.error and not o.sent else (o.stall or "no"), None),
        ("RSS before the fill", lambda o: _mb(o.rss_base), lambda o: o.rss_base),
        ("RSS peak, fill", lambda o: _mb(o.rss_fill), lambda o: o.rss_fill),
        ("RSS just after the restart", lambda o: _mb(o.rss_ready), lambda o: o.rss_ready),
        ("RSS peak, drain", lambda o: _mb(o.rss_drain), lambda o: o.rss_drain),
        ("stop (SIGTERM to exit) s", lambda o: _num(o.stop_s, "{:.1f}"), lambda o: o.stop_s),
        ("restart: start to ready s", lambda o: _num(o.ready_s, "{:.1f}"), lambda o: o.ready_s),
        (
            "first message after the consumer attached, ms",
            lambda o: _num(o.first_ms, "{:,.0f}"),
            lambda o: o.first_ms,
        ),
        ("drain: consumer msgs/s", lambda o: _num(o.drain_rate, "{:,.0f}"), lambda o: o.drain_rate),
        (
            "drain: received / expected, duplicates, lost",
            lambda o: (
                "—"
                if o.received is None
                else f"{o.received:,} / {o.expected:,}, {o.duplicates:,}, {o.lost:,}"
            ),
            None,
        ),
    ]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for label, show, value in rows:
        if label == "memory bound":
            cells = [s.memory for s in specs]
        else:
            cells = [show(outcomes[s.key]) for s in specs]
        if ours is not None:
            cells += [_ratio(value(ours), value(outcomes[s.key])) if value else "" for s in peers]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    print("Ratios are ours / theirs: above 1 is better for rates, below 1 for RSS and times.")
    for s in specs:
        o = outcomes[s.key]
        for note in ([o.error] if o.error else []) + o.notes:
            print(f"{s.title}: {note}")
    if ours is not None:
        targets(ours, outcomes, args)
    print()
    print("command: .venv/bin/python bench/backlog.py " + shlex.join(sys.argv[1:]))


def targets(ours: Outcome, outcomes: dict[str, Outcome], args: argparse.Namespace) -> None:
    """The paging issue's targets, each with ours' figure beside it."""
    base = outcomes.get("ours-unpaged")
    amq = outcomes.get("activemq")

    def verdict(ok: bool | None) -> str:
        return "not measured" if ok is None else ("met" if ok else "NOT MET")

    print()
    fill_share = drain_share = None
    if base is not None and ours.fill_rate and base.fill_rate:
        fill_share = ours.fill_rate / base.fill_rate
        print(f"producing while paging: {fill_share:.0%} of the rate with nothing paged")
    if base is not None and ours.drain_rate and base.drain_rate:
        drain_share = ours.drain_rate / base.drain_rate
        print(f"draining a paged backlog: {drain_share:.0%} of the in-memory drain rate")
    print()
    print(f"Targets (ours, budget {args.budget_text}):")
    stalled = None if ours.fill_rate is None else ours.stall is not None
    print(f"  no stall while filling: {verdict(None if stalled is None else not stalled)}")
    seen = (ours.rss_fill, ours.rss_ready, ours.rss_drain)
    peak = max((v for v in seen if v is not None), default=None)
    if peak is not None and ours.rss_base is not None:
        limit = args.budget + ours.rss_base + RSS_HEADROOM
        print(
            f"  RSS never above budget + baseline + 100 MB = {limit / MB:,.0f} MB: "
            f"peak {peak / MB:,.0f} MB, {verdict(peak <= limit)}"
        )
    if fill_share is not None:
        print(
            f"  producing while paging >= {FILL_TARGET:.0%} of the unpaged rate: "
            f"{fill_share:.0%}, {verdict(fill_share >= FILL_TARGET)}"
        )
    if drain_share is not None:
        print(
            f"  draining >= {DRAIN_TARGET:.0%} of the in-memory drain rate: "
            f"{drain_share:.0%}, {verdict(drain_share >= DRAIN_TARGET)}"
        )
    if amq is not None and amq.drain_rate and ours.drain_rate:
        print(
            f"  draining faster than ActiveMQ: {ours.drain_rate:,.0f} against "
            f"{amq.drain_rate:,.0f} msgs/s, {verdict(ours.drain_rate > amq.drain_rate)}"
        )
    else:
        print("  draining faster than ActiveMQ: not measured")
    size = args.count * args.size
    # The 2 GB is the default backlog, 200,000 × 10 KB = 2.05e9 bytes.
    scale = "" if size >= 2e9 else f" (this backlog: {size / 1e9:.2f} GB, not 2 GB)"
    if ours.ready_s is not None:
        print(
            f"  restart with a 2 GB backlog ready in < {READY_TARGET_S:.0f} s: "
            f"{ours.ready_s:.1f} s, {verdict(ours.ready_s < READY_TARGET_S)}{scale}"
        )
    else:
        how = "" if args.restart else " (--restart)"
        print(f"  restart with a 2 GB backlog ready in < 10 s: not measured{how}")
    if ours.first_ms is not None:
        after = "after the restart" if ours.ready_s is not None else "without a restart"
        print(
            f"  first message < {FIRST_TARGET_MS / 1000:.0f} s after a consumer attaches "
            f"({after}): {ours.first_ms:,.0f} ms, {verdict(ours.first_ms < FIRST_TARGET_MS)}"
            f"{scale if ours.ready_s is not None else ''}"
        )


# -- main --------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--brokers", default=",".join(BROKERS), help="comma-separated, of: " + ", ".join(BROKERS)
    )
    ap.add_argument("--count", type=int, default=None, help="messages (200,000; --quick 20,000)")
    ap.add_argument("--size", type=int, default=10240, help="bytes per message body (10240)")
    ap.add_argument("--budget", default=None, help="ours: imq.memory.limit (64m; --quick 16m)")
    ap.add_argument(
        "--unpaged-budget",
        default=None,
        help="ours with nothing paged: imq.memory.limit (4g, or twice the backlog if larger)",
    )
    ap.add_argument("--scenario", choices=("queue", "durable"), default="queue")
    ap.add_argument("--stall", type=float, default=30.0, help="seconds without progress (30)")
    ap.add_argument("--restart", action="store_true", help="restart between fill and drain")
    ap.add_argument("--no-unpaged", action="store_true", help="skip ours with nothing paged")
    ap.add_argument("--quick", action="store_true", help="20,000 × 10 KB, budget 16m")
    ap.add_argument("--keep", action="store_true", help="keep the instance directories")
    ap.add_argument(
        "-D",
        dest="props",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another broker property for ours (the paged column only), repeatable",
    )
    args = ap.parse_args()
    args.load = os.getloadavg()
    args.count = args.count or (20_000 if args.quick else 200_000)
    args.budget = parse_size(args.budget or ("16m" if args.quick else "64m"))
    args.budget_text = broker_size(args.budget)
    backlog = args.count * args.size
    unpaged = broker_size(
        parse_size(args.unpaged_budget)
        if args.unpaged_budget
        else max(4096 * MB, -(-2 * backlog // MB) * MB)
    )
    brokers = [b for b in args.brokers.split(",") if b]
    for b in brokers:
        if b not in BROKERS:
            ap.error(f"unknown broker {b!r}")
    missing = missing_tools()
    if "stock" in brokers:
        missing += missing_stock_broker()
    if missing:
        sys.exit("bench/backlog.py cannot run; missing: " + "; ".join(missing))
    if "activemq" in brokers and not activemq_installed():
        print("ActiveMQ is not installed (apt-get install -y activemq): its column stays empty")
        brokers.remove("activemq")

    specs: list[Spec] = []
    for b in brokers:
        if b == "ours":
            props = (*OPENMQ_PROPS, f"imq.memory.limit={args.budget_text}", *args.props)
            memory = ", ".join([f"imq.memory.limit={args.budget_text}", *args.props])
            specs.append(Spec("ours", "ours", "ours", memory, props))
            if not args.no_unpaged:
                props = (*OPENMQ_PROPS, f"imq.memory.limit={unpaged}", "imq.swap.enabled=false")
                memory = f"imq.memory.limit={unpaged}, imq.swap.enabled=false"
                specs.append(Spec("ours-unpaged", "ours", "ours, nothing paged", memory, props))
        elif b == "stock":
            heap = os.environ.get("IMQ_JVM_ARGS", "-Xmx192m (run.sh's default)")
            specs.append(Spec("stock", "stock", "stock OpenMQ 6.9", heap, OPENMQ_PROPS))
        else:
            specs.append(Spec("activemq", "activemq", "ActiveMQ", "-Xmx512M (bench/jms.py)"))

    tmp = Path(tempfile.mkdtemp(prefix="backlog-"))
    outcomes: dict[str, Outcome] = {}
    rss = RssSampler()
    try:
        cps = compile_bench(tmp / "classes")
        for spec in specs:
            home = tmp / spec.key
            outcomes[spec.key] = run_broker(spec, home, cps, args, rss)
            if not args.keep:
                # Each backlog is on disk until the next broker starts: free it first.
                shutil.rmtree(home, ignore_errors=True)
    finally:
        rss.close()
        if args.keep:
            print(f"instance directories kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    report(specs, outcomes, args)
    lost = {k: o.lost for k, o in outcomes.items() if o.lost}
    errors = [k for k, o in outcomes.items() if o.error]
    if lost:
        print(f"\nFAILED: messages lost: {lost}")
    if errors:
        print(f"\nFAILED: runs not completed: {', '.join(errors)}")
    if lost or errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
