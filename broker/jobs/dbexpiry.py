"""Expired messages of a stopped broker, reclaimed in its database-store rows.

Called by the expiry job inside :func:`broker.store.ownership.held_if_unowned`'s
transaction, so no broker owns the rows meanwhile.  It does to the rows what the broker's
own sweep (``Limits.reclaim_expired_report``) would have done at its next start: each
open interest of an expired message is settled, and where the destination uses the DMQ
(``useDMQ``, default true) and the producer did not set
``JMS_SUN_PRESERVE_UNDELIVERED=false``, a copy with the ``JMS_SUN_DMQ_*`` properties
is stored in that instance's DMQ, within the DMQ's limits (its oldest messages make
way): the broker's own rule, :func:`broker.core.dmq.keep`, applied to the rows.

Left alone: messages an open (e.g. prepared XA) transaction acknowledged, as the
transaction's outcome decides about them; and what only the broker's configuration knows
(``imq.destination.DMQ.truncateBody``, a non-default
``imq.autocreate.destination.useDMQ`` for destinations whose stored attributes do not
say) is taken at its default.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass

from django.db import connections

from broker import models as m
from broker.core import dmq
from broker.core.destination import attribute_limit
from broker.core.message import Message
from broker.protocol.packet import parse_packet
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, DMQ_NAME, DestType
from broker.store.base import QUEUE_INTEREST

_EXPIRATION = struct.Struct(">q")  # header bytes 12..19: expiration, ms (0: never)
_CHUNK = 500
# DMQ copies the job makes get keys of their own: the broker's start with ff ff ff ff.
_JOB_KEY_PREFIX = b"\xff\xff\xff\xfe"
_DMQ_TYPE = DEST_QUEUE | int(DestType.DMQ)  # the DMQ's dest_type, as the broker stores it


@dataclass
class Reclaimed:
    """Per destination: expired messages moved to the DMQ and discarded."""

    destination: str
    is_topic: bool
    to_dmq: int = 0
    discarded: int = 0


def _chunks(items: list, size: int = _CHUNK):
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _expired_keys(instance: str, now_ms: int, using: str) -> list[tuple[str, str, int]]:
    """(key, destination, dest_type) of the instance's expired messages, reading only
    each message's header field, not its body."""
    conn = connections[using]
    table = conn.ops.quote_name(m.StoredMessage._meta.db_table)
    out = []
    with conn.cursor() as cursor:
        cursor.execute(
            f"SELECT key, destination, dest_type, substr(raw, 13, 8) FROM {table}"
            " WHERE broker_instance = %s ORDER BY id",
            [instance],
        )
        while rows := cursor.fetchmany(2000):
            for key, destination, dest_type, head in rows:
                head = bytes(head)
                if len(head) == 8 and 0 < _EXPIRATION.unpack(head)[0] <= now_ms:
                    out.append((key, destination, dest_type))
    return out


def reclaim_expired_rows(
    owner: m.StoreOwner, *, now_ms: int, using: str = "default"
) -> list[Reclaimed]:
    """Reclaim the expired messages of ``owner``'s instance (its row held by the
    caller's transaction); per destination, what went where."""
    inst = owner.broker_instance
    in_txn = set(
        m.StoredTxnWork.objects.using(using)
        .filter(broker_instance=inst, kind=m.StoredTxnWork.Kind.ACK)
        .values_list("key", flat=True)
    )
    expired = [e for e in _expired_keys(inst, now_ms, using) if e[0] not in in_txn]
    if not expired:
        return []
    attributes = {
        (name, bool(dest_type & DEST_TOPIC)): attrs
        for name, dest_type, attrs in m.StoredDestination.objects.using(using)
        .filter(broker_instance=inst)
        .values_list("name", "dest_type", "attributes")
    }
    durables = set(
        m.StoredDurable.objects.using(using)
        .filter(broker_instance=inst)
        .values_list("sub_id", flat=True)
    )
    interests: dict[str, dict[str, int]] = {}
    raws: dict[str, bytes] = {}
    keys = [key for key, _, _ in expired]
    for part in _chunks(keys):
        for key, interest, count in (
            m.StoredInterest.objects.using(using)
            .filter(broker_instance=inst, key__in=part)
            .values_list("key", "interest", "delivery_count")
        ):
            interests.setdefault(key, {})[interest] = count
        for key, raw in (
            m.StoredMessage.objects.using(using)
            .filter(broker_instance=inst, key__in=part)
            .values_list("key", "raw")
        ):
            raws[key] = bytes(raw)

    dmq_attrs = dict(dmq.DMQ_DEFAULTS)
    dmq_attrs.update(attributes.get((DMQ_NAME, False)) or {})
    dead_letters = _DeadLetterBox(inst, dmq_attrs, using)
    # What only the broker's configuration says (truncateBody, logDeadMsgs) is taken at
    # its default: the job does not read the instance's configuration.
    policy = dmq.DeadLetterPolicy(owner.address or inst)
    report: dict[tuple[str, bool], Reclaimed] = {}
    gone: list[str] = []
    for key, destination, dest_type in expired:
        is_topic = bool(dest_type & DEST_TOPIC)
        open_ = interests.get(key, {})
        if is_topic:
            # An interest of a durable that is gone is settled by the broker at start
            # without a DMQ copy: not a dead message.
            live = {i: n for i, n in open_.items() if i in durables}
        else:
            live = {i: n for i, n in open_.items() if i == QUEUE_INTEREST}
        if not live:
            continue
        msg = Message(parse_packet(raws[key]), destination, 0)
        if not msg.is_expired(now_ms):  # the header field read above, parsed properly
            continue
        gone.append(key)
        row = report.setdefault((destination, is_topic), Reclaimed(destination, is_topic))
        attrs = attributes.get((destination, is_topic)) or {}
        for count in live.values():
            # The live broker's rule (broker/core/dmq.py keep), on the rows.
            kept = dmq.keep(
                msg, dmq.EXPIRED, None, count,
                source=destination, attributes=attrs,
                from_dmq=destination == DMQ_NAME,
                policy=policy, box=dead_letters, now_ms=now_ms,
            )  # fmt: skip
            if kept:
                row.to_dmq += 1
            else:
                row.discarded += 1
    for part in _chunks(gone):
        m.StoredInterest.objects.using(using).filter(broker_instance=inst, key__in=part).delete()
        m.StoredMessage.objects.using(using).filter(broker_instance=inst, key__in=part).delete()
    dead_letters.write()
    return [r for r in report.values() if r.to_dmq or r.discarded]


