"""Administered objects: the one write path for ``manage.py imqobjmgr``, the REST API and
the portal's pages.

An object lives in an object store, named as imqobjmgr names it with ``-j``:
``java.naming.factory.initial`` and ``java.naming.provider.url`` (plus
``java.naming.security.*`` to publish).  Every change is checked first (type, lookup name,
attribute names and values), then saved in the database and published to the store in
one database transaction: if the store refuses, the database is left as it was.  Each
change is recorded in the audit log with who made it and announced to the live pages
(:func:`broker.admintools.actions.record_change`).

Errors: :class:`~broker.admintools.actions.ActionError` (bad input or a store that refused),
:class:`NotFound`, :class:`Conflict` (it exists already, or the type does not match).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from broker.admintools import security_actions
from broker.admintools.actions import ActionError, record_change

from . import stores
from .attributes import (
    TYPES,
    InvalidAttribute,
    ObjType,
    defaults_for,
    reference,
    resolve_type,
    validate_attributes,
)
from .models import AdministeredObject, ObjectStore

__all__ = [
    "DEFAULT_STORE",
    "Conflict",
    "NotFound",
    "add_object",
    "create_store",
    "delete_object",
    "delete_store",
    "get_object",
    "get_store",
    "list_objects",
    "list_stores",
    "object_dict",
    "objects_queryset",
    "store_dict",
    "update_object",
]

DEFAULT_STORE = "default"
FACTORY_KEY = "java.naming.factory.initial"
URL_KEY = "java.naming.provider.url"
SECRET_KEY = "java.naming.security.credentials"
MAX_LOOKUP_NAME = 500


class NotFound(security_actions.NotFound):
    """No such object or store; nothing was changed."""


class Conflict(security_actions.Conflict):
    """The object exists already, or the change is refused as it stands."""


# --------------------------------------------------------------------------------------
# Object stores
# --------------------------------------------------------------------------------------


def _clean_store_props(props: Mapping[str, Any] | None) -> tuple[str, str, dict[str, str]]:
    if props is None:
        props = {}
    if not isinstance(props, Mapping):
        raise ActionError("object store properties must be name=value pairs")
    clean: dict[str, str] = {}
    for key, value in props.items():
        key = str(key).strip()
        if not key.startswith("java.naming."):
            raise ActionError(
                f"{key!r} is not an object store property (java.naming.factory.initial, "
                "java.naming.provider.url, java.naming.security.*, ...)"
            )
        if not isinstance(value, str) or any(c in value for c in "\x00\r\n"):
            raise ActionError(f"{key}: the value must be one line of text")
        clean[key] = value.strip() if key != SECRET_KEY else value
    factory = clean.pop(FACTORY_KEY, "")
    url = clean.pop(URL_KEY, "")
    if not factory and url:
        raise ActionError(f"{URL_KEY} is given without {FACTORY_KEY}")
    try:
        stores.check_store(factory, url)
    except stores.StoreError as exc:
        raise ActionError(str(exc)) from None
    return factory, url, clean


def store_dict(store: ObjectStore) -> dict[str, Any]:
    """A store as the pages and the API show it (the credentials never)."""
    props = {k: v for k, v in store.properties.items() if k != SECRET_KEY}
    return {
        "name": store.name,
        "factory_initial": store.factory_initial,
        "provider_url": store.provider_url,
        "properties": props,
        "has_credentials": bool(store.properties.get(SECRET_KEY)),
        "objects": store.admin_objects.count(),
    }


def list_stores() -> list[dict[str, Any]]:
    _default_store()
    return [store_dict(s) for s in ObjectStore.objects.order_by("name")]


def _default_store() -> ObjectStore:
    store, _ = ObjectStore.objects.get_or_create(
        factory_initial="", provider_url="", defaults={"name": DEFAULT_STORE}
    )
    return store


def _store_by_name(name: str) -> ObjectStore:
    if name == DEFAULT_STORE:
        return _default_store()
    store = ObjectStore.objects.filter(name=name).first()
    if store is None:
        raise NotFound(f"object store {name!r} does not exist")
    return store


def get_store(name: str) -> dict[str, Any]:
    return store_dict(_store_by_name(name))


def create_store(actor: str, name: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """Register an object store under ``name`` from its ``java.naming.*`` properties."""
    name = str(name or "").strip()
    if not name or len(name) > 200 or any(c in name for c in "/\r\n\x00"):
        raise ActionError("a store name is required: at most 200 characters, no '/'")
    factory, url, rest = _clean_store_props(properties)
    if ObjectStore.objects.filter(name=name).exists():
        raise Conflict(f"object store {name!r} already exists")
    if ObjectStore.objects.filter(factory_initial=factory, provider_url=url).exists():
        raise Conflict(f"an object store for {factory or 'the database'} {url} exists already")
    try:
        store = ObjectStore.objects.create(
            name=name, factory_initial=factory, provider_url=url, properties=rest
        )
    except IntegrityError:
        raise Conflict(f"object store {name!r} already exists") from None
    record_change(
        actor,
        f"added object store {name} ({factory or 'database only'} {url})".rstrip(),
        {"type": "object_store", "op": "create", "name": name},
    )
    return store_dict(store)


def delete_store(actor: str, name: str) -> None:
    """Forget an object store that holds no objects (what it published stays there)."""
    store = _store_by_name(name)
    if store.admin_objects.exists():
        raise Conflict(f"object store {name!r} still holds objects: delete them first")
    store.delete()
    record_change(
        actor,
        f"deleted object store {name}",
        {"type": "object_store", "op": "delete", "name": name},
    )


def _store_name(url: str) -> str:
    """A name for a store registered from -j: its URL without "/" (store names go in
    URL paths), made unique."""
    base = re.sub(r":+", ":", url.replace("/", ":")).strip(":")[:190] or "store"
    name, n = base, 1
    while ObjectStore.objects.filter(name=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def resolve_store(
    store: str | Mapping[str, Any] | None,
    *,
    create: bool = False,
    refresh: bool = False,
) -> ObjectStore:
    """The store named ``store``, or the one imqobjmgr's -j properties ``store`` name
    (registered if new when ``create``; with ``refresh`` the security properties given
    replace the stored ones, as the credentials a change is made with)."""
    if store is None:
        return _default_store()
    if isinstance(store, str):
        return _store_by_name(store)
    factory, url, rest = _clean_store_props(store)
    if not factory:
        return _default_store()
    found = ObjectStore.objects.filter(factory_initial=factory, provider_url=url).first()
    if found is None:
        if not create:
            raise NotFound(f"no object store {factory} {url} is known")
        found = ObjectStore.objects.create(
            name=_store_name(url), factory_initial=factory, provider_url=url, properties=rest
        )
        found.just_added = True  # recorded by the caller once its change succeeded
    elif (create or refresh) and rest and rest != found.properties:
        found.properties = {**found.properties, **rest}
        found.save(update_fields=["properties", "updated"])
    return found


# --------------------------------------------------------------------------------------
# Objects
# --------------------------------------------------------------------------------------


def object_dict(obj: AdministeredObject) -> dict[str, Any]:
    """An object as the pages, the API and ``imqobjmgr query`` show it."""
    obj_type = TYPES[obj.obj_type]
    class_name, factory, _ = reference(obj_type, obj.attributes, obj.read_only)
    return {
        "lookup_name": obj.lookup_name,
        "type": obj.obj_type,
        "type_label": obj_type.label,
        "class_name": class_name,
        "factory": factory,
        "read_only": obj.read_only,
        "store": obj.store.name,
        "attributes": dict(obj.attributes),
        "effective": {**defaults_for(obj_type), **obj.attributes},
        "created": obj.created,
        "updated": obj.updated,
    }


def objects_queryset(
    *, store: str | None = None, obj_type: str | None = None, search: str | None = None
):
    qs = AdministeredObject.objects.select_related("store").order_by("store__name", "lookup_name")
    if store:
        qs = qs.filter(store__name=store)
    if obj_type:
        qs = qs.filter(obj_type=_type(obj_type).code)
    if search:
        qs = qs.filter(lookup_name__icontains=search)
    return qs


def list_objects(
    *, store: str | Mapping[str, Any] | None = None, obj_type: str | None = None
) -> list[dict[str, Any]]:
    """The objects of ``store`` (a name, or -j properties), optionally of one type."""
    qs = AdministeredObject.objects.select_related("store").filter(store=resolve_store(store))
    if obj_type:
        qs = qs.filter(obj_type=_type(obj_type).code)
    return [object_dict(o) for o in qs.order_by("lookup_name")]


def _type(value: str) -> ObjType:
    try:
        return resolve_type(value)
    except InvalidAttribute as exc:
        raise ActionError(str(exc)) from None


def _clean_name(lookup_name: str) -> str:
    if not isinstance(lookup_name, str) or not lookup_name.strip():
        raise ActionError("a lookup name is required (-l)")
    name = lookup_name.strip()
    if len(name) > MAX_LOOKUP_NAME or any(c in name for c in "\r\n\x00"):
        raise ActionError(f"a lookup name has at most {MAX_LOOKUP_NAME} characters, one line")
    return name


def _attrs(obj_type: ObjType, attrs: Mapping[str, Any] | None) -> dict[str, str]:
    try:
        return validate_attributes(obj_type, attrs or {})
    except InvalidAttribute as exc:
        raise ActionError(str(exc)) from None


def _object(store: ObjectStore, name: str) -> AdministeredObject:
    obj = (
        AdministeredObject.objects.select_related("store")
        .filter(store=store, lookup_name=name)
        .first()
    )
    if obj is None:
        raise NotFound(f"no object with lookup name {name!r} in object store {store.name}")
    return obj


def get_object(
    lookup_name: str, *, store: str | Mapping[str, Any] | None = None, obj_type: str | None = None
) -> dict[str, Any]:
    obj = _object(resolve_store(store), _clean_name(lookup_name))
    if obj_type and _type(obj_type).code != obj.obj_type:
        raise NotFound(f"{obj.lookup_name} is a {TYPES[obj.obj_type].label}, not a {obj_type}")
    return object_dict(obj)


def _publish(obj: AdministeredObject) -> None:
    store = obj.store
    try:
        stores.publish(
            store.factory_initial,
            store.provider_url,
            store.properties,
            obj.lookup_name,
            reference(TYPES[obj.obj_type], obj.attributes, obj.read_only),
        )
    except stores.StoreError as exc:
        raise ActionError(str(exc)) from None


def _check_name_for(store: ObjectStore, name: str) -> None:
    try:
        stores.check_name(store.factory_initial, name)
    except stores.StoreError as exc:
        raise ActionError(str(exc)) from None


def _describe(obj: AdministeredObject, attrs: Mapping[str, str]) -> str:
    shown = ", ".join(
        f"{k}={'********' if k == 'imqDefaultPassword' else v}" for k, v in attrs.items()
    )
    ro = " read-only" if obj.read_only else ""
    return f"{TYPES[obj.obj_type].label}{ro} {obj.lookup_name} in {obj.store.name}" + (
        f" ({shown})" if shown else ""
    )


def add_object(
    actor: str,
    lookup_name: str,
    obj_type: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    read_only: bool = False,
    store: str | Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Add an object (imqobjmgr add); an existing one is replaced only with
    ``overwrite`` (imqobjmgr's "overwrite? (y/n)" answered y, or -f)."""
    kind = _type(obj_type)
    name = _clean_name(lookup_name)
    attrs = _attrs(kind, attributes)
    with transaction.atomic():
        where = resolve_store(store, create=True)
        _check_name_for(where, name)
        obj = AdministeredObject.objects.filter(store=where, lookup_name=name).first()
        if obj is not None and not overwrite:
            raise Conflict(
                f"an object with lookup name {name!r} exists already in object store {where.name}"
            )
        if obj is None:
            obj = AdministeredObject(store=where, lookup_name=name)
        obj.obj_type = kind.code
        obj.attributes = attrs
        obj.read_only = bool(read_only)
        obj.save()
        _publish(obj)
    if getattr(where, "just_added", False):
        record_change(
            actor,
            f"added object store {where.name} ({where.factory_initial} {where.provider_url})",
            {"type": "object_store", "op": "create", "name": where.name},
        )
    record_change(
        actor,
        f"added {_describe(obj, attrs)}",
        {"type": "administered_object", "op": "create", "name": name, "store": where.name},
    )
    return object_dict(obj)


