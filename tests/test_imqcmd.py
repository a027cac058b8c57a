"""``python manage.py imqcmd`` against real brokers (admin.md): every subcommand, ``-f``,
``-s``, ``-passfile`` and the password prompt, the "Are you sure?" question, and refused
input.

Each family of subcommands (bkr, dst, svc, cxn, dur, txn, cls, metrics), the questions,
the prompt and ``-s`` run as a process of their own, as an administrator runs them; the
other calls, whose check is what the command prints, run inside the test process
(tests/manage_inproc.py: the same command, without a second of Django start-up each).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker.launcher import start_broker
from broker.protocol.jtypes import JInt
from broker.protocol.types import PacketType, XAFlag
from openmq_client import AckMode, Queue, TextMessage, Topic, connect
from tests.manage_fork import run_manage
from tests.manage_inproc import call_manage

ROOT = Path(__file__).resolve().parent.parent
SUCCESS = "Successfully performed the requested operation."
# The subcommands that change nothing, run inside the test process unless asked otherwise:
# a change is recorded in the broker's database (broker/admintools/actions/common.py), which is
# not the test process's.
READ_ONLY = {"list", "query", "metrics"}

pytestmark = pytest.mark.timeout(180)


def uniq(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


@pytest.fixture
def passfile(tmp_path: Path) -> Path:
    p = tmp_path / "passfile"
    p.write_text("# imqcmd\nimq.imqcmd.password=admin\n")
    return p


def run_imqcmd(
    b,
    *args: str,
    passfile: Path | None = None,
    force: bool = True,
    answer: str | None = None,
    real: bool | None = None,
) -> subprocess.CompletedProcess:
    """imqcmd against broker ``b``; ``answer`` is what is typed on stdin (questions, the
    password prompt).  With ``real`` (by default: a subcommand that changes something), or
    when it reads stdin (a question, the password prompt), its own process and session
    (tests/manage_fork.py): no controlling terminal to prompt on; else inside this process
    (tests/manage_inproc.py)."""
    if real is None:
        real = args[0] not in READ_ONLY
    cmd = ["imqcmd", *args]
    cmd += ["-b", f"127.0.0.1:{b.portmapper_port}", "-u", "admin", "-rtm", "10"]
    if passfile is not None:
        cmd += ["-passfile", str(passfile)]
    if force:
        cmd.append("-f")
    if real or passfile is None or not force or answer is not None:
        return run_manage(cmd, env=b.extra["env"], timeout=90, input=answer)
    return call_manage(cmd)


def imqcmd(b, passfile: Path, *args: str, real: bool | None = None) -> subprocess.CompletedProcess:
    return run_imqcmd(b, *args, passfile=passfile, real=real)


def ok(b, passfile: Path, *args: str, real: bool | None = None) -> str:
    r = imqcmd(b, passfile, *args, real=real)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert SUCCESS in r.stdout
    return r.stdout


def refused(b, passfile: Path, *args: str, force: bool = True, real: bool = False) -> str:
    """The command fails: non-zero exit, one line on stderr (returned).  Inside this
    process unless ``real``, whatever the subcommand: refused, it records nothing."""
    r = run_imqcmd(b, *args, passfile=passfile, force=force, real=real)
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert SUCCESS not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error"), r.stderr
    return lines[0]


def send(b, dest: str, count: int, topic: bool = False) -> None:
    async def run() -> None:
        conn = await connect(b.host, b.portmapper_port)
        try:
            sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
            prod = await sess.create_producer(Topic(dest) if topic else Queue(dest))
            for n in range(count):
                await prod.send(TextMessage(f"m{n}"))
        finally:
            await conn.close()

    asyncio.run(run())


def row(out: str, first: str) -> list[str]:
    """The one table row whose first column is ``first``, split on blanks."""
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == [first]]
    assert len(rows) == 1, out
    return rows[0]


def value(out: str, label: str) -> str:
    """The value of the (last) ``label    value`` line of a query's output."""
    found = [ln[len(label) :].strip() for ln in out.splitlines() if ln.startswith(label + "  ")]
    assert found, f"no {label!r} in:\n{out}"
    return found[-1]


