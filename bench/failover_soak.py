"""Failover soak: SIGKILL the brokers of a conventional cluster or an HA pair again and
again while the stock OpenMQ Java client produces PERSISTENT messages (plain and in
transactions of five) with reconnect on; then drain every broker and count.

    .venv/bin/python bench/failover_soak.py --mode cluster --kills 20
    .venv/bin/python bench/failover_soak.py --mode ha --kills 20      # PostgreSQL, private

Nothing consumes while the brokers are killed, so what the drain finds is what the stores
held.  Checks (issue 35): every message whose send returned, and every one of a
transaction whose commit returned, is drained; none is drained twice (a message stored
twice: the drain's consumer acknowledges each copy, so a second copy is a second stored
one); no message of a transaction that was rolled back is drained; no message nobody sent.
A send that failed (an exception to the producer) may or may not be there: counted, not a
violation.  Exits 1 on a violation; the run's directory (broker logs, the producer's lines)
is kept then.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from broker.launcher import BrokerProcess, start_broker  # noqa: E402
from broker.stock_paths import JAVA_CLIENT  # noqa: E402
from tests.cluster_procs import start_cluster, start_member, wait_linked  # noqa: E402

JARS = [JAVA_CLIENT / "imq.jar", JAVA_CLIENT / "jakarta.jms-api-3.1.0.jar"]


def compile_producer(out: Path) -> str:
    cp = ":".join(str(j) for j in JARS)
    src = HERE / "java" / "SoakProducer.java"
    subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(src)], check=True)
    return f"{out}:{cp}"


def sigkill(b: BrokerProcess) -> None:
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)


def wait_log(b: BrokerProcess, text: str, count: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while b.log_text().count(text) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{text!r} not seen {count} times in {b.instance}'s log")
        time.sleep(0.2)


class Producer:
    """SoakProducer.java in a JVM; its lines gathered as they come."""

    def __init__(self, cp: str, addresses: str, queue: str, pause_ms: int, err: Path) -> None:
        self.err = err.open("w")
        self.proc = subprocess.Popen(
            ["java", "-cp", cp, "SoakProducer", addresses, queue, str(pause_ms)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_started(self, timeout: float = 60) -> None:
        """Until its first message is sent (its connection, sessions and producers made)."""
        deadline = time.monotonic() + timeout
        while not any(line.startswith(("sent ", "commit ")) for line in self.lines):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"the producer did not start: {self.lines[-5:]}")
            time.sleep(0.1)

    def stop(self, timeout: float = 180) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it ended already (its standard error says why)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(10)
        self.err.close()


async def drain(brokers: list[BrokerProcess], queue: str) -> Counter:
    """Every copy of every message in ``queue`` on each broker: n -> copies."""
    from openmq_client import Queue, connect

    got: Counter = Counter()
    for b in brokers:
        conn = await connect(b.host, b.portmapper_port)
        try:
            cons = await (await conn.create_session()).create_consumer(Queue(queue))
            await conn.start()
            while True:
                m = await cons.receive(5)
                if m is None:
                    break
                got[int(m.properties["n"])] += 1
        finally:
            await conn.close()
    return got


def judge(lines: list[str], got: Counter) -> tuple[dict[str, int], list[str]]:
    sent: set[int] = set()
    committed: set[int] = set()
    rolled: set[int] = set()
    failed: set[int] = set()
    total = 0
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "sent":
            sent.add(int(rest))
        elif word == "lost":
            failed.add(int(rest.split(":")[0]))
        elif word in ("commit", "rolledback"):
            a, b = rest.split(":")[0].split()
            (committed if word == "commit" else rolled).update(range(int(a), int(b) + 1))
        elif word == "done":
            total = int(rest)
    confirmed = sent | committed
    problems = []
    if not any(line.startswith("done ") for line in lines) or not confirmed:
        problems.append("the producer did not run to its end (see producer-stderr.txt)")
    lost = sorted(confirmed - set(got))
    twice = sorted(n for n, c in got.items() if c > 1)
    back = sorted(rolled & set(got))
    unknown = sorted(n for n in got if n >= total or n < 0)
    for what, ns in (
        ("lost (told sent, not drained)", lost),
        ("stored twice (drained twice)", twice),
        ("of a rolled-back transaction, drained", back),
        ("nobody sent", unknown),
    ):
        if ns:
            problems.append(f"{len(ns)} {what}: {ns[:20]}")
    figures = {
        "attempted": total,
        "confirmed": len(confirmed),
        "failed sends": len(failed),
        "failed sends stored anyway": len(failed & set(got)),
        "rolled-back transactions' messages": len(rolled),
        "drained": sum(got.values()),
    }
    return figures, problems


def run(args: argparse.Namespace, tmp: Path) -> int:
    rng = random.Random(args.seed)
    cp = compile_producer(tmp / "java")
    queue = f"soak.{uuid.uuid4().hex[:8]}"
    brokers: dict[str, BrokerProcess] = {}
    pg = None
    kills_seen: Counter = Counter()
    try:
        if args.mode == "cluster":
            for b in start_cluster(tmp, 2, names=("A", "B")):
                brokers[b.instance] = b

            def restart(name: str) -> None:
                old = brokers[name]
                b = start_member(tmp / name, old.extra["brokerlist"], old.portmapper_port, name)
                brokers[name] = b
                wait_linked(list(brokers.values()), timeout=60)

            def taken(_victim: str, _other: str) -> None:
                pass
        else:
            from tests.pg import PostgresServer, find_pg_bin, fresh_database
            from tests.test_ha import ha_props

            pg_bin = find_pg_bin()
            if pg_bin is None:
                print("PostgreSQL server binaries not found: apt-get install postgresql")
                return 2
            pg = PostgresServer(pg_bin)
            pg.start()
            url = fresh_database(pg.url, f"soak_{uuid.uuid4().hex[:8]}")
            ports: dict[str, int] = {}

            def start(name: str) -> None:
                d = tmp / name
                d.mkdir(exist_ok=True)
                b = start_broker(
                    d,
                    *ha_props(name),
                    database_url=url,
                    instance=name,
                    portmapper_port=ports.get(name),
                )
                ports[name] = b.portmapper_port
                brokers[name] = b

            start("brokerA")
            start("brokerB")

            def restart(name: str) -> None:
                start(name)

            def taken(victim: str, other: str) -> None:
                kills_seen[victim] += 1
                wait_log(brokers[other], f"took over broker {victim}", 1)

        addresses = ",".join(f"mq://{b.host}:{b.portmapper_port}/jms" for b in brokers.values())
        producer = Producer(cp, addresses, queue, args.pause_ms, tmp / "producer-stderr.txt")
        producer.wait_started()
        started = time.monotonic()
        for k in range(args.kills):
            time.sleep(rng.uniform(0.5, args.interval))
            victim = rng.choice(sorted(brokers))
            other = next(n for n in brokers if n != victim)
            sigkill(brokers[victim])
            print(f"kill {k + 1}: {victim}", flush=True)
            taken(victim, other)
            restart(victim)
        time.sleep(2)
        producer.stop()
        elapsed = time.monotonic() - started
        got = asyncio.run(drain(list(brokers.values()), queue))
        figures, problems = judge(producer.lines, got)
        print(f"mode {args.mode}, {args.kills} kills in {elapsed:.0f} s")
        for name, value in figures.items():
            print(f"  {name}: {value}")
        for b in brokers.values():
            if "Traceback" in b.log_text():
                problems.append(f"a traceback in {b.instance}'s log")
        if problems:
            for p in problems:
                print("VIOLATION", p)
            (tmp / "producer.txt").write_text("\n".join(producer.lines))
            return 1
        print(f"no violation (the producer's last line: {producer.lines[-1]})")
        return 0
    finally:
        for b in brokers.values():
            b.stop()
        if pg is not None:
            pg.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("cluster", "ha"), default="cluster")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interval", type=float, default=3.0, help="most seconds between kills")
    ap.add_argument("--pause-ms", type=int, default=5, help="the producer's pause per batch")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix=f"imq-failover-soak-{args.mode}-"))
    code = run(args, tmp)
    if code == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"kept: {tmp}")
    return code


if __name__ == "__main__":
    sys.exit(main())
