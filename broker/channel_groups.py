"""The Channels group a broker instance's live events go to, named in one place for the
broker's publisher (broker/server/events.py), the administration tools' change events
(broker/admintools/events.py) and the portal's consumer (portal/consumers.py).  No Django or
Channels import."""

from __future__ import annotations

import re

__all__ = ["group_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def group_name(instance: str) -> str:
    """The channel layer group a broker instance publishes to: ``broker.<instance>``, with
    characters Channels does not allow in group names replaced by ``_``."""
    return ("broker." + (_UNSAFE.sub("_", instance) or "_"))[:99]
