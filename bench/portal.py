"""Portal benchmark: how fast the REST API and the portal's pages answer on a big broker.

    .venv/bin/python bench/portal.py                 # the REST API, then the pages
    .venv/bin/python bench/portal.py --rest          # only the REST API
    .venv/bin/python bench/portal.py --pages         # only the pages (bench/portal_pages.py)
    .venv/bin/python bench/portal.py --rest --destinations 2000 --connections 200 --logs 20000

The REST half starts a broker on free ports with its own SQLite database, which the
portal shares (as in production: one data model), and fills it: 10,000 destinations
(half queues, half topics, created through the admin protocol), 1,000 idle authenticated
client connections and 100,000 log records.  The API runs in this process (Django's test
client: the figures are the server's time per request, without a network hop), with a
token of the broker's administrator.  Each URL is asked ``--repeat`` times after one
warm-up; the median, 95th percentile and maximum are printed against the issue's 300 ms.

The pages half is bench/portal_pages.py (a real daphne, redis and broker, over HTTP), run
with the same sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGET_MS = 300.0

# (label, URL): the list endpoints, paged and filtered as a client would.
REST_URLS: list[tuple[str, str]] = [
    ("broker query", "/api/broker/"),
    ("destinations, page 1", "/api/destinations/"),
    ("destinations, middle page", "/api/destinations/?page={dest_page}"),
    ("destinations, queues named *q12*", "/api/destinations/?type=queue&search=q12"),
    ("destinations, deepest first", "/api/destinations/?ordering=-messages&page_size=100"),
    ("connections, page 1", "/api/connections/"),
    ("connections, service jms, last page", "/api/connections/?service=jms&page={cxn_page}"),
    ("services", "/api/services/"),
    ("durables", "/api/durables/"),
    ("transactions", "/api/transactions/"),
    ("logs, page 1", "/api/logs/"),
    ("logs, WARNING and up", "/api/logs/?level=WARNING"),
    ("logs, middle page", "/api/logs/?page={log_page}"),
    ("logs, text search", "/api/logs/?search=record%2012345"),
    ("logs, last hour", "/api/logs/?since={hour_ago}"),
    ("users", "/api/users/"),
    ("groups", "/api/groups/"),
    ("access rules", "/api/acl/"),
]


def stats(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95, ordered[-1]


# --------------------------------------------------------------------------------------
# Filling the broker and the database
# --------------------------------------------------------------------------------------


def fill_logs(count: int, instance: str) -> None:
    from broker.models import LogRecord

    levels = ["INFO"] * 6 + ["WARNING"] * 2 + ["ERROR", "DEBUG"]
    now = datetime.now(UTC)
    batch: list[LogRecord] = []
    for n in range(count):
        batch.append(
            LogRecord(
                timestamp=now - timedelta(seconds=count - n),
                level=levels[n % len(levels)],
                logger="bench",
                message=f"benchmark log record {n}: something happened to destination q{n % 977}",
                broker_instance=instance,
            )
        )
        if len(batch) == 5000:
            LogRecord.objects.bulk_create(batch)
            batch.clear()
    if batch:
        LogRecord.objects.bulk_create(batch)


def fill_destinations(admin, count: int) -> None:
    for n in range(count):
        kind = 1 if n % 2 == 0 else 2
        admin.create_destination(f"bench.{'q' if kind == 1 else 't'}{n}", kind, {})


class Connections:
    """``count`` idle authenticated connections on a loop thread (bench/idle_connections)."""

    def __init__(self, host: str, port: int, count: int) -> None:
        from bench.idle_connections import open_one

        self.keep: list = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

        async def open_all() -> list:
            sem = asyncio.Semaphore(100)

            async def one() -> None:
                async with sem:
                    await open_one(host, port, self.keep)

            return await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)

        results = asyncio.run_coroutine_threadsafe(open_all(), self.loop).result(600)
        self.errors = [r for r in results if isinstance(r, BaseException)]

    def close(self) -> None:
        for w in self.keep:
            self.loop.call_soon_threadsafe(w.close)
        self.loop.call_soon_threadsafe(self.loop.stop)


# --------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------


def time_urls(client, urls: list[tuple[str, str]], repeat: int, fmt: dict[str, str]) -> bool:
    ok = True
    print(f"{'':38} {'median':>8} {'p95':>8} {'max':>8}  status")
    for label, url in urls:
        url = url.format(**fmt)
        r = client.get(url)  # warm-up
        if r.status_code != 200:
            print(f"{label:38} HTTP {r.status_code}: {r.content[:200]!r}")
            ok = False
            continue
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = client.get(url)
            samples.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200, (url, r.status_code)
        med, p95, worst = stats(samples)
        verdict = "ok" if p95 < BUDGET_MS else f"OVER {BUDGET_MS:.0f} ms"
        ok &= p95 < BUDGET_MS
        print(f"{label:38} {med:7.1f}  {p95:7.1f}  {worst:7.1f}  {verdict}")
    return ok


def rest(args) -> bool:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = Path(tempfile.mkdtemp(prefix="imq-portal-bench-"))
    database_url = f"sqlite:///{tmp / 'db.sqlite3'}"
    # The API in this process shares the broker's database.
    os.environ["DATABASE_URL"] = database_url
    os.environ["IMQ_VARHOME"] = str(tmp / "var")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    from broker.admintools.broker_handle import BrokerAdmin
    from broker.launcher import start_broker

    broker = start_broker(tmp, "imq.log.level=WARNING", database_url=database_url)
    connections = None
    try:
        settings.IMQ_BROKER_HOST = broker.host
        settings.IMQ_BROKER_PORT = broker.portmapper_port
        settings.IMQ_INSTANCE = broker.instance
        settings.ALLOWED_HOSTS = ["*"]

        t0 = time.perf_counter()
        fill_logs(args.logs, broker.instance)
        print(f"{args.logs:,} log records in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        admin = BrokerAdmin(broker.host, broker.portmapper_port)
        fill_destinations(admin, args.destinations)
        admin.close()
        print(f"{args.destinations:,} destinations in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        connections = Connections(broker.host, broker.jms_port, args.connections)
        failed = connections.errors
        print(
            f"{len(connections.keep):,} connections in {time.perf_counter() - t0:.1f} s"
            + (f" ({len(failed)} failed: {failed[0]!r})" if failed else "")
        )
        fmt = {
            "hour_ago": (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "dest_page": str(max(1, args.destinations // 100)),
            "cxn_page": str(max(1, len(connections.keep) // 50)),
            "log_page": str(max(1, args.logs // 100)),
        }
        r = Client().post(
            "/api/token/",
            {"username": "admin", "password": "admin"},
            content_type="application/json",
        )
        assert r.status_code == 200, r.content
        client = Client(HTTP_AUTHORIZATION=f"Token {r.json()['token']}")
        print(f"\nREST API (ms per request, {args.repeat} requests each)")
        return time_urls(client, REST_URLS, args.repeat, fmt)
    finally:
        if connections is not None:
            connections.close()
        broker.stop()


def pages(args) -> bool:
    print("\nPortal pages (bench/portal_pages.py)", flush=True)
    cmd = [sys.executable, str(ROOT / "bench" / "portal_pages.py")]
    cmd += ["--destinations", str(args.destinations), "--connections", str(args.connections)]
    cmd += ["--logs", str(args.logs), "--requests", str(args.repeat)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    over = False
    for line in proc.stdout:  # shown as it comes; its verdict line says OVER when over
        print(line, end="", flush=True)
        over |= "OVER" in line
    return proc.wait() == 0 and not over


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rest", action="store_true", help="time the REST API")
    ap.add_argument("--pages", action="store_true", help="time the portal's pages")
    ap.add_argument("--destinations", type=int, default=10_000)
    ap.add_argument("--connections", type=int, default=1_000)
    ap.add_argument("--logs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=20, help="timed requests per URL")
    args = ap.parse_args()
    if not args.rest and not args.pages:
        args.rest = args.pages = True
    ok = True
    if args.rest:
        ok &= rest(args)
    if args.pages:
        ok &= pages(args)
    print("\nall within budget" if ok else "\nSOME OVER BUDGET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
