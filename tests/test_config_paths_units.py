"""The parts of the configuration paths that need no process (their live checks, against
ours and the stock broker, are tests/interop/test_config_paths.py): where the log file
goes, which access-control file a service reads, and what names a cluster member."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from broker import props
from broker.cluster.config import ClusterConfig
from broker.config import BrokerConfig, ConfigError
from broker.logsetup import _log_file
from broker.security.acl import AccessController

pytestmark = pytest.mark.fast


def test_log_file_pattern_wins_over_dirpath_and_filename(tmp_path: Path) -> None:
    old = {props.LOG_FILE_DIRPATH.name: str(tmp_path / "d"), props.LOG_FILE_NAME.name: "b.log"}
    assert _log_file(BrokerConfig(old)) == tmp_path / "d" / "b.log"
    pattern = {**old, props.LOG_FILE_PATTERN.name: f"{tmp_path}/j/x%g-%u%%.log"}
    assert _log_file(BrokerConfig(pattern)) == tmp_path / "j" / "x0-0%.log"
    temp = {props.LOG_FILE_PATTERN.name: "%t/imq.log"}
    assert _log_file(BrokerConfig(temp)) == Path(tempfile.gettempdir()) / "imq.log"
    assert _log_file(BrokerConfig({props.LOG_FILE_PATTERN.name: "%h/a"})) == Path.home() / "a"
    with pytest.raises(ConfigError, match=r"FileHandler.pattern: .*unknown %q"):
        _log_file(BrokerConfig({props.LOG_FILE_PATTERN.name: "/x/%q.log"}))


def test_a_service_reads_its_own_access_control_file(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "imq.accesscontrol.file.dirpath": str(tmp_path / "wide"),
            "imq.accesscontrol.file.filename": "wide.acl",
            "imq.jms.accesscontrol.file.dirpath": str(tmp_path / "own"),
            "imq.jms.accesscontrol.file.filename": "jms.acl",
            "imq.ssljms.accesscontrol.file.filename": "tls.acl",
            "imq.httpjms.accesscontrol.file.dirpath": str(tmp_path / "http"),
        }
    )
    ac = AccessController(config, "b1")
    assert ac.service("jms")[1].path == tmp_path / "own" / "jms.acl"
    assert ac.service("admin")[1].path == tmp_path / "wide" / "wide.acl"
    assert ac.service("ssljms")[1].path == tmp_path / "wide" / "tls.acl"
    # Its own directory, the broker-wide name; read even before the file is there.
    assert ac.service("httpjms")[1].path == tmp_path / "http" / "wide.acl"


@pytest.mark.parametrize(
    ("hostname", "cluster_hostname", "me"),
    [
        ("10.0.0.5", "10.0.0.6", "10.0.0.5"),  # the port mapper's address names it
        (None, "broker-2", "broker-2"),  # imq.hostname unset (Docker's compose file)
        (None, None, "127.0.0.1"),
    ],
)
def test_a_cluster_member_is_named_by_its_port_mapper(
    hostname: str | None, cluster_hostname: str | None, me: str
) -> None:
    values = {props.CLUSTER_BROKERLIST.name: "10.0.0.9:7676"}
    if hostname:
        values[props.HOSTNAME.name] = hostname
    if cluster_hostname:
        values[props.CLUSTER_HOSTNAME.name] = cluster_hostname
    cfg = ClusterConfig.from_config(BrokerConfig(values), 7676)
    assert cfg.me.host == me
    assert cfg.cluster_host == (cluster_hostname or hostname)
