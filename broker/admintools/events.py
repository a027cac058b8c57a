"""Change events: what an administrator changed, told to the live pages at once.

Every action that changes something (:mod:`broker.admintools.actions`,
:mod:`broker.admintools.security_actions`, :mod:`portal.jobs.actions`) ends by sending one
event, as Zulip's actions do, in Zulip's shape: what kind of thing, what happened to it,
which one and who did it::

    {"type": "destination", "op": "create", "name": "orders", "dest_type": "queue",
     "attributes": {"maxNumMsgs": 1000}, "by": "admin"}

It goes to the channel layer group the broker's once-a-second samples go to
(``broker.<instance>``, :func:`broker.channel_groups.group_name`), as the message
``{"type": "broker.change", "event": {...}}``; the overview's consumer
(portal/consumers.py) forwards it to the browser as ``{"type": "change", "event": ...}``.

Best effort: the change is made (and in the audit log) before its event is sent, and a
channel layer that is down or slow (at most :data:`SEND_TIMEOUT` seconds) is logged, once
until it works again, but never fails the action.  As for the samples, nothing is sent
without a shared layer (``REDIS_URL`` unset: the in-memory layer reaches no other process).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from broker.channel_groups import group_name

log = logging.getLogger("broker.audit")

__all__ = ["CHANGE_TYPE", "SEND_TIMEOUT", "send_event"]

CHANGE_TYPE = "broker.change"
SEND_TIMEOUT = 2.0

_warned = False


def send_event(event: dict[str, Any], instance: str | None = None) -> bool:
    """Publish ``event`` to the live pages of broker ``instance`` (default: the portal's,
    ``settings.IMQ_INSTANCE``); True when the channel layer took it."""
    global _warned
    from asgiref.sync import async_to_sync
    from channels.layers import InMemoryChannelLayer, get_channel_layer
    from django.conf import settings

    try:
        layer = get_channel_layer()
        if layer is None or isinstance(layer, InMemoryChannelLayer):
            return False
        group = group_name(instance or settings.IMQ_INSTANCE)
        message = {"type": CHANGE_TYPE, "event": event}

        async def publish() -> None:
            await asyncio.wait_for(layer.group_send(group, message), SEND_TIMEOUT)

        async_to_sync(publish)()
    except Exception as exc:  # Redis down or slow: the change itself stands
        if not _warned:
            _warned = True
            log.warning(
                "change events: cannot publish to the channel layer (%s); changes are "
                "still made, the live pages are not told",
                str(exc) or type(exc).__name__,
            )
        return False
    if _warned:
        _warned = False
        log.info("change events: publishing to the channel layer again")
    return True
