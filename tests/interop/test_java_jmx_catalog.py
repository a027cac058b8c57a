"""Every MBean and every attribute, as the stock OpenMQ 6.9 broker serves them over JMX.

JmxCatalog.java (the stock client's AdminConnectionFactory and javax.management only)
lists every MBean under com.sun.messaging.jms.server and reads every attribute of each:
once idle, then while a stock JMS client holds a connection, a producer and a consumer
on a queue (the Connection MBeans, the Destination monitor, the managers' counts).
``data/jmx_stock_catalogue.txt`` is what it printed against the stock broker (a fresh
one, ``third_party/openmq/realbroker``); this test runs it against ours (or, with
``--interop-broker=stock``, the stock broker again) and compares MBean names, attribute
names, Java types and values, apart from the values that name the run (ports, paths,
ids, times), the machine (memory) or a broker's own packet sizes, and the differences
docs/reference/jmx.md lists.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest

from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

STOCK = Path(__file__).resolve().parent / "data" / "jmx_stock_catalogue.txt"

# Values that differ from run to run or broker to broker by nature, by (type/subtype,
# attribute): the broker's name, ports and paths, connection ids and times, memory,
# packet and message sizes (each broker's own encoding), sampled averages, connections
# the test harness opens to see the broker up, and the disk figures (the stock file
# store's reservations; ours tell what is paged out, as imqcmd's "metrics dst").
VARIABLE = {
    ("Broker/Config", "Host"),
    ("Broker/Config", "InstanceName"),
    ("Broker/Config", "Port"),
    ("Broker/Monitor", "Host"),
    ("Broker/Monitor", "InstanceName"),
    ("Broker/Monitor", "Port"),
    ("Connection/Config", "ConnectionID"),
    ("Connection/Monitor", "ConnectionID"),
    ("Connection/Monitor", "CreationTime"),
    ("Connection/Monitor", "Port"),
    ("Service/Config", "Port"),
    ("Service/Monitor", "Port"),
    ("Service/Monitor", "NumConnectionsOpened"),
    ("Service/Monitor", "PktBytesIn"),
    ("Service/Monitor", "PktBytesOut"),
    ("ServiceManager/Monitor", "PktBytesIn"),
    ("ServiceManager/Monitor", "PktBytesOut"),
    ("ConnectionManager/Monitor", "NumConnectionsOpened"),
    ("Destination/Monitor", "AvgNumActiveConsumers"),
    ("Destination/Monitor", "AvgNumConsumers"),
    ("Destination/Monitor", "AvgNumMsgs"),
    ("Destination/Monitor", "AvgTotalMsgBytes"),
    ("Destination/Monitor", "DiskReserved"),
    ("Destination/Monitor", "DiskUsed"),
    ("Destination/Monitor", "DiskUtilizationRatio"),
    ("Log/Config", "LogDirectory"),
    ("JVM/Monitor", "FreeMemory"),
    ("JVM/Monitor", "MaxMemory"),
    ("JVM/Monitor", "TotalMemory"),
}
# Values where ours differs from the stock broker on purpose or by its defaults, by
# (type/subtype, attribute, the MBean's name key or "" for any): listed in
# docs/reference/jmx.md ("Differences from the stock broker").
DIFFERENT = {
    ("Destination/Config", "ConsumerFlowLimit", '"mq.sys.dmq"'),
    ("Destination/Config", "LocalOnly", '"mq.sys.dmq"'),
    ("Service/Config", "MaxThreads", "ssljms"),
    ("Log/Config", "RolloverBytes", ""),
    ("Log/Config", "RolloverSecs", ""),
}
_ID = re.compile(r"id=\d+")
_ADDRESS = re.compile(r"(Address:java\.lang\.String=)[^,}]*")
# A connection's ClientPlatform names the client machine's kernel release (Java's
# os.version): the catalogue was captured on another kernel build than a later run's.
_OS_VERSION = re.compile(r"(\(JMS; \S+ )\S+( \S+\))")

Attrs = dict[tuple[str, str, str], tuple[str, str, str]]


def _kind(name: str) -> tuple[str, str]:
    """("Type/Subtype", the name key) of a canonical ObjectName."""
    keys = dict(kv.split("=", 1) for kv in name.split(":", 1)[1].split(","))
    return f"{keys['type']}/{keys['subtype']}", keys.get("name", "")


def parse(lines: list[str]) -> tuple[set[str], Attrs]:
    """The MBean names (by phase) and attributes printed by JmxCatalog, connection ids,
    cluster addresses and the client's kernel release normalised."""
    names: set[str] = set()
    attrs: Attrs = {}
    for line in lines:
        line = _ID.sub("id=ID", line)
        if line.startswith("mbean "):
            names.add(line[6:])
        elif line.startswith("attr "):
            phase, name, attr, declared, rest = line[5:].split(" ", 4)
            vtype, _, value = rest.partition(" ")
            value = _OS_VERSION.sub(r"\1OSVERSION\2", _ADDRESS.sub(r"\1ADDR", value))
            attrs[(phase, name, attr)] = (declared, vtype, value)
    return names, attrs


def test_every_mbean_and_attribute_as_the_stock_broker(
    request: pytest.FixtureRequest, java_programs
) -> None:
    stock_names, stock = parse(STOCK.read_text().splitlines())
    tmp = Path(tempfile.mkdtemp(prefix="imq-jmxcat-"))
    # Brokers that do not answer getMBeanInfo are asked for the stock attribute names.
    names_file = tmp / "attributes.txt"
    names_file.write_text("".join(sorted({f"{_kind(n)[0]} {a}\n" for _p, n, a in stock})))
    b = start_either(broker_kind(request.config), tmp, "imq.jmx.connector.activelist=jmxrmi")
    try:
        r = java_programs.run("JmxCatalog", b, str(names_file))
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.checks == dict.fromkeys(
        ("connect", "idle catalogue", "busy catalogue", "close"), "ok"
    ), r.explain()
    names, ours = parse(r.lines)
    assert sorted(names) == sorted(stock_names), r.explain()
    assert sorted(ours) == sorted(stock), "attributes differ"
    problems = []
    for key, (declared, vtype, value) in sorted(stock.items()):
        phase, name, attr = key
        kind, name_key = _kind(name)
        o_declared, o_vtype, o_value = ours[key]
        if o_declared != "?" and o_declared != declared:
            problems.append(f"{phase} {name} {attr}: declared {o_declared}, stock {declared}")
        if o_vtype != vtype:
            problems.append(f"{phase} {name} {attr}: a {o_vtype}, stock a {vtype}")
            continue
        if (kind, attr) in VARIABLE:
            continue
        if (kind, attr, name_key) in DIFFERENT or (kind, attr, "") in DIFFERENT:
            continue
        if o_value != value:
            problems.append(f"{phase} {name} {attr}: {o_value!r}, stock {value!r}")
    assert not problems, "\n".join(problems)
