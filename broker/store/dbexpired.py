"""A stopped broker instance's expired messages and its dead message queue, as the
database store holds them: what the expiry job (broker/jobs/dbexpiry.py) reads and
writes, so the store's row format stays the store's.

* :func:`expired_rows` -- the instance's expired messages (read from each row's header
  field, not its body) with what deciding about them takes: their open interests, raw
  packets, their destinations' stored attributes and the durables that exist;
* :func:`remove_messages` -- messages and their interests gone;
* :class:`DeadLetterRows` -- the instance's DMQ rows as the box
  :func:`broker.core.dmq.keep` puts dead copies in (:class:`broker.core.dmq.DeadLetters`).

Called inside :func:`.ownership.held_if_unowned`'s transaction, so no broker owns the
rows meanwhile.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from broker import models as m
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, DMQ_NAME, DestType

from .base import QUEUE_INTEREST

_EXPIRATION = struct.Struct(">q")  # header bytes 12..19: expiration, ms (0: never)
_CHUNK = 500
# DMQ copies made on a stopped instance's rows get keys of their own: the broker's start
# with ff ff ff ff.
_STOPPED_KEY_PREFIX = b"\xff\xff\xff\xfe"
_DMQ_TYPE = DEST_QUEUE | int(DestType.DMQ)  # the DMQ's dest_type, as the broker stores it


def _chunks(items: list, size: int = _CHUNK) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass
class ExpiredRows:
    """An instance's expired messages, oldest first, and what deciding about them takes."""

    # (key, destination, dest_type); none an open transaction acknowledged.
    messages: list[tuple[str, str, int]]
    raw: dict[str, bytes] = field(default_factory=dict)  # key -> the stored packet
    interests: dict[str, dict[str, int]] = field(default_factory=dict)  # -> delivery count
    # (destination, is_topic) -> its stored attributes
    attributes: dict[tuple[str, bool], dict] = field(default_factory=dict)
    durables: set[str] = field(default_factory=set)  # the sub_ids of those that exist


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


def expired_rows(instance: str, now_ms: int, using: str = "default") -> ExpiredRows:
    """The messages of ``instance`` expired at ``now_ms``, leaving out those an open
    (e.g. prepared XA) transaction acknowledged: its outcome decides about them."""
    in_txn = set(
        m.StoredTxnWork.objects.using(using)
        .filter(broker_instance=instance, kind=m.StoredTxnWork.Kind.ACK)
        .values_list("key", flat=True)
    )
    rows = ExpiredRows([e for e in _expired_keys(instance, now_ms, using) if e[0] not in in_txn])
    if not rows.messages:
        return rows
    rows.attributes = {
        (name, bool(dest_type & DEST_TOPIC)): attrs
        for name, dest_type, attrs in m.StoredDestination.objects.using(using)
        .filter(broker_instance=instance)
        .values_list("name", "dest_type", "attributes")
    }
    rows.durables = set(
        m.StoredDurable.objects.using(using)
        .filter(broker_instance=instance)
        .values_list("sub_id", flat=True)
    )
    keys = [key for key, _, _ in rows.messages]
    for part in _chunks(keys):
        for key, interest, count in (
            m.StoredInterest.objects.using(using)
            .filter(broker_instance=instance, key__in=part)
            .values_list("key", "interest", "delivery_count")
        ):
            rows.interests.setdefault(key, {})[interest] = count
        for key, raw in (
            m.StoredMessage.objects.using(using)
            .filter(broker_instance=instance, key__in=part)
            .values_list("key", "raw")
        ):
            rows.raw[key] = bytes(raw)
    return rows


def remove_messages(instance: str, keys: list[str], using: str = "default") -> None:
    """The messages ``keys`` of ``instance`` and their interests gone."""
    inst, db = instance, using
    for part in _chunks(keys):
        m.StoredInterest.objects.using(db).filter(broker_instance=inst, key__in=part).delete()
        m.StoredMessage.objects.using(db).filter(broker_instance=inst, key__in=part).delete()


class DeadLetterRows:
    """The instance's DMQ rows and the copies to add, as :class:`broker.core.dmq.DeadLetters`
    (the limits themselves are applied by :func:`broker.core.dmq.keep`); nothing is
    written before :meth:`write`.  ``limit(name, default)``: the DMQ's attribute as a
    number, as the broker reads it."""

    def __init__(self, instance: str, limit: Callable[[str, int], int], using: str) -> None:
        self.instance = instance
        self.using = using
        self._limit = limit
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
            self.held: deque[tuple[str, int, Any]] = deque(
                (key, size, None) for key, size in cursor.fetchall()
            )
        self.bytes = sum(size for _, size, _ in self.held)
        self.evicted: list[str] = []

    def limit(self, name: str, default: int = -1) -> int:
        return self._limit(name, default)

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

    def add(self, dead: Any) -> None:
        """Keep ``dead`` (a :class:`broker.core.message.Message`: its key, size, raw)."""
        key = (_STOPPED_KEY_PREFIX + os.urandom(8) + dead.key[12:]).hex()
        self.held.append((key, dead.size, dead))
        self.bytes += dead.size

    def write(self) -> None:
        """The copies kept stored, those made way for removed."""
        inst, db = self.instance, self.using
        remove_messages(inst, self.evicted, db)
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


__all__ = ["DeadLetterRows", "ExpiredRows", "expired_rows", "remove_messages"]
