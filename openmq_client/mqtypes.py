"""IBM MQ message types and reports for applications (broker/protocol/mqreports.py).

The broker makes COA, COD, expiry and exception reports itself; what is left to an
application is the application's part of IBM MQ's contract::

    req = mqtypes.request(TextMessage("balance 42"), replies, cod=Data.NONE, pan=True)
    await producer.send(req)
    ...
    # the server, with a received request:
    reply = mqtypes.make_reply(request, TextMessage("balance: 10"))
    await producer.send(reply, destination=request.reply_to)
    report = mqtypes.make_report(request, mqtypes.MQFB_PAN)   # None if PAN was not asked
    if report is not None:
        await producer.send(report, destination=request.reply_to)

A reply or report gets ``JMS_IBM_MsgType`` (and ``JMS_IBM_Feedback``) and the
JMSCorrelationID the request's options ask for: the request's JMSMessageID
(MQRO_COPY_MSG_ID_TO_CORREL_ID, the default) or its JMSCorrelationID
(MQRO_PASS_CORREL_ID).  MQRO_PASS_MSG_ID cannot be honoured by an application: in JMS
the provider assigns JMSMessageID when the message is sent (the broker honours it in
the reports it makes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.jtypes import JInt
from broker.protocol.mqreports import (
    FEEDBACK,
    MQFB_APPL_FIRST,
    MQFB_APPL_LAST,
    MQFB_NAN,
    MQFB_PAN,
    MQMT_DATAGRAM,
    MQMT_REPLY,
    MQMT_REPORT,
    MQMT_REQUEST,
    MSG_TYPE,
    REPORT_PROPERTIES,
    Data,
    ReportOptions,
    msg_type,
    parse_options,
    report_correlation_id,
    valid_msg_type,
)

from .destination import Destination
from .errors import InvalidDestinationException, MessageFormatException

if TYPE_CHECKING:
    from .message import Message

__all__ = [
    "Data",
    "MQFB_NAN",
    "MQFB_PAN",
    "MQMT_DATAGRAM",
    "MQMT_REPLY",
    "MQMT_REPORT",
    "MQMT_REQUEST",
    "ReportOptions",
    "datagram",
    "feedback_of",
    "make_reply",
    "make_report",
    "message_type",
    "report_options",
    "request",
    "set_message_type",
]


def set_message_type(msg: Message, value: int) -> Message:
    """Set ``JMS_IBM_MsgType``: MQMT_* or an application type (65536..999999999)."""
    if isinstance(value, bool) or not isinstance(value, int) or not valid_msg_type(value):
        raise MessageFormatException(f"{value!r} is not an IBM MQ message type")
    msg.set_property(MSG_TYPE, JInt(value))
    return msg


def message_type(msg: Message) -> int | None:
    """The message's ``JMS_IBM_MsgType``, None when absent or not a valid type."""
    return msg_type(msg.properties)


def feedback_of(msg: Message) -> int | None:
    """A report's ``JMS_IBM_Feedback`` (MQFB_* / MQRC_* code)."""
    value = msg.properties.get(FEEDBACK)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def report_options(msg: Message) -> ReportOptions:
    """The reports ``msg`` asks for (bad values ignored, as the broker does)."""
    return parse_options(msg.properties)[0]


def datagram(msg: Message) -> Message:
    """Mark ``msg`` as a datagram: no reply wanted."""
    return set_message_type(msg, MQMT_DATAGRAM)


def request(
    msg: Message,
    reply_to: Destination,
    *,
    coa: Data | None = None,
    cod: Data | None = None,
    exception: Data | None = None,
    expiration: Data | None = None,
    pan: bool = False,
    nan: bool = False,
    pass_msg_id: bool = False,
    pass_correl_id: bool = False,
    discard: bool = False,
) -> Message:
    """Mark ``msg`` as a request answered on ``reply_to``, asking for the reports named
    (each ``coa``/``cod``/``exception``/``expiration`` with how much data)."""
    if reply_to is None:
        # IBM MQ refuses such a put (MQRC_MISSING_REPLY_TO_Q).
        raise InvalidDestinationException("a request needs a reply-to destination")
    opts = ReportOptions(
        coa=coa,
        cod=cod,
        exception=exception,
        expiration=expiration,
        pan=pan,
        nan=nan,
        pass_msg_id=pass_msg_id,
        pass_correl_id=pass_correl_id,
        discard=discard,
    )
    set_message_type(msg, MQMT_REQUEST)
    msg._materialize()
    for name in REPORT_PROPERTIES:
        msg.properties.pop(name, None)
    for name, value in opts.properties().items():
        msg.set_property(name, JInt(value))
    msg.reply_to = reply_to
    return msg


def _answer(original: Message, answer: Message, kind: int) -> Message:
    if original.message_id is None:
        raise MessageFormatException("only a sent or received message can be answered")
    opts = report_options(original)
    set_message_type(answer, kind)
    answer.correlation_id = report_correlation_id(
        opts, original.message_id, original.correlation_id
    )
    return answer


def make_reply(original: Message, reply: Message | None = None) -> Message:
    """``reply`` (an empty TextMessage when None) made the reply to ``original``: its
    type and correlation id.  Send it to ``original.reply_to``."""
    if reply is None:
        # The message module makes the empty TextMessage: this one does not import it,
        # so that Message.make_reply can call here.
        return original.make_reply()
    return _answer(original, reply, MQMT_REPLY)


def make_report(
    original: Message, feedback: int = MQFB_PAN, report: Message | None = None
) -> Message | None:
    """A PAN or NAN report (or one with an application feedback code) about
    ``original``, or None when ``original`` did not ask for that kind (PAN/NAN).
    Send it to ``original.reply_to``."""
    if report is None:
        return original.make_report(feedback)  # with an empty Message, as make_reply
    if isinstance(feedback, bool) or not isinstance(feedback, int):
        raise MessageFormatException(f"feedback {feedback!r} is not an integer")
    opts = report_options(original)
    if feedback == MQFB_PAN:
        if not opts.pan:
            return None
    elif feedback == MQFB_NAN:
        if not opts.nan:
            return None
    elif not MQFB_APPL_FIRST <= feedback <= MQFB_APPL_LAST:
        raise MessageFormatException(
            f"feedback {feedback}: an application sends MQFB_PAN, MQFB_NAN or a code in "
            f"{MQFB_APPL_FIRST}..{MQFB_APPL_LAST}"
        )
    out = _answer(original, report, MQMT_REPORT)
    out.set_property(FEEDBACK, JInt(feedback))
    return out
