"""Report messages: the broker's part of IBM MQ's reports (broker/protocol/mqreports.py).

A message whose ``JMS_IBM_Report_*`` properties ask for them gets, on its JMSReplyTo:

* COA (MQFB_COA) when it reaches a destination (once per destination it is sent to);
* COD (MQFB_COD) when a copy is consumed: acknowledged, committed, or delivered to a
  NO_ACKNOWLEDGE session -- one per subscriber's copy on a topic; none on rollback;
* expiry (MQFB_EXPIRATION) when a copy expires, in the sweep or on a delivery attempt;
* exception when it cannot be delivered: its destination is full (REJECT_NEWEST,
  MQRC_Q_FULL) or the message too big for it (MQRC_MSG_TOO_BIG_FOR_Q), it went over
  maxDeliveryCount or a client gave it up (MQRC_BACKED_OUT), a limit behaviour removed
  it (MQFB_NOT_DELIVERED), or its destination does not exist and may not be created
  (MQRC_UNKNOWN_OBJECT_NAME).

Each carries no data, the first 100 bytes or the whole body as the option says, and
the seed's ids: a new JMSMessageID or the original's (Pass_Msg_ID); a JMSCorrelationID
that is the original's JMSMessageID or its JMSCorrelationID (Pass_Correl_ID).  A report
never asks for reports, and one that cannot be delivered (reply-to gone, full, refused
by access control) goes to the DMQ.  Discard_Msg (the original not kept in the DMQ) is
broker/core/dmq.py's ``preserve``.

:class:`ReportGenerator` is a :class:`~broker.core.observers.MessageObserver`.  Events
come from inside the router, which must not be re-entered, so reports are queued and
sent by :meth:`ReportGenerator.flush` (the server schedules it on its event loop).
"""

from __future__ import annotations

import itertools
import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker.protocol import mqreports as mq
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt
from broker.protocol.packet import (
    CURRENT_PACKET_VERSION,
    DELIVERY_COUNT_FIELD,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    VH_CORRELATIONID,
    VH_DESTINATION,
    VH_DESTINATION_CLASS,
    VH_REPLYTO,
    VH_REPLYTO_CLASS,
    Packet,
)
from broker.protocol.properties import encode_properties
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TEMP,
    DEST_TOPIC,
    FLAG_P,
    FLAG_Q,
    TEMP_PREFIX,
    TEMP_TOPIC_PREFIX,
    PacketType,
    Status,
)

from . import dmq
from .errors import RouterError, now_ms
from .message import Message
from .observers import MessageObserver

if TYPE_CHECKING:
    from .destination import Destination
    from .ids import UIDGenerator
    from .limits import Limits
    from .message import Entry
    from .session import Link


class ReportRouting(Protocol):
    """What the reports need of the router (:class:`~broker.core.router.MessageRouter`):
    to route a report, to keep one in the DMQ when it cannot be, and ids."""

    @property
    def uids(self) -> UIDGenerator: ...

    @property
    def dmq(self) -> Destination: ...

    @property
    def limits(self) -> Limits: ...

    def lookup(self, name: str, dest_type: int) -> Destination | None: ...

    def route(
        self, msg: Message, link: Link | None, dest_type: int, *, internal: bool = False
    ) -> Destination: ...


log = logging.getLogger("broker.reports")

# Quick test before any property is decoded: a message without this in its bytes asks
# for no reports and is no request, so plain messages cost one substring search.
_MARK = b"JMS_IBM_"

# Why a copy was given up on (dmq.py's reasons) -> the exception report's feedback.
_DEAD_FEEDBACK = {
    dmq.UNDELIVERABLE: mq.MQRC_BACKED_OUT,
    dmq.REMOVED_OLDEST: mq.MQFB_NOT_DELIVERED,
    dmq.REMOVED_LOW_PRIORITY: mq.MQFB_NOT_DELIVERED,
    dmq.ERROR: mq.MQFB_NOT_DELIVERED,
}

