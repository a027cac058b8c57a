"""Tests for the shared data model, credentials, broker properties and log setup."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import pytest

from broker.config import (
    DEFAULTS,
    BrokerConfig,
    ConfigError,
    format_properties,
    parse_properties,
)
from broker.logsetup import (
    DEBUGHIGH,
    NONE,
    DatabaseLogHandler,
    RolloverFileHandler,
    configure_logging,
    openmq_level_name,
    parse_level,
)
from broker.security.digest import (
    constant_time_equals,
    digest_response,
    md5str,
    new_nonce,
    password_digest,
)

pytestmark = pytest.mark.fast

# --------------------------------------------------------------------------------------
# digest
# --------------------------------------------------------------------------------------


def test_md5str_vectors() -> None:
    assert md5str("admin:admin") == "-2d5455c8583c24eec82c7a1e273ea02e"
    assert md5str("guest:guest") == "-2c3c4a34aa2c392f39edd112333c230d"
    assert password_digest("admin", "admin") == "-2d5455c8583c24eec82c7a1e273ea02e"


def test_digest_response_vector() -> None:
    stored = password_digest("admin", "admin")
    nonce = "417ac1f402bf17073ff136e01e6daf03"
    assert digest_response(stored, nonce) == "-5007ec009b6d5e18ac1542eed9b22721"


def test_md5str_positive_has_no_leading_zeros() -> None:
    # Find a string whose MD5 is positive and starts with a zero nibble.
    for i in range(10000):
        s = f"x{i}"
        raw = hashlib.md5(s.encode()).hexdigest()
        if raw.startswith("0"):
            assert md5str(s) == raw.lstrip("0")
            break
    else:  # pragma: no cover
        pytest.fail("no sample found")


def test_constant_time_equals_and_nonce() -> None:
    assert constant_time_equals("-2d54", "-2d54")
    assert not constant_time_equals("-2d54", "-2d55")
    assert not constant_time_equals("-2d54", "-2d5")
    assert new_nonce() != new_nonce()


# --------------------------------------------------------------------------------------
# users
# --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_broker_user_set_and_check_password() -> None:
    from broker.models import BrokerUser

    user = BrokerUser(username="admin")
    user.set_password("admin")
    user.save()
    assert user.password_digest == "-2d5455c8583c24eec82c7a1e273ea02e"
    assert user.check_password("admin")
    assert not user.check_password("Admin")
    assert user.active


@pytest.mark.django_db
def test_default_users_are_idempotent_and_keep_changed_passwords() -> None:
    from broker.models import BrokerGroup, BrokerUser
    from broker.security.users import ensure_default_users, set_password

    assert ensure_default_users() == ["admin", "guest"]
    assert set(BrokerGroup.objects.values_list("name", flat=True)) >= {
        "admin",
        "user",
        "anonymous",
    }
    admin = BrokerUser.objects.get(username="admin")
    assert admin.password_digest == "-2d5455c8583c24eec82c7a1e273ea02e"
    assert list(admin.groups.values_list("name", flat=True)) == ["admin"]
    guest = BrokerUser.objects.get(username="guest")
    assert guest.check_password("guest")

    set_password("admin", "s3cret")
    assert ensure_default_users() == []
    assert BrokerUser.objects.count() == 2
    assert BrokerUser.objects.get(username="admin").check_password("s3cret")


@pytest.mark.django_db
def test_create_user_and_lookup_including_inactive() -> None:
    from broker.security.users import (
        DatabaseUserRepository,
        DuplicateUserError,
        UnknownUserError,
        UserError,
        UserRecord,
        create_user,
        delete_user,
        set_active,
    )

    create_user("alice", "pw", ["user", "traders"])
    repo = DatabaseUserRepository()
    rec = repo.lookup("alice")
    assert rec == UserRecord(
        username="alice",
        password_digest=password_digest("alice", "pw"),
        active=True,
        groups=frozenset({"user", "traders"}),
    )
    assert not rec.is_admin
    with pytest.raises(AttributeError):
        rec.active = False  # type: ignore[misc]

    set_active("alice", False)
    rec = repo.lookup("alice")
    assert rec is not None and rec.active is False

    create_user("bob", "pw", ["admin"], active=False)
    rec = repo.lookup("bob")
    assert rec is not None and rec.is_admin and not rec.active

    assert repo.lookup("nobody") is None
    with pytest.raises(DuplicateUserError):
        create_user("alice", "other")
    with pytest.raises(UserError):
        create_user("a:b", "pw")
    with pytest.raises(UserError):
        create_user("carol", "")
    with pytest.raises(UnknownUserError):
        set_active("nobody", True)
    delete_user("bob")
    assert repo.lookup("bob") is None


# --------------------------------------------------------------------------------------
# properties parsing
# --------------------------------------------------------------------------------------


def test_parse_properties_separators_and_comments() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "   \n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "  d=  spaced value  \n"
        "e\n"
        "f=\n"
        "g==x\n"
        "dup=1\n"
        "dup=2\r\n"
        "h:x\rlast=end"
    )
    props = parse_properties(text)
    assert props == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "spaced value  ",
        "e": "",
        "f": "",
        "g": "=x",
        "dup": "2",
        "h": "x",
        "last": "end",
    }


def test_parse_properties_escapes_and_continuation() -> None:
    text = (
        "key\\ with\\ spaces=v\n"
        "colon\\:key=v2\n"
        "unicode=caf\\u00e9 \\u20ac\n"
        "ctl=tab\\there\\nnl\n"
        "other=\\q\\=\\\\\n"
        "list=a,\\\n"
        "     b,\\\n"
        "\t c\n"
        "even=ends with backslash\\\\\n"
        "next=1\n"
        "# comment ending in backslash \\\n"
        "notcontinued=yes\n"
        "eof=x\\"
    )
    props = parse_properties(text)
    assert props["key with spaces"] == "v"
    assert props["colon:key"] == "v2"
    assert props["unicode"] == "café €"
    assert props["ctl"] == "tab\there\nnl"
    assert props["other"] == "q=\\"
    assert props["list"] == "a,b,c"
    assert props["even"] == "ends with backslash\\"
    assert props["next"] == "1"
    assert props["notcontinued"] == "yes"
    assert props["eof"] == "x"


def test_parse_properties_bad_unicode_escape() -> None:
    with pytest.raises(ConfigError):
        parse_properties("a=\\u12g4\n")


def test_format_properties_round_trip() -> None:
    props = {"a key": " lead", "b": "x=y:z#!", "c": "é\t€\n", "d": "back\\slash"}
    text = format_properties(props, header="hello")
    assert text.isascii()
    assert parse_properties(text) == props


def test_variable_expansion() -> None:
    cfg = BrokerConfig(
        {"imq.a": "${imq.b}/x", "imq.b": "${imq.instancename}", "imq.unknown": "${nope}"}
    )
    assert cfg.get("imq.a") == "imqbroker/x"
    assert cfg.get("imq.unknown") == "${nope}"
    assert cfg.get("imq.log.syslog.identity") == "imqbrokerd_imqbroker"
    loop = BrokerConfig({"imq.x": "${imq.y}", "imq.y": "${imq.x}"})
    with pytest.raises(ConfigError):
        loop.get("imq.x")


def test_defaults_present() -> None:
    cfg = BrokerConfig()
    assert cfg.get_int("imq.portmapper.port", 0) == 7676
    assert cfg.get_list("imq.service.activelist") == ["jms", "admin"]
    assert cfg.service_prop("jms", "tcp.port") == "0"
    assert cfg.service_prop("admin", "servicetype") == "ADMIN"
    assert cfg.service_prop("nosvc", "tcp.port", "9") == "9"
    assert cfg.get("imq.authentication.type") == "digest"
    assert cfg.get_bool("imq.autocreate.queue", False) is True
    assert cfg.get_size("imq.message.max_size", 0) == 70 * 1024 * 1024
    assert cfg.get_size("imq.autocreate.destination.maxTotalMsgBytes", 0) == 10 * 1024**3
    assert cfg.get("imq.autocreate.destination.limitBehavior") == "REJECT_NEWEST"
    assert cfg.get("imq.persist.store") == "file"
    assert cfg.get("imq.log.level") == "INFO"
    assert "imq.no.such.property" not in cfg
    assert cfg.get("imq.no.such.property") is None
    assert cfg.get("imq.no.such.property", "d") == "d"
    assert all(isinstance(v, str) for v in DEFAULTS.values())


def test_layering_defaults_file_overrides(tmp_path: Path) -> None:
    props_dir = tmp_path / "instances" / "b1" / "props"
    props_dir.mkdir(parents=True)
    (props_dir / "config.properties").write_text(
        "imq.portmapper.port=7677\nimq.ping.interval=30\nimq.custom=${imq.instancename}-c\n",
        encoding="utf-8",
    )
    cfg = BrokerConfig.load("b1", tmp_path, {"imq.ping.interval": "10"})
    assert cfg.instance == "b1"
    assert cfg.varhome == tmp_path
    assert cfg.instance_dir == tmp_path / "instances" / "b1"
    assert cfg.get("imq.instancename") == "b1"
    assert cfg.get("imq.varhome") == str(tmp_path)
    assert cfg.get_int("imq.portmapper.port", 0) == 7677  # file over default
    assert cfg.get_int("imq.ping.interval", 0) == 10  # override over file
    assert cfg.get_int("imq.ping.close.interval", 0) == 5  # default
    assert cfg.get("imq.custom") == "b1-c"
    assert cfg.get("imq.log.file.dirpath") == str(tmp_path / "instances" / "b1" / "log")

    # No file: defaults only.
    plain = BrokerConfig.load("other", tmp_path)
    assert plain.get_int("imq.portmapper.port", 0) == 7676


def test_set_and_save_instance_file(tmp_path: Path) -> None:
    cfg = BrokerConfig.load("b2", tmp_path, {"imq.ping.interval": "10"})
    cfg.set("imq.ping.interval", "15")
    cfg.set("imq.portmapper.port", "7676")  # equal to the default: not written
    cfg.set("imq.autocreate.queue", "false")
    assert cfg.get("imq.ping.interval") == "15"
    cfg.save_instance_file()
    path = tmp_path / "instances" / "b2" / "props" / "config.properties"
    saved = parse_properties(path.read_text(encoding="ascii"))
    assert saved == {"imq.ping.interval": "15", "imq.autocreate.queue": "false"}
    again = BrokerConfig.load("b2", tmp_path)
    assert again.get_bool("imq.autocreate.queue", True) is False
    with pytest.raises(ConfigError):
        cfg.set("imq.instancename", "x")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10m", 10 * 1024 * 1024),
        ("10M", 10 * 1024 * 1024),
        ("512k", 512 * 1024),
        ("512K", 512 * 1024),
        ("100", 100),
        ("100b", 100),
        ("-1", -1),
        (" 7k ", 7 * 1024),
        ("10240m", 10240 * 1024 * 1024),
    ],
)
def test_get_size(value: str, expected: int) -> None:
    assert BrokerConfig({"imq.s": value}).get_size("imq.s", 0) == expected


@pytest.mark.parametrize("value", ["10g", "abc", "1.5m", "k", "99999999999"])
def test_get_size_bad(value: str) -> None:
    with pytest.raises(ConfigError, match="imq.s"):
        BrokerConfig({"imq.s": value}).get_size("imq.s", 0)


def test_typed_getters() -> None:
    cfg = BrokerConfig(
        {
            "imq.i": " 42 ",
            "imq.neg": "-3",
            "imq.bad": "abc",
            "imq.empty": "",
            "imq.t": "TRUE",
            "imq.f": "yes",
            "imq.l": " a, b ,,c ",
        }
    )
    assert cfg.get_int("imq.i", 0) == 42
    assert cfg.get_int("imq.neg", 0) == -3
    assert cfg.get_int("imq.missing", 7) == 7
    assert cfg.get_int("imq.empty", 7) == 7
    with pytest.raises(ConfigError, match="imq.bad"):
        cfg.get_int("imq.bad", 0)
    assert isinstance(ConfigError("x"), ValueError)
    assert cfg.get_bool("imq.t", False) is True
    assert cfg.get_bool("imq.f", True) is False  # parseBoolean: only "true" is true
    assert cfg.get_bool("imq.missing", True) is True
    assert cfg.get_list("imq.l") == ["a", "b", "c"]
    assert cfg.get_list("imq.missing") == []
    assert cfg.get_list("imq.missing", ["x"]) == ["x"]
    assert cfg.get_size("imq.missing", 123) == 123


# --------------------------------------------------------------------------------------
# logging
# --------------------------------------------------------------------------------------


def test_level_mapping() -> None:
    assert parse_level("info") == logging.INFO
    assert parse_level("DEBUGHIGH") == DEBUGHIGH
    assert parse_level("NONE") == NONE
    with pytest.raises(ConfigError):
        parse_level("LOUD")
    assert openmq_level_name(logging.CRITICAL) == "ERROR"
    assert openmq_level_name(logging.WARNING) == "WARNING"


def test_rollover_file_handler_names(tmp_path: Path) -> None:
    handler = RolloverFileHandler(tmp_path / "log.txt", max_bytes=200)
    try:
        logger = logging.getLogger("test.rollover")
        logger.propagate = False
        logger.addHandler(handler)
        for i in range(20):
            logger.warning("line %d with some padding to grow the file", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert (tmp_path / "log_1.txt").exists()
    assert (tmp_path / "log.txt").exists()


@pytest.mark.django_db(transaction=True)
def test_configure_logging_writes_file(tmp_path: Path) -> None:
    cfg = BrokerConfig.load(
        "logtest",
        tmp_path,
        {"imq.log.database.enabled": "false", "imq.log.syslog.address": "NONE"},
    )
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, list(root.handlers)
    try:
        configure_logging(cfg, "DEBUG", tty=False)
        assert root.level == logging.DEBUG
        logging.getLogger("broker.test").warning("hello %s", "file")
        configure_logging(cfg, None, tty=False)  # reconfiguring replaces, not stacks
        assert root.level == logging.INFO
        owned = [h for h in root.handlers if getattr(h, "_imq_owned", False)]
        assert len(owned) == 2  # the file and the console (ERROR|WARNING on stderr)
    finally:
        for h in list(root.handlers):
            if h not in saved_handlers:
                root.removeHandler(h)
                h.close()
        root.setLevel(saved_level)
    text = (tmp_path / "instances" / "logtest" / "log" / "log.txt").read_text()
    assert "WARNING broker.test: hello file" in text
    assert text.startswith("[")


@pytest.mark.django_db(transaction=True)
def test_database_log_handler_writes_warning_and_ignores_info() -> None:
    from broker.models import LogRecord

    handler = DatabaseLogHandler("testbroker")
    logger = logging.getLogger("test.dblog")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.info("not stored")
        logger.warning("disk at %d%%", 91)
        try:
            raise RuntimeError("kaput")
        except RuntimeError:
            logger.exception("failed")
        assert handler.flush()
    finally:
        logger.removeHandler(handler)
        handler.close()
    rows = list(LogRecord.objects.order_by("id"))
    assert [(r.level, r.logger, r.broker_instance) for r in rows] == [
        ("WARNING", "test.dblog", "testbroker"),
        ("ERROR", "test.dblog", "testbroker"),
    ]
    assert rows[0].message == "disk at 91%"
    assert "RuntimeError: kaput" in rows[1].message
    assert handler.written == 2 and handler.dropped == 0
    assert not handler._thread.is_alive()


def test_database_log_handler_survives_db_errors() -> None:
    # No django_db mark: the test database is blocked, so every write fails.
    handler = DatabaseLogHandler("x")
    logger = logging.getLogger("test.dblog.fail")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.error("one")
        logger.error("two")
        assert handler.flush()
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert handler.dropped == 2
    assert handler.written == 0
    handler.close()  # idempotent
    logger.error("after close is ignored")


def test_settings_defaults() -> None:
    from django.conf import settings

    assert settings.DEFAULT_AUTO_FIELD == "django.db.models.BigAutoField"
    assert "broker.apps.BrokerAppConfig" in settings.INSTALLED_APPS
    assert settings.IMQ_INSTANCE == os.environ.get("IMQ_INSTANCE", "imqbroker")


@pytest.mark.django_db
def test_healthz(client) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok"


def test_cluster_file_layer_sits_under_the_brokers_own_properties(tmp_path: Path) -> None:
    """imq.cluster.url: every property of the shared file applies unless the broker's
    config.properties or command line sets it; reread() reads the file again."""
    from broker.config import ClusterFileError

    shared = tmp_path / "cluster.properties"
    shared.write_text(
        "imq.cluster.brokerlist=h1:7676,h2:7676\nimq.cluster.masterbroker=h1:7676\n"
        "imq.system.max_count=500\nimq.ping.interval=40\nimq.custom=${imq.instancename}\n"
        "imq.cluster.url=file:///elsewhere\n"
    )
    props_dir = tmp_path / "instances" / "b1" / "props"
    props_dir.mkdir(parents=True)
    (props_dir / "config.properties").write_text(
        f"imq.cluster.url=file://{shared}\nimq.system.max_count=20\n"
    )
    cfg = BrokerConfig.load("b1", tmp_path, {"imq.ping.interval": "10"})
    assert cfg.get("imq.cluster.brokerlist") is None  # not read until asked
    assert cfg.load_cluster_file() == f"file://{shared}"
    assert cfg.get("imq.cluster.brokerlist") == "h1:7676,h2:7676"
    assert cfg.get("imq.cluster.masterbroker") == "h1:7676"
    assert cfg.get_int("imq.system.max_count", 0) == 20  # config.properties wins
    assert cfg.get_int("imq.ping.interval", 0) == 10  # the command line wins
    assert cfg.get("imq.custom") == "b1"
    assert cfg.get("imq.cluster.url") == f"file://{shared}"
    assert cfg.cluster_file_shadowed() == [
        "imq.cluster.url",
        "imq.ping.interval",
        "imq.system.max_count",
    ]
    assert cfg.as_dict()["imq.cluster.masterbroker"] == "h1:7676"

    shared.write_text("imq.cluster.brokerlist=h1:7676,h2:7676,h3:7676\n")
    assert cfg.reread().get("imq.cluster.brokerlist") == "h1:7676,h2:7676,h3:7676"
    shared.unlink()
    with pytest.raises(ClusterFileError, match="cannot read it"):
        cfg.reread()
    with pytest.raises(ClusterFileError, match="cannot read it"):
        cfg.load_cluster_file()
    assert cfg.get("imq.cluster.brokerlist") is None  # the layer is empty again

    # A plain path works too; other schemes are refused, naming the ones that work.
    shared.write_text("imq.cluster.transport=ssl\n")
    plain = BrokerConfig.load("b2", tmp_path, {"imq.cluster.url": str(shared)})
    plain.load_cluster_file()
    assert plain.get("imq.cluster.transport") == "ssl"
    ftp = BrokerConfig.load("b2", tmp_path, {"imq.cluster.url": "ftp://h/c.properties"})
    with pytest.raises(ClusterFileError, match="file:, http: or https:"):
        ftp.load_cluster_file()
    assert BrokerConfig.load("b3", tmp_path).load_cluster_file() is None
