"""broker/propcheck.py: which configured properties the broker warns about at start, and
in what words (in process; tests/test_config_warnings.py sees the real broker say it)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker.config import BrokerConfig, format_properties
from broker.propcheck import findings, warn_unhonoured

pytestmark = pytest.mark.fast


@pytest.fixture
def varhome(tmp_path: Path) -> Path:
    return tmp_path


def _config(
    varhome: Path, file: dict[str, str], command_line: dict[str, str] | None = None
) -> BrokerConfig:
    """An instance whose config.properties holds ``file``, started with ``command_line``
    as -D arguments."""
    path = varhome / "instances" / "imqbroker" / "props" / "config.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_properties(file))
    return BrokerConfig.load("imqbroker", varhome, command_line)


def test_each_unhonoured_name_once_with_where_and_why(varhome: Path) -> None:
    config = _config(
        varhome,
        {
            "imq.persist.file.message.cleanup": "true",
            "imq.jms.threadpool_model": "shared",
            "imq.persist.jdbc.postgresql.user": "mq",
            "imq.wsjms.allowedOrigins": "*",
            "imq.ping.interval": "60",
            "imq.jms.tcp.port": "7677",
            "imq.admin.max_threads": "20",
            "handlers": "java.util.logging.ConsoleHandler",
            "other.program.setting": "x",
        },
        {"imq.persist.file.message.cleanup": "false", "imq.portunif.enabled": "true"},
    )
    found = {f.name: f for f in findings(config)}
    assert sorted(found) == [
        "handlers",
        "imq.jms.threadpool_model",
        "imq.persist.file.message.cleanup",
        "imq.persist.jdbc.postgresql.user",
        "imq.portunif.enabled",
        "imq.wsjms.allowedOrigins",
    ]
    # Set in both places: said once, where it wins.
    assert found["imq.persist.file.message.cleanup"].where == "on the command line"
    assert found["imq.jms.threadpool_model"].where == "in config.properties"
    assert "WebSocket" in found["imq.wsjms.allowedOrigins"].why
    assert str(found["imq.portunif.enabled"]).startswith(
        "imq.portunif.enabled (set on the command line) is ignored: not supported: "
    )


def test_unknown_imq_names_with_the_nearest_known_one(varhome: Path) -> None:
    found = findings(
        _config(
            varhome, {"imq.autocreate.queu": "false", "imq.zzz.nothing.like.it": "1", "x.y": "2"}
        )
    )
    assert [(f.name, f.why) for f in found] == [
        ("imq.autocreate.queu", "unknown property (did you mean imq.autocreate.queue?)"),
        ("imq.zzz.nothing.like.it", "unknown property"),
    ]


def test_reported_properties_are_not_configurable(varhome: Path) -> None:
    (finding,) = findings(_config(varhome, {"imq.product.version": "9.9"}))
    assert finding.why == "the broker reports it; it is not configurable"


def test_a_clean_configuration_says_nothing(
    varhome: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(varhome, {"imq.ping.interval": "60", "imq.log.syslog.facility": "LOG_LOCAL1"})
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        assert warn_unhonoured(config) == []
    assert caplog.records == []


def test_one_warning_per_finding(varhome: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = _config(varhome, {"imq.log.jmx.output": "ALL", "imq.memory.levels": "green,red"})
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        warn_unhonoured(config)
    assert [r.getMessage().split(" ")[0] for r in caplog.records] == [
        "imq.log.jmx.output",
        "imq.memory.levels",
    ]
