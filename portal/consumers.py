"""WebSocket consumers (Channels) of the portal.

``OverviewConsumer`` (``/ws/overview/``, optionally ``?instance=<broker instance>``) is
the live dashboard's feed, for administrators only (portal.auth.is_administrator: an
authenticated user who is an active member of group ``admin`` in the broker's user
repository at connect time); anyone else is refused during the handshake.  On
connect it joins the broker's channel layer group (``broker.<instance>``,
broker/channel_groups.py) and sends the last ten minutes of ``MetricSample`` rows::

    {"type": "history", "instance": "imqbroker",
     "samples": [{"timestamp": 1767225600.0, "msgs_in": 12.5, "msgs_out": 12.4,
                  "bytes_in": 12800.0, "bytes_out": 12700.0, "connections": 3,
                  "memory_state": "green", "memory_used": 1024, "memory_limit": ...,
                  "destinations": 7, "loop_lag_max": 0.4, "loop_lag_p99": 0.2},
                 ...],                                # oldest first, rates per second
     "depths": [...]}                                 # the newest row's deepest destinations

then forwards each of the broker's once-a-second samples as it comes::

    {"type": "sample", "instance": ..., "timestamp": ..., "interval": 1.0, "msgs_in": ...,
     "msgs_out": ..., "bytes_in": ..., "bytes_out": ..., "messages": ..., "message_bytes": ...,
     "connections": ..., "memory_state": ..., "memory_used": ..., "memory_limit": ...,
     "destinations": ..., "depths": [{"name", "type", "messages", "bytes", "consumers",
     "producers"}, ...]}

and each change an administrator makes, from any entry point (portal, REST API,
imqcmd, Celery: broker/admintools/events.py), as it is made::

    {"type": "change", "instance": ...,
     "event": {"type": "destination", "op": "create", "name": "orders",
               "dest_type": "queue", "by": "admin", ...}}

Live samples and changes need a channel layer shared with the other processes
(REDIS_URL); the consumer only ever talks to the broker through that layer and the
database.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from broker.channel_groups import group_name
from portal.auth import is_administrator

log = logging.getLogger("portal.consumers")

HISTORY_SECONDS = 600
MAX_HISTORY_ROWS = 1000
# Close code when the handshake is refused (not an administrator).
FORBIDDEN = 4403

_HISTORY_FIELDS = (
    "timestamp",
    "msgs_in",
    "msgs_out",
    "bytes_in",
    "bytes_out",
    "connections",
    "memory_state",
    "memory_used",
    "memory_limit",
    "destinations",
    "loop_lag_max",
    "loop_lag_p99",
)


def recent_samples(instance: str, seconds: int = HISTORY_SECONDS) -> tuple[list[dict], list]:
    """(samples oldest first, without depths; the newest row's depths)."""
    from broker.models import MetricSample

    since = datetime.now(UTC) - timedelta(seconds=seconds)
    rows = list(
        MetricSample.objects.filter(broker_instance=instance, timestamp__gte=since)
        .order_by("-timestamp", "-id")
        .values(*_HISTORY_FIELDS, "depths")[:MAX_HISTORY_ROWS]
    )
    rows.reverse()
    depths = rows[-1]["depths"] if rows else []
    samples = []
    for row in rows:
        row.pop("depths")
        row["timestamp"] = round(row["timestamp"].timestamp(), 3)
        samples.append(row)
    return samples, depths


class OverviewConsumer(AsyncJsonWebsocketConsumer):
    """The live overview's feed (see the module docstring)."""

    group: str | None = None

    async def connect(self) -> None:
        if not await database_sync_to_async(is_administrator)(self.scope.get("user")):
            await self.close(code=FORBIDDEN)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        wanted = (query.get("instance") or [""])[0].strip()
        self.instance = wanted or settings.IMQ_INSTANCE
        await self.accept()
        if self.channel_layer is not None:
            # Joined before the history is read, so no sample falls between the two.
            group = group_name(self.instance)
            try:
                await self.channel_layer.group_add(group, self.channel_name)
                self.group = group
            except Exception as exc:  # Redis down: the history still comes, live samples not
                log.warning("live overview: cannot join %s on the channel layer: %s", group, exc)
        samples, depths = await database_sync_to_async(recent_samples)(self.instance)
        await self.send_json(
            {"type": "history", "instance": self.instance, "samples": samples, "depths": depths}
        )

    async def disconnect(self, code: int) -> None:
        if self.group is not None and self.channel_layer is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = None

    async def receive_json(self, content, **kwargs) -> None:
        """The feed is one-way; whatever the browser sends is ignored."""

    async def broker_sample(self, event: dict) -> None:
        """A ``broker.sample`` from the broker's group: forward it as ``sample``."""
        await self.send_json({**event, "type": "sample"})

    async def broker_change(self, message: dict) -> None:
        """A ``broker.change`` (an administrator's change): forward it as ``change``."""
        await self.send_json(
            {"type": "change", "instance": self.instance, "event": message.get("event") or {}}
        )
