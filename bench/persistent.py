"""Persistent throughput: 1 KB persistent messages, producers waiting for each SEND_REPLY.

For each combination of store (file, jdbc), sync (on, off) and producer count (1, 8) a
fresh broker is started; the producers send to one queue while a consumer drains it.
Before the table it prints how many syncs per second this disk does, so the sync
figures can be read against the disk's limit, and the floor: what waiting producers reach
against a minimal server that only writes and syncs (bench/sync_floor.py), the most any
broker reaches on this machine with that many producers.

    .venv/bin/python bench/persistent.py                       # file store only
    .venv/bin/python bench/persistent.py --stores file,jdbc    # jdbc on SQLite by default
    .venv/bin/python bench/persistent.py --stores jdbc --database-url postgres://...
    .venv/bin/python bench/persistent.py --stores jdbc --postgres   # a private server
    .venv/bin/python bench/persistent.py --sync on --producers 1 --profile /tmp/prof
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from broker.launcher import start_broker  # noqa: E402
from openmq_client import AckMode, BytesMessage, Queue, connect  # noqa: E402

QUEUE = "bench.persistent"


def _install_uvloop() -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass


async def _open_producer(host: str, port: int):
    conn = await connect(host, port, user="guest", password="guest")
    sess = await conn.create_session()
    return conn, await sess.create_producer(Queue(QUEUE))


async def _produce(prod, start: float, stop: float, persistent: bool) -> int:
    """Send until ``stop``; returns how many sends completed after ``start`` (the time
    before it is a warm-up: connections, first segment, caches)."""
    body = b"x" * 1024
    n = 0
    # Non-persistent (the reference rows) waits for its SEND_REPLY too (ack on produce).
    while time.perf_counter() < start:
        await prod.send(BytesMessage(body), persistent=persistent, ack_on_produce=True)
    while time.perf_counter() < stop:
        await prod.send(BytesMessage(body), persistent=persistent, ack_on_produce=True)
        n += 1
    return n


async def _drain(host: str, port: int, done: asyncio.Event, ready=None) -> None:
    conn = await connect(host, port, user="guest", password="guest")
    sess = await conn.create_session(AckMode.DUPS_OK_ACKNOWLEDGE)
    cons = await sess.create_consumer(Queue(QUEUE))
    await conn.start()
    if ready is not None:
        ready()
    while not done.is_set():
        await cons.receive(0.2)
    await conn.close()


def _process_main(
    role: str,
    host: str,
    port: int,
    seconds: float,
    warmup: float,
    start_at: float,
    persistent: bool,
    out,
) -> None:
    """A producer (or the consumer) in a process of its own, like a separate application."""
    _install_uvloop()

    async def go() -> int:
        if role == "drain":
            done = asyncio.Event()
            task = asyncio.create_task(_drain(host, port, done, lambda: out.put("ready")))
            await asyncio.sleep(max(0.0, start_at - time.time()) + warmup + seconds + 0.5)
            done.set()
            await task
            return 0
        if role == "raw":
            from raw_producer import RawProducer  # bench/ is on sys.path as the script's

            raw = await RawProducer.open(host, port, QUEUE, persistent, b"x" * 1024)
            await asyncio.sleep(max(0.0, start_at - time.time()))
            start = time.perf_counter() + warmup
            stop = start + seconds
            n = 0
            while time.perf_counter() < start:
                raw.send()
            while time.perf_counter() < stop:
                raw.send()
                n += 1
            await raw.close()
            return n
        conn, prod = await _open_producer(host, port)
        await asyncio.sleep(max(0.0, start_at - time.time()))
        start = time.perf_counter() + warmup
        n = await _produce(prod, start, start + seconds, persistent)
        await conn.close()
        return n

    out.put(asyncio.run(go()))


def run_processes(
    host: str,
    port: int,
    producers: int,
    seconds: float,
    warmup: float,
    consumer: str,
    persistent: bool,
    role: str = "produce",
) -> tuple[int, float]:
    """Each producer (and the consumer) in a process of its own; all start together.
    ``role="raw"``: the producers are bench/raw_producer.py's."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 2.0  # after every process has imported and connected
    roles = [role] * producers + (["drain"] if consumer != "none" else [])
    procs = [
        ctx.Process(
            target=_process_main,
            args=(r, host, port, seconds, warmup, start_at, persistent, out),
        )
        for r in roles
    ]
    for p in procs:
        p.start()
    results = [out.get() for _ in range(len(procs) + (consumer != "none"))]
    for p in procs:
        p.join()
    return sum(r for r in results if isinstance(r, int)), seconds


