"""imqdbmgr's backup and restore keep every row of the database store (broker/store/
dbmgr.py, in-process on SQLite and a real PostgreSQL): what a backup holds and what a
restore writes back read exactly as the store did, for every kind of record."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.store import dbmgr, dbtables
from broker.store.base import (
    DestAdd,
    DurableAdd,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    TxnAck,
    TxnSend,
    TxnState,
)
from broker.store.dbread import read_state
from broker.store.dbstore import DatabaseStore
from tests.pg import database_alias, db_access, fresh_database, postgres_url  # noqa: F401

QUEUE, TOPIC = 1, 2


@pytest.fixture(params=["sqlite", "postgresql"])
def alias(request, db_access) -> Iterator[str]:  # noqa: F811
    if request.param == "postgresql":
        url = fresh_database(request.getfixturevalue("postgres_url"), f"dbmgr_{uuid.uuid4().hex}")
        with database_alias("dbmgr_pg", url, migrate=False) as name:
            yield name
    else:
        with tempfile.TemporaryDirectory(prefix="imq-dbmgr-") as tmp:
            url = f"sqlite:///{Path(tmp) / 'store.sqlite3'}"
            with database_alias("dbmgr_sqlite", url) as name:
                yield name


def key(n: int) -> bytes:
    return n.to_bytes(32, "big")


RECORDS = [
    DestAdd("q1", QUEUE, {"maxNumMsgs": 10}),
    DestAdd("t1", TOPIC, {}),
    DurableAdd("cid:sub", "cid", "sub", "t1", "a > 1", False, None),
    DurableAdd("share:s", None, "s", "t1", None, True, "s"),
    MsgAdd(key(1), "q1", QUEUE, b"one", ("",)),
    MsgAdd(key(2), "t1", TOPIC, b"two", ("cid:sub", "share:s")),
    MsgAdd(key(4), "q1", QUEUE, b"\x00\xff" * 300, ("",)),
    MsgDelivered(key(1), "", 2),
    MsgDelivered(key(2), "share:s", 1),
    MsgSettle(key(2), "cid:sub"),
    TxnState(7, 1, {"xid": "00ff", "session": 3}),
    TxnSend(7, key(3), "q1", QUEUE, b"three"),
    TxnAck(7, key(1), ""),
    TxnSend(8, key(5), "q1", QUEUE, b"five"),  # work with no state yet
]


def test_backup_and_restore_keep_every_row(alias: str, tmp_path: Path) -> None:
    for inst, records in (("b1", RECORDS), ("b2", RECORDS[:5]), ("b.3/x", RECORDS[4:])):
        store = DatabaseStore(inst, sync=True, using=alias)
        store.reset()
        store.write_now(records)
    before = {inst: read_state(inst, using=alias) for inst in ("b1", "b2", "b.3/x")}
    assert before["b1"].messages and before["b1"].transactions

    with pytest.raises(dbmgr.DbMgrError, match="is not a backup made by imqdbmgr backup"):
        dbmgr.restore(alias, tmp_path)
    done = dbmgr.backup(alias, tmp_path / "bk")
    with pytest.raises(dbmgr.DbMgrError, match="is not an empty directory"):
        dbmgr.backup(alias, tmp_path / "bk")
    assert done["b1"] == {"destinations": 2, "durables": 2, "messages": 3, "transactions": 2}
    assert dbmgr.read_backup(tmp_path / "bk") == before

    # Another instance the backup does not know is left alone by the restore.
    DatabaseStore("other", sync=True, using=alias).write_now(RECORDS[:1])
    dbmgr.delete_tables(alias)
    assert dbtables.exists(alias) == 0
    with pytest.raises(dbmgr.DbMgrError, match="already been deleted"):
        dbmgr.delete_tables(alias)
    assert dbmgr.restore(alias, tmp_path / "bk") == done
    assert {inst: read_state(inst, using=alias) for inst in before} == before

    DatabaseStore("b1", sync=True, using=alias).write_now([MsgSettle(key(1), "")])
    DatabaseStore("other", sync=True, using=alias).write_now(RECORDS[:1])
    dbmgr.restore(alias, tmp_path / "bk")  # replaces b1's rows, keeps other's
    assert read_state("b1", using=alias) == before["b1"]
    assert read_state("other", using=alias).destinations == RECORDS[:1]

    report = dbmgr.query(alias)
    assert report.exists == 1 and [i.name for i in report.instances] == [
        "b.3/x",
        "b1",
        "b2",
        "other",
    ]

    # A store that lost a table is not run on, nor restored into.
    dbtables.run(alias, dbtables.drop_sql(alias, ["broker_storedinterest"]))
    with pytest.raises(dbtables.StoreTablesMissing, match="recreate tbl"):
        dbtables.ensure(alias, create=True)
    with pytest.raises(dbmgr.DbMgrError, match="one or more database tables are missing"):
        dbmgr.restore(alias, tmp_path / "bk")
    assert dbmgr.recreate_tables(alias) and dbmgr.instances(alias) == []
