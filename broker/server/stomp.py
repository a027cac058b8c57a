"""The STOMP TCP listener's per-connection glue: :class:`ClientConnection`'s transport
handling (batched writes, read slices, timers, the thread pool) around a
:class:`~broker.engine.stomp.StompEngine` instead of the JMQ engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker import props
from broker.engine.stomp import StompEngine, StompSettings

from .connection import ClientConnection

if TYPE_CHECKING:
    from broker.config import BrokerConfig

    from .broker import Broker
    from .services import Service


def stomp_settings(config: BrokerConfig) -> StompSettings:
    """The STOMP service's settings from the broker's properties."""
    return StompSettings(
        heartbeat_send=max(0, config.get(props.STOMP_HEARTBEAT_SEND)),
        heartbeat_receive=max(0, config.get(props.STOMP_HEARTBEAT_RECEIVE)),
        max_frame=config.get(props.STOMP_MAX_FRAME),
        max_headers=config.get(props.STOMP_MAX_HEADERS),
        max_header_line=config.get(props.STOMP_MAX_HEADER_LINE),
        prefetch=max(1, config.get(props.STOMP_PREFETCH)),
    )


class StompConnection(ClientConnection):
    """One STOMP client's transport."""

    engine: StompEngine  # type: ignore[assignment]

    def make_engine(self, broker: Broker, service: Service) -> Any:
        return StompEngine(broker, service, wake=self._wake, flush=self._flush_now)

    def flush(self) -> None:
        # What the JMQ engine underneath wrote becomes frames first; after the write,
        # subscriptions get their next credit unless the transport is full.
        self.engine.pump()
        super().flush()
        self.engine.after_write()
