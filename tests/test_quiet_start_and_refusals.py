"""Paper cuts a new user saw in the logs: a broker that starts cleanly logs no ERROR (an
"every access check fails" line came from a placeholder rule set before the real rules
loaded), and a refused login is reported once -- by ``connect()`` raising -- without a
second "connection to broker lost" warning when the broker then closes the socket."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from openmq_client import connect
from openmq_client.errors import JMSSecurityException


def test_a_clean_start_logs_no_error_or_warning(own_broker) -> None:
    b = own_broker()
    deadline = time.monotonic() + 60
    while "broker testbroker ready" not in (text := b.log_text()):
        assert time.monotonic() < deadline, text
        time.sleep(0.2)
    start = text[: text.index("broker testbroker ready")]
    assert "access control rules loaded" in start
    problems = [line for line in start.splitlines() if " ERROR " in line or " WARNING " in line]
    assert problems == []


def test_a_refused_login_raises_and_logs_nothing_more(own_broker, caplog) -> None:
    b = own_broker()

    async def refused() -> list[str]:
        errors = []
        # Wrong password on the jms service, and guest (not an administrator) on the admin
        # service: the broker answers and closes at once, racing the client's own raise
        # (before the fix about one try in three logged the stray line; the broker's login
        # throttle makes each further try slower, so a few).
        for service_type, password in [("NORMAL", "wrong"), ("ADMIN", "guest")] * 4:
            with pytest.raises(JMSSecurityException) as exc:
                await connect(
                    b.host, b.portmapper_port, user="guest", password=password,
                    service_type=service_type,
                )  # fmt: skip
            errors.append(str(exc.value))
        await asyncio.sleep(0.5)  # let any late close be processed
        return errors

    with caplog.at_level(logging.DEBUG, logger="openmq_client"):
        errors = asyncio.run(refused())
    assert len(errors) == 8 and all("authentication failed" in e for e in errors), errors
    client_records = [r for r in caplog.records if r.name.startswith("openmq_client")]
    assert [r.getMessage() for r in client_records if r.levelno >= logging.WARNING] == []
