"""The cluster's configuration, read from the imq.cluster.* properties.

``imq.cluster.brokerlist`` lists the brokers as ``host:portmapperPort`` (given to the
broker itself, or in the cluster configuration file ``imq.cluster.url`` names, which
:meth:`broker.config.BrokerConfig.load_cluster_file` layers under the broker's own
properties); this broker finds itself in the list by its own host and port-mapper port
and links to the others.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker import props
from broker.core.monitoring import METRICS_PREFIX
from broker.protocol.gpacket import BrokerAddress
from broker.protocol.types import BROKER_PREFIX, DMQ_NAME

if TYPE_CHECKING:
    from broker.config import BrokerConfig

log = logging.getLogger("broker.cluster")
# Destinations that never leave their broker (each broker's metrics topics are its own).
PRIVATE_PREFIXES = (BROKER_PREFIX, DMQ_NAME, METRICS_PREFIX)

LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}


class ClusterConfigError(ValueError):
    """A cluster property that cannot be used (said at start-up, the broker refuses)."""


def parse_address(text: str, default_port: int = 7676) -> tuple[str, int]:
    """``host[:port]`` (OpenMQ's brokerlist entry) as (host, port)."""
    text = text.strip()
    if not text:
        raise ClusterConfigError("empty broker address")
    if text.startswith("mq://"):
        text = text[5:].split("/", 1)[0]
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    try:
        return host or "localhost", int(port)
    except ValueError:
        raise ClusterConfigError(f"bad port in broker address {text!r}") from None


def same_host(a: str, b: str) -> bool:
    return a == b or (a in LOCAL_NAMES and b in LOCAL_NAMES)


@dataclass
class ClusterConfig:
    """Who this broker is in the cluster and whom it links to."""

    me: BrokerAddress
    peers: list[tuple[str, int]] = field(default_factory=list)
    cluster_host: str | None = None
    cluster_port: int = 0
    transport: str = "tcp"
    master: tuple[str, int] | None = None
    ping_interval: float = 60.0
    # Properties both ends of a link must agree on (LINK_INIT's match properties).
    match: dict[str, str] = field(default_factory=dict)
    lock_timeout: float = 60.0
    handshake_timeout: float = 10.0

    @property
    def enabled(self) -> bool:
        return bool(self.peers)

    def is_master(self) -> bool:
        return self.master is not None and self.is_me(*self.master)

    def is_me(self, host: str, port: int) -> bool:
        return port == self.me.port and same_host(host, self.me.host)

    @staticmethod
    def read_peers(config: BrokerConfig, me: BrokerAddress) -> list[tuple[str, int]]:
        """The other brokers named by ``imq.cluster.brokerlist`` (the broker's own or the
        cluster configuration file's), this broker left out."""
        brokerlist = config.get(props.CLUSTER_BROKERLIST)
        peers: list[tuple[str, int]] = []
        for item in (brokerlist or "").split(","):
            if not item.strip():
                continue
            addr = parse_address(item)
            if not (addr[1] == me.port and same_host(addr[0], me.host)) and addr not in peers:
                peers.append(addr)
        return peers

    @classmethod
    def from_config(cls, config: BrokerConfig, portmapper_port: int) -> ClusterConfig:
        # A broker is known by its port mapper's address, imq.hostname (OpenMQ:
        # BrokerAddressImpl() from Globals.getMQAddress()); imq.cluster.hostname is where
        # the cluster service listens, published in the port mapper for the peers to
        # dial, and names the broker only when imq.hostname is unset (where OpenMQ takes
        # the machine's host name).
        host = config.get(props.HOSTNAME) or config.get(props.CLUSTER_HOSTNAME) or "127.0.0.1"
        me = BrokerAddress(host, config.get(props.INSTANCE_NAME), portmapper_port)
        peers = cls.read_peers(config, me)
        transport = config.get(props.CLUSTER_TRANSPORT).lower()
        if transport not in ("tcp", "ssl"):
            raise ClusterConfigError(f"imq.cluster.transport {transport}: tcp or ssl")
        master_text = config.get(props.CLUSTER_MASTERBROKER)
        port = config.get(props.CLUSTER_PORT)
        ping = float(config.get(props.CLUSTER_PING_INTERVAL))
        match = {
            # The stock broker sends these two for its file store (defaults true) and
            # refuses a peer whose set differs; this broker behaves as both say.
            "imq.persist.file.newTxnLog.enabled": "true",
            "imq.useFileLockForLockFile.enabled": "true",
            props.AUTOCREATE_QUEUE.name: str(config.get(props.AUTOCREATE_QUEUE)).lower(),
            props.AUTOCREATE_TOPIC.name: str(config.get(props.AUTOCREATE_TOPIC)).lower(),
        }
        cluster_id = config.get(props.CLUSTER_ID)
        if cluster_id:
            match[props.CLUSTER_ID.name] = cluster_id
        return cls(
            me,
            peers,
            config.get(props.CLUSTER_HOSTNAME) or config.get(props.HOSTNAME),
            port,
            transport,
            parse_address(master_text) if master_text else None,
            max(ping, 0.2),
            match,
            lock_timeout=float(max(config.get(props.CLUSTER_LOCKTIMEOUT), 1)),
            handshake_timeout=float(max(config.get(props.CLUSTER_HANDSHAKE_TIMEOUT), 1)),
        )
