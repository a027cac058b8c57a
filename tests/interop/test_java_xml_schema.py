"""XML schema validation (the destination attribute validateXMLSchemaEnabled): OpenMQ's
Java client validates, told by the broker's CREATE_DESTINATION reply (JMQValidateXMLSchema,
JMQXMLSchemaURIList, JMQReloadXMLSchemaOnFailure). XmlSchema.java sends a text that is not
XML to a queue made with the stock imqcmd ``-o validateXMLSchemaEnabled=true`` and is
refused by its own client (a valid document, checked against its own DTD, goes through), as against the stock broker (``--interop-broker=stock``)."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from .imqcmd_stock import StockImqcmd, compile_java
from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)


def test_the_client_validates_xml_where_the_destination_asks(
    request: pytest.FixtureRequest, java_programs
) -> None:
    kind = broker_kind(request.config)
    tmp = Path(tempfile.mkdtemp(prefix="imq-xmlschema-"))
    sfx = uuid.uuid4().hex[:10]
    b = start_either(kind, tmp)
    try:
        imqcmd = StockImqcmd(tmp, compile_java(tmp / "imqcmd"))
        out = imqcmd.batch(
            f"{b.host}:{b.portmapper_port}",
            [["create", "dst", "-t", "q", "-n", f"xml_{sfx}",
              "-o", "validateXMLSchemaEnabled=true"]],
        )  # fmt: skip
        assert out[0].returncode == 0, out[0]
        r = java_programs.run("XmlSchema", b, f"xml_{sfx}", f"plain_{sfx}")
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.checks == {
        "not_xml_refused_by_the_client": "ok",
        "valid_xml_goes_through": "ok",
        "plain_queue_takes_any_text": "ok",
    }, r.explain()
    refused = next(line for line in r.lines if line.startswith("info refused "))
    assert refused.startswith("info refused com.sun.messaging.jms.JMSException C4"), r.explain()
    assert r.returncode == 0, r.explain()
