"""Who may see the portal's pages: administrators only (:func:`portal.auth.is_administrator`).

Anybody else gets the login page -- an anonymous visitor is redirected there, a logged-in
user who is not (or no longer) an administrator is logged out and sent there with a
message -- and never any data.
"""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.views import redirect_to_login

from portal.auth import is_administrator

NOT_ADMIN = "{user} is not an administrator: only users the broker's admin service accepts (its connection.ADMIN access rules) may use the portal."


def admin_required(view):
    """Run ``view`` only for administrators; everybody else goes to the login page."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        user = request.user
        if not is_administrator(user):
            if user.is_authenticated:
                name = user.get_username()
                logout(request)
                messages.error(request, NOT_ADMIN.format(user=name))
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapper
