"""Acknowledgements: what becomes of a delivered message the client answers for.

ACKNOWLEDGE settles a session's delivered messages (or sends them to the DMQ when the
client says they are dead), REDELIVER and a closing consumer or session put them back
at the head of their queues (marked redelivered, unless the application never saw
them), and a message over its destination's maxDeliveryCount goes to the DMQ instead.
Acknowledgements inside a transaction are held by broker/core/transaction_rules.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import dmq
from .errors import now_ms

if TYPE_CHECKING:
    from .context import CoreContext
    from .limits import Limits
    from .message import Entry, EntryQueue
    from .session import Consumer, Session


class Acknowledgements:
    """The acknowledgement rules of one router: over its shared state (``ctx``) and its
    limits' rule for a message given up on."""

    def __init__(self, ctx: CoreContext, limits: Limits) -> None:
        self.ctx = ctx
        self.limits = limits

    def acknowledge(
        self,
        sess: Session,
        blocks: Iterable[tuple[int, bytes]],
        ack_type: int = 0,
        dead_reason: int = 0,
        comment: str | None = None,
        home_gone: list[int] | None = None,
    ) -> int:
        """ACKNOWLEDGE: returns how many blocks named an unacknowledged message.

        JMQAckType 2 (DEAD) sends the messages to the DMQ; 1 (UNDELIVERABLE) removes
        them without one, as OpenMQ does.  A message whose home broker has gone (its
        copy here is inactive) is not acknowledged: its home delivers it again, and the
        consumer's id goes into ``home_gone`` (OpenMQ answers GONE with JMQRemote).
        """
        found = 0
        unacked = sess.unacked
        settle = self.settle
        for key in blocks:
            entry = unacked.pop(key, None)
            if entry is None:
                continue
            if entry.home_gone:
                if home_gone is not None:
                    home_gone.append(key[0])
                continue
            found += 1
            if ack_type == 2:
                reason = dmq.EXPIRED if dead_reason == 1 else dmq.UNDELIVERABLE
                self.limits.dead(entry, reason, comment)
            else:
                settle(entry)
        return found

    def settle(self, entry: Entry) -> None:
        """``entry`` is acknowledged: by its client, by delivery to a NO_ACKNOWLEDGE
        session, by a commit, or by the broker of a remote consumer.  Counted as
        acknowledged on its owner and consumed."""
        entry.owner.stats.acked += 1
        self.ctx.consumed(entry)

    def redeliver(
        self, sess: Session, blocks: Iterable[tuple[int, bytes]], set_redelivered: bool
    ) -> None:
        """REDELIVER (session recover / rollback): back to their queues, in order."""
        entries = []
        for key in blocks:
            entry = sess.unacked.pop(key, None)
            if entry is not None:
                entries.append(entry)
        self.return_unacked(sess, entries, redelivered=set_redelivered)

    def return_unacked(self, sess: Session | None, entries: list[Entry], redelivered: bool) -> None:
        """Put delivered entries back at the head of their queues and dispatch them;
        those over maxDeliveryCount go to the DMQ, those whose queue is gone are settled."""
        ctx = self.ctx
        by_queue: dict[int, tuple[EntryQueue, list[Entry]]] = {}
        for e in entries:
            q = e.queue
            if not q.active:
                ctx.forget(e)
                continue
            limit = e.owner.limit("maxDeliveryCount")
            if 0 < limit <= e.count:
                self.limits.dead(e, dmq.UNDELIVERABLE, f"delivered {e.count} times")
                continue
            if redelivered:
                e.redelivered = True
            by_queue.setdefault(id(q), (q, []))[1].append(e)
        t = now_ms()
        for q, group in by_queue.values():
            q.put_back(group)
            q.dispatch(t)

    def consumer_closed(
        self, cons: Consumer, last_delivered: bytes | None, redeliver_all: bool
    ) -> None:
        """A consumer is gone: with JMQRedeliverAll every message it had not acknowledged
        goes back (redelivered); otherwise those prefetched after ``last_delivered``, the
        last one the application saw, go back as never delivered.  Without either, the
        application saw them all and they stay with the session."""
        sess = cons.session
        mine = [(k, e) for k, e in sess.unacked.items() if k[0] == cons.id]
        if redeliver_all:
            back = mine
        elif last_delivered is not None:
            # Prefetched after the last message the application saw: not really delivered.
            # When that one is no longer held (acknowledged, or acknowledged in a
            # transaction), everything the consumer still holds came after it: all of it
            # goes back, as OpenMQ's detachConsumer does, not when the session closes.
            keys = [k[1] for k, _e in mine]
            if last_delivered in keys:
                back = mine[keys.index(last_delivered) + 1 :]
            else:
                back = mine
        else:
            back = []
        for k, _e in back:
            del sess.unacked[k]
        if back:
            unseen = not redeliver_all
            entries = [e for _k, e in back]
            if unseen:
                for e in entries:
                    e.count -= 1
            self.return_unacked(sess, entries, redelivered=not unseen)


__all__ = ["Acknowledgements"]
