"""The gateway's configuration: Django settings ``UMS_*``, else the environment.

Names and defaults are OpenMQ's UMS servlet parameters (``ums.cache.duration`` and so on,
shown by the getConfiguration service).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings


def _get(name: str, default: str) -> str:
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name) or default
    return str(value)


def _bool(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class UmsConfig:
    """What the gateway runs with (one per process)."""

    context_root: str
    broker_host: str
    broker_port: int
    authenticate: bool
    user: str
    password: str
    cache_duration_ms: int
    sweep_interval_ms: int
    receive_timeout_ms: int
    max_clients_per_connection: int
    node: str
    # Ours, not OpenMQ's: how long a one-shot receive's queue consumer stays open for the
    # next one-shot receive of that queue (0: closed after each receive).
    receive_linger_ms: int = 1000
    # Ours: the longest wait for the next part of a request body (then 408 and close).
    read_timeout_ms: int = 5000

    @property
    def broker_address(self) -> str:
        return f"{self.broker_host}:{self.broker_port}"


@lru_cache(maxsize=1)
def ums_config() -> UmsConfig:
    """The configuration, read once per process."""
    node = _get("UMS_NODE", "") or f"{socket.gethostname()}-{os.getpid()}"
    # A sid is "<node>.<token>": keep the node to characters a load balancer's
    # pattern and a query string take without escaping.
    node = "".join(c if c.isalnum() or c == "-" else "-" for c in node)
    return UmsConfig(
        context_root=_get("UMS_CONTEXT_ROOT", "ums").strip("/"),
        broker_host=str(getattr(settings, "IMQ_BROKER_HOST", "localhost")),
        broker_port=int(getattr(settings, "IMQ_BROKER_PORT", 7676)),
        authenticate=_bool(_get("UMS_AUTHENTICATE", "true")),
        user=_get("UMS_USER", "guest"),
        password=_get("UMS_PASSWORD", "guest"),
        cache_duration_ms=int(_get("UMS_CACHE_DURATION", "420000")),
        sweep_interval_ms=int(_get("UMS_SWEEP_INTERVAL", "120000")),
        receive_timeout_ms=int(_get("UMS_RECEIVE_TIMEOUT", "7000")),
        max_clients_per_connection=int(_get("UMS_MAX_CLIENTS_PER_CONNECTION", "100")),
        node=node,
        receive_linger_ms=int(_get("UMS_RECEIVE_LINGER", "1000")),
        read_timeout_ms=int(_get("UMS_READ_TIMEOUT", "5000")),
    )