def dst_count(b, passfile: Path, name: str) -> int | None:
    """Msgs Count of ``name`` in list dst (None when it is not listed)."""
    out = ok(b, passfile, "list", "dst")
    rows = [ln.split() for ln in out.splitlines() if ln.split()[:1] == [name]]
    return int(rows[0][7]) if rows else None


def metric_rows(out: str) -> list[str]:
    """The data rows of a metrics table (between the second dashed line and the end)."""
    lines = out.splitlines()
    dashes = [i for i, ln in enumerate(lines) if ln and set(ln) == {"-"}]
    start = dashes[-1] + 1
    rows = []
    for ln in lines[start:]:
        if not ln.strip():
            break
        rows.append(ln)
    return rows


@pytest.fixture(scope="module")
def quiet_broker(tmp_path_factory):
    """A broker of this module's, for the tests that change its state and put it back
    (log level, quiesce, paused service, threads, metrics reset) or need one no other
    module's tests use (no transactions at all)."""
    b = start_broker(tmp_path_factory.mktemp("imqcmd"))
    yield b
    b.stop()


# -- broker ----------------------------------------------------------------------------


def test_query_bkr_shows_instance(broker, passfile):
    out = ok(broker, passfile, "query", "bkr")
    assert value(out, "Instance Name") == broker.instance
    assert value(out, "Primary Port") == str(broker.portmapper_port)
    assert value(out, "Broker State") == "RUNNING"
    # OpenMQ's little broker table first.
    assert re.search(rf"^127\.0\.0\.1\s+{broker.portmapper_port}$", out, re.M), out


def test_pause_and_resume_bkr(broker, passfile):
    try:
        ok(broker, passfile, "pause", "bkr")
        out = ok(broker, passfile, "list", "svc")
        assert row(out, "jms")[-1] == "PAUSED" and row(out, "admin")[-1] == "RUNNING"
    finally:
        ok(broker, passfile, "resume", "bkr")
    assert row(ok(broker, passfile, "list", "svc"), "jms")[-1] == "RUNNING"


def test_update_bkr_quiesce_and_reload_acl(quiet_broker, passfile):
    b = quiet_broker
    level = value(ok(b, passfile, "query", "bkr"), "Log Level")
    try:
        ok(b, passfile, "update", "bkr", "-o", "imq.log.level=DEBUG")
        assert value(ok(b, passfile, "query", "bkr"), "Log Level") == "DEBUG"
    finally:
        ok(b, passfile, "update", "bkr", "-o", f"imq.log.level={level}")
    try:
        ok(b, passfile, "quiesce", "bkr")
        assert value(ok(b, passfile, "query", "bkr"), "Broker State") == "QUIESCED"
    finally:
        ok(b, passfile, "unquiesce", "bkr")
    assert value(ok(b, passfile, "query", "bkr"), "Broker State") == "RUNNING"
    out = ok(b, passfile, "reload", "acl")
    assert "access control" in out


def test_metrics_bkr_svc_dst_and_reset(quiet_broker, passfile):
    b = quiet_broker
    q = uniq("metricsQ")
    send(b, q, 3)
    out = ok(b, passfile, "metrics", "dst", "-t", "q", "-n", q, "-msp", "1", real=True)
    assert "Msg Count" in out and "Total Msg Bytes (k)" in out
    [line] = metric_rows(out)
    cells = line.split()
    assert cells[:2] == ["3", "0"] and int(cells[2]) > 0  # Msgs In/Out, Msg Bytes In
    assert cells[4] == "3"  # Msg Count, current

    # OpenMQ's loop: a row now and one every -int seconds; rates start at 0.
    out = ok(b, passfile, "metrics", "bkr", "-m", "rts", "-int", "1", "-msp", "2")
    assert "Msgs/sec" in out and "Pkt Bytes/sec" in out
    rows = metric_rows(out)
    assert len(rows) == 2 and rows[0].split() == ["0"] * 8

    out = ok(b, passfile, "metrics", "svc", "-n", "jms", "-msp", "1")
    assert "Msg Bytes" in out and "Pkt Bytes" in out
    [line] = metric_rows(out)
    jms = [int(c) for c in line.split()]
    assert len(jms) == 8 and jms[0] >= 3 and jms[4] > 0  # Msgs In, Pkts In

    out = ok(b, passfile, "metrics", "bkr", "-m", "cxn", "-msp", "1")
    [line] = metric_rows(out)
    assert int(line.split()[0]) >= 1  # this imqcmd's own connection

    ok(b, passfile, "reset", "bkr")
    [line] = metric_rows(ok(b, passfile, "metrics", "svc", "-n", "jms", "-msp", "1"))
    assert int(line.split()[0]) < jms[0]


