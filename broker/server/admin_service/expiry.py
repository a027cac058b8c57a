"""Admin RECLAIM_EXPIRED (200, our extension; OpenMQ has no such request): sweep expired
messages now, as the periodic expiry job (imq.message.expiration.interval) does.

The portal's Celery job (portal/jobs/expiry.py) sends it to every running broker at
its own interval, so the sweep and its counts are recorded centrally.  The request
carries no properties; the reply's body is a ``java.util.Vector`` of ``HashMap``, one per
destination where something expired: ``DestinationName`` (String), ``DestinationType``
(Integer: 1 queue, 2 topic, as ``DestType``), ``ToDMQ`` and ``Discarded`` (Integer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.admin_info import HashMap, encode_admin_vector
from broker.protocol.admin_types import RECLAIM_EXPIRED
from broker.protocol.jtypes import JInt
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC

if TYPE_CHECKING:
    from ..connection import ClientConnection

__all__ = ["RECLAIM_EXPIRED", "reclaim_expired"]


def reclaim_expired(conn: ClientConnection, props: dict) -> tuple[dict, bytes]:
    """Run the router's expiry sweep; the per-destination counts as the reply body."""
    rows = [
        HashMap(
            DestinationName=name,
            DestinationType=JInt(DEST_TOPIC if is_topic else DEST_QUEUE),
            ToDMQ=JInt(to_dmq),
            Discarded=JInt(gone),
        )
        for name, is_topic, to_dmq, gone in conn.router.limits.reclaim_expired_report()
    ]
    return {}, encode_admin_vector(rows)
