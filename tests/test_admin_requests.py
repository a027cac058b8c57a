"""The admin requests both the admin client and the JMX operations build
(broker/protocol/admin_requests.py): the properties imqcmd sends for each."""

from __future__ import annotations

import pytest

from broker.protocol import admin_requests as req
from broker.protocol.admin_types import (
    CHANGE_CLUSTER_MASTER_BROKER,
    PAUSE,
    SHUTDOWN,
    UPDATE_SERVICE,
)
from broker.protocol.javaser import decode_object
from broker.protocol.jtypes import JInt
from broker.protocol.types import DEST_TOPIC

pytestmark = pytest.mark.fast


def test_destination_pause_names_the_destination_and_the_pause_type():
    r = req.pause_destination("orders", DEST_TOPIC, req.PAUSE_PRODUCERS)
    assert r.type == PAUSE
    assert r.props == {
        "JMQPauseTarget": "JMQDestination",
        "JMQDestination": "orders",
        "JMQDestType": JInt(DEST_TOPIC),
        "JMQDestState": JInt(req.PAUSE_PRODUCERS),
    }
    assert r.body is None


def test_shutdown_carries_only_what_was_asked():
    assert req.shutdown() == (SHUTDOWN, None, None)
    assert req.shutdown(no_failover=True, time=30).props == {
        "JMQNoFailover": True,
        "JMQTime": JInt(30),
    }
    assert req.restart().props == {"JMQRestart": True}


def test_update_service_needs_something_to_change():
    r = req.update_service("jms", port=7677)
    assert r.type == UPDATE_SERVICE
    info = decode_object(r.body, generic=True)
    assert info["name"] == "jms" and info["port"] == 7677
    with pytest.raises(ValueError):
        req.update_service("jms")


def test_change_master_broker_names_the_new_and_the_old_master():
    r = req.change_master_broker("hostb:7777", "hosta:7676")
    assert r.type == CHANGE_CLUSTER_MASTER_BROKER
    assert r.props == {
        "JMQClusterNewMasterBroker": "hostb:7777",
        "JMQClusterOldMasterBroker": "hosta:7676",
    }
    assert req.change_master_broker("hostb:7777").props == {
        "JMQClusterNewMasterBroker": "hostb:7777"
    }


def test_broker_property_values_are_plain_text():
    from broker.protocol.javaser import decode_properties_object
    from broker.protocol.jtypes import JLong

    r = req.update_broker_props({"imq.system.max_size": JLong(1), "imq.autocreate.queue": False})
    assert decode_properties_object(r.body) == {
        "imq.system.max_size": "1",
        "imq.autocreate.queue": "false",
    }
