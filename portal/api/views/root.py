"""The API's root (its resources' links) and its tokens (POST a user name and password for
one, DELETE to drop it)."""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.authtoken.models import Token
from rest_framework.parsers import FormParser, JSONParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.auth import is_administrator

from .. import serializers as s
from ..base import AdminView, doc

ROOT_LINKS = {
    "schema": "api-schema",
    "docs": "api-docs",
    "token": "api-token",
    "broker": "api-broker",
    "services": "api-services",
    "destinations": "api-destinations",
    "connections": "api-connections",
    "durables": "api-durables",
    "transactions": "api-transactions",
    "users": "api-users",
    "groups": "api-groups",
    "acl": "api-acl",
    "logs": "api-logs",
    "definitions": "api-definitions",
}


class ApiRootView(AdminView):
    @doc("The API's resources", s.FreeFormSerializer, errors=(401, 403))
    def get(self, request):
        return Response(
            {key: request.build_absolute_uri(reverse(name)) for key, name in ROOT_LINKS.items()}
        )


class TokenView(APIView):
    """Exchange a broker user name and password for an API token (POST), or drop the
    caller's token (DELETE).  The password is checked against the broker's user
    repository, as at the portal's login."""

    parser_classes = [JSONParser, FormParser]

    def get_authenticators(self):
        if getattr(self, "request", None) is not None and self.request.method == "POST":
            return []  # credentials in the body; no session, hence no CSRF token needed
        return super().get_authenticators()

    def get_permissions(self):
        if self.request.method == "POST":
            return [AllowAny()]
        return [IsAuthenticated()]

    @extend_schema(auth=[])
    @doc(
        "Get an API token",
        s.TokenSerializer,
        request=s.TokenRequestSerializer,
        errors=(400,),
        description="Authenticates against the broker's user repository and returns the "
        "user's token (created on first use).  Only administrators may then use the API.",
    )
    def post(self, request):
        data = s.TokenRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(
            request,
            username=data.validated_data["username"],
            password=data.validated_data["password"],
        )
        if user is None:
            raise exceptions.ValidationError(
                {"non_field_errors": ["wrong user name or password, or the user is disabled"]}
            )
        token, _ = Token.objects.get_or_create(user=user)
        return Response(
            {
                "token": token.key,
                "username": user.get_username(),
                "administrator": is_administrator(user),
            }
        )

    @doc("Drop my API token", None, code=204, errors=(401, 403))
    def delete(self, request):
        Token.objects.filter(user=request.user).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
