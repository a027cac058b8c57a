"""IBM MQ message types and report options, as JMS message properties.

Applications that came from IBM MQ say what kind of message they send (datagram,
request, reply, report) and which reports they want back (confirmation of arrival or
delivery, exception, expiry, positive/negative action notification) with IBM MQ's
JMS mapping names and values: ``JMS_IBM_MsgType``, ``JMS_IBM_Report_*`` and
``JMS_IBM_Feedback``.  This module is their vocabulary, the parsing of a message's
report options (bad values are reported, never raised: the message is still delivered)
and the seed's rules for a report's message and correlation ids.  Sans-IO: used by the
broker's report generator, the Python client and the portal alike.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

# -- property names ---------------------------------------------------------------------

MSG_TYPE = "JMS_IBM_MsgType"
FEEDBACK = "JMS_IBM_Feedback"
REPORT_COA = "JMS_IBM_Report_COA"
REPORT_COD = "JMS_IBM_Report_COD"
REPORT_EXCEPTION = "JMS_IBM_Report_Exception"
REPORT_EXPIRATION = "JMS_IBM_Report_Expiration"
REPORT_PAN = "JMS_IBM_Report_PAN"
REPORT_NAN = "JMS_IBM_Report_NAN"
REPORT_PASS_MSG_ID = "JMS_IBM_Report_Pass_Msg_ID"
REPORT_PASS_CORREL_ID = "JMS_IBM_Report_Pass_Correl_ID"
REPORT_DISCARD_MSG = "JMS_IBM_Report_Discard_Msg"

REPORT_PROPERTIES = (
    REPORT_COA,
    REPORT_COD,
    REPORT_EXCEPTION,
    REPORT_EXPIRATION,
    REPORT_PAN,
    REPORT_NAN,
    REPORT_PASS_MSG_ID,
    REPORT_PASS_CORREL_ID,
    REPORT_DISCARD_MSG,
)

# -- MQMT_*: message types ----------------------------------------------------------------

MQMT_REQUEST = 1
MQMT_REPLY = 2
MQMT_REPORT = 4
MQMT_DATAGRAM = 8
MQMT_APPL_FIRST = 65536
MQMT_APPL_LAST = 999999999

MSG_TYPE_NAMES = {
    MQMT_REQUEST: "request",
    MQMT_REPLY: "reply",
    MQMT_REPORT: "report",
    MQMT_DATAGRAM: "datagram",
}

# -- MQRO_*: report options ---------------------------------------------------------------

MQRO_NONE = 0
MQRO_PAN = 1
MQRO_NAN = 2
MQRO_PASS_CORREL_ID = 64
MQRO_COPY_MSG_ID_TO_CORREL_ID = 0
MQRO_PASS_MSG_ID = 128
MQRO_NEW_MSG_ID = 0
MQRO_COA = 256
MQRO_COA_WITH_DATA = 768
MQRO_COA_WITH_FULL_DATA = 1792
MQRO_COD = 2048
MQRO_COD_WITH_DATA = 6144
MQRO_COD_WITH_FULL_DATA = 14336
MQRO_EXPIRATION = 2097152
MQRO_EXPIRATION_WITH_DATA = 6291456
MQRO_EXPIRATION_WITH_FULL_DATA = 14680064
MQRO_EXCEPTION = 16777216
MQRO_EXCEPTION_WITH_DATA = 50331648
MQRO_EXCEPTION_WITH_FULL_DATA = 117440512
MQRO_DISCARD_MSG = 134217728

# -- MQFB_* feedback codes (and the MQRC_* reasons an exception report carries) ------------

MQFB_NONE = 0
MQFB_QUIT = 256
MQFB_EXPIRATION = 258
MQFB_COA = 259
MQFB_COD = 260
MQFB_PAN = 275
MQFB_NAN = 276
MQFB_NOT_DELIVERED = 284
MQFB_APPL_FIRST = 65536
MQFB_APPL_LAST = 999999999
MQRC_BACKED_OUT = 2003
MQRC_MSG_TOO_BIG_FOR_Q = 2030
MQRC_Q_FULL = 2053
MQRC_UNKNOWN_OBJECT_NAME = 2085
MQRC_NOT_AUTHORIZED = 2035
# Not a feedback code: why IBM MQ fails the put of a request, or of a message asking for
# reports, that names no reply-to queue.
MQRC_MISSING_REPLY_TO_Q = 2027

FEEDBACK_NAMES = {
    MQFB_NONE: "none",
    MQFB_QUIT: "quit",
    MQFB_EXPIRATION: "expiration",
    MQFB_COA: "COA",
    MQFB_COD: "COD",
    MQFB_PAN: "PAN",
    MQFB_NAN: "NAN",
    MQFB_NOT_DELIVERED: "not delivered",
    MQRC_BACKED_OUT: "backed out (maxDeliveryCount)",
    MQRC_MSG_TOO_BIG_FOR_Q: "message too big",
    MQRC_Q_FULL: "destination full",
    MQRC_UNKNOWN_OBJECT_NAME: "no such destination",
    MQRC_NOT_AUTHORIZED: "not authorized",
}


class Data(enum.IntEnum):
    """How much of the original message a report carries."""

    NONE = 0
    FIRST_100 = 1
    FULL = 2


# Bytes of application data a "with data" report carries (the seed: the first 100).
DATA_BYTES = 100

# Each property's allowed values: value -> how much data (or True for a flag).
_DATA_VALUES: dict[str, dict[int, Data]] = {
    REPORT_COA: {
        MQRO_COA: Data.NONE,
        MQRO_COA_WITH_DATA: Data.FIRST_100,
        MQRO_COA_WITH_FULL_DATA: Data.FULL,
    },
    REPORT_COD: {
        MQRO_COD: Data.NONE,
        MQRO_COD_WITH_DATA: Data.FIRST_100,
        MQRO_COD_WITH_FULL_DATA: Data.FULL,
    },
    REPORT_EXCEPTION: {
        MQRO_EXCEPTION: Data.NONE,
        MQRO_EXCEPTION_WITH_DATA: Data.FIRST_100,
        MQRO_EXCEPTION_WITH_FULL_DATA: Data.FULL,
    },
    REPORT_EXPIRATION: {
        MQRO_EXPIRATION: Data.NONE,
        MQRO_EXPIRATION_WITH_DATA: Data.FIRST_100,
        MQRO_EXPIRATION_WITH_FULL_DATA: Data.FULL,
    },
}
_FLAG_VALUES = {
    REPORT_PAN: MQRO_PAN,
    REPORT_NAN: MQRO_NAN,
    REPORT_PASS_MSG_ID: MQRO_PASS_MSG_ID,
    REPORT_PASS_CORREL_ID: MQRO_PASS_CORREL_ID,
    REPORT_DISCARD_MSG: MQRO_DISCARD_MSG,
}

# The values one option may take, for the option's default value (0) and for the data
# variants.  Also what each property's value is allowed to set, bit-wise, for the
# "unknown bit" message.
_MASKS = {name: max(values) for name, values in _DATA_VALUES.items()} | _FLAG_VALUES

_NAMES = {
    REPORT_COA: "coa",
    REPORT_COD: "cod",
    REPORT_EXCEPTION: "exception",
    REPORT_EXPIRATION: "expiration",
    REPORT_PAN: "pan",
    REPORT_NAN: "nan",
    REPORT_PASS_MSG_ID: "pass_msg_id",
    REPORT_PASS_CORREL_ID: "pass_correl_id",
    REPORT_DISCARD_MSG: "discard",
}


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """What a message's ``JMS_IBM_Report_*`` properties ask for.

    ``coa``/``cod``/``exception``/``expiration`` are None when that report is not
    wanted, else how much data it carries."""

    coa: Data | None = None
    cod: Data | None = None
    exception: Data | None = None
    expiration: Data | None = None
    pan: bool = False
    nan: bool = False
    pass_msg_id: bool = False
    pass_correl_id: bool = False
    discard: bool = False

    @property
    def wants_broker_reports(self) -> bool:
        """True when the broker has a report to send for some event."""
        return (
            self.coa is not None
            or self.cod is not None
            or self.exception is not None
            or self.expiration is not None
        )

    def properties(self) -> dict[str, int]:
        """These options as ``JMS_IBM_Report_*`` values (only the ones set)."""
        out: dict[str, int] = {}
        for name, values in _DATA_VALUES.items():
            data = getattr(self, _NAMES[name])
            if data is not None:
                out[name] = next(v for v, d in values.items() if d == data)
        for name, value in _FLAG_VALUES.items():
            if getattr(self, _NAMES[name]):
                out[name] = value
        return out


NO_OPTIONS = ReportOptions()


def _int_value(value: object) -> int | None:
    # A Java Byte/Short/Integer/Long arrives as an int subclass; bool is an int too in
    # Python but a Boolean in Java, which IBM MQ does not accept here.
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return None


def parse_options(props: Mapping[str, object]) -> tuple[ReportOptions, list[str]]:
    """The report options in ``props`` and what was wrong with them.

    A property with a value that is not an integer, or that is not one of the values
    IBM MQ defines for it (an unknown bit, two data variants at once...), is left out
    of the options and described in the returned list; the rest still count.  A report
    message never asks for reports (no loops): its options are all ignored.
    """
    if not any(name in props for name in REPORT_PROPERTIES):
        return NO_OPTIONS, []
    errors: list[str] = []
    kwargs: dict[str, object] = {}
    for name in REPORT_PROPERTIES:
        if name not in props:
            continue
        raw = props[name]
        value = _int_value(raw)
        if value is None:
            errors.append(f"{name}: {type(raw).__name__} {raw!r} is not an integer")
            continue
        if value == MQRO_NONE:
            continue
        mask = _MASKS[name]
        if value & ~mask:
            errors.append(f"{name}: {value} has unknown bits {value & ~mask:#x}")
            continue
        if name in _DATA_VALUES:
            data = _DATA_VALUES[name].get(value)
            if data is None:
                errors.append(f"{name}: {value} is not one of {sorted(_DATA_VALUES[name])}")
                continue
            kwargs[_NAMES[name]] = data
        else:
            kwargs[_NAMES[name]] = True
    if msg_type(props) == MQMT_REPORT:
        return NO_OPTIONS, errors
    return ReportOptions(**kwargs), errors  # type: ignore[arg-type]


def msg_type(props: Mapping[str, object]) -> int | None:
    """The message's ``JMS_IBM_MsgType`` when it is a valid one, else None."""
    value = _int_value(props.get(MSG_TYPE))
    if value is None or not valid_msg_type(value):
        return None
    return value


