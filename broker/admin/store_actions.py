"""The database store's maintenance (``manage.py imqdbmgr``), as actions: each does its
work through :mod:`broker.store.dbmgr` and, when it changed the store, records who did
what in the audit log (``record_change``)."""

from __future__ import annotations

from pathlib import Path

from broker.store import dbmgr

from .actions import record_change

__all__ = [
    "backup",
    "create_all",
    "create_tables",
    "delete_tables",
    "recreate_tables",
    "remove_broker",
    "reset_lock",
    "restore",
]


def _event(op: str, **fields: object) -> dict[str, object]:
    return {"type": "store", "op": op, **fields}


def create_all(actor: str, using: str = "default") -> list[str]:
    tables = dbmgr.create_all(using)
    record_change(actor, "created the database and the store's tables", _event("create"))
    return tables


def create_tables(actor: str, using: str = "default") -> list[str]:
    tables = dbmgr.create_tables(using)
    record_change(
        actor, f"created the store's tables {', '.join(tables)}", _event("create", tables=tables)
    )
    return tables


def delete_tables(actor: str, using: str = "default") -> list[str]:
    tables = dbmgr.delete_tables(using)
    record_change(
        actor, f"deleted the store's tables {', '.join(tables)}", _event("delete", tables=tables)
    )
    return tables


def recreate_tables(actor: str, using: str = "default") -> list[str]:
    tables = dbmgr.recreate_tables(using)
    record_change(actor, "deleted and created the store's tables", _event("recreate"))
    return tables


def reset_lock(actor: str, instance: str, using: str = "default") -> str:
    said = dbmgr.reset_lock(using, instance)
    if "has been reset" in said:
        record_change(
            actor,
            f"reset the store lock of broker instance {instance}",
            _event("reset_lock", instance=instance),
        )
    return said


def remove_broker(actor: str, instance: str, using: str = "default") -> dict[str, int]:
    counts = dbmgr.remove_broker(using, instance)
    record_change(
        actor,
        f"removed broker {instance} and its rows from the store ({_said(counts)})",
        _event("remove_broker", instance=instance, **counts),
    )
    return counts


def backup(actor: str, directory: Path, using: str = "default") -> dict[str, dict[str, int]]:
    done = dbmgr.backup(using, directory)
    record_change(
        actor,
        f"backed the store up to {directory} ({len(done)} broker instance(s))",
        _event("backup", directory=str(directory), instances=sorted(done)),
    )
    return done


def restore(actor: str, directory: Path, using: str = "default") -> dict[str, dict[str, int]]:
    done = dbmgr.restore(using, directory)
    record_change(
        actor,
        f"restored the store from {directory} ({len(done)} broker instance(s))",
        _event("restore", directory=str(directory), instances=sorted(done)),
    )
    return done


def _said(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {what}" for what, n in counts.items())
