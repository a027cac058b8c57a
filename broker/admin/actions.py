"""Administration actions: one function per operation, shared by the portal's views, the
REST API and ``manage.py imqcmd`` (all three stay thin and call these).

Reads return plain dicts with stable, snake_case keys (what templates, serializers and
imqcmd's tables show).  Changes take the acting user's name as ``actor``, are recorded
in the log with who made them and send one change event to the live pages
(:func:`record_change`, :mod:`broker.admin.events`).  They talk to a running broker only
through its admin protocol (a :class:`~broker.admin.remote.BrokerAdmin`), never by
touching its memory; users, groups and access rules live in the database and have their
actions in :mod:`broker.security.users` and :mod:`broker.security.acl`.

Errors: :class:`ActionError` (bad input, said before anything changed),
:class:`~broker.admin.client.AdminError` (the broker refused: ``status`` is its JMQStatus)
and :class:`~broker.admin.remote.BrokerUnavailable`.

The module is long (about 1,000 lines) on purpose: every change an administrator can make
to a running broker is in this one file, in sections by subject (broker, services,
destinations, messages, connections, durables, transactions, log), each next to the
reads that show its result.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from broker import props as imq
from broker.loglevels import RECORD_LEVELS
from broker.protocol import mqreports as mq
from broker.protocol.javaser import (
    JavaSerializationError,
    decode_map_body,
    decode_object,
    decode_stream_body,
)
from broker.protocol.jtypes import JByte, JChar, JFloat, JInt, JLong, JShort
from broker.protocol.types import (
    DEST_DMQ,
    DEST_QUEUE,
    DEST_STATE_UNKNOWN,
    DEST_TEMP,
    DEST_TOPIC,
    MESSAGE_KIND_NAMES,
    DestState,
    LimitBehavior,
    ServiceState,
)

from .client import AdminError
from .events import send_event
from .remote import BrokerAdmin, BrokerUnavailable

__all__ = [
    "ActionError",
    "AdminError",
    "BrokerUnavailable",
    "record_change",
    "required_dest_name",
]

log = logging.getLogger("broker.audit")

# Names by number, for the replies' ints (the definitions: broker/protocol/types.py).
DEST_STATES = {DEST_STATE_UNKNOWN: "UNKNOWN", **{s.value: s.name for s in DestState}}
PAUSE_WHAT = {
    "consumers": DestState.CONSUMERS_PAUSED.value,
    "producers": DestState.PRODUCERS_PAUSED.value,
    "all": DestState.PAUSED.value,
}
SERVICE_STATES = {s.value: s.name for s in ServiceState}
LIMIT_BEHAVIORS = {b.value: b.name for b in LimitBehavior}
MESSAGE_TYPES = MESSAGE_KIND_NAMES
PREVIEW_LIMIT = 4096  # characters of a body preview


class ActionError(ValueError):
    """Bad input to an action; nothing was changed."""


# --------------------------------------------------------------------------------------
# The audit trail
# --------------------------------------------------------------------------------------


def record_change(
    actor: str, what: str, event: dict[str, Any], *, instance: str | None = None
) -> None:
    """Record in the log (and the LogRecord table the portal shows) that ``actor`` did
    ``what``, and send ``event`` (Zulip's shape: ``type``, ``op``, which one; ``by`` is
    added) to the live pages; called after the change succeeded."""
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
    # Inside a transaction (an import applies many changes in one) the live pages hear
    # of it once it is committed: a change rolled back was never made.
    from django.db import transaction

    transaction.on_commit(lambda: send_event({**event, "by": actor or "unknown"}, instance))


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
    """Instance, version, address, ports, state, memory state and counts.

    ``version`` is the OpenMQ release the broker reports (what OpenMQ tools see);
    ``product`` names the broker and its own version."""
    props = admin.broker_props()
    _, destinations = page_destinations(admin, limit=0, show_temporary=False)
    product = " ".join(
        v for v in (props.get(imq.PRODUCT_NAME, ""), props.get(imq.BUILD_NUMBER, "")) if v
    )
    return {
        "instance": props.get(imq.INSTANCE_NAME.name, ""),
        "version": props.get(imq.PRODUCT_VERSION, ""),
        "product": product,
        "host": props.get(imq.HOSTNAME.name, "") or admin.host,
        "port": _int_prop(props, imq.PORTMAPPER_PORT.name, admin.port),
        "state": props.get(imq.BROKER_STATE, "RUNNING"),
        "memory_state": props.get(imq.MEMORY_STATE, ""),
        "store": props.get(imq.PERSIST_STORE.name, "file"),
        "services": list_services(admin),
        "destinations": destinations,
        "messages": _int_prop(props, imq.CURRENT_COUNT, 0),
        "message_bytes": _int_prop(props, imq.CURRENT_SIZE, 0),
        "connections": _int_prop(props, imq.CURRENT_CONNECTIONS, 0),
        # The event-loop lag over the broker's last window, ms (None: not reported).
        "loop_lag_max": _float_prop(props, imq.LOOP_LAG_MAX),
        "loop_lag_p99": _float_prop(props, imq.LOOP_LAG_P99),
        # The shipped accounts (admin, guest) still on their shipped passwords while a
        # service listens beyond loopback, and whether they are held to loopback.
        "shipped_passwords": [
            u for u in props.get(imq.SHIPPED_PASSWORDS_IN_USE, "").split(",") if u
        ],
        "shipped_loopback_only": props.get(imq.SHIPPED_LOOPBACK_ONLY.name, "").strip().lower()
        == "true",
        "properties": props,
    }


def _int_prop(props: dict[str, str], name: str, default: int) -> int:
    try:
        return int(props.get(name, default))
    except ValueError:
        return default


def _float_prop(props: dict[str, str], name: str) -> float | None:
    try:
        return float(props[name])
    except (KeyError, ValueError):
        return None


def broker_properties(admin: BrokerAdmin) -> dict[str, str]:
    return dict(sorted(admin.broker_props().items()))


def update_broker(admin: BrokerAdmin, actor: str, properties: dict[str, str]) -> None:
    """Change broker properties at run time (the broker refuses names it cannot change)."""
    if not properties:
        raise ActionError("no property to change")
    clean = {str(k).strip(): str(v) for k, v in properties.items()}
    if any(not k for k in clean):
        raise ActionError("empty property name")
    admin.update_broker_props(clean)
    record_change(
        actor,
        "updated broker properties " + ", ".join(f"{k}={v}" for k, v in clean.items()),
        {"type": "broker", "op": "update", "properties": clean},
    )


def pause_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.pause()
    record_change(actor, "paused the broker", {"type": "broker", "op": "pause"})


def resume_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.resume()
    record_change(actor, "resumed the broker", {"type": "broker", "op": "resume"})


def quiesce_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.quiesce()
    record_change(actor, "quiesced the broker", {"type": "broker", "op": "quiesce"})


def unquiesce_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.unquiesce()
    record_change(actor, "unquiesced the broker", {"type": "broker", "op": "unquiesce"})


def shutdown_broker(admin: BrokerAdmin, actor: str, *, no_failover: bool = False) -> None:
    """Shut the broker down; ``no_failover``: in an HA cluster no other broker takes over
    its data (imqcmd shutdown bkr -nofailover)."""
    what = "shut down the broker" + (" (no failover)" if no_failover else "")
    record_change(actor, what, {"type": "broker", "op": "shutdown"})
    admin.shutdown(no_failover=no_failover)


def takeover_broker(admin: BrokerAdmin, actor: str, broker_id: str) -> None:
    """Have the broker take over another broker of its HA cluster now (imqcmd takeover
    bkr -n BROKERID): one that failed and was not taken over, or stopped -nofailover."""
    admin.takeover(broker_id)
    record_change(
        actor,
        f"had the broker take over broker {broker_id}",
        {"type": "broker", "op": "takeover", "target": broker_id},
    )


def reload_cluster(admin: BrokerAdmin, actor: str) -> dict[str, list[str]]:
    """Have every broker of the cluster read its broker list again (imqcmd reload cls);
    returns the brokers added and removed, as ``host:port``."""
    changed = admin.reload_cluster()
    record_change(
        actor,
        "reloaded the cluster configuration"
        + "".join(f"; {k} {', '.join(v)}" for k, v in changed.items() if v),
        {"type": "broker", "op": "reload_cluster", **changed},
    )
    return changed


def restart_broker(admin: BrokerAdmin, actor: str) -> None:
    record_change(actor, "restarted the broker", {"type": "broker", "op": "restart"})
    admin.restart()


def reload_access_control(admin: BrokerAdmin, actor: str) -> None:
    admin.reload_access_control()
    record_change(
        actor,
        "reloaded the access control rules",
        {"type": "broker", "op": "reload_access_control"},
    )


def broker_metrics(admin: BrokerAdmin) -> dict[str, Any]:
    return dict(admin.metrics())


def reset_metrics(admin: BrokerAdmin, actor: str) -> None:
    admin.reset_metrics()
    record_change(actor, "reset the broker's metrics", {"type": "broker", "op": "reset_metrics"})


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
    return [_service(s) for s in admin.services()]


def query_service(admin: BrokerAdmin, name: str) -> dict[str, Any]:
    found = admin.services(name)
    if not found:
        raise AdminError(404, f"service {name} not found")
    return _service(found[0])


def pause_service(admin: BrokerAdmin, actor: str, name: str) -> None:
    admin.pause_service(name)
    record_change(actor, f"paused service {name}", {"type": "service", "op": "pause", "name": name})


def resume_service(admin: BrokerAdmin, actor: str, name: str) -> None:
    admin.resume_service(name)
    record_change(
        actor, f"resumed service {name}", {"type": "service", "op": "resume", "name": name}
    )


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
    admin.update_service(name, port=port, min_threads=min_threads, max_threads=max_threads)
    changes = ", ".join(
        f"{k}={v}"
        for k, v in (("port", port), ("minThreads", min_threads), ("maxThreads", max_threads))
        if v is not None
    )
    record_change(
        actor,
        f"updated service {name}: {changes}",
        {
            "type": "service",
            "op": "update",
            "name": name,
            "port": port,
            "min_threads": min_threads,
            "max_threads": max_threads,
        },
    )


def service_metrics(admin: BrokerAdmin, name: str) -> dict[str, Any]:
    return dict(admin.metrics(service=name))


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
    """The destination's attributes under imqcmd's names, from a DestinationInfo.

    A GET_DESTINATIONS reply carries every field (its update mask is not set), so each
    field present is read; a value out of range is left out rather than failing the page."""
    from broker.protocol.dest_attributes import DESTINATION_ATTRIBUTES, attributes_from_info

    mask = 0
    for attr in DESTINATION_ATTRIBUTES:
        if attr.field is not None and attr.field in info:
            mask |= attr.mask
    try:  # one pass (a list of 10,000 destinations converts each of them)
        return attributes_from_info({**info, "updateMask": mask})
    except ValueError:
        pass  # a value out of range: read the fields one by one, leaving that one out
    out: dict[str, Any] = {}
    for attr in DESTINATION_ATTRIBUTES:
        if attr.field is None or attr.field not in info:
            continue
        try:
            out.update(attributes_from_info({**info, "updateMask": attr.mask}))
        except ValueError:
            continue
    return out


def _clean_attributes(code: int, attributes: dict[str, Any] | None) -> dict[str, Any]:
    """Attribute values converted to their types (``"10m"`` -> bytes, ``"true"`` -> True);
    ActionError naming every unknown or bad one, or one of the other kind of destination."""
    from broker.protocol.dest_attributes import convert_all

    try:
        return convert_all(dict(attributes or {}), is_topic=code == DEST_TOPIC)
    except ValueError as exc:
        raise ActionError(str(exc)) from None


def page_destinations(
    admin: BrokerAdmin,
    *,
    start: int = 0,
    limit: int = 50,
    kind: str | None = None,
    name_contains: str | None = None,
    state: str | None = None,
    show_temporary: bool = True,
    order: str = "name",
    hide_admin_temporary: bool = False,
) -> tuple[list[dict[str, Any]], int]:
    """One page of destinations (queues then topics by name, or deepest first with
    ``order="depth"``), filtered by the broker, and how many matched in all;
    ``hide_admin_temporary`` leaves out admin tools' reply queues (the portal's pages)."""
    if start < 0:
        raise ActionError("start must be >= 0")
    state_code = None
    if state:
        codes = {v: k for k, v in DEST_STATES.items() if k >= 0}
        key = state.strip().upper()
        if key not in codes:
            raise ActionError(f"unknown destination state {state!r}: one of {', '.join(codes)}")
        state_code = codes[key]
    if order not in ("name", "depth"):
        raise ActionError("order must be name or depth")
    rows, total = admin.destinations_page(
        start,
        limit,
        dest_type=dest_type_code(kind) if kind else None,
        name=name_contains or None,
        state=state_code,
        temporary=show_temporary,
        order=order,
        hide_admin_temporary=hide_admin_temporary,
    )
    return [_destination(info) for info in rows], total


def list_destinations(admin: BrokerAdmin, **filters: Any) -> list[dict[str, Any]]:
    """Every destination matching the filters of :func:`page_destinations`."""
    rows, _ = page_destinations(admin, start=0, limit=-1, **filters)
    return rows


class PagedList:
    """A broker list that Django's Paginator (and so DRF's) pages without fetching it
    whole: ``count()`` and slices each cost one request for just that window."""

    def __init__(self, fetch: Any) -> None:
        self._fetch = fetch  # fetch(start, limit) -> (rows, total)
        self._total: int | None = None

    def count(self) -> int:
        if self._total is None:
            _, self._total = self._fetch(0, 0)
        return self._total

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: slice | int) -> Any:
        if isinstance(index, int):
            rows, self._total = self._fetch(index, 1)
            if not rows:
                raise IndexError(index)
            return rows[0]
        start = index.start or 0
        stop = index.stop if index.stop is not None else self.count()
        rows, self._total = self._fetch(start, max(0, stop - start))
        return rows


def paged_destinations(admin: BrokerAdmin, **filters: Any) -> PagedList:
    """:func:`page_destinations` as a :class:`PagedList` for paginators."""
    return PagedList(
        lambda start, limit: page_destinations(admin, start=start, limit=limit, **filters)
    )


def query_destination(admin: BrokerAdmin, kind: str | int, name: str) -> dict[str, Any]:
    found = admin.destinations(name, dest_type_code(kind))
    if not found:
        raise AdminError(404, f"{dest_kind(dest_type_code(kind))} {name} not found")
    dest = _destination(found[0])
    # What of it is paged out of memory: the destination's metrics say (one more request).
    metrics = admin.metrics(destination=dest["name"], dest_type=dest_type_code(kind))
    dest["paged"] = _int(metrics.get("pagedMessages"))
    dest["paged_bytes"] = _int(metrics.get("pagedMessageBytes"))
    return dest


def _dest_event(op: str, code: int, name: str, **fields: Any) -> dict[str, Any]:
    """A destination's change event."""
    return {"type": "destination", "op": op, "name": name, "dest_type": dest_kind(code), **fields}


