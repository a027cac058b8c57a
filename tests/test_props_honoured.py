"""Stock properties this broker took up when it classified them all (broker/props.py):
each read where it acts, in process."""

from __future__ import annotations

import pytest

from broker.protocol.types import DEST_QUEUE
from broker.server.broker import Broker
from broker.server.derived_settings import router_settings

from .test_engine import broker as broker  # noqa: F401 - the engine tests' fixture

pytestmark = pytest.mark.fast


def test_auto_created_queues_prefer_local_delivery_when_told(broker: Broker) -> None:  # noqa: F811
    queue = broker.router.ensure_destination("pref.before", DEST_QUEUE, None)
    assert "localDeliveryPreferred" not in queue.attributes  # unset: as before
    name = "imq.autocreate.queue.localDeliveryPreferred"
    broker.config.set(name, "true")
    broker.apply_properties({name})  # how a changed property reaches the router
    queue = broker.router.ensure_destination("pref.after", DEST_QUEUE, None)
    assert queue.attributes["localDeliveryPreferred"] is True


def test_the_log_topic_capacity(broker: Broker) -> None:  # noqa: F811
    assert router_settings(broker.config).log_topic_capacity == 100
    broker.config.set("imq.log.destination.capacity", "7")
    assert router_settings(broker.config).log_topic_capacity == 7
