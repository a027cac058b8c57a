"""The login page (portal users are the broker's users: portal/auth.py)."""

from __future__ import annotations

from django.contrib.auth.views import LoginView

from .. import forms


class PortalLoginView(LoginView):
    template_name = "registration/login.html"
    authentication_form = forms.AdminLoginForm
    redirect_authenticated_user = False
