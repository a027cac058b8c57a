"""Actions on physical destinations (server/admin_service/destinations.py's requests), and
:class:`PagedList`, a broker list that paginators page one request at a time."""

from __future__ import annotations

from typing import Any

from broker.protocol.types import (
    DEST_DMQ,
    DEST_QUEUE,
    DEST_STATE_UNKNOWN,
    DEST_TEMP,
    DEST_TOPIC,
    DestState,
)

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

# Names by number, for the replies' ints (the definitions: broker/protocol/types.py).
DEST_STATES = {DEST_STATE_UNKNOWN: "UNKNOWN", **{s.value: s.name for s in DestState}}
PAUSE_WHAT = {
    "consumers": DestState.CONSUMERS_PAUSED.value,
    "producers": DestState.PRODUCERS_PAUSED.value,
    "all": DestState.PAUSED.value,
}


def _destination(info: dict[str, Any]) -> dict[str, Any]:
    full = as_int(info.get("fulltype"), as_int(info.get("type")))
    return {
        "name": as_str(info.get("name")),
        "type": dest_kind(full),
        "temporary": bool(full & DEST_TEMP),
        "dmq": bool(full & DEST_DMQ),
        "auto_created": bool(info.get("autocreated")),
        "state": DEST_STATES.get(as_int(info.get("destState"), -1), "UNKNOWN"),
        "messages": as_int(info.get("nMessages")),
        "bytes": as_int(info.get("nMessageBytes")),
        "unacked": as_int(info.get("nUnackMessages")),
        "in_delay": as_int(info.get("nInDelayMessages")),
        "in_transaction": as_int(info.get("nTxnMessages")),
        "producers": as_int(info.get("nProducers")),
        "consumers": as_int(info.get("nConsumers")),
        "active_consumers": as_int(info.get("naConsumers")),
        "backup_consumers": as_int(info.get("nfConsumers")),
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
    dest["paged"] = as_int(metrics.get("pagedMessages"))
    dest["paged_bytes"] = as_int(metrics.get("pagedMessageBytes"))
    return dest


def _dest_event(op: str, code: int, name: str, **fields: Any) -> dict[str, Any]:
    """A destination's change event."""
    return {"type": "destination", "op": op, "name": name, "dest_type": dest_kind(code), **fields}


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
