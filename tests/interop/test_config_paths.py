"""Configuration paths, each on a broker of its own and compared with the stock OpenMQ 6.9
broker (``--interop-broker=stock`` runs the same checks there): a connection service
bound to one address (``imq.jms.tcp.hostname``), the defaults of an auto-created queue as
the stock imqcmd shows them, a per-service access-control file
(``imq.jms.accesscontrol.file.filename`` / ``.dirpath``), the log file's place
(``java.util.logging.FileHandler.pattern``, ``imq.log.file.dirpath`` / ``filename``) and
``imq.cluster.hostname`` (ours only: stock clusters refuse loopback addresses).
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import free_port, read_portmapper
from broker.protocol.portmapper import parse_table
from tests.cluster_procs import start_member, wait_linked

from .imqcmd_stock import StockImqcmd
from .jvm import broker_kind, start_either

pytestmark = pytest.mark.timeout(300)

BOUND = "127.0.0.2"  # another loopback address (all of 127/8 is loopback on Linux)


@dataclass
class At:
    """A broker's port mapper as a Java program is pointed at it."""

    host: str
    portmapper_port: int


def mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def kind(request: pytest.FixtureRequest) -> str:
    return broker_kind(request.config)


@pytest.fixture(scope="module")
def bound(kind: str) -> Iterator[Any]:
    """A broker whose jms service listens on 127.0.0.2 only; the port mapper and the admin
    service on every address (imq.hostname unset)."""
    tmp = Path(tempfile.mkdtemp(prefix="imq-cfg-"))
    ours = {"jms_host": BOUND}
    # The launcher sets imq.hostname=127.0.0.1; the later -D unsets it again.
    extra = () if kind == "stock" else ("imq.hostname=",)
    b = start_either(kind, tmp, *extra, f"imq.jms.tcp.hostname={BOUND}", **ours)
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_service_bound_to_one_address(bound: Any, java_programs: Any) -> None:
    """imq.jms.tcp.hostname: the service listens there only and the port mapper says so
    (``jms tcp NORMAL PORT [hostname=127.0.0.2]``, as the stock broker writes it).  The
    stock Java client ignores that hostname and dials the port mapper's host, on either
    broker: it reaches the service through a port mapper asked at 127.0.0.2 and fails
    (C4003) through one asked at 127.0.0.1."""
    table = parse_table(read_portmapper("127.0.0.1", bound.portmapper_port))
    jms = table.find(name="jms")
    assert jms is not None and jms.properties.get("hostname") == BOUND, table
    admin = table.find(name="admin")
    assert admin is not None and "hostname" not in admin.properties, table
    assert accepts(BOUND, jms.port)
    assert not accepts("127.0.0.1", jms.port)
    there = java_programs.run("Smoke", At(BOUND, bound.portmapper_port))
    assert there.checks == {"connect_send_receive": "ok"}, there.explain()
    elsewhere = java_programs.run("Smoke", At("127.0.0.1", bound.portmapper_port))
    why = elsewhere.checks["connect_send_receive"]
    assert "C4003" in why and f"127.0.0.1:{jms.port}" in why, elsewhere.explain()


# What the stock imqcmd's `query dst` prints for a queue the stock Java client made by
# sending to it, on the stock OpenMQ 6.9 broker with its default configuration (and on
# ours): the round-robin policy (any number of active consumers, no backups), not the
# administrator's guide's "single" (docs/operators/running.md).
STOCK_AUTOCREATED_QUEUE = {
    "Created Administratively": "false",
    "Max Number of Active Consumers": "unlimited (-1)",
    "Max Number of Backup Consumers": "0",
    "Local Delivery is Preferred": "false",
    "Consumer Flow Limit": "1000",
    "Is Local Destination": "false",
    "Max Number of Messages": "100000",
    "Max Total Message Bytes": "10737418240",
    "Max Bytes per Message": "10485760",
    "Max Number of Producers": "100",
    "Limit Behavior": "REJECT_NEWEST",
    "Use Dead Message Queue": "true",
}


def test_autocreated_queue_defaults(bound: Any, java_programs: Any, tmp_path: Path) -> None:
    sent = java_programs.run("Sends", At(BOUND, bound.portmapper_port), "cfg.autocreated")
    assert sent.checks == {"send_cfg.autocreated": "ok"}, sent.explain()
    q = StockImqcmd(tmp_path).run(
        f"127.0.0.1:{bound.portmapper_port}", "query", "dst", "-t", "q", "-n", "cfg.autocreated"
    )
    assert q.returncode == 0, str(q)
    pairs = q.pairs()
    assert {k: pairs.get(k) for k in STOCK_AUTOCREATED_QUEUE} == STOCK_AUTOCREATED_QUEUE, str(q)


RULES = """version=JMQFileAccessControlModel/100
connection.NORMAL.allow.user=*
queue.*.produce.allow.user=*
queue.*.consume.allow.user=*
queue.*.browse.allow.user=*
queue.create.allow.user=*
topic.*.produce.allow.user=*
topic.*.consume.allow.user=*
topic.create.allow.user=*
"""


