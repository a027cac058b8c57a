"""The database message store on a real PostgreSQL (and once on SQLite).

The store runs on its own Django database alias, pointed at the server ``postgres_url``
starts (or at a temporary SQLite file) and migrated, so the rest of the suite keeps its
SQLite test database.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from django.db import connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.store.base import (
    DestAdd,
    DestRemove,
    DurableAdd,
    DurableRemove,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    Store,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)
from broker.store.dbstore import DatabaseStore
from tests.manage_fork import run_manage
from tests.pg import database_alias, postgres_url  # noqa: F401
from tests.store_contract import StoreContract, replay

QUEUE, TOPIC = 1, 2  # dest_type values as the store sees them (opaque ints)


@pytest.fixture(params=["postgresql", "sqlite"])
def alias(request) -> str:
    return request.getfixturevalue("pg_alias" if request.param == "postgresql" else "sqlite_alias")


class TestDatabaseStoreContract(StoreContract):
    """The shared store contract, on PostgreSQL and on SQLite."""

    @pytest.fixture
    def store_factory(self, alias: str) -> Iterator[Callable[..., Store]]:
        # A broker instance of its own: the "location" is empty at the start of each test.
        instance = f"contract-{uuid.uuid4().hex[:12]}"

        def make(*, sync: bool = True) -> Store:
            return DatabaseStore(instance, sync=sync, using=alias)

        yield make
        DatabaseStore(instance, sync=True, using=alias).reset()


class Running:
    """A store with its writer thread on a private event loop thread, like the broker."""

    def __init__(self, store: DatabaseStore) -> None:
        self.store = store
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(lambda: store.start(self.loop))

    def call(self, fn: Callable[[], object]) -> object:
        """Run ``fn`` on the loop thread and return its result."""
        done = threading.Event()
        box: list[object] = []

        def run() -> None:
            box.append(fn())
            done.set()

        self.loop.call_soon_threadsafe(run)
        assert done.wait(30)
        return box[0]

    def write(self, records: list[Record]) -> None:
        """Submit ``records`` as one batch and wait until they are durable."""
        durable = threading.Event()

        def go() -> None:
            self.store.submit(records)
            self.store.after_durable(durable.set)

        self.call(go)
        assert durable.wait(60), f"not durable: {self.store.failed!r}"

    def close(self) -> None:
        self.store.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def open_store(alias: str) -> Iterator[Callable[..., Running]]:
    """Factory: a started store for an instance name, reset first and closed after."""
    opened: list[Running] = []

    def make(instance: str = "imqbroker", *, reset: bool = True) -> Running:
        store = DatabaseStore(instance, sync=True, using=alias)
        if reset:
            store.reset()
        running = Running(store)
        opened.append(running)
        return running

    yield make
    for running in opened:
        running.close()


def key(n: int) -> bytes:
    return n.to_bytes(32, "big")


def reload(alias: str, instance: str = "imqbroker"):
    return DatabaseStore(instance, sync=True, using=alias).load()


def test_round_trip_of_every_record_kind(open_store, alias: str) -> None:
    s = open_store()
    s.write(
        [
            DestAdd("q1", QUEUE, {"maxNumMsgs": 10}),
            DestAdd("t1", TOPIC, {}),
            DurableAdd("cid:sub", "cid", "sub", "t1", "a > 1", False, None),
            MsgAdd(key(1), "q1", QUEUE, b"one", ("",)),
            MsgAdd(key(2), "t1", TOPIC, b"two", ("cid:sub",)),
            MsgDelivered(key(1), "", 2),
            TxnState(7, 1, {"xid": "00ff", "session": 3}),
            TxnSend(7, key(3), "q1", QUEUE, b"three"),
            TxnAck(7, key(1), ""),
        ]
    )
    state = reload(alias)
    assert state.destinations == [
        DestAdd("q1", QUEUE, {"maxNumMsgs": 10}),
        DestAdd("t1", TOPIC, {}),
    ]
    assert state.durables == [DurableAdd("cid:sub", "cid", "sub", "t1", "a > 1", False, None)]
    assert [(m.key, m.destination, m.dest_type, m.raw, m.interests) for m in state.messages] == [
        (key(1), "q1", QUEUE, b"one", {"": 2}),
        (key(2), "t1", TOPIC, b"two", {"cid:sub": 0}),
    ]
    [txn] = state.transactions
    assert (txn.txn_id, txn.state, txn.info) == (7, 1, {"xid": "00ff", "session": 3})
    assert txn.sends == [TxnSend(7, key(3), "q1", QUEUE, b"three")]
    assert txn.acks == [TxnAck(7, key(1), "")]


def test_settle_remove_and_order(open_store, alias: str) -> None:
    s = open_store()
    s.write(
        [DestAdd("q", QUEUE, {}), DestAdd("gone", QUEUE, {}), DestAdd("t", TOPIC, {})]
        + [MsgAdd(key(i), "q", QUEUE, b"%d" % i, ("",)) for i in range(10)]
        + [MsgAdd(key(100), "gone", QUEUE, b"x", ("",))]
        + [MsgAdd(key(200), "t", TOPIC, b"t", ("a", "b"))]
    )
    # Settled in a later batch, added and settled in the same one, and re-delivered.
    s.write([MsgSettle(key(3), ""), MsgDelivered(key(4), "", 1), MsgDelivered(key(4), "", 2)])
    s.write(
        [
            MsgAdd(key(50), "q", QUEUE, b"brief", ("",)),
            MsgDelivered(key(50), "", 1),
            MsgSettle(key(50), ""),
            DestRemove("gone", QUEUE),
            DurableRemove("a"),
            MsgSettle(key(5), ""),
            MsgDelivered(key(5), "", 9),  # after its settle: no effect
        ]
    )
    state = reload(alias)
    assert [d.name for d in state.destinations] == ["q", "t"]
    got = [(m.key, m.interests) for m in state.messages]
    want = [(key(i), {"": 2 if i == 4 else 0}) for i in range(10) if i not in (3, 5)]
    assert got == want + [(key(200), {"b": 0})]
    s.write([DurableRemove("b")])
    assert key(200) not in [m.key for m in reload(alias).messages]
    if connections[alias].vendor == "postgresql":  # the messages-only batch: one trip
        assert s.store.one_trip_writes == 1


def test_txn_remove_and_readd_of_a_destination(open_store, alias: str) -> None:
    s = open_store()
    s.write(
        [
            DestAdd("q", QUEUE, {"a": 1}),
            DestAdd("r", QUEUE, {}),
            TxnState(1, 1, {}),
            TxnSend(1, key(1), "q", QUEUE, b"x"),
            TxnState(2, 1, {}),
        ]
    )
    s.write([TxnState(1, 2, {"prepared": True}), TxnRemove(2), DestAdd("q", QUEUE, {"a": 2})])
    state = reload(alias)
    assert state.destinations == [DestAdd("q", QUEUE, {"a": 2}), DestAdd("r", QUEUE, {})]
    [txn] = state.transactions
    assert (txn.txn_id, txn.state, txn.info, len(txn.sends)) == (1, 2, {"prepared": True}, 1)
    s.write([TxnRemove(1)])
    assert reload(alias).transactions == []


def test_failing_batch_leaves_nothing_half_applied(open_store, alias: str) -> None:
    s = open_store()
    s.write(
        [
            DestAdd("q", QUEUE, {}),
            DestAdd("other", QUEUE, {}),
            MsgAdd(key(1), "q", QUEUE, b"kept", ("",)),
            MsgAdd(key(5), "other", QUEUE, b"other", ("",)),
        ]
    )
    before = reload(alias)
    poisons: list[Record] = [
        ("not a record",),  # type: ignore[list-item]  # fails in the writer's code
        DurableAdd("s", None, None, "t", None, False, None),  # type: ignore[arg-type]  # NOT NULL
    ]
    if alias == "store_pg":
        poisons.append(DestAdd("x" * 5000, QUEUE, {}))  # too long for the column
    for poison in poisons:
        s.store.failed = None
        durable = threading.Event()
        # DestRemove makes the writer send what came before it to the database first,
        # so the failure comes after statements that the rollback must undo.
        batch = [
            MsgAdd(key(2), "q", QUEUE, b"new", ("",)),
            MsgSettle(key(1), ""),
            DestRemove("other", QUEUE),
            TxnState(9, 1, {}),
            poison,
        ]

        def go(batch: list[Record] = batch, durable: threading.Event = durable) -> None:
            s.store.submit(batch)
            s.store.after_durable(durable.set)

        s.call(go)
        # (Not flush(): its marker shares the failed batch and is dropped with its callbacks.)
        deadline = time.monotonic() + 30
        while s.store.failed is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.store.failed is not None
        assert not durable.is_set()  # nothing was confirmed
        assert reload(alias) == before, f"half applied with {poison!r}"
    # The store goes on working after a failed batch (fresh connection).
    s.write([MsgAdd(key(3), "q", QUEUE, b"after", ("",))])
    assert [m.key for m in reload(alias).messages] == [key(1), key(5), key(3)]


def test_instances_sharing_a_database_are_separate(open_store, alias: str) -> None:
    a = open_store("brokerA")
    b = open_store("brokerB")
    a.write([DestAdd("q", QUEUE, {}), MsgAdd(key(1), "q", QUEUE, b"A", ("",)), TxnState(1, 1, {})])
    # Same names, keys and transaction ids in the other instance.
    b.write([DestAdd("q", QUEUE, {"b": 1}), MsgAdd(key(1), "q", QUEUE, b"B", ("",))])
    b.write([MsgSettle(key(1), ""), DestRemove("q", QUEUE)])
    sa, sb = reload(alias, "brokerA"), reload(alias, "brokerB")
    assert [m.raw for m in sa.messages] == [b"A"]
    assert [d.attributes for d in sa.destinations] == [{}]
    assert len(sa.transactions) == 1
    assert (sb.messages, sb.destinations, sb.transactions) == ([], [], [])
    b.store.reset()
    assert reload(alias, "brokerA") == sa


def test_reset_deletes_only_this_instance(open_store, alias: str) -> None:
    a = open_store("resetA")
    other = open_store("resetB")
    records = [
        DestAdd("q", QUEUE, {}),
        DurableAdd("s", None, "s", "t", None, True, "share"),
        MsgAdd(key(1), "q", QUEUE, b"x", ("",)),
        TxnState(1, 1, {}),
        TxnAck(1, key(1), ""),
    ]
    a.write(records)
    other.write(records)
    a.store.reset()
    state = reload(alias, "resetA")
    assert (state.destinations, state.durables, state.messages, state.transactions) == (
        [],
        [],
        [],
        [],
    )
    assert len(reload(alias, "resetB").messages) == 1


def test_close_on_the_event_loop_closes_the_writer_connection(alias: str) -> None:
    """The broker closes the store from a coroutine: Django must not refuse, and the
    writer thread's connection must be closed."""
    store = DatabaseStore("closing", sync=True, using=alias)
    store.reset()
    loop = asyncio.new_event_loop()

    async def run() -> None:
        store.start(loop)
        done = loop.create_future()
        store.submit([MsgAdd(key(1), "q", QUEUE, b"x", ("",))])
        store.after_durable(lambda: done.set_result(None))
        await asyncio.wait_for(done, 30)
        writer = store._writer_connection
        assert writer is not None and writer.connection is not None
        store.close()  # on the loop, as the broker's shutdown does
        assert writer.connection is None

    try:
        loop.run_until_complete(run())
    finally:
        loop.close()
    assert [m.key for m in reload(alias, "closing").messages] == [key(1)]
    DatabaseStore("closing", sync=True, using=alias).reset()