def test_restart_bkr(own_broker, passfile):
    b = own_broker()
    out = ok(b, passfile, "restart", "bkr")
    assert "Restarting the broker" in out
    deadline = time.monotonic() + 60
    while True:
        r = imqcmd(b, passfile, "query", "bkr")
        if r.returncode == 0:
            break
        assert time.monotonic() < deadline, r.stderr
        time.sleep(0.5)
    assert b.proc.poll() is None  # the same process, started again


def test_shutdown_bkr(own_broker, passfile):
    b = own_broker()
    out = ok(b, passfile, "shutdown", "bkr")
    assert "Shutting down" in out
    deadline = time.monotonic() + 30
    while b.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert b.proc.poll() is not None


# -- destinations ----------------------------------------------------------------------


def test_list_query_purge_destroy_dst(broker, passfile):
    send(broker, "imqcmdQ", 3)
    out = ok(broker, passfile, "list", "dst")
    assert "Wildcard" in out and "Avg Size" in out and "temporary_destination" not in out
    # Name, Type, State, Producers (Total, Wildcard), Consumers (Total, Wildcard),
    # Msgs (Count, Remote, UnAck, Avg Size)
    cells = row(out, "imqcmdQ")
    assert cells[1:4] == ["Queue", "RUNNING", "0"] and cells[7] == "3" and float(cells[11]) > 0
    assert "temporary_destination" in ok(broker, passfile, "list", "dst", "-tmp")
    out = ok(broker, passfile, "list", "dst", "-t", "t")
    assert not any(ln.split()[:1] == ["imqcmdQ"] for ln in out.splitlines())
    out = ok(broker, passfile, "query", "dst", "-t", "q", "-n", "imqcmdQ")
    assert value(out, "Destination Name") == "imqcmdQ"
    assert value(out, "Created Administratively") == "false"
    assert any(ln.split() == ["Actual", "3"] for ln in out.splitlines()), out
    out = ok(broker, passfile, "purge", "dst", "-t", "q", "-n", "imqcmdQ")
    assert "Purging the destination" in out
    assert dst_count(broker, passfile, "imqcmdQ") == 0
    ok(broker, passfile, "destroy", "dst", "-t", "q", "-n", "imqcmdQ")
    assert dst_count(broker, passfile, "imqcmdQ") is None


def test_pause_and_resume_dst(broker, passfile):
    send(broker, "imqcmdPauseQ", 1)
    ok(broker, passfile, "pause", "dst", "-t", "q", "-n", "imqcmdPauseQ", "-pst", "CONSUMERS")
    state = row(ok(broker, passfile, "list", "dst"), "imqcmdPauseQ")[2]
    assert state == "CONSUMERS_PAUSED"
    ok(broker, passfile, "pause", "dst", "-t", "q", "-n", "imqcmdPauseQ", "-pst", "producers")
    assert row(ok(broker, passfile, "list", "dst"), "imqcmdPauseQ")[2] == "PRODUCERS_PAUSED"
    ok(broker, passfile, "pause", "dst", "-t", "q", "-n", "imqcmdPauseQ")
    assert row(ok(broker, passfile, "list", "dst"), "imqcmdPauseQ")[2] == "PAUSED"
    ok(broker, passfile, "resume", "dst", "-t", "q", "-n", "imqcmdPauseQ")
    assert row(ok(broker, passfile, "list", "dst"), "imqcmdPauseQ")[2] == "RUNNING"


