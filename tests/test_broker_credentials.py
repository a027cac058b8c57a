"""The one source of the credential the portal, the REST API, /metrics and the jobs log in
to the broker with (broker/admintools/credentials.py), and the action layer's refusals that
keep it working (broker/admintools/security_actions.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from broker.admintools import definitions
from broker.admintools import security_actions as sec
from broker.admintools.credentials import CredentialsError, broker_credentials
from broker.admintools.portal_account import PORTAL_ACCOUNT, guarded_account
from broker.models import BrokerUser
from broker.security.digest import password_digest
from broker.security.users import ensure_default_users

pytestmark = [pytest.mark.fast, pytest.mark.django_db]


@pytest.fixture
def own_account(settings, tmp_path: Path) -> Path:
    """Settings for the portal's own account, its secret in a fresh directory."""
    settings.IMQ_ADMIN_USER = ""
    settings.IMQ_ADMIN_PASSWORD = ""
    settings.IMQ_ADMIN_PASSWORD_FILE = ""
    settings.IMQ_PORTAL_SECRET_FILE = tmp_path / "var" / "portal.secret"
    ensure_default_users()
    return settings.IMQ_PORTAL_SECRET_FILE


def _digest(username: str) -> str:
    return BrokerUser.objects.get(username=username).password_digest


def test_first_use_makes_the_secret_and_the_account(own_account: Path) -> None:
    assert not own_account.exists()
    creds = broker_credentials()
    assert creds.user == PORTAL_ACCOUNT and creds.own_account
    assert stat.S_IMODE(own_account.stat().st_mode) == 0o600
    assert own_account.read_text().strip() == creds.password and len(creds.password) >= 40
    assert str(own_account) in creds.source
    assert creds.password not in repr(creds)
    user = sec.get_user(PORTAL_ACCOUNT)
    assert user["active"] and user["groups"] == ["admin"]
    assert _digest(PORTAL_ACCOUNT) == password_digest(PORTAL_ACCOUNT, creds.password)
    # Asked again: the same secret, no second file, nothing changed.
    assert broker_credentials() == creds
    assert [p.name for p in own_account.parent.iterdir()] == ["portal.secret"]


def test_a_new_secret_is_read_again_and_the_account_follows(own_account: Path) -> None:
    first = broker_credentials()
    own_account.write_text("rotated-secret-value\n")
    second = broker_credentials()
    assert second.password == "rotated-secret-value" != first.password
    assert _digest(PORTAL_ACCOUNT) == password_digest(PORTAL_ACCOUNT, "rotated-secret-value")


def test_after_a_refused_login_the_account_is_set_from_the_secret_again(own_account) -> None:
    creds = broker_credentials()
    # A database restored from an older backup: the account's password is not the secret.
    BrokerUser.objects.filter(username=PORTAL_ACCOUNT).update(password_digest="-1234")
    assert broker_credentials() == creds  # the file did not change: nothing looked at
    assert _digest(PORTAL_ACCOUNT) == "-1234"
    assert broker_credentials(resync=True) == creds
    assert _digest(PORTAL_ACCOUNT) == password_digest(PORTAL_ACCOUNT, creds.password)


def test_an_empty_or_unreadable_secret_says_which_file(own_account: Path) -> None:
    own_account.parent.mkdir(parents=True)
    own_account.write_text("\n")
    with pytest.raises(CredentialsError, match=f"{own_account} is empty"):
        broker_credentials()


def test_changing_admins_password_leaves_the_portals_credential(own_account: Path) -> None:
    creds = broker_credentials()
    sec.update_user("alice", "admin", password="n3w-admin-pw")
    assert broker_credentials() == creds
    assert _digest(PORTAL_ACCOUNT) == password_digest(PORTAL_ACCOUNT, creds.password)


@pytest.mark.parametrize(
    "change",
    [
        lambda: sec.update_user("alice", PORTAL_ACCOUNT, password="mine-now"),
        lambda: sec.update_user("alice", PORTAL_ACCOUNT, active=False),
        lambda: sec.update_user("alice", PORTAL_ACCOUNT, groups=["user"]),
        lambda: sec.delete_user("alice", PORTAL_ACCOUNT),
    ],
    ids=["password", "disable", "not-admin", "delete"],
)
def test_what_would_cut_the_portal_off_is_refused_with_what_to_do(own_account, change) -> None:
    creds = broker_credentials()
    with pytest.raises(sec.Conflict) as refused:
        change()
    text = str(refused.value)
    assert "the portal's own broker account" in text
    assert f"the secret in {own_account}" in text and "replace that file's content" in text
    user = sec.get_user(PORTAL_ACCOUNT)
    assert user["active"] and "admin" in user["groups"]
    assert _digest(PORTAL_ACCOUNT) == password_digest(PORTAL_ACCOUNT, creds.password)


