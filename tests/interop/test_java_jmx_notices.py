"""The notifications a broker tells of its own state, with the stock client only
(AdminConnectionFactory and javax.management): the memory state changing, as OpenMQ's
BrokerNotification ``mq.broker.resource.state.change`` (JmxResourceState.java), and
another broker of the cluster joining and going, as its ClusterNotification
(JmxClusterNotices.java).

Ours only: the stock broker's memory states follow its JVM heap, not
imq.system.max_size, so the same program cannot turn it RED (docs/reference/jmx.md).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from .jvm import Paused, broker_kind, start_either

pytestmark = pytest.mark.timeout(300)


def test_resource_state_notifications(request: pytest.FixtureRequest, java_programs) -> None:
    if broker_kind(request.config) == "stock":
        pytest.skip("the stock broker's memory states follow its JVM heap")
    tmp = Path(tempfile.mkdtemp(prefix="imq-jmxnotices-"))
    b = start_either("ours", tmp, "imq.jmx.connector.activelist=jmxrmi")
    try:
        r = java_programs.run("JmxResourceState", b)
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.returncode == 0, r.explain()
    states = [line for line in r.lines if line.startswith("info ")]
    assert states == [
        "info state GREEN >RED   ",
        "info monitor-state RED   ",
        "info state RED   >GREEN ",
        "info monitor-state GREEN ",
    ], r.explain()


def test_cluster_join_and_down_notifications(tmp_path: Path, java_programs) -> None:
    """Broker A of a two-broker cluster (B its master broker) tells a JMX client of the
    stock kind when B links up and when B goes, as OpenMQ's ClusterNotification."""
    from broker.launcher import free_port
    from tests.cluster_procs import start_member

    pm_a, pm_b = free_port(), free_port()
    brokerlist = f"127.0.0.1:{pm_a},127.0.0.1:{pm_b}"
    master = f"imq.cluster.masterbroker=127.0.0.1:{pm_b}"
    a = start_member(
        tmp_path / "A", brokerlist, pm_a, "A", master, "imq.jmx.connector.activelist=jmxrmi"
    )
    b = None
    run = Paused(java_programs.command("JmxClusterNotices", a))
    try:
        assert run.until("ready"), run.finish().explain()
        b = start_member(tmp_path / "B", brokerlist, pm_b, "B", master)
        assert run.until("pause"), run.finish().explain()
        b.stop()
        r = run.finish()
    finally:
        run.kill()
        if b is not None:
            b.stop()
        a.stop()
    assert r.returncode == 0, r.explain()
    told = [line for line in r.lines if line.startswith("info ")]
    assert told == [
        f"info mq.cluster.broker.join address=127.0.0.1:{pm_b} master=true ha=false",
        f"info mq.cluster.broker.down address=127.0.0.1:{pm_b} master=true ha=false",
    ], r.explain()
