"""User repositories (database, passwd file, LDAP), basic and digest authentication,
failed-login handling, and ``imqusermgr``, against real broker processes (and a real
slapd for LDAP)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from broker.protocol.auth import encode_auth_body, encode_basic_password
from broker.protocol.packet import build_packet
from broker.protocol.types import PacketType
from broker.security.digest import digest_response, md5str
from tests.manage_fork import run_manage

from .conftest import start_broker
from .ldap import ldap_server  # noqa: F401 - a real slapd for the LDAP tests
from .wire import Peer, login, vector


def auth_attempt(host: str, port: int, user: str, password: str) -> tuple[str, int, Peer]:
    """(auth type offered, AUTHENTICATE_REPLY status, the connection, still open)."""
    peer = Peer(host, port, timeout=20)
    try:
        peer.send(vector("hello.hex"))
        peer.expect(PacketType.HELLO_REPLY)
        req = peer.expect(PacketType.AUTHENTICATE_REQUEST)
        kind = req.properties["JMQAuthType"]
        if kind == "basic":
            cred = encode_basic_password(password)
        else:
            cred = digest_response(md5str(f"{user}:{password}"), req.body.decode("ascii"))
        peer.send(
            build_packet(
                PacketType.AUTHENTICATE,
                props={"JMQAuthType": kind},
                body=encode_auth_body(user, cred),
                flags=0x10,
                consumer_id=2,
            )
        )
        status = peer.expect(PacketType.AUTHENTICATE_REPLY).properties["JMQStatus"]
    except BaseException:
        peer.close()
        raise
    return kind, status, peer


class Logins:
    """Login attempts against a broker: each answer is checked as it comes; that the broker
    closed each refused connection is checked at the end, for all of them at once.  The
    broker closes a refused login's connection REFUSED_LOGIN_LINGER (2 s) after its answer
    (unless the client closes first): waited for one by one, that cost 2 s a refusal;
    the lingers of the connections held open here run at the same time."""

    def __init__(self) -> None:
        self.refused: list[Peer] = []

    def status(self, host: str, port: int, user: str, password: str) -> tuple[str, int]:
        """(auth type offered, AUTHENTICATE_REPLY status)."""
        kind, status, peer = auth_attempt(host, port, user, password)
        if status == 200:
            peer.close()
        else:
            self.refused.append(peer)
        return kind, status

    def all_closed_by_broker(self) -> bool:
        """True when the broker closed every refused connection (each waited for 20 s)."""
        try:
            return all([p.closed_by_peer() for p in self.refused])
        finally:
            for p in self.refused:
                p.close()
            self.refused.clear()


def auth_status(host: str, port: int, user: str, password: str) -> tuple[str, int, bool]:
    """(auth type offered, AUTHENTICATE_REPLY status, connection closed by the broker)."""
    kind, status, peer = auth_attempt(host, port, user, password)
    try:
        return kind, status, status != 200 and peer.closed_by_peer()
    finally:
        peer.close()


def usermgr(b, *args: str) -> subprocess.CompletedProcess:
    """Run ``manage.py imqusermgr`` against a broker's database."""
    return run_manage(["imqusermgr", *args], env=b.extra["env"], timeout=60)


def passwd_file(tmp_path: Path) -> Path:
    etc = tmp_path / "var" / "instances" / "testbroker" / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    return etc / "passwd"


def line(user: str, password: str, group: str, active: str = "1") -> str:
    return f"{user}:{md5str(f'{user}:{password}')}:{group}:{active}\n"


# A failed login is answered 413 INVALID_LOGIN, as OpenMQ's broker does; 403 FORBIDDEN is
# a user the service's access control refuses.
INVALID_LOGIN = 413

# -- database ---------------------------------------------------------------------------


@pytest.mark.parametrize("auth", ["basic", "digest"])
def test_database_repository(own_broker, auth: str) -> None:
    b = own_broker(f"imq.authentication.type={auth}")
    logins = Logins()
    assert "service jms: " + auth + " against database" in b.log_text()
    login(b.host, b.jms_port, "admin", "admin").close()
    assert logins.status(b.host, b.jms_port, "admin", "wrong") == (auth, INVALID_LOGIN)
    assert logins.status(b.host, b.jms_port, "nobody", "x") == (auth, INVALID_LOGIN)

    done = usermgr(b, "add", "-u", "dora", "-p", "dorapw", "-a", "false")
    assert done.returncode == 0, done.stderr
    assert logins.status(b.host, b.jms_port, "dora", "dorapw") == (auth, INVALID_LOGIN)
    assert "authentication failed for user dora from 127.0.0.1" in b.log_text()
    assert "user is inactive" in b.log_text()
    assert usermgr(b, "update", "-u", "dora", "-a", "true", "-f").returncode == 0
    login(b.host, b.jms_port, "dora", "dorapw").close()
    # ADMIN service: group admin only (unless access control says otherwise).
    assert logins.status(b.host, b.admin_port, "dora", "dorapw")[1] == 403
    assert usermgr(b, "update", "-u", "dora", "-g", "admin", "-f").returncode == 0
    login(b.host, b.admin_port, "dora", "dorapw").close()
    assert logins.all_closed_by_broker()  # every refused connection


