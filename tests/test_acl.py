"""Access control (docs/developers/protocol.md): the rule engine, the file format, and the checks
a running broker makes over TCP."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from broker.launcher import fresh_sqlite
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import build_packet
from broker.protocol.types import FLAG_A, FLAG_Q, PacketType
from broker.security.acl import (
    DEFAULT_RULES,
    VERSION,
    AccessControl,
    format_file,
    parse_file,
    parse_key,
)
from tests.manage_fork import run_manage

from .wire import Peer, control, login

ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------
# The rule engine
# --------------------------------------------------------------------------------------

V = {"version": VERSION}

# (rules, check, expected): check is ("conn", type, user, groups), (kind, name, op, user,
# groups) or ("create", kind, user, groups).
CASES = [
    # the shipped default file
    (DEFAULT_RULES, ("conn", "NORMAL", "guest", {"anonymous"}), True),
    (DEFAULT_RULES, ("conn", "ADMIN", "guest", {"anonymous"}), False),
    (DEFAULT_RULES, ("conn", "ADMIN", "admin", {"admin"}), True),
    (DEFAULT_RULES, ("queue", "q", "produce", "u", set()), True),
    (DEFAULT_RULES, ("topic", "t", "browse", "u", set()), False),  # topics have no browse
    (DEFAULT_RULES, ("create", "queue", "u", set()), True),
    # no applicable rule => denied
    (V, ("queue", "q", "produce", "u", {"g"}), False),
    (V, ("conn", "NORMAL", "u", {"g"}), False),
    (V, ("create", "topic", "u", {"g"}), False),
    # missing or wrong version => everything denied
    (
        {k: v for k, v in DEFAULT_RULES.items() if k != "version"},
        ("conn", "NORMAL", "u", set()),
        False,
    ),
    (
        {**DEFAULT_RULES, "version": "JMQFileAccessControlModel/99"},
        ("queue", "q", "consume", "u", set()),
        False,
    ),
    # user-specific beats group-specific (both directions)
    (
        {**V, "queue.q.produce.allow.user": "bob", "queue.q.produce.deny.group": "g"},
        ("queue", "q", "produce", "bob", {"g"}),
        True,
    ),
    (
        {**V, "queue.q.produce.deny.user": "bob", "queue.q.produce.allow.group": "g"},
        ("queue", "q", "produce", "bob", {"g"}),
        False,
    ),
    # specific group beats user *
    (
        {**V, "queue.q.consume.allow.user": "*", "queue.q.consume.deny.group": "g"},
        ("queue", "q", "consume", "bob", {"g"}),
        False,
    ),
    (
        {**V, "queue.q.consume.deny.user": "*", "queue.q.consume.allow.group": "g"},
        ("queue", "q", "consume", "bob", {"g"}),
        True,
    ),
    # user * beats group *
    (
        {**V, "queue.q.browse.allow.user": "*", "queue.q.browse.deny.group": "*"},
        ("queue", "q", "browse", "bob", {"g"}),
        True,
    ),
    (
        {**V, "queue.q.browse.deny.user": "*", "queue.q.browse.allow.group": "*"},
        ("queue", "q", "browse", "bob", {"g"}),
        False,
    ),
    # allow and deny of the same name cancel (falls to the next level)
    (
        {**V, "queue.q.produce.allow.user": "bob", "queue.q.produce.deny.user": "bob"},
        ("queue", "q", "produce", "bob", set()),
        False,
    ),
    (
        {**V, "queue.q.produce.allow.user": "bob,*", "queue.q.produce.deny.user": "bob"},
        ("queue", "q", "produce", "bob", set()),
        True,
    ),
    # two groups of one user deciding differently cancel
    (
        {**V, "queue.q.produce.allow.group": "a", "queue.q.produce.deny.group": "b"},
        ("queue", "q", "produce", "u", {"a", "b"}),
        False,
    ),
    (
        {
            **V,
            "queue.q.produce.allow.group": "a",
            "queue.q.produce.deny.group": "b",
            "queue.q.produce.allow.user": "*",
        },
        ("queue", "q", "produce", "u", {"a", "b"}),
        True,
    ),
    # a later (named) rule overrides the * rule, both ways; no decision keeps the earlier
    (
        {**V, "queue.*.produce.allow.user": "*", "queue.q.produce.deny.user": "*"},
        ("queue", "q", "produce", "u", set()),
        False,
    ),
    (
        {**V, "queue.*.produce.deny.user": "*", "queue.q.produce.allow.group": "g"},
        ("queue", "q", "produce", "u", {"g"}),
        True,
    ),
    (
        {**V, "queue.*.produce.allow.user": "*", "queue.q.produce.deny.user": "x"},
        ("queue", "q", "produce", "u", set()),
        True,
    ),
    (
        {**V, "queue.*.produce.allow.user": "*", "queue.q.produce.deny.user": "*"},
        ("queue", "other", "produce", "u", set()),
        True,
    ),
    # connection.* then connection.<type>
    (
        {**V, "connection.*.allow.user": "*", "connection.ADMIN.deny.user": "*"},
        ("conn", "ADMIN", "u", set()),
        False,
    ),
    (
        {**V, "connection.*.allow.user": "*", "connection.ADMIN.deny.user": "*"},
        ("conn", "NORMAL", "u", set()),
        True,
    ),
    # topic wildcards override the named rule; queues are matched literally
    (
        {**V, "topic.*.produce.allow.user": "*", "topic.a.*.produce.deny.user": "u"},
        ("topic", "a.b", "produce", "u", set()),
        False,
    ),
    (
        {**V, "topic.*.produce.allow.user": "*", "topic.a.*.produce.deny.user": "u"},
        ("topic", "a.b.c", "produce", "u", set()),
        True,
    ),
    (
        {**V, "topic.*.produce.allow.user": "*", "topic.a.>.produce.deny.user": "u"},
        ("topic", "a.b.c", "produce", "u", set()),
        False,
    ),
    (
        {**V, "topic.*.consume.allow.user": "*", "topic.a.**.consume.deny.user": "u"},
        ("topic", "a.b.c", "consume", "u", set()),
        False,
    ),
    (
        {**V, "topic.*.consume.allow.user": "*", "topic.a.*.b.consume.deny.user": "u"},
        ("topic", "a.x.b", "consume", "u", set()),
        False,
    ),
    (
        {**V, "topic.*.consume.allow.user": "*", "topic.a.*.b.consume.deny.user": "u"},
        ("topic", "a.x.c", "consume", "u", set()),
        True,
    ),
    (
        {**V, "topic.a.b.produce.allow.user": "u", "topic.a.*.produce.deny.user": "u"},
        ("topic", "a.b", "produce", "u", set()),
        False,
    ),
    (
        {**V, "queue.*.produce.allow.user": "*", "queue.a.*.produce.deny.user": "u"},
        ("queue", "a.b", "produce", "u", set()),
        True,
    ),
    # create uses only queue.create / topic.create
    (
        {**V, "queue.create.allow.group": "g", "queue.*.produce.allow.user": "*"},
        ("create", "queue", "u", set()),
        False,
    ),
    ({**V, "queue.create.allow.group": "g"}, ("create", "queue", "u", {"g"}), True),
    ({**V, "queue.create.allow.group": "g"}, ("create", "topic", "u", {"g"}), False),
    # names in lists are trimmed; a user literally named * is refused
    (
        {**V, "queue.q.produce.allow.user": " bob , carl "},
        ("queue", "q", "produce", "carl", set()),
        True,
    ),
    (DEFAULT_RULES, ("queue", "q", "produce", "*", set()), False),
    # dots in destination names; spaces in keys are significant
    ({**V, "queue.a.b.c.consume.allow.user": "u"}, ("queue", "a.b.c", "consume", "u", set()), True),
    ({**V, "queue.my q.consume.allow.user": "u"}, ("queue", "my q", "consume", "u", set()), True),
]


def _run(acl: AccessControl, check: tuple) -> bool:
    if check[0] == "conn":
        return acl.check_connection(check[1], check[2], check[3])
    if check[0] == "create":
        return acl.check_create(check[1], check[2], check[3])
    return acl.check(*check)


@pytest.mark.parametrize("rules,check,expected", CASES)
def test_rule_precedence(rules, check, expected):
    assert _run(AccessControl(rules), check) is expected


def test_parse_key():
    assert parse_key("connection.NORMAL.allow.user").target == "NORMAL"
    assert parse_key("queue.create.deny.group").op == "create"
    assert parse_key("queue.create.produce.allow.user").target == "create"
    k = parse_key("topic.a.>.consume.deny.group")
    assert (k.scope, k.target, k.op, k.verdict, k.who) == (
        "topic",
        "a.>",
        "consume",
        "deny",
        "group",
    )
    for bad in (
        "version",
        "queue.q.browse.allow",
        "topic.t.browse.allow.user",
        "x.q.produce.allow.user",
        "connection.OTHER.allow.user",
        "queue.q.produce.maybe.user",
    ):
        assert parse_key(bad) is None, bad


def test_file_round_trip():
    rules = {
        **DEFAULT_RULES,
        "queue.my q.produce.deny.user": "bob, carl",
        "topic.a.>.consume.allow.group": "g1,g2",
        "queue.x=y:z.browse.allow.user": "ü",
        "queue.#hash.produce.allow.user": "",
    }
    text = format_file(rules)
    assert text.index("\nversion=") < text.index("\nconnection.")
    assert parse_file(text) == rules
    assert parse_file(format_file(parse_file(text))) == rules


# --------------------------------------------------------------------------------------
# The database rules and the command
# --------------------------------------------------------------------------------------


def _manage(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run_manage(list(args), env=env, check=check)


def _env(tmp: Path, migrated: bool = False) -> dict:
    import os

    env = dict(os.environ)
    env["DATABASE_URL"] = f"sqlite:///{tmp / 'db.sqlite3'}"
    env["IMQ_VARHOME"] = str(tmp / "var")
    if migrated:
        fresh_sqlite(tmp / "db.sqlite3", env)
    return env


def _users(env: dict, *users: tuple[str, str, list[str]]) -> None:
    code = "from broker.security.users import create_user\n" + "".join(
        f"create_user({u!r}, {p!r}, {g!r})\n" for u, p, g in users
    )
    _manage(env, "shell", "-c", code)


def test_command_import_export_round_trip(tmp_path):
    env = _env(tmp_path, migrated=True)
    # First use seeds the shipped default rules.
    listed = _manage(env, "imqacl", "list").stdout.splitlines()
    assert sorted(listed) == sorted(f"{k}={v}" for k, v in DEFAULT_RULES.items())
    rules = {
        "version": VERSION,
        "connection.NORMAL.allow.user": "*",
        "queue.my q.produce.deny.user": "bob, carl",
        "topic.a.>.consume.allow.group": "g1,g2",
        "queue.create.deny.user": "*",
    }
    src = tmp_path / "in.properties"
    lines = (f"{k.replace(' ', chr(92) + ' ')}={v}" for k, v in reversed(rules.items()))
    src.write_text("# a comment\n" + "\n".join(lines))
    _manage(env, "imqacl", "import", str(src))
    out = _manage(env, "imqacl", "export").stdout
    assert parse_file(out) == rules
    # export to a file, merge-import it again: still the same rules
    dst = tmp_path / "out.properties"
    _manage(env, "imqacl", "export", str(dst))
    _manage(env, "imqacl", "set", "queue.q.browse.allow.user", "dora")
    _manage(env, "imqacl", "import", str(dst), "--merge")
    assert parse_file(_manage(env, "imqacl", "export").stdout) == {
        **rules,
        "queue.q.browse.allow.user": "dora",
    }
    _manage(env, "imqacl", "import", str(dst))
    assert parse_file(_manage(env, "imqacl", "export").stdout) == rules
    _manage(env, "imqacl", "delete", "queue.create.deny.user")
    assert "queue.create.deny.user" not in _manage(env, "imqacl", "export").stdout
    bad = _manage(env, "imqacl", "set", "queue.q.fly.allow.user", "x", check=False)
    assert bad.returncode != 0 and "not an access control rule" in bad.stderr


# --------------------------------------------------------------------------------------
# Over TCP against a broker
# --------------------------------------------------------------------------------------

Q, T = 1, 2


def _session(peer: Peer, cid: int = 3) -> int:
    return peer.request(
        control(PacketType.CREATE_SESSION, cid, JMQAckMode=JInt(1)), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]


def _op(peer: Peer, sid: int, op: str, name: str, dtype: int = Q, status: int = 200):
    ptype, reply = {
        "produce": (PacketType.ADD_PRODUCER, PacketType.ADD_PRODUCER_REPLY),
        "consume": (PacketType.ADD_CONSUMER, PacketType.ADD_CONSUMER_REPLY),
        "browse": (PacketType.BROWSE, PacketType.BROWSE_REPLY),
        "create": (PacketType.CREATE_DESTINATION, PacketType.CREATE_DESTINATION_REPLY),
    }[op]
    props: dict = {"JMQDestination": name, "JMQDestType": JInt(dtype)}
    if op in ("produce", "consume"):
        props["JMQSessionID"] = JLong(sid)
    pkt = peer.request(control(ptype, 7, **props), reply, status)
    if status == 403:
        assert "access denied" in pkt.properties["JMQReason"]
    return pkt


def _send(peer: Peer, name: str, dtype: int = Q, ack: bool = True) -> int | None:
    flags = (FLAG_Q if dtype == Q else 0) | (FLAG_A if ack else 0)
    peer.send(
        build_packet(
            PacketType.TEXT_MESSAGE, flags=flags, consumer_id=9, fields={1: name}, body=b"hi"
        )
    )
    if not ack:
        return None
    return peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"]


def _refused(host: str, port: int, user: str, password: str) -> bool:
    """True if the broker answers the login with AUTHENTICATE_REPLY 403."""
    try:
        peer = login(host, port, user, password)
    except AssertionError as exc:
        return "403" in str(exc)
    peer.close()
    return False


def _eventually(fn, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


RULES = f"""\
version={VERSION}
connection.NORMAL.allow.user=*
connection.NORMAL.deny.user=carl
connection.ADMIN.allow.group=admin
queue.*.produce.allow.user=*
queue.secret.produce.deny.user=*
queue.secret.produce.allow.group=billing
queue.closed.produce.deny.user=*
queue.*.consume.allow.group=*
queue.locked.consume.allow.user=alice
queue.locked.consume.deny.group=user
queue.*.browse.allow.user=alice
queue.create.allow.user=alice
topic.*.produce.allow.user=*
topic.news.>.produce.deny.user=bob
topic.*.consume.allow.user=*
topic.news.*.consume.deny.group=billing
topic.create.allow.user=*
"""


def test_access_rules_over_tcp(own_broker, tmp_path):
    env = _env(tmp_path, migrated=True)
    _users(
        env,
        ("alice", "alicepw", ["user"]),
        ("bob", "bobpw", ["user", "billing"]),
        ("carl", "carlpw", ["user"]),
    )
    (tmp_path / "rules.properties").write_text(RULES)
    _manage(env, "imqacl", "import", str(tmp_path / "rules.properties"))
    b = own_broker()
    h = b.host

    # Connections: a user denied by name; the admin service only for group admin.
    assert _refused(h, b.jms_port, "carl", "carlpw")
    assert _refused(h, b.admin_port, "alice", "alicepw")
    login(h, b.admin_port, "admin", "admin").close()
    assert "refused on service admin" in b.log_text()

    alice = login(h, b.jms_port, "alice", "alicepw")
    bob = login(h, b.jms_port, "bob", "bobpw")
    sa, sb = _session(alice), _session(bob)

    # create (auto-creation): by user rule
    for q in ("secret", "locked", "open", "closed"):
        _op(alice, sa, "create", q)
    _op(bob, sb, "create", "bobs", status=403)
    _op(bob, sb, "produce", "brand.new", status=403)  # would auto-create: refused
    _op(alice, sa, "produce", "brand.new")
    _op(bob, sb, "create", "t.x", dtype=T)  # topic.create: everybody
    # produce: group billing beats user *, named deny beats * allow
    _op(bob, sb, "produce", "secret")
    _op(alice, sa, "produce", "secret", status=403)
    _op(alice, sa, "produce", "closed", status=403)
    _op(bob, sb, "produce", "open")
    # consume: user alice beats group user; group * for the rest
    _op(alice, sa, "consume", "locked")
    _op(bob, sb, "consume", "locked", status=403)
    _op(bob, sb, "consume", "open")
    # browse: only alice
    _op(alice, sa, "browse", "open")
    _op(bob, sb, "browse", "open", status=403)
    # topics and wildcards
    _op(alice, sa, "produce", "news.sport", dtype=T)
    _op(bob, sb, "produce", "news.sport", dtype=T, status=403)
    _op(bob, sb, "produce", "weather", dtype=T)
    _op(bob, sb, "consume", "news.sport", dtype=T, status=403)
    _op(alice, sa, "consume", "news.sport", dtype=T)
    # sends without a registered producer are checked like ADD_PRODUCER
    assert _send(alice, "closed") == 403
    assert _send(alice, "open") == 200
    assert _send(bob, "secret") == 200
    assert _send(bob, "news.sport", dtype=T) == 403
    for _ in range(3):
        _send(alice, "closed", ack=False)
    assert _send(alice, "open") == 200  # still connected
    assert b.log_text().count("messages dropped: access denied: alice may not produce") == 1

    # A rule change reaches the running broker without a restart.
    _manage(env, "imqacl", "set", "queue.closed.produce.allow.user", "alice")
    _manage(env, "imqacl", "set", "queue.*.browse.allow.user", "alice,bob")

    def changed():
        _op(alice, sa, "produce", "closed")
        _op(bob, sb, "browse", "open")

    _eventually(changed)
    assert _send(alice, "closed") == 200  # the send cache follows the new rules
    _manage(env, "imqacl", "set", "connection.NORMAL.deny.user", "carl,bob")

    def bob_refused():
        assert _refused(h, b.jms_port, "bob", "bobpw")

    _eventually(bob_refused)
    alice.close()
    bob.close()


def test_rules_from_file(own_broker, tmp_path):
    etc = tmp_path / "acl"
    etc.mkdir()
    path = etc / "my.acl"
    path.write_text(
        "\n".join(f"{k}={v}" for k, v in DEFAULT_RULES.items())
        + "\nqueue.q1.produce.deny.user=guest\n"
    )
    b = own_broker(
        f"imq.accesscontrol.file.dirpath={etc}", "imq.accesscontrol.file.filename=my.acl"
    )
    guest = login(b.host, b.jms_port)
    sid = _session(guest)
    _op(guest, sid, "produce", "q1", status=403)
    _op(guest, sid, "produce", "q2")
    # The file is re-read when it changes.
    time.sleep(0.05)
    path.write_text(
        "\n".join(f"{k}={v}" for k, v in DEFAULT_RULES.items())
        + "\nqueue.q2.produce.deny.user=guest\n"
    )
    _eventually(lambda: _op(guest, sid, "produce", "q2", status=403))
    _op(guest, sid, "produce", "q1")
    # A file without the version line: every check fails, connections too.
    path.write_text("connection.NORMAL.allow.user=*\n")

    def guest_refused():
        assert _refused(b.host, b.jms_port, "guest", "guest")

    _eventually(guest_refused)
    assert "version line is missing" in b.log_text()
    guest.close()


def test_access_control_disabled(own_broker, tmp_path):
    env = _env(tmp_path, migrated=True)
    deny_all = tmp_path / "deny.properties"
    deny_all.write_text(
        f"version={VERSION}\nconnection.*.deny.user=*\nqueue.*.produce.deny.user=*\n"
    )
    _manage(env, "imqacl", "import", str(deny_all))
    b = own_broker("imq.accesscontrol.enabled=false")
    guest = login(b.host, b.jms_port)
    sid = _session(guest)
    _op(guest, sid, "produce", "anything")
    _op(guest, sid, "browse", "anything")
    assert _send(guest, "other") == 200
    # ADMIN still needs group admin.
    assert _refused(b.host, b.admin_port, "guest", "guest")
    login(b.host, b.admin_port, "admin", "admin").close()
    guest.close()


def test_per_service_enabled_and_admin_queue(own_broker, tmp_path):
    """imq.<svc>.accesscontrol.enabled overrides the broker-wide setting; __JMQAdmin is
    for ADMIN services only; temporary destinations are never checked."""
    env = _env(tmp_path, migrated=True)
    rules = tmp_path / "r.properties"
    rules.write_text(
        f"version={VERSION}\nconnection.*.allow.user=*\nqueue.*.produce.allow.user=*\n"
    )
    _manage(env, "imqacl", "import", str(rules))
    b = own_broker("imq.admin.accesscontrol.enabled=false")
    guest = login(b.host, b.jms_port)
    sid = _session(guest)
    _op(guest, sid, "produce", "__JMQAdmin", status=403)
    _op(guest, sid, "consume", "q", status=403)  # no consume rule at all
    tmp = "temporary_destination://queue/127.0.0.1/1/1"
    _op(guest, sid, "create", tmp, dtype=0x11)
    _op(guest, sid, "consume", tmp, dtype=0x11)
    # the admin service: access control off there, but ADMIN still needs group admin
    assert _refused(b.host, b.admin_port, "guest", "guest")
    admin = login(b.host, b.admin_port, "admin", "admin")
    _op(admin, _session(admin), "produce", "__JMQAdmin")
    admin.close()
    guest.close()


def test_default_rules_admin_service(broker):
    """With the shipped rules guest may not use the admin service (imqcmd)."""
    assert _refused(broker.host, broker.admin_port, "guest", "guest")
    login(broker.host, broker.jms_port, "guest", "guest").close()
