"""Definitions export/import (``manage.py definitions``) between two real brokers, each on a
database of its own on a real PostgreSQL: export -> fresh database -> import -> the same
state; a refused document lists every error and changes nothing; a dry run reports and
changes nothing; an import undone when the broker refuses a step."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from broker.admintools.broker_handle import BrokerAdmin
from broker.launcher import BrokerProcess, start_broker

from .manage_fork import run_manage
from .pg import fresh_database


def manage(b: BrokerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``manage.py ARGS`` on broker ``b``'s database, administering ``b``."""
    env = {
        **b.extra["env"],
        "IMQ_BROKER_HOST": b.host,
        "IMQ_PORT": str(b.portmapper_port),
        "IMQ_INSTANCE": b.instance,
    }
    done = run_manage(list(args), env=env, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def export(b: BrokerProcess) -> dict:
    doc = json.loads(manage(b, "definitions", "export").stdout)
    for key in ("exported", "broker"):  # when and from where, not the state
        doc.pop(key)
    return doc


@pytest.fixture(scope="module")
def pair(postgres_url, tmp_path_factory):
    """Two brokers, each on a fresh PostgreSQL database of its own."""
    started = []
    for name in ("a", "b"):
        url = fresh_database(postgres_url, f"defs_{name}_{uuid.uuid4().hex[:8]}")
        started.append(start_broker(tmp_path_factory.mktemp(name), database_url=url))
    yield started
    for b in started:
        b.stop()


def configure(a: BrokerProcess) -> None:
    admin = BrokerAdmin(a.host, a.portmapper_port)
    try:
        admin.create_destination("orders", 1, {"maxNumMsgs": 500, "limitBehavior": "REJECT_NEWEST"})
        admin.create_destination("prices", 2, {"maxBytesPerMsg": 4096})
        admin.update_destination("mq.sys.dmq", 1, {"maxNumMsgs": 777})
        admin.update_broker_props(
            {"imq.autocreate.queue": "false", "imq.message.max_size": "2097152"}
        )
    finally:
        admin.close()
    manage(a, "imqusermgr", "add", "-u", "alice", "-p", "alice-pw", "-g", "admin")
    manage(a, "imqusermgr", "add", "-u", "bob", "-p", "bob-pw", "-g", "user")
    manage(a, "imqusermgr", "update", "-u", "bob", "-a", "false", "-f")
    manage(
        a,
        "imqobjmgr",
        "add",
        "-t",
        "q",
        "-l",
        "jms/orders",
        "-o",
        "imqDestinationName=orders",
        "-f",
    )
    manage(
        a, "imqobjmgr", "add", "-t", "cf", "-l", "jms/cf", "-o", "imqAddressList=mq://h:7676", "-f"
    )
    manage(a, "imqacl", "set", "queue.orders.produce.allow.user", "bob,alice")
    manage(a, "imqacl", "set", "topic.*.consume.deny.user", "mallory", "-name", "other")


def test_export_fresh_database_import_same_state(pair, tmp_path):
    a, b = pair
    configure(a)
    doc = export(a)
    assert {d["name"] for d in doc["destinations"]} >= {"orders", "prices", "mq.sys.dmq"}
    alice = next(u for u in doc["users"] if u["username"] == "alice")
    assert "password" not in alice and alice["groups"] == ["admin"]
    assert "alice-pw" not in json.dumps(doc)
    assert doc["broker_properties"]["imq.autocreate.queue"] == "false"
    assert {o["lookup_name"] for o in doc["administered_objects"]} == {"jms/orders", "jms/cf"}
    assert doc != export(b)

    path = tmp_path / "defs.json"
    path.write_text(json.dumps(doc))
    dry = manage(b, "definitions", "import", str(path), "--dry-run").stdout
    assert "create  destinations: queue orders" in dry
    assert "update  destinations: queue mq.sys.dmq (maxNumMsgs:" in dry
    assert "create  users: alice" in dry and "dry run: nothing changed" in dry
    assert export(b) != doc  # the dry run changed nothing

    out = manage(b, "definitions", "import", str(path)).stdout
    assert "applied" in out
    assert export(b) == doc
    # Importing again changes nothing; the imported users log in with their passwords.
    again = manage(b, "definitions", "import", str(path)).stdout
    assert again.startswith("0 created, 0 updated, "), again
    check = BrokerAdmin(b.host, b.portmapper_port, "alice", "alice-pw")
    try:
        assert check.hello()
    finally:
        check.close()
    audit = manage(
        b,
        "shell",
        "-c",
        "from broker.models import LogRecord;"
        "print(LogRecord.objects.filter(logger='broker.audit', message__contains='imported definitions').count())",
    ).stdout
    assert int(audit.split()[-1]) == 2


def test_refused_document_lists_every_error_and_changes_nothing(pair, tmp_path):
    _, b = pair
    before = export(b)
    bad = {
        "format": "openmq-py definitions",
        "version": 1,
        "destinations": [
            {"name": "new-one", "type": "queue", "attributes": {"maxNumMsgs": 5}},
            {"name": "bad", "type": "queue", "attributes": {"maxNumMsgs": "lots"}},
            {"name": "x", "type": "bucket"},
        ],
        "users": [
            {"username": "carol", "password": "plain"},
            {"username": "dave", "password_digest": "not-hex!", "groups": ["user"]},
        ],
        "access_rules": [{"key": "queue.orders.eat.allow.user", "value": "x"}],
        "broker_properties": {"imq.instancename": "x", "imq.message.max_size": "huge"},
        "surprise": [],
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    done = manage(b, "definitions", "import", str(path), check=False)
    assert done.returncode != 0
    err = done.stderr
    for reason in (
        "nothing changed",
        "unknown sections: surprise",
        "maxNumMsgs",
        "destination type must be q",
        "plain passwords are not accepted",
        "password_digest must be",
        "not an access control rule key",
        "imq.instancename cannot be set at run time",
        "imq.message.max_size",
    ):
        assert reason in err, reason
    assert export(b) == before


def test_broker_refusal_undoes_the_import(pair, tmp_path):
    """A step the broker refuses (creating a queue named like its admin queue) undoes
    the steps before it (a group, a broker property, a queue): the database and the
    broker stay as they were."""
    _, b = pair
    before = export(b)
    doc = {
        "groups": [{"name": "auditors", "description": "read only"}],
        "broker_properties": {"imq.autocreate.topic": "false"},
        "destinations": [
            {"name": "fine", "type": "queue", "attributes": {}},
            {"name": "__JMQAdmin", "type": "queue", "attributes": {}},
        ],
    }
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(doc))
    done = manage(b, "definitions", "import", str(path), check=False)
    assert done.returncode != 0 and "refused" in done.stderr, done.stderr
    assert export(b) == before


def test_unreadable_file(pair, tmp_path):
    _, b = pair
    path = tmp_path / "junk.json"
    path.write_text("{not json")
    done = manage(b, "definitions", "import", str(path), check=False)
    assert done.returncode != 0 and "is not JSON" in done.stderr
    assert os.path.exists(path)