def test_load_of_10000_messages(open_store, alias: str) -> None:
    s = open_store()
    n = 10_000
    payload = os.urandom(1024)
    s.write(
        [MsgAdd(key(i), "q", QUEUE, payload, ("",)) for i in range(n)]
        + [MsgDelivered(key(i), "", 1) for i in range(0, n, 2)]
    )
    started = time.perf_counter()
    state = reload(alias)
    took = time.perf_counter() - started
    assert len(state.messages) == n
    assert [m.key for m in state.messages] == [key(i) for i in range(n)]
    assert state.messages[0].raw == payload and state.messages[0].interests == {"": 1}
    assert state.messages[1].interests == {"": 0}
    assert took < 30, f"load of {n} messages took {took:.1f}s"


# -- randomized: any records, in any batches, load what the reference replay says ---------

_keys = st.integers(0, 5).map(key)
_interests = st.sampled_from(["", "d1", "d2"])
_dests = st.sampled_from([("q", QUEUE), ("t", TOPIC), ("q", TOPIC)])
_txn_ids = st.integers(1, 3)
_records = st.one_of(
    st.builds(lambda d, a: DestAdd(d[0], d[1], {"a": a}), _dests, st.integers(0, 3)),
    st.builds(lambda d: DestRemove(*d), _dests),
    st.builds(
        lambda s, t: DurableAdd(s, "c", s, t, None, False, None),
        st.sampled_from(["d1", "d2"]),
        st.sampled_from(["t", "u"]),
    ),
    st.builds(DurableRemove, st.sampled_from(["d1", "d2"])),
    st.builds(
        lambda k, d, raw, i: MsgAdd(k, d[0], d[1], raw, tuple(dict.fromkeys(i))),
        _keys,
        _dests,
        st.binary(max_size=8),
        st.lists(_interests, max_size=3),
    ),
    st.builds(MsgAdd, _keys, st.just("q"), st.just(QUEUE), st.binary(max_size=4), st.just(("",))),
    st.builds(MsgDelivered, _keys, _interests, st.integers(0, 5)),
    st.builds(MsgSettle, _keys, _interests),
    st.builds(MsgSettle, _keys, _interests),
    st.builds(
        TxnState, _txn_ids, st.integers(0, 6), st.fixed_dictionaries({"n": st.integers(0, 9)})
    ),
    st.builds(TxnSend, _txn_ids, _keys, st.just("q"), st.just(QUEUE), st.binary(max_size=4)),
    st.builds(TxnAck, _txn_ids, _keys, _interests),
    st.builds(TxnRemove, _txn_ids),
)
_batches = st.lists(st.lists(_records, max_size=12), max_size=6)