def test_list_cns(broker, passfile):
    from openmq_client.sync import connect as sync_connect

    q = uniq("cnsQ")
    with sync_connect(broker.host, broker.portmapper_port) as conn:
        sess = conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        sess.create_consumer(Queue(q), selector="n > 1")
        out = ok(broker, passfile, "list", "cns", "-t", "q", "-n", q)
        assert "Consumer ID" in out and "Selector" in out
        [line] = [ln for ln in out.splitlines() if "guest" in ln.split()]
        assert "CLIENT_ACKNOWLEDGE" in line and "n > 1" in line
    out = ok(broker, passfile, "list", "cns", "-t", "q", "-n", q)
    assert not [ln for ln in out.splitlines() if "guest" in ln.split()]


def test_create_update_compact_destroy_dst(broker, passfile):
    q, t = uniq("createdQ"), uniq("createdT")
    ok(broker, passfile, "create", "dst", "-t", "q", "-n", q, "-o", "maxNumMsgs=5",
       "-o", "limitBehavior=reject_newest", "-o", "maxBytesPerMsg=1k")  # fmt: skip
    ok(broker, passfile, "create", "dst", "-t", "t", "-n", t)
    out = ok(broker, passfile, "query", "dst", "-t", "q", "-n", q)
    assert value(out, "Created Administratively") == "true"
    assert value(out, "Max Number of Messages") == "5"
    assert value(out, "Max Bytes per Message") == "1024"
    assert value(out, "Limit Behavior") == "REJECT_NEWEST"
    assert row(ok(broker, passfile, "list", "dst", "-t", "t"), t)[1] == "Topic"
    ok(broker, passfile, "update", "dst", "-t", "q", "-n", q, "-o", "maxNumMsgs=-1",
       "-o", "useDMQ=false")  # fmt: skip
    out = ok(broker, passfile, "query", "dst", "-t", "q", "-n", q)
    assert value(out, "Max Number of Messages") == "unlimited"
    assert value(out, "Use Dead Message Queue") == "false"
    # maxNumSharedConsumers is a topic's attribute: refused before anything is sent.
    line = refused(broker, passfile, "update", "dst", "-t", "q", "-n", q, "-o",
                   "maxNumSharedConsumers=3")  # fmt: skip
    assert "topics only" in line
    ok(broker, passfile, "compact", "dst", "-t", "q", "-n", q)
    ok(broker, passfile, "compact", "dst")
    ok(broker, passfile, "destroy", "dst", "-t", "q", "-n", q)
    ok(broker, passfile, "destroy", "dst", "-t", "t", "-n", t)
    assert dst_count(broker, passfile, q) is None


# -- services and connections ----------------------------------------------------------


def test_list_and_query_svc(broker, passfile):
    out = ok(broker, passfile, "list", "svc")
    assert "Service Name" in out and "Port Number" in out and "Service State" in out
    assert row(out, "jms") == ["jms", str(broker.jms_port), "(static)", "RUNNING"]
    assert row(out, "admin")[1] == str(broker.admin_port)
    out = ok(broker, passfile, "query", "svc", "-n", "jms")
    assert value(out, "Service State") == "RUNNING"
    assert value(out, "Port Number") == f"{broker.jms_port} (static)"
    assert value(out, "Service Type") == "NORMAL"
    assert "404" in refused(broker, passfile, "query", "svc", "-n", "nosuchsvc")


def test_pause_and_resume_svc(quiet_broker, passfile):
    b = quiet_broker
    try:
        ok(b, passfile, "pause", "svc", "-n", "jms")
        assert row(ok(b, passfile, "list", "svc"), "jms")[-1] == "PAUSED"
    finally:
        ok(b, passfile, "resume", "svc", "-n", "jms")
    assert row(ok(b, passfile, "list", "svc"), "jms")[-1] == "RUNNING"


def test_update_svc(quiet_broker, passfile):
    b = quiet_broker
    ok(b, passfile, "update", "svc", "-n", "jms", "-o", "maxThreads=50", "-o", "minThreads=5")
    out = ok(b, passfile, "query", "svc", "-n", "jms")
    assert value(out, "Max Number of Threads") == "50"
    assert value(out, "Min Number of Threads") == "5"


