"""Queue consumer positions: who of a queue's consumers is active, cluster-wide.

OpenMQ numbers a queue's consumers by position: position ``n`` is active when ``n`` is
below ``maxNumActiveConsumers``, a backup otherwise.  In a cluster each broker takes
the lock ``queue:<name>_<n>`` (G_LOCK) for a consumer of its own before it gives it
position ``n``, and announces the position with the consumer's interest, so two
consumers attaching at the same moment on two brokers never hold the same place.
:class:`~broker.core.destination.QueueDestination` keeps the positions; a
:class:`PositionClaims` (the cluster's) says when a local consumer must take the lock
before it moves up into an active place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .destination import QueueDestination
    from .message import DeliveryTarget


def lock_name(queue: str, position: int) -> str:
    """The cluster lock of one position of a queue (OpenMQ's resource name)."""
    return f"queue:{queue}_{position}"


class PositionClaims(Protocol):
    """The cluster's say over the positions of a queue's local consumers."""

    def needed(self, dest: QueueDestination, target: DeliveryTarget) -> bool:
        """Must ``target`` take the cluster lock before it moves to another position?"""
        ...

    def claim(self, dest: QueueDestination, target: DeliveryTarget, position: int) -> None:
        """Take ``position`` for ``target``; the answer is ``dest.claimed(...)``, later."""
        ...


__all__ = ["PositionClaims", "lock_name"]
