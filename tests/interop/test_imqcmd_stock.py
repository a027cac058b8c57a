"""The stock OpenMQ 6.9 imqcmd (imqadmin.jar) against our broker, its output parsed into
tables: every list, query, metrics, pause/resume, update, compact and shutdown subcommand
an administrator uses, after a stock-client workload (tests/interop/imqcmd_stock.py), and
``list bkr`` in a conventional cluster and in an HA pair on PostgreSQL.

The whole sequence runs in one JVM (ImqcmdBatch: the stock BrokerCmd's own parse, check
and run steps), ``shutdown bkr`` through BrokerCmd.main itself.  The tests fail, never
skip, naming what is missing when java, javac or the jars are not there.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.launcher import BrokerProcess, start_broker
from tests.cluster_procs import start_cluster, wait_for
from tests.pg import fresh_database

from .imqcmd_stock import SEQUENCE, Result, StockImqcmd, Workload, compile_java, missing

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lacking = missing()
    if lacking:
        pytest.fail(
            "the stock imqcmd tests cannot run; missing: " + "; ".join(lacking), pytrace=False
        )
    return compile_java(tmp_path_factory.mktemp("imqcmd-java"))


@pytest.fixture
def imqcmd(tmp_path: Path, java_classes: Path) -> StockImqcmd:
    return StockImqcmd(tmp_path, java_classes)


def addr(b: BrokerProcess) -> str:
    return f"{b.host}:{b.portmapper_port}"


def ok(r: Result, success: str) -> None:
    assert r.returncode == 0 and success in r.output, str(r)


def test_stock_imqcmd_sequence(tmp_path: Path, imqcmd: StockImqcmd, java_classes: Path) -> None:
    (tmp_path / "b").mkdir()
    b = start_broker(tmp_path / "b", instance="imqbroker")
    try:
        work = Workload(java_classes, b.host, b.portmapper_port)
        try:
            results = imqcmd.batch(addr(b), SEQUENCE)
        finally:
            work.close()
        r = {" ".join(x.args): x for x in results}
        seq = iter(results)

        def nxt(*args: str) -> Result:
            x = next(seq)
            assert x.args == list(args), x.args
            return x

        # query bkr: OpenMQ's lines, the figures of the workload (3 + 1 in a transaction
        # on cmp.q, 2 on cmp.t: OpenMQ counts a transaction's messages from the send on)
        q = nxt("query", "bkr")
        ok(q, "Successfully queried the broker.")
        p = q.pairs()
        assert p["Version"] == "6.9.0"
        assert p["Instance Name"] == "imqbroker"
        assert p["Primary Port"] == str(b.portmapper_port)
        assert p["Current Number of Messages in System"] == "6"
        assert p["Cluster is Highly Available"] == "false"
        assert p["Max Message Size"] == "70m"

        # list dst: every destination, its counts
        lst = nxt("list", "dst")
        ok(lst, "Successfully listed destinations.")
        rows = lst.table().by("Name")
        assert set(rows) == {"cmp.q", "cmp.t", "cmp.idle", "mq.sys.dmq"}
        cq, ct = rows["cmp.q"], rows["cmp.t"]
        assert (cq["Type"], cq["State"], cq["Producers Total"]) == ("Queue", "RUNNING", "2")
        assert (cq["Msgs Count"], cq["Msgs UnAck"]) == ("3", "1")
        assert (ct["Type"], ct["Consumers Total"], ct["Msgs Count"]) == ("Topic", "1", "2")
        assert rows["cmp.idle"]["Consumers Total"] == "1"
        size = float(cq["Msgs Avg Size"])
        assert 200 < size < 400  # the Java client's 100-character TextMessage, as sent
        assert set(nxt("list", "dst", "-t", "q").table().by("Name")) == {
            "cmp.q",
            "cmp.idle",
            "mq.sys.dmq",
        }
        assert set(nxt("list", "dst", "-t", "t").table().by("Name")) == {"cmp.t"}

        qd = nxt("query", "dst", "-t", "q", "-n", "cmp.q").pairs()
        assert qd["Destination State"] == "RUNNING"
        assert qd["Current Number of Messages / Actual"] == "3"
        assert qd["Current Number of Messages / Held in Transaction"] == "1"
        assert qd["Current Number of Producers"] == "2"
        assert qd["Max Number of Messages"] == "100000"
        assert qd["Limit Behavior"] == "REJECT_NEWEST"
        td = nxt("query", "dst", "-t", "t", "-n", "cmp.t").pairs()
        assert td["Current Number of Consumers"] == "1"  # the inactive durable
        assert td["Current Number of Messages / Actual"] == "2"

        svc = nxt("list", "svc").table().by("Service Name")
        assert svc["jms"]["Service State"] == "RUNNING"
        assert svc["admin"]["Service State"] == "RUNNING"
        assert svc["jms"]["Port Number"] == f"{b.jms_port} (static)"
        assert set(svc) == {"admin", "jms"}  # the services that run (docs/reference/imqcmd.md)
        qs = nxt("query", "svc", "-n", "jms").pairs()
        assert qs["Service State"] == "RUNNING"
        assert qs["Current Number of Allocated Threads"] == "2"

        cxn = nxt("list", "cxn").table().dicts()
        guest = [c for c in cxn if c["User"] == "guest"]
        assert len(guest) == 1 and guest[0]["Service"] == "jms", cxn
        assert (guest[0]["Producers"], guest[0]["Consumers"]) == ("3", "1")
        assert any(c["User"] == "admin" and c["Service"] == "admin" for c in cxn)

        for args in (("list", "dur"), ("list", "dur", "-d", "cmp.t")):
            dur = nxt(*args).table().dicts()
            assert len(dur) == 1
            assert dur[0]["Subscription Name"] == "cmp-dur"
            assert dur[0]["Client ID"] == "cmp-client"
            assert (dur[0]["Messages"], dur[0]["Subscription State"]) == ("2", "INACTIVE")

        txn = nxt("list", "txn")
        ok(txn, "Successfully listed transactions.")
        mine = txn.tables()[1].dicts()  # [0] names the broker
        assert len(mine) == 1
        assert (mine[0]["State"], mine[0]["User name"], mine[0]["# Msgs/# Acks"]) == (
            "STARTED",
            "guest",
            "1/0",
        )

        bkr = nxt("list", "bkr")
        ok(bkr, "Successfully listed brokers in the cluster.")
        assert bkr.table().dicts() == [{"Address": addr(b), "State": "OPERATING"}]

        m = nxt("metrics", "bkr", "-msp", "1", "-int", "1").table().dicts()
        assert len(m) == 1 and int(m[0]["Msgs In"]) >= 6, m
        rts = nxt("metrics", "bkr", "-m", "rts", "-msp", "1", "-int", "1").table()
        assert rts.columns[:2] == ["Msgs/sec In", "Msgs/sec Out"] and len(rts.rows) == 1
        cx = nxt("metrics", "bkr", "-m", "cxn", "-msp", "1", "-int", "1").table().dicts()
        assert cx[0]["Num Connections"] == "2"  # the workload's and imqcmd's
        assert cx[0]["Threads Active"] == "4"
        md = nxt("metrics", "dst", "-t", "q", "-n", "cmp.q", "-msp", "1", "-int", "1").table()
        mq = md.dicts()[0]
        assert (mq["Msgs In"], mq["Msgs Out"], mq["Msg Count Current"]) == ("4", "0", "4")
        nxt("metrics", "dst", "-t", "q", "-n", "cmp.q", "-m", "rts", "-msp", "1", "-int", "1")
        con = nxt("metrics", "dst", "-t", "t", "-n", "cmp.t", "-m", "con", "-msp", "1", "-int", "1")
        assert con.table().dicts()[0]["Consumers Current"] == "1"
        ms = nxt("metrics", "svc", "-n", "jms", "-msp", "1", "-int", "1").table().dicts()
        assert ms[0]["Msgs In"] == "6" and ms[0]["Msgs Out"] == "0"
        nxt("metrics", "svc", "-n", "jms", "-m", "rts", "-msp", "1", "-int", "1")
        sc = nxt("metrics", "svc", "-n", "jms", "-m", "cxn", "-msp", "1", "-int", "1").table()
        assert sc.dicts()[0]["Num Connections"] == "1"

        ok(nxt("pause", "dst", "-t", "q", "-n", "cmp.q"), "Successfully paused the destination.")
        assert nxt("list", "dst", "-t", "q").table().by("Name")["cmp.q"]["State"] == "PAUSED"
        ok(
            nxt("compact", "dst", "-t", "q", "-n", "cmp.q"),
            "Successfully compacted the destination.",
        )
        ok(nxt("resume", "dst", "-t", "q", "-n", "cmp.q"), "Successfully resumed the destination.")
        ok(
            nxt("pause", "dst", "-t", "t", "-n", "cmp.t", "-pst", "PRODUCERS"),
            "Successfully paused",
        )
        assert nxt("query", "dst", "-t", "t", "-n", "cmp.t").pairs()["Destination State"] == (
            "PRODUCERS_PAUSED"
        )
        ok(nxt("resume", "dst", "-t", "t", "-n", "cmp.t"), "Successfully resumed the destination.")
        ok(nxt("pause", "svc", "-n", "jms"), "Successfully paused the service.")
        assert nxt("list", "svc").table().by("Service Name")["jms"]["Service State"] == "PAUSED"
        ok(nxt("resume", "svc", "-n", "jms"), "Successfully resumed the service.")
        ok(nxt("pause", "bkr"), "Successfully paused the broker.")
        assert nxt("query", "svc", "-n", "jms").pairs()["Service State"] == "PAUSED"
        ok(nxt("resume", "bkr"), "Successfully resumed the broker.")
        upd = nxt(
            "update", "dst", "-t", "q", "-n", "cmp.q", "-o", "maxNumMsgs=1000", "-o",
            "limitBehavior=FLOW_CONTROL",
        )  # fmt: skip
        ok(upd, "Successfully updated the destination.")
        qd = nxt("query", "dst", "-t", "q", "-n", "cmp.q").pairs()
        assert (qd["Max Number of Messages"], qd["Limit Behavior"]) == ("1000", "FLOW_CONTROL")
        ok(
            nxt("compact", "dst", "-t", "q", "-n", "cmp.q"),
            "Successfully compacted the destination.",
        )
        assert next(seq, None) is None
        assert r["list svc"].returncode == 0

        # shutdown bkr through BrokerCmd.main: the broker goes, cleanly
        down = imqcmd.run(addr(b), "shutdown", "bkr")
        ok(down, "Successfully shutdown the broker.")
        assert b.proc.wait(60) == 0
    finally:
        b.stop()


def test_stock_imqcmd_list_bkr_conventional_cluster(tmp_path: Path, imqcmd: StockImqcmd) -> None:
    brokers = start_cluster(tmp_path, 2)
    try:
        a, b = brokers
        # Both in one JVM (ImqcmdBatch).
        r, query = imqcmd.batch(addr(a), [["list", "bkr"], ["query", "bkr"]])
        ok(r, "Successfully listed brokers in the cluster.")
        assert r.pairs()["Cluster is Highly Available"] == "false"
        assert r.table().dicts() == [
            {"Address": addr(a), "State": "OPERATING"},
            {"Address": addr(b), "State": "OPERATING"},
        ]
        q = query.pairs()
        for x in (a, b):  # OpenMQ's URLs, as the stock broker gives them
            assert f"mq://{addr(x)}/" in q["Cluster Broker List (configured)"], q
            assert f"mq://{addr(x)}/" in q["Cluster Broker List (active)"], q
        b.stop()
        wait_for(lambda: "lost" in a.log_text() or "left the cluster" in a.log_text(), 30, "B gone")
        r = imqcmd.run(addr(a), "list", "bkr")
        assert r.table().dicts() == [
            {"Address": addr(a), "State": "OPERATING"},
            {"Address": addr(b), "State": "BROKER_DOWN"},
        ], str(r)
    finally:
        for x in brokers:
            x.stop()


@pytest.fixture
def ha_url(postgres_url: str) -> Iterator[str]:
    yield fresh_database(postgres_url, f"ha_imqcmd_{uuid.uuid4().hex[:10]}")


def test_stock_imqcmd_list_bkr_ha_pair(tmp_path: Path, imqcmd: StockImqcmd, ha_url: str) -> None:
    """Both brokers of an HA pair, with their ids, states and stored messages; after B is
    killed and taken over, B shows as taken over by A."""
    started: list[BrokerProcess] = []

    def start(broker_id: str) -> BrokerProcess:
        d = tmp_path / broker_id
        d.mkdir()
        props = (
            "imq.persist.store=jdbc",
            "imq.cluster.ha=true",
            "imq.cluster.clusterid=hacluster",
            f"imq.brokerid={broker_id}",
            "imq.cluster.monitor.interval=1",
            "imq.cluster.monitor.threshold=3",
        )
        x = start_broker(d, *props, database_url=ha_url, instance=broker_id)
        started.append(x)
        return x

    try:
        a, b = start("brokerA"), start("brokerB")

        def listed() -> list[dict[str, str]]:
            r = imqcmd.run(addr(a), "list", "bkr")
            ok(r, "Successfully listed brokers in the cluster.")
            p = r.pairs()
            assert (p["Cluster ID"], p["Cluster is Highly Available"]) == ("hacluster", "true")
            return r.table().dicts()

        last: list[dict[str, str]] = []

        def both_listed() -> bool:
            last[:] = listed()
            return len(last) == 2

        wait_for(both_listed, 60, "both brokers listed")
        rows = {x["Broker ID"]: x for x in last}
        assert rows["brokerA"]["Address"] == addr(a)
        assert rows["brokerB"]["Address"] == addr(b)
        assert rows["brokerA"]["State"] == rows["brokerB"]["State"] == "OPERATING"
        assert rows["brokerA"]["Msgs in store"] == "0"
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait(10)
        wait_for(lambda: "took over broker brokerB" in a.log_text(), 120, "A takes B over")
        rows = {x["Broker ID"]: x for x in listed()}
        assert rows["brokerB"]["State"] == "TAKEOVER_COMPLETE", rows
        assert rows["brokerB"]["ID of broker performing takeover"] == "brokerA", rows
        assert rows["brokerA"]["State"] == "OPERATING"
        # Ours reads the same reply (manage.py imqcmd list bkr).
        from tests.test_imqcmd import run_imqcmd

        imqcmd.passfile.chmod(0o600)
        own = run_imqcmd(a, "list", "bkr", passfile=imqcmd.passfile)
        assert own.returncode == 0, own.stderr
        lines = {line.split()[0]: line.split()[1:] for line in own.stdout.splitlines() if line}
        assert lines["brokerA"][:3] == [addr(a), "OPERATING", "0"], own.stdout
        assert lines["brokerB"][:4] == [addr(b), "TAKEOVER_COMPLETE", "0", "brokerA"], own.stdout
    finally:
        for x in started:
            x.stop()
