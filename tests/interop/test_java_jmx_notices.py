"""The notifications a broker tells of its own state, with the stock client only
(JmxResourceState.java: AdminConnectionFactory and javax.management): the memory state
changing, as OpenMQ's BrokerNotification ``mq.broker.resource.state.change``.

Ours only: the stock broker's memory states follow its JVM heap, not
imq.system.max_size, so the same program cannot turn it RED (docs/reference/jmx.md).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)


def test_resource_state_notifications(request: pytest.FixtureRequest, java_programs) -> None:
    if broker_kind(request.config) == "stock":
        pytest.skip("the stock broker's memory states follow its JVM heap")
    tmp = Path(tempfile.mkdtemp(prefix="imq-jmxnotices-"))
    b = start_either("ours", tmp, "imq.jmx.connector.activelist=jmxrmi")
    try:
        r = java_programs.run("JmxResourceState", b)
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.returncode == 0, r.explain()
    states = [line for line in r.lines if line.startswith("info ")]
    assert states == [
        "info state GREEN >RED   ",
        "info monitor-state RED   ",
        "info state RED   >GREEN ",
        "info monitor-state GREEN ",
    ], r.explain()
