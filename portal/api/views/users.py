"""Users and groups (the broker's database user repository)."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import status
from rest_framework.response import Response

from broker.admintools import security_actions

from .. import filters
from .. import serializers as s
from ..base import DB_ERRORS, AdminView, QuerysetListView, doc, path_param

USER_PARAM = path_param("username", "The user's name.")
GROUP_PARAM = path_param("name", "The group's name.")


class UserListView(QuerysetListView):
    serializer_class = s.UserCreateSerializer  # the browsable API's form
    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.UserFilter
    row_serializer = s.UserSerializer
    render = staticmethod(security_actions.user_dict)

    def get_queryset(self):
        return security_actions.users_queryset()

    @doc("List the users", s.UserSerializer(many=True), errors=DB_ERRORS)
    def get(self, request):
        return self.list_response()

    @doc(
        "Create a user",
        s.UserSerializer,
        code=201,
        request=s.UserCreateSerializer,
        errors=DB_ERRORS,
    )
    def post(self, request):
        data = self.body(s.UserCreateSerializer)
        user = security_actions.create_user(self.actor, **data)
        return Response(s.UserSerializer(user).data, status=status.HTTP_201_CREATED)


class UserView(AdminView):
    @doc("Query a user", s.UserSerializer, params=[USER_PARAM], errors=DB_ERRORS)
    def get(self, request, username):
        return Response(s.UserSerializer(security_actions.get_user(username)).data)

    @doc(
        "Update a user",
        s.UserSerializer,
        request=s.UserUpdateSerializer,
        params=[USER_PARAM],
        errors=DB_ERRORS,
        description="Changes the password, the groups (replaced) and/or the active flag. "
        "Refused (409) when it would leave no active administrator.",
    )
    def patch(self, request, username):
        data = self.body(s.UserUpdateSerializer)
        return Response(
            s.UserSerializer(security_actions.update_user(self.actor, username, **data)).data
        )

    @doc("Delete a user", None, code=204, params=[USER_PARAM], errors=DB_ERRORS)
    def delete(self, request, username):
        security_actions.delete_user(self.actor, username)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupListView(QuerysetListView):
    serializer_class = s.GroupCreateSerializer  # the browsable API's form
    filter_backends = [DjangoFilterBackend]
    filterset_class = filters.GroupFilter
    row_serializer = s.GroupSerializer
    render = staticmethod(security_actions.group_dict)

    def get_queryset(self):
        return security_actions.groups_queryset()

    @doc("List the groups", s.GroupSerializer(many=True), errors=DB_ERRORS)
    def get(self, request):
        return self.list_response()

    @doc(
        "Create a group",
        s.GroupSerializer,
        code=201,
        request=s.GroupCreateSerializer,
        errors=DB_ERRORS,
    )
    def post(self, request):
        data = self.body(s.GroupCreateSerializer)
        group = security_actions.create_group(self.actor, data["name"], data["description"])
        return Response(s.GroupSerializer(group).data, status=status.HTTP_201_CREATED)


class GroupView(AdminView):
    @doc("Query a group", s.GroupSerializer, params=[GROUP_PARAM], errors=DB_ERRORS)
    def get(self, request, name):
        return Response(s.GroupSerializer(security_actions.get_group(name)).data)

    @doc(
        "Update a group's description",
        s.GroupSerializer,
        request=s.GroupUpdateSerializer,
        params=[GROUP_PARAM],
        errors=DB_ERRORS,
    )
    def patch(self, request, name):
        data = self.body(s.GroupUpdateSerializer)
        return Response(
            s.GroupSerializer(
                security_actions.update_group(self.actor, name, data["description"])
            ).data
        )

    @doc(
        "Delete a group",
        None,
        code=204,
        params=[GROUP_PARAM],
        errors=DB_ERRORS,
        description="Its members stay, without the group.  The built-in groups (admin, "
        "user, anonymous) are refused (409).",
    )
    def delete(self, request, name):
        security_actions.delete_group(self.actor, name)
        return Response(status=status.HTTP_204_NO_CONTENT)