def test_database_is_the_default_repository(broker) -> None:
    assert auth_status(broker.host, broker.jms_port, "guest", "guest") == ("digest", 200, False)


# -- passwd file ------------------------------------------------------------------------


@pytest.mark.parametrize("auth", ["basic", "digest"])
def test_file_repository(own_broker, tmp_path: Path, auth: str) -> None:
    pw = passwd_file(tmp_path)
    pw.write_text(
        "admin:-2d5455c8583c24eec82c7a1e273ea02e:admin:1\n"
        + line("eve", "evepw", "user")
        + line("mallory", "mpw", "user", "0")  # inactive: not loaded
        # Empty fields collapse (StringTokenizer): group "1", no active flag => disabled.
        + f"trent:{md5str('trent:tpw')}::1\n"
    )
    b = own_broker(
        f"imq.authentication.type={auth}", f"imq.authentication.{auth}.user_repository=file"
    )
    logins = Logins()
    assert f"service jms: {auth} against file {pw}" in b.log_text()
    login(b.host, b.jms_port, "eve", "evepw").close()
    login(b.host, b.admin_port, "admin", "admin").close()
    assert logins.status(b.host, b.jms_port, "eve", "wrong")[1] == INVALID_LOGIN
    assert logins.status(b.host, b.jms_port, "mallory", "mpw")[1] == INVALID_LOGIN
    assert logins.status(b.host, b.jms_port, "trent", "tpw")[1] == INVALID_LOGIN
    # guest is in the database, not in this file.
    assert logins.status(b.host, b.jms_port, "guest", "guest")[1] == INVALID_LOGIN

    # The file is re-read when it changes: no restart needed.
    with pw.open("a") as f:
        f.write(line("zed", "zedpw", "user"))
    login(b.host, b.jms_port, "zed", "zedpw").close()
    assert logins.all_closed_by_broker()  # every refused connection


def test_file_repository_parsing() -> None:
    from broker.security.filerepo import PasswdEntry, format_passwd, parse_passwd

    text = "# comment\n\nadmin:-2d5455c8583c24eec82c7a1e273ea02e:admin:1\nbob:h::1\nx:h:user:0\n"
    entries = parse_passwd(text)
    assert entries == [
        PasswdEntry("admin", "-2d5455c8583c24eec82c7a1e273ea02e", "admin", True),
        PasswdEntry("bob", "h", "1", False),
        PasswdEntry("x", "h", "user", False),
    ]
    assert format_passwd(entries[:1]) == "admin:-2d5455c8583c24eec82c7a1e273ea02e:admin:1\n"


# -- LDAP -------------------------------------------------------------------------------


def test_ldap_repository_groups(ldap_server) -> None:  # noqa: F811
    from broker.config import BrokerConfig
    from broker.security.ldaprepo import LdapUserRepository

    props = dict(p.split("=", 1) for p in ldap_server.broker_props())
    repo = LdapUserRepository.from_config(BrokerConfig(props))
    assert repo.verify_basic("alice", "alicepw").groups == {"admin", "user"}
    assert repo.verify_basic("bob", "bobpw").groups == {"user"}
    assert repo.verify_basic("carol", "carolpw").groups == frozenset()
    assert repo.verify_basic("alice", "wrong") is None
    assert repo.verify_basic("alice", "") is None  # no unauthenticated bind
    assert repo.verify_basic("nobody", "x") is None
    assert repo.verify_basic("*", "alicepw") is None  # the name is escaped in the filter


def test_ldap_repository_over_the_wire(own_broker, ldap_server) -> None:  # noqa: F811
    b = own_broker(*ldap_server.broker_props())
    logins = Logins()
    assert "service jms: basic against ldap 127.0.0.1:" in b.log_text()
    login(b.host, b.jms_port, "bob", "bobpw").close()
    login(b.host, b.jms_port, "carol", "carolpw").close()
    assert logins.status(b.host, b.jms_port, "bob", "wrong") == ("basic", INVALID_LOGIN)
    assert logins.status(b.host, b.jms_port, "nobody", "x") == ("basic", INVALID_LOGIN)
    # LDAP group admin => the ADMIN service; bob (group user only) is refused there.
    login(b.host, b.admin_port, "alice", "alicepw").close()
    assert logins.status(b.host, b.admin_port, "bob", "bobpw")[1] == 403
    assert logins.all_closed_by_broker()  # every refused connection