def required_dest_name(name: str) -> str:
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
    name = required_dest_name(name)
    attrs = _clean_attributes(code, attributes)
    admin.create_destination(name, code, attrs)
    extra = (" with " + ", ".join(f"{k}={v}" for k, v in attrs.items())) if attrs else ""
    record_change(
        actor,
        f"created {dest_kind(code)} {name}{extra}",
        _dest_event("create", code, name, attributes=attrs),
    )


def update_destination(
    admin: BrokerAdmin, actor: str, kind: str | int, name: str, attributes: dict[str, Any]
) -> None:
    code = dest_type_code(kind)
    if not attributes:
        raise ActionError("no attribute to change")
    attrs = _clean_attributes(code, attributes)
    admin.update_destination(required_dest_name(name), code, attrs)
    record_change(
        actor,
        f"updated {dest_kind(code)} {name}: " + ", ".join(f"{k}={v}" for k, v in attrs.items()),
        _dest_event("update", code, name, attributes=attrs),
    )


def destroy_destination(admin: BrokerAdmin, actor: str, kind: str | int, name: str) -> None:
    """Destroy a destination; temporary ones belong to their connection and are refused."""
    code = dest_type_code(kind)
    found = admin.destinations(required_dest_name(name), code)
    if not found:
        raise AdminError(404, f"{dest_kind(code)} {name} not found")
    if _destination(found[0])["temporary"]:
        raise ActionError(f"{name} is a temporary destination; it goes when its connection closes")
    admin.destroy(name, code)
    record_change(actor, f"destroyed {dest_kind(code)} {name}", _dest_event("destroy", code, name))


