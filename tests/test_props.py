"""The imq.* property registry (broker/props.py): one declaration per property, typed reads
with the declared default, and call sites that read through it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker import props
from broker.config import DEFAULTS, BrokerConfig, ConfigError

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent


def test_every_default_reads_as_its_type() -> None:
    config = BrokerConfig()
    kinds = {
        props.Int: int,
        props.Seconds: float,
        props.Size: int,
        props.Bool: bool,
        props.List: list,
        props.Text: str,
    }
    for prop in props.declared().values():
        value = config.get(prop)
        expected = kinds.get(type(prop))
        if expected is not None:
            assert isinstance(value, expected), prop
        computed = (props.INSTANCE_NAME, props.VARHOME, props.INSTANCES_HOME)
        if isinstance(prop, props.OptionalText | props.OptionalBool) and prop not in computed:
            assert value is None, prop


def test_defaults_are_the_listed_declarations() -> None:
    listed = {p.name: p.default for p in props.declared().values() if p.listed}
    assert {k: DEFAULTS[k] for k in listed} == listed
    unlisted = [p.name for p in props.declared().values() if not p.listed]
    assert props.MEMORY_LIMIT.name in unlisted
    assert not set(unlisted) & set(DEFAULTS)


def test_typed_reads() -> None:
    config = BrokerConfig(
        {
            props.MESSAGE_MAX_SIZE.name: "2m",
            props.PING_INTERVAL.name: "7",
            props.PING_ENABLED.name: "FALSE",
            props.SERVICE_ACTIVELIST.name: " jms , ssljms ,",
            props.EXPIRATION_INTERVAL.name: "",  # empty: not configured
            props.PERSIST_FILE_PREALLOCATE.name: "true",
        }
    )
    assert config.get(props.MESSAGE_MAX_SIZE) == 2 * 1024 * 1024
    assert config.get(props.PING_INTERVAL) == 7
    assert config.get(props.PING_ENABLED) is False
    assert config.get(props.SERVICE_ACTIVELIST) == ["jms", "ssljms"]
    assert config.get(props.EXPIRATION_INTERVAL) == 60
    assert config.get(props.PERSIST_FILE_PREALLOCATE) is True
    assert config.get(props.PERSIST_JDBC_HEARTBEAT) == 5.0  # the default, a whole number
    assert config.get(props.DROP_LOG_INTERVAL) == 30  # a code default, not listed
    assert config.get(props.AUTOCREATE_DEST_ATTRIBUTES["maxTotalMsgBytes"]) == 10240 * 1024**2
    assert config.get(props.HOSTNAME) is None
    with pytest.raises(ConfigError, match=props.PING_INTERVAL.name):
        BrokerConfig({props.PING_INTERVAL.name: "soon"}).get(props.PING_INTERVAL)


def test_seconds_take_fractions() -> None:
    """imq.persist.jdbc.heartbeat.interval (ours) is seconds with fractions (a test, a fast
    failover); what is not a number of seconds is refused, naming the property."""
    heartbeat = props.PERSIST_JDBC_HEARTBEAT
    for text, seconds in (("0.5", 0.5), ("2", 2.0), (" 1.25 ", 1.25), (".5", 0.5), ("3.", 3.0)):
        assert BrokerConfig({heartbeat.name: text}).get(heartbeat) == seconds
    for bad in ("soon", "-1", "1e3", "0.5s", "nan", "1.2.3"):
        with pytest.raises(ConfigError, match=heartbeat.name):
            BrokerConfig({heartbeat.name: bad}).get(heartbeat)


def test_a_property_is_declared_once() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        props.Int(props.PING_INTERVAL.name, "1")


CONVERTED = [
    "broker/config.py",
    "broker/logsetup.py",
    "broker/server/broker.py",
    "broker/server/events.py",
    "broker/server/admin_service/handler.py",
    "broker/server/admin_service/metrics.py",
    *sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "broker" / "admintools" / "actions").glob("*.py")
    ),
    "broker/management/commands/imqcmd.py",
    *sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "broker" / "admintools" / "imqcmd").glob("*.py")
    ),
    "broker/management/commands/runbroker.py",
    "broker/management/commands/up.py",
    "broker/management/commands/imqtxn.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "broker" / "store").glob("*.py")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "broker" / "security").glob("*.py")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "portal").glob("*.py")),
]
# A whole string literal naming one property (f-strings build per-service names).
_LITERAL = re.compile(r"""(?<![\w"'])(?<![fF])["']imq\.[A-Za-z0-9_.]+["']""")


@pytest.mark.parametrize("path", CONVERTED)
def test_call_sites_read_through_the_registry(path: str) -> None:
    text = (ROOT / path).read_text()
    assert _LITERAL.findall(text) == []