@pytest.mark.parametrize(
    "props",
    [
        ("imq.authentication.type=digest",),
        ("imq.authentication.type=basic", "imq.admin.authentication.type=digest"),
    ],
)
def test_ldap_with_digest_refuses_to_start(tmp_path: Path, props) -> None:
    with pytest.raises(RuntimeError) as err:
        start_broker(
            tmp_path,
            "imq.authentication.digest.user_repository=ldap",
            "imq.authentication.basic.user_repository=ldap",
            "imq.user_repository.ldap.server=127.0.0.1:1",
            "imq.user_repository.ldap.base=dc=example,dc=com",
            "imq.user_repository.ldap.grpsearch=false",
            *props,
        )
    assert "LDAP needs basic authentication" in str(err.value)


def test_unknown_repository_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as err:
        start_broker(tmp_path, "imq.authentication.digest.user_repository=jaas")
    assert "unknown user repository 'jaas'" in str(err.value)


# -- failed logins ----------------------------------------------------------------------


def test_repeated_failures_are_slowed_down(own_broker) -> None:
    b = own_broker()
    logins = Logins()
    for _ in range(3):
        assert logins.status(b.host, b.jms_port, "guest", "wrong")[1] == INVALID_LOGIN
    assert "slowing down failed logins" not in b.log_text()
    assert logins.status(b.host, b.jms_port, "guest", "wrong")[1] == INVALID_LOGIN
    assert logins.all_closed_by_broker()  # the four refused connections
    log = b.log_text()
    assert "slowing down failed logins from 127.0.0.1: 4 failures" in log
    assert "answering user guest after 1 s" in log


def test_throttle_delays() -> None:
    from broker.security.repository import LoginThrottle

    t = LoginThrottle(free=3, window=60, cap=10)
    delays = [t.failed("h", float(i))[1] for i in range(8)]
    assert delays == [0, 0, 0, 1, 2, 4, 8, 10]
    assert t.failed("other", 8.0) == (1, 0)
    assert t.failed("h", 200.0) == (1, 0)  # the window has passed


# -- imqusermgr -------------------------------------------------------------------------


@pytest.mark.django_db
def test_imqusermgr_round_trip(tmp_path: Path, capsys) -> None:
    from broker.security.users import ensure_default_users, list_users

    ensure_default_users()
    call_command("imqusermgr", "add", "-u", "alice", "-p", "apw", "-g", "admin")
    call_command("imqusermgr", "add", "-u", "bob", "-p", "bpw")
    with pytest.raises(CommandError, match="already exists"):
        call_command("imqusermgr", "add", "-u", "bob", "-p", "x")
    with pytest.raises(CommandError, match="only one anonymous"):
        call_command("imqusermgr", "add", "-u", "anon2", "-p", "x", "-g", "anonymous")
    with pytest.raises(CommandError, match="group must be one of"):
        call_command("imqusermgr", "add", "-u", "x", "-p", "x", "-g", "traders")
    call_command("imqusermgr", "update", "-u", "bob", "-a", "false", "-p", "bpw2", "-f")
    capsys.readouterr()
    call_command("imqusermgr", "list")
    out = capsys.readouterr().out
    assert "User Name" in out and "Active State" in out
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()[4:]}
    assert rows == {
        "admin": ["admin", "true"],
        "alice": ["admin", "true"],
        "bob": ["user", "false"],
        "guest": ["anonymous", "true"],
    }
    call_command("imqusermgr", "list", "-u", "bob")
    assert "bob" in capsys.readouterr().out
    with pytest.raises(CommandError, match="does not exist"):
        call_command("imqusermgr", "list", "-u", "nobody")

    exported = tmp_path / "passwd"
    call_command("imqusermgr", "export", str(exported))
    text = exported.read_text()
    assert text.splitlines() == [
        "admin:-2d5455c8583c24eec82c7a1e273ea02e:admin:1",
        f"alice:{md5str('alice:apw')}:admin:1",
        f"bob:{md5str('bob:bpw2')}:user:0",
        "guest:-2c3c4a34aa2c392f39edd112333c230d:anonymous:1",
    ]

    call_command("imqusermgr", "delete", "-u", "alice", "-f")
    call_command("imqusermgr", "delete", "-u", "bob", "-f")
    assert [r.username for r in list_users()] == ["admin", "guest"]
    with pytest.raises(CommandError, match="does not exist"):
        call_command("imqusermgr", "delete", "-u", "bob", "-f")

    # Import brings them back exactly as they were; export again gives the same file.
    call_command("imqusermgr", "import", str(exported))
    again = tmp_path / "passwd2"
    call_command("imqusermgr", "export", str(again))
    assert again.read_text() == text
    bob = list_users("bob")[0]
    assert not bob.active and bob.password_digest == md5str("bob:bpw2")
