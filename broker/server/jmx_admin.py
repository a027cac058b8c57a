"""The JMX connector's way into the broker for operations and attribute changes
(broker/engine/jmx_operations.py): the admin service's commands, run in process with
the request imqcmd would send, so a change made over JMX is checked, applied and
logged exactly as one made with imqcmd, the portal or REST."""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, cast

from broker.core import queries
from broker.core.errors import RouterError
from broker.core.monitoring import is_metrics_topic
from broker.engine.jmx_operations import OperationError
from broker.protocol.admin_types import ADMIN_QUEUES, COMMAND_NAMES
from broker.server.admin_service.broker_info import broker_identity
from broker.server.admin_service.common import AdminError
from broker.server.admin_service.handler import BODY_COMMANDS, COMMANDS

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine

log = logging.getLogger("broker.admin")

# What the admin commands read of their caller (OpenMQ 6.9 as imqcmd's version).
_CLIENT_VERSION = "6.9.0"


class JmxAdminPort:
    """An :class:`~broker.engine.jmx_operations.AdminPort` for one JMX user.

    The admin commands take the admin connection that sent the request; of it they
    read the broker, its router, the user and peer (for their log lines) and the
    client version, which this object supplies for a JMX client."""

    def __init__(self, broker: Any, user: str, peer: str) -> None:
        self.broker = broker
        self.router = broker.router
        self.user = user
        self.peer = f"{peer} (JMX)"
        self.client_version = _CLIENT_VERSION
        self.id = 0
        self.sockname = None

    async def command(
        self, request: int, props: dict[str, object] | None = None, body: bytes = b""
    ) -> tuple[dict[str, object], bytes]:
        name = COMMAND_NAMES.get(request, str(request))
        conn = cast("ConnectionEngine", self)  # the commands read only what is above
        try:
            if request in BODY_COMMANDS:
                result = BODY_COMMANDS[request](conn, dict(props or {}), body)
            else:
                result = COMMANDS[request](conn, dict(props or {}))
            if inspect.isawaitable(result):
                result = await result
        except (AdminError, RouterError) as exc:
            raise OperationError("MBeanException", f"{name}: {exc.reason}", exc.status) from None
        except ValueError as exc:
            raise OperationError("MBeanException", f"{name}: {exc}") from None
        log.info("admin %s from %s (%s) over JMX: done", name, self.peer, self.user)
        return result if result is not None else ({}, b"")

    def destinations(self) -> list[tuple[str, bool]]:
        return [
            (d.name, not d.is_queue)
            for d in queries.destinations(self.router)
            if d.name not in ADMIN_QUEUES and not is_metrics_topic(d) and not d.is_temporary
        ]

    def services(self) -> list[str]:
        return [s.name for s in self.broker.services]

    def property(self, name: str) -> str | None:
        config = self.broker.config
        values = config.as_dict()
        values.update(broker_identity(config))
        value = values.get(name)
        return None if value is None else str(value)

    def durable_of(self, consumer_id: str) -> tuple[str | None, str] | None:
        for conn in list(self.broker.connections.values()):
            for session in conn.all_sessions():
                for consumer in session.consumers.values():
                    if str(consumer.id) != consumer_id:
                        continue
                    sub = consumer.subscription
                    if sub is None or sub.durable_key is None:
                        return None
                    return sub.durable_key[0], sub.durable_key[1]
        return None
