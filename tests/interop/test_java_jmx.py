"""JMX over RMI with the stock client's AdminConnectionFactory (JmxBasics.java): it
reads the jmxrmi service URL from the port mapper and connects with the JDK's own RMI
connector.  A wrong password and a user the admin rules deny are refused with a
SecurityException; admin lists the Broker MBeans and reads their attributes.

The expected names, Java types and answers below were printed by the same program
against the stock OpenMQ 6.9 broker (``--interop-broker=stock`` runs it there); the
values that name the broker (instance, port) are compared with the broker started.
Ours serves JMX only when imq.jmx.connector.activelist lists jmxrmi (the stock default).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

CHECKS = (
    "wrong password refused",
    "non-admin user refused",
    "connect as admin",
    "default domain",
    "mbean count",
    "query names",
    "is registered",
    "get attribute",
    "get attributes",
    "monitor attribute",
    "unknown attribute",
    "unknown mbean",
    "close",
)
# Printed by JmxBasics.java against the stock OpenMQ 6.9 broker (third_party/openmq/realbroker).
STOCK_INFO = {
    "refused": "java.lang.SecurityException",
    "guest-refused": "java.lang.SecurityException",
    "domain": "DefaultDomain",
    "broker-names": "[com.sun.messaging.jms.server:subtype=Config,type=Broker, "
    "com.sun.messaging.jms.server:subtype=Monitor,type=Broker]",
    "config.BrokerID": "null null",
    "config.Version": "String 6.9.0",
    "monitor.BrokerID": "null null",
    "monitor.Version": "String 6.9.0",
    "monitor.Embedded": "Boolean false",
    "getattributes": "Port=Integer Version=String",
    "nosuch": "javax.management.AttributeNotFoundException",
    "nombean": "javax.management.InstanceNotFoundException",
}


def test_jmx_broker_mbeans(request: pytest.FixtureRequest, java_programs) -> None:
    kind = broker_kind(request.config)
    tmp = Path(tempfile.mkdtemp(prefix="imq-jmx-"))
    b = start_either(kind, tmp, "imq.jmx.connector.activelist=jmxrmi")
    try:
        r = java_programs.run("JmxBasics", b)
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.checks == dict.fromkeys(CHECKS, "ok"), r.explain()
    info = {
        line[5:].partition(" ")[0]: line[5:].partition(" ")[2]
        for line in r.lines
        if line.startswith("info ")
    }
    for key, want in STOCK_INFO.items():
        assert info.get(key) == want, f"{key}: {info.get(key)!r}\n{r.explain()}"
    for bean in ("config", "monitor"):
        assert info[f"{bean}.InstanceName"] == f"String {b.instance}", r.explain()
        assert info[f"{bean}.Port"] == f"Integer {b.portmapper_port}", r.explain()
    assert info["config.Host"].startswith("String "), r.explain()
    assert info["url"].startswith("service:jmx:rmi://"), r.explain()
    assert "/stub/rO0AB" in info["url"], r.explain()
