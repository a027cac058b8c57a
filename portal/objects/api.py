"""REST API for administered objects and object stores (mounted under /api/ by
portal/api/urls.py): thin views over :mod:`portal.objects.actions`."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, status
from rest_framework.response import Response

from portal.api.base import DB_ERRORS, AdminView, RowListView, doc, path_param

from . import actions
from .attributes import TYPES

TYPE_CODES = list(TYPES)


class ObjectSerializer(serializers.Serializer):
    lookup_name = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPE_CODES, help_text="q, t, cf or xcf")
    type_label = serializers.CharField()
    class_name = serializers.CharField(help_text="The Java class a JNDI lookup builds.")
    factory = serializers.CharField(help_text="The JNDI object factory.")
    read_only = serializers.BooleanField()
    store = serializers.CharField(help_text="The object store's name.")
    attributes = serializers.DictField(
        child=serializers.CharField(allow_blank=True), help_text="The attributes set."
    )
    effective = serializers.DictField(
        child=serializers.CharField(allow_blank=True),
        help_text="Every attribute, OpenMQ's defaults filled in.",
    )
    created = serializers.DateTimeField()
    updated = serializers.DateTimeField()


class AttributesField(serializers.DictField):
    child = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=4096)


class ObjectCreateSerializer(serializers.Serializer):
    lookup_name = serializers.CharField(max_length=500)
    type = serializers.ChoiceField(choices=TYPE_CODES)
    attributes = AttributesField(required=False, default=dict)
    read_only = serializers.BooleanField(default=False)
    store = serializers.CharField(
        max_length=200, default=actions.DEFAULT_STORE, help_text="The object store's name."
    )
    overwrite = serializers.BooleanField(
        default=False, help_text="Replace an object bound under that name."
    )


class ObjectUpdateSerializer(serializers.Serializer):
    attributes = AttributesField(required=False, help_text="Merged into the object's.")
    read_only = serializers.BooleanField(required=False)


class StoreSerializer(serializers.Serializer):
    name = serializers.CharField()
    factory_initial = serializers.CharField(allow_blank=True)
    provider_url = serializers.CharField(allow_blank=True)
    properties = serializers.DictField(child=serializers.CharField(allow_blank=True))
    has_credentials = serializers.BooleanField()
    objects = serializers.IntegerField()


class StoreCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    properties = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=1000),
        help_text="java.naming.factory.initial, java.naming.provider.url, "
        "java.naming.security.* (credentials are kept, never shown).",
    )


class ObjectListQuery(serializers.Serializer):
    store = serializers.CharField(required=False, max_length=200)
    type = serializers.ChoiceField(choices=TYPE_CODES, required=False)
    search = serializers.CharField(required=False, allow_blank=True, max_length=500)


LIST_PARAMS = [
    OpenApiParameter("store", str, description="Only this object store's objects."),
    OpenApiParameter("type", str, enum=TYPE_CODES, description="Only this type."),
    OpenApiParameter("search", str, description="Text in the lookup name."),
]
STORE_PARAM = path_param("store", "The object store's name.")
NAME_PARAM = path_param("lookup_name", "The object's lookup name.")


class ObjectListView(RowListView):
    @doc(
        "List administered objects",
        ObjectSerializer(many=True),
        params=LIST_PARAMS,
        errors=DB_ERRORS,
    )
    def get(self, request):
        q = self.query(ObjectListQuery)
        rows = [
            actions.object_dict(o)
            for o in actions.objects_queryset(
                store=q.get("store"), obj_type=q.get("type"), search=q.get("search")
            )
        ]
        return self.page(rows, ObjectSerializer)

    @doc(
        "Add an administered object",
        ObjectSerializer,
        code=201,
        request=ObjectCreateSerializer,
        errors=DB_ERRORS,
        description="Saves the object and publishes it to its object store (LDAP, a "
        ".bindings file, or none); a store that refuses leaves nothing changed (400).",
    )
    def post(self, request):
        d = self.body(ObjectCreateSerializer)
        obj = actions.add_object(
            self.actor,
            d["lookup_name"],
            d["type"],
            d["attributes"],
            read_only=d["read_only"],
            store=d["store"],
            overwrite=d["overwrite"],
        )
        return Response(ObjectSerializer(obj).data, status=status.HTTP_201_CREATED)


class ObjectView(AdminView):
    @doc(
        "Query an administered object",
        ObjectSerializer,
        params=[STORE_PARAM, NAME_PARAM],
        errors=DB_ERRORS,
    )
    def get(self, request, store, lookup_name):
        return Response(ObjectSerializer(actions.get_object(lookup_name, store=store)).data)

    @doc(
        "Update an administered object",
        ObjectSerializer,
        request=ObjectUpdateSerializer,
        params=[STORE_PARAM, NAME_PARAM],
        errors=DB_ERRORS,
    )
    def patch(self, request, store, lookup_name):
        d = self.body(ObjectUpdateSerializer)
        obj = actions.update_object(
            self.actor,
            lookup_name,
            attributes=d.get("attributes"),
            read_only=d.get("read_only"),
            store=store,
        )
        return Response(ObjectSerializer(obj).data)

    @doc(
        "Delete an administered object",
        None,
        code=204,
        params=[STORE_PARAM, NAME_PARAM],
        errors=DB_ERRORS,
    )
    def delete(self, request, store, lookup_name):
        actions.delete_object(self.actor, lookup_name, store=store)
        return Response(status=status.HTTP_204_NO_CONTENT)


class StoreListView(RowListView):
    @doc("List object stores", StoreSerializer(many=True), errors=DB_ERRORS)
    def get(self, request):
        return self.page(actions.list_stores(), StoreSerializer)

    @doc(
        "Add an object store",
        StoreSerializer,
        code=201,
        request=StoreCreateSerializer,
        errors=DB_ERRORS,
    )
    def post(self, request):
        d = self.body(StoreCreateSerializer)
        store = actions.create_store(self.actor, d["name"], d["properties"])
        return Response(StoreSerializer(store).data, status=status.HTTP_201_CREATED)


class StoreView(AdminView):
    @doc("Query an object store", StoreSerializer, params=[STORE_PARAM], errors=DB_ERRORS)
    def get(self, request, store):
        return Response(StoreSerializer(actions.get_store(store)).data)

    @doc("Delete an empty object store", None, code=204, params=[STORE_PARAM], errors=DB_ERRORS)
    def delete(self, request, store):
        actions.delete_store(self.actor, store)
        return Response(status=status.HTTP_204_NO_CONTENT)
