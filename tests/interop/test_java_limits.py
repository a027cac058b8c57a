"""Size and count limits as OpenMQ reads them, with the stock Java client and the stock
imqcmd (Limits.java), on a broker of the test's own:

- every limit 0 (``imq.message.max_size``, ``imq.system.max_count``/``max_size``, the
  auto-created destinations' ``maxNumMsgs``/``maxTotalMsgBytes``/``maxBytesPerMsg``): no
  limit, as on OpenMQ's broker (a 2 MB message and more go through);
- the stock imqcmd creates a queue with ``maxBytesPerMsg=512K``, updates it to ``10k``
  (``maxTotalMsgBytes=1m``, ``maxNumMsgs=0``), and sets the broker's
  ``imq.message.max_size`` to ``20k`` (size strings, read by the broker as OpenMQ's
  SizeString); the largest body a persistent send gets through is the same on both
  brokers, since both count the whole packet as the client sent it, and the next byte
  throws the same exception.

``--interop-broker=stock`` runs the same against the stock broker.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from .imqcmd_stock import StockImqcmd, compile_java, missing
from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(400)

ZERO = (
    "imq.message.max_size=0",
    "imq.system.max_count=0",
    "imq.system.max_size=0",
    "imq.autocreate.destination.maxNumMsgs=0",
    "imq.autocreate.destination.maxTotalMsgBytes=0",
    "imq.autocreate.destination.maxBytesPerMsg=0",
)

# The largest bodies the stock broker takes from Limits.java (queue names of 17 characters):
# 10240 and 20480 bytes of packet less the 140 the client's packet carries besides the body.
LARGEST_DEST = 10100
LARGEST_BROKER = 20340
# What the stock client throws for a message over either limit (423 in the SEND_REPLY).
REFUSED = "com.sun.messaging.jms.JMSException C4095 [C4095]: Message exceeds the single message size limit"


def test_java_limits_zero_units_and_boundaries(
    request: pytest.FixtureRequest, java_programs: Any
) -> None:
    kind = broker_kind(request.config)
    lacking = missing()
    if lacking:
        pytest.fail("the stock imqcmd cannot run; missing: " + "; ".join(lacking), pytrace=False)
    tmp = Path(tempfile.mkdtemp(prefix="imq-java-limits-"))
    sfx = uuid.uuid4().hex[:10]
    b = start_either(kind, tmp, *ZERO)
    try:
        r = java_programs.run("Limits", b, "unlimited", sfx)
        assert r.checks == {"zero_means_unlimited": "ok"}, r.explain()

        imqcmd = StockImqcmd(tmp, compile_java(tmp / "imqcmd"))
        out = imqcmd.batch(
            f"{b.host}:{b.portmapper_port}",
            [
                ["create", "dst", "-t", "q", "-n", f"jlim_d_{sfx}", "-o", "maxBytesPerMsg=512K"],
                ["update", "dst", "-t", "q", "-n", f"jlim_d_{sfx}", "-o", "maxBytesPerMsg=10k",
                 "-o", "maxTotalMsgBytes=1m", "-o", "maxNumMsgs=0"],
                ["update", "bkr", "-o", "imq.message.max_size=20k"],
                ["query", "dst", "-t", "q", "-n", f"jlim_d_{sfx}"],
                ["query", "bkr"],
            ],
        )  # fmt: skip
        assert [x.returncode for x in out] == [0] * 5, "\n".join(map(str, out))
        assert "Warning [A2011]" in out[1].output, out[1]  # imqcmd's own: 0 sent as -1
        q = out[3].pairs()
        assert q["Max Bytes per Message"] == "10240", out[3]
        assert q["Max Total Message Bytes"] == "1048576", out[3]
        assert q["Max Number of Messages"] == "unlimited (-1)", out[3]
        assert out[4].pairs()["Max Message Size"] == "20k", out[4]

        r = java_programs.run("Limits", b, "boundary", sfx)
        assert r.checks == {"boundary_dest": "ok", "boundary_broker": "ok"}, r.explain()
        info = dict(line[5:].split(" ", 1) for line in r.lines if line.startswith("info "))
        assert info["largest_body_dest"] == str(LARGEST_DEST), r.explain()
        assert info["largest_body_broker"] == str(LARGEST_BROKER), r.explain()
        assert info["refused_broker"].startswith(REFUSED), r.explain()
        assert info["refused_dest"].startswith(REFUSED), r.explain()
    finally:
        b.stop()
