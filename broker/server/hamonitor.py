"""High availability: an enhanced cluster on a shared database store (imq.cluster.ha=true).

Each broker of the cluster (``imq.cluster.clusterid``) keeps its rows in the shared
database under its ``imq.brokerid`` and beats into its StoreOwner row every
``imq.cluster.monitor.interval`` seconds (the store's heartbeat).  :class:`HAMonitor`
looks at the other members' rows at the same interval; one that is running by its row
but has not beaten for ``imq.cluster.monitor.threshold`` intervals has failed, and this
broker tries to take it over (broker/store/takeover.py: one transaction, exactly one
taker, the failed broker fenced).  The taken rows are then added to this broker's router
(broker/core/recovery.py, ``takeover=True``: every message comes back redelivered).

The database work runs in the store's writer thread, in order with the store's batches,
never on the event loop.  (This monitor drives the store's takeover and the router's
recovery, so it lives with the broker process's other services here, above both.)

A broker that was stalled (SIGSTOP, a frozen VM) longer than a heartbeat interval may
have been taken over meanwhile.  Its store cannot write over the taker (fencing), but it
still holds messages in memory and consumers may still be connected to it: a loop timer
notices the stall when the loop runs again (uvloop runs due timers before reading
sockets) and holds every delivery queue until the store confirms the rows are still
this broker's; if they are not, the broker stops without delivering them.  The members operating now are the broker list HELLO_REPLY
gives clients (``JMQBrokerList``), so a client that loses its broker knows where to go.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.db import connections

from broker.core import queries
from broker.core.errors import RouterError
from broker.core.recovery import recover
from broker.models import BrokerState, StoreOwner
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_BROKER_LIST,
    JMQ_CLUSTER_ID,
    JMQ_HA,
    JMQ_STORE_OWNER,
    JMQ_STORE_SESSION,
)
from broker.protocol.types import Status
from broker.store import takeover

if TYPE_CHECKING:
    from broker.core.router import MessageRouter
    from broker.server.paging import Paging
    from broker.store.dbstore import DatabaseStore

log = logging.getLogger("broker.cluster")

# Seconds between the loop timer's ticks that notice a stall of the broker.
STALL_TICK = 0.25


@dataclass
class Takeover:
    """One takeover this broker made (for the log, the admin service and the portal)."""

    broker_id: str
    address: str
    destinations: int
    durables: int
    messages: int
    transactions: int
    # The taken broker's epoch after the takeover: its store sessions below it are ours.
    epoch: int = 0


def store_session(broker_id: str, epoch: int) -> int:
    """HELLO_REPLY's JMQStoreSession: which broker's store, at which epoch, a client's
    messages live in.  Like OpenMQ's store session UID it is unique in the cluster (the
    epoch alone is not: every broker counts its own from 1), and any broker can tell from
    it whose rows it names: the broker id's CRC-32 above, the epoch below."""
    return (_id_crc(broker_id) << 32) | (epoch & 0xFFFF_FFFF)


def _id_crc(broker_id: str) -> int:
    """The upper half of a broker's store sessions (store_session)."""
    return zlib.crc32(broker_id.encode()) & 0x7FFF_FFFF


@dataclass
class Member:
    """A member's row as the last monitor pass read it, and whether it had failed then."""

    row: StoreOwner
    failed: bool


class HAHost(Protocol):
    """What the monitor needs of the broker around it (broker/server/broker.py)."""

    router: MessageRouter
    paging: Paging | None
    # HELLO_REPLY's extra properties, which the monitor keeps up to date.
    hello_properties: dict[str, object]

    def broker_list_changed(self) -> None:
        """The members changed: tell the connected clients (a cluster INFO)."""


