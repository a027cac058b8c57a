"""The JMX connectors' transports with the stock client (JmxTransport.java:
AdminConnectionFactory with mq://host:port/CONNECTOR): ssljmxrmi over TLS with the
broker's key material (the client trusting its certificate through
javax.net.ssl.trustStore), and the RMI registry form of the service URL
(imq.jmx.rmiregistry.start: service:jmx:rmi://HOST/jndi/rmi://HOST:PORT/...).
Both also run against the stock broker (``--interop-broker=stock``)."""

from __future__ import annotations

import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest

from .jvm import broker_kind, start_either
from .test_java_tls import our_key_material, stock_key_material, trust_args, truststore

pytestmark = pytest.mark.timeout(300)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ssljmxrmi(tmp_path: Path, java_programs: Any, request: pytest.FixtureRequest) -> None:
    kind = broker_kind(request.config)
    make = stock_key_material if kind == "stock" else our_key_material
    crt, props = make(tmp_path)
    b = start_either(kind, tmp_path, "imq.jmx.connector.activelist=jmxrmi,ssljmxrmi", *props)
    try:
        trust = trust_args(truststore(tmp_path / "trusting.p12", crt))
        r = java_programs.run("JmxTransport", b, "ssljmxrmi", jvm_args=trust)
    finally:
        b.stop()
    assert r.checks == {"connect ssljmxrmi": "ok"}, r.explain()
    info = dict(line[5:].split(" ", 1) for line in r.lines if line.startswith("info "))
    assert info["version"] == "6.9.0", r.explain()
    assert "/stub/rO0AB" in info["url"], r.explain()


def test_rmi_registry_url(request: pytest.FixtureRequest, java_programs: Any) -> None:
    kind = broker_kind(request.config)
    tmp = Path(tempfile.mkdtemp(prefix="imq-jmxreg-"))
    port = _free_port()
    b = start_either(
        kind,
        tmp,
        "imq.jmx.connector.activelist=jmxrmi",
        "imq.jmx.rmiregistry.start=true",
        f"imq.jmx.rmiregistry.port={port}",
    )
    try:
        r = java_programs.run("JmxTransport", b, "jmxrmi")
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.checks == {"connect jmxrmi": "ok"}, r.explain()
    info = dict(line[5:].split(" ", 1) for line in r.lines if line.startswith("info "))
    # The registry's host and the broker's are imq.hostname (localhost when unset).
    want = rf"service:jmx:rmi://[^/]+/jndi/rmi://([^:/]+):{port}/\1/{b.portmapper_port}/jmxrmi"
    assert re.fullmatch(want, info["url"]), r.explain()
    assert info["version"] == "6.9.0", r.explain()
