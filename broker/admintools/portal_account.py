"""Which broker account the portal's connection uses, and why a person may not change it:
read from the settings only (asking never creates the account or its secret), so the action
layer (:mod:`broker.admintools.security_actions`) can refuse, in any process, a change that
would cut the portal, the REST API, /metrics and the jobs off the broker.
:mod:`broker.admintools.credentials` reads the credential itself."""

from __future__ import annotations

__all__ = ["PORTAL_ACCOUNT", "guarded_account"]

# The portal's own account (group admin); its password is the secret in
# IMQ_PORTAL_SECRET_FILE, never a person's.
PORTAL_ACCOUNT = "imq.portal"


def guarded_account() -> tuple[str, str]:
    """The account this process's portal connection uses, which a person must not
    change, and how to change what the portal uses instead."""
    from django.conf import settings

    user = getattr(settings, "IMQ_ADMIN_USER", "")
    password = getattr(settings, "IMQ_ADMIN_PASSWORD", "")
    password_file = getattr(settings, "IMQ_ADMIN_PASSWORD_FILE", "")
    if user or password or password_file:
        where = (
            f"IMQ_ADMIN_PASSWORD_FILE ({password_file})" if password_file else "IMQ_ADMIN_PASSWORD"
        )
        return (
            user or "admin",
            f"the portal, the REST API, /metrics and the jobs log in to the broker as "
            f"{user or 'admin'} with the password from {where}. Change that account where "
            "the broker's administrators manage it, then the variable; or unset "
            "IMQ_ADMIN_USER and IMQ_ADMIN_PASSWORD(_FILE) and restart, so the portal uses "
            f"its own account {PORTAL_ACCOUNT}",
        )
    path = settings.IMQ_PORTAL_SECRET_FILE
    return (
        PORTAL_ACCOUNT,
        f"{PORTAL_ACCOUNT} is the portal's own broker account: the portal, the REST API, "
        f"/metrics and the jobs log in with it. Its password is the secret in {path}; to "
        "change it, replace that file's content (or delete the file: a new secret is "
        "made at the portal's next request) and the account follows",
    )