def test_groups_that_keep_admin_may_change(own_account: Path) -> None:
    broker_credentials()
    sec.update_user("alice", PORTAL_ACCOUNT, groups=["admin", "ops"])
    assert sec.get_user(PORTAL_ACCOUNT)["groups"] == ["admin", "ops"]


def test_the_portals_account_does_not_count_as_the_last_administrator(own_account) -> None:
    broker_credentials()
    with pytest.raises(sec.Conflict, match="admin is the last active member of group admin"):
        sec.update_user("alice", "admin", active=False)
    with pytest.raises(sec.Conflict, match="no active member of group admin"):
        sec.import_users_passwd("alice", f"admin:{password_digest('admin', 'admin')}:admin:0\n")


def test_a_passwd_import_may_not_change_the_portals_account(own_account) -> None:
    creds = broker_credentials()
    line = f"{PORTAL_ACCOUNT}:{password_digest(PORTAL_ACCOUNT, 'other')}:admin:1\n"
    with pytest.raises(sec.Conflict, match="the portal's own broker account"):
        sec.import_users_passwd("alice", line)
    same = f"{PORTAL_ACCOUNT}:{password_digest(PORTAL_ACCOUNT, creds.password)}:admin:1\n"
    assert sec.import_users_passwd("alice", same) == ([], [PORTAL_ACCOUNT])


def test_definitions_leave_the_portals_account_out(own_account: Path) -> None:
    broker_credentials()
    exported = definitions._export_users(None)  # type: ignore[arg-type]
    assert PORTAL_ACCOUNT not in {u["username"] for u in exported}
    assert "admin" in {u["username"] for u in exported}
    errors: list[str] = []
    item = {
        "username": PORTAL_ACCOUNT,
        "password_digest": password_digest(PORTAL_ACCOUNT, "x"),
        "groups": ["admin"],
    }
    definitions._plan_users([item], None, errors)  # type: ignore[arg-type]
    assert errors and "each installation's own" in errors[0]


# -- an account the operator gives ------------------------------------------------------


def test_given_password(settings, own_account: Path) -> None:
    settings.IMQ_ADMIN_USER = "ops"
    settings.IMQ_ADMIN_PASSWORD = "ops-pw"
    creds = broker_credentials()
    assert (creds.user, creds.password, creds.own_account) == ("ops", "ops-pw", False)
    assert not own_account.exists()  # the own account is not made when not used
    assert not BrokerUser.objects.filter(username=PORTAL_ACCOUNT).exists()


def test_given_password_file_is_read_again(settings, own_account: Path, tmp_path) -> None:
    path = tmp_path / "admin_password"
    path.write_text("first\n")
    settings.IMQ_ADMIN_PASSWORD_FILE = str(path)
    assert broker_credentials().user == "admin"
    assert broker_credentials().password == "first"
    path.write_text("second-and-longer\n")
    assert broker_credentials().password == "second-and-longer"


@pytest.mark.parametrize(
    ("user", "password", "password_file", "message"),
    [
        ("ops", "", "", "IMQ_ADMIN_USER=ops is set without IMQ_ADMIN_PASSWORD"),
        ("", "pw", "/nonexistent", "both IMQ_ADMIN_PASSWORD and IMQ_ADMIN_PASSWORD_FILE"),
        ("", "", "/nonexistent/pw", "IMQ_ADMIN_PASSWORD_FILE: cannot read /nonexistent/pw"),
    ],
)
def test_half_given_settings_say_what_is_missing(
    settings, own_account, user, password, password_file, message
) -> None:
    settings.IMQ_ADMIN_USER = user
    settings.IMQ_ADMIN_PASSWORD = password
    settings.IMQ_ADMIN_PASSWORD_FILE = password_file
    with pytest.raises(CredentialsError, match=message):
        broker_credentials()


def test_the_given_account_is_guarded_by_the_process_using_it(settings, own_account) -> None:
    settings.IMQ_ADMIN_USER = "admin"
    settings.IMQ_ADMIN_PASSWORD = "admin"
    assert guarded_account()[0] == "admin"
    with pytest.raises(sec.Conflict) as refused:
        sec.update_user("alice", "admin", password="changed")
    assert "log in to the broker as admin with the password from IMQ_ADMIN_PASSWORD" in str(
        refused.value
    )
    assert "unset IMQ_ADMIN_USER and IMQ_ADMIN_PASSWORD(_FILE)" in str(refused.value)
    assert _digest("admin") == password_digest("admin", "admin")
