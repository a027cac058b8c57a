"""The issue's monitoring check, short: JmxPoll.java (the JDK's javax.management with the
stock client's AdminConnectionFactory, no code of ours) reads every attribute of every
MBean once a second, and invokes every read-only operation without parameters, while a
stock JMS producer and consumer run, and listens to the ConnectionManager's
notifications.  No call may fail, every attribute asked for must come back, and the
load's connection must be told opened and closed.  The minute-long run with the rate
measurement is bench/jmx_poll.py.  ``--interop-broker=stock`` runs it against the stock
broker.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

SECONDS = 4


def test_polling_every_attribute_under_load(request: pytest.FixtureRequest, java_programs) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="imq-jmxpoll-"))
    b = start_either(broker_kind(request.config), tmp, "imq.jmx.connector.activelist=jmxrmi")
    try:
        r = java_programs.run("JmxPoll", b, str(SECONDS), "ops", "load")
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.checks == dict.fromkeys(("connect", "load", "poll", "close"), "ok"), r.explain()
    info = {
        line.split()[1]: line.split(maxsplit=2)[2] for line in r.lines if line.startswith("info ")
    }
    assert info["polls"] == str(SECONDS), r.explain()
    assert info["errors"] == "0" and info["missing"] == "0", r.explain()
    # Each round read the 37 idle MBeans' attributes (315) and more (the load's).
    rounds = [line.split() for line in r.lines if line.startswith("round ")]
    assert len(rounds) == SECONDS
    assert all(int(x[3]) >= 37 and int(x[5]) >= 315 for x in rounds), r.explain()
    assert int(info["invoked"]) > 0 and int(info["received"]) > 0, r.explain()
    notes = {line.split()[1] for line in r.lines if line.startswith("notification ")}
    assert {"mq.connection.open", "mq.connection.close"} <= notes, r.explain()