class HAMonitor:
    """Watches the HA cluster's heartbeats in the store and takes over failed members."""

    def __init__(
        self,
        broker: HAHost,
        store: DatabaseStore,
        *,
        cluster_id: str,
        interval: float,
        threshold: float,
    ) -> None:
        self.broker = broker
        self.store = store
        self.cluster_id = cluster_id
        self.interval = interval
        self.threshold = threshold
        self.broker_id = store.broker_instance
        self.taken: list[Takeover] = []
        # host:port of the members operating now (this broker first), from the last pass.
        self.members: list[str] = [store.address]
        # Since when the store answered every pass: after the database was away, every
        # member's heartbeat looks old until it beats again, so none is judged failed
        # before a whole threshold of healthy passes.
        self._healthy_since: float | None = time.monotonic()
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick_handle: asyncio.TimerHandle | None = None
        self._last_tick = 0.0
        self._held: list[Any] = []  # delivery queues held after a stall
        # Every member's row by broker id, from the last pass (HELLO's store session).
        self.rows: dict[str, Member] = {}
        # Whether a monitor pass has read them yet (until then no session is known).
        self.rows_read = False
        # A takeover is being made (HELLO answers 408 to a reconnecting HA client).
        self.in_takeover = False
        self._update_hello()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._task = loop.create_task(self._run())
        self._last_tick = loop.time()
        self._tick_handle = loop.call_later(STALL_TICK, self._tick)
        log.info(
            "HA cluster %s: broker %s monitors its members every %.1f s (failed after %g)",
            self.cluster_id,
            self.broker_id,
            self.interval,
            self.threshold,
        )
        self.store.run_in_writer(self._pass)  # the broker list at once

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None

    # -- stalls -------------------------------------------------------------------

    def _tick(self) -> None:
        loop = self._loop
        assert loop is not None
        now = loop.time()
        gap, self._last_tick = now - self._last_tick, now
        self._tick_handle = loop.call_later(STALL_TICK, self._tick)
        if gap > max(self.interval, STALL_TICK * 4) and not self._held and not self.store.lost:
            self._hold(gap)

    def _hold(self, gap: float) -> None:
        """Hold every delivery queue until the store says the rows are still ours."""
        router = self.broker.router
        for dest in queries.destinations(router):
            for q in dest.delivery_queues():
                if not q.paused:
                    q.paused = True
                    self._held.append(q)
        log.warning(
            "broker %s was stalled for %.1f s: deliveries held until the store confirms "
            "it still owns its rows",
            self.broker_id,
            gap,
        )
        self.store.run_in_writer(self._confirm)

    def _confirm(self) -> None:
        """Writer thread: a heartbeat, which finds the rows taken if they were."""
        self.store._beat()
        self._call_on_loop(self._release)

    def _release(self) -> None:
        held, self._held = self._held, []
        if self.store.lost:
            return  # the broker stops (on_lost): nothing of it is delivered
        t = int(time.time() * 1000)
        for q in held:
            q.paused = False
        for q in held:
            q.dispatch(t)
        log.info("broker %s still owns its rows: deliveries resume", self.broker_id)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if self.store.lost:
                return
            self.store.run_in_writer(self._pass)

    # -- writer thread ------------------------------------------------------------

    def _pass(self) -> None:
        """Read the members' rows; take over any that failed."""
        if self.store.lost:
            return
        using = self.store.using
        try:
            rows = takeover.members(self.cluster_id, using=using)
            failed = takeover.failed_peers(
                self.broker_id, self.cluster_id, threshold=self.threshold, using=using
            )
        except Exception as exc:  # the database is away: the next pass tries again
            log.warning("HA monitor: cannot read the cluster's brokers: %s", exc)
            connections[using].close()
            self._healthy_since = None
            return
        if self._healthy_since is None:
            self._healthy_since = time.monotonic()
        if failed and time.monotonic() - self._healthy_since < self.interval * self.threshold:
            log.info(
                "HA monitor: %s look failed, but the database was away until %.1f s ago: "
                "waiting for their heartbeats",
                ", ".join(o.broker_instance for o in failed),
                time.monotonic() - self._healthy_since,
            )
            failed = []
        live = [
            o.address
            for o in rows
            if o.state == StoreOwner.State.RUNNING
            and o.broker_state == BrokerState.OPERATING
            and o not in failed
            and o.broker_instance != self.broker_id
            and o.address
        ]
        failed_ids = {o.broker_instance for o in failed}
        snapshot = {o.broker_instance: Member(o, o.broker_instance in failed_ids) for o in rows}
        self._call_on_loop(self._set_members, [self.store.address, *live], snapshot)
        for row in failed:
            self._try(row)

    def _try(self, row: StoreOwner) -> None:
        using = self.store.using
        if row.state == StoreOwner.State.STOPPED:
            why = "it was shut down for failover"
        elif row.heartbeat is None:
            why = "it has failed: it never beat"
        else:
            why = f"it has failed: its last heartbeat was at {row.heartbeat:%H:%M:%S}"
        log.warning(
            "HA cluster %s: broker %s (%s): %s; taking it over",
            self.cluster_id,
            row.broker_instance,
            row.address,
            why,
        )
        # OpenMQ's HelloHandler answers TIMEOUT while HAMonitorService.inTakeover().
        self.in_takeover = True
        self._call_on_loop(self._tell_takeover, "start", row.broker_instance)
        try:
            taken = takeover.take_over(
                row.broker_instance,
                row.epoch,
                self.broker_id,
                threshold=self.threshold,
                using=using,
            )
        except Exception as exc:  # its row is locked, or the database went away
            self.in_takeover = False
            self._call_on_loop(self._tell_takeover, "fail", row.broker_instance)
            log.warning("takeover of broker %s failed, retried later: %s", row.broker_instance, exc)
            connections[using].close()
            return
        if taken is None:
            self.in_takeover = False
            self._call_on_loop(self._tell_takeover, "fail", row.broker_instance)
            log.info(
                "takeover of broker %s: not needed (another broker took it, or it came back)",
                row.broker_instance,
            )
            return
        self._call_on_loop(self._adopt, taken)

    # -- an administrator's takeover (imqcmd takeover bkr) ---------------------------

    async def take_over_now(self, broker_id: str) -> Takeover:
        """Take ``broker_id`` over now: it must be a member of this cluster that is not
        running (failed, or shut down, also with -nofailover).  RouterError otherwise."""
        # HELLO answers 408 meanwhile, as in the monitor's own takeover (_try).
        self.in_takeover = True
        self._tell_takeover("start", broker_id)
        try:
            taken = await self.store.call_in_writer(lambda: self._forced(broker_id))
        except Exception:
            self.in_takeover = False
            self._tell_takeover("fail", broker_id)
            raise
        return self._adopt(taken)

    def _forced(self, broker_id: str) -> takeover.TakenOver:
        using = self.store.using
        if broker_id == self.broker_id:
            raise RouterError(Status.BAD_REQUEST, "a broker cannot take itself over")
        row = StoreOwner.objects.using(using).filter(broker_instance=broker_id).first()
        if row is None or not row.ha or row.cluster_id != self.cluster_id:
            raise RouterError(
                Status.NOT_FOUND, f"no broker {broker_id} in HA cluster {self.cluster_id}"
            )
        if row.state == StoreOwner.State.RUNNING and not takeover.to_take_over(
            row, threshold=self.threshold
        ):
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"broker {broker_id} is running (it beat at {row.heartbeat:%H:%M:%S}); "
                "only a failed or stopped broker can be taken over",
            )
        log.warning("HA cluster %s: taking over broker %s on request", self.cluster_id, broker_id)
        taken = takeover.take_over(
            broker_id,
            row.epoch,
            self.broker_id,
            threshold=self.threshold,
            using=using,
            stopped_too=True,
        )
        if taken is None:
            raise RouterError(
                Status.CONFLICT, f"broker {broker_id} changed meanwhile (taken or restarted)"
            )
        return taken

    def _call_on_loop(self, fn: Callable[..., object], *args: object) -> None:
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # loop closed during shutdown
                pass

    # -- event loop ---------------------------------------------------------------

    def _tell_takeover(self, what: str, broker_id: str) -> None:
        """A router event (JMX's takeover notifications): ``what`` is start, complete or
        fail of taking ``broker_id`` over."""
        self.broker.router.observers.router_event(
            f"broker.takeover.{what}", {"failed": broker_id, "id": self.broker_id}
        )

    def _set_members(self, members: list[str], rows: dict[str, Member] | None = None) -> None:
        changed = set(members) != set(self.members)
        joined = [a for a in members if a not in self.members]
        left = [a for a in self.members if a not in members]
        self.members = members
        if rows is not None:
            self.rows = rows
            self.rows_read = True
        ids = {m.row.address: bid for bid, m in self.rows.items()}
        for kind, addresses in (("cluster.broker.join", joined), ("cluster.broker.down", left)):
            for address in addresses:
                self.broker.router.observers.router_event(
                    kind, {"address": address, "broker_id": ids.get(address), "ha": True}
                )
        self._update_hello()
        if changed:
            # Clients connected before a member joined or after one left learn the new
            # list now (the stock broker's cluster INFO); an HA client fails over by it.
            self.broker.broker_list_changed()

    def cluster_info(self) -> dict[str, object]:
        """The body of a cluster INFO packet: ``BrokerIDs`` and, per member operating
        now, its ``BrokerID``, ``brokerURL``, ``State`` (2, running), ``StateString`` and
        ``isLocal`` (the layout the stock client reads)."""
        by_address = {m.row.address: bid for bid, m in self.rows.items() if not m.failed}
        by_address[self.store.address] = self.broker_id
        info: dict[str, object] = {}
        for address in self.members:
            bid = by_address.get(address, address)
            info[bid] = {
                "BrokerID": bid,
                "brokerURL": f"mq://{address}/",
                "State": JInt(2),
                "StateString": "OPERATING",
                "isLocal": bid == self.broker_id,
            }
        info["BrokerIDs"] = ",".join(k for k in info)
        return info

    @property
    def session(self) -> int:
        """This broker's JMQStoreSession."""
        return store_session(self.broker_id, self.store.epoch or 0)

    def hello_verdict(
        self, cluster_id: object, session: object
    ) -> tuple[int, dict[str, object], str | None]:
        """HELLO's answer to an HA client that names the cluster and the store session it
        was connected to (JMQClusterID, JMQStoreSession, sent by the stock Java client's
        ProtocolHandler.hello when it reconnects): status, HELLO_REPLY properties, reason.

        As OpenMQ's HelloHandler.handle: another cluster's id is 400; while this broker
        is taking a broker over, 408 (come back later); a session this broker holds (its
        own, or one it took over) is 200; one another broker holds now is 301 with
        JMQStoreOwner (that broker's URL: ReadChannel.checkRedirectStatus makes the client
        reconnect there); one whose broker failed or stopped and is not taken over yet is
        408 (the client waits and tries again: the takeover it waits for).  OpenMQ answers
        404 for a session nobody knows, which strands a Java client (it retries the same
        HELLO forever); this broker lets it in (200) instead, once its first monitor pass
        has read the members (408 before: the session may be one it is about to take
        over).

        So a client reaches this broker with another member's session only once that
        member's rows are in this broker's router (``_adopt`` clears ``in_takeover``
        after ``recover``): its stored messages are in their queues and its prepared
        transactions are found.  Its transactions that were not prepared were never
        stored; broker/engine/transaction_requests.py answers for them."""
        if isinstance(cluster_id, str) and cluster_id and cluster_id != self.cluster_id:
            return (
                Status.BAD_REQUEST,
                {},
                f"cluster id {cluster_id} is not this broker's ({self.cluster_id})",
            )
        if not isinstance(session, int) or isinstance(session, bool):
            return Status.OK, {}, None
        mine: dict[str, object] = {JMQ_STORE_OWNER: f"mq://{self.store.address}/"}
        if session == self.session:
            return Status.OK, {}, None
        if self.in_takeover:
            return Status.TIMEOUT, {}, "a takeover is in progress: reconnect later"
        owner = self._owner(session)
        if owner is None:
            if not self.rows_read:
                # Just started: the session may well be a member's this broker is about to
                # take over, and letting its client in now would show it none of that
                # member's messages and transactions yet.
                return (
                    Status.TIMEOUT,
                    {},
                    "this broker has not read the cluster's members yet: reconnect later",
                )
            return Status.OK, {}, None
        if owner.row.broker_instance == self.broker_id:
            return Status.OK, mine, None
        row = owner.row
        alive = (
            not owner.failed
            and row.state == StoreOwner.State.RUNNING
            and row.broker_state == BrokerState.OPERATING
            and row.address
        )
        if alive and row.heartbeat is not None:
            # The rows are from the last pass: a member that missed a beat since (killed
            # now, noticed in threshold intervals) is in doubt, not somewhere to go.
            from django.utils import timezone

            alive = (timezone.now() - row.heartbeat).total_seconds() < 2 * max(
                row.interval, self.interval
            )
        if alive:
            return (
                Status.MOVED_PERMANENTLY,
                {JMQ_STORE_OWNER: f"mq://{row.address}/"},
                f"store session {session} is broker {row.broker_instance}'s",
            )
        return (
            Status.TIMEOUT,
            {},
            f"broker {row.broker_instance} holding store session {session} is "
            "in doubt or not taken over yet: reconnect later",
        )

    def _owner(self, session: int) -> Member | None:
        """Which member holds the rows of store ``session`` now (None: no member made it)."""
        crc, epoch = session >> 32, session & 0xFFFF_FFFF
        if crc == _id_crc(self.broker_id):
            return Member(_me(self.broker_id), False)  # an earlier run of this broker
        for t in self.taken:
            if _id_crc(t.broker_id) == crc and epoch < t.epoch:
                return Member(_me(self.broker_id), False)
        made = next(
            (m for m in self.rows.values() if _id_crc(m.row.broker_instance) == crc),
            None,
        )
        if made is None:
            return None
        member, seen = made, set()
        # Taken over (maybe the taker too, later): the rows moved along.
        while (
            member.row.taken_over_by
            and member.row.state == StoreOwner.State.STOPPED
            and (member is not made or epoch < member.row.epoch)
            and member.row.broker_instance not in seen
        ):
            seen.add(member.row.broker_instance)
            nxt = self.rows.get(member.row.taken_over_by)
            if nxt is None:
                if member.row.taken_over_by == self.broker_id:
                    return Member(_me(self.broker_id), False)
                return None
            member = nxt
        return member

    def _update_hello(self) -> None:
        """What HELLO_REPLY tells clients in an HA cluster (connect.md)."""
        hello = self.broker.hello_properties
        hello[JMQ_HA] = True
        hello[JMQ_CLUSTER_ID] = self.cluster_id
        hello[JMQ_STORE_SESSION] = JLong(self.session)
        hello[JMQ_BROKER_LIST] = ",".join(f"mq://{a}/" for a in self.members)

    def _adopt(self, taken: takeover.TakenOver) -> Takeover:
        """The taken rows are this broker's now: into the router."""
        counts = recover(self.broker.router, taken.state, takeover=True)
        paging = self.broker.paging
        if paging is not None:  # what it brought into memory past the threshold goes again
            paging.recovered(self.broker.router)
        done = Takeover(
            taken.broker_id,
            taken.address,
            len(taken.state.destinations),
            counts["durables"],
            counts["messages"],
            counts["transactions"],
            taken.epoch,
        )
        self.taken.append(done)
        self.in_takeover = False
        self._tell_takeover("complete", done.broker_id)
        log.warning(
            "took over broker %s (%s): %d destinations, %d durable subscriptions, "
            "%d messages, %d transactions",
            done.broker_id,
            done.address,
            done.destinations,
            done.durables,
            done.messages,
            done.transactions,
        )
        return done


def _me(broker_id: str) -> StoreOwner:
    return StoreOwner(broker_instance=broker_id)


__all__ = ["HAMonitor", "Member", "Takeover", "store_session"]
