"""Admin requests about physical destinations (OpenMQ's GetDestinationsHandler,
CreateDestinationHandler, UpdateDestinationHandler, PurgeDestinationHandler,
DestroyDestinationHandler, CompactDestinationHandler): GET_DESTINATIONS (with our paging
and filter properties, :data:`LIST_PROPS`), CREATE_DESTINATION, UPDATE_DESTINATION,
PURGE_DESTINATION, DESTROY_DESTINATION and COMPACT_DESTINATION."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.core import queries
from broker.core.admin_views import destination_info as _destination_info
from broker.core.admin_views import listed_by_admin
from broker.protocol import dest_attributes as dattrs
from broker.protocol.admin_info import DEST_NAME, DEST_TYPE, encode_infos
from broker.protocol.admin_types import ADMIN_QUEUES
from broker.protocol.destname import admin_name_problem
from broker.protocol.jtypes import JInt
from broker.protocol.names import (
    JMQ_DESTINATION,
    JMQ_FILTER_NAME,
    JMQ_FILTER_STATE,
    JMQ_FILTER_TYPE,
    JMQ_HIDE_ADMIN_TEMPORARY,
    JMQ_MAX_COUNT,
    JMQ_ORDER_BY,
    JMQ_QUANTITY,
    JMQ_SHOW_TEMPORARY,
    JMQ_START_INDEX,
)
from broker.protocol.types import DEST_QUEUE, DEST_TEMP, DEST_TOPIC, DestType, Status
from broker.store.filestore import FileStore

from .common import AdminError, Result, flag, log, lookup, read_info, request_dest_type
from .connections import admin_connection_ids

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


def admin_defaults(settings, is_topic: bool, dest_type: int) -> dict[str, object]:
    """The attributes an admin-created destination starts from (OpenMQ's
    defaults): unlimited counts and sizes, REJECT_NEWEST, 100 producers, the auto-creation
    flow limits; a queue's consumer counts follow its delivery-policy flavour bits
    (single 1/0, round-robin -1/0, failover 1/-1), else the auto-creation defaults."""
    auto = dict((settings.topic_attributes if is_topic else settings.queue_attributes) or {})
    attrs: dict[str, object] = {
        "maxNumMsgs": -1,
        "maxTotalMsgBytes": -1,
        "maxBytesPerMsg": -1,
        "maxNumProducers": 100,
        "limitBehavior": "REJECT_NEWEST",
        "useDMQ": True,
        "isLocalOnly": False,
        "maxDeliveryCount": -1,
        "consumerFlowLimit": auto.get("consumerFlowLimit", 1000),
    }
    if is_topic:
        attrs["maxNumSharedConsumers"] = auto.get("maxNumSharedConsumers", -1)
        attrs["sharedConsumerFlowLimit"] = auto.get("sharedConsumerFlowLimit", 5)
    else:
        active = auto.get("maxNumActiveConsumers", -1)
        backup = auto.get("maxNumBackupConsumers", 0)
        if dest_type & DestType.FLAVOR_SINGLE:
            active, backup = 1, 0
        elif dest_type & DestType.FLAVOR_RROBIN:
            active, backup = -1, 0
        elif dest_type & DestType.FLAVOR_FAILOVER:
            active, backup = 1, -1
        attrs["maxNumActiveConsumers"] = active
        attrs["maxNumBackupConsumers"] = backup
    return attrs


# Ours, on GET_DESTINATIONS (stock imqcmd sends none of them and gets every destination):
# the portal asks for one filtered, ordered page and the total (JMQQuantity), so a broker
# with tens of thousands of destinations answers a page in milliseconds.
LIST_PROPS = (
    JMQ_START_INDEX,
    JMQ_MAX_COUNT,
    JMQ_FILTER_TYPE,
    JMQ_FILTER_NAME,
    JMQ_FILTER_STATE,
    JMQ_SHOW_TEMPORARY,
    JMQ_ORDER_BY,
    JMQ_HIDE_ADMIN_TEMPORARY,
)


def _select_destinations(dests: list, props: dict) -> tuple[list, int]:
    """The page of ``dests`` the LIST_PROPS ask for, and how many matched in all."""
    kind = props.get(JMQ_FILTER_TYPE)
    if isinstance(kind, int) and kind & (DEST_QUEUE | DEST_TOPIC):
        dests = [d for d in dests if d.dest_type & int(kind)]
    needle = props.get(JMQ_FILTER_NAME)
    if isinstance(needle, str) and needle:
        low = needle.lower()
        dests = [d for d in dests if low in d.name.lower()]
    state = props.get(JMQ_FILTER_STATE)
    if isinstance(state, int) and not isinstance(state, bool):
        dests = [d for d in dests if int(d.state) == int(state)]
    if not flag(props.get(JMQ_SHOW_TEMPORARY), True):
        dests = [d for d in dests if not d.is_temporary]
    order = props.get(JMQ_ORDER_BY) or "name"
    if order == "depth":
        dests.sort(key=lambda d: (-d.msg_count, d.name))
    elif order == "name":
        dests.sort(key=lambda d: (not d.is_queue, d.name))
    else:
        raise AdminError(Status.BAD_REQUEST, f"{JMQ_ORDER_BY} must be name or depth, not {order!r}")
    start = props.get(JMQ_START_INDEX, 0)
    count = props.get(JMQ_MAX_COUNT, -1)
    if not isinstance(start, int) or not isinstance(count, int) or start < 0:
        raise AdminError(
            Status.BAD_REQUEST, f"{JMQ_START_INDEX} must be >= 0 and {JMQ_MAX_COUNT} a number"
        )
    total = len(dests)
    end = total if count < 0 else start + int(count)
    return dests[int(start) : end], total


def get_destinations(conn: ConnectionEngine, props: dict) -> Result:
    router = conn.router
    extra: dict[str, object] = {}
    if isinstance(props.get(JMQ_DESTINATION), str):
        dests = [lookup(conn, props)]
    else:
        dests = listed_by_admin(router)
        if any(p in props for p in LIST_PROPS):
            if flag(props.get(JMQ_HIDE_ADMIN_TEMPORARY), False):
                # The portal's pages: the reply queues of admin tools' connections
                # (the portal's own among them) are plumbing, not the operator's.
                tools = admin_connection_ids(conn.broker)
                dests = [d for d in dests if d.temporary_owner not in tools]
            dests, total = _select_destinations(dests, props)
            extra[JMQ_QUANTITY] = JInt(total)
    delayed = queries.delayed_by_destination(router)
    held = queries.held_in_transactions(router)
    infos = [
        _destination_info(
            d,
            delayed.get((d.name, not d.is_queue), [0, 0]),
            held.get((d.name, not d.is_queue), [0, 0]),
        )
        for d in dests
    ]
    if len(dests) == 1 and isinstance(props.get(JMQ_DESTINATION), str):
        # Ours: the attributes DestinationInfo has no field for, of the one asked for.
        for attr, prop in dattrs.EXTRA_PROPERTIES.items():
            extra[prop] = JInt(dests[0].limit(attr))
    return extra, encode_infos(infos)


def _extra_attributes(props: dict) -> dict[str, object]:
    """Attributes DestinationInfo has no field for, sent as our own properties."""
    out: dict[str, object] = {}
    for attr, prop in dattrs.EXTRA_PROPERTIES.items():
        if prop in props:
            out[attr] = dattrs.convert(attr, props[prop])
    return out


def create_destination(conn: ConnectionEngine, props: dict, body: bytes) -> Result:
    """CREATE_DESTINATION: an admin-created destination (kept across restarts) with the
    attributes the DestinationInfo's update mask names, defaults for the rest."""
    info = read_info(body, "DestinationInfo")
    mask = int(info.get("updateMask") or 0)
    name = info.get("name")
    if not mask & DEST_NAME or not isinstance(name, str) or not name:
        raise AdminError(Status.BAD_REQUEST, "the DestinationInfo names no destination")
    dtype = int(info.get("type") or 0) if mask & DEST_TYPE else 0
    if not dtype & (DEST_QUEUE | DEST_TOPIC):
        dtype |= DEST_QUEUE | int(DestType.FLAVOR_SINGLE)
    is_topic = bool(dtype & DEST_TOPIC)
    if dtype & DEST_TEMP:
        raise AdminError(Status.BAD_REQUEST, "temporary destinations cannot be created here")
    problem = admin_name_problem(name)
    if problem is not None:
        # OpenMQ's admin service answers 500 with B4175 / B4091.
        raise AdminError(Status.ERROR, problem)
    attrs = _requested_attributes(info, props, name, is_topic)
    router = conn.router
    kind = "topic" if is_topic else "queue"
    if router.lookup(name, dtype) is not None:
        raise AdminError(Status.CONFLICT, f"{kind} {name} already exists")
    full = admin_defaults(router.settings, is_topic, dtype)
    full.update(attrs)
    router.create_destination(
        name, DEST_TOPIC if is_topic else DEST_QUEUE, None, auto=False, attributes=full
    )
    log.info("%s %s created by %s: %s", kind, name, conn.user, attrs or "defaults")
    return {}, b""


