"""Crash soak: SIGKILL the broker under load from the stock OpenMQ C client, then check
that nothing a client was told is stored was lost or wrongly duplicated.

    .venv/bin/python bench/crash_soak.py                          # file store, 3 rounds x 4 kills
    .venv/bin/python bench/crash_soak.py --store jdbc --rounds 5  # database store on PostgreSQL
    .venv/bin/python bench/crash_soak.py --rounds 20 --kills 6 --seed 7 --sync
    .venv/bin/python bench/crash_soak.py --prop imq.memory.limit=1m --prop imq.swap.threshold=1 \
        --prop imq.swap.readahead=8 --size 2000          # killed while paging and reading back

Each round starts a broker on a fresh var home (``--store jdbc``: a fresh database on a
private PostgreSQL server, as tests/pg.py runs one) and runs bench/c/soak.c, compiled
against libmqcrt (third_party/openmq/realclient/c or $OPENMQ_CCLIENT), on one queue: two producers
of PERSISTENT messages, one transacted producer (5 messages per transaction, some rolled
back on purpose), and consumers in AUTO_ACKNOWLEDGE, CLIENT_ACKNOWLEDGE (ack every 5, now
and then a recover) and transacted (commit every 4, now and then a rollback) sessions, and
an AUTO_ACKNOWLEDGE message listener (which prints before the library acknowledges).
At random moments the broker is SIGKILLed, and restarted on the same var home / database
and port mapper port; the C client does not reconnect, so every client is started again
(a new id each time).  Now and then a consumer alone is SIGKILLed.  At the end the
producers are stopped, the consumers killed, everything is drained by a CLIENT_ACKNOWLEDGE
consumer, the broker is SIGKILLed once more and drained again.

Checks, from what every client process printed (see bench/c/soak.c):

- lost: a message whose send returned OK (or whose transaction's commit returned OK) was
  never received by a consumer that acknowledged it (or was acknowledging it when it died);
- duplicated: a message received again without the redelivered flag after a copy whose
  acknowledgement (or commit) had returned OK;
- transactions: a rolled-back transaction's messages, or one never committed, appear;
  a transaction whose commit was in flight at a crash appears in part;
- unknown: a message nobody sent.

It prints a summary per round and overall and exits 1 on any violation (the round's
directory, with the broker log and each client's output, is kept and named).  Also counted,
not violations: copies delivered again after a confirmed acknowledgement (flagged
redelivered: the acknowledgement was not yet stored at the crash), and copies delivered
again without the flag after an unacknowledged delivery.  Before each kill the broker's
admin metrics say how many bodies it paged out and read back since its start (summed in
the notes): with a 1 MB budget alone the consumers keep up and nothing is paged; the
paging threshold at 1% of it makes nearly every body wait paged out
(tests/interop/test_crash_paging.py runs that round).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from broker.launcher import BrokerProcess, free_port, start_broker  # noqa: E402
from broker.stock_paths import C_CLIENT as CCLIENT  # noqa: E402

QUEUE = "soak.q"
TXN_SIZE = 5
FOREVER = str(10**9)


def build(out: Path) -> Path:
    """Compile bench/c/soak.c against the stock library."""
    lib = CCLIENT / "lib" / "libmqcrt.so.1"  # libmqcrt.so there is a flattened symlink
    exe = out / "soak"
    subprocess.run(
        ["gcc", "-std=c99", "-O1", "-Wall", "-Wno-unused-variable", "-o", str(exe),
         str(HERE / "c" / "soak.c"), f"-I{CCLIENT / 'include'}", str(lib),
         f"-Wl,-rpath,{lib.parent}"],
        check=True,
    )  # fmt: skip
    return exe


@dataclass
class Client:
    """One run of the C program: its role, arguments and output file."""

    name: str  # unique: role + generation
    role: str  # P (produce), T (tproduce), Ca / Cc / Ct (consume auto/client/txn), D (drain)
    args: list[str]
    out: Path
    proc: subprocess.Popen | None = None
    killed: bool = False  # SIGKILLed by us (not by its own failure)

    def start(self, exe: Path, b: BrokerProcess, pad: int = 0) -> None:
        env = {**os.environ, "SOAK_PAD": str(pad)}
        with open(self.out, "wb") as f, open(self.out.with_suffix(".err"), "wb") as e:
            self.proc = subprocess.Popen(
                [str(exe), b.host, str(b.portmapper_port), *self.args], stdout=f, stderr=e, env=env
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.killed = True
            self.proc.kill()  # type: ignore[union-attr]
            self.proc.wait(10)  # type: ignore[union-attr]


@dataclass
class Copy:
    """One received copy of a message and what became of its acknowledgement."""

    ts: int
    seq: str
    redelivered: bool
    client: str
    status: str = "unacked"  # acked | doubt | returned | unacked


@dataclass
class Round:
    """What one round's clients printed, and the checks over it."""

    sent: dict[str, int] = field(default_factory=dict)  # seq -> when its send returned OK
    txns: dict[str, str] = field(default_factory=dict)  # "ID.tT" -> B / K / C / R
    txn_ts: dict[str, int] = field(default_factory=dict)  # "ID.tT" -> when its commit began
    copies: list[Copy] = field(default_factory=list)
    auto_deaths: list[int] = field(default_factory=list)  # last line of a Ca cut short
    kills: int = 0
    consumer_kills: int = 0
    violations: list[str] = field(default_factory=list)
    explained: list[str] = field(default_factory=list)
    notes: Counter = field(default_factory=Counter)

    def _when(self, seq: str) -> int:
        """When a message was known to be stored: its send's OK, or its commit's start."""
        if seq in self.sent:
            return self.sent[seq]
        return self.txn_ts.get(seq.rsplit(".", 1)[0], 0)

    def read(self, c: Client) -> None:
        lines = c.out.read_text(errors="replace").splitlines() if c.out.exists() else []
        held: list[Copy] = []
        ending = ""
        last_ts = 0
        for line in lines:
            parts = line.split()
            if len(parts) < 2 or not parts[0].isdigit():
                continue
            kind = parts[1]
            last_ts = int(parts[0])
            if c.role == "P" and kind == "S":
                self.sent[parts[2]] = last_ts
            elif c.role == "T" and kind in "BKCR":
                self.txns[f"{c.args[2]}.t{parts[2]}"] = kind
                if kind == "K":
                    self.txn_ts[f"{c.args[2]}.t{parts[2]}"] = last_ts
            elif kind == "r":
                cp = Copy(int(parts[0]), parts[2], parts[3] == "1", c.name)
                self.copies.append(cp)
                if c.role == "Ca":
                    cp.status = "acked"  # the receive returned: the library acknowledged
                elif c.role == "Cl":
                    # The listener prints before the library acknowledges; the next message
                    # comes only once that acknowledgement returned.
                    for prev in held:
                        prev.status = "acked"
                    cp.status = "doubt"
                    held = [cp]
                else:
                    held.append(cp)
            elif kind in ("A?", "K") and c.role in ("Cc", "Ct", "D"):
                for cp in held:
                    cp.status = "doubt"
            elif kind in ("A", "C") and c.role in ("Cc", "Ct", "D"):
                for cp in held:
                    cp.status = "acked"
                held = []
            elif kind in ("V", "R") and c.role in ("Cc", "Ct", "D"):
                for cp in held:
                    cp.status = "returned"
                held = []
            ending = kind
        if c.role == "Cl" and ending == "done":
            for prev in held:
                prev.status = "acked"
        if c.role == "Ca" and ending != "done":
            # Died inside a receive: the library acknowledges inside MQReceiveMessage*,
            # before it returns, so it may have taken a message the program never printed.
            self.auto_deaths.append(last_ts if last_ts else 1 << 62)

    def check(self) -> None:
        by_seq: dict[str, list[Copy]] = defaultdict(list)
        for cp in self.copies:
            by_seq[cp.seq].append(cp)
        committed = {t for t, st in self.txns.items() if st == "C"}
        must = set(self.sent)
        for t in committed:
            must.update(f"{t}.{i}" for i in range(TXN_SIZE))
        lost = sorted(
            s for s in must if not any(cp.status in ("acked", "doubt") for cp in by_seq.get(s, ()))
        )
        self.notes["sent (send OK)"] = len(self.sent)
        self.notes["transactions committed (commit OK)"] = len(committed)
        self.notes["copies received"] = len(self.copies)
        self.notes["distinct messages received"] = len(by_seq)
        # Transactions whose commit was in flight at a crash: all or nothing.
        partial: list[str] = []
        for txn, st in self.txns.items():
            if st != "K":
                continue
            got = [f"{txn}.{i}" in by_seq for i in range(TXN_SIZE)]
            if any(got) and not all(got):
                partial += [f"{txn}.{i}" for i in range(TXN_SIZE) if not got[i]]
            self.notes[f"in-flight commits {'applied' if any(got) else 'dropped'}"] += 1
        # A message missing may have been taken by an AUTO_ACKNOWLEDGE receive that was
        # cut short (acknowledged, never returned): at most one per such receive, sent
        # before it ended.  Anything beyond that is a violation.
        deaths = sorted(self.auto_deaths)
        for seq in sorted(lost + partial, key=self._when):
            when = self._when(seq)
            i = next((i for i, d in enumerate(deaths) if d >= when), None)
            if i is not None:
                del deaths[i]
                self.notes["missing, explained by an auto-ack receive cut short"] += 1
                self.explained.append(seq)
            elif seq in partial:
                txn = seq.rsplit(".", 1)[0]
                self.violations.append(
                    f"transaction {txn} (commit in flight) arrived without {seq}"
                )
            else:
                self.violations.append(f"{seq} lost: its send (or commit) returned OK")
        for seq, cps in by_seq.items():
            cps.sort(key=lambda cp: cp.ts)
            for i, cp in enumerate(cps[1:], 1):
                earlier_acked = [p for p in cps[:i] if p.status == "acked"]
                if earlier_acked and not cp.redelivered:
                    self.violations.append(
                        f"{seq} received again by {cp.client} without the redelivered flag "
                        f"after {earlier_acked[-1].client} acknowledged it"
                    )
                elif earlier_acked:
                    self.notes["redelivered after a confirmed acknowledgement"] += 1
                elif not cp.redelivered:
                    self.notes["delivered again unflagged after an unacknowledged copy"] += 1
                else:
                    self.notes["redelivered (flagged)"] += 1
            if seq.split(".")[0].startswith("P"):
                if seq not in self.sent:
                    self.notes["received, send in flight at a crash"] += 1
                continue
            if ".t" not in seq:
                self.violations.append(f"{seq}: nobody sent it")
                continue
            txn = seq.rsplit(".", 1)[0]
            st = self.txns.get(txn)
            if st in ("B", "R", None):
                what = {"B": "never committed", "R": "rolled back"}.get(st, "unknown")
                self.violations.append(f"{seq} received: its transaction was {what}")