# A hook the server sets: why the original's producer may not send to the reply-to
# (access control), or None.  Arguments: origin connection id, name, destination type.
SendCheck = Callable[[int, str, int], "str | None"]


def reply_to_type(name: str, class_name: object) -> int:
    """The destination type a JMSReplyTo's class names (queue unless it says Topic)."""
    cls = class_name if isinstance(class_name, str) else ""
    topic = "Topic" in cls or (not cls and name.startswith(TEMP_TOPIC_PREFIX))
    t = DEST_TOPIC if topic else DEST_QUEUE
    if "Temporary" in cls or name.startswith(TEMP_PREFIX):
        t |= DEST_TEMP
    return t


class _Info:
    """What one message asks for (its options) and where its reports go."""

    __slots__ = (
        "opts",
        "needs_reply_to",
        "reply_to",
        "reply_class",
        "reply_type",
        "correlation_id",
        "report_vh",
    )

    def __init__(
        self,
        opts: mq.ReportOptions,
        reply_to: str | None,
        reply_class: str | None,
        correlation_id: str | None,
        needs_reply_to: str | None = None,
    ) -> None:
        self.opts = opts
        # Why the message needs a JMSReplyTo (mq.reply_to_needed), or None.
        self.needs_reply_to = needs_reply_to
        self.reply_to = reply_to
        self.reply_class = reply_class
        self.reply_type = reply_to_type(reply_to, reply_class) if reply_to else 0
        self.correlation_id = correlation_id
        # The reports' encoded variable header (reply-to, JMSCorrelationID), made once
        # for all of the message's reports.
        self.report_vh: bytes | None = None


_NO_IP = bytes(16)
_NO_INFO = _Info(mq.NO_OPTIONS, None, None, None)


def note_no_report_options(msg: Message, packet_bytes: bytes) -> None:
    """``packet_bytes`` (a message's header and properties, its body left out) show that
    ``msg`` asks for no report: say so on it, so no event has to read its body for that
    (a message recovered without its body)."""
    if _MARK not in packet_bytes:
        msg.report_info = _NO_INFO


def no_report_info(packet_bytes: bytes) -> object | None:
    """What ``note_no_report_options`` would set on the message ``packet_bytes`` are the
    head of (None when it may ask for a report): for a record packed without one."""
    return _NO_INFO if _MARK not in packet_bytes else None


_PROPERTIES: dict[int, bytes] = {}
# A report's variable header starts with its DELIVERY_COUNT (so the slot's value is at
# HEADER_SIZE + 4) and its destination and class, encoded once per reply-to; readers
# take the fields in any order (packet.md), so the correlation id follows them.
_DC_OFFSET = HEADER_SIZE + 4
_VH_PREFIX: dict[tuple[str, str | None], bytes] = {}
_I16U16 = struct.Struct(">hH")


