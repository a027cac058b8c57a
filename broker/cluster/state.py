"""The cluster service's state, which its rule sets (links, changes, delivery) and its
life cycle (service.py) share."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.config import BrokerConfig
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong
from broker.security.tlsaccept import TlsListener

from .changerecord import ChangeRecord
from .config import ClusterConfig, same_host
from .link import BrokerLink
from .locks import ClusterLocks
from .positions import QueuePositions
from .remote import InboundOrigin, RemoteConsumer

if TYPE_CHECKING:
    from broker.core.destination import QueueDestination, Subscription
    from broker.core.dispatch import DeliveryTarget
    from broker.core.router import MessageRouter


class ClusterState:
    """What one broker knows of its cluster: configuration, links, remote consumers,
    inbound origins, pending acknowledgements, locks and flags."""

    # A new link to or from another broker (ClusterService.new_link): the link talks to
    # the whole service, which only the class assembling the rule sets is.
    new_link: Callable[[tuple[str, int] | None, str | None], BrokerLink]

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
        # imq.cluster.transport=ssl: the listener's and the dialler's TLS contexts.
        self.server_ssl = server_ssl
        self.client_ssl = client_ssl
        self.instance_dir = instance_dir
        # The configuration change record, when this broker is the master broker.
        self.record: ChangeRecord | None = None
        if cfg.is_master() and instance_dir is not None:
            self.record = ChangeRecord(instance_dir)
        self._known_durables: set[tuple[str | None, str]] = set()
        self.router = router
        self.session_id = session_id
        self.start_ms = int(time.time() * 1000)
        self.server: asyncio.Server | TlsListener | None = None
        self.links: dict[gp.BrokerAddress, BrokerLink] = {}
        self.all_links: set[BrokerLink] = set()
        self.remotes: dict[tuple[BrokerLink, int], RemoteConsumer] = {}
        self.inbound: dict[tuple[BrokerLink, int], InboundOrigin] = {}
        # (link, consumer id) of a peer's consumer attached to a subscription the peer
        # announced (G_DURABLE_ATTACH) -> that subscription's key in ``remotes``.
        self.attached: dict[tuple[BrokerLink, int], tuple[BrokerLink, int]] = {}
        # Local durable and shared subscriptions' ConsumerUIDs (announced as interests of
        # their own, see delivery.py) and the way back from a UID's id.
        self.sub_uids: dict[Subscription, gp.ConsumerUID] = {}
        self.uid_subs: dict[int, Subscription] = {}
        self._dialling: set[tuple[str, int]] = set()
        # The reason a link to a peer last closed before its handshake (logged once).
        self._unreachable: dict[tuple[str, int], str | None] = {}
        self._tasks: list[asyncio.Task] = []
        self._acks: dict[tuple, tuple[BrokerLink, list]] = {}
        self._acks_scheduled = False
        self._pending: set[InboundOrigin] = set()
        self._pending_timer: asyncio.TimerHandle | None = None
        self.locks = ClusterLocks(self)
        self.locks.timeout = cfg.lock_timeout
        self.positions = QueuePositions(router, self.locks, self._announce_position)
        self.stopping = False
        # Whether this broker asked the others to stop sending it messages (memory red).
        self.flow_stopped = False
        # Set while applying a peer's change, so it is not sent back out.
        self._applying = False
        self.loop: asyncio.AbstractEventLoop | None = None
        # Where RELOAD_CLUSTER reads the configuration again (set by the broker): a fresh
        # BrokerConfig from the instance's files and command line.
        self.reread_config: Callable[[], BrokerConfig] | None = None
        self._address_props: dict[str, object] | None = None
        # This broker's XA transactions on messages homed on other brokers (remotetxn.py):
        # prepares waiting for the home brokers' replies (by the acks' X), the entries
        # each transaction holds of each home, and outcomes a home has not heard yet.
        self._prepares: dict[int, Any] = {}
        self._two_phase: dict[int, Any] = {}
        self._owed: dict[str, dict[int, int]] = {}
        self._outcomes: dict[int, int] = {}
        self._held: set[int] = set()  # id() of the entries those transactions hold

    # -- reaching the other brokers ---------------------------------------------------

    def address_props(self) -> dict[str, object]:
        """This broker's address as OpenMQ attaches it to G_GOODBYE and other packets
        (one dict, made once: callers copy it)."""
        if self._address_props is None:
            me = self.cfg.me
            self._address_props = {
                "instanceName": me.instance,
                "HA": False,
                "port": me.port,
                "brokerSession": JLong(self.session_id),
                "host": me.host,
            }
        return self._address_props

    def _announce_position(
        self, dest: QueueDestination, target: DeliveryTarget, position: int
    ) -> None:
        raise NotImplementedError  # DeliveryRules

    def _broadcast(self, pkt: gp.GPacket) -> None:
        for link in self.links.values():
            link.send(pkt)

    def _master_link(self) -> BrokerLink | None:
        master = self.cfg.master
        if master is None:
            return None
        for addr, link in self.links.items():
            if addr.port == master[1] and same_host(addr.host, master[0]):
                return link
        return None

    def _record(self, pkt: gp.GPacket) -> None:
        """A local change goes into the master's change record (as OpenMQ's brokers
        record it: the packet marked ``M``, sent without the A bit; the master answers
        anyway)."""
        entry = gp.GPacket(pkt.type, {**pkt.props, "M": True}, pkt.payload)
        if self.record is not None:
            self.record.append(entry)
            return
        link = self._master_link()
        if link is not None:
            xid = JLong(int(time.time() * 1000))
            link.send(gp.GPacket(gp.G_CONFIG_CHANGE_EVENT, {"X": xid}, gp.encode(entry)))
