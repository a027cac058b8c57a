"""Reconnect and failover with the stock Java client itself (imq.jar, imqReconnectEnabled=true),
tests/interop/java/FailoverClient.java; the packet-level tests stay in tests/test_java_reconnect.py.

* A conventional cluster of two of our brokers: a producer and a consumer on broker A (the
  first of their imqAddressList) keep going on B after A is SIGKILLed; A is restarted for
  the messages stored on it; every message sent is received and one delivered again says
  JMSRedelivered.
* An HA pair on PostgreSQL: the client (A alone in its address list) connects before B
  starts and learns of B from the cluster INFO packet A sends (regression: it used to
  learn of other brokers only from HELLO_REPLY), then fails over to the taker B when A is
  SIGKILLed; its producer goes on, and its open transaction is completed there.

These run against our brokers: the stock broker's clusters need non-loopback addresses in
a private network namespace (third_party/openmq/realbroker/README.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import BrokerProcess, start_broker
from tests import jvmcds
from tests.cluster_procs import start_cluster, start_member, wait_linked
from tests.pg import fresh_database

from .conftest import ProbeResult
from .jvm import classpath

pytestmark = pytest.mark.timeout(400)


def run_interactive(
    java_programs: Any,
    main: str,
    args: list[str],
    actions: dict[str, Callable[[], None]],
    timeout: float = 240,
) -> ProbeResult:
    """One JVM whose "ask WHAT" lines are answered by doing ``actions[WHAT]`` then "done"."""
    # The programs' flags and class-data archive (tests/jvmflags.py, tests/jvmcds.py).
    cmd = ["java", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", jvmcds.argfile("client"),
           "-cp", classpath(java_programs.classes), main, *args]  # fmt: skip
    out: list[str] = []
    # stderr to a file: a client logging much through a failover never blocks on a pipe.
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
        )
        # A client that hangs is ended, and its lines so far are reported.
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None and proc.stdin is not None
            for line in proc.stdout:
                print(line, end="", flush=True)  # shown by pytest when the test fails
                out.append(line)
                if line.startswith("ask "):
                    actions[line[4:].strip()]()
                    proc.stdin.write("done\n")
                    proc.stdin.flush()
            proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        return ProbeResult(proc.returncode, "".join(out), err.read())


def sigkill(b: BrokerProcess) -> None:
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)


def start_ha_member(
    tmp_path: Path, name: str, url: str, started: list[BrokerProcess]
) -> BrokerProcess:
    """HA broker ``name`` of the cluster on database ``url``, in ``tmp_path/name``;
    appended to ``started`` (the test stops each)."""
    from tests.test_ha import ha_props

    d = tmp_path / name
    d.mkdir()
    b = start_broker(d, *ha_props(name), database_url=url, instance=name)
    started.append(b)
    return b


def test_conventional_cluster_failover(tmp_path: Path, java_programs: Any) -> None:
    a, b = start_cluster(tmp_path, 2, names=("A", "B"))
    brokers = [a, b]
    try:
        addresses = ",".join(f"mq://{x.host}:{x.portmapper_port}/jms" for x in (a, b))

        def restart() -> None:
            # The same instance directory: its store holds the messages sent to it.
            again = start_member(tmp_path / "A", a.extra["brokerlist"], a.portmapper_port, "A")
            brokers.append(again)
            wait_linked([again, b], timeout=60)

        queue = f"interop.failover.{uuid.uuid4().hex[:8]}"
        r = run_interactive(
            java_programs,
            "FailoverClient",
            [a.host, str(a.portmapper_port), "cluster", addresses, queue, "300"],
            {"kill": lambda: sigkill(a), "restart": restart},
        )
        assert r.checks == {
            "producer_and_consumer_through_kill": "ok",
            "both_reconnected_to_the_other_broker": "ok",
            "every_sent_message_received": "ok",
            "redelivered_ones_flagged": "ok",
        }, r.explain()
        print("\n".join(line for line in r.lines if line.startswith("info ")))
        for x in brokers[1:]:
            assert "Traceback" not in x.log_text(), x.log_text()[-4000:]
    finally:
        for x in brokers:
            x.stop()


def test_ha_failover_with_open_transaction(
    tmp_path: Path, java_programs: Any, postgres_url: str
) -> None:
    from tests.test_ha import wait_log

    url = fresh_database(postgres_url, f"jf_{uuid.uuid4().hex[:10]}")
    started: list[BrokerProcess] = []
    try:

        def start(name: str) -> BrokerProcess:
            return start_ha_member(tmp_path, name, url, started)

        a = start("brokerA")
        tag = uuid.uuid4().hex[:8]
        r = run_interactive(
            java_programs,
            "FailoverClient",
            [a.host, str(a.portmapper_port), "ha", f"interop.ha.q{tag}", f"interop.ha.t{tag}"],
            # B joins after the client connected to A (it learns of B from a cluster INFO).
            {"second": lambda: start("brokerB") and None, "kill": lambda: sigkill(a)},
        )
        b = started[1]
        assert r.checks == {
            "ha_connected": "ok",
            "ha_broker_list_updated_by_info": "ok",
            "ha_producer_and_open_transaction_through_kill": "ok",
            "ha_every_sent_message_received": "ok",
            "ha_transaction_sends_committed_once": "ok",
            "ha_both_reconnected_to_the_taker": "ok",
        }, r.explain()
        print("\n".join(line for line in r.lines if line.startswith("info ")))
        wait_log(b, "took over broker brokerA")
        assert "Traceback" not in b.log_text(), b.log_text()[-4000:]
    finally:
        for x in started:
            x.stop()