def purge_destination(admin: BrokerAdmin, actor: str, kind: str | int, name: str) -> None:
    code = dest_type_code(kind)
    admin.purge(required_dest_name(name), code)
    record_change(actor, f"purged {dest_kind(code)} {name}", _dest_event("purge", code, name))


def pause_destination(
    admin: BrokerAdmin, actor: str, kind: str | int, name: str, what: str = "all"
) -> None:
    """Pause a destination's ``consumers``, ``producers`` or ``all`` (imqcmd -pst)."""
    code = dest_type_code(kind)
    key = (what or "all").strip().lower()
    if key not in PAUSE_WHAT:
        raise ActionError("pause type must be consumers, producers or all")
    admin.pause_destination(required_dest_name(name), code, PAUSE_WHAT[key])
    record_change(
        actor,
        f"paused {key} of {dest_kind(code)} {name}",
        _dest_event("pause", code, name, what=key),
    )


def resume_destination(admin: BrokerAdmin, actor: str, kind: str | int, name: str) -> None:
    code = dest_type_code(kind)
    admin.resume_destination(required_dest_name(name), code)
    record_change(actor, f"resumed {dest_kind(code)} {name}", _dest_event("resume", code, name))


def compact_destination(
    admin: BrokerAdmin, actor: str, kind: str | int | None = None, name: str | None = None
) -> None:
    """Reclaim the message store's space (one destination's, or all of it)."""
    code = dest_type_code(kind) if kind else DEST_QUEUE
    admin.compact(name or None, code)
    record_change(
        actor,
        f"compacted {dest_kind(code) + ' ' + name if name else 'the message store'}",
        _dest_event("compact", code, name or ""),
    )