def _requested_attributes(info: dict, props: dict, name: str, is_topic: bool) -> dict[str, object]:
    """The attributes a CREATE/UPDATE_DESTINATION sets, converted and checked."""
    producers = dattrs.BY_NAME["maxNumProducers"]
    mask = int(info.get("updateMask") or 0)
    if mask & producers.mask and info.get(producers.field) == 0:
        # OpenMQ's words (Destination.setMaxProducers), so the stock imqcmd says the same.
        kind = "Topic" if is_topic else "Queue"
        raise AdminError(
            Status.ERROR, f"[B4178]: Max Producer Count for {name} [{kind}] can not be set to 0"
        )
    attrs = dattrs.attributes_from_info(info)
    attrs.update(_extra_attributes(props))
    _check_applies(attrs, is_topic)
    return attrs


def _check_applies(attrs: dict[str, object], is_topic: bool) -> None:
    wrong = [n for n in attrs if not dattrs.BY_NAME[n].applies(is_topic)]
    if wrong:
        raise AdminError(
            Status.BAD_REQUEST,
            f"{', '.join(wrong)} cannot be set on a {'topic' if is_topic else 'queue'}",
        )


def update_destination(conn: ConnectionEngine, props: dict, body: bytes) -> Result:
    """UPDATE_DESTINATION: the attributes the update mask names, effective now."""
    info = read_info(body, "DestinationInfo")
    name = info.get("name")
    if not isinstance(name, str) or not name:
        raise AdminError(Status.BAD_REQUEST, "the DestinationInfo names no destination")
    is_topic = bool(int(info.get("type") or 0) & DEST_TOPIC)
    dest = conn.router.lookup(name, DEST_TOPIC if is_topic else DEST_QUEUE)
    if dest is None or dest.name in ADMIN_QUEUES:
        raise AdminError(Status.NOT_FOUND, f"{'topic' if is_topic else 'queue'} {name} not found")
    attrs = _requested_attributes(info, props, name, is_topic)
    if not attrs:
        raise AdminError(Status.BAD_REQUEST, f"no attribute of {name} to update")
    conn.router.update_destination(dest, attrs)
    return {}, b""