async def run(
    host: str,
    port: int,
    producers: int,
    seconds: float,
    warmup: float,
    consumer: str,
    persistent: bool,
) -> tuple[int, float]:
    """All producers on one event loop in this process; the consumer on it too
    (``consumer="loop"``), in a process of its own (``"process"``) or none."""
    done = asyncio.Event()
    drainer = proc = None
    if consumer == "loop":
        drainer = asyncio.create_task(_drain(host, port, done))
    elif consumer == "process":
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        proc = ctx.Process(
            target=_process_main,
            args=("drain", host, port, seconds + 1.0, warmup, time.time(), persistent, out),
        )
        proc.start()
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, out.get) == "ready"
    opened = await asyncio.gather(*(_open_producer(host, port) for _ in range(producers)))
    t0 = time.perf_counter() + warmup
    counts = await asyncio.gather(*(_produce(p, t0, t0 + seconds, persistent) for _, p in opened))
    elapsed = time.perf_counter() - t0
    await asyncio.gather(*(c.close() for c, _ in opened))
    done.set()
    if drainer is not None:
        await drainer
    if proc is not None:
        proc.join()
    return sum(counts), elapsed


def _py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen | None:
    exe = Path(sys.executable).with_name("py-spy")
    if not exe.exists():
        exe = Path(shutil.which("py-spy") or "py-spy")
    try:
        return subprocess.Popen(
            [str(exe), "record", "-p", str(pid), "-d", str(int(seconds) + 1), "-r", "200"]
            + ["-f", "flamegraph" if out.suffix == ".svg" else "raw", "-o", str(out)]
            + ["--threads"]
            + (["--native"] if os.environ.get("PYSPY_NATIVE") else []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        print(f"py-spy not started: {exc}", file=sys.stderr)
        return None


def _case(args, tmp: Path, store: str, sync: str, producers: int, rep: int) -> float:
    """One fresh broker, one run; msgs/s."""
    where = Path(tempfile.mkdtemp(prefix="imq-pbench-", dir=tmp))
    persistent = store != "none"
    props = [
        f"imq.persist.store={store if persistent else 'file'}",
        f"imq.persist.file.sync.enabled={'true' if sync == 'on' else 'false'}",
        "imq.log.level=WARNING",
        *args.prop,
    ]
    if args.consumer == "none":  # the queue only grows: lift the auto-created queue's limits
        props += [
            "imq.autocreate.destination.maxNumMsgs=-1",
            "imq.autocreate.destination.maxTotalMsgBytes=-1",
        ]
    url = args.database_url if store == "jdbc" else None
    b = start_broker(where, *props, database_url=url)
    spies = []
    try:
        if args.profile:
            d = Path(args.profile)
            d.mkdir(parents=True, exist_ok=True)
            tag = f"{store}-sync{sync}-p{producers}-{rep}"
            spies = [
                _py_spy(b.proc.pid, d / f"broker-{tag}.txt", args.seconds + args.warmup),
                _py_spy(os.getpid(), d / f"bench-{tag}.txt", args.seconds + args.warmup),
            ]
            time.sleep(0.5)
        consumer = args.consumer
        if args.processes or args.client == "raw":
            sent, elapsed = run_processes(
                b.host,
                b.portmapper_port,
                producers,
                args.seconds,
                args.warmup,
                consumer,
                persistent,
                "raw" if args.client == "raw" else "produce",
            )
        else:
            sent, elapsed = asyncio.run(
                run(
                    b.host,
                    b.portmapper_port,
                    producers,
                    args.seconds,
                    args.warmup,
                    consumer,
                    persistent,
                )
            )
    finally:
        for s in spies:
            if s is not None:
                s.wait(30)
        b.stop()
    return sent / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--stores", default="file", help="file,jdbc (default file)")
    ap.add_argument("--sync", default="on,off", help="on,off (default both)")
    ap.add_argument("--producers", default="1,8", help="producer counts (default 1,8)")
    ap.add_argument("--seconds", type=float, default=5.0, help="per case (default 5)")
    ap.add_argument(
        "--warmup", type=float, default=1.0, help="seconds sent before counting (default 1)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="run every case this many times")
    ap.add_argument("--database-url", default=None, help="for the jdbc store (default SQLite)")
    ap.add_argument(
        "--postgres",
        action="store_true",
        help="start a private PostgreSQL server (as the tests do: Debian's server binaries)"
        " for the jdbc store instead of --database-url",
    )
    ap.add_argument(
        "--processes",
        action="store_true",
        help="each producer (and the consumer) in a process of its own instead of all"
        " on one event loop in this process (on 2 cores the clients then take CPU from"
        " the broker: see bench/README.md)",
    )
    ap.add_argument(
        "--consumer",
        choices=["process", "loop", "none"],
        default="process",
        help="the DUPS_OK consumer draining the queue: in a process of its own (default),"
        " on the producers' event loop, or none",
    )
    ap.add_argument(
        "--no-reference",
        action="store_true",
        help="skip the reference rows: non-persistent sends waiting for their SEND_REPLY"
        " (the same producer shape without the store)",
    )
    ap.add_argument(
        "--client",
        choices=["python", "raw"],
        default="python",
        help="python: the project's asyncio client (default); raw: bench/raw_producer.py's"
        " blocking producers, one process each, which cost next to nothing (the broker's"
        " own share of a round trip, comparable with the floor's producers)",
    )
    ap.add_argument(
        "--no-floor",
        action="store_true",
        help="skip measuring the minimal server's rates (bench/sync_floor.py)",
    )
    ap.add_argument(
        "-D",
        dest="prop",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker property for every case (e.g. -D imq.persist.file.sync.inline=false)",
    )
    ap.add_argument(
        "--profile",
        metavar="DIR",
        default=None,
        help="record py-spy samples of the broker and of this process into DIR (collapsed"
        " stacks, one file per case and process, for flamegraph.pl or speedscope)",
    )
    args = ap.parse_args()
    if args.postgres:
        from tests.pg import PostgresServer, find_pg_bin

        bin_dir = find_pg_bin()
        if bin_dir is None:
            ap.error(
                "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin): apt-get install postgresql"
            )
        server = PostgresServer(bin_dir)
        server.start()
        args.database_url = server.url
        try:
            _main(args)
        finally:
            server.stop()
        return
    _main(args)


def _main(args: argparse.Namespace) -> None:
    _install_uvloop()
    from broker.store.filestore import measure_fsync_rate, measure_sync_rate

    tmp = Path(tempfile.mkdtemp(prefix="imq-pbench-"))
    try:
        print(
            "disk: syncs/s = 1 KB pwrite + fdatasync inside a preallocated (zero-filled)"
            " file, the way the file store syncs;"
        )
        print(
            "      fsyncs/s = 4 KB append + fsync of a growing file; both measured for 1 s"
            " just before each sync-on case (a shared disk varies)"
        )
        print(
            f"      now: {measure_sync_rate(tmp, 1.0):,.0f} syncs/s,"
            f" {measure_fsync_rate(tmp, 1.0):,.0f} fsyncs/s"
        )
        counts = [int(x) for x in args.producers.split(",")]
        syncs_asked = args.sync.split(",")
        floors: dict[tuple[str, int], float] = {}
        if not args.no_floor:
            from sync_floor import floor_rate  # bench/ is on sys.path as the script's folder

            for producers in counts if "on" in syncs_asked else []:
                floors["on", producers] = floor_rate(producers, True, directory=tmp)
            print(
                "floor: waiting producers (processes of their own, blocking sockets) against"
                " a minimal server that only pwrites each 1 KB record and makes each loop"
                " turn's records durable with one fdatasync (bench/sync_floor.py): a"
                " practical ceiling for sync on with this many producers on this machine"
            )
            base = None
            for (_, producers), rate in floors.items():
                base = base or rate
                times = f" = {rate / base:.1f}x one" if rate is not base else ""
                print(f"      {producers:2d} producer(s): {rate:9,.0f} msgs/s{times}")
        shape = "processes of their own" if args.processes else "all on one event loop"
        if args.client == "raw":
            shape = "raw producers (bench/raw_producer.py) in processes of their own"
        consumer = {
            "process": "a DUPS_OK consumer draining the queue in a process of its own",
            "loop": "a DUPS_OK consumer draining the queue on the producers' event loop",
            "none": "no consumer",
        }[args.consumer]
        print(f"1 KB messages; producers wait for each SEND_REPLY, {shape}; {consumer}")
        print(
            f"{'store':6} {'sync':4} {'producers':>9} {'msgs/s':>9} {'x 1 prod':>8}"
            f" {'syncs/s':>8} {'%':>4} {'fsyncs/s':>8} {'%':>4} {'floor %':>7}"
        )
        cases = [(st, sy) for st in args.stores.split(",") for sy in syncs_asked]
        if not args.no_reference:
            cases.append(("none", "-"))
        for store, sync in cases:
            first: float | None = None
            for producers in counts:
                for rep in range(args.repeat):
                    disk = " " * 28 if sync != "on" else ""
                    if sync == "on":
                        syncs = measure_sync_rate(tmp, 1.0)
                        fsyncs = measure_fsync_rate(tmp, 1.0)
                    rate = _case(args, tmp, store, sync, producers, rep)
                    if sync == "on":
                        disk = (
                            f" {syncs:8,.0f} {100 * rate / syncs:3.0f}%"
                            f" {fsyncs:8,.0f} {100 * rate / fsyncs:3.0f}%"
                        )
                    if first is None:
                        first = rate
                    times = f"{rate / first:7.1f}x" if producers != counts[0] else ""
                    floor = floors.get((sync, producers))
                    floor_pct = f" {100 * rate / floor:6.0f}%" if floor else ""
                    print(
                        f"{store:6} {sync:4} {producers:9d} {rate:9,.0f} {times:>8}{disk}"
                        f"{floor_pct}",
                        flush=True,
                    )
        if not args.no_reference:
            print("none = non-persistent, each send waiting for its SEND_REPLY (ack on produce)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