def destination_metrics(admin: BrokerAdmin, kind: str | int, name: str) -> dict[str, Any]:
    return dict(admin.metrics(destination=required_dest_name(name), dest_type=dest_type_code(kind)))


ACK_MODES = {
    1: "AUTO_ACKNOWLEDGE",
    2: "CLIENT_ACKNOWLEDGE",
    3: "DUPS_OK_ACKNOWLEDGE",
    32768: "NO_ACKNOWLEDGE",
}


def _consumer(row: dict[str, Any]) -> dict[str, Any]:
    """A GET_CONSUMERS row (OpenMQ's keys, see AdminClient.consumers), snake_case."""
    last_ack = _int(row.get("LastAckTime"))
    ack = row.get("AcknowledgeMode")
    return {
        "id": _str(row.get("ConsumerID")),
        "connection_id": _str(row.get("ConnectionID")),
        "client_id": _str(row.get("ClientID")),
        "user": _str(row.get("User")),
        "host": _str(row.get("Host")),
        "service": _str(row.get("ServiceName")),
        "ack_mode": ACK_MODES.get(_int(ack), _str(ack)),
        "selector": _str(row.get("Selector")),
        "durable": bool(row.get("Durable")),
        "durable_name": _str(row.get("DurableName")),
        "durable_active": bool(row.get("DurableActive")),
        "flow_paused": bool(row.get("FlowPaused")),
        "delivered": _int(row.get("NumMsgs")),
        "pending_acks": _int(row.get("NumMsgsPendingAcks")),
        "last_ack": datetime.fromtimestamp(last_ack / 1000, UTC).isoformat()
        if last_ack > 0
        else "",
        "destination": _str(row.get("DestinationName")),
    }