def _check_against_replay(alias: str, batches: list[list[Record]]) -> None:
    store = DatabaseStore(f"random-{uuid.uuid4().hex[:12]}", sync=True, using=alias)
    try:
        for batch in batches:
            if batch:
                store._write_batch(batch)  # what the writer thread does with one batch
        got, want = store.load(), replay(r for batch in batches for r in batch)
    finally:
        store.reset()
    assert got.destinations == want.destinations
    assert got.durables == want.durables
    assert [(m.key, m.destination, m.dest_type, m.raw, m.interests) for m in got.messages] == [
        (m.key, m.destination, m.dest_type, m.raw, m.interests) for m in want.messages
    ]
    assert got.transactions == want.transactions


def _random(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@_random(200)
@given(batches=_batches)
def test_random_batches_match_replay_sqlite(sqlite_alias: str, batches) -> None:
    _check_against_replay(sqlite_alias, batches)


@_random(150)
@given(batches=_batches)
def test_random_batches_match_replay_postgresql(pg_alias: str, batches) -> None:
    _check_against_replay(pg_alias, batches)


def test_re_added_key_replaces_in_place(open_store, alias: str) -> None:
    s = open_store()
    s.write([MsgAdd(key(i), "q", QUEUE, b"old", ("",)) for i in range(3)])
    s.write([MsgDelivered(key(1), "", 4)])
    # Re-added while stored (the batch is redone replacing), with other interests.
    s.write(
        [MsgAdd(key(9), "q", QUEUE, b"new9", ("",)), MsgAdd(key(1), "t", TOPIC, b"new", ("a", "b"))]
    )
    state = reload(alias)
    assert [(m.key, m.raw, m.interests) for m in state.messages] == [
        (key(0), b"old", {"": 0}),
        (key(1), b"new", {"a": 0, "b": 0}),
        (key(2), b"old", {"": 0}),
        (key(9), b"new9", {"": 0}),
    ]
    # Re-added and settled in one batch: the stored one goes too.
    s.write([MsgAdd(key(2), "q", QUEUE, b"x", ("",)), MsgSettle(key(2), "")])
    assert [m.key for m in reload(alias).messages] == [key(0), key(1), key(9)]


def test_manage_py_migrate_on_postgresql(postgres_url: str) -> None:  # noqa: F811
    """``DATABASE_URL=postgres://... manage.py migrate`` (what a broker on PostgreSQL runs)."""
    import psycopg

    server, _, _ = postgres_url.rpartition("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "imqmigrate"')
        conn.execute('CREATE DATABASE "imqmigrate"')
    env = {**os.environ, "DATABASE_URL": f"{server}/imqmigrate"}
    for args in (["migrate", "--noinput"], ["makemigrations", "broker", "--check", "--dry-run"]):
        done = run_manage(args, env=env, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    with psycopg.connect(f"{server}/imqmigrate") as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables")}
    assert {"broker_storedmessage", "broker_storedinterest", "broker_storedtxnwork"} <= tables


def _throughput(s: Running, batch: int, total: int) -> float:
    payload = os.urandom(1024)
    first = batch << 32  # new keys for each run: a stored key would take the replacing path
    n = 0
    started = time.perf_counter()
    while n < total:
        s.write([MsgAdd(key(first + n + i), "q", QUEUE, payload, ("",)) for i in range(batch)])
        n += batch
    return n / (time.perf_counter() - started)


def test_write_throughput_postgresql(pg_alias: str, capsys) -> None:
    """1 KB MsgAdd records/s, one batch durable before the next (as one producer waits)."""
    store = DatabaseStore("throughput", sync=True, using=pg_alias)
    store.reset()
    s = Running(store)
    try:
        figures = {
            batch: _throughput(s, batch, total) for batch, total in ((1, 500), (100, 20_000))
        }
    finally:
        s.close()
        store.reset()
    with capsys.disabled():
        print(
            "\nDatabaseStore on PostgreSQL, 1 KB MsgAdd: "
            + ", ".join(f"batches of {b}: {r:,.0f} records/s" for b, r in figures.items())
        )
    assert len(reload(pg_alias, "throughput").messages) == 0
