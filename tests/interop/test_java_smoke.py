"""The stock OpenMQ Java client (imq.jar) reaches the broker at all: the harness's own check."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)


def test_java_client_sends_and_receives(interop_broker: Any, java_programs: Any) -> None:
    r = java_programs.run("Smoke", interop_broker)
    assert r.checks == {"connect_send_receive": "ok"}, r.explain()