def _producer(row: dict[str, Any]) -> dict[str, Any]:
    """A producer row (OpenMQ's keys, see AdminClient.producers), snake_case."""
    return {
        "id": _str(row.get("ProducerID")),
        "connection_id": _str(row.get("ConnectionID")),
        "session_id": _str(row.get("SessionID")),
        "user": _str(row.get("User")),
        "host": _str(row.get("Host")),
        "service": _str(row.get("ServiceName")),
        "flow_paused": bool(row.get("FlowPaused")),
        "destination": _str(row.get("DestinationName")),
    }


def list_consumers(admin: BrokerAdmin, kind: str | int, name: str) -> list[dict[str, Any]]:
    """The consumers of a destination."""
    rows = admin.consumers(required_dest_name(name), dest_type_code(kind))
    return [_consumer(c) for c in rows]


def list_producers(admin: BrokerAdmin, kind: str | int, name: str) -> list[dict[str, Any]]:
    """The producers of a destination."""
    rows = admin.producers(required_dest_name(name), dest_type_code(kind))
    return [_producer(p) for p in rows]


# -- messages ---------------------------------------------------------------------------


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
    kind = _str(row.get("MessageKind")) or MESSAGE_TYPES.get(
        _int(row.get("MessageBodyType")), "message"
    )
    if kind == "plain":
        kind = "message"
    raw = row.get("MessageBodyBytes")
    body = bytes(raw) if isinstance(raw, bytes | bytearray) else None
    props = row.get("MessageProperties")
    ts = _int(row.get("Timestamp"))
    expiration = _int(row.get("Expiration"))
    return {
        "id": _str(row.get("MessageID")),
        "message_type": kind,
        "jms_type": _str(row.get("Type")),
        "priority": _int(row.get("Priority")),
        "timestamp": ts,
        "time": datetime.fromtimestamp(ts / 1000, UTC).isoformat() if ts else "",
        "expiration": expiration,
        "persistent": _int(row.get("DeliveryMode")) == 2,
        "redelivered": bool(row.get("Redelivered")),
        "correlation_id": _str(row.get("CorrelationID")),
        "reply_to": _str(row.get("ReplyToDestinationName")),
        "destination": _str(row.get("DestinationName")),
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
    rows = [_connection(r) for r in admin.connections(service or None)]
    rows.sort(key=lambda r: r["id"])
    return rows


def query_connection(admin: BrokerAdmin, cxn_id: int) -> dict[str, Any]:
    return _connection(admin.connection(_cxn_id(cxn_id)))


def _cxn_id(value: object) -> int:
    """A connection or transaction ID: a Java long (ActionError otherwise)."""
    try:
        number = int(str(value))
    except ValueError:
        raise ActionError(f"connection ID must be a number, not {value!r}") from None
    if not -(2**63) <= number < 2**63:
        raise ActionError(f"ID {value} is out of range (a 64-bit number)")
    return number


def destroy_connection(admin: BrokerAdmin, actor: str, cxn_id: int) -> None:
    """Close a client connection (it is sent GOODBYE first)."""
    cid = _cxn_id(cxn_id)
    admin.destroy_connection(cid)
    record_change(
        actor, f"destroyed connection {cid}", {"type": "connection", "op": "destroy", "id": cid}
    )


# --------------------------------------------------------------------------------------
# Durable subscriptions
# --------------------------------------------------------------------------------------


def _durable(info: dict[str, Any]) -> dict[str, Any]:
    consumer = info.get("consumer") if isinstance(info.get("consumer"), dict) else {}
    topic = ""
    if consumer:
        dest = (
            consumer.get("destination")  # ConsumerInfo.destination, what the broker sends
            or consumer.get("destName")
            or consumer.get("destinationName")
            or consumer.get("dest")
        )
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
    rows = [_durable(d) for d in admin.durables(topic or None)]
    rows.sort(key=lambda r: (r["client_id"], r["name"]))
    return rows


def purge_durable(admin: BrokerAdmin, actor: str, name: str, client_id: str | None) -> None:
    if not name:
        raise ActionError("a subscription name is required")
    admin.purge_durable(name, client_id or None)
    record_change(
        actor,
        f"purged durable subscription {name} (client ID {client_id or '-'})",
        {"type": "durable", "op": "purge", "name": name, "client_id": client_id or ""},
    )


def destroy_durable(admin: BrokerAdmin, actor: str, name: str, client_id: str | None) -> None:
    if not name:
        raise ActionError("a subscription name is required")
    admin.destroy_durable(name, client_id or None)
    record_change(
        actor,
        f"destroyed durable subscription {name} (client ID {client_id or '-'})",
        {"type": "durable", "op": "destroy", "name": name, "client_id": client_id or ""},
    )


# --------------------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------------------

# com.sun.messaging.jmq.jmsserver.data.TransactionState (docs/developers/protocol.md)
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


def _id(value: object) -> int:
    """A Long id sent as a number or as its decimal string (0 when neither)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def _transaction(row: dict[str, Any]) -> dict[str, Any]:
    state = row.get("state")
    ts = _int(row.get("timestamp"))
    return {
        "id": _id(row.get("txnid")),  # OpenMQ sends the id as a String
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
    rows = [_transaction(t) for t in admin.transactions()]
    rows.sort(key=lambda r: r["id"])
    return rows


def query_transaction(admin: BrokerAdmin, txn_id: int) -> dict[str, Any]:
    """One transaction the broker tracks (AdminError 404 when it does not)."""
    tid = _cxn_id(txn_id)
    for row in list_transactions(admin):
        if row["id"] == tid:
            return row
    raise AdminError(404, f"transaction {tid} not found")


def commit_transaction(admin: BrokerAdmin, actor: str, txn_id: int) -> None:
    tid = _cxn_id(txn_id)
    admin.commit_transaction(tid)
    record_change(
        actor, f"committed transaction {tid}", {"type": "transaction", "op": "commit", "id": tid}
    )


def rollback_transaction(admin: BrokerAdmin, actor: str, txn_id: int) -> None:
    tid = _cxn_id(txn_id)
    admin.rollback_transaction(tid)
    record_change(
        actor,
        f"rolled back transaction {tid}",
        {"type": "transaction", "op": "rollback", "id": tid},
    )


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

    order = list(RECORD_LEVELS)
    qs = LogRecord.objects.all()
    if level:
        lv = level.strip().upper()
        if lv not in order:
            raise ActionError(f"unknown log level {level!r}: one of {', '.join(order)}")
        below = order[: order.index(lv)]
        if below:
            # Written as "not the lower levels" (the levels are always these names): the
            # database then walks the timestamp index newest first and stops at a page,
            # instead of sorting every record of the wanted levels.
            qs = qs.exclude(level__in=below)
    if since:
        qs = qs.filter(timestamp__gte=since)
    if until:
        qs = qs.filter(timestamp__lte=until)
    if text:
        qs = qs.filter(message__icontains=text)
    if instance:
        qs = qs.filter(broker_instance=instance)
    return qs.order_by("-timestamp", "-id")
