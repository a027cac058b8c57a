"""Administered objects through the REST API (in process, DRF's APIClient on the test
database, a real broker for the portal's admin checks) and the portal's pages (headless
Chromium against a real daphne, broker and redis: tests/portal_server.py), publishing to
the test's slapd and to a ``.bindings`` file."""

from __future__ import annotations

import pytest
from ldap3 import BASE, Connection, Server
from rest_framework.test import APIClient

from broker.admintools import security_actions
from broker.models import LogRecord
from portal.objects.stores import LDAP_FACTORY, read_bindings

from .ldap import ldap_server  # noqa: F401
from .portal_server import chromium, playwright_expect, portal_server  # noqa: F401

expect = playwright_expect()

ADMIN, ADMIN_PW = "objadmin", "0bj-secret"
WAIT = 30_000


@pytest.fixture
def api(broker, settings, tmp_path) -> APIClient:
    settings.IMQ_BROKER_HOST = broker.host
    settings.IMQ_BROKER_PORT = broker.portmapper_port
    settings.IMQ_VARHOME = tmp_path / "portal-var"
    # The broker has a database of its own: the portal logs in as its admin/admin.
    settings.IMQ_ADMIN_USER, settings.IMQ_ADMIN_PASSWORD = "admin", "admin"
    security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])
    client = APIClient()
    r = client.post("/api/token/", {"username": ADMIN, "password": ADMIN_PW}, format="json")
    assert r.status_code == 200, r.content
    client.credentials(HTTP_AUTHORIZATION=f"Token {r.json()['token']}")
    return client


def ldap_dn_exists(srv, dn: str) -> bool:
    conn = Connection(Server(srv.host, port=srv.port), srv.rootdn, srv.rootpw, auto_bind=True)
    try:
        return bool(conn.search(dn, "(objectClass=*)", BASE))
    finally:
        conn.unbind()


