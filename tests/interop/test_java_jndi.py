"""Administered objects made by ``manage.py imqobjmgr`` and looked up by the stock Java
client (imq.jar) through JNDI, then used to connect, send and receive
(tests/interop/java/JndiClient.java): the JDK's LDAP provider against the tests' slapd,
and the file-system store's ``.bindings`` file.

fscontext (``com.sun.jndi.fscontext.RefFSContextFactory``) is not in the JDK, not a Debian
package and not on this machine, so the ``.bindings`` half reads the file with
``java.util.Properties`` and resolves each Reference with the JDK's
``NamingManager.getObjectInstance`` (what RefFSContext.lookup does), which calls OpenMQ's
``AdministeredObjectFactory`` from imq.jar.
"""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.ldap import ldap_server  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(300)]


def imqobjmgr(*args: str) -> None:
    call_command("imqobjmgr", *args, stdout=io.StringIO())


def make_objects(store: list[str], prefix: str, broker: Any, queue: str, topic: str) -> str:
    """The five objects JndiClient looks up; returns the factories' address list."""
    address = f"mq://{broker.host}:{broker.portmapper_port}/jms"
    factory = ("-o", f"imqAddressList={address}", "-o", "imqReconnectEnabled=true",
               "-o", "imqReconnectAttempts=7")  # fmt: skip
    imqobjmgr("add", "-t", "cf", "-l", f"{prefix}JCF", *factory,
              "-o", "imqConfiguredClientID=jndi-client", *store, "-f")  # fmt: skip
    imqobjmgr("add", "-t", "xcf", "-l", f"{prefix}JXCF", *factory, *store, "-f")
    imqobjmgr("add", "-t", "cf", "-l", f"{prefix}JROCF", *factory, "-r", "true", *store, "-f")
    imqobjmgr("add", "-t", "q", "-l", f"{prefix}JQ", "-o", f"imqDestinationName={queue}",
              *store, "-f")  # fmt: skip
    imqobjmgr("add", "-t", "t", "-l", f"{prefix}JT", "-o", f"imqDestinationName={topic}",
              *store, "-f")  # fmt: skip
    return address


def expected(store: str) -> dict[str, str]:
    return {
        f"{store}_{name}": "ok"
        for name in (
            "lookup_types",
            "attributes",
            "queue_send_receive",
            "topic_publish_subscribe",
            "xa_connection",
        )
    }


def test_stock_client_looks_up_ldap_objects_and_sends(
    ldap_server: Any,  # noqa: F811
    interop_broker: Any,
    java_programs: Any,
) -> None:
    srv = ldap_server
    url = f"ldap://{srv.host}:{srv.port}/ou=jndi,{srv.suffix}"
    store = [
        "-jjava.naming.factory.initial=com.sun.jndi.ldap.LdapCtxFactory",
        f"-jjava.naming.provider.url={url}",
        "-jjava.naming.security.authentication=simple",
        f"-jjava.naming.security.principal={srv.rootdn}",
        f"-jjava.naming.security.credentials={srv.rootpw}",
    ]
    tag = uuid.uuid4().hex[:8]
    queue, topic = f"interop.jndi.ldapq{tag}", f"interop.jndi.ldapt{tag}"
    address = make_objects(store, "cn=", interop_broker, queue, topic)
    r = java_programs.run("JndiClient", interop_broker, "ldap", url, address, queue, topic)
    assert r.checks == expected("ldap"), r.explain()


def test_stock_client_uses_bindings_file_objects(
    tmp_path: Path, interop_broker: Any, java_programs: Any
) -> None:
    store = [
        "-jjava.naming.factory.initial=com.sun.jndi.fscontext.RefFSContextFactory",
        f"-jjava.naming.provider.url={tmp_path.as_uri()}",
    ]
    tag = uuid.uuid4().hex[:8]
    queue, topic = f"interop.jndi.fsq{tag}", f"interop.jndi.fst{tag}"
    address = make_objects(store, "", interop_broker, queue, topic)
    bindings = tmp_path / ".bindings"
    r = java_programs.run(
        "JndiClient", interop_broker, "bindings", str(bindings), address, queue, topic
    )
    assert r.checks == expected("bindings"), r.explain()