class _DeadLetterBox:
    """The instance's DMQ rows and the copies to add, as :class:`broker.core.dmq.DeadLetters`
    (the limits themselves are applied by :func:`broker.core.dmq.keep`)."""

    def __init__(self, instance: str, attributes: dict, using: str) -> None:
        self.instance = instance
        self.using = using
        self.attributes = attributes
        self.max_count = self.limit("maxNumMsgs")
        self.max_bytes = self.limit("maxTotalMsgBytes")
        conn = connections[using]
        table = conn.ops.quote_name(m.StoredMessage._meta.db_table)
        with conn.cursor() as cursor:
            cursor.execute(
                f"SELECT key, length(raw) FROM {table} WHERE broker_instance = %s"
                " AND destination = %s ORDER BY id",
                [instance, DMQ_NAME],
            )
            # (key, size, the copy if it is new), oldest first.
            self.held: deque[tuple[str, int, Message | None]] = deque(
                (key, size, None) for key, size in cursor.fetchall()
            )
        self.bytes = sum(size for _, size, _ in self.held)
        self.evicted: list[str] = []

    def limit(self, name: str, default: int = -1) -> int:
        return attribute_limit(self.attributes, name, default)

    def is_full(self, extra_bytes: int = 0) -> bool:
        return (self.max_count >= 0 and len(self.held) >= self.max_count) or (
            self.max_bytes >= 0 and self.bytes + extra_bytes > self.max_bytes
        )

    def make_way(self) -> bool:
        if not self.held:
            return False
        key, size, new = self.held.popleft()
        self.bytes -= size
        if new is None:
            self.evicted.append(key)
        return True

    def add(self, dead: Message) -> None:
        key = (_JOB_KEY_PREFIX + os.urandom(8) + dead.key[12:]).hex()
        self.held.append((key, dead.size, dead))
        self.bytes += dead.size

    def write(self) -> None:
        inst, db = self.instance, self.using
        for part in _chunks(self.evicted):
            m.StoredInterest.objects.using(db).filter(broker_instance=inst, key__in=part).delete()
            m.StoredMessage.objects.using(db).filter(broker_instance=inst, key__in=part).delete()
        new = [(key, dead) for key, _, dead in self.held if dead is not None]
        # Plain multi-row INSERTs, as the store writes them: the ORM's bulk_create cost
        # more than the database here.
        conn = connections[db]
        msg_t = conn.ops.quote_name(m.StoredMessage._meta.db_table)
        int_t = conn.ops.quote_name(m.StoredInterest._meta.db_table)
        with conn.cursor() as cursor:
            for part in _chunks(new):
                args: list[object] = []
                for key, dead in part:
                    args += (inst, key, DMQ_NAME, _DMQ_TYPE, bytes(dead.raw))
                cursor.execute(
                    f"INSERT INTO {msg_t} (broker_instance, key, destination, dest_type, raw)"
                    f" VALUES {', '.join(['(%s, %s, %s, %s, %s)'] * len(part))}",
                    args,
                )
                args = []
                for key, _ in part:
                    args += (inst, key, QUEUE_INTEREST, 0)
                cursor.execute(
                    f"INSERT INTO {int_t} (broker_instance, key, interest, delivery_count)"
                    f" VALUES {', '.join(['(%s, %s, %s, %s)'] * len(part))}",
                    args,
                )


__all__ = ["Reclaimed", "reclaim_expired_rows"]