def wait_all(clients: list[Client], timeout: float) -> None:
    """Wait for the clients to exit (they fail on their own when the broker dies)."""
    deadline = time.monotonic() + timeout
    for c in clients:
        while c.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        c.kill()


def count_paging(b: BrokerProcess, r: Round) -> None:
    """Add what the broker paged out and read back since its start (its admin metrics) to
    the round's notes, just before it is killed: a round with a paged backlog
    (``--prop imq.memory.limit=1m --size 2000``) shows it was killed while paging."""
    import asyncio

    from broker.admintools.client import AdminClient

    async def ask() -> dict:
        admin = await AdminClient.open(b.host, b.portmapper_port)
        try:
            return await admin.metrics()
        finally:
            await admin.close()

    try:
        m = asyncio.run(asyncio.wait_for(ask(), 10))
    except Exception as exc:  # a busy broker may not answer in time: counted, not fatal
        r.notes["paging metrics not read before a kill"] += 1
        print(f"metrics before a kill: {exc!r}")
        return
    r.notes["paged out before the kills"] += int(m.get("pagedOut", 0))
    r.notes["read back before the kills"] += int(m.get("readBack", 0))


def run_round(args: argparse.Namespace, exe: Path, no: int, pg_url: str | None) -> Round:
    rng = random.Random(args.seed * 1000 + no)
    tmp = Path(tempfile.mkdtemp(prefix=f"imq-soak-{args.store}-{no}-"))
    outdir = tmp / "clients"
    outdir.mkdir()
    props = ["imq.log.level=WARNING", *args.prop]
    if args.store == "jdbc":
        props.append("imq.persist.store=jdbc")
    if args.sync:
        props.append("imq.persist.file.sync.enabled=true")
    db_url = None
    if pg_url is not None:
        from tests.pg import fresh_database

        db_url = fresh_database(pg_url, f"soak_{uuid.uuid4().hex[:8]}")
    pm = free_port()
    r = Round()
    clients: list[Client] = []
    gen = 0

    brokers: list[BrokerProcess] = []

    def broker() -> BrokerProcess:
        b = start_broker(tmp, *props, database_url=db_url, portmapper_port=pm)
        brokers.append(b)  # every one is stopped at the end, even on Ctrl-C
        return b

    def launch(b: BrokerProcess, role: str, args_: list[str], tag: str) -> Client:
        nonlocal gen
        gen += 1
        name = f"{tag}g{gen}"
        c = Client(name, role, [a.replace("@", name) for a in args_], outdir / f"{name}.out")
        c.start(exe, b, args.size)
        clients.append(c)
        return c

    roles = [
        ("P", ["produce", QUEUE, "@", FOREVER], "P0"),
        ("P", ["produce", QUEUE, "@", FOREVER], "P1"),
        ("T", ["tproduce", QUEUE, "@", FOREVER, str(TXN_SIZE)], "T"),
        ("Ca", ["consume", QUEUE, "auto", "1", "0"], "Ca"),
        ("Cc", ["consume", QUEUE, "client", "5", "0"], "Cc"),
        ("Ct", ["consume", QUEUE, "txn", "4", "0"], "Ct"),
        ("Cl", ["consume", QUEUE, "listen", "1", "0"], "Cl"),
    ]
    b = broker()
    try:
        running = [launch(b, *role) for role in roles]
        for _ in range(args.kills):
            end = time.monotonic() + rng.uniform(args.min_gap, args.max_gap)
            while time.monotonic() < end:
                time.sleep(min(0.2, max(0.0, end - time.monotonic())))
                # A consumer alone dies now and then (its unacknowledged messages go back).
                if rng.random() < args.client_kill_rate * 0.2:
                    # Not the AUTO_ACKNOWLEDGE one: killed inside a receive it may take a
                    # message it never printed, which would blur the lost-message check.
                    victim = rng.choice([c for c in running if c.role in ("Cc", "Ct", "Cl")])
                    victim.kill()
                    r.consumer_kills += 1
                    i = running.index(victim)
                    role = next(x for x in roles if x[2] == victim.name.split("g")[0])
                    running[i] = launch(b, *role)
            count_paging(b, r)
            os.kill(b.proc.pid, signal.SIGKILL)
            b.proc.wait(10)
            r.kills += 1
            wait_all(running, 15)
            b = broker()
            running = [launch(b, *role) for role in roles]
        time.sleep(rng.uniform(args.min_gap, args.max_gap))
        # Stop producing, let the consumers catch up a little, then kill them.
        for c in running:
            if c.role in ("P", "T"):
                c.kill()
        time.sleep(1.0)
        for c in running:
            c.kill()
        # Drain, crash once more, drain again: acknowledgements that did not reach the
        # store show up as redelivered copies in the second drain.
        drain = ["consume", QUEUE, "client", "50", str(int(args.drain_idle * 1000))]
        d = launch(b, "D", drain, "D")
        d.proc.wait(600)  # type: ignore[union-attr]
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait(10)
        b = broker()
        d = launch(b, "D", drain, "D")
        d.proc.wait(600)  # type: ignore[union-attr]
    finally:
        for c in clients:
            c.kill()
        for one in brokers:
            one.stop()
    for c in clients:
        r.read(c)
    r.check()
    # The instance log spans every start of the round (the stdout file only the last).
    log_file = tmp / "var" / "instances" / "testbroker" / "log" / "log.txt"
    log = log_file.read_text(errors="replace") if log_file.exists() else b.log_text()
    r.notes["broker log ERROR lines"] = sum(" ERROR " in ln for ln in log.splitlines())
    if r.violations:
        r.notes["kept"] = 1
        print(f"round {no}: kept {tmp}")
    elif not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kills", type=int, default=4, help="broker SIGKILLs per round")
    ap.add_argument("--store", choices=["file", "jdbc"], default="file")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sync", action="store_true", help="imq.persist.file.sync.enabled=true")
    ap.add_argument("--min-gap", type=float, default=1.0, help="seconds before a kill, at least")
    ap.add_argument("--max-gap", type=float, default=4.0, help="seconds before a kill, at most")
    ap.add_argument("--client-kill-rate", type=float, default=0.3, help="consumer kills per s")
    ap.add_argument(
        "--drain-idle", type=float, default=5.0, help="seconds without a message that end a drain"
    )
    ap.add_argument("--keep", action="store_true", help="keep every round's directory")
    ap.add_argument(
        "--size", type=int, default=0, help="bytes of padding per message (default 0: ~20 B)"
    )
    ap.add_argument(
        "--prop",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker property, e.g. imq.memory.limit=1m (see the docstring for a paged backlog)",
    )
    args = ap.parse_args()
    bin_dir = Path(tempfile.mkdtemp(prefix="imq-soak-bin-"))
    exe = build(bin_dir)
    pg = None
    pg_url = None
    if args.store == "jdbc":
        from tests.pg import PostgresServer, find_pg_bin

        pg_bin = find_pg_bin()  # the system's: never to be removed below
        if pg_bin is None:
            print("PostgreSQL server binaries not found: apt-get install postgresql")
            return 2
        pg = PostgresServer(pg_bin)
        pg.start()
        pg_url = pg.url
    total: Counter = Counter()
    bad = 0
    started = time.monotonic()
    try:
        for no in range(args.rounds):
            r = run_round(args, exe, no, pg_url)
            total.update(r.notes)
            total["broker kills"] += r.kills
            total["consumer kills"] += r.consumer_kills
            figures = ", ".join(f"{k} {v}" for k, v in sorted(r.notes.items()))
            print(
                f"round {no}: {r.kills} broker kills, {r.consumer_kills} consumer kills; {figures}"
            )
            if r.explained:
                print(f"  missing, explained by auto-ack receives cut short: {r.explained[:10]}")
            for v in r.violations[:20]:
                print(f"  VIOLATION {v}")
            if len(r.violations) > 20:
                print(f"  ... {len(r.violations) - 20} more")
            bad += len(r.violations)
            sys.stdout.flush()
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(bin_dir, ignore_errors=True)
    print(
        f"{args.store} store{' (sync)' if args.sync else ''}, {args.rounds} rounds, "
        f"{args.kills} kills each, padding {args.size} B, seed "
        f"{args.seed}, {time.monotonic() - started:.0f} s:"
    )
    for k, v in sorted(total.items()):
        print(f"  {k}: {v}")
    print(f"  violations: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
