"""The parts of ``manage.py imqimport`` that need no broker: which stock properties this
broker honours, a stock passfile (plain and as the stock ``imqusermgr encode`` writes it),
a stock instance directory's variables and files, and the report.  The whole import, with
the stock broker, is tests/interop/test_stock_import.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.admintools.actions import ActionError
from broker.admintools.stock_import import StockInstance, read_stock_passfile
from broker.admintools.stock_properties import property_support
from broker.admintools.stock_report import Report

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    "name",
    [
        "imq.message.max_size",
        "imq.service.activelist",
        "imq.autocreate.queue.maxNumActiveConsumers",
        "imq.jms.tcp.port",
        "imq.ssljms.tls.hostname",
        "imq.jms.max_threads",
        "imq.user_repository.ldap.server",
        "imq.cluster.brokerlist",
    ],
)
def test_honoured_properties(name: str) -> None:
    assert property_support(name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("imq.jmx.usePlatformMBeanServer", "JMX"),
        ("imq.bridge.admin.user", "bridge"),
        ("imq.persist.jdbc.dbVendor", "DATABASE_URL"),
        ("imq.persist.jdbc.mysql.user", "DATABASE_URL"),
        ("imq.jms.threadpool_model", "thread pools"),
        ("imq.admin.threadpool_model", "thread pools"),
        ("imq.instanceconfig.version", "bookkeeping"),
        ("imq.instancename", "fixed"),
        ("imq.no.such.thing", "unknown property"),
    ],
)
def test_properties_not_honoured_say_why(name: str, why: str) -> None:
    said = property_support(name)
    assert said is not None and why in said


def test_passfile_plain_and_encoded(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("imq.keystore.password=changeit\nimq.imqcmd.password=adminpw\n")
    assert read_stock_passfile(plain) == {
        "imq.keystore.password": "changeit",
        "imq.imqcmd.password": "adminpw",
    }
    # What the stock `imqusermgr encode` wrote for imq.keystore.password=changeit.
    encoded = tmp_path / "encoded"
    encoded.write_text(
        "imq.keystore.password{-78c72d734D5101F4}="
        "74a0e07e5d68212f75642691800fe63b320ac6524c841a3d4862593c1f4f299e:Y2hhbmdlaXQ=\n"
    )
    assert read_stock_passfile(encoded) == {"imq.keystore.password": "changeit"}


def test_stock_instance_files_and_variables(tmp_path: Path) -> None:
    inst = tmp_path / "var" / "instances" / "prod"
    (inst / "props").mkdir(parents=True)
    (inst / "etc").mkdir()
    (inst / "props" / "config.properties").write_text(
        "imq.keystore.file.dirpath=${imq.etchome}\n"
        "imq.user_repository.file.filename=users\n"
        "imq.passfile.dirpath=${imq.varhome}${/}secrets\n"
    )
    stock = StockInstance.open(inst)
    assert stock.name == "prod"
    assert stock.varhome == (tmp_path / "var").resolve()
    # ${imq.etchome} is the stock installation's: unknown unless given.
    assert stock.expand("${imq.etchome}/keystore") is None
    assert StockInstance.open(inst, tmp_path / "etc").expand("${imq.etchome}") == str(
        (tmp_path / "etc").resolve()
    )
    assert stock.expand("${imq.instanceshome}${/}${imq.instancename}") == str(inst.resolve())
    assert stock.etc_file(
        "imq.user_repository.file.dirpath", "imq.user_repository.file.filename", "passwd"
    ) == (inst.resolve() / "etc" / "users")
    assert (
        stock.file("imq.passfile.dirpath", "${imq.etchome}", "imq.passfile.name", "passfile")
        == (tmp_path / "var").resolve() / "secrets" / "passfile"
    )


def test_not_an_instance_directory(tmp_path: Path) -> None:
    with pytest.raises(ActionError, match="not a stock broker instance directory"):
        StockInstance.open(tmp_path)


def test_report_lines_and_counts() -> None:
    r = Report()
    r.not_taken("property", "imq.jmx.rmiregistry.port", "'1099': JMX is not supported")
    r.taken("user", "alice", "group user")
    r.adapted("keystore", "/etc/imq/keystore", "converted")
    assert r.counts() == {"taken": 1, "adapted": 1, "not taken": 1}
    assert r.lines() == [
        "taken      user          alice: group user",
        "adapted    keystore      /etc/imq/keystore: converted",
        "not taken  property      imq.jmx.rmiregistry.port: '1099': JMX is not supported",
        "1 taken, 1 adapted, 1 not taken",
    ]
    with pytest.raises(ValueError):
        r.add("maybe", "user", "bob")


def test_dry_run_reports_without_secrets(tmp_path: Path) -> None:
    """A dry run over an instance directory: users, rules and properties reported, and
    no password value in the report (the keystore is absent here)."""
    from broker.admintools.stock_import import import_configuration
    from broker.config import BrokerConfig

    inst = tmp_path / "var" / "instances" / "prod"
    (inst / "props").mkdir(parents=True)
    (inst / "etc").mkdir()
    (inst / "props" / "config.properties").write_text(
        "imq.message.max_size=20m\n"
        "imq.persist.jdbc.mysql.password=s3cret\n"
        "imq.keystore.password=s3cret\n"
        "imq.jms.threadpool_model=dedicated\n"
    )
    (inst / "etc" / "passwd").write_text(
        "admin:-2d5455c8583c24eec82c7a1e273ea02e:admin:1\nbad*name:abc:user:1\nbob:abc:user:0\n"
    )
    (inst / "etc" / "accesscontrol.properties").write_text(
        "version=JMQFileAccessControlModel/100\nqueue.q.produce.allow.user=bob\nnot.a.rule=1\n"
    )
    config = BrokerConfig.load("ours", tmp_path / "ours")
    report = import_configuration("test", StockInstance.open(inst), config, dry_run=True)
    text = "\n".join(report.lines())
    assert "s3cret" not in text
    assert report.find("property", "imq.message.max_size").outcome == "taken"
    assert report.find("property", "imq.jms.threadpool_model").outcome == "not taken"
    assert report.find("user", "admin").outcome == "taken"
    assert report.find("user", "bob").detail == "group user, disabled, password as is"
    assert report.find("user", "bad*name").outcome == "not taken"
    assert report.find("access rule", "queue.q.produce.allow.user").outcome == "taken"
    assert report.find("access rule", "not.a.rule").outcome == "not taken"
    missing = report.find("keystore", str(inst.resolve() / "etc" / "keystore"))
    assert missing is not None and missing.outcome == "not taken" and "--keystore" in missing.detail
    assert not config.instance_file.exists()