def test_list_cxn(broker, passfile):
    out = ok(broker, passfile, "list", "cxn")
    assert "Connection ID" in out
    assert any("admin" in ln.split() and "127.0.0.1:" in ln for ln in out.splitlines()), out
    out = ok(broker, passfile, "list", "cxn", "-svn", "admin")
    assert "Service Name" in out and any("admin" in ln.split() for ln in out.splitlines())
    out = ok(broker, passfile, "list", "cxn", "-n", "jms")  # -n as well as -svn
    assert not any(ln.split()[2:3] == ["admin"] for ln in out.splitlines()), out


def test_query_and_destroy_cxn(broker, passfile):
    from .test_transactions import Raw

    client = Raw(broker)
    try:
        out = ok(broker, passfile, "list", "cxn", "-svn", "jms")
        ids = [ln.split()[0] for ln in out.splitlines() if ln.split()[1:3] == ["guest", "jms"]]
        assert ids, out
        out = ok(broker, passfile, "query", "cxn", "-n", ids[-1])
        assert value(out, "User") == "guest" and value(out, "Service") == "jms"
        for cid in ids:
            ok(broker, passfile, "destroy", "cxn", "-n", cid)
        assert client.peer.closed_by_peer()
        assert "404" in refused(broker, passfile, "query", "cxn", "-n", ids[-1])
    finally:
        client.close()


# -- durable subscriptions -------------------------------------------------------------


def durable(b, topic: str, name: str, client_id: str, then_send: int) -> None:
    """A durable subscription, inactive, with ``then_send`` messages waiting."""

    async def run() -> None:
        conn = await connect(b.host, b.portmapper_port, client_id=client_id)
        try:
            sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
            sub = await sess.create_durable_subscriber(Topic(topic), name)
            await sub.close()
        finally:
            await conn.close()

    asyncio.run(run())
    send(b, topic, then_send, topic=True)


def test_destroy_dur(broker, passfile):
    topic, name, cid = uniq("durT"), uniq("sub"), uniq("cid")
    durable(broker, topic, name, cid, 1)
    out = ok(broker, passfile, "destroy", "dur", "-n", name, "-c", cid)
    assert "Destroying the durable subscription" in out
    assert "404" in refused(broker, passfile, "destroy", "dur", "-n", name, "-c", cid)


def test_list_and_purge_dur(broker, passfile):
    topic, name, cid = uniq("durT"), uniq("sub"), uniq("cid")
    durable(broker, topic, name, cid, 2)
    out = ok(broker, passfile, "list", "dur", "-d", topic)
    assert "Durable Sub State" in out
    assert row(out, name) == [name, cid, topic, "2", "INACTIVE"]
    ok(broker, passfile, "purge", "dur", "-n", name, "-c", cid)
    assert row(ok(broker, passfile, "list", "dur", "-d", topic), name)[3] == "0"
    ok(broker, passfile, "destroy", "dur", "-n", name, "-c", cid)
    out = ok(broker, passfile, "list", "dur", "-d", topic)
    assert not any(ln.split()[:1] == [name] for ln in out.splitlines())


# -- transactions ----------------------------------------------------------------------


def test_list_query_commit_rollback_txn(broker, passfile):
    from .test_transactions import Raw, new_xid

    q = uniq("txnQ")
    a = Raw(broker)
    sid = a.session()
    a.producer(sid, q)
    tids = []
    for body in (b"committed", b"rolled-back"):
        xid = new_xid()
        tid = a.xa_begin(sid, xid)
        a.send(q, body, tid)
        a.xa(PacketType.END_TRANSACTION, xid, JMQXAFlags=JInt(int(XAFlag.TMSUCCESS)))
        a.xa(PacketType.PREPARE_TRANSACTION, xid)
        tids.append(tid)
    a.close()
    out = ok(broker, passfile, "list", "txn")
    assert "Transaction ID" in out and "# Msgs/# Acks" in out
    for tid in tids:
        assert row(out, str(tid))[1:3] == ["PREPARED", "guest"]
    out = ok(broker, passfile, "query", "txn", "-n", str(tids[0]))
    assert value(out, "State") == "PREPARED" and value(out, "Number of messages") == "1"
    ok(broker, passfile, "commit", "txn", "-n", str(tids[0]))
    ok(broker, passfile, "rollback", "txn", "-n", str(tids[1]))
    assert "404" in refused(broker, passfile, "commit", "txn", "-n", str(tids[1]))
    assert dst_count(broker, passfile, q) == 1  # the committed message only


