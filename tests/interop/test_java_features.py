"""The stock Java client's view of the broker's messaging features, one JVM per program.

Features.java: JMS 2.0 (JMSContext, CompletionListener, shared and shared-durable
subscriptions, delivery delay), client acknowledge and recover, transacted sessions,
5 MB messages, and what the broker refuses (exception class and error code). Reports.java:
IBM MQ report messages asked for with ``JMS_IBM_*`` properties, which only our broker sends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from .conftest import ProbeResult
from .jvm import broker_kind

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
    # What the broker refuses, as the exception class and error code the stock client
    # throws with OpenMQ's broker (login failures: C4060; the DMQ takes no producers).
    "refused client_id_in_use",
    "refused bad_password",
    "refused unknown_user",
    "refused unsubscribe_unknown",
    "refused durable_already_active",
    "refused invalid_selector",
    "refused send_to_deleted_temporary",
    "refused producer_on_dmq",
    "refused producer_on_wildcard_queue",
    "refused consumer_on_wildcard_queue",
    "listener_request_reply_temporary_queue",
    "browse_with_selector",
    "no_local_and_expired",
    "jmsx_group_properties",
]

REPORTS = [
    "send_with_report_options",
    "no_reply_to_send_fails",
    "no_reply_to_transacted_send_fails",
    "no_reply_to_not_delivered",
    "consume",
    "reports_arrive",
    "coa_no_data",
    "cod_no_data",
    "coa_full_data_pass_ids",
    "expiration_report",
]


@pytest.fixture(scope="module", autouse=True)
def reports_started(
    request: pytest.FixtureRequest, interop_broker: Any, java_programs: Any
) -> Iterator[Future[ProbeResult] | None]:
    """Reports.java (ours only), started with the module's first test: most of its run
    is waiting (for its messages to expire, for the reports), which Features.java's
    run uses meanwhile.  Each program names its destinations with a suffix of its own."""
    if broker_kind(request.config) == "stock":
        yield None
        return
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(java_programs.run, "Reports", interop_broker, uuid.uuid4().hex[:10])


def test_java_messaging_features(interop_broker: Any, java_programs: Any) -> None:
    r = java_programs.run("Features", interop_broker, uuid.uuid4().hex[:10])
    assert r.checks == dict.fromkeys(FEATURES, "ok"), r.explain()
    assert r.returncode == 0, r.explain()


def test_java_ibm_mq_reports(reports_started: Future[ProbeResult] | None) -> None:
    if reports_started is None:
        pytest.skip(
            "IBM MQ report messages (JMS_IBM_Report_*) are our broker's extension: "
            "the stock OpenMQ broker sends none"
        )
    r = reports_started.result(timeout=300)
    assert r.checks == dict.fromkeys(REPORTS, "ok"), r.explain()
    assert r.returncode == 0, r.explain()
    # A send asking for reports without a JMSReplyTo: answered 400, which the stock
    # client throws as a plain JMSException, C4036 "A server error occurred", the reason
    # in its text.
    infos = dict(line[5:].split(" ", 1) for line in r.lines if line.startswith("info "))
    assert infos["no_reply_to_exception"] == "com.sun.messaging.jms.JMSException C4036"
