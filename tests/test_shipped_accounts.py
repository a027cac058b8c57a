"""The shipped accounts (broker/security/shipped.py) in process: which logins
``imq.user.shipped_passwords.loopback_only`` refuses (the engine on a real, unstarted
Broker, the peer address set as the driver sets it), and what the broker says at start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker import props
from broker.config import BrokerConfig
from broker.engine import ConnectionEngine, ConnState
from broker.protocol.types import PacketType, Status
from broker.security.digest import md5str
from broker.security.filerepo import FileUserRepository
from broker.security.shipped import (
    SHIPPED_PASSWORDS,
    beyond_loopback,
    is_loopback,
    on_shipped_password,
    start_messages,
)
from broker.security.users import DEFAULT_USERS
from broker.server.broker import Broker

from .test_engine import _auth_basic, _drive, _hello, _sent, _service, _status

pytestmark = pytest.mark.fast

LOOPBACK_ONLY = props.SHIPPED_LOOPBACK_ONLY.name


@pytest.fixture
def broker(tmp_path: Path):
    passwd = tmp_path / "passwd"
    passwd.write_text(
        f"admin:{md5str('admin:admin')}:admin:1\n"
        f"guest:{md5str('guest:guest')}:anonymous:1\n"
        f"alice:{md5str('alice:alice')}:user:1\n"
    )
    config = BrokerConfig(
        {
            "imq.varhome": str(tmp_path / "var"),
            "imq.accesscontrol.enabled": "false",
            LOOPBACK_ONLY: "true",
        }
    )
    b = Broker(config, FileUserRepository(passwd))
    b.router.observers.remove_transaction_observer(b.txn_records)
    yield b
    b.executor.shutdown(wait=False)


def login(broker: Broker, peer: str, user: str, password: str) -> int:
    """The AUTHENTICATE_REPLY status of ``user``/``password`` from ``peer``."""
    return reply_to(broker, peer, user, password)[0]


def reply_to(broker: Broker, peer: str, user: str, password: str) -> tuple[int, dict]:
    """The AUTHENTICATE_REPLY's status and properties."""
    svc = _service("basic")
    broker.service_repositories[svc.name] = broker.user_repository
    e = ConnectionEngine(broker, svc)
    e.peer = peer
    e.start()
    e.receive_data(_hello())
    _sent(e)
    _drive(e, e.receive_data(_auth_basic(user, password)))
    (reply,) = _sent(e)
    assert reply.type == PacketType.AUTHENTICATE_REPLY
    assert (e.state is ConnState.READY) == (_status(reply) == Status.OK)
    return _status(reply), dict(reply.properties)


def test_shipped_accounts_are_the_default_users() -> None:
    assert {u: p for u, p, _ in DEFAULT_USERS} == SHIPPED_PASSWORDS
    assert on_shipped_password("admin", md5str("admin:admin"))
    assert not on_shipped_password("admin", md5str("admin:s3cret"))
    assert not on_shipped_password("alice", md5str("alice:alice"))


def test_loopback_addresses() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1"]))
    assert not any(map(is_loopback, ["10.0.0.5", "0.0.0.0", "::", "", "?", "localhost"]))
    listening = [("jms", "0.0.0.0:7677"), ("admin", "127.0.0.1:7678"), ("ssljms", ":::7679")]
    assert beyond_loopback(listening) == ["jms on 0.0.0.0:7677", "ssljms on :::7679"]


def test_off_loopback_the_shipped_accounts_are_refused_as_a_wrong_password(broker) -> None:
    for user in ("admin", "guest"):
        assert login(broker, "10.0.0.5:40000", user, user) == Status.INVALID_LOGIN
        assert login(broker, "127.0.0.1:40000", user, user) == Status.OK
        assert login(broker, "[::1]:40000", user, user) == Status.OK
    assert login(broker, "10.0.0.5:40001", "alice", "alice") == Status.OK
    # The client sees exactly what a wrong password gets (C4060 in the Java client).
    refused = reply_to(broker, "10.0.0.5:40002", "guest", "guest")
    wrong = reply_to(broker, "127.0.0.1:40003", "alice", "wrong")
    assert refused == wrong and refused[0] == Status.INVALID_LOGIN


def test_a_changed_password_is_accepted_from_anywhere(broker, tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text(f"admin:{md5str('admin:n3w-secret')}:admin:1\n")
    assert login(broker, "10.0.0.5:40000", "admin", "n3w-secret") == Status.OK


def test_without_the_property_nothing_is_refused(broker) -> None:
    broker.shipped_loopback_only = False
    assert login(broker, "10.0.0.5:40000", "admin", "admin") == Status.OK


def test_start_messages() -> None:
    exposed = ["jms on 0.0.0.0:7677"]
    warnings = start_messages(["admin", "guest"], exposed, loopback_only=False)
    assert [level for level, _ in warnings] == [logging.WARNING, logging.WARNING]
    assert warnings[0][1].startswith(
        "user admin still has its shipped password (admin/admin) and the broker listens "
        "beyond loopback (jms on 0.0.0.0:7677)"
    )
    assert warnings[1][1].endswith(f"or set {LOOPBACK_ONLY}=true")
    (info,) = start_messages(["guest"], exposed, loopback_only=True)
    assert info == (
        logging.INFO,
        f"user guest still has its shipped password: accepted from loopback addresses only "
        f"({LOOPBACK_ONLY}=true)",
    )
    assert start_messages(["admin"], [], loopback_only=False) == []
