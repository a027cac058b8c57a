"""Which log categories go where: ``imq.log.file.output`` and ``imq.log.console.output``
(``ERROR|WARNING|INFO``, ``ALL``, ``NONE``), ``imq.log.console.stream`` (ERR, OUT) and
``imq.log.timezone``.

Two brokers started without ``-tty``, their stdout and stderr read apart, then their log
files: one with the defaults (the console gets ERROR and WARNING on stderr, the file
everything, as on OpenMQ's broker), one with every property set.  The in-process tests
check the category parser and ``-tty``.
"""

from __future__ import annotations

import io
import logging
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.launcher import BrokerProcess, start_broker
from broker.loglevels import FORCE
from broker.logsetup import configure_logging, parse_output

READY = re.compile(r"^\[[^]]+\] broker: broker \w+ ready$", re.M)
BAD = re.compile(r"^\[[^]]+\] WARNING broker\.\w+: .*bad magic number", re.M)


def bad_input(b: BrokerProcess) -> None:
    """A connection that sends garbage: one WARNING, the broker serves on."""
    with socket.create_connection((b.host, b.jms_port), timeout=10) as s:
        s.sendall(b"this is not a packet, " * 8)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass


def run(tmp: Path, *props: str) -> tuple[str, str, str]:
    """(stdout, stderr, log file) of a broker that took a bad connection and stopped."""
    b = start_broker(tmp, *props, tty=False)
    try:
        bad_input(b)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and b.proc.poll() is None:
            time.sleep(0.2)  # until the WARNING is written somewhere the test reads
            if "bad magic number" in b.log_text() + (tmp / "broker-stderr.txt").read_text():
                break
            log = b.varhome / "instances" / b.instance / "log" / "log.txt"
            if log.exists() and "bad magic number" in log.read_text():
                break
    finally:
        b.stop()
    log = b.varhome / "instances" / b.instance / "log" / "log.txt"
    return (
        b.log_text(),
        (tmp / "broker-stderr.txt").read_text(errors="replace"),
        log.read_text(errors="replace") if log.exists() else "",
    )


def test_default_outputs(tmp_path: Path) -> None:
    out, err, log = run(tmp_path)
    assert not re.search(r"^\[", out, re.M), out  # no log line on stdout
    assert BAD.search(err) and not READY.search(err), err  # ERROR|WARNING on stderr
    assert READY.search(log) and BAD.search(log), log  # ALL to the file
    assert " UTC] " in log or re.search(r" [+-]\d{4}\] ", log), log  # the machine's zone


def test_outputs_streams_and_time_zone(tmp_path: Path) -> None:
    out, err, log = run(
        tmp_path,
        "imq.log.console.output=INFO",
        "imq.log.console.stream=OUT",
        "imq.log.file.output=warning | ERROR",
        "imq.log.timezone=Asia/Tokyo",
    )
    assert READY.search(out) and not BAD.search(out), out
    assert " JST] broker: broker" in out, out
    assert not re.search(r"^\[", err, re.M), err
    assert BAD.search(log) and not READY.search(log), log
    assert " JST] WARNING " in log, log


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the process's root logger back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


def configure(tmp: Path, tty: bool, **props: str) -> tuple[io.StringIO, io.StringIO, Path]:
    out, err = io.StringIO(), io.StringIO()
    overrides = {"imq.log.database.enabled": "false", "imq.log.syslog.address": "NONE", **props}
    config = BrokerConfig.load("logt", tmp, overrides)
    sys_out, sys_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        configure_logging(config, "DEBUGHIGH", tty)
    finally:
        sys.stdout, sys.stderr = sys_out, sys_err
    log = logging.getLogger("broker.logtest")
    for level in (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG, FORCE):
        log.log(level, "line at %s", logging.getLevelName(level))
    for h in logging.getLogger().handlers:
        h.flush()
    return out, err, tmp / "instances" / "logt" / "log" / "log.txt"


def levels(text: str) -> list[str]:
    return re.findall(r"line at (\w+)", text)


@pytest.mark.fast
def test_category_lists() -> None:
    assert parse_output("ERROR|WARNING") == {"ERROR", "WARNING", "FORCE"}
    assert parse_output(" info | Error ") == {"INFO", "ERROR", "FORCE"}
    assert parse_output("NONE") == frozenset()
    assert {"DEBUGHIGH", "INFO", "ERROR", "FORCE"} <= parse_output("ALL")
    for bad in ("", "LOUD", "ERROR,WARNING"):
        with pytest.raises(ConfigError, match="imq.log.file.output"):
            parse_output(bad, "imq.log.file.output")


