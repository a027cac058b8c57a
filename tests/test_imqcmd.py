"""``python manage.py imqcmd`` against a real broker (admin.md): the everyday commands."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.client import AckMode, Queue, TextMessage, connect

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def passfile(tmp_path: Path) -> Path:
    p = tmp_path / "passfile"
    p.write_text("# imqcmd\nimq.imqcmd.password=admin\n")
    return p


def imqcmd(b, passfile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "manage.py", "imqcmd", *args]
    cmd += ["-b", f"127.0.0.1:{b.portmapper_port}", "-u", "admin", "-passfile", str(passfile)]
    cmd += ["-f", "-rtm", "10"]
    return subprocess.run(
        cmd,
        cwd=ROOT,
        env=b.extra["env"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def ok(b, passfile: Path, *args: str) -> str:
    r = imqcmd(b, passfile, *args)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Successfully performed the requested operation." in r.stdout
    return r.stdout


def send(b, queue: str, count: int) -> None:
    async def run() -> None:
        conn = await connect(b.host, b.portmapper_port)
        try:
            sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
            prod = await sess.create_producer(Queue(queue))
            for n in range(count):
                await prod.send(TextMessage(f"m{n}"))
        finally:
            await conn.close()

    asyncio.run(run())


def dst_row(out: str, name: str) -> list[str]:
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == [name]]
    assert len(rows) == 1, out
    return rows[0]


def test_query_bkr_shows_instance(broker, passfile):
    out = ok(broker, passfile, "query", "bkr")
    assert "Instance Name" in out and broker.instance in out
    assert str(broker.portmapper_port) in out


def test_list_query_purge_destroy_dst(broker, passfile):
    send(broker, "imqcmdQ", 3)
    out = ok(broker, passfile, "list", "dst")
    assert "Msgs Count" in out and "temporary_destination" not in out
    # Name, Type, State, Producers, Consumers, Msgs Count, Msgs Total Size
    row = dst_row(out, "imqcmdQ")
    assert row[1:4] == ["Queue", "RUNNING", "0"] and row[5] == "3" and int(row[6]) > 0
    out = ok(broker, passfile, "query", "dst", "-t", "q", "-n", "imqcmdQ")
    assert "imqcmdQ" in out and "Current Number of Messages" in out
    assert any(ln.split() == ["Actual", "3"] for ln in out.splitlines()), out
    out = ok(broker, passfile, "purge", "dst", "-t", "q", "-n", "imqcmdQ")
    assert "Purged" in out
    assert dst_row(ok(broker, passfile, "list", "dst"), "imqcmdQ")[5] == "0"
    ok(broker, passfile, "destroy", "dst", "-t", "q", "-n", "imqcmdQ")
    out = ok(broker, passfile, "list", "dst")
    assert not any(ln.split()[:1] == ["imqcmdQ"] for ln in out.splitlines())


def test_pause_and_resume_dst(broker, passfile):
    send(broker, "imqcmdPauseQ", 1)
    ok(broker, passfile, "pause", "dst", "-t", "q", "-n", "imqcmdPauseQ", "-pst", "CONSUMERS")
    assert dst_row(ok(broker, passfile, "list", "dst"), "imqcmdPauseQ")[2] == "CONSUMERS_PAUSED"
    ok(broker, passfile, "pause", "dst", "-t", "q", "-n", "imqcmdPauseQ")
    assert dst_row(ok(broker, passfile, "list", "dst"), "imqcmdPauseQ")[2] == "PAUSED"
    ok(broker, passfile, "resume", "dst", "-t", "q", "-n", "imqcmdPauseQ")
    assert dst_row(ok(broker, passfile, "list", "dst"), "imqcmdPauseQ")[2] == "RUNNING"


def test_list_svc_and_cxn(broker, passfile):
    out = ok(broker, passfile, "list", "svc")
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.split()}
    assert rows["jms"][1] == str(broker.jms_port) and rows["jms"][2] == "RUNNING"
    assert rows["admin"][1] == str(broker.admin_port)
    out = ok(broker, passfile, "list", "cxn")
    assert "Connection ID" in out
    assert any("admin" in ln.split() and "127.0.0.1:" in ln for ln in out.splitlines()), out


def test_pause_and_resume_svc(own_broker, passfile):
    b = own_broker()
    ok(b, passfile, "pause", "svc", "-n", "jms")
    out = ok(b, passfile, "list", "svc")
    assert [ln.split()[2] for ln in out.splitlines() if ln.split()[:1] == ["jms"]] == ["PAUSED"]
    ok(b, passfile, "resume", "svc", "-n", "jms")
    out = ok(b, passfile, "list", "svc")
    assert [ln.split()[2] for ln in out.splitlines() if ln.split()[:1] == ["jms"]] == ["RUNNING"]


def test_errors(broker, passfile, tmp_path):
    r = imqcmd(broker, passfile, "query", "dst", "-t", "q", "-n", "noSuchImqcmdQ")
    assert r.returncode != 0
    assert "noSuchImqcmdQ" in r.stderr and "not found" in r.stderr and "404" in r.stderr
    r = imqcmd(broker, passfile, "purge", "dst", "-t", "q", "-n", "noSuchImqcmdQ")
    assert r.returncode != 0 and "404" in r.stderr
    r = imqcmd(broker, passfile, "purge", "dst", "-t", "q")
    assert r.returncode != 0 and "-n" in r.stderr
    bad = tmp_path / "bad"
    bad.write_text("imq.imqcmd.password=wrong\n")
    r = imqcmd(broker, bad, "list", "svc")
    assert r.returncode != 0 and r.stderr.strip()


def test_shutdown_bkr(own_broker, passfile):
    b = own_broker()
    out = ok(b, passfile, "shutdown", "bkr")
    assert "Shutting down" in out
    deadline = time.monotonic() + 30
    while b.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert b.proc.poll() is not None