def valid_msg_type(value: int) -> bool:
    """MQMT_REQUEST/REPLY/REPORT/DATAGRAM or an application-defined type."""
    return value in MSG_TYPE_NAMES or MQMT_APPL_FIRST <= value <= MQMT_APPL_LAST


def msg_type_name(value: object) -> str:
    """How the portal names a ``JMS_IBM_MsgType`` value."""
    v = _int_value(value)
    if v is None:
        return "" if value is None else f"invalid ({value!r})"
    if v in MSG_TYPE_NAMES:
        return MSG_TYPE_NAMES[v]
    if MQMT_APPL_FIRST <= v <= MQMT_APPL_LAST:
        return f"application ({v})"
    return f"invalid ({v})"


def feedback_name(value: object) -> str:
    """How the portal names a ``JMS_IBM_Feedback`` value."""
    v = _int_value(value)
    if v is None:
        return "" if value is None else f"invalid ({value!r})"
    if v in FEEDBACK_NAMES:
        return f"{FEEDBACK_NAMES[v]} ({v})"
    if MQFB_APPL_FIRST <= v <= MQFB_APPL_LAST:
        return f"application ({v})"
    return str(v)


def describe_options(opts: ReportOptions) -> str:
    """A short text for the portal: "COA (100 bytes), COD, exception (full)"."""
    parts = []
    for label, data in (
        ("COA", opts.coa),
        ("COD", opts.cod),
        ("exception", opts.exception),
        ("expiration", opts.expiration),
    ):
        if data is not None:
            suffix = {Data.NONE: "", Data.FIRST_100: " (100 bytes)", Data.FULL: " (full)"}[data]
            parts.append(label + suffix)
    for label, flag in (
        ("PAN", opts.pan),
        ("NAN", opts.nan),
        ("pass msg id", opts.pass_msg_id),
        ("pass correl id", opts.pass_correl_id),
        ("discard", opts.discard),
    ):
        if flag:
            parts.append(label)
    return ", ".join(parts)


