"""Administration actions: one function per operation, shared by the portal's views, the
REST API and ``manage.py imqcmd`` (all three stay thin and call these).

Reads return plain dicts with stable, snake_case keys (what templates, serializers and
imqcmd's tables show).  Changes take the acting user's name as ``actor`` and are recorded
in the log with who made them (:func:`record_change`).  They talk to a running broker only
through its admin protocol (a :class:`~broker.admin.remote.BrokerAdmin`), never by
touching its memory; users, groups and access rules live in the database and have their
actions in :mod:`broker.security.users` and :mod:`broker.security.acl`.

Errors: :class:`ActionError` (bad input, said before anything changed),
:class:`~broker.admin.client.AdminError` (the broker refused: ``status`` is its JMQStatus)
and :class:`~broker.admin.remote.BrokerUnavailable`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from broker.protocol.javaser import (
    JavaSerializationError,
    decode_map_body,
    decode_object,
    decode_stream_body,
)

from .client import AdminError
from .remote import BrokerAdmin, BrokerUnavailable

__all__ = ["ActionError", "AdminError", "BrokerUnavailable", "record_change"]

log = logging.getLogger("broker.audit")

DEST_QUEUE = 1
DEST_TOPIC = 2
DEST_TEMP = 0x10
DEST_DMQ = 0x100  # DestType.DEST_DMQ bit, as in the broker's fulltype

DEST_STATES = {
    -1: "UNKNOWN",
    0: "RUNNING",
    1: "CONSUMERS_PAUSED",
    2: "PRODUCERS_PAUSED",
    3: "PAUSED",
}
PAUSE_WHAT = {"consumers": 1, "producers": 2, "all": 3}
SERVICE_STATES = {
    0: "UNINITIALIZED",
    1: "INITIALIZED",
    2: "STARTED",
    3: "RUNNING",
    4: "PAUSED",
    5: "SHUTTINGDOWN",
    6: "STOPPED",
    7: "DESTROYED",
    8: "QUIESCED",
}
LIMIT_BEHAVIORS = {
    0: "FLOW_CONTROL",
    1: "REMOVE_OLDEST",
    2: "REJECT_NEWEST",
    3: "REMOVE_LOW_PRIORITY",
}
# Message types by packet type (the JMQ packet types of the six JMS message kinds).
MESSAGE_TYPES = {1: "text", 2: "bytes", 3: "map", 4: "stream", 5: "object", 6: "message"}
PREVIEW_LIMIT = 4096  # characters of a body preview


class ActionError(ValueError):
    """Bad input to an action; nothing was changed."""


# --------------------------------------------------------------------------------------
# The audit trail
# --------------------------------------------------------------------------------------


def record_change(actor: str, what: str, instance: str | None = None) -> None:
    """Record in the log (and the LogRecord table the portal shows) that ``actor`` did
    ``what``; called after the change succeeded."""
    from django.conf import settings

    from broker.models import LogRecord

    message = f"{actor or 'unknown'}: {what}"
    log.info("admin change by %s", message)
    LogRecord.objects.create(
        timestamp=datetime.now(UTC),
        level=LogRecord.Level.INFO,
        logger="broker.audit",
        message=message,
        broker_instance=instance or settings.IMQ_INSTANCE,
    )


def dest_type_code(kind: str | int) -> int:
    """``q``/``queue``/1 -> 1, ``t``/``topic``/2 -> 2 (imqcmd's -t values)."""
    if isinstance(kind, int):
        if kind & (DEST_QUEUE | DEST_TOPIC):
            return kind
        raise ActionError(f"unknown destination type {kind}")
    value = str(kind).strip().lower()
    if value in ("q", "queue"):
        return DEST_QUEUE
    if value in ("t", "topic"):
        return DEST_TOPIC
    raise ActionError(f"destination type must be q (queue) or t (topic), not {kind!r}")


def dest_kind(code: int) -> str:
    return "queue" if code & DEST_QUEUE else "topic"


def _str(value: object) -> str:
    return "" if value is None else str(value)


def _int(value: object, default: int = 0) -> int:
    return int(value) if isinstance(value, int) else default  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Broker
# --------------------------------------------------------------------------------------


def query_broker(admin: BrokerAdmin) -> dict[str, Any]:
    """Instance, version, address, ports, memory state and counts."""
    props = admin.call("broker_props")
    destinations = list_destinations(admin)
    connections = admin.call("connections")
    services = list_services(admin)
    return {
        "instance": props.get("imq.instancename", ""),
        "version": props.get("imq.product.version", ""),
        "host": props.get("imq.hostname", "") or admin.host,
        "port": _int_prop(props, "imq.portmapper.port", admin.port),
        "state": props.get("imq.broker.state", "RUNNING"),
        "memory_state": props.get("imq.memory.state", ""),
        "store": props.get("imq.persist.store", "file"),
        "services": services,
        "destinations": len([d for d in destinations if not d["temporary"]]),
        "messages": sum(d["messages"] for d in destinations),
        "message_bytes": sum(d["bytes"] for d in destinations),
        "connections": len(connections),
        "properties": props,
    }


def _int_prop(props: dict[str, str], name: str, default: int) -> int:
    try:
        return int(props.get(name, default))
    except ValueError:
        return default


def broker_properties(admin: BrokerAdmin) -> dict[str, str]:
    return dict(sorted(admin.call("broker_props").items()))


def update_broker(admin: BrokerAdmin, actor: str, properties: dict[str, str]) -> None:
    """Change broker properties at run time (the broker refuses names it cannot change)."""
    if not properties:
        raise ActionError("no property to change")
    clean = {str(k).strip(): str(v) for k, v in properties.items()}
    if any(not k for k in clean):
        raise ActionError("empty property name")
    admin.call("update_broker_props", clean)
    record_change(
        actor, "updated broker properties " + ", ".join(f"{k}={v}" for k, v in clean.items())
    )


def pause_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.call("pause")
    record_change(actor, "paused the broker")


def resume_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.call("resume")
    record_change(actor, "resumed the broker")


def quiesce_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.call("quiesce")
    record_change(actor, "quiesced the broker")


def unquiesce_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.call("unquiesce")
    record_change(actor, "unquiesced the broker")


def shutdown_broker(admin: BrokerAdmin, actor: str) -> None:
    record_change(actor, "shut down the broker")
    admin.call("shutdown")


def restart_broker(admin: BrokerAdmin, actor: str) -> None:
    record_change(actor, "restarted the broker")
    admin.call("restart")


def reload_access_control(admin: BrokerAdmin, actor: str) -> None:
    admin.call("reload_access_control")
    record_change(actor, "reloaded the access control rules")


def broker_metrics(admin: BrokerAdmin) -> dict[str, Any]:
    return dict(admin.call("metrics"))


def reset_metrics(admin: BrokerAdmin, actor: str) -> None:
    admin.call("reset_metrics")
    record_change(actor, "reset the broker's metrics")


# --------------------------------------------------------------------------------------
# Services
# --------------------------------------------------------------------------------------


def _service(info: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": _str(info.get("name")),
        "protocol": _str(info.get("protocol")),
        "type": "ADMIN" if _int(info.get("type")) == 1 else "NORMAL",
        "state": SERVICE_STATES.get(_int(info.get("state"), -1), "UNKNOWN"),
        "port": _int(info.get("port")),
        "dynamic_port": bool(info.get("dynamicPort")),
        "connections": _int(info.get("nConnections")),
        "min_threads": _int(info.get("minThreads")),
        "max_threads": _int(info.get("maxThreads")),
    }


def list_services(admin: BrokerAdmin) -> list[dict[str, Any]]:
    return [_service(s) for s in admin.call("services")]


def query_service(admin: BrokerAdmin, name: str) -> dict[str, Any]:
    found = admin.call("services", name)
    if not found:
        raise AdminError(404, f"service {name} not found")
    return _service(found[0])


def pause_service(admin: BrokerAdmin, actor: str, name: str) -> None:
    admin.call("pause_service", name)
    record_change(actor, f"paused service {name}")


def resume_service(admin: BrokerAdmin, actor: str, name: str) -> None:
    admin.call("resume_service", name)
    record_change(actor, f"resumed service {name}")


def update_service(
    admin: BrokerAdmin,
    actor: str,
    name: str,
    *,
    port: int | None = None,
    min_threads: int | None = None,
    max_threads: int | None = None,
) -> None:
    """Change a service's port or connection limit (maxThreads: OpenMQ's name for it)."""
    if port is None and min_threads is None and max_threads is None:
        raise ActionError("nothing to update: give port, min_threads or max_threads")
    for label, value, low in (
        ("port", port, 0),
        ("minThreads", min_threads, 0),
        ("maxThreads", max_threads, 1),
    ):
        if value is not None and (
            not isinstance(value, int) or value < low or value > 65535 and label == "port"
        ):
            raise ActionError(
                f"{label} must be a whole number >= {low}"
                + (" and <= 65535" if label == "port" else "")
            )
    admin.call("update_service", name, port=port, min_threads=min_threads, max_threads=max_threads)
    changes = ", ".join(
        f"{k}={v}"
        for k, v in (("port", port), ("minThreads", min_threads), ("maxThreads", max_threads))
        if v is not None
    )
    record_change(actor, f"updated service {name}: {changes}")


def service_metrics(admin: BrokerAdmin, name: str) -> dict[str, Any]:
    return dict(admin.call("metrics", service=name))


# --------------------------------------------------------------------------------------
# Destinations
# --------------------------------------------------------------------------------------


def _destination(info: dict[str, Any]) -> dict[str, Any]:
    full = _int(info.get("fulltype"), _int(info.get("type")))
    return {
        "name": _str(info.get("name")),
        "type": dest_kind(full),
        "temporary": bool(full & DEST_TEMP),
        "dmq": bool(full & DEST_DMQ),
        "auto_created": bool(info.get("autocreated")),
        "state": DEST_STATES.get(_int(info.get("destState"), -1), "UNKNOWN"),
        "messages": _int(info.get("nMessages")),
        "bytes": _int(info.get("nMessageBytes")),
        "unacked": _int(info.get("nUnackMessages")),
        "in_delay": _int(info.get("nInDelayMessages")),
        "in_transaction": _int(info.get("nTxnMessages")),
        "producers": _int(info.get("nProducers")),
        "consumers": _int(info.get("nConsumers")),
        "active_consumers": _int(info.get("naConsumers")),
        "backup_consumers": _int(info.get("nfConsumers")),
        "attributes": destination_attributes(info),
    }


def destination_attributes(info: dict[str, Any]) -> dict[str, Any]:
    """The destination's attributes under imqcmd's names, from a DestinationInfo."""
    from .attributes import attributes_from_info

    return attributes_from_info(info)


def list_destinations(
    admin: BrokerAdmin,
    *,
    kind: str | None = None,
    name_contains: str | None = None,
    state: str | None = None,
    show_temporary: bool = True,
) -> list[dict[str, Any]]:
    """Every destination (sorted by type and name), optionally filtered."""
    code = dest_type_code(kind) if kind else None
    wanted_state = state.upper() if state else None
    needle = name_contains.lower() if name_contains else None
    out = []
    for info in admin.call("destinations"):
        row = _destination(info)
        if code is not None and row["type"] != dest_kind(code):
            continue
        if needle and needle not in row["name"].lower():
            continue
        if wanted_state and row["state"] != wanted_state:
            continue
        if not show_temporary and row["temporary"]:
            continue
        out.append(row)
    out.sort(key=lambda r: (r["type"], r["name"]))
    return out


def query_destination(admin: BrokerAdmin, kind: str | int, name: str) -> dict[str, Any]:
    found = admin.call("destinations", name, dest_type_code(kind))
    if not found:
        raise AdminError(404, f"{dest_kind(dest_type_code(kind))} {name} not found")
    return _destination(found[0])


def _check_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise ActionError("a destination name is required")
    return name


def create_destination(
    admin: BrokerAdmin,
    actor: str,
    kind: str | int,
    name: str,
    attributes: dict[str, Any] | None = None,
) -> None:
    code = dest_type_code(kind)
    name = _check_name(name)
    attrs = dict(attributes or {})
    admin.call("create_destination", name, code, attrs)
    extra = (" with " + ", ".join(f"{k}={v}" for k, v in attrs.items())) if attrs else ""
    record_change(actor, f"created {dest_kind(code)} {name}{extra}")


def update_destination(
    admin: BrokerAdmin, actor: str, kind: str | int, name: str, attributes: dict[str, Any]
) -> None:
    code = dest_type_code(kind)
    if not attributes:
        raise ActionError("no attribute to change")
    admin.call("update_destination", _check_name(name), code, dict(attributes))
    record_change(
        actor,
        f"updated {dest_kind(code)} {name}: "
        + ", ".join(f"{k}={v}" for k, v in attributes.items()),
    )


def destroy_destination(admin: BrokerAdmin, actor: str, kind: str | int, name: str) -> None:
    """Destroy a destination; temporary ones belong to their connection and are refused."""
    code = dest_type_code(kind)
    found = admin.call("destinations", _check_name(name), code)
    if not found:
        raise AdminError(404, f"{dest_kind(code)} {name} not found")
    if _destination(found[0])["temporary"]:
        raise ActionError(f"{name} is a temporary destination; it goes when its connection closes")
    admin.call("destroy", name, code)
    record_change(actor, f"destroyed {dest_kind(code)} {name}")


def purge_destination(admin: BrokerAdmin, actor: str, kind: str | int, name: str) -> None:
    code = dest_type_code(kind)
    admin.call("purge", _check_name(name), code)
    record_change(actor, f"purged {dest_kind(code)} {name}")


def pause_destination(
    admin: BrokerAdmin, actor: str, kind: str | int, name: str, what: str = "all"
) -> None:
    """Pause a destination's ``consumers``, ``producers`` or ``all`` (imqcmd -pst)."""
    code = dest_type_code(kind)
    key = (what or "all").strip().lower()
    if key not in PAUSE_WHAT:
        raise ActionError("pause type must be consumers, producers or all")
    admin.call("pause_destination", _check_name(name), code, PAUSE_WHAT[key])
    record_change(actor, f"paused {key} of {dest_kind(code)} {name}")


def resume_destination(admin: BrokerAdmin, actor: str, kind: str | int, name: str) -> None:
    code = dest_type_code(kind)
    admin.call("resume_destination", _check_name(name), code)
    record_change(actor, f"resumed {dest_kind(code)} {name}")


def compact_destination(
    admin: BrokerAdmin, actor: str, kind: str | int | None = None, name: str | None = None
) -> None:
    """Reclaim the message store's space (one destination's, or all of it)."""
    code = dest_type_code(kind) if kind else DEST_QUEUE
    admin.call("compact", name or None, code)
    record_change(
        actor, f"compacted {dest_kind(code) + ' ' + name if name else 'the message store'}"
    )


def destination_metrics(admin: BrokerAdmin, kind: str | int, name: str) -> dict[str, Any]:
    return dict(
        admin.call("metrics", destination=_check_name(name), dest_type=dest_type_code(kind))
    )


def list_consumers(admin: BrokerAdmin, kind: str | int, name: str) -> list[dict[str, Any]]:
    return [dict(c) for c in admin.call("consumers", _check_name(name), dest_type_code(kind))]


# -- messages ---------------------------------------------------------------------------


def preview_body(message_type: str, body: bytes | None) -> str:
    """A safe, bounded text preview of a message body: text as is, map and stream bodies
    decoded (whitelisted Java types only, nothing instantiated), bytes and objects as hex."""
    if body is None:
        return ""
    try:
        if message_type == "text":
            text = body.decode("utf-8", errors="replace")
        elif message_type == "map":
            text = "\n".join(f"{k} = {v!r}" for k, v in decode_map_body(body).items())
        elif message_type == "stream":
            text = "\n".join(repr(v) for v in decode_stream_body(body))
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


def _message(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    mtype = _str(out.get("type") or out.get("message_type") or "")
    body = out.pop("body", None)
    out["message_type"] = mtype
    out["body_size"] = len(body) if isinstance(body, bytes | bytearray) else out.get("body_size", 0)
    out["preview"] = preview_body(mtype, bytes(body)) if isinstance(body, bytes | bytearray) else ""
    return out


def list_messages(
    admin: BrokerAdmin, name: str, kind: str | int = "q", *, start: int = 0, limit: int = 50
) -> list[dict[str, Any]]:
    """Messages of a queue, oldest first, with headers, properties and a body preview."""
    if start < 0 or limit < 1 or limit > 1000:
        raise ActionError("start must be >= 0 and limit between 1 and 1000")
    rows = admin.call(
        "messages", _check_name(name), dest_type_code(kind), start=start, limit=limit, body=True
    )
    return [_message(r) for r in rows]


def get_message(
    admin: BrokerAdmin, name: str, msg_id: str, kind: str | int = "q"
) -> dict[str, Any]:
    rows = admin.call("messages", _check_name(name), dest_type_code(kind), msg_id=msg_id, body=True)
    if not rows:
        raise AdminError(404, f"message {msg_id} not found in {name}")
    return _message(rows[0])


def delete_message(
    admin: BrokerAdmin, actor: str, name: str, msg_id: str, kind: str | int = "q"
) -> None:
    if not msg_id:
        raise ActionError("a message ID is required")
    code = dest_type_code(kind)
    admin.call("delete_message", _check_name(name), code, msg_id)
    record_change(actor, f"deleted message {msg_id} from {dest_kind(code)} {name}")


# --------------------------------------------------------------------------------------
# Connections
# --------------------------------------------------------------------------------------


def _connection(row: dict[str, Any]) -> dict[str, Any]:
    host = _str(row.get("host"))
    port = _int(row.get("port"))
    return {
        "id": _int(row.get("cxnid")),
        "user": _str(row.get("user")),
        "host": host,
        "port": port,
        "address": f"{host}:{port}" if host else "",
        "service": _str(row.get("service")),
        "client_id": _str(row.get("clientid")),
        "platform": _str(row.get("clientplatform")),
        "sessions": _int(row.get("nsessions")),
        "producers": _int(row.get("nproducers")),
        "consumers": _int(row.get("nconsumers")),
    }


def list_connections(admin: BrokerAdmin, service: str | None = None) -> list[dict[str, Any]]:
    rows = [_connection(r) for r in admin.call("connections", service or None)]
    rows.sort(key=lambda r: r["id"])
    return rows


def query_connection(admin: BrokerAdmin, cxn_id: int) -> dict[str, Any]:
    return _connection(admin.call("connection", _cxn_id(cxn_id)))


def _cxn_id(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise ActionError(f"connection ID must be a number, not {value!r}") from None


def destroy_connection(admin: BrokerAdmin, actor: str, cxn_id: int) -> None:
    """Close a client connection (it is sent GOODBYE first)."""
    cid = _cxn_id(cxn_id)
    admin.call("destroy_connection", cid)
    record_change(actor, f"destroyed connection {cid}")


# --------------------------------------------------------------------------------------
# Durable subscriptions
# --------------------------------------------------------------------------------------


def _durable(info: dict[str, Any]) -> dict[str, Any]:
    consumer = info.get("consumer") if isinstance(info.get("consumer"), dict) else {}
    topic = ""
    if consumer:
        dest = consumer.get("destName") or consumer.get("destinationName") or consumer.get("dest")
        topic = _str(dest)
    return {
        "name": _str(info.get("name")),
        "client_id": _str(info.get("clientID")),
        "topic": topic or _str(info.get("topic")),
        "messages": _int(info.get("nMessages")),
        "active": bool(info.get("isActive")),
        "durable": bool(info.get("isDurable", True)),
        "shared": bool(info.get("isShared")) or bool(info.get("isJMSShared")),
        "active_consumers": _int(info.get("activeCount")),
        "selector": _str(consumer.get("selector")) if consumer else "",
        "uid": _str(info.get("uidString")),
    }


def list_durables(admin: BrokerAdmin, topic: str | None = None) -> list[dict[str, Any]]:
    rows = [_durable(d) for d in admin.call("durables", topic or None)]
    rows.sort(key=lambda r: (r["client_id"], r["name"]))
    return rows


def purge_durable(admin: BrokerAdmin, actor: str, name: str, client_id: str | None) -> None:
    if not name:
        raise ActionError("a subscription name is required")
    admin.call("purge_durable", name, client_id or None)
    record_change(actor, f"purged durable subscription {name} (client ID {client_id or '-'})")


def destroy_durable(admin: BrokerAdmin, actor: str, name: str, client_id: str | None) -> None:
    if not name:
        raise ActionError("a subscription name is required")
    admin.call("destroy_durable", name, client_id or None)
    record_change(actor, f"destroyed durable subscription {name} (client ID {client_id or '-'})")


# --------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------

# com.sun.messaging.jmq.jmsserver.data.TransactionState (types.md §10)
TXN_STATES = {
    -1: "TIMED_OUT",
    0: "CREATED",
    1: "STARTED",
    2: "FAILED",
    3: "INCOMPLETE",
    4: "COMPLETE",
    5: "PREPARED",
    6: "COMMITTED",
    7: "ROLLEDBACK",
}


def _transaction(row: dict[str, Any]) -> dict[str, Any]:
    state = row.get("state")
    ts = _int(row.get("timestamp"))
    return {
        "id": _int(row.get("txnid")),
        "xid": _str(row.get("xid")),
        "state": TXN_STATES.get(state, _str(state)) if isinstance(state, int) else _str(state),
        "user": _str(row.get("user")),
        "client_id": _str(row.get("clientid")),
        "connection": _str(row.get("connection")),
        "connection_id": _int(row.get("connectionid")),
        "messages": _int(row.get("nmsgs")),
        "acks": _int(row.get("nacks")),
        "created": datetime.fromtimestamp(ts / 1000, UTC).isoformat() if ts else "",
    }


def list_transactions(admin: BrokerAdmin) -> list[dict[str, Any]]:
    rows = [_transaction(t) for t in admin.call("transactions")]
    rows.sort(key=lambda r: r["id"])
    return rows


def commit_transaction(admin: BrokerAdmin, actor: str, txn_id: int) -> None:
    tid = _cxn_id(txn_id)
    admin.call("commit_transaction", tid)
    record_change(actor, f"committed transaction {tid}")


def rollback_transaction(admin: BrokerAdmin, actor: str, txn_id: int) -> None:
    tid = _cxn_id(txn_id)
    admin.call("rollback_transaction", tid)
    record_change(actor, f"rolled back transaction {tid}")


# --------------------------------------------------------------------------------------
# Log records (the database, no broker round trip)
# --------------------------------------------------------------------------------------


def log_records(
    *,
    level: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    text: str | None = None,
    instance: str | None = None,
):
    """A queryset of log records, newest first, filtered by minimum level, time and text."""
    from broker.models import LogRecord

    order = ["DEBUGHIGH", "DEBUGMED", "DEBUG", "INFO", "WARNING", "ERROR", "FORCE"]
    qs = LogRecord.objects.all()
    if level:
        lv = level.strip().upper()
        if lv not in order:
            raise ActionError(f"unknown log level {level!r}: one of {', '.join(order)}")
        qs = qs.filter(level__in=order[order.index(lv) :])
    if since:
        qs = qs.filter(timestamp__gte=since)
    if until:
        qs = qs.filter(timestamp__lte=until)
    if text:
        qs = qs.filter(message__icontains=text)
    if instance:
        qs = qs.filter(broker_instance=instance)
    return qs.order_by("-timestamp", "-id")
