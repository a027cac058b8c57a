"""``/metrics`` scrape time and size on a big broker (default 10,000 destinations).

Starts redis, a broker and the portal (tests/portal_server.py: real processes), creates
the destinations over the admin protocol, then scrapes ``/metrics`` over HTTP from
loopback: ``--warmup`` untimed scrapes, then ``--requests`` timed ones, one after the
other.  Prints the median and worst wall time, the body size and the series count, with
``METRICS_DESTINATIONS_LIMIT`` unset (all destinations) and set to ``--limit``.

    .venv/bin/python bench/metrics_scrape.py
    .venv/bin/python bench/metrics_scrape.py --destinations 1000 --requests 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from bench.portal_pages import create_destinations  # noqa: E402
from tests.portal_server import start_portal, start_stack  # noqa: E402


def scrape(url: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
    return time.perf_counter() - t, body


def measure(label: str, url: str, warmup: int, requests: int) -> None:
    for _ in range(warmup):
        scrape(url)
    times = []
    body = b""
    for _ in range(requests):
        seconds, body = scrape(url)
        times.append(seconds * 1000)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    print(
        f"{label:<34} median {statistics.median(times):7.1f} ms  worst {max(times):7.1f} ms"
        f"  {len(body) / 1024:8.1f} KiB  {series:6d} series"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--destinations", type=int, default=10_000)
    ap.add_argument("--limit", type=int, default=500, help="METRICS_DESTINATIONS_LIMIT run")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--requests", type=int, default=10)
    args = ap.parse_args()
    with start_stack() as stack:
        t = time.monotonic()
        asyncio.run(create_destinations(stack, args.destinations))
        print(f"{args.destinations} destinations created in {time.monotonic() - t:.1f} s")
        measure("all destinations", stack.url + "/metrics", args.warmup, args.requests)
        tmp = stack.tmp / "limited"
        tmp.mkdir()
        proc, port, _, _ = start_portal(
            tmp,
            stack.broker,
            stack.redis.url,
            extra_env={"METRICS_DESTINATIONS_LIMIT": str(args.limit)},
        )
        try:
            measure(
                f"the {args.limit} deepest",
                f"http://127.0.0.1:{port}/metrics",
                args.warmup,
                args.requests,
            )
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