def test_list_txn_empty_broker(quiet_broker, passfile):
    assert "There are no transactions." in ok(quiet_broker, passfile, "list", "txn")


# -- options: -f, -s, -passfile, the password prompt ------------------------------------


def test_confirmation_answered_no_changes_nothing(broker, passfile):
    q = uniq("confirmQ")
    send(broker, q, 2)
    runs = [
        (args, answer)
        for args in (
            ("purge", "dst", "-t", "q", "-n", q),
            ("destroy", "dst", "-t", "q", "-n", q),
            ("shutdown", "bkr"),
            ("pause", "bkr"),
        )
        for answer in ("n\n", "\n", "")  # n, Enter (the [n] default), end of input
    ]
    with ThreadPoolExecutor(6) as pool:
        results = list(
            pool.map(
                lambda run: run_imqcmd(
                    broker, *run[0], passfile=passfile, force=False, answer=run[1]
                ),
                runs,
            )
        )
    for run, r in zip(runs, results, strict=True):
        assert r.returncode == 0, (run, r.stderr)
        assert "Are you sure you want to" in r.stdout and "(y/n)[n]" in r.stdout
        assert "Cancelled: nothing was changed." in r.stdout and SUCCESS not in r.stdout
    r = run_imqcmd(broker, "purge", "dst", "-t", "q", "-n", q, passfile=passfile, force=False,
                   answer="perhaps\n")  # fmt: skip
    assert r.returncode != 0 and "perhaps" in r.stderr and "nothing was changed" in r.stderr
    assert dst_count(broker, passfile, q) == 2
    assert row(ok(broker, passfile, "list", "svc"), "jms")[-1] == "RUNNING"
    r = run_imqcmd(broker, "purge", "dst", "-t", "q", "-n", q, passfile=passfile, force=False,
                   answer="y\n")  # fmt: skip
    assert r.returncode == 0 and SUCCESS in r.stdout, r.stderr
    assert dst_count(broker, passfile, q) == 0
    ok(broker, passfile, "destroy", "dst", "-t", "q", "-n", q)


def test_silent_mode(broker, passfile):
    q = uniq("silentQ")
    send(broker, q, 1)
    # Nothing at all on either stream: as a process of its own.
    r = run_imqcmd(broker, "list", "dst", "-s", passfile=passfile, real=True)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    r = run_imqcmd(broker, "purge", "dst", "-t", "q", "-n", q, "-s", passfile=passfile, real=True)
    assert r.returncode == 0 and r.stdout == ""
    assert dst_count(broker, passfile, q) == 0
    r = run_imqcmd(
        broker, "query", "dst", "-t", "q", "-n", uniq("none"), "-s", passfile=passfile, real=True
    )
    assert r.returncode != 0 and r.stdout == "" and "not found" in r.stderr
    ok(broker, passfile, "destroy", "dst", "-t", "q", "-n", q)


def test_password_prompt_and_passfile(broker, tmp_path):
    # No -passfile: the password is asked for (here typed on stdin).
    r = run_imqcmd(broker, "list", "svc", answer="admin\n")
    assert r.returncode == 0 and SUCCESS in r.stdout, r.stderr
    r = run_imqcmd(broker, "list", "svc", answer="wrong\n")
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1].startswith("Error list svc")
    bad = tmp_path / "bad"
    bad.write_text("imq.imqcmd.password=wrong\n")
    assert refused(broker, bad, "list", "svc").startswith("Error list svc")
    nokey = tmp_path / "nokey"
    nokey.write_text("imq.keystore.password=admin\n")
    r = run_imqcmd(broker, "list", "svc", passfile=nokey)
    assert r.returncode != 0 and "imq.imqcmd.password" in r.stderr
    r = run_imqcmd(broker, "list", "svc", passfile=tmp_path / "missing")
    assert r.returncode != 0 and "cannot read passfile" in r.stderr


# -- refused input -----------------------------------------------------------------------