def update_object(
    actor: str,
    lookup_name: str,
    *,
    attributes: Mapping[str, Any] | None = None,
    read_only: bool | None = None,
    obj_type: str | None = None,
    store: str | Mapping[str, Any] | None = None,
    replace: bool = False,
) -> dict[str, Any]:
    """Change an object's attributes (merged, or all of them with ``replace``) and/or its
    read-only flag (imqobjmgr update); ``obj_type``, when given, must be its type."""
    name = _clean_name(lookup_name)
    if attributes is None and read_only is None:
        raise ActionError("nothing to change: give attributes (-o) or read-only (-r)")
    with transaction.atomic():
        obj = _object(resolve_store(store, refresh=True), name)
        kind = TYPES[obj.obj_type]
        if obj_type and _type(obj_type).code != kind.code:
            raise Conflict(f"{name} is a {kind.label}, not a {_type(obj_type).label}")
        changes = _attrs(kind, attributes)
        obj.attributes = changes if replace else {**obj.attributes, **changes}
        if read_only is not None:
            obj.read_only = bool(read_only)
        obj.save()
        _publish(obj)
    record_change(
        actor,
        f"updated {_describe(obj, changes)}",
        {"type": "administered_object", "op": "update", "name": name, "store": obj.store.name},
    )
    return object_dict(obj)


def delete_object(
    actor: str,
    lookup_name: str,
    *,
    obj_type: str | None = None,
    store: str | Mapping[str, Any] | None = None,
) -> None:
    """Delete an object from the database and its store (imqobjmgr delete)."""
    name = _clean_name(lookup_name)
    with transaction.atomic():
        obj = _object(resolve_store(store, refresh=True), name)
        kind = TYPES[obj.obj_type]
        if obj_type and _type(obj_type).code != kind.code:
            raise Conflict(f"{name} is a {kind.label}, not a {_type(obj_type).label}")
        where = obj.store
        obj.delete()
        try:
            stores.unpublish(where.factory_initial, where.provider_url, where.properties, name)
        except stores.StoreError as exc:
            raise ActionError(str(exc)) from None
    record_change(
        actor,
        f"deleted {kind.label} {name} from {where.name}",
        {"type": "administered_object", "op": "delete", "name": name, "store": where.name},
    )
