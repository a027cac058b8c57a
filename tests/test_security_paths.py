"""One write path for users and access rules, and administrator rights checked per request.

* ``imqusermgr`` and ``imqacl`` change users and rules through
  :mod:`broker.admintools.security_actions`: each change leaves the audit record, the last
  active administrator cannot be removed, and the portal follows at once.
* A real portal (daphne) over HTTP: an administrator with an open browser session and a
  REST token who is disabled, moved out of group ``admin`` or deleted by ``imqusermgr``
  (a separate process) is refused at the next request; with the passwd-file repository,
  an edit of the file does the same.
* A broker's start-up does not log the false "version line is missing" ERROR of the
  placeholder rule set; a real rules file without the version line still does.
"""

from __future__ import annotations

import getpass
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.core.management import call_command
from django.core.management.base import CommandError

from broker.launcher import fresh_sqlite
from broker.security.acl import DEFAULT_RULES, VERSION
from broker.security.digest import md5str
from tests.manage_fork import run_manage

from .ldap import ldap_server  # noqa: F401 - a real slapd for the LDAP test
from .portal_server import PortalStack, start_stack
from .redis import find_redis_server

FALSE_ALARM = "version line is missing"


def manage(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """``manage.py`` as its own process on the stack's database."""
    return run_manage(list(args), env=env, input=stdin, timeout=120)


def usermgr(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    done = manage(env, "imqusermgr", *args)
    assert done.returncode == 0, done.stderr
    return done


class Admin:
    """One administrator's browser session (logged in through the login form) and REST
    token, against a running portal."""

    def __init__(self, url: str, username: str, password: str) -> None:
        self.url = url
        self.username = username
        self.session = requests.Session()
        page = self.session.get(f"{url}/login/", timeout=30)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert csrf, page.text
        r = self.session.post(
            f"{url}/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": csrf.group(1),
            },
            headers={"Referer": f"{url}/login/"},
            allow_redirects=False,
            timeout=30,
        )
        assert r.status_code == 302, f"login of {username} refused: {r.text[:2000]}"
        r = requests.post(
            f"{url}/api/token/", json={"username": username, "password": password}, timeout=30
        )
        assert r.status_code == 200, r.text
        self.token = r.json()["token"]

    def page_status(self) -> tuple[int, str]:
        """(status, redirect target) of the portal's users page in the browser session."""
        r = self.session.get(f"{self.url}/users/", allow_redirects=False, timeout=30)
        return r.status_code, r.headers.get("Location", "")

    def token_status(self) -> int:
        r = requests.get(
            f"{self.url}/api/users/",
            headers={"Authorization": f"Token {self.token}"},
            timeout=30,
        )
        return r.status_code

    def session_api_status(self) -> int:
        return self.session.get(f"{self.url}/api/users/", timeout=30).status_code

    def assert_admin(self) -> None:
        assert self.page_status() == (200, "")
        assert self.token_status() == 200
        assert self.session_api_status() == 200

    def assert_refused(self) -> None:
        status, where = self.page_status()
        assert status == 302 and where.startswith("/login/"), (status, where)
        assert self.token_status() in (401, 403)
        assert self.session_api_status() in (401, 403)


@pytest.fixture(scope="module")
def stack() -> Iterator[PortalStack]:
    """A portal stack of this module's own (its users are changed under it)."""
    if find_redis_server() is None:
        pytest.fail("redis-server not found: run `make install-dev`", pytrace=False)
    s = start_stack()
    try:
        yield s
    finally:
        s.stop()


# -- imqusermgr in another process; the portal refuses the next request ----------------


def test_disabled_by_imqusermgr_loses_session_and_token(stack) -> None:
    usermgr(stack.env, "add", "-u", "ada", "-p", "ada-pw", "-g", "admin")
    ada = Admin(stack.url, "ada", "ada-pw")
    ada.assert_admin()

    usermgr(stack.env, "update", "-u", "ada", "-a", "false", "-f")
    ada.assert_refused()
    r = requests.post(
        f"{stack.url}/api/token/", json={"username": "ada", "password": "ada-pw"}, timeout=30
    )
    assert r.status_code == 400  # a disabled user cannot log in again either

    usermgr(stack.env, "update", "-u", "ada", "-a", "true", "-f")
    ada.assert_refused()  # the old session and token stay ended
    Admin(stack.url, "ada", "ada-pw").assert_admin()
    usermgr(stack.env, "delete", "-u", "ada", "-f")


def test_removed_from_admin_group_by_imqusermgr(stack) -> None:
    usermgr(stack.env, "add", "-u", "bea", "-p", "bea-pw", "-g", "admin")
    bea = Admin(stack.url, "bea", "bea-pw")
    bea.assert_admin()

    usermgr(stack.env, "update", "-u", "bea", "-g", "user", "-f")
    bea.assert_refused()

    usermgr(stack.env, "update", "-u", "bea", "-g", "admin", "-f")
    bea.assert_refused()
    Admin(stack.url, "bea", "bea-pw").assert_admin()
    usermgr(stack.env, "delete", "-u", "bea", "-f")


def test_deleted_by_imqusermgr(stack) -> None:
    usermgr(stack.env, "add", "-u", "cid", "-p", "cid-pw", "-g", "admin")
    cid = Admin(stack.url, "cid", "cid-pw")
    cid.assert_admin()

    usermgr(stack.env, "delete", "-u", "cid", "-f")
    cid.assert_refused()

    usermgr(stack.env, "add", "-u", "cid", "-p", "cid-pw2", "-g", "admin")
    cid.assert_refused()  # a new user of the same name does not revive the old session
    Admin(stack.url, "cid", "cid-pw2").assert_admin()
    usermgr(stack.env, "delete", "-u", "cid", "-f")


def test_change_made_behind_the_actions_is_seen_too(stack) -> None:
    """The check reads the repository, not the portal's login record: even a change that
    does not go through the actions (a database edit) takes effect at the next request."""
    usermgr(stack.env, "add", "-u", "dan", "-p", "dan-pw", "-g", "admin")
    dan = Admin(stack.url, "dan", "dan-pw")
    dan.assert_admin()
    stack.django(
        "from broker.models import BrokerUser\n"
        "BrokerUser.objects.filter(username='dan').update(active=False)\n"
    )
    status, where = dan.page_status()
    assert status == 302 and where.startswith("/login/")
    assert dan.token_status() == 403  # the token is still there; the rights are not
    usermgr(stack.env, "delete", "-u", "dan", "-f")


def _eventually(check, seconds: float = 15.0) -> None:
    """Until ``check()`` passes (the portal re-reads the access rules within a second)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_administrators_are_whom_the_admin_service_rules_allow(stack) -> None:
    """Who may administer in the portal is the broker's connection.ADMIN rule, not a
    group the portal names: a user the rules allow on the ADMIN service is an
    administrator without group admin, and one they deny is not, with it."""
    usermgr(stack.env, "add", "-u", "gus", "-p", "gus-pw", "-g", "user")
    usermgr(stack.env, "add", "-u", "hal", "-p", "hal-pw", "-g", "admin")
    hal = Admin(stack.url, "hal", "hal-pw")
    hal.assert_admin()
    try:
        for key, who in (("allow", "gus"), ("deny", "hal")):
            done = manage(stack.env, "imqacl", "set", f"connection.ADMIN.{key}.user", who)
            assert done.returncode == 0, done.stderr
        _eventually(hal.assert_refused)
        gus = Admin(stack.url, "gus", "gus-pw")
        gus.assert_admin()
        done = manage(stack.env, "imqacl", "delete", "connection.ADMIN.allow.user")
        assert done.returncode == 0, done.stderr
        _eventually(gus.assert_refused)
    finally:
        manage(stack.env, "imqacl", "delete", "connection.ADMIN.allow.user")
        manage(stack.env, "imqacl", "delete", "connection.ADMIN.deny.user")
        usermgr(stack.env, "delete", "-u", "gus", "-f")
        usermgr(stack.env, "delete", "-u", "hal", "-f")


def test_passwd_file_repository_checked_per_request(tmp_path: Path) -> None:
    """With the passwd file as the admin service's repository, disabling a user in the
    file (or taking group admin away) refuses their next request."""
    if find_redis_server() is None:
        pytest.fail("redis-server not found: run `make install-dev`", pytrace=False)
    etc = tmp_path / "var" / "instances" / "testbroker" / "etc"
    etc.mkdir(parents=True)
    passwd = etc / "passwd"

    def write(eve_group: str, eve_active: str) -> None:
        # As an editor saves it: a new file renamed over the old one.
        new = passwd.with_suffix(".new")
        new.write_text(
            f"admin:{md5str('admin:admin')}:admin:1\n"
            f"eve:{md5str('eve:eve-pw')}:{eve_group}:{eve_active}\n"
        )
        new.replace(passwd)

    write("admin", "1")
    with start_stack(
        tmp_path, config_props={"imq.authentication.basic.user_repository": "file"}
    ) as s:
        eve = Admin(s.url, "eve", "eve-pw")
        eve.assert_admin()
        write("admin", "0")
        status, where = eve.page_status()
        assert status == 302 and where.startswith("/login/")
        assert eve.token_status() in (401, 403)
        write("admin", "1")
        eve = Admin(s.url, "eve", "eve-pw")
        eve.assert_admin()
        write("user", "1")
        assert eve.token_status() in (401, 403)
        assert eve.page_status()[0] == 302


# -- audit records and the last-admin guard ---------------------------------------------


def _audit(since: int) -> list[str]:
    from broker.models import LogRecord

    rows = LogRecord.objects.filter(logger="broker.audit", pk__gt=since).order_by("pk")
    return [r.message for r in rows]


def _last_pk() -> int:
    from broker.models import LogRecord

    last = LogRecord.objects.order_by("-pk").first()
    return last.pk if last else 0


@pytest.mark.django_db
def test_imqusermgr_changes_are_audited(tmp_path: Path) -> None:
    from broker.security.users import ensure_default_users

    ensure_default_users()
    actor = f"{getpass.getuser()} (imqusermgr)"
    start = _last_pk()
    call_command("imqusermgr", "add", "-u", "fay", "-p", "fay-pw", "-g", "user")
    call_command("imqusermgr", "update", "-u", "fay", "-a", "false", "-f")
    call_command("imqusermgr", "update", "-u", "fay", "-p", "new-pw", "-f")
    passwd = tmp_path / "passwd"
    passwd.write_text(f"gus:{md5str('gus:gus-pw')}:user:1\n")
    call_command("imqusermgr", "import", str(passwd))
    call_command("imqusermgr", "delete", "-u", "fay", "-f")
    assert _audit(start) == [
        f"{actor}: created user fay (groups: user)",
        f"{actor}: updated user fay: disabled",
        f"{actor}: updated user fay: password",
        f"{actor}: imported users from a passwd file (1 added: gus; 0 updated: none)",
        f"{actor}: deleted user fay",
    ]
    assert not any("new-pw" in m or "fay-pw" in m for m in _audit(start))


@pytest.mark.django_db
def test_imqacl_changes_are_audited(tmp_path: Path) -> None:
    actor = f"{getpass.getuser()} (imqacl)"
    start = _last_pk()
    call_command("imqacl", "set", "queue.orders.consume.allow.group", "billing")
    call_command("imqacl", "set", "queue.orders.consume.allow.group", "billing,ops")
    call_command("imqacl", "delete", "queue.orders.consume.allow.group")
    rules = tmp_path / "accesscontrol.properties"
    rules.write_text("".join(f"{k}={v}\n" for k, v in DEFAULT_RULES.items()))
    call_command("imqacl", "import", str(rules))
    call_command("imqacl", "import", str(rules), "--merge", "-name", "other")
    n = len(DEFAULT_RULES)
    assert _audit(start) == [
        f"{actor}: added access rule queue.orders.consume.allow.group=billing (all brokers)",
        f"{actor}: changed access rule queue.orders.consume.allow.group=billing,ops (all brokers)",
        f"{actor}: deleted access rule queue.orders.consume.allow.group (all brokers)",
        f"{actor}: replaced the access rules of all brokers ({n} rules)",
        f"{actor}: merged the access rules of broker other ({n} rules)",
    ]
    # A file that is not all rules is refused whole: nothing changes, nothing recorded.
    rules.write_text(f"version={VERSION}\nnot.a.rule=x\n")
    before = _last_pk()
    with pytest.raises(CommandError, match="not access control rules"):
        call_command("imqacl", "import", str(rules))
    assert _audit(before) == []


def test_last_admin_guard_applies_to_imqusermgr(tmp_path: Path) -> None:
    import os

    env = dict(os.environ)
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    env["IMQ_VARHOME"] = str(tmp_path / "var")
    fresh_sqlite(tmp_path / "db.sqlite3", env)
    # The first use creates admin/admin (the only administrator) and guest/guest.
    manage(env, "shell", "-c", "from broker.security.users import ensure_default_users as e; e()")

    for args in (
        ("update", "-u", "admin", "-a", "false", "-f"),
        ("update", "-u", "admin", "-g", "user", "-f"),
        ("delete", "-u", "admin", "-f"),
    ):
        done = manage(env, "imqusermgr", *args)
        assert done.returncode != 0, args
        assert "admin is the last active member of group admin" in done.stderr
        assert "successfully" not in done.stdout
    # A passwd import that would disable the last administrator is refused whole.
    passwd = tmp_path / "passwd"
    passwd.write_text(f"admin:{md5str('admin:admin')}:admin:0\nhal:{md5str('hal:hal-pw')}:user:1\n")
    done = manage(env, "imqusermgr", "import", str(passwd))
    assert done.returncode != 0 and "no active member of group admin" in done.stderr
    listed = manage(env, "imqusermgr", "list").stdout
    assert re.search(r"^admin\s+admin\s+true$", listed, re.M), listed
    assert "hal" not in listed

    # With a second administrator the same changes go through.
    assert (
        manage(env, "imqusermgr", "add", "-u", "ivy", "-p", "ivy-pw", "-g", "admin").returncode == 0
    )
    done = manage(env, "imqusermgr", "update", "-u", "admin", "-a", "false", "-f")
    assert done.returncode == 0 and "User admin successfully updated." in done.stdout
    done = manage(env, "imqusermgr", "delete", "-u", "ivy", "-f")
    assert done.returncode != 0 and "ivy is the last active member" in done.stderr


# -- the false start-up ERROR -----------------------------------------------------------


def _acl_complaints(log: str) -> list[str]:
    return [
        ln
        for ln in log.splitlines()
        if ("ERROR" in ln or "WARNING" in ln) and ("access" in ln or "version" in ln)
    ]


def test_start_up_logs_no_false_rules_error(own_broker) -> None:
    b = own_broker()
    log = b.log_text()
    assert "access control rules loaded from database rules" in log
    assert FALSE_ALARM not in log
    assert _acl_complaints(log) == []


def test_rules_file_without_version_still_logs_the_error(own_broker, tmp_path: Path) -> None:
    rules = tmp_path / "broken.acl"
    rules.write_text("connection.NORMAL.allow.user=*\n")
    b = own_broker(
        f"imq.accesscontrol.file.dirpath={tmp_path}", "imq.accesscontrol.file.filename=broken.acl"
    )
    errors = [ln for ln in b.log_text().splitlines() if FALSE_ALARM in ln]
    assert len(errors) == 1 and "ERROR" in errors[0] and str(rules) in errors[0]


def test_ldap_repository_checked_per_request(ldap_server, monkeypatch) -> None:  # noqa: F811
    """With LDAP as the repository, a user taken out of the directory's admin group (or
    out of the directory) is refused at the next request once the re-check interval has
    passed (0 here: every request asks the directory)."""
    from ldap3 import MODIFY_ADD, MODIFY_DELETE, Connection, Server

    if find_redis_server() is None:
        pytest.fail("redis-server not found: run `make install-dev`", pytrace=False)
    dn = f"uid=dora,ou=people,{ldap_server.suffix}"
    admins = f"cn=admin,ou=groups,{ldap_server.suffix}"
    directory = Connection(
        Server(ldap_server.host, port=ldap_server.port),
        ldap_server.rootdn,
        ldap_server.rootpw,
        auto_bind=True,
    )
    assert directory.add(
        dn, ["inetOrgPerson"], {"cn": "Dora", "sn": "Dora", "userPassword": "dorapw"}
    )
    assert directory.modify(admins, {"uniqueMember": [(MODIFY_ADD, [dn])]})
    monkeypatch.setenv("PORTAL_LDAP_RECHECK_SECONDS", "0")
    props = dict(p.split("=", 1) for p in ldap_server.broker_props())
    try:
        with start_stack(
            None, config_props=props, admin_user="alice", admin_password="alicepw"
        ) as s:
            dora = Admin(s.url, "dora", "dorapw")
            dora.assert_admin()
            assert directory.modify(admins, {"uniqueMember": [(MODIFY_DELETE, [dn])]})
            status, where = dora.page_status()
            assert status == 302 and where.startswith("/login/")
            assert dora.token_status() == 403

            assert directory.modify(admins, {"uniqueMember": [(MODIFY_ADD, [dn])]})
            dora = Admin(s.url, "dora", "dorapw")
            dora.assert_admin()
            assert directory.delete(dn)
            assert dora.token_status() == 403
            assert dora.page_status()[0] == 302
    finally:
        directory.modify(admins, {"uniqueMember": [(MODIFY_DELETE, [dn])]})
        directory.delete(dn)
        directory.unbind()