@pytest.mark.django_db
def test_rest_objects_in_an_ldap_store(api, ldap_server):  # noqa: F811
    srv = ldap_server
    url = f"ldap://{srv.host}:{srv.port}/ou=jndi,{srv.suffix}"
    r = api.post(
        "/api/object-stores/",
        {
            "name": "dir",
            "properties": {
                "java.naming.factory.initial": LDAP_FACTORY,
                "java.naming.provider.url": url,
                "java.naming.security.principal": srv.rootdn,
                "java.naming.security.credentials": srv.rootpw,
            },
        },
        format="json",
    )
    assert r.status_code == 201, r.content
    assert r.json()["has_credentials"] is True
    assert "java.naming.security.credentials" not in r.json()["properties"]

    r = api.post(
        "/api/objects/",
        {
            "lookup_name": "cn=RestCF",
            "type": "cf",
            "store": "dir",
            "attributes": {"imqAddressList": "mq://127.0.0.1:7676/jms"},
        },
        format="json",
    )
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["class_name"] == "com.sun.messaging.ConnectionFactory"
    assert body["effective"]["imqReconnectEnabled"] == "false"
    assert ldap_dn_exists(srv, f"cn=RestCF,ou=jndi,{srv.suffix}")

    r = api.patch(
        "/api/objects/dir/cn=RestCF/",
        {"attributes": {"imqReconnectEnabled": "true"}, "read_only": True},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert r.json()["read_only"] is True
    assert r.json()["attributes"] == {
        "imqAddressList": "mq://127.0.0.1:7676/jms",
        "imqReconnectEnabled": "true",
    }
    r = api.get("/api/objects/", {"store": "dir", "type": "cf"})
    assert [o["lookup_name"] for o in r.json()["results"]] == ["cn=RestCF"]

    # refusals: 400 / 404 / 409, nothing changed
    r = api.post(
        "/api/objects/",
        {"lookup_name": "cn=Bad", "type": "q", "store": "dir", "attributes": {"imqX": "1"}},
        format="json",
    )
    assert r.status_code == 400 and "imqX" in r.json()["detail"]
    r = api.post(
        "/api/objects/", {"lookup_name": "cn=RestCF", "type": "q", "store": "dir"}, format="json"
    )
    assert r.status_code == 409
    assert api.get("/api/objects/dir/cn=Nope/").status_code == 404
    assert api.delete("/api/object-stores/dir/").status_code == 409  # still holds objects
    assert not ldap_dn_exists(srv, f"cn=Bad,ou=jndi,{srv.suffix}")

    assert api.delete("/api/objects/dir/cn=RestCF/").status_code == 204
    assert not ldap_dn_exists(srv, f"cn=RestCF,ou=jndi,{srv.suffix}")
    assert api.delete("/api/object-stores/dir/").status_code == 204
    assert LogRecord.objects.filter(
        logger="broker.audit", message__startswith=f"{ADMIN}: added ConnectionFactory cn=RestCF"
    ).exists()


@pytest.mark.django_db
def test_rest_needs_an_administrator(api, broker):
    security_actions.create_user("setup", "plain", "plain-pw", ["user"])
    client = APIClient()
    assert client.get("/api/objects/").status_code == 401
    r = client.post("/api/token/", {"username": "plain", "password": "plain-pw"}, format="json")
    client.credentials(HTTP_AUTHORIZATION=f"Token {r.json()['token']}")
    assert client.get("/api/objects/").status_code == 403
    assert client.post("/api/objects/", {"lookup_name": "x", "type": "q"}).status_code == 403


@pytest.fixture
def page(chromium):  # noqa: F811
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(WAIT)
    try:
        yield pg
    finally:
        context.close()


def test_pages_add_edit_delete(page, portal_server, tmp_path):  # noqa: F811
    base = portal_server.url
    store_dir = tmp_path / "jndi"
    store_dir.mkdir()
    page.goto(base + "/login/")
    page.get_by_label("User name").fill("admin")
    page.get_by_label("Password").fill("admin")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()

    page.get_by_role("link", name="Objects").click()
    expect(page.get_by_role("heading", name="Administered objects")).to_be_visible()
    form = page.locator("#store-form")
    form.get_by_label("Name").fill("files")
    form.get_by_label("Initial context factory").select_option(
        "com.sun.jndi.fscontext.RefFSContextFactory"
    )
    form.get_by_label("Provider URL").fill(store_dir.as_uri())
    form.get_by_role("button", name="Add object store").click()
    expect(page.get_by_text("Added object store files.")).to_be_visible()
    expect(page.locator("#stores")).to_contain_text(store_dir.as_uri())

    # a refused add shows every error and keeps the form
    page.get_by_role("link", name="Add object…").click()
    page.get_by_label("Object store").select_option("files")
    page.get_by_label("Type").select_option("q")
    page.get_by_label("Lookup name").fill("PageQ")
    page.get_by_label("Attributes").fill("imqDestinationName=9bad\nimqNoSuch=1")
    page.get_by_role("button", name="Add object").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("invalid destination name")
    expect(alert).to_contain_text("imqNoSuch is not an attribute of a Queue")
    assert not (store_dir / ".bindings").exists()

    page.get_by_label("Attributes").fill("imqDestinationName=orders")
    page.get_by_role("button", name="Add object").click()
    expect(page.get_by_text("Added PageQ to files.")).to_be_visible()
    b = read_bindings(store_dir.as_uri())
    assert b["PageQ/ClassName"] == "com.sun.messaging.Queue"
    assert "orders" in {b["PageQ/RefAddr/2/Content"], b["PageQ/RefAddr/3/Content"]}

    page.locator("#objects").get_by_role("link", name="PageQ").click()
    expect(page.locator("#effective")).to_contain_text("A Description for the Destination Object")
    page.get_by_label("Attributes").fill(
        "imqDestinationName=orders\nimqDestinationDescription=Order intake"
    )
    page.get_by_label("Read-only").check()
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("Updated PageQ.")).to_be_visible()
    b = read_bindings(store_dir.as_uri())
    assert b["PageQ/RefAddr/1/Content"] == "true"
    assert "Order intake" in {b["PageQ/RefAddr/2/Content"], b["PageQ/RefAddr/3/Content"]}

    page.get_by_role("link", name="Delete…").click()
    expect(page.get_by_text("Really delete Queue PageQ from object store files?")).to_be_visible()
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_text("Deleted PageQ.")).to_be_visible()
    assert not any(k.startswith("PageQ/") for k in read_bindings(store_dir.as_uri()))
    expect(page.locator("#objects")).to_contain_text("No administered objects.")
