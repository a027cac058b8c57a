"""The engine host's ports, typed: the connection service, a cluster and an HA monitor.

A connection belongs to one :class:`ServicePort` (broker/server/broker.py's
``Service``).

A broker alone has neither: :class:`~broker.engine.base.Host` says ``cluster`` and
``ha`` are ``None`` then, and the engine (and the admin service) test for ``None``
instead of probing the host for attributes.  The cluster service
(broker/cluster/service.py) is a :class:`ClusterPort`, the HA monitor
(broker/server/hamonitor.py) an :class:`HAPort`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.core.destination import QueueDestination
    from broker.core.metrics import ServiceCounters
    from broker.core.transaction_record import Transaction


class ServicePort(Protocol):
    """The connection service a connection came in through, as the engine reads it."""

    name: str
    type: str  # NORMAL or ADMIN
    auth_type: str  # digest or basic
    # Admin PAUSE: new connections are refused until RESUME.
    paused: bool
    connections_rejected: int
    # Traffic of all its connections (GET_METRICS), which each connection increments.
    metrics: ServiceCounters


class ClientIdLocks(Protocol):
    """The cluster's lock on client IDs (G_LOCK on ``clientid:...``)."""

    def needed(self) -> bool:
        """Is another broker linked, so that an ID must be locked cluster-wide?"""
        ...

    def acquire_client_id_blocking(self, cid: str, shared: bool, namespace: str | None) -> int:
        """For a worker thread: the cluster's answer (a status) to taking ``cid``."""
        ...


class QueuePositionLocks(Protocol):
    """The cluster's lock on a limited queue's consumer positions."""

    def governs(self, dest: QueueDestination) -> bool:
        """Are ``dest``'s positions cluster-wide?"""
        ...

    def first_free_blocking(self, dest: QueueDestination) -> int:
        """For a worker thread: the first position taken in the cluster, -1 if none."""
        ...


class ClusterPort(Protocol):
    """What the engine asks of the cluster this broker is part of."""

    @property
    def locks(self) -> ClientIdLocks: ...

    @property
    def positions(self) -> QueuePositionLocks: ...

    def broker_list(self) -> str:
        """HELLO_REPLY's JMQBrokerList: the URLs of the brokers running in the cluster."""
        ...

    def prepare_remote(self, txn: Transaction, done: Callable[[int, str | None], None]) -> bool:
        """At an XA PREPARE: True when other brokers prepare part of ``txn`` first and
        ``done(status, reason)`` will be called once they all answered."""
        ...


class BridgePort(Protocol):
    """The bridge service as the engine sees it (server/admin_service/bridge.py)."""

    # The temporary queue imqbridgemgr's commands go to (None until its first HELLO).
    queue: str | None


class HAPort(Protocol):
    """What the engine's host and the admin service ask of the HA monitor."""

    def hello_verdict(
        self, cluster_id: object, session: object
    ) -> tuple[int, dict[str, object], str | None]:
        """HELLO's answer to an HA client naming its cluster and store session."""
        ...

    @property
    def session(self) -> int:
        """This broker's own JMQStoreSession."""
        ...

    def cluster_info(self) -> dict[str, object]:
        """The body of a cluster INFO packet (the members operating now)."""
        ...

    async def take_over_now(self, broker_id: str) -> object:
        """Admin TAKEOVER_BROKER: take the stopped member ``broker_id`` over now."""
        ...


__all__ = [
    "BridgePort",
    "ClientIdLocks",
    "ClusterPort",
    "HAPort",
    "QueuePositionLocks",
    "ServicePort",
]