def _string_field(tag: int, text: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > 0xFFFF:
        raise ProtocolError(f"header field {tag}: {len(data)} bytes is too long")
    return _I16U16.pack(tag, len(data)) + data


def _report_vh(name: str, class_name: str | None, correl_id: str | None) -> bytes:
    """A report's encoded variable header (with the Java writer's 1-4 padding bytes)."""
    prefix = _VH_PREFIX.get((name, class_name))
    if prefix is None:
        prefix = DELIVERY_COUNT_FIELD + _string_field(VH_DESTINATION, name)
        if class_name is not None:
            prefix += _string_field(VH_DESTINATION_CLASS, class_name)
        if len(_VH_PREFIX) >= _OPTIONS_MAX:
            _VH_PREFIX.clear()
        _VH_PREFIX[(name, class_name)] = prefix
    vh = prefix + _string_field(VH_CORRELATIONID, correl_id) if correl_id is not None else prefix
    # The terminator (2 bytes) and the padding (1-4 bytes) encode_fields writes.
    return vh + b"\x00" * (6 - (len(vh) + 2) % 4)


# Parsed options by property section: a producer sends the same properties again and
# again, so most messages skip parse_options.  Bounded: cleared when full.
_OPTIONS: dict[bytes, tuple[mq.ReportOptions, list[str], str | None]] = {}
_OPTIONS_MAX = 1024


def _report_properties(feedback: int) -> bytes:
    """A report's encoded property section (type and feedback), made once per code."""
    section = _PROPERTIES.get(feedback)
    if section is None:
        section = _PROPERTIES[feedback] = encode_properties(
            {mq.MSG_TYPE: JInt(mq.MQMT_REPORT), mq.FEEDBACK: JInt(feedback)}
        )
    return section


def _options(pkt: Packet) -> tuple[mq.ReportOptions, list[str], str | None]:
    """The report options of ``pkt``, what was wrong with them and why it needs a
    JMSReplyTo (mq.reply_to_needed), cached by its property section's bytes."""
    section = pkt.raw[pkt.prop_offset : pkt.prop_offset + pkt.prop_size]
    found = _OPTIONS.get(section)
    if found is None:
        props = pkt.properties
        opts, errors = mq.parse_options(props)
        found = (opts, errors, mq.reply_to_needed(opts, props))
        if len(_OPTIONS) >= _OPTIONS_MAX:
            _OPTIONS.clear()
        _OPTIONS[section] = found
    return found


def _read(pkt: Packet) -> tuple[_Info, list[str]]:
    """What the original asks for (and what was wrong with its options): its report
    options, JMSReplyTo (name, class) and JMSCorrelationID; the header fields only when
    it needs a reply-to."""
    try:
        opts, errors, needs = _options(pkt)
        if needs is None:
            # No report asked for (and no request): nothing for the broker to send, so
            # its events skip it as they skip a plain message.
            return _NO_INFO, errors
        fields = pkt.fields
    except ProtocolError:
        return _NO_INFO, []
    name = fields.get(VH_REPLYTO)
    if not isinstance(name, str) or not name:
        name = None
    cls = fields.get(VH_REPLYTO_CLASS)
    correl = fields.get(VH_CORRELATIONID)
    info = _Info(
        opts,
        name,
        cls if isinstance(cls, str) else None,
        correl if isinstance(correl, str) else None,
        needs,
    )
    return info, errors


class _Pending:
    __slots__ = ("msg", "info", "feedback", "data", "comment")

    def __init__(
        self, msg: Message, info: _Info, feedback: int, data: mq.Data, comment: str
    ) -> None:
        self.msg = msg
        self.info = info
        self.feedback = feedback
        self.data = data
        self.comment = comment


class ReportGenerator(MessageObserver):
    """Makes and sends the reports the messages of one router ask for."""

    def __init__(
        self,
        router: ReportRouting,
        schedule: Callable[[Callable[[], object]], object] | None = None,
        may_send: SendCheck | None = None,
    ) -> None:
        self.router = router
        # Called with flush when the first report of a batch is queued; None: the
        # owner calls flush itself.
        self.schedule = schedule
        self.may_send = may_send
        self.pending: list[_Pending] = []
        self._scheduled = False
        self._sequence = itertools.count(1)
        self.sent = 0
        self.to_dmq = 0

    # -- options ---------------------------------------------------------------------

    def info(self, msg: Message, *, tell: bool = False) -> _Info:
        """What ``msg`` asks for and where reports go, read once per message; with
        ``tell``, bad options are logged (callers pass it only for the message's first
        event, so each is logged once)."""
        info = msg.report_info
        if isinstance(info, _Info):
            return info
        # Message() left the arrival packet here when its properties were decoded.
        if _MARK not in msg.raw:
            info = _NO_INFO
        else:
            try:
                pkt = info if isinstance(info, Packet) else Packet(msg.raw)
            except ProtocolError:
                pkt = None
            info, errors = _read(pkt) if pkt is not None else (_NO_INFO, [])
            if tell and errors:
                log.warning(
                    "message %s to %s: report options ignored: %s",
                    msg.message_id,
                    msg.destination,
                    "; ".join(errors),
                )
        msg.report_info = info
        return info

    def check_put(self, msg: Message) -> None:
        """Refuse a producer's message that needs a JMSReplyTo and has none, as IBM MQ
        fails such a put (MQRC_MISSING_REPLY_TO_Q): RouterError BAD_REQUEST, which the
        producer sees on SEND_REPLY (the stock Java client throws a JMSException)."""
        info = msg.report_info
        if info is _NO_INFO:
            return
        info = self.info(msg, tell=True)
        if info.needs_reply_to is not None and info.reply_to is None:
            raise RouterError(
                Status.BAD_REQUEST,
                f"MQRC_MISSING_REPLY_TO_Q ({mq.MQRC_MISSING_REPLY_TO_Q}): the message "
                f"{info.needs_reply_to} but has no JMSReplyTo",
            )

    # -- events ----------------------------------------------------------------------

    def _not_ours(self, entry: Entry) -> bool:
        # A DMQ copy asks for nothing more; a copy a cluster peer delivered here is
        # reported on by its home broker (when the acknowledgement gets there), once.
        owner = entry.owner
        return owner is self.router.dmq or owner.home_elsewhere

    def arrived(self, dest: Destination, msg: Message) -> None:
        if dest.is_dmq:
            return
        info = self.info(msg, tell=True)
        if info.opts.wants_broker_reports and info.reply_to is None:
            # Only a message routed without check_put (which fails a producer's send):
            # a router the check is not installed on.
            log.warning(
                "message %s to %s asks for reports but has no JMSReplyTo: none are sent",
                msg.message_id,
                msg.destination,
            )
        if info.opts.coa is not None:
            self._queue(msg, info, mq.MQFB_COA, info.opts.coa, "")

    def consumed(self, entry: Entry) -> None:
        if entry.msg.report_info is _NO_INFO:
            return  # asks for nothing (read on arrival): every acknowledgement comes here
        if self._not_ours(entry):
            return
        info = self.info(entry.msg)
        if info.opts.cod is not None:
            self._queue(entry.msg, info, mq.MQFB_COD, info.opts.cod, "")

    def expired(self, entry: Entry, to_dmq: bool) -> None:
        if self._not_ours(entry):
            return
        info = self.info(entry.msg)
        if info.opts.expiration is not None:
            self._queue(entry.msg, info, mq.MQFB_EXPIRATION, info.opts.expiration, "expired")

    def dead(self, entry: Entry, reason: str, to_dmq: bool) -> None:
        if self._not_ours(entry):
            return
        info = self.info(entry.msg)
        if info.opts.exception is not None:
            feedback = _DEAD_FEEDBACK.get(reason, mq.MQFB_NOT_DELIVERED)
            self._queue(entry.msg, info, feedback, info.opts.exception, reason)

    def rejected(self, dest: Destination, msg: Message, why: str) -> None:
        if dest.is_dmq:
            return
        info = self.info(msg, tell=True)
        if info.opts.exception is not None:
            feedback = mq.MQRC_MSG_TOO_BIG_FOR_Q if "larger than" in why else mq.MQRC_Q_FULL
            self._queue(msg, info, feedback, info.opts.exception, why)

    def unroutable(self, name: str, dest_type: int, msg: Message, why: str) -> None:
        info = self.info(msg, tell=True)
        if info.opts.exception is not None:
            self._queue(msg, info, mq.MQRC_UNKNOWN_OBJECT_NAME, info.opts.exception, why)

    def _queue(self, msg: Message, info: _Info, feedback: int, data: mq.Data, comment: str) -> None:
        if info.reply_to is None:
            return  # said at arrival (info(tell=True))
        self.pending.append(_Pending(msg, info, feedback, data, comment))
        if not self._scheduled and self.schedule is not None:
            # Marked first: if scheduling fails, the next report tries again.
            self._scheduled = True
            try:
                self.schedule(self.flush)
            except Exception:
                self._scheduled = False
                raise

    # -- sending ---------------------------------------------------------------------

    def flush(self) -> int:
        """Send the queued reports; returns how many reached their reply-to."""
        self._scheduled = False
        sent = 0
        while self.pending:
            batch, self.pending = self.pending, []
            for p in batch:
                try:
                    sent += self._send(p)
                except Exception:  # one bad report must not stop the others
                    log.exception("report for message %s failed", p.msg.message_id)
        self.sent += sent
        return sent

    def _send(self, p: _Pending) -> int:
        name, dest_type = p.info.reply_to, p.info.reply_type
        assert name is not None
        report = self.build(p)
        router = self.router
        why: str | None = None
        if dest_type & DEST_TEMP and router.lookup(name, dest_type) is None:
            why = f"temporary destination {name} does not exist"
        elif self.may_send is not None:
            why = self.may_send(p.msg.origin_connection, name, dest_type)
        if why is None:
            try:
                router.route(report, None, dest_type)
                return 1
            except RouterError as exc:
                why = exc.reason
        comment = f"report (feedback {p.feedback}) for {p.msg.message_id} not delivered: {why}"
        log.info("%s; it goes to the DMQ", comment)
        if router.limits.keep_in_dmq(report, dmq.UNDELIVERABLE, comment, 0):
            self.to_dmq += 1
        return 0

    def build(self, p: _Pending) -> Message:
        """The report message for ``p``, addressed to the original's reply-to: bytes
        encoded once per original (header fields) or per feedback code (properties),
        made into the router's message without being parsed back."""
        original, info = p.msg, p.info
        name, dest_type = info.reply_to, info.reply_type
        assert name is not None
        vh = info.report_vh
        if vh is None:
            correl_id = mq.report_correlation_id(
                info.opts, original.message_id, info.correlation_id
            )
            vh = info.report_vh = _report_vh(name, info.reply_class, correl_id)
        if p.data == mq.Data.NONE:
            ptype, body = PacketType.MESSAGE, b""
        else:
            pkt = Packet(original.raw)
            if p.data == mq.Data.FIRST_100:
                ptype, body = PacketType.BYTES_MESSAGE, mq.report_data(p.data, pkt.body)
            else:
                ptype, body = pkt.type, pkt.body
        flags = (0 if dest_type & DEST_TOPIC else FLAG_Q) | (FLAG_P if original.persistent else 0)
        if info.opts.pass_msg_id:
            head = HEADER.unpack_from(original.raw, 0)
            timestamp, ip, port, sequence = head[5], head[6], head[7], head[8]
        else:
            # A broker-made id: no client uses port 0 with the zero address.
            timestamp, ip, port = now_ms(), _NO_IP, 0
            sequence = next(self._sequence) & 0x7FFFFFFF
        props = _report_properties(p.feedback)
        prop_offset = HEADER_SIZE + len(vh)
        header = HEADER.pack(
            MAGIC,
            CURRENT_PACKET_VERSION,
            ptype,
            prop_offset + len(props) + len(body),
            0,
            timestamp,
            ip,
            port,
            sequence,
            prop_offset,
            len(props),
            original.priority,
            0,
            flags,
            0,
        )
        raw = b"".join((header, vh, props, body))
        report = Message.made(raw, _DC_OFFSET, ptype, flags, original.priority, timestamp, name)
        # A report asks for nothing: its own arrival needs no look at its bytes.
        report.report_info = _NO_INFO
        if info.opts.pass_msg_id:
            # Same JMSMessageID as the original; the store needs a key of its own.
            report.store_key = (
                b"\xff\xff\xff\xfe" + self.router.uids.next().to_bytes(8, "big") + report.key[12:]
            )
        return report


__all__ = ["ReportGenerator", "reply_to_type"]
