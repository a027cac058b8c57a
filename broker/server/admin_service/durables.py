"""Admin requests about durable and shared topic subscriptions (OpenMQ's
GetDurablesHandler, DestroyDurableHandler, PurgeDurableHandler): GET_DURABLES,
DESTROY_DURABLE and PURGE_DURABLE."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from broker.core import queries
from broker.protocol.admin_info import (
    Shared,
    connection_info,
    consumer_info,
    durable_info,
    encode_admin_vector,
)
from broker.protocol.names import JMQ_CLIENT_ID, JMQ_DESTINATION, JMQ_DURABLE_NAME
from broker.protocol.types import DEST_TOPIC, Status

from .common import AdminError, Result, is_openmq4, log

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


# Subscription -> the number GET_DURABLES shows as its uidString (one handler serves
# the process, so one table).
_SUB_UIDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _sub_uid(conn: ConnectionEngine, sub) -> str:
    uid = _SUB_UIDS.get(sub)
    if uid is None:
        uid = _SUB_UIDS[sub] = conn.router.uids.next()
    return str(uid)


def get_durables(conn: ConnectionEngine, props: dict) -> Result:
    """GET_DURABLES: a DurableInfo per durable or shared subscription (optionally of
    one topic, or of one durable name)."""
    topic_name = props.get(JMQ_DESTINATION)
    wanted = props.get(JMQ_DURABLE_NAME)
    infos = []
    only = topic_name if isinstance(topic_name, str) else None
    for topic, sub in queries.subscriptions(conn.router, only):
        durable = sub.durable_key is not None
        if durable:
            client_id, name = sub.durable_key
        elif sub.share == "jms":
            _kind, client_id, name = sub.shared_key
        else:
            client_id, name = sub.shared_key[1], None
        if isinstance(wanted, str) and name != wanted:
            continue
        infos.append(_durable_info(conn, topic, sub, durable, client_id, name))
    return {}, encode_admin_vector(infos)


def _durable_info(conn, topic, sub, durable: bool, client_id, name):
    uid = _sub_uid(conn, sub)
    active = {}
    consumers = queries.subscription_consumers(sub)
    for cons in consumers:
        cid = Shared(str(cons.id))
        active[cid] = consumer_info(
            uidString=cid,
            subuidString=str(uid),
            connection=connection_info(cons.link.id, openmq4=is_openmq4(conn)),
        )
    return durable_info(
        name=name,
        clientID=client_id,
        nMessages=queries.subscription_message_count(sub),
        isActive=bool(consumers),
        isDurable=durable,
        isShared=sub.share is not None,
        isJMSShared=sub.share == "jms",
        activeCount=len(consumers),
        uidString=uid,
        activeConsumers=active,
        consumer=consumer_info(destination=topic.name, type=DEST_TOPIC, selector=sub.selector_text),
    )


def _find_durable(conn: ConnectionEngine, props: dict):
    name = props.get(JMQ_DURABLE_NAME)
    if not isinstance(name, str) or not name:
        raise AdminError(Status.BAD_REQUEST, f"{JMQ_DURABLE_NAME} is missing")
    client_id = props.get(JMQ_CLIENT_ID)
    if client_id is not None and (not isinstance(client_id, str) or not client_id.strip()):
        raise AdminError(Status.BAD_REQUEST, f"bad JMQClientID {client_id!r}")
    sub = queries.find_durable(conn.router, client_id or None, name)
    if sub is not None:
        return sub
    raise AdminError(
        Status.NOT_FOUND,
        f"no durable subscription {name}"
        + (f" for client ID {client_id}" if client_id else " without a client ID"),
    )


def destroy_durable(conn: ConnectionEngine, props: dict) -> Result:
    name = props.get(JMQ_DURABLE_NAME)
    if not isinstance(name, str) or not name:
        raise AdminError(Status.BAD_REQUEST, f"{JMQ_DURABLE_NAME} is missing")
    client_id = props.get(JMQ_CLIENT_ID)
    conn.router.subs.unsubscribe(client_id if isinstance(client_id, str) else None, name)
    return {}, b""


def purge_durable(conn: ConnectionEngine, props: dict) -> Result:
    """PURGE_DURABLE: drop the messages waiting for a durable subscription (those
    delivered and not yet acknowledged stay with their consumer)."""
    sub = _find_durable(conn, props)
    purged = conn.router.purge_subscription(sub)
    log.info("purged %d messages of durable subscription %s", purged, sub.sub_id)
    return {}, b""
