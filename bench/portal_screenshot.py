"""Take the screenshot of the portal's overview (docs/overview.png) the README shows.

Starts redis, a broker and the portal (tests/portal_server.py: real processes on free
loopback ports, in a temporary directory), creates a few queues, runs producers that
outpace their consumers and a few connections that come and go for ``--seconds`` so the
live charts have something to show, logs in as admin in Debian's headless Chromium
(Playwright, no browser download) and screenshots the overview page.

    .venv/bin/python bench/portal_screenshot.py                  # docs/overview.png
    .venv/bin/python bench/portal_screenshot.py --seconds 30 --out /tmp/overview.png
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from openmq_client import Queue, TextMessage  # noqa: E402
from openmq_client.sync import connect  # noqa: E402
from tests.portal_server import CHROMIUM, CHROMIUM_ARGS, PortalStack, start_stack  # noqa: E402


def fill(stack: PortalStack, queues: dict[str, int]) -> None:
    conn = connect(stack.broker.host, stack.broker.portmapper_port)
    try:
        session = conn.create_session()
        for name, count in queues.items():
            producer = session.create_producer(Queue(name))
            for n in range(count):
                producer.send(TextMessage(f"{name} #{n}"), persistent=False)
    finally:
        conn.close()


class Traffic:
    """Producers whose rate swings, consumers that lag behind, connections coming and going."""

    def __init__(self, stack: PortalStack) -> None:
        self.stack = stack
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for target, args in (
            (self.produce, ("orders", 45.0, 25.0, 40.0)),
            (self.produce, ("payments", 20.0, 10.0, 25.0)),
            (self.produce, ("invoices", 6.0, 2.0, 30.0)),
            (self.produce, ("shipping", 4.0, 1.0, 20.0)),
            (self.produce, ("audit.events", 2.0, 1.0, 15.0)),
            (self.consume, ("orders", 35.0)),
            (self.consume, ("payments", 40.0)),
            (self.churn, ()),
        ):
            t = threading.Thread(target=target, args=args, daemon=True)
            t.start()
            self.threads.append(t)

    def _connect(self):
        return connect(self.stack.broker.host, self.stack.broker.portmapper_port)

    def produce(self, queue: str, mean: float, swing: float, period: float) -> None:
        conn = self._connect()
        try:
            producer = conn.create_session().create_producer(Queue(queue))
            t0 = time.monotonic()
            n = 0
            while not self.stop.is_set():
                elapsed = time.monotonic() - t0
                rate = max(1.0, mean + swing * math.sin(2 * math.pi * elapsed / period))
                producer.send(TextMessage(f"{queue} order {n}"), persistent=False)
                n += 1
                self.stop.wait(1.0 / rate)
        finally:
            conn.close()

    def consume(self, queue: str, rate: float) -> None:
        conn = self._connect()
        try:
            # A small prefetch: deliveries follow the consumer's pace, not in big batches.
            consumer = conn.create_session().create_consumer(Queue(queue), prefetch=10)
            conn.start()
            while not self.stop.is_set():
                consumer.receive(timeout=0.5)
                self.stop.wait(1.0 / rate)
        finally:
            conn.close()

    def churn(self) -> None:
        """Idle connections: a few more every few seconds, then some go."""
        held = []
        try:
            step = 0
            while not self.stop.is_set():
                if step % 8 < 5:
                    held.extend(self._connect() for _ in range(2))
                elif held:
                    for _ in range(3):
                        if held:
                            held.pop().close()
                step += 1
                self.stop.wait(3.0)
        finally:
            for c in held:
                c.close()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)


def screenshot(stack: PortalStack, out: Path, width: int, height: int) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(stack.url + "/login/")
            page.get_by_label("User name").fill("admin")
            page.get_by_label("Password").fill("admin")
            page.get_by_role("button", name="Log in").click()
            expect(page.locator("#live-status")).to_have_attribute(
                "data-state", "live", timeout=30_000
            )
            time.sleep(3)  # a few live samples after the history
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=False)
        finally:
            browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "overview.png")
    ap.add_argument("--seconds", type=float, default=105, help="traffic before the screenshot")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=860)
    args = ap.parse_args()
    # Every second the broker writes a metric sample row: the history the charts start from.
    with start_stack(None, "imq.metrics.sample.interval=1", "imq.log.level=WARNING") as stack:
        print(
            f"portal at {stack.url}, broker at {stack.broker.host}:{stack.broker.portmapper_port}"
        )
        fill(stack, {"reports": 12})
        traffic = Traffic(stack)
        traffic.start()
        try:
            time.sleep(args.seconds)
            screenshot(stack, args.out, args.width, args.height)
        finally:
            traffic.finish()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
