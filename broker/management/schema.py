"""Whether the broker's database needs ``migrate``, known without loading the migrations.

A broker runs ``migrate`` at every start so that the embedded default comes up on a fresh
checkout; on a database that is already current that no-op still imports every migration
module, builds their graph and renders the models' historical state (a tenth of a broker's
start-up CPU).  :func:`migrate` skips that when every migration file of every installed app
is recorded applied, and sends the pre- and post-migrate signals as a no-op ``migrate``
does (their receivers, e.g. the content types and permissions, see nothing to plan).
"""

from __future__ import annotations

import importlib.util
import pkgutil

from django.apps import apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections


def migration_files() -> set[tuple[str, str]] | None:
    """(app label, migration name) of every installed app's migration files, named as
    Django's MigrationLoader names them; None where that is not known from file names
    alone (MIGRATION_MODULES set: migrate decides)."""
    if getattr(settings, "MIGRATION_MODULES", None):
        return None
    found: set[tuple[str, str]] = set()
    for app in apps.get_app_configs():
        spec = importlib.util.find_spec(f"{app.name}.migrations")
        if spec is None or not spec.submodule_search_locations:
            continue
        found.update(
            (app.label, name)
            for _, name, is_pkg in pkgutil.iter_modules(spec.submodule_search_locations)
            if not is_pkg and name[0] not in "_~"
        )
    return found


def applied(using: str = DEFAULT_DB_ALIAS) -> set[tuple[str, str]]:
    """What django_migrations records applied (empty without the table)."""
    try:
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT app, name FROM django_migrations")
            return {(app, name) for app, name in cursor.fetchall()}
    except DatabaseError:
        return set()


def is_current(using: str = DEFAULT_DB_ALIAS) -> bool:
    """True when ``migrate`` would apply nothing on ``using``."""
    files = migration_files()
    return files is not None and files <= applied(using)


def migrate(using: str = DEFAULT_DB_ALIAS) -> None:
    """``manage.py migrate --noinput -v 0`` on ``using``, without its cost when the
    database is current."""
    if not is_current(using):
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0, database=using)
        return
    from django.core.management.sql import emit_post_migrate_signal, emit_pre_migrate_signal

    emit_pre_migrate_signal(0, False, using, apps=apps, plan=[])
    emit_post_migrate_signal(0, False, using, apps=apps, plan=[])
