"""The shipped accounts on a real broker whose jms service listens on every interface: a
WARNING at start for admin and guest still on their shipped passwords (the admin service
reports them for the portal), and with ``imq.user.shipped_passwords.loopback_only`` an
INFO line instead while logins from 127.0.0.1 still work.  (The refusal of another
address is tests/test_shipped_accounts.py's: every test here runs on loopback.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker import props
from broker.admintools.actions.broker_info import broker_properties
from broker.admintools.broker_handle import BrokerAdmin
from broker.launcher import BrokerProcess, start_broker
from openmq_client.sync import connect

pytestmark = pytest.mark.timeout(120)

EVERYWHERE = "imq.jms.tcp.hostname=0.0.0.0"


def started(tmp: Path, *extra: str) -> BrokerProcess:
    b = start_broker(tmp, EVERYWHERE, *extra)
    deadline = time.monotonic() + 60  # the start's last line, after the look-up
    while f"broker {b.instance} ready" not in b.log_text():
        assert b.proc.poll() is None and time.monotonic() < deadline, b.log_text()
        time.sleep(0.1)
    return b


def lines_with(b: BrokerProcess, text: str) -> list[str]:
    return [ln for ln in b.log_text().splitlines() if text in ln]


def test_a_warning_per_shipped_account_and_the_admin_service_reports_them(tmp_path: Path):
    b = started(tmp_path)
    try:
        for user in ("admin", "guest"):
            (line,) = lines_with(b, f"user {user} still has its shipped password ({user}/")
            assert "WARNING" in line and f"jms on 0.0.0.0:{b.jms_port}" in line
        admin = BrokerAdmin(b.host, b.portmapper_port)
        try:
            reported = broker_properties(admin)[props.SHIPPED_PASSWORDS_IN_USE]
        finally:
            admin.close()
        assert reported == "admin,guest"
    finally:
        b.stop()


def test_loopback_only_still_accepts_them_from_loopback(tmp_path: Path):
    b = started(tmp_path, f"{props.SHIPPED_LOOPBACK_ONLY.name}=true")
    try:
        for user in ("admin", "guest"):
            (line,) = lines_with(b, f"user {user} still has its shipped password")
            assert "WARNING" not in line and "accepted from loopback addresses only" in line
            conn = connect(b.host, b.portmapper_port, user=user, password=user)
            conn.close()
        assert not lines_with(b, "authentication failed")
    finally:
        b.stop()
