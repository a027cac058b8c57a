"""The messages a destination holds (server/admin_service/messages.py's requests), with a safe,
bounded preview of each body and IBM MQ's view of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from broker.protocol import mqreports as mq
from broker.protocol.javaser import (
    JavaSerializationError,
    decode_map_body,
    decode_object,
    decode_stream_body,
)
from broker.protocol.jtypes import JByte, JChar, JFloat, JInt, JLong, JShort
from broker.protocol.types import MESSAGE_KIND_NAMES

from ..broker_handle import BrokerAdmin
from ..client import AdminError
from .common import (
    ActionError,
    as_int,
    as_str,
    dest_kind,
    dest_type_code,
    record_change,
    required_dest_name,
)

MESSAGE_TYPES = MESSAGE_KIND_NAMES
PREVIEW_LIMIT = 4096  # characters of a body preview

# An administrator reads Java's type names, not the Python wrapper classes' reprs.
_JAVA_TYPE_NAMES = {
    JByte: "byte",
    JShort: "short",
    JInt: "int",
    JLong: "long",
    JFloat: "float",
    JChar: "char",
    float: "double",
    bool: "boolean",
}


def _java_value(value: Any) -> str:
    """``1 (int)``, ``'eu'``, ``0a ff (byte[])``: a map or stream value as the preview shows it."""
    if isinstance(value, (bytes, bytearray)):
        return f"{bytes(value).hex(' ')} (byte[])"
    name = _JAVA_TYPE_NAMES.get(type(value))
    if name is None:
        return repr(value)
    if isinstance(value, JChar):
        return f"{str.__repr__(value)} ({name})"
    plain = (
        bool(value)
        if name == "boolean"
        else float(value)
        if name in ("float", "double")
        else int(value)
    )
    return f"{plain} ({name})"


def preview_body(message_type: str, body: bytes | None) -> str:
    """A safe, bounded text preview of a message body: text as is, map and stream bodies
    decoded (whitelisted Java types only, nothing instantiated), bytes and objects as hex."""
    if body is None:
        return ""
    try:
        if message_type == "text":
            text = body.decode("utf-8", errors="replace")
        elif message_type == "map":
            text = "\n".join(f"{k} = {_java_value(v)}" for k, v in decode_map_body(body).items())
        elif message_type == "stream":
            text = "\n".join(_java_value(v) for v in decode_stream_body(body))
        elif message_type == "object":
            try:
                text = repr(decode_object(body))
            except JavaSerializationError:
                text = body.hex(" ")
        else:
            text = body.hex(" ")
    except (JavaSerializationError, ValueError, UnicodeDecodeError) as exc:
        text = f"(undecodable {message_type} body: {exc}) " + body[:256].hex(" ")
    if len(text) > PREVIEW_LIMIT:
        text = text[:PREVIEW_LIMIT] + f"... ({len(body)} bytes in all)"
    return text


# GET_MESSAGES keys shown under a snake_case name of their own (the rest are headers).
_MESSAGE_KEYS = {"MessageProperties", "MessageBody", "MessageBodyBytes", "CorrelationIDAsBytes"}


def _message(row: dict[str, Any]) -> dict[str, Any]:
    """One GET_MESSAGES row (OpenMQ's keys, see AdminClient.messages) with snake_case keys,
    the body's size and a safe preview; ``headers`` keeps the OpenMQ-named headers."""
    kind = as_str(row.get("MessageKind")) or MESSAGE_TYPES.get(
        as_int(row.get("MessageBodyType")), "message"
    )
    if kind == "plain":
        kind = "message"
    raw = row.get("MessageBodyBytes")
    body = bytes(raw) if isinstance(raw, bytes | bytearray) else None
    props = row.get("MessageProperties")
    ts = as_int(row.get("Timestamp"))
    expiration = as_int(row.get("Expiration"))
    return {
        "id": as_str(row.get("MessageID")),
        "message_type": kind,
        "jms_type": as_str(row.get("Type")),
        "priority": as_int(row.get("Priority")),
        "timestamp": ts,
        "time": datetime.fromtimestamp(ts / 1000, UTC).isoformat() if ts else "",
        "expiration": expiration,
        "persistent": as_int(row.get("DeliveryMode")) == 2,
        "redelivered": bool(row.get("Redelivered")),
        "correlation_id": as_str(row.get("CorrelationID")),
        "reply_to": as_str(row.get("ReplyToDestinationName")),
        "destination": as_str(row.get("DestinationName")),
        "properties": dict(props) if isinstance(props, dict) else {},
        "body_size": len(body) if body is not None else 0,
        "preview": preview_body(kind, body) if body is not None else "",
        **_mq_fields(props if isinstance(props, dict) else {}),
        "headers": {
            k: v for k, v in row.items() if k not in _MESSAGE_KEYS and not str(k).startswith("__")
        },
    }


def _mq_fields(props: dict[str, Any]) -> dict[str, Any]:
    """IBM MQ's view of a message (broker/protocol/mqreports.py): its JMS_IBM_MsgType,
    the reports it asks for and, for a report, its feedback code."""
    value = props.get(mq.MSG_TYPE)
    feedback = props.get(mq.FEEDBACK)
    return {
        "mq_type": value if isinstance(value, int) and not isinstance(value, bool) else None,
        "mq_type_name": mq.msg_type_name(value),
        "report_options": mq.describe_options(mq.parse_options(props)[0]),
        "feedback": feedback
        if isinstance(feedback, int) and not isinstance(feedback, bool)
        else None,
        "feedback_name": mq.feedback_name(feedback),
    }


MQ_TYPE_FILTERS = {name: value for value, name in mq.MSG_TYPE_NAMES.items()}


def mq_type_filter(value: str | None) -> int | None:
    """The JMS_IBM_MsgType a ``mq_type`` filter names: datagram, request, reply, report
    or a number; None for no filter."""
    if value is None or value == "":
        return None
    text = value.strip().lower()
    if text in MQ_TYPE_FILTERS:
        return MQ_TYPE_FILTERS[text]
    if text.isdigit() and mq.valid_msg_type(int(text)):
        return int(text)
    raise ActionError(
        f"mq_type {value!r}: use datagram, request, reply, report or a type number "
        f"({mq.MQMT_APPL_FIRST}..{mq.MQMT_APPL_LAST} for application types)"
    )


def list_messages(
    admin: BrokerAdmin,
    name: str,
    kind: str | int = "q",
    *,
    start: int = 0,
    limit: int = 50,
    mq_type: str | None = None,
) -> list[dict[str, Any]]:
    """Messages of a queue, oldest first, with headers, properties and a body preview;
    with ``mq_type`` only those of that IBM MQ message type (``start`` and ``limit``
    then count the matching ones)."""
    if start < 0 or limit < 1 or limit > 1000:
        raise ActionError("start must be >= 0 and limit between 1 and 1000")
    wanted = mq_type_filter(mq_type)
    name, code = required_dest_name(name), dest_type_code(kind)
    if wanted is None:
        rows = admin.messages(name, code, start=start, limit=limit, body=True)
        return [_message(r) for r in rows]
    out: list[dict[str, Any]] = []
    skip, at, chunk = start, 0, 500
    while len(out) < limit:
        rows = admin.messages(name, code, start=at, limit=chunk, body=True)
        for r in rows:
            m = _message(r)
            if m["mq_type"] != wanted:
                continue
            if skip:
                skip -= 1
                continue
            out.append(m)
            if len(out) == limit:
                break
        if len(rows) < chunk:
            break
        at += chunk
    return out


def get_message(
    admin: BrokerAdmin, name: str, msg_id: str, kind: str | int = "q"
) -> dict[str, Any]:
    rows = admin.messages(required_dest_name(name), dest_type_code(kind), msg_id=msg_id, body=True)
    if not rows:
        raise AdminError(404, f"message {msg_id} not found in {name}")
    return _message(rows[0])


def delete_message(
    admin: BrokerAdmin, actor: str, name: str, msg_id: str, kind: str | int = "q"
) -> None:
    if not msg_id:
        raise ActionError("a message ID is required")
    code = dest_type_code(kind)
    admin.delete_message(required_dest_name(name), code, msg_id)
    record_change(
        actor,
        f"deleted message {msg_id} from {dest_kind(code)} {name}",
        {
            "type": "message",
            "op": "delete",
            "id": msg_id,
            "destination": name,
            "dest_type": dest_kind(code),
        },
    )
