"""Limits and what happens to the messages they stop: rejection, eviction, the DMQ,
expiry, and producer flow control.

A send is checked against imq.message.max_size, the destination's maxBytesPerMsg and
its maxNumMsgs / maxTotalMsgBytes with its limitBehavior (REJECT_NEWEST, FLOW_CONTROL,
REMOVE_OLDEST, REMOVE_LOW_PRIORITY), and the broker-wide imq.system.max_count /
max_size.  A message given up on (expired, undeliverable, evicted) goes to the dead
message queue when its destination uses it.  Each outcome is told to the router's
message observers (broker/core/observers.py): that is how the drop log hears of it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.protocol.types import DestState, LimitBehavior, Status

from . import dmq
from .destination import Destination, TopicDestination
from .errors import RouterError, now_ms

if TYPE_CHECKING:
    from .context import CoreContext
    from .dispatch import DeliveryQueue
    from .message import Entry, Message
    from .session import Producer

log = logging.getLogger("broker.router")

# Seconds a producer's unused credit counts against the others' room.  A producer that is
# sending comes back for more within a batch; one that does not (an idle producer holding
# the credit ADD_PRODUCER gave it) must not shrink everybody's room for ever: what it may
# still send is left to the headroom below the limit.
CREDIT_AGE = 2.0


class Limits:
    """The limit, DMQ and flow-control rules of one router, over its shared state."""

    def __init__(self, ctx: CoreContext) -> None:
        self.ctx = ctx
        self.clock = time.monotonic
        self._dmq_box = _LiveDMQ(ctx)

    # -- sends -----------------------------------------------------------------------

    def check_send(self, dest: Destination, msg: Message, internal: bool) -> None:
        """Accept ``msg`` for ``dest`` or raise RouterError with the SEND_REPLY status;
        REMOVE_OLDEST / REMOVE_LOW_PRIORITY make room here.  ``internal`` (the broker's
        own admin replies) passes the broker-wide limits."""
        s = self.ctx.settings
        if s.max_message_size >= 0 and msg.size > s.max_message_size:
            self.reject(dest, msg, "larger than imq.message.max_size")
            raise RouterError(
                Status.ENTITY_TOO_LARGE, f"message of {msg.size} bytes exceeds imq.message.max_size"
            )
        per_msg = dest.send_limits()[1]
        if per_msg >= 0 and msg.size > per_msg:
            self.reject(dest, msg, "larger than maxBytesPerMsg")
            raise RouterError(
                Status.ENTITY_TOO_LARGE,
                f"message of {msg.size} bytes exceeds {dest.name} maxBytesPerMsg",
            )
        if dest.is_full(msg.size):
            behavior = dest.limit_behavior
            if behavior == LimitBehavior.FLOW_CONTROL:
                # Accepted: the producer is slowed instead (its RESUME_FLOW is held).
                pass
            elif behavior == LimitBehavior.REMOVE_OLDEST and self.evict(dest, oldest=True):
                pass
            elif behavior == LimitBehavior.REMOVE_LOW_PRIORITY and self.evict(
                dest, oldest=False, below=msg.priority
            ):
                pass
            else:
                self.reject(
                    dest,
                    msg,
                    f"destination full (maxNumMsgs {dest.limit('maxNumMsgs')}, maxTotalMsgBytes "
                    f"{dest.limit('maxTotalMsgBytes')}, limitBehavior {behavior.name})",
                )
                raise RouterError(Status.RESOURCE_FULL, f"destination {dest.name} is full")
        totals = self.ctx.totals
        if not internal and (
            (s.system_max_count >= 0 and totals.count >= s.system_max_count)
            or (s.system_max_size >= 0 and totals.bytes + msg.size > s.system_max_size)
        ):
            self.reject(dest, msg, "the broker's imq.system.max_count / max_size is reached")
            raise RouterError(Status.RESOURCE_FULL, "the broker's message limit is reached")

    def reject(self, dest: Destination, msg: Message, why: str) -> None:
        """Count a refused message (numRejectedMsgs) and tell the observers."""
        dest.stats.rejected += 1
        fns = self.ctx.events.rejected
        if fns:
            self.ctx.events.notify(fns, dest, msg, why)

    def evict(self, dest: Destination, oldest: bool, below: int = 10) -> bool:
        """Make room by moving one pending entry to the DMQ: the oldest of the lowest
        priority (REMOVE_OLDEST looks at age first, REMOVE_LOW_PRIORITY at priority)."""
        best: tuple[tuple[int, int], DeliveryQueue, int] | None = None
        for q in dest.delivery_queues():
            for prio, bucket in enumerate(q.buckets):
                if not bucket or (not oldest and prio > below):
                    continue
                head = bucket[0]
                rank = (head.msg.timestamp, prio) if oldest else (prio, head.msg.timestamp)
                if best is None or rank < best[0]:
                    best = (rank, q, prio)
        if best is None:
            return False
        _rank, q, prio = best
        entry = q.take_head(prio)
        self.dead(entry, dmq.REMOVED_OLDEST if oldest else dmq.REMOVED_LOW_PRIORITY)
        return True

    # -- the dead message queue -------------------------------------------------------

    def dead(self, entry: Entry, reason: str, comment: str | None = None) -> bool:
        """An entry is given up on: account it out, and keep a copy in the DMQ when the
        destination uses it (useDMQ) and the producer did not say otherwise.  True when
        the copy went to the DMQ."""
        to_dmq = self._to_dmq(entry, reason, comment)
        events = self.ctx.events
        if reason == dmq.EXPIRED:
            if events.expired:
                events.notify(events.expired, entry, to_dmq)
        elif events.dead:
            events.notify(events.dead, entry, reason, to_dmq)
        return to_dmq

    def _to_dmq(self, entry: Entry, reason: str, comment: str | None) -> bool:
        ctx = self.ctx
        owner = entry.owner
        # A copy a cluster peer (its home) delivered here is given up by the home broker
        # (its DMQ, its reports), told why; its owner says useDMQ false here.
        owner.give_up(entry, reason, comment)
        if reason == dmq.EXPIRED:
            owner.stats.expired += 1
        else:
            owner.stats.discarded += 1
        return dmq.keep(
            entry.msg,
            reason,
            comment,
            entry.count,
            source=owner.name,
            attributes=owner.attributes,
            from_dmq=owner is ctx.dmq,
            policy=self._policy(),
            box=self._dmq_box,
            now_ms=now_ms(),
        )

    def keep_in_dmq(
        self, msg: Message, reason: str, comment: str | None, delivery_count: int
    ) -> bool:
        """Put a copy of ``msg`` in the DMQ (its own limits permitting); True if it went."""
        return dmq.keep_copy(
            msg,
            reason,
            comment,
            delivery_count,
            policy=self._policy(),
            box=self._dmq_box,
            now_ms=now_ms(),
        )

    def _policy(self) -> dmq.DeadLetterPolicy:
        s = self.ctx.settings
        return dmq.DeadLetterPolicy(s.broker_name, s.dmq_truncate_body, s.log_dead_messages)

    # -- expiry ---------------------------------------------------------------------

    def reclaim_expired_report(self, now: int | None = None) -> list[tuple[str, bool, int, int]]:
        """Remove expired messages still waiting in every destination, telling per
        destination (name, is_topic, moved to the DMQ, discarded) where any expired."""
        ctx = self.ctx
        t = now_ms() if now is None else now
        report: list[tuple[str, bool, int, int]] = []
        for dest in ctx.each_destination():
            to_dmq = gone = 0
            for q in dest.delivery_queues():
                for e in q.take_expired(t):
                    if dest.drop(e, dmq.EXPIRED):
                        to_dmq += 1
                    else:
                        gone += 1
            if to_dmq or gone:
                report.append((dest.name, isinstance(dest, TopicDestination), to_dmq, gone))
        n = sum(to_dmq + gone for _, _, to_dmq, gone in report)
        if n:
            log.info("reclaimed %d expired message(s)", n)
        return report

    # -- producer flow control ------------------------------------------------------------
    #
    # A producer sends ``credit`` messages, marks the last one (C bit) and waits for a
    # RESUME_FLOW carrying its next credit (JMQSize).  The credit granted is the
    # producer's batch (imq.producer.maxBatch), but never more than the destination has
    # room for below its high-water mark once the credit the other producers still hold
    # is counted.  With no room the producer waits (its RESUME_FLOW is held) until the
    # consumers have drained enough for a useful credit.  So a destination with
    # consumers never reaches its limit because a producer outran them: the producer is
    # slowed to the consumers' rate instead of losing messages.  Where nothing drains
    # the destination (no consumers), REJECT_NEWEST does what it always did at the
    # limit; FLOW_CONTROL holds the producer there whether or not anyone consumes.

    def set_dest_state(self, dest: Destination, state: DestState) -> None:
        """Admin PAUSE/RESUME: consumers-paused queues stop dispatching; producers-paused
        producers are told to stop at once (RESUME_FLOW with JMQSize 0, as OpenMQ's broker
        tells them, not only at the end of their credit) and wait; what is resumed
        dispatches / is released now."""
        was_paused = dest.state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED)
        dest.state = state
        observers = self.ctx.observers
        if observers.router_events:
            kind = "destination.resumed" if state == DestState.RUNNING else "destination.paused"
            observers.router_event(
                kind, {"name": dest.name, "type": dest.dest_type, "state": int(state)}
            )
        paused = state in (DestState.CONSUMERS_PAUSED, DestState.PAUSED)
        t = now_ms()
        for q in dest.delivery_queues():
            q.paused = paused
            if not paused:
                q.dispatch(t)
        if state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED):
            if not was_paused:
                self._pause_producers(dest)
            return
        if dest.waiting_producers:
            self.room(dest)

    def _pause_producers(self, dest: Destination) -> None:
        flow = self.ctx.observers.producer_flow
        waiting = {pid for _link, pid in dest.waiting_producers}
        for prod in list(dest.producers.values()):
            if prod.id in waiting:
                continue  # already told to wait (its credit was used up)
            link = prod.session.link
            dest.waiting_producers.append((link, prod.id))
            prod.granted = 0
            if flow is not None:
                flow.producer_pause(link, prod.id)

    def room(self, dest: Destination) -> None:
        """Give the producers waiting on ``dest`` another look: each gets its credit
        (RESUME_FLOW) if there is room for it now, or waits again."""
        if dest.state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED):
            return  # paused producers wait for the admin's RESUME (set_dest_state)
        waiting, dest.waiting_producers = dest.waiting_producers, []
        dest.resume_count = dest.resume_bytes = -1
        flow = self.ctx.observers.producer_flow
        producers = self.ctx.producers
        if flow is not None:
            for link, pid in waiting:
                if pid in producers:  # not closed meanwhile
                    flow.producer_room(link, pid)

    def producer_credit(self, prod: Producer, link: object) -> int:
        """The credit (JMQSize) to give ``prod`` now: how many messages it may send before
        it waits again, -1 for no limit, or 0 when it must wait; a waiting producer is
        remembered and given its credit by :meth:`room` once the destination drains."""
        dest = prod.destination
        prod.granted = 0  # at a flow-control point the producer has used its credit up
        if dest.state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED):
            return self._wait(dest, link, prod, -1, -1)
        batch = prod.batch if prod.batch > 0 else -1
        behavior = dest.limit_behavior
        max_msgs = dest.limit("maxNumMsgs")
        max_bytes = dest.limit("maxTotalMsgBytes")
        if max_msgs < 0 and max_bytes < 0:
            return batch
        if behavior == LimitBehavior.FLOW_CONTROL:
            high_msgs, high_bytes = max_msgs, max_bytes
        elif behavior == LimitBehavior.REJECT_NEWEST and _drained(dest):
            # Headroom below the limit for messages no credit accounts for (senders
            # without a producer, a subscriber that joins after the credit was given).
            high_msgs = max_msgs - max_msgs // 10 if max_msgs >= 0 else -1
            high_bytes = max_bytes - max_bytes // 10 if max_bytes >= 0 else -1
        else:
            # REMOVE_OLDEST / REMOVE_LOW_PRIORITY chose losing old messages over slowing
            # producers; a REJECT_NEWEST destination nobody drains has its limit.  The
            # credit still counts against the others' room should consumers come.
            prod.granted = max(batch, 0)
            prod.granted_at = self.clock()
            return batch
        fanout = _fanout(dest)
        size = dest.msg_bytes_in // dest.msgs_in if dest.msgs_in else 1024
        size = max(size, 1)
        now = self.clock()
        since = now - CREDIT_AGE
        others = sum(
            p.granted for p in dest.producers.values() if p.granted_at > since and p is not prod
        )
        room = batch if batch > 0 else 1 << 30
        if high_msgs >= 0:
            room = min(room, (high_msgs - dest.msg_count) // fanout - others)
        if high_bytes >= 0:
            room = min(room, (high_bytes - dest.msg_bytes) // (size * fanout) - others)
        # Smaller credits than this cost a round trip for too few messages: wait instead.
        least = max(
            1, min(batch if batch > 0 else 1000, (max_msgs if max_msgs >= 0 else 1000) // 10)
        )
        if room >= least or dest.msg_count == 0:
            # With nothing left to drain, waiting would be for ever (the credit idle
            # producers hold fills the room): this producer gets at least ``least``.
            prod.granted = max(room, least)
            prod.granted_at = now
            return prod.granted
        # Resume once ``least`` fits again (count / bytes at or below these).
        count_at = (high_msgs // fanout - others - least) * fanout if high_msgs >= 0 else 1 << 62
        bytes_at = high_bytes - (others + least) * size * fanout if high_bytes >= 0 else 1 << 62
        return self._wait(dest, link, prod, max(count_at, 0), max(bytes_at, 0))

    @staticmethod
    def _wait(dest: Destination, link: object, prod: Producer, count_at: int, bytes_at: int) -> int:
        if (link, prod.id) not in dest.waiting_producers:  # (a pause already put it there)
            dest.waiting_producers.append((link, prod.id))
        if dest.resume_count < 0 or count_at < 0 or count_at > dest.resume_count:
            dest.resume_count = count_at
        if dest.resume_bytes < 0 or bytes_at < 0 or bytes_at > dest.resume_bytes:
            dest.resume_bytes = bytes_at
        return 0

    def consumers_changed(self, dest: Destination) -> None:
        """A consumer went: producers held for it are looked at again (with nobody left
        to drain a REJECT_NEWEST destination they are no longer held)."""
        if dest.waiting_producers:
            self.room(dest)


def _drained(dest: Destination) -> bool:
    """Whether consumers drain every copy of a message sent to ``dest``."""
    if isinstance(dest, TopicDestination):
        subs = dest.subscriptions
        return bool(subs) and all(s.queue.consumers for s in subs)
    return bool(dest.delivery_queues()[0].consumers)


def _fanout(dest: Destination) -> int:
    """How many entries (copies) one message adds to ``dest`` at most."""
    if isinstance(dest, TopicDestination):
        return max(1, len(dest.subscriptions))
    return 1


class _LiveDMQ:
    """The running broker's DMQ destination as :class:`~broker.core.dmq.DeadLetters`."""

    def __init__(self, ctx: CoreContext) -> None:
        self.ctx = ctx

    def limit(self, name: str, default: int = -1) -> int:
        return self.ctx.dmq.limit(name, default)

    def is_full(self, extra_bytes: int = 0) -> bool:
        return self.ctx.dmq.is_full(extra_bytes)

    def make_way(self) -> bool:
        d = self.ctx.dmq
        old = d.dq.pop_next()
        if old is None:
            return False
        d.account_out(old)
        return True

    def add(self, dead: Message) -> None:
        ctx = self.ctx
        # The copy keeps the original's message id; the store needs a key of its own: a
        # timestamp no message has, the original's source (address and port: the file
        # store packs keys by source, see store/packedmsgs.py) and a number of its own.
        uid = ctx.uids.next().to_bytes(8, "big")
        dead.store_key = b"\xff\xff\xff\xff" + uid[:4] + dead.key[8:28] + uid[4:]
        ctx.dmq.publish(dead, now_ms())


__all__ = ["Limits"]
