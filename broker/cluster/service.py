"""The cluster service: this broker's links to the others and what travels on them.

:class:`ClusterService` listens on the cluster port (published in the port mapper as
``cluster tcp CLUSTER``), dials the peers of ``imq.cluster.brokerlist`` it is the
initiator for (the lower ``host:port`` of a pair dials; both accept), and keeps
re-dialling a peer that is down -- this broker serves its own clients meanwhile.

Over an up link it announces local consumers (G_NEW_INTEREST, G_INTEREST_UPDATE),
forwards messages to remote consumers (G_MESSAGE_DATA, see remote.py), carries the
acknowledgements home (G_MESSAGE_ACK), answers PING, says GOODBYE when it stops, and
tells a peer that left cleanly from one that crashed.

The service is one class made of rule sets by subject, as the connection engine is:
:mod:`.links` (who may link, dialling, keeping links alive), :mod:`.changes`
(destinations, durables and the master broker's change record) and :mod:`.delivery`
(interests, remote delivery, acknowledgements); this module holds its state, its life
cycle and the packet switch.  A link's own protocol is :mod:`.linkengine`'s.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.core import queries
from broker.core.errors import now_ms
from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo
from broker.protocol.jtypes import JLong
from broker.security.tlsaccept import listening_socket, serve

from .changerecord import read_last_sync
from .changes import ChangeRules
from .delivery import DeliveryRules
from .link import BrokerLink
from .links import LinkRules

if TYPE_CHECKING:
    pass

# asyncio's create_server default, which the cluster listener had before.
CLUSTER_BACKLOG = 100

log = logging.getLogger("broker.cluster")

# Replies whose only use is to say (WARNING) that a peer could not do what we asked.
_REFUSALS_LOGGED = {
    gp.G_RELOAD_CLUSTER_REPLY: "broker %s could not reload the cluster configuration: %s",
}


# Requests answered with status 200 once handled, when the sender sets the A bit.
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


class ClusterService(LinkRules, ChangeRules, DeliveryRules):
    """One broker's membership of a conventional cluster."""

    # -- a link comes and goes ----------------------------------------------------------

    def new_link(
        self, expected: tuple[str, int] | None = None, expected_instance: str | None = None
    ) -> BrokerLink:
        """A link this broker dials (``expected``: the peer it looked up) or accepts."""
        return BrokerLink(self, expected, expected_instance)

    def link_up(self, link: BrokerLink) -> None:
        addr = link.address
        assert addr is not None
        old = self.links.get(addr)
        if old is not None and old is not link:
            # A dropped link is closed at once, but its connection_lost can come after
            # the peer's redial is up: what it brought goes now, before the new link's
            # interests arrive.  A remote consumer left attached would hold its durable
            # subscription "in use" (refusing the peer's consumer as it comes back) and
            # draw messages into a dead link.
            self._forget_link(old)
        self.links[addr] = link
        self.all_links.add(link)
        self._unreachable.pop((addr.host, addr.port), None)
        log.info(
            "cluster link to broker %s up (%s)",
            addr,
            "dialled" if link.expected else "accepted",
        )
        for dest in self._admin_destinations():
            link.send(self._destination_packet(dest, sync=True))
        cons = [c for c in self.router.local_consumers() if self._shared(c)]
        if cons:
            self._announce(link, cons)
        self.locks.link_up(link)
        self.inquire_remote_txns(link)
        self.tell_owed(link)
        if self.flow_stopped:
            link.send(gp.GPacket(gp.G_STOP_MESSAGE_FLOW, {}))
        if self.record is None and link is self._master_link() and self.instance_dir is not None:
            # -1: never synchronised (OpenMQ's brokers ask so, without the A bit).
            since = read_last_sync(self.instance_dir) or -1
            link.send(gp.GPacket(gp.G_GET_CONFIG_CHANGES_REQUEST, {"TS": JLong(since)}))

    def link_closed(self, link: BrokerLink) -> None:
        self.all_links.discard(link)
        self.prepares_link_down(link)
        # What came over this link goes with it even when a newer link to the same broker
        # already took its place (see link_up).
        self._forget_link(link)
        self.locks.link_down(link)
        addr = link.address
        if addr is None or self.links.get(addr) is not link:
            if not link.logged and not self.stopping:
                # A peer that keeps refusing us (e.g. one whose list no longer names this
                # broker) is re-dialled every few seconds: said once per reason.
                peer = link.expected
                if peer is not None and self._unreachable.get(peer) == link.reason:
                    log.debug("cluster link %s closed again: %s", link.describe(), link.reason)
                    return
                if peer is not None:
                    self._unreachable[peer] = link.reason
                log.warning(
                    "cluster link %s closed before the handshake finished: %s",
                    link.describe(),
                    link.reason,
                )
            return
        del self.links[addr]
        if link.goodbye:
            if not self.stopping:  # a stock peer answers our GOODBYE with its own
                log.info("broker %s left the cluster (GOODBYE)", addr)
        elif not self.stopping:
            # A link this broker dropped had its reason logged by the drop.
            why = "dropped (reason above)" if link.logged else link.reason
            log.warning("cluster link to broker %s lost: %s", addr, why)

    # -- life cycle ------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        host = self.cfg.cluster_host or None
        self.server = await serve(
            self.new_link,
            listening_socket(host, self.cfg.cluster_port, CLUSTER_BACKLOG),
            self.server_ssl,
            "cluster",
        )
        log.info(
            "cluster service (%s CLUSTER) listening on %s:%s; brokers: %s",
            self.cfg.transport,
            host or "*",
            self.port,
            ", ".join(f"{h}:{p}" for h, p in self.cfg.peers),
        )
        self.router.consumer_listeners.append(self._consumer_event)
        self.router.listeners.append(self._router_event)
        self.router.position_claims = self.positions
        for queue in self.router.queues.values():
            queue.claims = self.positions
        self.hook_transactions()
        for _topic, sub in queries.subscriptions(self.router):
            if sub.durable_key is not None:
                self._known_durables.add(sub.durable_key)
        if self.cfg.master is not None:
            self.router.change_guard = self._guard
            role = "this broker" if self.record is not None else "{}:{}".format(*self.cfg.master)
            log.info("master broker: %s", role)
        self._tasks = [
            asyncio.create_task(self._dial_loop()),
            asyncio.create_task(self._ping_loop()),
        ]

    def hook_transactions(self) -> None:
        """XA prepares and outcomes of transactions on messages homed elsewhere go
        through this service (remotetxn.py)."""
        self.router.remote_prepare = self.prepare_remote
        self.router.transaction_listeners.append(self.txn_outcome)

    @property
    def port(self) -> int:
        if self.server is not None and self.server.sockets:
            return self.server.sockets[0].getsockname()[1]
        return self.cfg.cluster_port

    async def stop(self) -> None:
        """Leave the cluster cleanly: GOODBYE on every link, then close."""
        self.stopping = True
        for t in self._tasks:
            t.cancel()
        for link in list(self.links.values()):
            link.leave()
        if self.server is not None:
            self.server.close()
        for link in list(self.all_links):
            link.close()
        await asyncio.sleep(0)

    # -- identity and handshake -----------------------------------------------------

    def link_init(self) -> gp.LinkInit:
        me = self.cfg.me
        master = None
        if self.cfg.master is not None:
            # OpenMQ names the master's instance once it knows it: its own when it is
            # the master, "???" otherwise.
            instance = me.instance if self.record is not None else "???"
            master = gp.BrokerAddress(self.cfg.master[0], instance, self.cfg.master[1])
        return gp.LinkInit(
            gp.CLUSTER_VERSION,
            me.host,
            me.instance,
            me.port,
            master,
            dict(self.cfg.match),
            session_uid=self.session_id,
        )

    def broker_info(self) -> bytes:
        me = self.cfg.me
        return BrokerInfo(me.host, me.instance, me.port, self.session_id, self.start_ms).encode()

    # -- the packet switch ----------------------------------------------------------------

    def on_packet(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        t = pkt.type
        self._switch(link, pkt)
        if t in _STATUS_REPLIES and pkt.wants_reply and not link.closed:
            # OpenMQ's reply to these is the next type with a status alone.
            link.send(gp.GPacket(t + 1, {"S": 200}))

    def _switch(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        t = pkt.type
        if t == gp.G_MESSAGE_DATA:
            self._message_data(link, pkt)
        elif t == gp.G_MESSAGE_ACK:
            self._message_ack(link, pkt)
        elif t == gp.G_NEW_INTEREST:
            self._new_interest(link, pkt)
        elif t == gp.G_INTEREST_UPDATE:
            self._interest_update(link, pkt)
        elif t == gp.G_PING:
            if pkt.wants_reply:
                link.send(gp.GPacket(gp.G_PING_REPLY, {"S": 200, "X": pkt.props.get("X", 0)}))
        elif t == gp.G_GOODBYE:
            link.heard_goodbye()
            link.send(gp.GPacket(gp.G_GOODBYE_REPLY, {"S": 200}))
            # OpenMQ closes the link once its reply has gone, and a stock broker that
            # is shutting down waits for every peer to do so (imq.cluster.shutdownTimeout,
            # 30 s) before it exits.
            link.close()
        elif t == gp.G_STOP_MESSAGE_FLOW:
            if not link.flow_stopped:
                log.info("broker %s asked to stop message flow to it", link.address)
            link.flow_stopped = True
            if pkt.wants_reply:
                link.send(gp.GPacket(gp.G_STOP_MESSAGE_FLOW_REPLY, {"S": 200}))
        elif t == gp.G_RESUME_MESSAGE_FLOW:
            if link.flow_stopped:
                log.info("broker %s resumed message flow to it", link.address)
            link.flow_stopped = False
            if pkt.wants_reply:
                link.send(gp.GPacket(gp.G_RESUME_MESSAGE_FLOW_REPLY, {"S": 200}))
            stamp = now_ms()
            for (rlink, _cid), rc in list(self.remotes.items()):
                if rlink is link:
                    rc.queue.dispatch(stamp)
        elif t in (gp.G_UPDATE_DESTINATION, gp.G_REM_DESTINATION):
            self._apply_destination(link, pkt)
        elif t == gp.G_REM_DURABLE_INTEREST:
            self._remove_durable(link, pkt)
        elif t == gp.G_CONFIG_CHANGE_EVENT:
            self._config_change_event(link, pkt)
        elif t == gp.G_CONFIG_CHANGE_EVENT_REPLY:
            self._config_change_event_reply(link, pkt)
        elif t == gp.G_GET_CONFIG_CHANGES_REQUEST:
            self._config_changes_request(link, pkt)
        elif t == gp.G_GET_CONFIG_CHANGES_REPLY:
            self._config_changes_reply(link, pkt)
        elif t in _REFUSALS_LOGGED:
            if pkt.props.get("S") != 200:
                log.warning(_REFUSALS_LOGGED[t], link.address, pkt.props.get("reason"))
        elif t in (gp.G_LOCK, gp.G_LOCK_REPLY):
            self.locks.on_packet(link, pkt)
        elif t == gp.G_RELOAD_CLUSTER:
            self._reload_requested(link, pkt)
        elif t == gp.G_CLIENT_CLOSED:
            self._client_closed(link, pkt)
        elif t == gp.G_DURABLE_ATTACH:
            self._durable_attach(link, pkt)
        elif t == gp.G_TRANSACTION_INFO:
            self.transaction_info(link, pkt)
        elif t == gp.G_TRANSACTION_INQUIRY:
            self.transaction_inquiry(link, pkt)
        elif t == gp.G_MESSAGE_ACK_REPLY:
            self.message_ack_reply(link, pkt)
        elif t in (gp.G_PING_REPLY, gp.G_GOODBYE_REPLY, gp.G_CLIENT_CLOSED_REPLY):
            pass
        elif pkt.wants_reply and t + 1 in gp.KNOWN_TYPES:
            link.send(gp.GPacket(t + 1, {"S": 501, "reason": f"{pkt.name} is not supported here"}))
        else:
            # (A request whose type has no reply type in OpenMQ's table, such as
            # G_REPLICATION_GROUP_INFO 55, gets none: 56 is no packet type.)
            log.debug("cluster packet %s from %s ignored", pkt.name, link.describe())

    def set_flow_stopped(self, stopped: bool, why: str) -> None:
        """Cluster flow control: ask every broker to stop (or resume) sending us messages."""
        if stopped == self.flow_stopped:
            return
        self.flow_stopped = stopped
        log.warning(
            "cluster message flow to this broker %s (%s)", "stopped" if stopped else "resumed", why
        )
        kind = gp.G_STOP_MESSAGE_FLOW if stopped else gp.G_RESUME_MESSAGE_FLOW
        self._broadcast(gp.GPacket(kind, {}))

    # -- what others ask about the cluster --------------------------------------------

    def brokers(self) -> list[dict]:
        """Every broker of the cluster with its state (this one first)."""
        me = self.cfg.me
        out = [
            {
                "address": f"{me.host}:{me.port}",
                "instance": me.instance,
                "state": "RUNNING",
                "self": True,
            }
        ]
        for host, port in self.cfg.peers:
            link = self._link_to(host, port)
            out.append(
                {
                    "address": f"{host}:{port}",
                    "instance": link.address.instance if link and link.address else "",
                    "state": "RUNNING" if link is not None else "UNREACHABLE",
                    "self": False,
                }
            )
        return out

    def broker_list(self) -> str:
        """HELLO_REPLY's JMQBrokerList: the URLs of the brokers running in the cluster."""
        return ",".join(f"mq://{b['address']}/" for b in self.brokers() if b["state"] == "RUNNING")


__all__ = ["ClusterService"]
