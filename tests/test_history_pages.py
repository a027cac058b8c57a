"""The History page, a destination's history section and the Pipeline page in a real
headless Chromium (Playwright, Debian's chromium) against a real daphne, broker and
redis-server (tests/portal_server.py), on Rollup and PipelineRun rows the test writes
into the stack's database.

What is checked is what the user sees: the charts are drawn (pixels of the series'
colours on the canvases, as many buckets as the test wrote for the range), the range
buttons switch the series, a drag zooms every chart and Reset shows the whole range
again; the JSON the page reads carries the values written.  A screenshot of the page
goes to docs/history.png (shown in docs/reference/portal.md) when UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import math
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .portal_server import PortalStack, playwright_expect, start_stack
from .test_portal_pages import WAIT, login_admin, send_texts

expect = playwright_expect()

ROOT = Path(__file__).resolve().parent.parent
DEST = "hist.orders"
# Buckets written per granularity, all well inside their range (hour, week, month).
MINUTES, HOURS, DAYS = 50, 150, 25
DEST_MINUTES = 40
# Series colours of static/portal/history.js: the depth average and the rate in.
DEPTH_RGB = (0x1F, 0x4E, 0x79)
RATE_IN_RGB = (0x2F, 0x7D, 0xD1)


def rollup(i: int, granularity: str) -> dict:
    """Figures of bucket ``i`` (a daily wave, so the screenshot shows something)."""
    wave = 1 + math.sin(i / {"minute": 9, "hour": 12, "day": 4}[granularity])
    depth_avg = round(400 * wave + 20, 2)
    rate_in = round(80 * wave + 15, 2)
    return {
        "samples": 6,
        "depth_min": int(depth_avg * 0.7),
        "depth_avg": depth_avg,
        "depth_max": int(depth_avg * 1.3) + 5,
        "bytes_max": int(depth_avg * 1.3 * 1024),
        "msgs_in": int(rate_in * 60),
        "msgs_out": int(rate_in * 0.95 * 60),
        "bytes_in": int(rate_in * 60 * 1024),
        "bytes_out": int(rate_in * 0.95 * 60 * 1024),
        "rate_in_avg": rate_in,
        "rate_in_max": round(rate_in * 1.4, 2),
        "rate_out_avg": round(rate_in * 0.95, 2),
        "rate_out_max": round(rate_in * 1.3, 2),
        "producers_max": 2,
        "consumers_max": 3,
        "connections_max": 5,
        "memory_state_peak": 1 if wave > 1.9 else 0,
        "memory_bytes_max": int(depth_avg * 40 * 1024),
    }


def buckets(now: datetime, granularity: str, count: int) -> list[datetime]:
    step = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
    unit = {"minute": "second", "hour": "minute", "day": "hour"}[granularity]
    top = now.replace(microsecond=0, second=0)
    if unit in ("minute", "hour"):
        top = top.replace(minute=0)
    if unit == "hour":
        top = top.replace(hour=0)
    return [top - step[granularity] * i for i in range(count, 0, -1)]


@pytest.fixture(scope="module")
def stack() -> Iterator[PortalStack]:
    s = start_stack()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def written(stack) -> dict:
    """Rollup rows for the broker and one queue, and three pipeline runs; what was
    written, by (destination, granularity)."""
    now = datetime.now(UTC)
    broker = stack.broker.instance
    rows = []
    out: dict = {}
    for destination, dtype, granularity, count in (
        ("", "", "minute", MINUTES),
        ("", "", "hour", HOURS),
        ("", "", "day", DAYS),
        (DEST, "queue", "minute", DEST_MINUTES),
    ):
        starts = buckets(now, granularity, count)
        figures = [rollup(i, granularity) for i in range(count)]
        out[(destination, granularity)] = (starts, figures)
        for start, f in zip(starts, figures, strict=True):
            rows.append(
                {
                    "broker": broker,
                    "destination": destination,
                    "dest_type": dtype,
                    "granularity": granularity,
                    "bucket_start": start.isoformat(),
                    **f,
                }
            )
    runs = [
        {
            "started": (now - timedelta(hours=2)).isoformat(),
            "finished": (now - timedelta(hours=2) + timedelta(seconds=42.5)).isoformat(),
            "status": "ok",
            "since": (now - timedelta(hours=3)).isoformat(),
            "until": (now - timedelta(hours=2)).isoformat(),
            "rows_in": 360000,
            "rows_out": 6060,
            "error": "",
            "trigger": "beat",
        },
        {
            "started": (now - timedelta(hours=1)).isoformat(),
            "finished": (now - timedelta(hours=1) + timedelta(seconds=3.2)).isoformat(),
            "status": "failed",
            "since": (now - timedelta(hours=2)).isoformat(),
            "until": (now - timedelta(hours=1)).isoformat(),
            "rows_in": 0,
            "rows_out": 0,
            "error": "raw partition date=2026-01-01/hour=07 is corrupted: not a Parquet file",
            "trigger": "manual",
        },
    ]
    # The rows travel in a file: too many for a command line.
    path = stack.tmp / "history-rows.json"
    path.write_text(json.dumps({"rollups": rows, "runs": runs}))
    stack.django(
        "import json\n"
        "from datetime import datetime\n"
        "from portal.pipeline.models import PipelineRun, Rollup\n"
        f"data = json.loads(open({str(path)!r}).read())\n"
        "for r in data['rollups']:\n"
        "    r['bucket_start'] = datetime.fromisoformat(r['bucket_start'])\n"
        "Rollup.objects.bulk_create([Rollup(**r) for r in data['rollups']])\n"
        "for r in data['runs']:\n"
        "    for k in ('started', 'finished', 'since', 'until'):\n"
        "        r[k] = datetime.fromisoformat(r[k])\n"
        "    PipelineRun.objects.create(**r)\n"
    )
    return out


@pytest.fixture
def page(chromium):  # noqa: F811
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(WAIT)
    try:
        yield pg
    finally:
        context.close()


def coloured_pixels(page, chart: str, rgb: tuple[int, int, int]) -> int:
    """Pixels of about colour ``rgb`` on the canvas of ``chart`` (depth, rates, ...)."""
    return page.evaluate(
        """([chart, rgb]) => {
            const c = document.querySelector(`[data-chart="${chart}"] canvas`);
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) {
                if (d[i + 3] > 200 && Math.abs(d[i] - rgb[0]) < 24
                    && Math.abs(d[i + 1] - rgb[1]) < 24 && Math.abs(d[i + 2] - rgb[2]) < 24) n++;
            }
            return n;
        }""",
        [chart, list(rgb)],
    )


def history_section(page):
    return page.locator("section.history")


def test_history_page_draws_each_range_and_zooms(page, stack, written, tmp_path):
    login_admin(page, stack.url)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="History").click()
    expect(page.get_by_role("heading", name="History", level=1)).to_be_visible()
    section = history_section(page)
    expect(section).to_have_attribute("data-points", str(MINUTES))
    expect(section).to_have_attribute("data-granularity", "minute")
    for chart in ("depth", "rates", "memory"):
        expect(page.locator(f'[data-chart="{chart}"] canvas')).to_have_count(1)
    assert coloured_pixels(page, "depth", DEPTH_RGB) > 100
    assert coloured_pixels(page, "rates", RATE_IN_RGB) > 100

    for label, rng, granularity, count in (
        ("Last week", "week", "hour", HOURS),
        ("Last month", "month", "day", DAYS),
        ("Last day", "day", "minute", MINUTES),  # minute rollups exist for the last day
    ):
        section.get_by_role("button", name=label).click()
        expect(section).to_have_attribute("data-range", rng)
        expect(section).to_have_attribute("data-granularity", granularity)
        expect(section).to_have_attribute("data-points", str(count))
        expect(section.get_by_role("button", name=label)).to_have_attribute("aria-pressed", "true")
        assert coloured_pixels(page, "depth", DEPTH_RGB) > 50

    # Drag across the depth chart: every chart shows the same narrower span.
    section.get_by_role("button", name="Last week").click()
    expect(section).to_have_attribute("data-points", str(HOURS))
    box = page.locator('[data-chart="depth"] .u-over').bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=8)
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=8)
    page.mouse.up()
    expect(section).not_to_have_attribute("data-zoom", "")
    spans = page.evaluate(
        "() => document.querySelector('section.history').historyCharts.plots"
        ".map(p => [p.scales.x.min, p.scales.x.max])"
    )
    starts, _ = written[("", "hour")]
    whole = starts[-1].timestamp() - starts[0].timestamp()
    assert len(spans) == 3 and all(s == spans[0] for s in spans)
    assert 0 < spans[0][1] - spans[0][0] < whole * 0.5
    section.get_by_role("button", name="Reset zoom").click()
    expect(section).to_have_attribute("data-zoom", "")
    # The docs' screenshot: wide enough for the whole navigation on one line.
    page.set_viewport_size({"width": 1440, "height": 1100})
    section.get_by_role("button", name="Last day").click()
    expect(section).to_have_attribute("data-range", "day")
    section.get_by_role("button", name="Last week").click()
    expect(section).to_have_attribute("data-range", "week")
    expect(page.locator('[data-chart="memory"] canvas')).to_have_count(1)
    # A test run must not rewrite tracked files: docs/history.png only when asked.
    shot = (
        ROOT / "docs" / "history.png"
        if os.environ.get("UPDATE_SCREENSHOTS")
        else tmp_path / "h.png"
    )
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_history_data_carries_the_rollups(page, stack, written):
    login_admin(page, stack.url)
    r = page.request.get(stack.url + "/history/data/?range=week")
    assert r.status == 200
    data = r.json()
    starts, figures = written[("", "hour")]
    assert data["granularity"] == "hour"
    assert data["t"] == [int(s.timestamp()) for s in starts]
    assert data["depth_max"] == [f["depth_max"] for f in figures]
    assert data["rate_out_avg"] == [f["rate_out_avg"] for f in figures]
    assert data["memory_state_peak"] == [f["memory_state_peak"] for f in figures]
    r = page.request.get(stack.url + "/history/data/?range=year")
    assert r.status == 400
    # Another broker's history is its own: none was written for this one.
    r = page.request.get(stack.url + "/history/data/?range=week&broker=elsewhere")
    assert r.status == 200
    assert r.json()["t"] == [] and r.json()["broker"] == "elsewhere"
    page.goto(stack.url + "/history/broker/elsewhere/")
    expect(page.locator("#history-broker")).to_have_text("elsewhere")
    expect(page.locator("section.history")).to_have_attribute("data-points", "0")


def test_history_data_is_for_administrators_only(stack, written):
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(stack.url + "/history/data/?range=hour", timeout=30)
    assert refused.value.code == 403
    assert "depth" not in refused.value.read().decode()


def test_destination_page_has_its_history(page, stack, written):
    send_texts(stack, DEST, ["one", "two"])  # the queue exists, so its page renders
    login_admin(page, stack.url)
    page.goto(stack.url + f"/destinations/q/{DEST}/")
    expect(page.locator("#dest-name")).to_have_text(DEST)
    section = history_section(page)
    expect(section).to_have_attribute("data-points", str(DEST_MINUTES))
    expect(page.locator('[data-chart="bytes"] canvas')).to_have_count(1)
    assert coloured_pixels(page, "depth", DEPTH_RGB) > 100
    section.get_by_role("button", name="Last month").click()
    expect(section).to_have_attribute("data-range", "month")
    expect(section).to_have_attribute("data-points", "0")
    expect(section.locator(".history-status")).to_contain_text("No rollups for this range")


def test_pipeline_page_lists_runs_with_the_failed_one(page, stack, written):
    login_admin(page, stack.url)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="History").click()
    page.get_by_role("link", name="Pipeline runs").click()
    expect(page.get_by_role("heading", name="Pipeline")).to_be_visible()
    rows = page.locator("#pipeline-runs tbody tr")
    expect(rows).to_have_count(2)
    failed = page.locator("#pipeline-runs tr.run-failed")
    expect(failed).to_contain_text("failed")
    expect(failed).to_contain_text("manual")
    expect(failed).to_contain_text("is corrupted: not a Parquet file")
    ok = page.locator("#pipeline-runs tr.run-ok")
    expect(ok).to_contain_text("360000")
    expect(ok).to_contain_text("6060")
    expect(ok).to_contain_text("42.5 s")
    # Newest first: the failed run started an hour after the good one.
    expect(rows.first).to_have_class("run-failed")
