"""What ``manage.py imqdbmgr`` does to the database store (OpenMQ's ``imqdbmgr``).

The store's tables (:mod:`.dbtables`) are shared by every broker instance that uses the
database; ``create``/``delete``/``recreate tbl`` act on all of them, ``backup`` and
``restore`` move every instance's rows, ``reset lck`` and ``remove bkr`` one instance's.

A broker *holds* the store while its owner row (:mod:`.ownership`) says it is running:
it claims the row at start and releases it at a clean stop, as OpenMQ's broker locks its
tables.  Whatever changes the store is refused while any broker holds it, in the same
transaction that makes the change and holds the owner rows (``SELECT ... FOR UPDATE``;
on SQLite the database's write lock), so a broker starting meanwhile waits for it.  A
broker that crashed leaves its row running: once its heartbeat is stale, ``reset lck``
releases it (and moves its epoch on, so should that broker only have been stalled it
stops at its next heartbeat instead of writing on); a fresh heartbeat is a live broker,
never unlocked.

A backup is a directory holding one file store per broker instance (as OpenMQ backs its
JDBC store up to file-store directories), ``<dir>/<instance>/``, and
:data:`BACKUP_MARK` listing them; such a directory is also a file store a broker can run
on (``imq.persist.file.dirpath``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, unquote

from django.db import connections, transaction
from django.utils import timezone

from broker import models as m
from broker.config import format_properties, parse_properties

from . import dbtables, ownership
from .base import RecoveredState, records_of
from .dbread import read_state
from .dbstore import DatabaseStore
from .filestore import FileStore

log = logging.getLogger("broker.store")

BACKUP_MARK = "imqdbmgr-backup.properties"
_MARK_INSTANCES = "imqdbmgr.backup.instances"


class DbMgrError(Exception):
    """An imqdbmgr operation that cannot be done; nothing was changed."""


class StoreInUse(DbMgrError):
    """A broker holds the store (or held it and did not release it)."""


def database_url(using: str = "default") -> str:
    """The database as a URL without its password (for messages)."""
    conn = connections[using]
    cfg = conn.settings_dict
    if conn.vendor == "sqlite":
        return f"sqlite:///{cfg.get('NAME')}"
    host = cfg.get("HOST") or "localhost"
    port = f":{cfg['PORT']}" if cfg.get("PORT") else ""
    user = f"{cfg['USER']}@" if cfg.get("USER") else ""
    return f"{conn.vendor}://{user}{host}{port}/{cfg.get('NAME')}"


# -- who holds the store ----------------------------------------------------------------


@dataclass
class Holder:
    """A broker instance whose owner row says running."""

    instance: str
    address: str
    pid: int | None
    age: float | None  # seconds since its last heartbeat (None: never beat)
    stale: bool  # no heartbeat for stale_beats of its intervals: it looks dead

    def describe(self) -> str:
        where = self.address or "an unknown address"
        beat = "never beat" if self.age is None else f"last heartbeat {self.age:.1f} s ago"
        text = (
            "Failed to lock database tables. The tables are currently locked by the"
            f" broker running on {where} (instance {self.instance}, pid {self.pid}, {beat})."
        )
        if self.stale:
            return (
                f"{text} If you are certain that broker is no longer running, unlock them"
                f" with `manage.py imqdbmgr reset lck -b {self.instance}`."
            )
        return f"{text} Stop that broker first."


def holders(
    using: str = "default",
    *,
    instances: list[str] | None = None,
    lock: bool = False,
    stale_beats: float = ownership.DEFAULT_STALE_BEATS,
) -> list[Holder]:
    """The broker instances holding the store (``lock``: and hold their rows until the
    caller's transaction ends)."""
    if m.StoreOwner._meta.db_table not in dbtables.status(using)[0]:
        return []
    rows = m.StoreOwner.objects.using(using).filter(state=m.StoreOwner.State.RUNNING)
    if instances is not None:
        rows = rows.filter(broker_instance__in=instances)
    if lock:
        rows = rows.select_for_update()
    now = timezone.now()
    out = []
    for row in rows.order_by("broker_instance"):
        age = None if row.heartbeat is None else (now - row.heartbeat).total_seconds()
        out.append(
            Holder(
                row.broker_instance,
                row.address,
                row.pid,
                age,
                ownership.unowned(row, stale_beats=stale_beats, now=now),
            )
        )
    return out


@contextmanager
def _unheld(using: str, instances: list[str] | None = None) -> Iterator[None]:
    """A transaction in which no broker holds the store (or those ``instances``')."""
    with transaction.atomic(using=using):
        held = holders(using, instances=instances, lock=True)
        if held:
            raise StoreInUse("\n".join(h.describe() for h in held))
        yield


# -- tables ---------------------------------------------------------------------------


def create_tables(using: str = "default") -> list[str]:
    """``create tbl``: the store's missing tables (all, or those a partial store lacks)."""
    _present, missing = dbtables.status(using)
    if not missing:
        raise DbMgrError(dbtables.ALREADY_CREATED)
    statements = dbtables.create_sql(using, missing)
    with transaction.atomic(using=using):
        dbtables.run(using, statements)
    return missing


def create_all(using: str = "default") -> list[str]:
    """``create all``: the database's whole schema (``manage.py migrate``, which makes a
    SQLite database file), then the store's tables if they were deleted since."""
    from django.core.management import call_command

    before = dbtables.exists(using) if _reachable(using) else 0
    call_command("migrate", database=using, interactive=False, verbosity=0)
    if before == 1:
        raise DbMgrError(dbtables.ALREADY_CREATED)
    _present, missing = dbtables.status(using)
    if missing:
        return create_tables(using)
    return dbtables.table_names()


def _reachable(using: str) -> bool:
    """Whether the database can be opened (a SQLite file that does not exist yet can)."""
    try:
        connections[using].ensure_connection()
    except Exception:
        return False
    return True


def delete_tables(using: str = "default") -> list[str]:
    """``delete tbl``: drop the store's tables (every instance's rows go with them)."""
    present, _missing = dbtables.status(using)
    if not present:
        raise DbMgrError(dbtables.ALREADY_DELETED)
    statements = dbtables.drop_sql(using, present)
    with _unheld(using):
        dbtables.run(using, statements)
    return present


def recreate_tables(using: str = "default") -> list[str]:
    """``recreate tbl``: drop whatever store tables exist and create them all, empty."""
    present, _missing = dbtables.status(using)
    statements = dbtables.drop_sql(using, present) + dbtables.create_sql(
        using, dbtables.table_names()
    )
    with _unheld(using):
        dbtables.run(using, statements)
    return dbtables.table_names()


# -- one instance ---------------------------------------------------------------------


def reset_lock(using: str, instance: str) -> str:
    """``reset lck``: release the owner row of a broker that stopped without releasing
    it (a crash); a broker whose heartbeat is fresh is running and keeps it.  Returns
    what was done."""
    with transaction.atomic(using=using):
        _need_tables(using)
        row = (
            m.StoreOwner.objects.using(using)
            .select_for_update()
            .filter(broker_instance=instance)
            .first()
        )
        if row is None:
            return f"Broker instance {instance} has no lock in the store: nothing to reset."
        if row.state == m.StoreOwner.State.STOPPED:
            return f"Broker instance {instance} does not hold the store: nothing to reset."
        (held,) = holders(using, instances=[instance])
        if not held.stale:
            raise StoreInUse(held.describe())
        row.state = m.StoreOwner.State.STOPPED
        row.broker_state = m.BrokerState.SHUTDOWN_COMPLETE
        # Should that broker only have been stalled, its next heartbeat finds the epoch
        # moved on and it stops instead of writing on (ownership.beat).
        row.epoch += 1
        row.save(using=using)
    return f"The lock of broker instance {instance} (broker at {row.address}) has been reset."


def remove_broker(using: str, instance: str) -> dict[str, int]:
    """``remove bkr``: delete a broker instance's rows and its owner row (a broker
    taken out of a cluster for good); refused while it holds the store."""
    with _unheld(using, [instance]):
        _need_tables(using)
        counts = instance_counts(using, instance)
        known = m.StoreOwner.objects.using(using).filter(broker_instance=instance).exists()
        if not known and not any(counts.values()):
            raise DbMgrError(f"Broker {instance} has no rows in the store.")
        for model in dbtables.DATA_MODELS:
            model.objects.using(using).filter(broker_instance=instance).delete()
        m.StoreOwner.objects.using(using).filter(broker_instance=instance).delete()
    return counts


def _need_tables(using: str) -> None:
    state = dbtables.exists(using)
    if state == 0:
        raise DbMgrError(dbtables.NO_TABLES)
    if state < 0:
        raise DbMgrError(f"{dbtables.MISSING_TABLES}: `manage.py imqdbmgr recreate tbl`")


# -- what the store holds --------------------------------------------------------------


def instances(using: str = "default") -> list[str]:
    """Every broker instance with rows or an owner row in the store."""
    names: set[str] = set(
        m.StoreOwner.objects.using(using).values_list("broker_instance", flat=True)
    )
    for model in dbtables.DATA_MODELS:
        names.update(
            model.objects.using(using).values_list("broker_instance", flat=True).distinct()
        )
    return sorted(names)


def instance_counts(using: str, instance: str) -> dict[str, int]:
    """Destinations, durable subscriptions, messages and transactions of an instance
    (messages: those with an interest still open, as the broker would load them)."""
    rows = {
        model: model.objects.using(using).filter(broker_instance=instance)
        for model in (m.StoredDestination, m.StoredDurable, m.StoredTransaction)
    }
    held = m.StoredInterest.objects.using(using).filter(broker_instance=instance)
    return {
        "destinations": rows[m.StoredDestination].count(),
        "durables": rows[m.StoredDurable].count(),
        "messages": held.values("key").distinct().count(),
        "transactions": rows[m.StoredTransaction].count(),
    }


def state_counts(state: RecoveredState) -> dict[str, int]:
    return {
        "destinations": len(state.destinations),
        "durables": len(state.durables),
        "messages": len(state.messages),
        "transactions": len(state.transactions),
    }


@dataclass
class InstanceReport:
    name: str
    owner: str  # running, stopped, or "" (no owner row)
    address: str = ""
    age: float | None = None
    stale: bool = False
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class StoreReport:
    """``query``: the database, the store's tables and what each instance holds."""

    vendor: str
    database: str  # its URL, without a password
    exists: int  # 1 all tables, 0 none, -1 some missing
    tables: dict[str, int | None]  # table -> rows (None: missing)
    instances: list[InstanceReport]

    @property
    def status(self) -> str:
        """OpenMQ's words for the tables' state."""
        if self.exists > 0:
            return dbtables.ALREADY_CREATED
        return dbtables.NO_TABLES if self.exists == 0 else dbtables.MISSING_TABLES


def query(using: str = "default") -> StoreReport:
    conn = connections[using]
    present, _missing = dbtables.status(using)
    tables: dict[str, int | None] = {}
    for model in dbtables.STORE_MODELS:
        table = model._meta.db_table
        tables[table] = model.objects.using(using).count() if table in present else None
    exists = dbtables.exists(using)
    reports = []
    if exists == 1:
        running = {h.instance: h for h in holders(using)}
        owners = dict(m.StoreOwner.objects.using(using).values_list("broker_instance", "state"))
        for name in instances(using):
            report = InstanceReport(name, owners.get(name, ""))
            holder = running.get(name)
            if holder is not None:
                report.address, report.age, report.stale = holder.address, holder.age, holder.stale
            report.counts = instance_counts(using, name)
            reports.append(report)
    return StoreReport(conn.vendor, database_url(using), exists, tables, reports)


# -- backup and restore ---------------------------------------------------------------


def _dir_name(instance: str) -> str:
    return quote(instance, safe="").replace(".", "%2E")


def backup(using: str, directory: Path) -> dict[str, dict[str, int]]:
    """``backup -dir D``: every instance's rows, as one file store each under ``D``
    (which must be empty or new), read while no broker holds the store."""
    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise DbMgrError(f"Cancelling backup: {directory} exists and is not an empty directory.")
    _need_tables(using)
    done: dict[str, dict[str, int]] = {}
    with _unheld(using):
        names = instances(using)
        directory.mkdir(parents=True, exist_ok=True)
        for name in names:
            state = read_state(name, using=using)
            files = FileStore(directory / _dir_name(name), sync=True, preallocate=False)
            files.load()
            files.write_now(records_of(state))
            files.close()
            done[name] = state_counts(state)
    mark = {
        "imqdbmgr.backup.created": datetime.now(UTC).isoformat(timespec="seconds"),
        "imqdbmgr.backup.database": connections[using].vendor,
        _MARK_INSTANCES: ",".join(_dir_name(n) for n in names),
    }
    (directory / BACKUP_MARK).write_text(
        format_properties(mark, header="imqdbmgr backup: one file store per broker instance"),
        encoding="ascii",
    )
    return done


def read_backup(directory: Path) -> dict[str, RecoveredState]:
    """What a backup directory holds, by instance (nothing is changed)."""
    directory = Path(directory)
    mark = directory / BACKUP_MARK
    try:
        text = mark.read_text(encoding="ascii")
    except FileNotFoundError:
        raise DbMgrError(
            f"{directory} is not a backup made by imqdbmgr backup (no {BACKUP_MARK})"
        ) from None
    except OSError as exc:
        raise DbMgrError(f"cannot read {mark}: {exc}") from None
    listed = parse_properties(text).get(_MARK_INSTANCES, "")
    out: dict[str, RecoveredState] = {}
    for entry in filter(None, listed.split(",")):
        where = directory / entry
        if not where.is_dir():
            raise DbMgrError(f"the backup in {directory} lacks {where}")
        files = FileStore(where, sync=False, preallocate=False)
        try:
            state = files.load()
        finally:
            files.close()
        for repair in state.repairs:
            log.warning("backup of %s: %s", unquote(entry), repair)
        out[unquote(entry)] = state
    return out


def restore(using: str, directory: Path) -> dict[str, dict[str, int]]:
    """``restore -dir D``: each backed-up instance's rows replaced by the backup's (other
    instances are left alone); the store's tables are created if they were deleted."""
    states = read_backup(directory)
    present, missing = dbtables.status(using)
    if present and missing:
        raise DbMgrError(f"{dbtables.MISSING_TABLES}: `manage.py imqdbmgr recreate tbl` first")
    statements = dbtables.create_sql(using, missing) if missing else []
    with _unheld(using):
        dbtables.run(using, statements)
        for name, state in states.items():
            DatabaseStore(name, sync=True, using=using).replace_rows(state)
    return {name: state_counts(state) for name, state in states.items()}


__all__ = [
    "BACKUP_MARK",
    "DbMgrError",
    "Holder",
    "InstanceReport",
    "StoreInUse",
    "StoreReport",
    "backup",
    "create_all",
    "create_tables",
    "database_url",
    "delete_tables",
    "holders",
    "instance_counts",
    "instances",
    "query",
    "read_backup",
    "recreate_tables",
    "remove_broker",
    "reset_lock",
    "restore",
]
