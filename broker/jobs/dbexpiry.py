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

The rows are the database store's (:mod:`broker.store.dbexpired`: the expired rows, the
DMQ box); this module only composes them with the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker import models as m
from broker.core import dmq
from broker.core.destination import attribute_limit
from broker.core.message import Message
from broker.protocol.packet import parse_packet
from broker.protocol.types import DEST_TOPIC, DMQ_NAME
from broker.store.base import QUEUE_INTEREST
from broker.store.dbexpired import DeadLetterRows, expired_rows, remove_messages


@dataclass
class Reclaimed:
    """Per destination: expired messages moved to the DMQ and discarded."""

    destination: str
    is_topic: bool
    to_dmq: int = 0
    discarded: int = 0


def reclaim_expired_rows(
    owner: m.StoreOwner, *, now_ms: int, using: str = "default"
) -> list[Reclaimed]:
    """Reclaim the expired messages of ``owner``'s instance (its row held by the
    caller's transaction); per destination, what went where."""
    inst = owner.broker_instance
    rows = expired_rows(inst, now_ms, using)
    if not rows.messages:
        return []
    dmq_attrs = dict(dmq.DMQ_DEFAULTS)
    dmq_attrs.update(rows.attributes.get((DMQ_NAME, False)) or {})
    dead_letters = DeadLetterRows(
        inst, lambda name, default: attribute_limit(dmq_attrs, name, default), using
    )
    # What only the broker's configuration says (truncateBody, logDeadMsgs) is taken at
    # its default: the job does not read the instance's configuration.
    policy = dmq.DeadLetterPolicy(owner.address or inst)
    report: dict[tuple[str, bool], Reclaimed] = {}
    gone: list[str] = []
    for key, destination, dest_type in rows.messages:
        is_topic = bool(dest_type & DEST_TOPIC)
        open_ = rows.interests.get(key, {})
        if is_topic:
            # An interest of a durable that is gone is settled by the broker at start
            # without a DMQ copy: not a dead message.
            live = {i: n for i, n in open_.items() if i in rows.durables}
        else:
            live = {i: n for i, n in open_.items() if i == QUEUE_INTEREST}
        if not live:
            continue
        msg = Message(parse_packet(rows.raw[key]), destination, 0)
        if not msg.is_expired(now_ms):  # the header field read above, parsed properly
            continue
        gone.append(key)
        row = report.setdefault((destination, is_topic), Reclaimed(destination, is_topic))
        attrs = rows.attributes.get((destination, is_topic)) or {}
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
    remove_messages(inst, gone, using)
    dead_letters.write()
    return [r for r in report.values() if r.to_dmq or r.discarded]


__all__ = ["Reclaimed", "reclaim_expired_rows"]
