"""The stock Java client's view of the broker's messaging features, one JVM per program.

Features.java: JMS 2.0 (JMSContext, CompletionListener, shared and shared-durable
subscriptions, delivery delay), client acknowledge and recover, transacted sessions and
5 MB messages. Reports.java: IBM MQ report messages asked for with ``JMS_IBM_*``
properties, which only our broker sends.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)

FEATURES = [
    "context_send_receive_body",
    "context_session_modes",
    "completion_listener",
    "shared_subscription",
    "shared_durable_subscription",
    "delivery_delay",
    "client_ack_recover",
    "client_ack_unacked_redelivered_on_close",
    "transacted_commit_rollback",
    "large_5mb",
]

REPORTS = [
    "send_with_report_options",
    "consume",
    "reports_arrive",
    "coa_no_data",
    "cod_no_data",
    "coa_full_data_pass_ids",
    "expiration_report",
]


def test_java_messaging_features(interop_broker: Any, java_programs: Any) -> None:
    r = java_programs.run("Features", interop_broker, uuid.uuid4().hex[:10])
    assert r.checks == dict.fromkeys(FEATURES, "ok"), r.explain()
    assert r.returncode == 0, r.explain()


def test_java_ibm_mq_reports(
    interop_broker: Any, java_programs: Any, broker_kind_name: str
) -> None:
    if broker_kind_name == "stock":
        pytest.skip(
            "IBM MQ report messages (JMS_IBM_Report_*) are our broker's extension: "
            "the stock OpenMQ broker sends none"
        )
    r = java_programs.run("Reports", interop_broker, uuid.uuid4().hex[:10])
    assert r.checks == dict.fromkeys(REPORTS, "ok"), r.explain()
    assert r.returncode == 0, r.explain()
