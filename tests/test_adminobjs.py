"""Administered objects (imqobjmgr): the attributes and their checks, the actions, the
command, and publishing to real object stores -- the test's slapd (read back by the JDK's
own LDAP provider in a Java program compiled here) and a file-system ``.bindings`` file.

Here the JDK runs without OpenMQ's factory on the class path, so a lookup returns the
stored Reference itself, checked against what OpenMQ's AdministeredObjectFactory reads:
class name, factory, address 0 ``version`` = ``3.0``, address 1 ``readOnly``, then the
attributes.  The stock-client half (imq.jar looking the objects up in LDAP and in a
``.bindings`` file, then connecting and sending through the broker) is
tests/interop/test_java_jndi.py.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from ldap3 import BASE, Connection, Server

from broker.admintools.actions import ActionError
from broker.models import LogRecord
from portal.objects import actions
from portal.objects.attributes import (
    CF_ATTRS,
    FACTORY,
    TYPES,
    InvalidAttribute,
    reference,
    validate_attributes,
)
from portal.objects.models import AdministeredObject, ObjectStore
from portal.objects.stores import LDAP_FACTORY, read_bindings
from tests.ldap import ldap_server  # noqa: F401

pytestmark = pytest.mark.django_db

PROBE = Path(__file__).parent / "jndi" / "JndiProbe.java"


def ldap_props(srv) -> dict[str, str]:
    return {
        "java.naming.factory.initial": LDAP_FACTORY,
        "java.naming.provider.url": f"ldap://{srv.host}:{srv.port}/ou=jndi,{srv.suffix}",
        "java.naming.security.authentication": "simple",
        "java.naming.security.principal": srv.rootdn,
        "java.naming.security.credentials": srv.rootpw,
    }


def fs_props(directory: Path) -> dict[str, str]:
    return {
        "java.naming.factory.initial": "com.sun.jndi.fscontext.RefFSContextFactory",
        "java.naming.provider.url": directory.as_uri(),
    }


def jflags(props: dict[str, str]) -> list[str]:
    return [f"-j{k}={v}" for k, v in props.items()]


def ldap_entry(srv, cn: str) -> dict | None:
    conn = Connection(Server(srv.host, port=srv.port), srv.rootdn, srv.rootpw, auto_bind=True)
    try:
        found = conn.search(
            f"cn={cn},ou=jndi,{srv.suffix}", "(objectClass=*)", BASE, attributes=["*"]
        )
        return dict(conn.entries[0].entry_attributes_as_dict) if found else None
    finally:
        conn.unbind()


# --------------------------------------------------------------------------------------
# Attributes
# --------------------------------------------------------------------------------------


def test_attributes_checked_and_deprecated_names_mapped():
    cf = TYPES["cf"]
    clean = validate_attributes(
        cf,
        {
            "imqAddressList": "mq://h1:7676/jms, mq://h2:7677/jms",
            "imqReconnect": "TRUE",  # OpenMQ's deprecated name of imqReconnectEnabled
            "imqJMSPriority": 9,
        },
    )
    assert clean == {
        "imqAddressList": "mq://h1:7676/jms,mq://h2:7677/jms",
        "imqReconnectEnabled": "true",
        "imqJMSPriority": "9",
    }
    with pytest.raises(InvalidAttribute) as exc:
        validate_attributes(
            cf, {"imqNoSuch": "1", "imqJMSPriority": "10", "imqReconnectEnabled": "maybe"}
        )
    text = str(exc.value)
    assert "imqNoSuch is not an attribute of a ConnectionFactory" in text
    assert "imqJMSPriority must be between 0 and 9" in text
    assert "imqReconnectEnabled takes true or false" in text
    with pytest.raises(InvalidAttribute, match="invalid destination name"):
        validate_attributes(TYPES["q"], {"imqDestinationName": "1bad name"})
    with pytest.raises(InvalidAttribute, match="not an attribute of a Queue"):
        validate_attributes(TYPES["q"], {"imqAddressList": "mq://h:1/jms"})


def test_reference_layout_is_openmqs():
    class_name, factory, addrs = reference(TYPES["xcf"], {"imqDefaultUsername": "alice"}, True)
    assert class_name == "com.sun.messaging.XAConnectionFactory"
    assert factory == "com.sun.messaging.naming.AdministeredObjectFactory"
    assert addrs[:2] == [("version", "3.0"), ("readOnly", "true")]
    values = dict(addrs[2:])
    assert len(values) == len(addrs) - 2 == len(CF_ATTRS)
    assert values["imqDefaultUsername"] == "alice"
    assert values["imqDefaultPassword"] == "guest"
    assert values["imqAddressListBehavior"] == "PRIORITY"
    _, _, qaddrs = reference(TYPES["q"], {}, False)
    assert qaddrs == [
        ("version", "3.0"),
        ("readOnly", "false"),
        ("imqDestinationName", "Untitled_Destination_Object"),
        ("imqDestinationDescription", "A Description for the Destination Object"),
    ]


# --------------------------------------------------------------------------------------
# Actions and the file-system store
# --------------------------------------------------------------------------------------


def test_actions_publish_to_bindings_file(tmp_path):
    store = fs_props(tmp_path)
    q = actions.add_object("tester", "MyQueue", "q", {"imqDestinationName": "orders"}, store=store)
    assert q["class_name"] == "com.sun.messaging.Queue" and q["store"] == "file:" + str(
        tmp_path
    ).strip("/").replace("/", ":")
    actions.add_object(
        "tester",
        "MyCF",
        "cf",
        {"imqAddressList": "mq://127.0.0.1:7676/jms", "imqDefaultUsername": "bob"},
        read_only=True,
        store=store,
    )
    text = (tmp_path / ".bindings").read_text(encoding="latin-1")
    assert text.startswith("#This file is used by the JNDI FSContext.\n")
    b = read_bindings(tmp_path.as_uri())
    assert b["MyQueue/ClassName"] == "com.sun.messaging.Queue"
    assert b["MyQueue/FactoryName"] == FACTORY
    assert b["MyQueue/RefAddr/0/Type"] == "version" and b["MyQueue/RefAddr/0/Content"] == "3.0"
    assert b["MyQueue/RefAddr/1/Type"] == "readOnly"
    assert b["MyQueue/RefAddr/1/Content"] == "false"
    queue_addrs = {
        b[f"MyQueue/RefAddr/{i}/Type"]: b[f"MyQueue/RefAddr/{i}/Content"] for i in (2, 3)
    }
    assert queue_addrs["imqDestinationName"] == "orders"
    assert all(b[f"MyQueue/RefAddr/{i}/Encoding"] == "String" for i in range(4))
    assert b["MyCF/ClassName"] == "com.sun.messaging.ConnectionFactory"
    assert b["MyCF/RefAddr/1/Content"] == "true"
    cf_addrs = {
        b[f"MyCF/RefAddr/{i}/Type"]: b[f"MyCF/RefAddr/{i}/Content"]
        for i in range(2, 2 + len(CF_ATTRS))
    }
    assert cf_addrs["imqAddressList"] == "mq://127.0.0.1:7676/jms"
    assert cf_addrs["imqDefaultUsername"] == "bob"

    # update merges; delete removes only that object's keys
    actions.update_object(
        "tester", "MyQueue", attributes={"imqDestinationDescription": "d"}, store=store
    )
    b = read_bindings(tmp_path.as_uri())
    assert {b[f"MyQueue/RefAddr/{i}/Content"] for i in (2, 3)} == {"orders", "d"}
    actions.delete_object("tester", "MyQueue", store=store)
    b = read_bindings(tmp_path.as_uri())
    assert not any(k.startswith("MyQueue/") for k in b) and "MyCF/ClassName" in b
    assert [o["lookup_name"] for o in actions.list_objects(store=store)] == ["MyCF"]

    audit = list(LogRecord.objects.filter(logger="broker.audit").values_list("message", flat=True))
    assert any(m.startswith("tester: added Queue MyQueue") for m in audit)
    assert any("imqDefaultPassword" not in m or "********" in m for m in audit)
    assert any(m.startswith("tester: deleted Queue MyQueue") for m in audit)


def test_refusals_change_nothing(tmp_path):
    store = fs_props(tmp_path)
    actions.add_object("t", "Q", "q", {"imqDestinationName": "a"}, store=store)
    with pytest.raises(actions.Conflict, match="exists already"):
        actions.add_object("t", "Q", "t", {}, store=store)
    with pytest.raises(ActionError, match="imqJMSPriority"):
        actions.add_object("t", "CF", "cf", {"imqJMSPriority": "x"}, store=store)
    with pytest.raises(actions.Conflict, match="is a Queue, not a Topic"):
        actions.update_object("t", "Q", attributes={}, obj_type="t", store=store)
    with pytest.raises(actions.NotFound):
        actions.delete_object("t", "Nope", store=store)
    with pytest.raises(ActionError, match="no '/'"):
        actions.add_object("t", "a/b", "q", {}, store=store)
    with pytest.raises(ActionError, match="not supported"):
        actions.add_object("t", "Q2", "q", {}, store={"java.naming.factory.initial": "x.Y"})
    missing = fs_props(tmp_path / "missing")
    with pytest.raises(ActionError, match="does not exist"):
        actions.add_object("t", "Q3", "q", {}, store=missing)
    # the store refused: the object is not in the database either
    assert not AdministeredObject.objects.filter(lookup_name="Q3").exists()
    assert [o["lookup_name"] for o in actions.list_objects(store=store)] == ["Q"]


# --------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("imqobjmgr", *args, stdout=out)
    return out.getvalue()


def test_command_add_list_query_update_delete(tmp_path):
    j = jflags(fs_props(tmp_path))
    out = run("add", "-t", "q", "-l", "Orders", "-o", "imqDestinationName=orders", *j, "-f")
    assert "Adding a Queue object" in out and "Object successfully added." in out
    run("add", "-t", "xcf", "-l", "XA", "-o", "imqReconnectEnabled=true", "-r", "true", *j)
    out = run("list", *j)
    assert "Orders" in out and "XAConnectionFactory" in out and "2 object(s)." in out
    out = run("list", "-t", "q", *j)
    assert "Orders" in out and "XA " not in out
    out = run("query", "-l", "XA", *j)
    assert "Read-only:         true" in out
    assert "imqReconnectEnabled                           true" in out
    assert "imqDefaultPassword                            guest" in out
    run("update", "-l", "Orders", "-t", "q", "-o", "imqDestinationName=orders2", *j, "-f")
    assert "orders2" in run("query", "-l", "Orders", *j)
    assert run("delete", "-l", "Orders", *j, "-f", "-s") == ""
    assert "1 object(s)." in run("list", *j)
    with pytest.raises(CommandError, match="not an attribute"):
        run("add", "-t", "q", "-l", "Bad", "-o", "imqBogus=1", *j, "-f")
    with pytest.raises(CommandError, match="needs -l"):
        run("add", "-t", "q", *j)
    with pytest.raises(CommandError, match="expects name=value"):
        run("add", "-t", "q", "-l", "X", "-o", "oops", *j)


def test_command_input_file_and_preview(tmp_path):
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    spec = tmp_path / "add.props"
    spec.write_text(
        "cmdtype=add\nobj.type=t\nobj.lookupName=Prices\n"
        "obj.attrs.imqDestinationName=prices\n"
        "objstore.attrs.java.naming.factory.initial=com.sun.jndi.fscontext.RefFSContextFactory\n"
        f"objstore.attrs.java.naming.provider.url={store_dir.as_uri()}\n"
        "force=true\n"
    )
    assert "Preview only" in run("-i", str(spec), "-pre")
    assert not (store_dir / ".bindings").exists()
    run("-i", str(spec))
    b = read_bindings(store_dir.as_uri())
    assert b["Prices/ClassName"] == "com.sun.messaging.Topic"


# --------------------------------------------------------------------------------------
# LDAP, read back by the JDK
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    javac = shutil.which("javac")
    assert javac, "javac (a JDK) is needed: make install-dev installs one"
    out = tmp_path_factory.mktemp("jndiprobe")
    done = subprocess.run(
        [javac, "-d", str(out), str(PROBE)], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    return out


def run_probe(probe: Path, *args: str) -> dict[str, dict]:
    java = shutil.which("java")
    assert java, "java (a JDK) is needed: make install-dev installs one"
    done = subprocess.run(
        [java, "-Dstdout.encoding=UTF-8", "-cp", str(probe), "JndiProbe", *args],
        capture_output=True,
        encoding="utf-8",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, dict] = {}
    current: dict = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key == "name":
            current = {"addrs": []}
            found[value] = current
        elif key.startswith("addr."):
            current["addrs"].append(tuple(value.split("=", 1)))
        elif key != "end":
            current[key] = value
    return found


def java_lookup(probe: Path, srv, *names: str) -> dict[str, dict]:
    props = ldap_props(srv)
    return run_probe(
        probe,
        props["java.naming.factory.initial"],
        props["java.naming.provider.url"],
        srv.rootdn,
        srv.rootpw,
        *names,
    )


def test_bindings_file_read_by_java_properties(tmp_path, probe):
    """The .bindings file as java.util.Properties (RefFSContext's reader) loads it,
    values with the characters the format escapes included."""
    tricky = " lead=a:b#c!d \\e \u00e9\u20ac"
    store = fs_props(tmp_path)
    actions.add_object(
        "t",
        "Tricky",
        "cf",
        {"imqConfiguredClientID": tricky, "imqDefaultUsername": "u"},
        store=store,
    )
    actions.add_object("t", "Plain", "t", {"imqDestinationName": "prices"}, store=store)
    found = run_probe(probe, "bindings", str(tmp_path / ".bindings"), "Tricky", "Plain")
    cf, topic = found["Tricky"], found["Plain"]
    assert cf["className"] == "com.sun.messaging.ConnectionFactory"
    assert cf["factoryClassName"] == FACTORY
    assert cf["addrs"][:2] == [("version", "3.0"), ("readOnly", "false")]
    assert dict(cf["addrs"][2:])["imqConfiguredClientID"] == tricky
    assert len(cf["addrs"]) == 2 + len(CF_ATTRS)
    assert topic["className"] == "com.sun.messaging.Topic"
    assert topic["addrs"][2:] == [
        ("imqDestinationName", "prices"),
        ("imqDestinationDescription", "A Description for the Destination Object"),
    ]


def test_ldap_store_read_by_the_jdk(ldap_server, probe):  # noqa: F811
    srv = ldap_server
    j = jflags(ldap_props(srv))
    run(
        "add", "-t", "cf", "-l", "cn=OrdersCF",
        "-o", "imqAddressList=mq://127.0.0.1:7676/jms",
        "-o", "imqReconnectEnabled=true",
        "-o", "imqDefaultUsername=alice",
        "-o", "imqAckOnProduce=",
        *j, "-f",
    )  # fmt: skip
    run("add", "-t", "q", "-l", "cn=OrdersQ", "-o", "imqDestinationName=orders", *j, "-f")
    run("add", "-t", "t", "-l", "cn=PricesT", "-o", "imqDestinationName=prices", "-r", "true", *j)

    entry = ldap_entry(srv, "OrdersQ")
    assert entry is not None
    assert set(entry["objectClass"]) == {
        "top",
        "javaContainer",
        "javaObject",
        "javaNamingReference",
    }
    assert entry["javaClassName"] == ["com.sun.messaging.Queue"]
    assert entry["javaFactory"] == [FACTORY]
    assert "#0#version#3.0" in entry["javaReferenceAddress"]
    assert "#2#imqDestinationName#orders" in entry["javaReferenceAddress"]

    found = java_lookup(probe, srv, "cn=OrdersCF", "cn=OrdersQ", "cn=PricesT")
    cf, q, t = found["cn=OrdersCF"], found["cn=OrdersQ"], found["cn=PricesT"]
    # The JDK cannot load OpenMQ's factory here, so it returns the Reference itself.
    assert cf["java"] == "javax.naming.Reference"
    assert cf["className"] == "com.sun.messaging.ConnectionFactory"
    assert q["className"] == "com.sun.messaging.Queue"
    assert t["className"] == "com.sun.messaging.Topic"
    for ref in (cf, q, t):
        assert ref["factoryClassName"] == "com.sun.messaging.naming.AdministeredObjectFactory"
        assert ref["addrs"][0] == ("version", "3.0")  # AdministeredObjectFactory: "3.0"
        assert ref["addrs"][1][0] == "readOnly"
    assert q["addrs"] == [
        ("version", "3.0"),
        ("readOnly", "false"),
        ("imqDestinationName", "orders"),
        ("imqDestinationDescription", "A Description for the Destination Object"),
    ]
    assert t["addrs"][1] == ("readOnly", "true")
    cf_addrs = dict(cf["addrs"][2:])
    assert len(cf["addrs"]) == 2 + len(CF_ATTRS)
    assert cf_addrs["imqAddressList"] == "mq://127.0.0.1:7676/jms"
    assert cf_addrs["imqReconnectEnabled"] == "true"
    assert cf_addrs["imqDefaultUsername"] == "alice"
    assert cf_addrs["imqDefaultPassword"] == "guest"
    # an empty value comes back as null, which the factory reads as ""
    assert cf_addrs["imqAckOnProduce"] == "<null>"

    # update rebinds; delete unbinds
    run("update", "-l", "cn=OrdersQ", "-o", "imqDestinationName=orders2", *j, "-f")
    q = java_lookup(probe, srv, "cn=OrdersQ")["cn=OrdersQ"]
    assert ("imqDestinationName", "orders2") in q["addrs"]
    run("delete", "-l", "cn=PricesT", *j, "-f")
    assert ldap_entry(srv, "PricesT") is None


def test_ldap_refusals(ldap_server):  # noqa: F811
    srv = ldap_server
    bad_pw = {**ldap_props(srv), "java.naming.security.credentials": "wrong"}
    with pytest.raises(ActionError, match="LDAP store"):
        actions.add_object("t", "cn=Nope", "q", {}, store=bad_pw)
    assert not AdministeredObject.objects.filter(lookup_name="cn=Nope").exists()
    assert not ObjectStore.objects.filter(factory_initial=LDAP_FACTORY).exists()
    assert not LogRecord.objects.filter(message__contains="added object store").exists()
    with pytest.raises(ActionError, match="cn=MyQueueName"):
        actions.add_object("t", "NoCn", "q", {}, store=ldap_props(srv))
    with pytest.raises(ActionError, match="starting with '#'"):
        actions.add_object(
            "t", "cn=Hash", "q", {"imqDestinationDescription": "#x"}, store=ldap_props(srv)
        )
    assert ldap_entry(srv, "Hash") is None
