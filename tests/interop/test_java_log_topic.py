"""The broker's log on the topic ``mq.log.broker`` (``imq.log.destination.*``), seen by
the stock Java client (LogTopic.java): a failed login's WARNING arrives as a MapMessage.

The message's shape (its class, properties and map entries with their Java types,
priority, delivery mode) is compared with what the stock OpenMQ 6.9 broker sends: the
constants below were printed by the same program against it, and
``--interop-broker=stock`` runs all of it against the stock broker.  Where ours differs
(docs/reference/properties.md): the time to live is in seconds, as documented (the stock
broker adds it in milliseconds), and the text is our log line's.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

# Printed by LogTopic.java against the stock OpenMQ 6.9 broker (../shared/realbroker).
STOCK_PROPERTIES = "broker:String,brokerInstance:String,timestamp:Long,type:String"
STOCK_BODY = "level:String,text:String"
STOCK_TTL_MS = 300  # imq.log.destination.timetolive=300 taken as milliseconds


def test_log_topic_carries_warnings(request: pytest.FixtureRequest, java_programs) -> None:
    kind = broker_kind(request.config)
    tmp = Path(tempfile.mkdtemp(prefix="imq-logtopic-"))
    b = start_either(kind, tmp)
    try:
        r = java_programs.run("LogTopic", b)
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.checks == {
        "subscribe": "ok",
        "wrong password refused": "ok",
        "log message received": "ok",
        "a MapMessage": "ok",
        "levels": "ok",
        "timestamp property": "ok",
        "refused producer": "ok",
    }, r.explain()
    info = {
        line[5:].partition(" ")[0]: line[5:].partition(" ")[2]
        for line in r.lines
        if line.startswith("info ")
    }
    assert info["props"] == STOCK_PROPERTIES, r.explain()
    assert info["body"] == STOCK_BODY, r.explain()
    assert info["level"] == "WARNING", r.explain()
    assert info["priority"] == "5", r.explain()
    assert info["deliveryMode"] == "1", r.explain()  # NON_PERSISTENT
    assert info["type"] == "mq.log.broker", r.explain()
    assert info["brokerInstance"] == b.instance, r.explain()
    assert info["broker"].endswith(f":{b.portmapper_port}"), r.explain()
    assert info["text"].startswith("WARNING "), r.explain()
    ttl = int(info["ttl"])
    if kind == "stock":
        # Its expiration counts from a moment before the message's time stamp.
        assert 0 < ttl <= STOCK_TTL_MS, r.explain()
    else:
        assert ttl == 300_000, r.explain()
    assert r.returncode == 0, r.explain()