def purge_destination(conn: ConnectionEngine, props: dict) -> Result:
    dest = lookup(conn, props)
    purged = conn.router.purge(dest)
    log.info("purged %d messages from %s", purged, dest.name)
    return {}, b""


def destroy_destination(conn: ConnectionEngine, props: dict) -> Result:
    dest = lookup(conn, props)
    if dest.name in ADMIN_QUEUES:
        raise AdminError(Status.FORBIDDEN, f"{dest.name} cannot be destroyed")
    conn.router.destroy_destination(dest.name, request_dest_type(props))
    return {}, b""


def compact_destination(conn: ConnectionEngine, props: dict):
    """COMPACT_DESTINATION: reclaim the file store's space now.  The file store is
    one log for every destination, so naming one compacts the lot; the database
    store has nothing to compact."""
    named = lookup(conn, props) if isinstance(props.get(JMQ_DESTINATION), str) else None
    store = conn.broker.store
    if not isinstance(store, FileStore):
        log.info("COMPACT_DESTINATION: the %s needs no compaction", type(store).__name__)
        return {}, b""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def finished(error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    store.compact_soon(finished)

    async def wait() -> Result:
        try:
            await done
        except Exception as exc:
            raise AdminError(Status.ERROR, f"compaction failed: {exc}") from None
        log.info("file store compacted")
        if named is not None:
            conn.router.observers.router_event(
                "destination.compacted", {"name": named.name, "type": named.dest_type}
            )
        return {}, b""

    return wait()