def test_refused_input(broker, passfile):
    q = uniq("refusedQ")
    cases = [
        # (arguments, a piece of the one error line)
        (("purge", "dst", "-t", "q"), "-n"),
        (("query", "dst", "-n", q), "-t"),
        (("purge", "dst", "-t", "x", "-n", q), "q (queue) or t (topic)"),
        (("destroy", "dur", "-n", "sub"), "-c"),
        (("update", "bkr"), "-o"),
        (("create", "dst", "-t", "q", "-n", q, "-o", "x"), "name=value"),
        (("create", "dst", "-t", "q", "-n", q, "-o", "bogus=1"), "unknown destination attribute 'bogus'"),
        (("create", "dst", "-t", "q", "-n", q, "-o", "maxNumMsgs=lots"), "'lots' is not an integer"),
        (("create", "dst", "-t", "q", "-n", q, "-o", "limitBehavior=x"), "REJECT_NEWEST"),
        (("update", "svc", "-n", "jms", "-o", "threads=4"), "minThreads"),
        (("update", "svc", "-n", "jms", "-o", "port=x"), "number"),
        (("pause", "dst", "-t", "q", "-n", q, "-pst", "some"), "-pst"),
        (("query", "cxn", "-n", "abc"), "connection ID"),
        (("commit", "txn", "-n", "abc"), "transaction ID"),
        (("frob", "dst"), "unknown subcommand"),
        (("list", "jmx"), "imqcmd list takes"),
        (("reload", "cls"), "not part of a cluster"),
        (("metrics", "bkr", "-m", "con"), "-m takes"),
        (("metrics", "bkr", "-int", "0"), "-int"),
        (("compact", "dst", "-n", q), "both -t and -n"),
    ]  # fmt: skip
    lines = [refused(broker, passfile, *args) for args, _piece in cases]
    for (args, piece), line in zip(cases, lines, strict=True):
        assert piece in line, (args, line)
    # The same one line from a process of its own: a usage error, an attribute refused
    # before anything is sent, and one the broker refuses.
    real = [cases[0], cases[6], cases[16]]
    with ThreadPoolExecutor(3) as pool:
        again = list(pool.map(lambda case: refused(broker, passfile, *case[0], real=True), real))
    assert again == [lines[cases.index(case)] for case in real]
    assert dst_count(broker, passfile, q) is None  # nothing was created


def test_broker_errors(broker, passfile):
    line = refused(broker, passfile, "query", "dst", "-t", "q", "-n", "noSuchImqcmdQ")
    assert "noSuchImqcmdQ" in line and "not found" in line and "404" in line
    assert "404" in refused(broker, passfile, "purge", "dst", "-t", "q", "-n", "noSuchImqcmdQ")
    # A temporary destination belongs to its connection: the action refuses it.
    from openmq_client.sync import connect as sync_connect

    with sync_connect(broker.host, broker.portmapper_port) as conn:
        temp = conn.create_temporary_queue().name
        line = refused(broker, passfile, "destroy", "dst", "-t", "q", "-n", temp)
        assert "temporary destination" in line


def test_unreachable_broker(passfile, tmp_path):
    from broker.launcher import free_port

    class Nowhere:
        portmapper_port = free_port()
        extra = {"env": None}

    line = refused(Nowhere, passfile, "list", "svc")
    assert f"127.0.0.1:{Nowhere.portmapper_port}" in line and "reach" in line


def test_changemaster_cls(broker, passfile):
    # As the stock broker: refused (405) while imq.cluster.dynamicChangeMasterBrokerEnabled
    # is false, its default; the move itself: tests/test_cluster_changemaster.py.
    r = imqcmd(
        broker, passfile, "changemaster", "cls", "-o", "imq.cluster.masterbroker=127.0.0.1:7677"
    )
    assert r.returncode != 0, (r.stdout, r.stderr)
    assert "Changing cluster master broker to:" in r.stdout
    assert "imq.cluster.masterbroker    127.0.0.1:7677" in r.stdout
    assert "dynamicChangeMasterBrokerEnabled" in r.stderr and "405" in r.stderr, r.stderr
    line = refused(broker, passfile, "changemaster", "cls")
    assert "changemaster cls" in line and "-o" in line
    line = refused(broker, passfile, "changemaster", "cls", "-o", "imq.other=1")
    assert "imq.cluster.masterbroker" in line
