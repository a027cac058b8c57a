"""JMX changes with the stock client only (JmxOperations.java: AdminConnectionFactory and
javax.management): getMBeanInfo, isInstanceOf, creating a destination with
DestinationManager's ``create``, setAttribute(s) on it, ``pause``, ``resume``, ``purge``
and ``destroy``, the DestinationNotifications and a LogNotification they bring, Broker
``resetMetrics``/``getProperty``, a service paused and resumed, and the exceptions of
bad calls.

``data/jmx_stock_operations.txt`` is what the program printed against the stock OpenMQ
6.9 broker; this test runs it against ours (or again against the stock one with
``--interop-broker=stock``) and compares every line, apart from the differences
docs/reference/jmx.md lists (:data:`DIFFERENCES`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

STOCK = Path(__file__).resolve().parent / "data" / "jmx_stock_operations.txt"

# Lines of ours that differ from the stock broker's, on purpose (docs/reference/jmx.md).
DIFFERENCES: dict[str, str] = {}


def test_jmx_operations(request: pytest.FixtureRequest, java_programs) -> None:
    kind = broker_kind(request.config)
    tmp = Path(tempfile.mkdtemp(prefix="imq-jmxops-"))
    b = start_either(kind, tmp, "imq.jmx.connector.activelist=jmxrmi")
    try:
        r = java_programs.run("JmxOperations", b)
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    want = [line for line in STOCK.read_text().splitlines() if line]
    got = [line for line in r.lines if line.startswith(("info ", "ok ", "fail "))]
    expected = [DIFFERENCES.get(line, line) for line in want] if kind != "stock" else want
    assert got == expected, (
        r.explain()
        + "\n"
        + "\n".join(f"- {w}\n+ {g}" for w, g in zip(expected, got, strict=False) if w != g)
    )
