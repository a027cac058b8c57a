"""Portal page times on a big broker: 10,000 destinations, 1,000 connections, 100,000 log records.

Starts redis, a broker and the portal (tests/portal_server.py: real processes, daphne
serving portal.asgi), creates the destinations over the admin protocol, opens the
connections (idle, from this process), writes the log records into the shared database,
logs in as admin and times the overview, the destination list (first page, a later page,
filtered) and the log view (first page, filtered by level and text, by time and a later
page): each after ``--warmup`` untimed requests, ``--requests`` times, one after the other.
The target is every page under 300 ms.

    .venv/bin/python bench/portal_pages.py
    .venv/bin/python bench/portal_pages.py --destinations 1000 --connections 100 --logs 10000
"""

from __future__ import annotations

import argparse
import asyncio
import http.cookiejar
import os
import re
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from broker.admintools.client import AdminClient  # noqa: E402
from openmq_client import connect  # noqa: E402
from tests.portal_server import PortalStack, start_stack  # noqa: E402

TARGET_MS = 300.0


async def create_destinations(stack: PortalStack, count: int, workers: int = 4) -> None:
    async def work(k: int) -> None:
        admin = await AdminClient.open(
            stack.broker.host, stack.broker.portmapper_port, "admin", "admin"
        )
        try:
            for n in range(k, count, workers):
                await admin.create_destination(f"bench.q{n:05d}", 1, {})
        finally:
            await admin.close()

    await asyncio.gather(*(work(k) for k in range(workers)))


def write_log_records(stack: PortalStack, count: int) -> None:
    stack.django(
        "from datetime import UTC, datetime, timedelta\n"
        "from broker.models import LogRecord\n"
        "now = datetime.now(UTC)\n"
        "levels = ['INFO', 'WARNING', 'ERROR', 'INFO', 'DEBUG']\n"
        f"n = {count}\n"
        "for start in range(0, n, 10000):\n"
        "    LogRecord.objects.bulk_create([\n"
        "        LogRecord(timestamp=now - timedelta(seconds=i), level=levels[i % 5], logger='bench',\n"
        "                  message=f'bench record {i} about queue q{i % 977}',\n"
        f"                  broker_instance={stack.broker.instance!r})\n"
        "        for i in range(start, min(n, start + 10000))], batch_size=2000)\n",
        timeout=600,
    )


class Connections:
    """``count`` idle client connections held open by an event loop in a thread."""

    def __init__(self, stack: PortalStack, count: int) -> None:
        self.stack, self.count = stack, count
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        conns = []
        self.stopping = asyncio.Event()
        try:
            for _ in range(self.count):
                conns.append(
                    await connect(
                        self.stack.broker.host,
                        self.stack.broker.portmapper_port,
                        ping_interval=None,
                    )
                )
        except BaseException as exc:
            self.error = exc
        self.ready.set()
        await self.stopping.wait()
        for c in conns:
            await c.close()

    def start(self) -> None:
        self.thread.start()
        self.ready.wait()
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.stopping.set)
        self.thread.join(60)


class Browser:
    """A logged-in HTTP session (cookies, CSRF) on the portal."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def login(self, user: str = "admin", password: str = "admin") -> None:
        page = self.opener.open(self.base + "/login/").read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        data = urllib.parse.urlencode(
            {"csrfmiddlewaretoken": token, "username": user, "password": password}
        ).encode()
        req = urllib.request.Request(
            self.base + "/login/", data=data, headers={"Referer": self.base + "/login/"}
        )
        with self.opener.open(req) as r:
            if "/login/" in r.geturl():
                raise RuntimeError("login refused")

    def get(self, path: str) -> tuple[float, int]:
        t = time.perf_counter()
        with self.opener.open(self.base + path) as r:
            body = r.read()
            if r.status != 200:
                raise RuntimeError(f"{path}: HTTP {r.status}")
        return (time.perf_counter() - t) * 1000, len(body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--destinations", type=int, default=10_000)
    ap.add_argument("--connections", type=int, default=1_000)
    ap.add_argument("--logs", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=20, help="timed requests per page")
    ap.add_argument("--warmup", type=int, default=2, help="untimed requests per page first")
    args = ap.parse_args()

    with start_stack(None, "imq.log.level=WARNING") as stack:
        print(f"portal {stack.url}, broker {stack.broker.host}:{stack.broker.portmapper_port}")
        t = time.monotonic()
        asyncio.run(create_destinations(stack, args.destinations))
        print(f"{args.destinations} destinations created in {time.monotonic() - t:.1f} s")
        t = time.monotonic()
        write_log_records(stack, args.logs)
        print(f"{args.logs} log records written in {time.monotonic() - t:.1f} s")
        conns = Connections(stack, args.connections)
        t = time.monotonic()
        conns.start()
        print(f"{args.connections} connections open in {time.monotonic() - t:.1f} s")
        try:
            browser = Browser(stack.url)
            browser.login()
            day = (datetime.now(UTC) - timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M")
            pages = [
                ("overview", "/"),
                ("destinations, page 1", "/destinations/"),
                ("destinations, page 100", "/destinations/?page=100"),
                ("destinations, filtered", "/destinations/?type=q&name=q01&state=RUNNING&page=2"),
                ("log, page 1", "/log/"),
                ("log, WARNING + text", "/log/?level=WARNING&text=queue+q42"),
                ("log, since, page 50", f"/log/?since={day}&page=50"),
            ]
            print(
                f"\n{'page':26} {'median':>8} {'p95':>8} {'max':>8}   (ms, {args.requests} requests)"
            )
            worst = 0.0
            for label, path in pages:
                for _ in range(args.warmup):
                    browser.get(path)
                times = sorted(browser.get(path)[0] for _ in range(args.requests))
                p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
                worst = max(worst, p95)
                print(f"{label:26} {statistics.median(times):8.1f} {p95:8.1f} {times[-1]:8.1f}")
            verdict = "under" if worst < TARGET_MS else "OVER"
            print(f"\nworst p95 {worst:.1f} ms: {verdict} the {TARGET_MS:.0f} ms target")
        finally:
            conns.stop()


if __name__ == "__main__":
    main()
