"""Queue consumer positions: who of a queue's consumers is active, cluster-wide.

OpenMQ numbers a queue's consumers by position: position ``n`` is active when ``n`` is
below ``maxNumActiveConsumers``, a backup otherwise.  In a cluster each broker takes
the lock ``queue:<name>_<n>`` (G_LOCK) for a consumer of its own before it gives it
position ``n``, and announces the position with the consumer's interest, so two
consumers attaching at the same moment on two brokers never hold the same place.
:class:`~broker.core.destination.QueueDestination` keeps the positions; a
:class:`~broker.core.destination.PositionClaims` (the cluster's) says when a local
consumer must take the lock before it moves up into an active place.
"""

from __future__ import annotations


def lock_name(queue: str, position: int) -> str:
    """The cluster lock of one position of a queue (OpenMQ's resource name)."""
    return f"queue:{queue}_{position}"


__all__ = ["lock_name"]
