"""The cluster service: this broker's links to the others and what travels on them.

:class:`ClusterService` listens on the cluster port (published in the port mapper as
``cluster tcp CLUSTER``), dials the peers of ``imq.cluster.brokerlist`` it is the
initiator for (the lower ``host:port`` of a pair dials; both accept), and keeps
re-dialling a peer that is down -- this broker serves its own clients meanwhile.

Over an up link it announces local consumers (G_NEW_INTEREST, G_INTEREST_UPDATE),
forwards messages to remote consumers (G_MESSAGE_DATA, see remote_delivery.py), carries the
acknowledgements home (G_MESSAGE_ACK), answers PING, says GOODBYE when it stops, and
tells a peer that left cleanly from one that crashed.

The service is assembled from parts that each own their state and register the packets
they handle (handlers.py): :class:`~.peers.Peers` (who may link, dialling, keeping links
alive, broadcast, the master broker's link, reload), :class:`~.interests.LocalInterests`
(what the others hear of local consumers), :class:`~.delivery.RemoteDelivery` (the
peers' consumers here, messages both ways, acknowledgements, flow control),
:class:`~.changes.ConfigChanges` (destinations, durables and the master broker's change
record), :class:`~.remote_transactions.RemoteTransactions` (two-phase acknowledgements) and
:class:`~.locks.ClusterLocks` with the queue positions it guards.  This module builds
them, joins their packet tables, and says in which order they hear of a link coming up
or going.  A link's own protocol is :mod:`.linkengine`'s.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING

from broker.protocol import gpacket as gp

from .changes import ConfigChanges
from .config import ClusterConfig, same_host
from .delivery import RemoteDelivery
from .handlers import Handler, Handlers, join
from .interests import LocalInterests
from .link_driver import BrokerLink
from .locks import ClusterLocks
from .mastership import MasterChange
from .peers import Peers
from .positions import QueuePositions
from .remote_delivery import RemoteConsumers
from .remote_transactions import RemoteTransactions

if TYPE_CHECKING:
    from broker.core.router import MessageRouter
    from broker.core.transaction_record import Transaction

log = logging.getLogger("broker.cluster")

# Requests answered with status 200 once handled, when the sender sets the A bit
# (OpenMQ's reply to these is the next type with a status alone).
_STATUS_REPLIES = frozenset(
    {
        gp.G_MESSAGE_DATA,
        gp.G_NEW_INTEREST,
        gp.G_REM_DURABLE_INTEREST,
        gp.G_INTEREST_UPDATE,
        gp.G_CLIENT_CLOSED,
        gp.G_DURABLE_ATTACH,
    }
)


def _answered(handler: Handler) -> Handler:
    def handle(link: BrokerLink, pkt: gp.GPacket) -> None:
        handler(link, pkt)
        if pkt.wants_reply and not link.closed:
            link.send(gp.GPacket(pkt.type + 1, {"S": 200}))

    return handle


class ClusterService:
    """One broker's membership of a conventional cluster."""

    def __init__(
        self,
        cfg: ClusterConfig,
        router: MessageRouter,
        session_id: int,
        instance_dir: Path | None = None,
        *,
        server_ssl: ssl.SSLContext | None = None,
        client_ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.cfg = cfg
        self.router = router
        self.peers = Peers(
            cfg, session_id, self.new_link, server_ssl=server_ssl, client_ssl=client_ssl
        )
        self.locks = ClusterLocks(self.peers, router.subs, cfg.lock_timeout)
        self.interests = LocalInterests(router, self.peers)
        consumers = RemoteConsumers()
        self.txns = RemoteTransactions(router, self.peers, consumers)
        self.delivery = RemoteDelivery(router, self.peers, self.interests, consumers, self.txns)
        self.changes = ConfigChanges(
            cfg, router, self.peers, self.interests, self.delivery, instance_dir
        )
        self.mastership = MasterChange(cfg, self.peers, self.changes, instance_dir)
        self.positions = QueuePositions(router, self.locks, self.interests.announce_position)
        tables: list[Handlers] = [
            self.peers.handlers(),
            self.delivery.handlers(),
            self.changes.handlers(),
            self.mastership.handlers(),
            self.txns.handlers(),
            self.locks.handlers(),
        ]
        self._handlers = {
            t: _answered(h) if t in _STATUS_REPLIES else h for t, h in join(*tables).items()
        }
        assert _STATUS_REPLIES <= self._handlers.keys()

    # -- a link comes and goes ----------------------------------------------------------

    def new_link(
        self, expected: tuple[str, int] | None = None, expected_instance: str | None = None
    ) -> BrokerLink:
        """A link this broker dials (``expected``: the peer it looked up) or accepts."""
        return BrokerLink(self, expected, expected_instance)

    def link_up(self, link: BrokerLink) -> None:
        old = self.peers.replaced(link)
        if old is not None:
            # A dropped link is closed at once, but its connection_lost can come after
            # the peer's redial is up: what it brought goes now, before the new link's
            # interests arrive.  A remote consumer left attached would hold its durable
            # subscription "in use" (refusing the peer's consumer as it comes back) and
            # draw messages into a dead link.
            self.delivery.forget_link(old)
        self.peers.add(link)
        if old is None:  # (a redial of a broker already linked is no join)
            self._tell_peer("cluster.broker.join", link.address)
        self.changes.send_destinations(link)
        self.interests.announce_all(link)
        self.locks.link_up(link)
        self.txns.link_up(link)
        self.delivery.tell_flow(link)
        self.changes.ask_master(link)

    def link_closed(self, link: BrokerLink) -> None:
        self.txns.prepares_link_down(link)
        # What came over this link goes with it even when a newer link to the same broker
        # already took its place (see link_up).
        self.delivery.forget_link(link)
        self.locks.link_down(link)
        # The broker is down for this one when its current link goes (not a replaced one).
        down = link.address is not None and self.peers.links.get(link.address) is link
        self.peers.closed(link)
        if down and not self.peers.stopping:
            self._tell_peer("cluster.broker.down", link.address)

    def _tell_peer(self, kind: str, addr: gp.BrokerAddress | None) -> None:
        """A router event (JMX's cluster notifications) for a peer joining or leaving."""
        if addr is None or not self.router.observers.router_events:
            return
        master = self.cfg.master
        self.router.observers.router_event(
            kind,
            {
                "address": f"{addr.host}:{addr.port}",
                "instance": addr.instance,
                "master": master is not None
                and addr.port == master[1]
                and same_host(addr.host, master[0]),
            },
        )

    def on_packet(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """A GPacket from an up link, to the part that handles its type."""
        handler = self._handlers.get(pkt.type)
        if handler is not None:
            handler(link, pkt)
        elif pkt.wants_reply and pkt.type + 1 in gp.KNOWN_TYPES:
            link.send(
                gp.GPacket(pkt.type + 1, {"S": 501, "reason": f"{pkt.name} is not supported here"})
            )
        else:
            # (A request whose type has no reply type in OpenMQ's table, such as
            # G_REPLICATION_GROUP_INFO 55, gets none: 56 is no packet type.)
            log.debug("cluster packet %s from %s ignored", pkt.name, link.describe())

    # -- what a link asks of the service (link_driver.py) --------------------------------

    def link_init(self) -> gp.LinkInit:
        return self.peers.link_init(master_here=self.changes.record is not None)

    def broker_info(self) -> bytes:
        return self.peers.broker_info()

    def check_peer(self, link: BrokerLink, init: gp.LinkInit) -> None:
        self.peers.check_peer(link, init)

    def address_props(self) -> dict[str, object]:
        return self.peers.address_props()

    # -- life cycle ------------------------------------------------------------------

    async def start(self) -> None:
        await self.peers.listen()
        router = self.router
        # (In this order: a new durable subscription is recorded before the others
        # hear of its consumer.)
        observers = router.observers
        observers.add_consumer_observer(self.changes)
        observers.add_consumer_observer(self.delivery)
        observers.add_consumer_observer(self.interests)
        observers.add_router_event_observer(self.changes)
        observers.add_router_event_observer(self.delivery)
        router.attach_cluster(self)
        self.hook_transactions()
        self.changes.start()
        self.peers.keep_linked()

    # -- what the router asks of the cluster (core/observers.ClusterRules) and the
    # engine (engine/ports.ClusterPort) -------------------------------------------------

    def check_change(self, kind: str, name: str) -> None:
        self.changes.check_change(kind, name)

    def prepare_remote(self, txn: Transaction, done: Callable[[int, str | None], None]) -> bool:
        """At an XA PREPARE (the transaction PREPARED here): ask the other brokers to
        prepare the part of ``txn`` homed there; True means ``done(status, reason)``
        is called once they all answered, and the client's reply waits for that."""
        return self.txns.prepare_remote(txn, done)

    def hook_transactions(self) -> None:
        """XA prepares and outcomes of transactions on messages homed elsewhere go
        through the cluster (remote_transactions.py)."""
        self.txns.hook()

    async def stop(self) -> None:
        """Leave the cluster cleanly: GOODBYE on every link, then close."""
        await self.peers.stop()

    def spawn(self, coro: Coroutine[object, object, None]) -> None:
        """Run ``coro`` for as long as the service runs."""
        self.peers.spawn(coro)

    # -- what the rest of the broker asks of the cluster --------------------------------

    @property
    def port(self) -> int:
        """The bound cluster port (the port mapper's ``cluster tcp CLUSTER`` line)."""
        return self.peers.port

    @property
    def links(self) -> dict[gp.BrokerAddress, BrokerLink]:
        """The links up, by the peer's address."""
        return self.peers.links

    def brokers(self) -> list[dict]:
        """Every broker of the cluster with its state (this one first)."""
        return self.peers.brokers()

    def broker_list(self) -> str:
        """HELLO_REPLY's JMQBrokerList: the URLs of the brokers running in the cluster."""
        return self.peers.broker_list()

    async def reload(
        self, *, propagate: bool
    ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """``imqcmd reload cls`` (Peers.reload)."""
        return await self.peers.reload(propagate=propagate)

    def set_flow_stopped(self, stopped: bool, why: str) -> None:
        """Cluster flow control: ask every broker to stop (or resume) sending us messages."""
        self.delivery.set_flow_stopped(stopped, why)


__all__ = ["ClusterService"]
