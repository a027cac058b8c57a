"""The metrics topics (``mq.metrics.*``) and the log's metrics report, seen by the stock
Java client (MetricsTopics.java) on a broker with a 1-second interval for both.

The maps' keys and value types and the messages' properties are compared with what the
stock OpenMQ 6.9 broker sends (the lists below were printed by the same program against
it). ``--interop-broker=stock`` runs all of it against the stock broker.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.admintools.broker_handle import BrokerAdmin
from broker.protocol.types import DEST_TOPIC

from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

INTERVAL = 1

# Printed by MetricsTopics.java against the stock OpenMQ 6.9 broker (imqbrokerd,
# third_party/openmq/realbroker): each map's keys with the Java class of their values.
STOCK_BROKER_MAP = {
    "msgBytesIn": "Long",
    "msgBytesOut": "Long",
    "numConnections": "Long",
    "numDestinations": "Long",
    "numMsgs": "Long",
    "numMsgsIn": "Long",
    "numMsgsOut": "Long",
    "numPktsIn": "Long",
    "numPktsOut": "Long",
    "pktBytesIn": "Long",
    "pktBytesOut": "Long",
    "totalMsgBytes": "Long",
}
STOCK_JVM_MAP = {"freeMemory": "Long", "maxMemory": "Long", "totalMemory": "Long"}
# mq.metrics.destination_list: one key per destination (its metrics topic's name), whose
# value is a Hashtable of these.
STOCK_DESTINATION_LIST_ENTRY = {"isTemporary": "Boolean", "name": "String", "type": "String"}
# mq.metrics.destination.queue.NAME and .topic.NAME alike.
STOCK_DESTINATION_MAP = {
    "avgNumActiveConsumers": "Integer",
    "avgNumBackupConsumers": "Integer",
    "avgNumConsumers": "Integer",
    "avgNumMsgs": "Integer",
    "avgTotalMsgBytes": "Long",
    "diskReserved": "Long",
    "diskUsed": "Long",
    "diskUtilizationRatio": "Integer",
    "msgBytesIn": "Long",
    "msgBytesOut": "Long",
    "numAckedMsgs": "Integer",
    "numActiveConsumers": "Integer",
    "numBackupConsumers": "Integer",
    "numConsumers": "Integer",
    "numDiscardedMsgs": "Integer",
    "numExpiredMsgs": "Integer",
    "numMsgs": "Integer",
    "numMsgsIn": "Long",
    "numMsgsOut": "Long",
    "numPurgedMsgs": "Integer",
    "numRejectedMsgs": "Integer",
    "numRolledbackMsgs": "Integer",
    "peakMsgBytes": "Long",
    "peakNumActiveConsumers": "Integer",
    "peakNumBackupConsumers": "Integer",
    "peakNumConsumers": "Integer",
    "peakNumMsgs": "Integer",
    "peakTotalMsgBytes": "Long",
    "totalMsgBytes": "Long",
}
# Every metrics message's properties (besides the client's JMSXDeliveryCount).
STOCK_PROPERTIES = {
    "brokerAddress": "String",
    "brokerHost": "String",
    "brokerPort": "Integer",
    "timestamp": "Long",
    "type": "String",
}

# The access rules: OpenMQ's shipped ones, and guest may not subscribe to the metrics
# topics one wildcard level under mq.metrics.
ACL_RULES = """version=JMQFileAccessControlModel/100
connection.NORMAL.allow.user=*
connection.ADMIN.allow.group=admin
queue.*.produce.allow.user=*
queue.*.consume.allow.user=*
queue.*.browse.allow.user=*
topic.*.produce.allow.user=*
topic.*.consume.allow.user=*
queue.create.allow.user=*
topic.create.allow.user=*
topic.mq.metrics.*.consume.deny.user=guest
"""

# The log's metrics report (imq.metrics.interval): OpenMQ's layout, where our broker says
# "Memory:" for OpenMQ's "JVM Heap:".
REPORT = re.compile(
    r"Connections: \d+    (?:JVM Heap|Memory): \d+ bytes \(\d+ free\) Threads: \d+ \(\d+-\d+\)\n"
    r"      In: \d+ msgs \(\d+ bytes\)  \d+ pkts \(\d+ bytes\)\n"
    r"     Out: \d+ msgs \(\d+ bytes\)  \d+ pkts \(\d+ bytes\)\n"
    r" Rate In: \d+ msgs/sec \(\d+ bytes/sec\)  \d+ pkts/sec \(\d+ bytes/sec\)\n"
    r"Rate Out: \d+ msgs/sec \(\d+ bytes/sec\)  \d+ pkts/sec \(\d+ bytes/sec\)"
)


@pytest.fixture(scope="module")
def metrics_broker(request: pytest.FixtureRequest) -> Iterator[Any]:
    tmp = Path(tempfile.mkdtemp(prefix="imq-metrics-"))
    acl_dir = tmp / "acl"
    acl_dir.mkdir()
    (acl_dir / "metrics-acl.properties").write_text(ACL_RULES)
    b = start_either(
        broker_kind(request.config),
        tmp,
        f"imq.metrics.topic.interval={INTERVAL}",
        f"imq.metrics.interval={INTERVAL}",
        f"imq.accesscontrol.file.dirpath={acl_dir}",
        "imq.accesscontrol.file.filename=metrics-acl.properties",
    )
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _types(text: str) -> dict[str, str]:
    # A temporary destination's name has colons in it: the type is after the last one.
    return {k: v for k, _, v in (item.rpartition(":") for item in text.split(",") if item)}


def test_metrics_topics_maps(metrics_broker: Any, java_programs: Any) -> None:
    suffix = uuid.uuid4().hex[:10]
    r = java_programs.run("MetricsTopics", metrics_broker, suffix, "maps", str(INTERVAL))
    queue_topic = f"mq.metrics.destination.queue.metrics.q.{suffix}"
    topic_topic = f"mq.metrics.destination.topic.metrics.t.{suffix}"
    names = ["mq.metrics.broker", "mq.metrics.jvm", "mq.metrics.destination_list"]
    names += [queue_topic, topic_topic]
    want = {
        "subscribe": "ok",
        **{f"first_map {n}": "ok" for n in names},
        **{f"periodic_map {n}": "ok" for n in names},
        "headers_and_properties": "ok",
        "destination_list": "ok",
        "broker_map": "ok",
        "jvm_map": "ok",
        "destination_maps": "ok",
        "quiet_without_subscribers": "ok",
        "refused producer_on_metrics_topic": "ok",
        "refused unknown_metrics_topic": "ok",
    }
    assert r.checks == want, r.explain()
    info = {
        line[5:].rpartition(" ")[0]: line.rpartition(" ")[2]
        for line in r.lines
        if line.startswith("info ")
    }
    assert _types(info["keys mq.metrics.broker"]) == STOCK_BROKER_MAP, r.explain()
    assert _types(info["keys mq.metrics.jvm"]) == STOCK_JVM_MAP, r.explain()
    assert _types(info["entry"]) == STOCK_DESTINATION_LIST_ENTRY, r.explain()
    listed = _types(info["keys mq.metrics.destination_list"])
    assert listed and set(listed.values()) == {"Hashtable"}, r.explain()
    assert _types(info[f"keys {queue_topic}"]) == STOCK_DESTINATION_MAP, r.explain()
    assert _types(info[f"keys {topic_topic}"]) == STOCK_DESTINATION_MAP, r.explain()
    for n in names:
        assert _types(info[f"props {n}"]) == STOCK_PROPERTIES, (n, r.explain())
    assert r.returncode == 0, r.explain()
    # The administrator's view agrees: mq.metrics.jvm took nothing in since its last
    # subscriber left (GET_METRICS on the topic, the same request on either broker).
    admin = BrokerAdmin(metrics_broker.host, metrics_broker.portmapper_port)
    try:
        counters = admin.call("metrics", destination="mq.metrics.jvm", dest_type=DEST_TOPIC)
    finally:
        admin.close()
    assert int(counters["numMsgsIn"]) == int(info["jvm_numMsgsIn"]), (counters, r.explain())


def test_metrics_topics_access_control(metrics_broker: Any, java_programs: Any) -> None:
    r = java_programs.run(
        "MetricsTopics", metrics_broker, uuid.uuid4().hex[:10], "acl", str(INTERVAL)
    )
    assert r.checks == {
        "refused guest mq.metrics.broker": "ok",
        "refused guest mq.metrics.jvm": "ok",
        "guest destination topic allowed": "ok",
        "admin allowed": "ok",
    }, r.explain()
    assert r.returncode == 0, r.explain()


def test_metrics_report_in_the_log(metrics_broker: Any) -> None:
    log_file = metrics_broker.varhome / "instances" / metrics_broker.instance / "log" / "log.txt"
    deadline = time.monotonic() + 30
    found: list[str] = []
    while time.monotonic() < deadline and len(found) < 2:
        text = log_file.read_text(errors="replace") if log_file.exists() else ""
        found = REPORT.findall(text)
        time.sleep(0.2)
    assert len(found) >= 2, f"no metrics reports in {log_file}:\n{text[-3000:]}"
