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
from typing import TYPE_CHECKING

from broker.protocol.types import DestState, LimitBehavior, Status

from . import dmq
from .destination import Destination, TopicDestination
from .errors import RouterError, now_ms

if TYPE_CHECKING:
    from .message import Entry, Message
    from .router import MessageRouter

log = logging.getLogger("broker.router")


class Limits:
    """The limit, DMQ and flow-control rules of one router."""

    def __init__(self, router: MessageRouter) -> None:
        self.router = router

    # -- sends -----------------------------------------------------------------------

    def check_send(self, dest: Destination, msg: Message, internal: bool) -> None:
        """Accept ``msg`` for ``dest`` or raise RouterError with the SEND_REPLY status;
        REMOVE_OLDEST / REMOVE_LOW_PRIORITY make room here.  ``internal`` (the broker's
        own admin replies) passes the broker-wide limits."""
        s = self.router.settings
        if s.max_message_size >= 0 and msg.size > s.max_message_size:
            self.reject(dest, msg, "larger than imq.message.max_size")
            raise RouterError(
                Status.ENTITY_TOO_LARGE, f"message of {msg.size} bytes exceeds imq.message.max_size"
            )
        per_msg = dest.limit("maxBytesPerMsg")
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
        totals = self.router.totals
        if not internal and (
            (s.system_max_count >= 0 and totals.count >= s.system_max_count)
            or (s.system_max_size >= 0 and totals.bytes + msg.size > s.system_max_size)
        ):
            self.reject(dest, msg, "the broker's imq.system.max_count / max_size is reached")
            raise RouterError(Status.RESOURCE_FULL, "the broker's message limit is reached")

    def reject(self, dest: Destination, msg: Message, why: str) -> None:
        """Count a refused message (numRejectedMsgs) and tell the observers."""
        dest.stats.rejected += 1
        fns = self.router.events.rejected
        if fns:
            self.router.events.notify(fns, dest, msg, why)

    def evict(self, dest: Destination, oldest: bool, below: int = 10) -> bool:
        """Make room by moving one pending entry to the DMQ: the oldest of the lowest
        priority (REMOVE_OLDEST looks at age first, REMOVE_LOW_PRIORITY at priority)."""
        best: tuple[tuple[int, int], object, int] | None = None
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
        entry = q.buckets[prio].popleft()  # type: ignore[attr-defined]
        q.count -= 1  # type: ignore[attr-defined]
        q.bytes -= entry.msg.size  # type: ignore[attr-defined]
        self.dead(entry, dmq.REMOVED_OLDEST if oldest else dmq.REMOVED_LOW_PRIORITY)
        return True

    # -- the dead message queue -------------------------------------------------------

    def dead(self, entry: Entry, reason: str, comment: str | None = None) -> bool:
        """An entry is given up on: account it out, and keep a copy in the DMQ when the
        destination uses it (useDMQ) and the producer did not say otherwise.  True when
        the copy went to the DMQ."""
        to_dmq = self._to_dmq(entry, reason, comment)
        events = self.router.events
        if reason == dmq.EXPIRED:
            if events.expired:
                events.notify(events.expired, entry, to_dmq)
        elif events.dead:
            events.notify(events.dead, entry, reason, to_dmq)
        return to_dmq

    def _to_dmq(self, entry: Entry, reason: str, comment: str | None) -> bool:
        router = self.router
        owner = entry.owner
        give_up = getattr(owner, "give_up", None)
        if give_up is not None:
            # A copy a cluster peer (its home) delivered here: the home broker gives it up
            # (its DMQ, its reports), told why.
            give_up(entry, reason, comment)
        else:
            owner.account_out(entry)  # type: ignore[attr-defined]
        if reason == dmq.EXPIRED:
            owner.stats.expired += 1  # type: ignore[attr-defined]
        else:
            owner.stats.discarded += 1  # type: ignore[attr-defined]
        if owner is router.dmq or not owner.attributes.get("useDMQ", True):  # type: ignore[attr-defined]
            log.debug("message %s discarded (%s)", entry.msg.message_id, reason)
            return False
        settings = router.settings
        if settings.log_dead_messages or entry.msg.selector_values().get(
            "JMS_SUN_LOG_DEAD_MESSAGES"
        ):
            log.info(
                "dead message %s from %s: %s%s",
                entry.msg.message_id,
                owner.name,  # type: ignore[attr-defined]
                reason,
                f" ({comment})" if comment else "",
            )
        if not dmq.preserve(entry.msg, reason):
            return False
        return self.keep_in_dmq(entry.msg, reason, comment, entry.count)

    def keep_in_dmq(
        self, msg: Message, reason: str, comment: str | None, delivery_count: int
    ) -> bool:
        """Put a copy of ``msg`` in the DMQ (its own limits permitting); True if it went."""
        router = self.router
        settings = router.settings
        t = now_ms()
        dead = dmq.dead_message(
            msg,
            reason,
            now_ms=t,
            broker=settings.broker_name,
            delivery_count=delivery_count,
            comment=comment,
            truncate_body=settings.dmq_truncate_body,
        )
        d = router.dmq
        per_msg = d.limit("maxBytesPerMsg")
        if per_msg >= 0 and dead.size > per_msg:
            log.info("message %s too large for the DMQ, discarded", msg.message_id)
            return False
        while d.is_full(dead.size):
            # The DMQ's own limit behaviour: its oldest message makes way (and is gone).
            if not d.dq.count:
                log.info("DMQ full, message %s discarded", msg.message_id)
                return False
            old = d.dq._pop()
            assert old is not None
            d.account_out(old)
        # The copy keeps the original's message id; the store needs a key of its own.
        dead.store_key = b"\xff\xff\xff\xff" + router.uids.next().to_bytes(8, "big") + dead.key[12:]
        d.publish(dead, t)
        return True

    # -- expiry ---------------------------------------------------------------------

    def reclaim_expired_report(self, now: int | None = None) -> list[tuple[str, bool, int, int]]:
        """Remove expired messages still waiting in every destination, telling per
        destination (name, is_topic, moved to the DMQ, discarded) where any expired."""
        router = self.router
        t = now_ms() if now is None else now
        report: list[tuple[str, bool, int, int]] = []
        for dest in [*router.queues.values(), *router.topics.values()]:
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

    def set_dest_state(self, dest: Destination, state: DestState) -> None:
        """Admin PAUSE/RESUME: consumers-paused queues stop dispatching, producers-paused
        producers get no RESUME_FLOW; what is resumed dispatches / is released now."""
        dest.state = state
        paused = state in (DestState.CONSUMERS_PAUSED, DestState.PAUSED)
        t = now_ms()
        for q in dest.delivery_queues():
            q.paused = paused
            if not paused:
                q.dispatch(t)
        if state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED) or not dest.waiting_producers:
            return
        if dest.limit_behavior != LimitBehavior.FLOW_CONTROL or not dest.is_full():
            self.room(dest)

    def room(self, dest: Destination) -> None:
        """``dest`` has room again: release the producers waiting for it."""
        if dest.state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED):
            return  # paused producers wait for the admin's RESUME (set_dest_state)
        waiting, dest.waiting_producers = dest.waiting_producers, []
        hook = self.router.on_producer_room
        if hook is not None:
            for link, pid in waiting:
                hook(link, pid)

    @staticmethod
    def hold_producer(dest: Destination, link: object, producer_id: int) -> bool:
        """FLOW_CONTROL: True (and remembered) when the producer must wait for room.

        Also True while an admin has paused the destination's producers: their
        RESUME_FLOW is withheld until the RESUME."""
        if dest.state in (DestState.PRODUCERS_PAUSED, DestState.PAUSED):
            dest.waiting_producers.append((link, producer_id))
            return True
        if dest.limit_behavior != LimitBehavior.FLOW_CONTROL or not dest.is_full():
            return False
        dest.waiting_producers.append((link, producer_id))
        return True


__all__ = ["Limits"]