@pytest.mark.fast
def test_tty_and_each_output(tmp_path: Path, root_logging: None) -> None:
    # -tty: every category to the console (stderr); the file takes ALL.
    out, err, log = configure(tmp_path / "a", True)
    assert levels(err.getvalue()) == ["ERROR", "WARNING", "INFO", "DEBUG", "FORCE"]
    assert out.getvalue() == ""
    assert levels(log.read_text()) == ["ERROR", "WARNING", "INFO", "DEBUG", "FORCE"]
    # An explicit console output wins over -tty; NONE writes no file at all.
    out, err, log = configure(
        tmp_path / "b",
        True,
        **{
            "imq.log.console.output": "DEBUG",
            "imq.log.console.stream": "out",
            "imq.log.file.output": "NONE",
        },
    )
    assert levels(out.getvalue()) == ["DEBUG", "FORCE"] and err.getvalue() == ""
    assert not log.exists()
    with pytest.raises(ConfigError, match="imq.log.console.stream"):
        configure(tmp_path / "c", False, **{"imq.log.console.stream": "TTY"})


# -- syslog (imq.log.syslog.*) ----------------------------------------------------------


class SyslogReceiver:
    """A syslog daemon's UDP side on loopback: the datagrams it got, decoded."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.got: list[tuple[int, int, str]] = []  # (facility, severity, text)

    def receive(self, until: Callable[[list[tuple[int, int, str]]], bool], wait: float) -> None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not until(self.got):
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            m = re.match(rb"<(\d+)>(.*)", data, re.S)
            assert m, data
            pri = int(m.group(1))
            self.got.append((pri >> 3, pri & 7, m.group(2).decode().rstrip("\x00")))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def syslog() -> Iterator[SyslogReceiver]:
    r = SyslogReceiver()
    yield r
    r.close()


@pytest.mark.fast
def test_syslog_takes_its_categories_with_facility_identity_and_pid(
    tmp_path: Path, root_logging: None, syslog: SyslogReceiver
) -> None:
    configure(
        tmp_path,
        False,
        **{
            "imq.log.syslog.address": syslog.address,
            "imq.log.syslog.output": "ERROR|INFO",
            "imq.log.syslog.facility": "LOG_LOCAL3",
            "imq.log.syslog.identity": "imqtest",
        },
    )
    syslog.receive(lambda got: len(got) >= 3, 10)
    # local3 is facility 19; err 3, info 6, notice 5 (FORCE: the start-up banner's).
    assert [(f, s) for f, s, _ in syslog.got] == [(19, 3), (19, 6), (19, 5)]
    texts = [t for _, _, t in syslog.got]
    assert texts[0] == f"imqtest[{os.getpid()}]: line at ERROR", texts
    assert levels("\n".join(texts)) == ["ERROR", "INFO", "FORCE"]


def test_syslog_without_pid_falls_back_to_the_console_or_refuses_bad_settings(
    tmp_path: Path, root_logging: None, syslog: SyslogReceiver
) -> None:
    configure(
        tmp_path / "a",
        False,
        **{"imq.log.syslog.address": syslog.address, "imq.log.syslog.logpid": "false"},
    )
    syslog.receive(lambda got: len(got) >= 2, 10)
    assert [t for _, _, t in syslog.got] == [
        "imqbrokerd_logt: line at ERROR",
        "imqbrokerd_logt: line at FORCE",
    ]
    assert {f for f, _, _ in syslog.got} == {3}  # LOG_DAEMON
    # No daemon at that socket: logconsole sends its categories to the console instead.
    out, err, _log = configure(
        tmp_path / "b",
        False,
        **{
            "imq.log.syslog.address": str(tmp_path / "no-such-socket"),
            "imq.log.syslog.logconsole": "true",
            "imq.log.syslog.output": "INFO",
            "imq.log.console.output": "NONE",
        },
    )
    assert levels(err.getvalue()) == ["INFO", "FORCE"] and out.getvalue() == ""
    for bad in ({"imq.log.syslog.facility": "LOG_KITCHEN"}, {"imq.log.syslog.address": "x:y"}):
        with pytest.raises(ConfigError, match="imq.log.syslog"):
            configure(tmp_path / "c", False, **bad)


def test_a_broker_logs_to_syslog(tmp_path: Path, syslog: SyslogReceiver) -> None:
    """A real broker process: its start-up lines reach the syslog receiver under its
    instance's identity and process id; a bad connection's WARNING too."""
    b = start_broker(
        tmp_path,
        f"imq.log.syslog.address={syslog.address}",
        "imq.log.syslog.output=WARNING|INFO",
        tty=False,
    )
    try:
        bad_input(b)
        syslog.receive(lambda got: any("bad magic number" in t for _, _, t in got), 30)
    finally:
        b.stop()
    ident = f"imqbrokerd_{b.instance}[{b.proc.pid}]: "
    assert syslog.got and all(t.startswith(ident) for _, _, t in syslog.got), syslog.got[:3]
    assert any(s == 6 and "ready" in t for _, s, t in syslog.got), syslog.got
    assert any(s == 4 and "bad magic number" in t for _, s, t in syslog.got), syslog.got