def reply_to_needed(opts: ReportOptions, props: Mapping[str, object]) -> str | None:
    """What makes a message need a reply-to queue, as IBM MQ's MQPUT checks it (it fails
    the put with MQRC_MISSING_REPLY_TO_Q when the message names none): the reports it
    asks for (the broker's and PAN/NAN, which the receiving application sends), or being
    a request (``JMS_IBM_MsgType`` 1).  None when it needs none."""
    asked = [
        label
        for label, wanted in (
            ("COA", opts.coa is not None),
            ("COD", opts.cod is not None),
            ("exception", opts.exception is not None),
            ("expiration", opts.expiration is not None),
            ("PAN", opts.pan),
            ("NAN", opts.nan),
        )
        if wanted
    ]
    if asked:
        return "asks for reports (" + ", ".join(asked) + ")"
    if msg_type(props) == MQMT_REQUEST:
        return f"is a request ({MSG_TYPE} {MQMT_REQUEST})"
    return None


def report_data(data: Data, body: bytes) -> bytes:
    """The part of the original's data a report carries."""
    if data == Data.FULL:
        return body
    if data == Data.FIRST_100:
        return body[:DATA_BYTES]
    return b""


def report_correlation_id(
    opts: ReportOptions, message_id: str | None, correlation_id: str | None
) -> str | None:
    """The report's (or reply's) JMSCorrelationID: the original's JMSMessageID
    (MQRO_COPY_MSG_ID_TO_CORREL_ID, the default) or its JMSCorrelationID
    (MQRO_PASS_CORREL_ID)."""
    return correlation_id if opts.pass_correl_id else message_id


__all__ = [name for name in dir() if name.isupper() and not name.startswith("_")] + [
    "Data",
    "ReportOptions",
    "describe_options",
    "feedback_name",
    "msg_type",
    "msg_type_name",
    "parse_options",
    "report_correlation_id",
    "report_data",
    "reply_to_needed",
    "valid_msg_type",
]
