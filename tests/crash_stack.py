"""SIGKILL a test broker and start it again on the same ports and var home, for the tests
of what the processes around the broker do while it is down and once it is back
(tests/test_crash_*.py).  Real processes only: the broker of a
:class:`~tests.portal_server.PortalStack` (``broker.launcher.start_broker``) is killed with
SIGKILL and its own command line run again with its environment."""

from __future__ import annotations

import signal
import subprocess
import time

from broker import launcher
from broker.launcher import BrokerProcess, portmapper_answers

from .portal_server import ROOT


def kill_broker(broker: BrokerProcess) -> None:
    """SIGKILL the broker (no clean shutdown: its store is recovered at the next start)
    and wait until its port mapper refuses."""
    broker.proc.send_signal(signal.SIGKILL)
    broker.proc.wait(30)
    deadline = time.monotonic() + 30
    while portmapper_answers(broker.host, broker.portmapper_port, timeout=0.5):
        assert time.monotonic() < deadline, "the killed broker's port mapper still answers"
        time.sleep(0.1)


def restart_broker(broker: BrokerProcess, timeout: float = 90) -> None:
    """Run the broker's command line again (same ports, instance, var home and database)
    and wait until its port mapper answers; ``broker.proc`` is the new process.  Started
    as start_broker starts it (``launcher.spawn``: in the tests, forked from
    tests/manage_fork.py's server, ready after a quarter of a fresh interpreter's CPU)."""
    assert broker.proc.poll() is not None, "restart_broker: the broker is still running"
    out = open(broker.log_path, "ab")  # noqa: SIM115 - lives as long as the process
    broker.proc = launcher.spawn(
        broker.proc.args,
        cwd=ROOT,
        env=broker.extra["env"],
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    out.close()
    deadline = time.monotonic() + timeout
    while not portmapper_answers(broker.host, broker.portmapper_port, timeout=1):
        if broker.proc.poll() is not None:
            raise RuntimeError(f"the broker exited on restart:\n{broker.log_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the broker did not restart:\n{broker.log_text()[-4000:]}")
        time.sleep(0.2)