def test_per_service_access_control_file(kind: str, tmp_path: Path, java_programs: Any) -> None:
    """imq.jms.accesscontrol.file.filename / .dirpath: the jms service checks its own file
    only, the other services the broker-wide one.  The broker-wide file denies guest one
    queue and lets the admin group in; the jms file denies guest another queue and has no
    ADMIN connection rule (so no administrator would get in through it)."""
    wide, own = tmp_path / "wide", tmp_path / "own"
    wide.mkdir()
    own.mkdir()
    (wide / "wide.acl").write_text(
        RULES
        + "connection.ADMIN.allow.group=admin\nqueue.cfg_wide_denied.produce.deny.user=guest\n"
    )
    (own / "jms.acl").write_text(RULES + "queue.cfg_jms_denied.produce.deny.user=guest\n")
    b = start_either(
        kind,
        mkdir(tmp_path / "b"),
        f"imq.accesscontrol.file.dirpath={wide}",
        "imq.accesscontrol.file.filename=wide.acl",
        f"imq.jms.accesscontrol.file.dirpath={own}",
        "imq.jms.accesscontrol.file.filename=jms.acl",
    )
    try:
        r = java_programs.run("Sends", b, "cfg_jms_denied", "cfg_wide_denied")
        checks = r.checks
        assert "JMSSecurityException" in checks["send_cfg_jms_denied"], r.explain()
        assert checks["send_cfg_wide_denied"] == "ok", r.explain()
        q = StockImqcmd(tmp_path).run(f"{b.host}:{b.portmapper_port}", "query", "bkr")
        assert q.returncode == 0 and "Successfully queried the broker." in q.output, str(q)
    finally:
        b.stop()


def _ready(path: Path) -> bool:
    # Ours: "broker NAME ready"; the stock broker: "[B1039]: Broker "NAME@host:port" ready."
    return path.is_file() and " ready" in path.read_text(errors="replace")


def _wait_ready(path: Path, timeout: float = 60) -> bool:
    """Whether ``path`` says the broker is ready within ``timeout`` s: a broker serves
    (what start_either waits for) a moment before it logs that line, and one stopped in
    between never writes it."""
    deadline = time.monotonic() + timeout
    while not _ready(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_log_file_where_configured(kind: str, tmp_path: Path) -> None:
    """java.util.logging.FileHandler.pattern (OpenMQ 6.9's name, %g the generation 0)
    places the log file on both brokers, over imq.log.file.dirpath / filename; those two
    (the administrator's guide's names) place it on ours alone: the stock 6.9 broker
    ignores them and writes instances/NAME/log/log.txt."""
    logs = tmp_path / "logs"
    mkdir(logs / "pattern")  # the stock broker's FileHandler makes no directory (ours does)
    first = start_either(
        kind,
        mkdir(tmp_path / "one"),
        f"java.util.logging.FileHandler.pattern={logs}/pattern/broker%g.log",
        f"imq.log.file.dirpath={logs}/old",
        "imq.log.file.filename=ignored.log",
    )
    try:
        assert _wait_ready(logs / "pattern" / "broker0.log")
    finally:
        first.stop()
    assert not (logs / "old").exists()
    second = start_either(
        kind,
        mkdir(tmp_path / "two"),
        f"imq.log.file.dirpath={logs}/old",
        "imq.log.file.filename=broker.log",
    )
    default = second.varhome / "instances" / second.instance / "log" / "log.txt"
    try:
        assert _wait_ready(default if kind == "stock" else logs / "old" / "broker.log")
    finally:
        second.stop()
    if kind == "stock":
        assert not (logs / "old").exists()
    else:
        assert not default.exists()


def test_cluster_hostname(kind: str, tmp_path: Path) -> None:
    """imq.cluster.hostname: the cluster service listens there only and the port mapper
    publishes it as the stock broker does (``cluster tcp CLUSTER PORT
    [hostname=H,hostaddr=A]``, measured on a stock broker in a network namespace); each
    broker dials the other at the address the other's port mapper gives, so the link
    comes up though neither listens on the address of the broker list."""
    if kind == "stock":
        pytest.skip("a stock cluster refuses loopback addresses (tests/stock_cluster.py)")
    pms = [free_port(), free_port()]
    brokerlist = ",".join(f"127.0.0.1:{p}" for p in pms)
    hosts = ["127.0.0.2", "127.0.0.3"]
    members = []
    try:
        for name, pm, host in zip("AB", pms, hosts, strict=True):
            members.append(
                start_member(tmp_path / name, brokerlist, pm, name, f"imq.cluster.hostname={host}")
            )
        wait_linked(members)
        for b, host in zip(members, hosts, strict=True):
            cluster = parse_table(read_portmapper(b.host, b.portmapper_port)).find("CLUSTER")
            assert cluster is not None
            assert cluster.properties == {"hostname": host, "hostaddr": host}
            assert accepts(host, cluster.port)
            assert not accepts("127.0.0.1", cluster.port)
    finally:
        for b in members:
            b.stop()
