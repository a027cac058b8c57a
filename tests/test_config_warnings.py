"""What a broker started with a stock-style configuration says about the properties it
does not honour (broker/propcheck.py), and imq.restart.code, with real broker processes.

A ``config.properties`` carrying OpenMQ properties this broker does not support, a
misspelt one and a harmless foreign one, and ``-D`` arguments: each property it does not
honour gets exactly one WARNING at start, naming it and why; honoured ones and names
outside ``imq.*`` get none.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.admintools.broker_handle import BrokerAdmin
from broker.launcher import start_broker

pytestmark = pytest.mark.timeout(120)

CONFIG = """\
# as an OpenMQ administrator's instance file may carry it
imq.persist.file.message.cleanup=true
imq.persist.file.txnLog.file.size=20m
imq.log.jmx.output=ALL
imq.jms.threadpool_model=shared
imq.persist.jdbc.mysql.user=mq
imq.ping.intervall=30
imq.ping.interval=120
imq.log.destination.output=ERROR
imq.autocreate.queue.localDeliveryPreferred=true
some.other.tool.setting=1
"""

# name -> a word its warning must carry (why, or the hint)
WARNED = {
    "imq.persist.file.message.cleanup": "segment files",
    "imq.persist.file.txnLog.file.size": "no separate transaction log",
    "imq.log.jmx.output": "JMX",
    "imq.jms.threadpool_model": "event loop",
    "imq.persist.jdbc.mysql.user": "Django database",
    "imq.ping.intervall": "did you mean imq.ping.interval?",
    "imq.portunif.enabled": "port unification",
    "imq.cluster.heartbeat.interval": "imq.cluster.ping.interval",
}
NOT_WARNED = (
    "imq.ping.interval ",
    "imq.log.destination.output",
    "imq.autocreate.queue.localDeliveryPreferred",
    "some.other.tool.setting",
    "imq.jms.tcp.port",
)


@pytest.fixture
def tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="imq-propwarn-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def this_start(log: str) -> list[str]:
    """The lines of the broker's last start: a start the launcher retried on another
    port left the first attempt's lines and its Traceback before them."""
    lines = log.splitlines()
    ends = [
        i
        for i, line in enumerate(lines)
        if line.startswith("Traceback") or "Address already in use" in line
    ]
    return lines[ends[-1] + 1 :] if ends else lines


def test_unhonoured_properties_are_warned_once_each(tmp: Path) -> None:
    props_dir = tmp / "var" / "instances" / "testbroker" / "props"
    props_dir.mkdir(parents=True)
    (props_dir / "config.properties").write_text(CONFIG)
    b = start_broker(tmp, "imq.portunif.enabled=true", "imq.cluster.heartbeat.interval=5")
    try:
        # It serves a moment before it says so.
        deadline = time.monotonic() + 30
        while " ready" not in b.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        lines = this_start(b.log_text())
    finally:
        b.stop()
    assert any(" ready" in line for line in lines), "\n".join(lines)
    warnings = [line for line in lines if "WARNING broker.config:" in line]
    for name, why in WARNED.items():
        mine = [w for w in warnings if f"broker.config: {name} (set " in w]
        assert len(mine) == 1, (name, warnings)
        assert why in mine[0], mine
        where = (
            "on the command line"
            if name in ("imq.portunif.enabled", "imq.cluster.heartbeat.interval")
            else "in config.properties"
        )
        assert f"(set {where})" in mine[0], mine
    for name in NOT_WARNED:
        assert not [w for w in warnings if f"broker.config: {name}" in w], (name, warnings)
    assert len(warnings) == len(WARNED), warnings


def test_restart_code_is_the_exit_status_when_set(tmp: Path) -> None:
    b = start_broker(tmp, "imq.restart.code=77")
    try:
        admin = BrokerAdmin(b.host, b.portmapper_port)
        try:
            admin.restart()
        finally:
            admin.close()
        # imqbrokerd's way: the process ends with imq.restart.code for its supervisor
        # to start it again (unset, runbroker starts the broker again itself).
        assert b.proc.wait(60) == 77, b.log_text()[-3000:]
        assert "exiting with imq.restart.code 77" in b.log_text()
    finally:
        b.stop()


def test_the_stock_file_handler_limit_rolls_the_log(tmp: Path) -> None:
    # OpenMQ 6.9's name for imq.log.file.rolloversize, in a stock config.properties.
    b = start_broker(tmp, "java.util.logging.FileHandler.limit=600")
    logdir = b.varhome / "instances" / b.instance / "log"
    try:
        deadline = time.monotonic() + 30
        while not (logdir / "log_1.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        b.stop()
    assert (logdir / "log_1.txt").exists(), sorted(p.name for p in logdir.iterdir())
    for p in logdir.glob("log*.txt"):
        assert p.stat().st_size <= 600 + 400, p  # one line may overshoot the limit
    assert "java.util.logging.FileHandler.limit" not in b.log_text()  # honoured: no warning
