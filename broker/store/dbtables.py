"""The database store's tables: which they are, whether they exist, and their DDL.

``manage.py migrate`` creates them with the rest of the project's schema; ``imqdbmgr``
deletes and creates them again (OpenMQ's ``delete tbl``, ``create tbl``), after which
the migrations still count as applied, so a broker whose store finds them missing
creates them itself when ``imq.persist.storecreate.all`` is true (OpenMQ's default) and
refuses to start otherwise.  The DDL is Django's own for the models (the schema
editor's SQL, collected rather than run), executed in one transaction of ours: on
SQLite the schema editor cannot run inside a transaction, and imqdbmgr must check in
the same transaction that no broker holds the store.
"""

from __future__ import annotations

from django.db import connections, transaction

from broker import models as m
from broker.config import ConfigError

# The store's tables (OpenMQ's MQ*41 tables): the owner (lock and heartbeat) row of each
# broker instance, then the stored data.
STORE_MODELS: tuple[type, ...] = (
    m.StoreOwner,
    m.StoredDestination,
    m.StoredDurable,
    m.StoredMessage,
    m.StoredInterest,
    m.StoredTransaction,
    m.StoredTxnWork,
)

# The tables of stored data (every row names its broker instance).
DATA_MODELS: tuple[type, ...] = STORE_MODELS[1:]

# OpenMQ's words (BrokerResources B3132, B3213, B3210, B3211).
NO_TABLES = (
    "No database table exists. Use imqdbmgr to create the database tables before"
    " running the broker."
)
MISSING_TABLES = "Persistent store might be corrupted: one or more database tables are missing"
ALREADY_CREATED = "Database tables have already been created."
ALREADY_DELETED = "Database tables have already been deleted."


class StoreTablesMissing(ConfigError):
    """The store's tables are not there (and are not to be created): the broker does not
    start."""


def table_names() -> list[str]:
    return [model._meta.db_table for model in STORE_MODELS]


def status(using: str = "default") -> tuple[list[str], list[str]]:
    """(present, missing) store tables."""
    with connections[using].cursor() as cursor:
        existing = set(connections[using].introspection.table_names(cursor))
    names = table_names()
    return [n for n in names if n in existing], [n for n in names if n not in existing]


def exists(using: str = "default") -> int:
    """1 when every store table exists, 0 when none does, -1 when some are missing
    (OpenMQ's ``checkStoreExists``)."""
    present, missing = status(using)
    if not missing:
        return 1
    return 0 if not present else -1


def _ddl(using: str, models: list[type], *, create: bool) -> list[str]:
    """The SQL that creates (or drops) ``models``' tables, indexes and constraints."""
    conn = connections[using]
    with conn.schema_editor(collect_sql=True, atomic=False) as editor:
        for model in models:
            if create:
                editor.create_model(model)
            else:
                editor.delete_model(model)
    return [sql.rstrip().rstrip(";") for sql in editor.collected_sql]


def _models(names: list[str]) -> list[type]:
    return [model for model in STORE_MODELS if model._meta.db_table in names]


def create_sql(using: str, names: list[str]) -> list[str]:
    return _ddl(using, _models(names), create=True)


def drop_sql(using: str, names: list[str]) -> list[str]:
    # The data first, the owner rows last (the reverse of creation).
    return _ddl(using, list(reversed(_models(names))), create=False)


def run(using: str, statements: list[str]) -> None:
    """Execute DDL statements in the caller's transaction."""
    with connections[using].cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def ensure(using: str = "default", *, create: bool) -> list[str]:
    """Before a broker uses the store: create its tables when none exists and
    ``create`` (``imq.persist.storecreate.all``) says so; returns the tables created.
    Raises :class:`StoreTablesMissing` (OpenMQ's message) when they are missing and are
    not to be created, or when only some are missing (a store that lost tables is not
    one to run on: ``imqdbmgr recreate tbl``)."""
    present, missing = status(using)
    if not missing:
        return []
    if present:
        raise StoreTablesMissing(
            f"{MISSING_TABLES} ({', '.join(missing)}); delete and create them again with"
            " `manage.py imqdbmgr recreate tbl` (the stored data goes) or restore a backup"
        )
    if not create:
        raise StoreTablesMissing(f"{NO_TABLES} (imq.persist.storecreate.all=false)")
    statements = create_sql(using, missing)
    with transaction.atomic(using=using):
        if exists(using) == 0:  # another broker may have just made them
            run(using, statements)
    return missing


__all__ = [
    "ALREADY_CREATED",
    "DATA_MODELS",
    "ALREADY_DELETED",
    "MISSING_TABLES",
    "NO_TABLES",
    "STORE_MODELS",
    "StoreTablesMissing",
    "create_sql",
    "drop_sql",
    "ensure",
    "exists",
    "run",
    "status",
    "table_names",
]
