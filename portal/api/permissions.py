"""Who may use the REST API: administrators only (:func:`portal.auth.is_administrator`,
active members of the broker's ``admin`` group in its user repository, checked on every
request).  Anonymous requests get 401 (with the ``WWW-Authenticate: Token`` challenge),
authenticated non-administrators 403 -- also a session or token whose user was disabled
or demoted since it was issued."""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from portal.auth import is_administrator

NOT_ADMIN = "Only administrators (members of the broker's admin group) may use the REST API."


class IsAdministrator(BasePermission):
    message = NOT_ADMIN

    def has_permission(self, request, view) -> bool:
        return is_administrator(request.user)
