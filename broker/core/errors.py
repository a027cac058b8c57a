"""What every part of the router shares: the refusal it raises and its clock.

Its own module so the parts (transactions, subscriptions, limits, ...) and the objects
they work on (:class:`~broker.core.transaction_record.Transaction`) can raise a
:class:`RouterError` without importing the router that imports them.
"""

from __future__ import annotations

import time

from broker.protocol.names import JMQ_REMOTE, JMQ_REMOTE_CONSUMER_IDS


def now_ms() -> int:
    return int(time.time() * 1000)


class RouterError(Exception):
    """An operation refused with a protocol status and a reason for JMQReason."""

    def __init__(self, status: int, reason: str, props: dict[str, object] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        # More reply properties (JMQRemote, JMQRemoteConsumerIDs for a remote failure).
        self.props = props


def remote_failure(consumer_ids: list[int]) -> dict[str, object]:
    """OpenMQ's reply properties for work that failed at a remote broker: JMQRemote and
    the consumers' ids, once each, space-separated (the stock Java client reads them)."""
    ids = " ".join(str(c) for c in dict.fromkeys(consumer_ids))
    return {JMQ_REMOTE: True, JMQ_REMOTE_CONSUMER_IDS: ids}


__all__ = ["RouterError", "now_ms", "remote_failure"]
