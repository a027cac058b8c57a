"""The IBM MQ message-type and report-option vocabulary (broker/protocol/mqreports.py)."""

from __future__ import annotations

import pytest

from broker.protocol import mqreports as mq
from broker.protocol.jtypes import JInt, JLong, JShort

pytestmark = pytest.mark.fast


def test_names_and_values_are_ibm_mqs():
    assert (mq.MQMT_REQUEST, mq.MQMT_REPLY, mq.MQMT_REPORT, mq.MQMT_DATAGRAM) == (1, 2, 4, 8)
    assert (mq.MQFB_EXPIRATION, mq.MQFB_COA, mq.MQFB_COD, mq.MQFB_PAN, mq.MQFB_NAN) == (
        258,
        259,
        260,
        275,
        276,
    )
    assert mq.REPORT_COA == "JMS_IBM_Report_COA"
    assert mq.MSG_TYPE == "JMS_IBM_MsgType" and mq.FEEDBACK == "JMS_IBM_Feedback"


@pytest.mark.parametrize(
    ("name", "value", "field", "data"),
    [
        (mq.REPORT_COA, mq.MQRO_COA, "coa", mq.Data.NONE),
        (mq.REPORT_COA, mq.MQRO_COA_WITH_DATA, "coa", mq.Data.FIRST_100),
        (mq.REPORT_COA, mq.MQRO_COA_WITH_FULL_DATA, "coa", mq.Data.FULL),
        (mq.REPORT_COD, mq.MQRO_COD, "cod", mq.Data.NONE),
        (mq.REPORT_COD, mq.MQRO_COD_WITH_DATA, "cod", mq.Data.FIRST_100),
        (mq.REPORT_COD, mq.MQRO_COD_WITH_FULL_DATA, "cod", mq.Data.FULL),
        (mq.REPORT_EXCEPTION, mq.MQRO_EXCEPTION_WITH_DATA, "exception", mq.Data.FIRST_100),
        (mq.REPORT_EXPIRATION, mq.MQRO_EXPIRATION_WITH_FULL_DATA, "expiration", mq.Data.FULL),
        (mq.REPORT_PAN, mq.MQRO_PAN, "pan", True),
        (mq.REPORT_NAN, mq.MQRO_NAN, "nan", True),
        (mq.REPORT_PASS_MSG_ID, mq.MQRO_PASS_MSG_ID, "pass_msg_id", True),
        (mq.REPORT_PASS_CORREL_ID, mq.MQRO_PASS_CORREL_ID, "pass_correl_id", True),
        (mq.REPORT_DISCARD_MSG, mq.MQRO_DISCARD_MSG, "discard", True),
    ],
)
def test_each_option_parses_and_round_trips(name, value, field, data):
    opts, errors = mq.parse_options({name: JInt(value)})
    assert errors == []
    assert getattr(opts, field) == data
    assert opts.properties() == {name: value}


def test_zero_and_absent_mean_no_report():
    assert mq.parse_options({}) == (mq.NO_OPTIONS, [])
    opts, errors = mq.parse_options({mq.REPORT_COA: 0, mq.REPORT_PASS_MSG_ID: JShort(0)})
    assert opts == mq.NO_OPTIONS and errors == []
    assert not opts.wants_broker_reports


def test_any_java_integer_type_is_accepted():
    opts, errors = mq.parse_options({mq.REPORT_COD: JLong(mq.MQRO_COD)})
    assert errors == [] and opts.cod == mq.Data.NONE and opts.wants_broker_reports


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (mq.MQRO_COA | 1, "unknown bits 0x1"),
        (mq.MQRO_COD, "unknown bits"),  # COD's value on the COA property
        (512, "is not one of"),  # a data bit without the report bit
        ("256", "is not an integer"),
        (256.0, "is not an integer"),
        (True, "is not an integer"),
    ],
)
def test_bad_values_are_left_out_and_described(value, why):
    opts, errors = mq.parse_options({mq.REPORT_COA: value, mq.REPORT_COD: mq.MQRO_COD})
    assert opts.coa is None
    assert opts.cod == mq.Data.NONE  # the good option still counts
    assert len(errors) == 1 and why in errors[0] and mq.REPORT_COA in errors[0]


def test_a_report_never_asks_for_reports():
    opts, errors = mq.parse_options(
        {mq.MSG_TYPE: mq.MQMT_REPORT, mq.REPORT_COA: mq.MQRO_COA, mq.REPORT_COD: mq.MQRO_COD}
    )
    assert opts == mq.NO_OPTIONS and errors == []


@pytest.mark.parametrize(
    ("value", "valid"),
    [(1, True), (2, True), (4, True), (8, True), (3, False), (0, False), (65535, False)]
    + [(65536, True), (999999999, True), (1000000000, False)],
)
def test_message_types(value, valid):
    assert mq.valid_msg_type(value) is valid
    assert mq.msg_type({mq.MSG_TYPE: JInt(value)}) == (value if valid else None)


def test_names_for_the_portal():
    assert mq.msg_type_name(8) == "datagram"
    assert mq.msg_type_name(70000) == "application (70000)"
    assert mq.msg_type_name(None) == "" and mq.msg_type_name("x") == "invalid ('x')"
    assert mq.feedback_name(259) == "COA (259)"
    opts = mq.ReportOptions(coa=mq.Data.FIRST_100, cod=mq.Data.NONE, pass_msg_id=True)
    assert mq.describe_options(opts) == "COA (100 bytes), COD, pass msg id"


def test_data_and_ids_follow_the_seed():
    body = bytes(range(256))
    assert mq.report_data(mq.Data.NONE, body) == b""
    assert mq.report_data(mq.Data.FIRST_100, body) == body[:100]
    assert mq.report_data(mq.Data.FULL, body) == body
    # Default: the original's MsgId becomes the CorrelId; PASS_CORREL_ID: its CorrelId.
    assert mq.report_correlation_id(mq.NO_OPTIONS, "ID:m", "c") == "ID:m"
    passing = mq.ReportOptions(pass_correl_id=True)
    assert mq.report_correlation_id(passing, "ID:m", "c") == "c"
    assert mq.report_correlation_id(passing, "ID:m", None) is None
