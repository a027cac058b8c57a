"""The asyncio side of the sans-IO engines: what every driver does the same way.

A driver owns the transport, the event loop's timers and the write batching; the
engine (a client's :class:`~broker.engine.ConnectionEngine` or STOMP engine, a cluster
link's :class:`~broker.cluster.linkengine.LinkEngine`) owns the protocol.  The drivers
are :class:`broker.server.connection.ClientConnection` (and its STOMP subclass) and
:class:`broker.cluster.link_driver.BrokerLink`.
"""

from .base import DrivenEngine, EngineDriver

__all__ = ["DrivenEngine", "EngineDriver"]
