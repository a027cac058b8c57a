"""Administered objects and their object stores as sections of the definitions document
(:mod:`broker.admintools.definitions` finds this module and registers them).

``object_stores``: each store's name and ``java.naming.*`` properties, never the
credentials (``java.naming.security.credentials``: give them again on the importing side
before objects are published there).  ``administered_objects``: each object's store,
lookup name, type, read-only flag and attributes.  An import creates the missing stores
and adds or replaces objects through :mod:`portal.objects.actions`, so they are published
to their store as ``imqobjmgr add -f`` would; what a store already published is outside
the import's database transaction.
"""

from __future__ import annotations

from typing import Any

from broker.admintools.actions import ActionError
from broker.admintools.broker_handle import BrokerAdmin
from broker.admintools.definitions import Change, Section, register_section

from . import actions
from .attributes import InvalidAttribute, resolve_type, validate_attributes
from .models import AdministeredObject, ObjectStore


def _store_props(store: ObjectStore) -> dict[str, str]:
    props = {k: v for k, v in store.properties.items() if k != actions.SECRET_KEY}
    if store.factory_initial:
        props[actions.FACTORY_KEY] = store.factory_initial
    if store.provider_url:
        props[actions.URL_KEY] = store.provider_url
    return dict(sorted(props.items()))


def _export_stores(admin: BrokerAdmin) -> list[dict[str, Any]]:
    return [
        {"name": s.name, "properties": _store_props(s)}
        for s in ObjectStore.objects.order_by("name")
        if s.factory_initial  # the database-only default store needs no definition
    ]


def _plan_stores(value: Any, admin: BrokerAdmin, errors: list[str]) -> list[Change]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        errors.append("object_stores: must be a list of objects")
        return []
    existing = {s.name: s for s in ObjectStore.objects.all()}
    changes = []
    for n, item in enumerate(value):
        name, props = item.get("name"), item.get("properties", {})
        if not isinstance(name, str) or not name.strip() or not isinstance(props, dict):
            errors.append(f"object_stores[{n}]: a name and an object of properties are needed")
            continue
        name = name.strip()
        try:
            actions._clean_store_props(props)
        except ActionError as exc:
            errors.append(f"object_stores[{n}] {name}: {exc}")
            continue
        old = existing.get(name)
        if old is None:
            changes.append(Change("object_stores", "create", name, "", {"properties": props}))
        elif _store_props(old) != {k: v for k, v in props.items() if k != actions.SECRET_KEY}:
            errors.append(
                f"object_stores[{n}] {name}: a store of that name exists with other "
                "properties (delete or rename it first)"
            )
        else:
            changes.append(Change("object_stores", "unchanged", name))
    return changes


def _apply_stores(changes: list[Change], admin: BrokerAdmin, actor: str) -> None:
    for c in changes:
        if c.op == "create":
            actions.create_store(actor, c.name, c.data["properties"])


def _export_objects(admin: BrokerAdmin) -> list[dict[str, Any]]:
    return [
        {
            "store": o.store.name,
            "lookup_name": o.lookup_name,
            "type": o.obj_type,
            "read_only": o.read_only,
            "attributes": dict(sorted(o.attributes.items())),
        }
        for o in AdministeredObject.objects.select_related("store").order_by(
            "store__name", "lookup_name"
        )
    ]


def _plan_objects(value: Any, admin: BrokerAdmin, errors: list[str]) -> list[Change]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        errors.append("administered_objects: must be a list of objects")
        return []
    existing = {
        (o.store.name, o.lookup_name): o for o in AdministeredObject.objects.select_related("store")
    }
    changes = []
    for n, item in enumerate(value):
        where = f"administered_objects[{n}]"
        store = item.get("store", actions.DEFAULT_STORE)
        name = item.get("lookup_name")
        read_only = item.get("read_only", False)
        if not isinstance(store, str) or not isinstance(name, str) or not name.strip():
            errors.append(f"{where}: a store and a lookup_name (text) are needed")
            continue
        if not isinstance(read_only, bool):
            errors.append(f"{where} {name}: read_only must be true or false")
            continue
        try:
            kind = resolve_type(str(item.get("type", "")))
            attrs = validate_attributes(kind, item.get("attributes", {}))
        except InvalidAttribute as exc:
            errors.append(f"{where} {name}: {exc}")
            continue
        old = existing.get((store, name))
        label = f"{store}: {name}"
        data: dict[str, Any] = {
            "store": store,
            "name": name,
            "type": kind.code,
            "attributes": attrs,
        }
        data["read_only"] = read_only
        if old is None:
            changes.append(Change("administered_objects", "create", label, kind.label, data))
        elif (old.obj_type, old.attributes, old.read_only) == (kind.code, attrs, read_only):
            changes.append(Change("administered_objects", "unchanged", label))
        else:
            changes.append(Change("administered_objects", "update", label, kind.label, data))
    return changes


def _apply_objects(changes: list[Change], admin: BrokerAdmin, actor: str) -> None:
    for c in changes:
        if c.op == "unchanged":
            continue
        d = c.data
        actions.add_object(
            actor,
            d["name"],
            d["type"],
            d["attributes"],
            read_only=d["read_only"],
            store=d["store"],
            overwrite=True,
        )


register_section(Section("object_stores", _export_stores, _plan_stores, _apply_stores))
register_section(Section("administered_objects", _export_objects, _plan_objects, _apply_objects))
