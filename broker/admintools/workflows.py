"""Message workflows: publish, move, copy, re-send, retry from the DMQ, delete by selector.

The portal's pages and the REST API call these (as they call :mod:`broker.admintools.actions`);
each is recorded in the audit log with who did it and announced to the live pages.

Messages are read through the admin service (GET_MESSAGES: headers, properties and the
body as sent) and written as an ordinary client would, through the broker's JMS service
on a connection of the administrator's own (:mod:`openmq_client`), so limits, access
control and persistence apply to them as to any message.

A move is "send to the target, then remove from the source", one message at a time: a
persistent copy is sent with the client waiting for the broker's SEND_REPLY (the message
is in the store), and only then is the original deleted.  Every copy carries
``JMS_PY_ORIGINAL_ID`` (the source message's JMSMessageID).  If the broker dies between
the two steps, a message can be in both queues after the restart, never in neither; the
same move run again finds the copy by that property, sends nothing and just deletes the
original, so a move that was cut short is finished without duplicates.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any

from broker.protocol.types import DEST_QUEUE, DMQ_NAME, PacketType

from .actions import ActionError, record_change
from .actions.common import dest_kind, dest_type_code, required_dest_name
from .broker_handle import BrokerAdmin
from .client import AdminError

MARK_ORIGINAL_ID = "JMS_PY_ORIGINAL_ID"
MARK_ORIGINAL_DESTINATION = "JMS_PY_ORIGINAL_DESTINATION"
RETRY_NOTE = "JMS_PY_REDELIVERY_NOTE"
BODY_TYPES = ("text", "bytes", "map")
ENCODINGS = ("utf-8", "base64", "hex")
PAGE = 1000  # messages per GET_MESSAGES request
TRANSFER_MODES = ("move", "copy", "resend")
# JMS: a property name is a Java identifier, and none of the selector's words.
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SELECTOR_WORDS = {
    "NULL",
    "TRUE",
    "FALSE",
    "NOT",
    "AND",
    "OR",
    "BETWEEN",
    "LIKE",
    "IN",
    "IS",
    "ESCAPE",
}


# --------------------------------------------------------------------------------------
# Building and sending messages
# --------------------------------------------------------------------------------------


def _raw_classes() -> dict[int, type]:
    """Client message classes that send a body exactly as given (bytes as read from the
    broker), so a moved map or object message is the same bytes, not re-encoded."""
    from openmq_client import message as m

    out: dict[int, type] = {}
    for base in (
        m.Message,
        m.TextMessage,
        m.BytesMessage,
        m.MapMessage,
        m.StreamMessage,
        m.ObjectMessage,
    ):
        out[base.PACKET_TYPE] = type(
            "Raw" + base.__name__,
            (base,),
            {"__slots__": ("_raw",), "_encode_body": lambda self: self._raw},
        )
    return out


_RAW: dict[int, type] | None = None


def _raw_message(packet_type: int, body: bytes, **headers: Any) -> Any:
    global _RAW
    if _RAW is None:
        _RAW = _raw_classes()
    cls = _RAW.get(packet_type, _RAW[PacketType.MESSAGE])
    msg = cls(**headers)
    msg._raw = body
    return msg


def _connect(admin: BrokerAdmin) -> Any:
    """A client connection to the broker as the administrator of ``admin``."""
    from openmq_client import sync

    from .broker_handle import BrokerUnavailable

    try:
        return sync.connect(
            admin.host, admin.port, user=admin.user, password=admin.password, connect_timeout=10
        )
    except Exception as exc:  # refused, unreachable: said as the admin connection says it
        raise BrokerUnavailable(
            f"cannot send through the broker at {admin.address}: {exc}"
        ) from exc


def _client_destination(kind: int, name: str) -> Any:
    from openmq_client.destination import Queue, Topic

    return Queue(name) if kind & DEST_QUEUE else Topic(name)


def _send(producer: Any, kind: int, name: str, msg: Any, **options: Any) -> str:
    from openmq_client.errors import JMSException

    try:
        producer.send(msg, destination=_client_destination(kind, name), **options)
    except JMSException as exc:
        raise AdminError(
            getattr(exc, "status", 0) or 500, f"{dest_kind(kind)} {name}: {exc}"
        ) from exc
    return msg.message_id or ""


def _typed(value: str) -> object:
    """A property value from text: whole numbers, true/false, decimals, else the text."""
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return value


def parse_properties(text: str) -> dict[str, object]:
    """``name=value`` lines (a form's text area) as typed properties; ActionError naming
    every bad line."""
    out: dict[str, object] = {}
    bad = []
    for n, line in enumerate((text or "").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            bad.append(f"line {n}: expected name=value")
            continue
        out[name.strip()] = _typed(value)
    if bad:
        raise ActionError("; ".join(bad))
    return out


def _check_properties(props: Any) -> dict[str, object]:
    from openmq_client.message import check_property

    if props is None:
        return {}
    if not isinstance(props, dict):
        raise ActionError("properties must be an object of name: value")
    bad = []
    for name, value in props.items():
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
            bad.append(f"property name {name!r} is not a Java identifier")
            continue
        if name.upper() in _SELECTOR_WORDS:
            bad.append(f"property name {name!r} is a selector keyword")
            continue
        try:
            check_property(str(name), value)
        except Exception as exc:
            bad.append(str(exc))
    if bad:
        raise ActionError("; ".join(bad))
    return dict(props)


def _body(message_type: str, body: Any, encoding: str) -> tuple[int, bytes]:
    """(packet type, body bytes) of a message to publish; ActionError when unusable."""
    from broker.protocol.javaser import encode_map_body

    if message_type not in BODY_TYPES:
        raise ActionError(f"message type must be one of {', '.join(BODY_TYPES)}")
    if encoding not in ENCODINGS:
        raise ActionError(f"encoding must be one of {', '.join(ENCODINGS)}")
    if message_type == "map":
        if isinstance(body, str):
            try:
                body = json.loads(body or "{}")
            except ValueError as exc:
                raise ActionError(f"a map body is a JSON object: {exc}") from None
        if not isinstance(body, dict):
            raise ActionError("a map body is a JSON object of name: value")
        try:
            return PacketType.MAP_MESSAGE, encode_map_body(_check_properties(body))
        except ActionError as exc:
            raise ActionError(f"map body: {exc}") from None
    if body is None:
        body = ""
    if not isinstance(body, str):
        raise ActionError("the body must be text")
    if message_type == "text":
        if encoding != "utf-8":
            raise ActionError("a text body is sent as UTF-8 text")
        return PacketType.TEXT_MESSAGE, body.encode("utf-8")
    try:
        data = (
            body.encode("utf-8")
            if encoding == "utf-8"
            else base64.b64decode(body, validate=True)
            if encoding == "base64"
            else bytes.fromhex(body)
        )
    except ValueError as exc:
        raise ActionError(f"the body is not {encoding}: {exc}") from None
    return PacketType.BYTES_MESSAGE, data


def publish_message(
    admin: BrokerAdmin,
    actor: str,
    kind: str | int,
    name: str,
    *,
    message_type: str = "text",
    body: Any = "",
    encoding: str = "utf-8",
    properties: dict[str, object] | None = None,
    persistent: bool = True,
    priority: int = 4,
    ttl_ms: int = 0,
    jms_type: str | None = None,
    correlation_id: str | None = None,
) -> str:
    """Send one message to any destination; its JMSMessageID."""
    code = dest_type_code(kind)
    name = required_dest_name(name)
    packet_type, data = _body(message_type, body, encoding)
    props = _check_properties(properties)
    if not isinstance(priority, int) or not 0 <= priority <= 9:
        raise ActionError("priority must be 0 to 9")
    if not isinstance(ttl_ms, int) or ttl_ms < 0:
        raise ActionError("time to live must be >= 0 ms (0: never expires)")
    msg = _raw_message(
        packet_type,
        data,
        properties=props,
        jms_type=jms_type or None,
        correlation_id=correlation_id or None,
    )
    conn = _connect(admin)
    try:
        producer = conn.create_session().create_producer(None)
        msg_id = _send(
            producer, code, name, msg, persistent=bool(persistent), priority=priority, ttl_ms=ttl_ms
        )
    finally:
        conn.close()
    record_change(
        actor,
        f"published {message_type} message {msg_id} to {dest_kind(code)} {name}",
        {
            "type": "message",
            "op": "publish",
            "id": msg_id,
            "destination": name,
            "dest_type": dest_kind(code),
        },
    )
    return msg_id


# --------------------------------------------------------------------------------------
# Reading and selecting a queue's messages
# --------------------------------------------------------------------------------------


def _browse(admin: BrokerAdmin, name: str, body: bool) -> Iterator[dict[str, Any]]:
    """Every message of queue ``name`` (pages of PAGE), oldest first."""
    start = 0
    while True:
        rows = admin.messages(name, DEST_QUEUE, start=start, limit=PAGE, body=body)
        yield from rows
        if len(rows) < PAGE:
            return
        start += PAGE


def _selector_values(row: dict[str, Any]) -> dict[str, object]:
    props = row.get("MessageProperties")
    values: dict[str, object] = dict(props) if isinstance(props, dict) else {}
    values.update(
        JMSDeliveryMode="PERSISTENT" if row.get("DeliveryMode") == 2 else "NON_PERSISTENT",
        JMSPriority=row.get("Priority"),
        JMSMessageID=row.get("MessageID"),
        JMSTimestamp=row.get("Timestamp"),
        JMSCorrelationID=row.get("CorrelationID"),
        JMSType=row.get("Type"),
    )
    return values


def _compile(selector: str) -> Any:
    from broker.core.selector import SelectorError, compile_selector

    try:
        return compile_selector(selector)
    except SelectorError as exc:
        raise ActionError(f"bad selector: {exc}") from None


def _select(
    admin: BrokerAdmin,
    name: str,
    ids: Iterable[str] | None,
    selector: str | None,
    body: bool = True,
) -> tuple[list[dict[str, Any]], list[str]]:
    """(the chosen messages of queue ``name``, the asked-for ids not found): ``ids`` if
    given, else those matching ``selector``, else all."""
    if ids is not None:
        wanted = [str(i).strip() for i in ids if str(i).strip()]
        if not wanted:
            raise ActionError("no message selected")
        rows, missing = [], []
        for mid in dict.fromkeys(wanted):
            try:
                rows += admin.messages(name, DEST_QUEUE, msg_id=mid, body=body)
            except AdminError as exc:
                if exc.status != 404:
                    raise
                missing.append(mid)
        return rows, missing
    match = _compile(selector).matches if selector and selector.strip() else None
    rows = [r for r in _browse(admin, name, body) if match is None or match(_selector_values(r))]
    return rows, []


# --------------------------------------------------------------------------------------
# Move, copy, re-send, retry
# --------------------------------------------------------------------------------------


def _copy_of(row: dict[str, Any], extra: dict[str, object], drop_prefix: str = "") -> Any:
    props = row.get("MessageProperties")
    values = {
        k: v
        for k, v in (props.items() if isinstance(props, dict) else ())
        if not (drop_prefix and k.startswith(drop_prefix))
    }
    values.update(extra)
    raw = row.get("MessageBodyBytes")
    reply = row.get("ReplyToDestinationName")
    reply_to = None
    if isinstance(reply, str) and reply:
        reply_to = _client_destination(int(row.get("ReplyToDestinationType") or DEST_QUEUE), reply)
    return _raw_message(
        int(row.get("MessageBodyType") or PacketType.MESSAGE),
        bytes(raw) if isinstance(raw, bytes | bytearray) else b"",
        properties=_check_properties(values),
        jms_type=row.get("Type") or None,
        correlation_id=row.get("CorrelationID") or None,
        reply_to=reply_to,
    )


def _send_options(row: dict[str, Any], now_ms: int) -> dict[str, Any]:
    expiration = int(row.get("Expiration") or 0)
    return {
        "persistent": row.get("DeliveryMode") == 2,
        "priority": int(row.get("Priority") or 4),
        "ttl_ms": max(1, expiration - now_ms) if expiration > 0 else 0,
    }


def _copies_in(admin: BrokerAdmin, kind: int, name: str) -> set[str]:
    """The source ids of the copies already in queue ``name`` (a move's marker)."""
    if not kind & DEST_QUEUE:
        return set()
    try:
        rows = list(_browse(admin, name, body=False))
    except AdminError as exc:
        if exc.status == 404:  # not created yet: auto-created on the first send
            return set()
        raise
    out = set()
    for r in rows:
        props = r.get("MessageProperties")
        if isinstance(props, dict) and isinstance(props.get(MARK_ORIGINAL_ID), str):
            out.add(props[MARK_ORIGINAL_ID])
    return out


def _delete(admin: BrokerAdmin, name: str, mid: str, left: list[str]) -> bool:
    try:
        admin.delete_message(name, DEST_QUEUE, mid)
        return True
    except AdminError as exc:
        if exc.status == 404:  # consumed or deleted meanwhile: nothing left to remove
            return True
        if exc.status == 409:  # being delivered: stays; a later run finishes it
            left.append(mid)
            return False
        raise


def transfer_messages(
    admin: BrokerAdmin,
    actor: str,
    mode: str,
    source: str,
    target: str,
    *,
    target_kind: str | int = "q",
    ids: Iterable[str] | None = None,
    selector: str | None = None,
) -> dict[str, Any]:
    """Move, copy or re-send messages of queue ``source`` to ``target``: the ``ids``
    given, else those matching ``selector``, else all.

    ``copy`` and ``move`` keep the headers and properties and add ``JMS_PY_ORIGINAL_ID``
    (a move then deletes the original; see the module docstring); ``resend`` sends them
    again as new messages.  Returns counts and the ids not found or left in the source
    (being delivered)."""
    if mode not in TRANSFER_MODES:
        raise ActionError(f"mode must be one of {', '.join(TRANSFER_MODES)}")
    source = required_dest_name(source)
    target = required_dest_name(target)
    code = dest_type_code(target_kind)
    if mode == "move" and code & DEST_QUEUE and source == target:
        raise ActionError("a move needs a target other than the source")
    rows, missing = _select(admin, source, ids, selector)
    done = skipped = 0
    left: list[str] = []
    already = _copies_in(admin, code, target) if mode == "move" else set()
    conn = _connect(admin) if rows else None
    try:
        producer = conn.create_session().create_producer(None) if conn else None
        for row in rows:
            mid = str(row.get("MessageID"))
            if mid in already:
                skipped += 1  # sent by a move cut short: only the delete is left
            else:
                extra: dict[str, object] = (
                    {MARK_ORIGINAL_ID: mid, MARK_ORIGINAL_DESTINATION: source}
                    if mode != "resend"
                    else {}
                )
                _send(
                    producer,
                    code,
                    target,
                    _copy_of(row, extra),
                    **_send_options(row, int(time.time() * 1000)),
                )
            if mode != "move" or _delete(admin, source, mid, left):
                done += 1
    finally:
        if conn is not None:
            conn.close()
    verb = {"move": "moved", "copy": "copied", "resend": "re-sent"}[mode]
    record_change(
        actor,
        f"{verb} {done} message(s) from queue {source} to {dest_kind(code)} {target}"
        + (f" (selector {selector})" if selector and ids is None else "")
        + (f"; {len(left)} being delivered left in the source" if left else "")
        + (f"; {len(missing)} not found" if missing else ""),
        {
            "type": "message",
            "op": mode,
            "source": source,
            "destination": target,
            "dest_type": dest_kind(code),
            "count": done,
        },
    )
    return {
        "mode": mode,
        "count": done,
        "already_in_target": skipped,
        "left_in_source": left,
        "not_found": missing,
    }


def retry_dead_messages(
    admin: BrokerAdmin,
    actor: str,
    *,
    ids: Iterable[str] | None = None,
    selector: str | None = None,
) -> dict[str, Any]:
    """Send messages of mq.sys.dmq back to the destination each died on (its
    JMSDestination), with its original headers and properties, without the DMQ's
    ``JMS_SUN_DMQ_*`` ones, plus ``JMS_PY_REDELIVERY_NOTE`` (why and when it died, who
    retried it) and ``JMS_PY_ORIGINAL_ID``; then remove it from the DMQ (as a move)."""
    rows, missing = _select(admin, DMQ_NAME, ids, selector)
    targets: dict[tuple[int, str], set[str]] = {}
    done = skipped = 0
    left: list[str] = []
    per_target: dict[str, int] = {}
    conn = _connect(admin) if rows else None
    try:
        producer = conn.create_session().create_producer(None) if conn else None
        for row in rows:
            mid = str(row.get("MessageID"))
            dest = str(row.get("JMSDestinationName") or "")
            kind = int(row.get("DestinationType") or DEST_QUEUE)
            if not dest or dest == DMQ_NAME:
                left.append(mid)
                continue
            key = (kind, dest)
            if key not in targets:
                targets[key] = _copies_in(admin, kind, dest)
            if mid in targets[key]:
                skipped += 1
            else:
                props = row.get("MessageProperties")
                props = props if isinstance(props, dict) else {}
                died = props.get("JMS_SUN_DMQ_UNDELIVERED_TIMESTAMP")
                when = (
                    time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(died / 1000))
                    if isinstance(died, int)
                    else "an unknown time"
                )
                note = (
                    f"retried from {DMQ_NAME} by {actor or 'unknown'}; it died at {when}: "
                    f"{props.get('JMS_SUN_DMQ_UNDELIVERED_REASON', 'unknown reason')}"
                    f" after {props.get('JMS_SUN_DMQ_DELIVERY_COUNT', 0)} deliveries"
                )
                copy = _copy_of(
                    row,
                    {RETRY_NOTE: note, MARK_ORIGINAL_ID: mid, MARK_ORIGINAL_DESTINATION: DMQ_NAME},
                    drop_prefix="JMS_SUN_DMQ_",
                )
                _send(producer, kind, dest, copy, **_send_options(row, int(time.time() * 1000)))
            if _delete(admin, DMQ_NAME, mid, left):
                done += 1
                label = f"{dest_kind(kind)} {dest}"
                per_target[label] = per_target.get(label, 0) + 1
    finally:
        if conn is not None:
            conn.close()
    where = ", ".join(f"{n} to {label}" for label, n in sorted(per_target.items()))
    record_change(
        actor,
        f"retried {done} message(s) from {DMQ_NAME}"
        + (f" ({where})" if where else "")
        + (f"; {len(left)} left in the DMQ" if left else "")
        + (f"; {len(missing)} not found" if missing else ""),
        {"type": "message", "op": "retry", "source": DMQ_NAME, "count": done},
    )
    return {
        "mode": "retry",
        "count": done,
        "already_in_target": skipped,
        "targets": per_target,
        "left_in_source": left,
        "not_found": missing,
    }


def delete_by_selector(admin: BrokerAdmin, actor: str, name: str, selector: str) -> dict[str, Any]:
    """Delete the waiting messages of queue ``name`` that match ``selector`` (required:
    purge empties a queue); those being delivered are left and counted."""
    name = required_dest_name(name)
    if not selector or not selector.strip():
        raise ActionError("a selector is required (to empty the queue, purge it)")
    match = _compile(selector).matches
    done = 0
    left: list[str] = []
    for row in list(_browse(admin, name, body=False)):
        if match(_selector_values(row)) and _delete(admin, name, str(row.get("MessageID")), left):
            done += 1
    record_change(
        actor,
        f"deleted {done} message(s) matching {selector} from queue {name}"
        + (f"; {len(left)} being delivered left" if left else ""),
        {
            "type": "message",
            "op": "delete_selected",
            "destination": name,
            "dest_type": "queue",
            "selector": selector,
            "count": done,
        },
    )
    return {"count": done, "left_in_source": left}
