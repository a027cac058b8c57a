"""Contract tests every message store (``broker.store.base.Store``) must pass.

Reuse it from a test module by subclassing :class:`StoreContract` and providing a
``store_factory`` fixture::

    import pytest
    from tests.store_contract import StoreContract

    class TestMyStoreContract(StoreContract):
        @pytest.fixture
        def store_factory(self, tmp_path):
            def make(*, sync: bool = True) -> Store:
                return MyStore(tmp_path / "store", sync=sync)
            return make

``store_factory(sync=...)`` must return a NEW Store instance, not yet loaded or
started, on the SAME backing location each time it is called within one test (the
suite closes one instance and opens another on the location to check recovery).
The location must be empty at the start of each test.

The suite drives stores the way the broker does: ``load()``, ``start(loop)`` on a
real asyncio event loop, ``submit``/``after_durable`` from the loop, ``close()``.
:class:`Opened` wraps that and is usable by backend-specific tests too::

    s = Opened(store_factory())      # load() + start() on a fresh event loop
    s.state                          # the RecoveredState load() returned
    s.write(rec1, rec2)              # one loop turn, returns once durable
    s.close()
    s = reopen(store_factory)        # close-free shortcut: Opened(store_factory())

Semantics pinned down here (and expected of every store):

* destinations/durables: added and not removed, with the attributes of the latest
  add; a DestRemove matches on (name, type) - a queue and a topic may share a name;
* messages: present while at least one interest is unsettled, in MsgAdd order;
  ``interests`` maps each unsettled interest to its latest MsgDelivered count (0 if
  none); DestRemove drops the destination's messages; DurableRemove settles that
  interest in every message; records about unknown messages/interests are ignored;
* transactions: in order of their first record, latest TxnState, their TxnSend and
  TxnAck in order, until TxnRemove;
* a MsgAdd for a key already present replaces it (keeping its place in the order).

:func:`replay` is the reference model of these rules (an oracle for randomized tests).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable

import pytest

from broker.store.base import (
    DestAdd,
    DestRemove,
    DurableAdd,
    DurableRemove,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    RecoveredState,
    Store,
    StoredMessage,
    StoredTransaction,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)

QUEUE = 1  # destination types as OpenMQ encodes them (queue bit / topic bit)
TOPIC = 2

StoreFactory = Callable[..., Store]


def key(n: int) -> bytes:
    """A 32-byte message key (a SysMessageID is 32 bytes on the wire)."""
    return n.to_bytes(4, "big") * 8


def qmsg(n: int, dest: str = "q1", raw: bytes | None = None) -> MsgAdd:
    """A persistent queue message."""
    return MsgAdd(key(n), dest, QUEUE, raw if raw is not None else b"msg-%d\x00\xff" % n, ("",))


def tmsg(n: int, interests: tuple[str, ...], dest: str = "t1") -> MsgAdd:
    """A persistent topic message held for the given durable subscriptions."""
    return MsgAdd(key(n), dest, TOPIC, b"topic-%d" % n, interests)


class Opened:
    """A store loaded and started on its own asyncio event loop (test driver)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loop = asyncio.new_event_loop()
        self.state: RecoveredState = store.load()
        store.start(self.loop)

    def write(self, *records: Record) -> None:
        """Submit ``records`` in one loop turn and return once they are durable."""
        self.write_turns([records])

    def write_turns(self, turns: Iterable[Iterable[Record]]) -> None:
        """Submit each group in its own loop turn; return once all are durable."""

        async def go() -> None:
            done = self.loop.create_future()
            for group in turns:
                self.store.submit(group)
                await asyncio.sleep(0)  # end the turn: the batch is handed over
            self.store.after_durable(lambda: done.done() or done.set_result(None))
            await asyncio.wait_for(done, 60)

        self.loop.run_until_complete(go())
        assert self.store.failed is None, self.store.failed

    def close(self) -> None:
        self.store.close()
        self.loop.close()


def reopen(factory: StoreFactory, **kw) -> Opened:
    """Open a new store instance on the factory's location."""
    return Opened(factory(**kw))


def recover(factory: StoreFactory, **kw) -> RecoveredState:
    """What a fresh instance on the location loads (the instance is closed again)."""
    s = reopen(factory, **kw)
    s.close()
    return s.state


def messages(state: RecoveredState) -> list[tuple[bytes, str, int, bytes, dict[str, int]]]:
    return [(m.key, m.destination, m.dest_type, m.raw, dict(m.interests)) for m in state.messages]


def dests(state: RecoveredState) -> dict[tuple[str, int], dict]:
    return {(d.name, d.dest_type): d.attributes for d in state.destinations}


def durables(state: RecoveredState) -> dict[str, DurableAdd]:
    return {d.sub_id: d for d in state.durables}


def write_and_recover(factory: StoreFactory, *records: Record, **kw) -> RecoveredState:
    s = reopen(factory, **kw)
    s.write(*records)
    s.close()
    return recover(factory, **kw)


class StoreContract:
    """The contract suite; subclass it and provide the ``store_factory`` fixture."""

    @pytest.fixture
    def store_factory(self) -> StoreFactory:  # pragma: no cover - must be overridden
        raise NotImplementedError("provide a store_factory fixture")

    # -- basics -------------------------------------------------------------------

    def test_empty_store_loads_empty(self, store_factory: StoreFactory) -> None:
        state = recover(store_factory)
        assert (state.destinations, state.durables, state.messages, state.transactions) == (
            [],
            [],
            [],
            [],
        )

    @pytest.mark.parametrize("sync", [True, False])
    def test_every_record_kind_round_trips(self, store_factory: StoreFactory, sync: bool) -> None:
        attrs = {"maxNumMsgs": -1, "isLocal": False, "label": "naïve ✓", "x": None, "f": 1.5}
        info = {"xid": "0a0b", "sessionless": True, "lifetime": 0, "created": 1700000000123}
        d1 = DurableAdd("sub-1", "client-a", "durA", "t1", "color = 'red'", True, None)
        d2 = DurableAdd("sub-2", None, "durB", "t1", None, False, "shareName")
        raw = bytes(range(256)) * 3
        state = write_and_recover(
            store_factory,
            DestAdd("q1", QUEUE, attrs),
            DestAdd("t1", TOPIC, {}),
            d1,
            d2,
            MsgAdd(key(1), "q1", QUEUE, raw, ("",)),
            MsgAdd(key(2), "t1", TOPIC, b"", ("sub-1", "sub-2")),
            MsgDelivered(key(1), "", 2),
            TxnState(7, 1, info),
            TxnSend(7, key(3), "q1", QUEUE, b"\x00held\xff"),
            TxnAck(7, key(1), ""),
            sync=sync,
        )
        assert dests(state) == {("q1", QUEUE): attrs, ("t1", TOPIC): {}}
        rec_attrs = dests(state)[("q1", QUEUE)]
        assert rec_attrs["isLocal"] is False and rec_attrs["x"] is None
        assert durables(state) == {"sub-1": d1, "sub-2": d2}
        assert durables(state)["sub-1"].no_local is True
        assert durables(state)["sub-2"].no_local is False
        assert messages(state) == [
            (key(1), "q1", QUEUE, raw, {"": 2}),
            (key(2), "t1", TOPIC, b"", {"sub-1": 0, "sub-2": 0}),
        ]
        assert all(isinstance(m, StoredMessage) and type(m.raw) is bytes for m in state.messages)
        [txn] = state.transactions
        assert (txn.txn_id, txn.state, txn.info) == (7, 1, info)
        assert txn.info["sessionless"] is True
        assert txn.sends == [TxnSend(7, key(3), "q1", QUEUE, b"\x00held\xff")]
        assert type(txn.sends[0].raw) is bytes
        assert txn.acks == [TxnAck(7, key(1), "")]

    def test_large_ids_and_counts(self, store_factory: StoreFactory) -> None:
        big = 2**62 + 12345
        state = write_and_recover(
            store_factory,
            qmsg(1),
            MsgDelivered(key(1), "", 100_000),
            TxnState(big, 3, {}),
            TxnState(-5, 0, {}),
        )
        assert messages(state)[0][4] == {"": 100_000}
        assert [t.txn_id for t in state.transactions] == [big, -5]

    # -- destinations and durables --------------------------------------------------

    def test_destination_latest_attributes_and_removal(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(
            store_factory,
            DestAdd("a", QUEUE, {"v": 1}),
            DestAdd("b", QUEUE, {"v": 1}),
            DestAdd("a", QUEUE, {"v": 2}),
            DestAdd("c", TOPIC, {}),
            DestRemove("b", QUEUE),
        )
        assert dests(state) == {("a", QUEUE): {"v": 2}, ("c", TOPIC): {}}

    def test_destination_re_added_after_removal(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(
            store_factory,
            DestAdd("a", QUEUE, {"v": 1}),
            qmsg(1, "a"),
            DestRemove("a", QUEUE),
            DestAdd("a", QUEUE, {"v": 3}),
            qmsg(2, "a"),
        )
        assert dests(state) == {("a", QUEUE): {"v": 3}}
        assert [m.key for m in state.messages] == [key(2)]

    def test_durable_latest_and_removal(self, store_factory: StoreFactory) -> None:
        a1 = DurableAdd("s1", "c", "n1", "t1", None, False, None)
        a2 = DurableAdd("s1", "c", "n1", "t2", "x > 1", False, None)
        b = DurableAdd("s2", "c", "n2", "t1", None, False, None)
        state = write_and_recover(store_factory, a1, b, a2, DurableRemove("s2"))
        assert durables(state) == {"s1": a2}

    # -- messages --------------------------------------------------------------------

    def test_settling_all_interests_removes_the_message(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(store_factory, qmsg(1), qmsg(2), qmsg(3), MsgSettle(key(2), ""))
        assert [m.key for m in state.messages] == [key(1), key(3)]
        s = reopen(store_factory)
        s.write(MsgSettle(key(1), ""), MsgSettle(key(3), ""))
        s.close()
        assert recover(store_factory).messages == []

    def test_topic_message_stays_until_both_durables_settle(
        self, store_factory: StoreFactory
    ) -> None:
        state = write_and_recover(
            store_factory,
            tmsg(1, ("d1", "d2")),
            MsgDelivered(key(1), "d2", 1),
            MsgSettle(key(1), "d1"),
        )
        assert messages(state) == [(key(1), "t1", TOPIC, b"topic-1", {"d2": 1})]
        s = reopen(store_factory)
        s.write(MsgSettle(key(1), "d2"))
        s.close()
        assert recover(store_factory).messages == []

    def test_settle_in_a_later_session(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        s.write(tmsg(1, ("d1", "d2", "d3")))
        s.close()
        for interest, left in (("d2", {"d1": 0, "d3": 0}), ("d1", {"d3": 0})):
            s = reopen(store_factory)
            s.write(MsgSettle(key(1), interest))
            s.close()
            assert messages(recover(store_factory))[0][4] == left

    def test_dest_remove_drops_its_messages(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(
            store_factory,
            DestAdd("q1", QUEUE, {}),
            DestAdd("q2", QUEUE, {}),
            qmsg(1, "q1"),
            qmsg(2, "q2"),
            qmsg(3, "q1"),
            DestRemove("q1", QUEUE),
            qmsg(4, "q2"),
        )
        assert [m.key for m in state.messages] == [key(2), key(4)]
        assert list(dests(state)) == [("q2", QUEUE)]

    def test_dest_remove_matches_the_type(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(
            store_factory,
            DestAdd("same", QUEUE, {}),
            DestAdd("same", TOPIC, {}),
            qmsg(1, "same"),
            tmsg(2, ("d1",), dest="same"),
            DestRemove("same", TOPIC),
        )
        assert [m.key for m in state.messages] == [key(1)]
        assert list(dests(state)) == [("same", QUEUE)]

    def test_durable_remove_settles_its_interest(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(
            store_factory,
            DurableAdd("d1", "c", "n1", "t1", None, False, None),
            DurableAdd("d2", "c", "n2", "t1", None, False, None),
            tmsg(1, ("d1",)),
            tmsg(2, ("d1", "d2")),
            tmsg(3, ("d2",)),
            MsgDelivered(key(2), "d1", 3),
            DurableRemove("d1"),
        )
        assert messages(state) == [
            (key(2), "t1", TOPIC, b"topic-2", {"d2": 0}),
            (key(3), "t1", TOPIC, b"topic-3", {"d2": 0}),
        ]
        assert list(durables(state)) == ["d2"]

    def test_delivery_counts_recovered(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(
            store_factory,
            qmsg(1),
            tmsg(2, ("d1", "d2")),
            qmsg(3),
            MsgDelivered(key(1), "", 1),
            MsgDelivered(key(1), "", 2),
            MsgDelivered(key(2), "d2", 5),
            MsgDelivered(key(2), "d2", 4),  # the latest count wins, not the largest
            MsgDelivered(key(3), "", 1),
            MsgSettle(key(3), ""),
        )
        assert [(m.key, m.interests) for m in state.messages] == [
            (key(1), {"": 2}),
            (key(2), {"d1": 0, "d2": 4}),
        ]

    def test_records_about_unknown_things_are_ignored(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(
            store_factory,
            qmsg(1),
            MsgSettle(key(9), ""),
            MsgDelivered(key(9), "", 3),
            MsgSettle(key(1), "nope"),
            MsgDelivered(key(1), "nope", 3),
            DestRemove("never", QUEUE),
            DurableRemove("never"),
            TxnRemove(12345),
        )
        assert messages(state) == [(key(1), "q1", QUEUE, b"msg-1\x00\xff", {"": 0})]
        assert state.transactions == [] and state.destinations == []

    def test_settled_interest_does_not_come_back(self, store_factory: StoreFactory) -> None:
        state = write_and_recover(
            store_factory,
            tmsg(1, ("d1", "d2")),
            MsgSettle(key(1), "d1"),
            MsgDelivered(key(1), "d1", 2),  # late delivery count for a settled interest
        )
        assert messages(state)[0][4] == {"d2": 0}

    def test_message_order_preserved(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        expected = []
        turns = []
        for batch in range(10):
            group: list[Record] = []
            for i in range(batch * 30, batch * 30 + 30):
                dest = f"q{i % 3}"
                group.append(qmsg(i, dest))
                if i % 4 == 0:
                    group.append(MsgSettle(key(i), ""))
                else:
                    expected.append(key(i))
            turns.append(group)
        s.write_turns(turns)
        s.close()
        assert [m.key for m in recover(store_factory).messages] == expected
        # ... and across sessions: later messages come after the recovered ones.
        s = reopen(store_factory)
        s.write(qmsg(1000), MsgSettle(key(1), ""))
        s.close()
        expected.remove(key(1))
        assert [m.key for m in recover(store_factory).messages] == expected + [key(1000)]

    def test_many_messages(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory, sync=False)
        s.write_turns([[qmsg(i) for i in range(j, j + 500)] for j in range(0, 3000, 500)])
        s.write_turns([[MsgSettle(key(i), "") for i in range(0, 3000, 2)]])
        s.close()
        state = recover(store_factory, sync=False)
        assert [m.key for m in state.messages] == [key(i) for i in range(1, 3000, 2)]

    # -- paging: bodies read back, heads-only loads (stores with reads_bodies) ----------

    @staticmethod
    def _packet(n: int, props: int = 2, body: int = 3000) -> bytes:
        from broker.protocol.packet import build_packet
        from broker.protocol.types import PacketType

        return build_packet(
            PacketType.BYTES_MESSAGE,
            body=bytes([n % 256]) * body,
            props={f"p{i}": "v" * 40 for i in range(props)},
            fields={1: "q1"},
        )

    def test_bodies_read_back_by_key(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        if not s.store.reads_bodies:
            s.close()
            pytest.skip("this store does not read bodies back")
        raws = [self._packet(i) for i in range(3)]
        s.write(*(qmsg(i, raw=raws[i]) for i in range(3)))
        # From another thread, as the pager's reader does; an unknown key reads as None.
        out: list = []
        t = threading.Thread(
            target=lambda: out.append(s.store.read_bodies([key(2), key(9), key(0)]))
        )
        t.start()
        t.join()
        assert out == [[raws[2], None, raws[0]]]
        s.write(MsgSettle(key(2), ""))
        assert s.store.read_bodies([key(2), key(1)]) == [None, raws[1]]
        s.close()

    def test_a_heads_only_load_gives_heads_and_lengths(self, store_factory: StoreFactory) -> None:
        from broker.protocol.packet import body_offset

        s = reopen(store_factory)
        reads = s.store.reads_bodies
        # The second one's properties run past any prefix a store might read first.
        raws = [self._packet(1), self._packet(2, props=100), self._packet(3, body=0)]
        s.write(*(qmsg(i, raw=raws[i]) for i in range(3)))
        s.close()
        if not reads:
            pytest.skip("this store does not read bodies back")
        lazy = store_factory()
        lazy.lazy_bodies = True
        s = Opened(lazy)
        got = [(m.key, m.raw, m.head, m.size, m.interests) for m in s.state.messages]
        assert got == [
            (key(i), None, raws[i][: body_offset(raws[i])], len(raws[i]), {"": 0}) for i in range(3)
        ]
        assert s.store.read_bodies([key(1)]) == [raws[1]]
        s.close()

    # -- transactions -----------------------------------------------------------------

    def test_transactions_recovered_until_removed(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        s.write(
            qmsg(1),
            TxnState(1, 1, {"xid": None}),
            TxnState(2, 1, {}),
            TxnSend(1, key(10), "q1", QUEUE, b"ten"),
            TxnSend(2, key(20), "q1", QUEUE, b"twenty"),
            TxnAck(1, key(1), ""),
            TxnSend(1, key(11), "q1", QUEUE, b"eleven"),
            TxnState(1, 5, {"xid": "ab"}),  # e.g. PREPARED
        )
        s.close()
        state = recover(store_factory)
        t1, t2 = state.transactions
        assert (t1.txn_id, t1.state, t1.info) == (1, 5, {"xid": "ab"})
        assert [x.key for x in t1.sends] == [key(10), key(11)]
        assert [x.raw for x in t1.sends] == [b"ten", b"eleven"]
        assert t1.acks == [TxnAck(1, key(1), "")]
        assert (t2.txn_id, t2.state, [x.raw for x in t2.sends], t2.acks) == (2, 1, [b"twenty"], [])
        # Commit of txn 1: its sends become messages, its ack settles, then it is removed.
        s = reopen(store_factory)
        s.write(
            MsgAdd(key(10), "q1", QUEUE, b"ten", ("",)),
            MsgAdd(key(11), "q1", QUEUE, b"eleven", ("",)),
            MsgSettle(key(1), ""),
            TxnRemove(1),
        )
        s.close()
        state = recover(store_factory)
        assert [t.txn_id for t in state.transactions] == [2]
        assert [m.key for m in state.messages] == [key(10), key(11)]
        s = reopen(store_factory)
        s.write(TxnRemove(2))
        s.close()
        assert recover(store_factory).transactions == []

    # -- the writer: callbacks and batching --------------------------------------------

    def test_after_durable_fires_after_the_write(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        seen: list[tuple[int, bool]] = []
        loop_thread = threading.get_ident()

        async def go() -> None:
            done = s.loop.create_future()
            s.store.submit([qmsg(1), qmsg(2)])

            def cb() -> None:
                seen.append((s.store.records_written, threading.get_ident() == loop_thread))
                done.set_result(None)

            s.store.after_durable(cb)
            await asyncio.wait_for(done, 30)

        s.loop.run_until_complete(go())
        assert seen == [(2, True)]  # after both records were written, on the loop thread
        s.store.flush()
        # Another instance sees the data while the first one is still open...
        other = store_factory()
        assert [m.key for m in other.load().messages] == [key(1), key(2)]
        other.close()
        s.close()
        # ...and after it is closed.
        assert [m.key for m in recover(store_factory).messages] == [key(1), key(2)]

    def test_callback_without_records_still_fires(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        fired: list[int] = []

        async def go() -> None:
            done = s.loop.create_future()
            s.store.after_durable(lambda: (fired.append(1), done.set_result(None)))
            await asyncio.wait_for(done, 30)

        s.loop.run_until_complete(go())
        s.close()
        assert fired == [1]

    def test_one_loop_turn_is_one_batch(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        before = s.store.batches

        async def go() -> None:
            done = s.loop.create_future()
            for i in range(100):  # many submit calls in the same turn
                s.store.submit([qmsg(i)])
                s.store.after_durable(lambda: None)
            s.store.after_durable(lambda: done.set_result(None))
            await asyncio.wait_for(done, 30)

        s.loop.run_until_complete(go())
        assert s.store.batches - before == 1
        assert s.store.records_written == 100
        s.close()
        assert len(recover(store_factory).messages) == 100

    def test_flush_and_close_write_pending_records(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        s.store.submit([qmsg(1)])  # never waited for: close() must still write it
        s.close()
        assert [m.key for m in recover(store_factory).messages] == [key(1)]

    # -- reset ------------------------------------------------------------------------

    def test_reset(self, store_factory: StoreFactory) -> None:
        s = reopen(store_factory)
        s.write(DestAdd("q1", QUEUE, {}), qmsg(1), TxnState(1, 1, {}))
        s.close()
        store = store_factory()
        store.reset()
        store.close()
        state = recover(store_factory)
        assert (state.destinations, state.messages, state.transactions) == ([], [], [])
        # The store is usable after a reset.
        state = write_and_recover(store_factory, qmsg(2))
        assert [m.key for m in state.messages] == [key(2)]


def replay(records: Iterable[Record]) -> RecoveredState:
    """The reference semantics: the state a store holding ``records`` must load.

    Deliberately simple (quadratic in places); usable as an oracle in randomized tests.
    """
    dest: dict[tuple[str, int], DestAdd] = {}
    durs: dict[str, DurableAdd] = {}
    msgs: dict[bytes, StoredMessage] = {}
    txns: dict[int, StoredTransaction] = {}
    for r in records:
        if isinstance(r, DestAdd):
            dest[(r.name, r.dest_type)] = r
        elif isinstance(r, DestRemove):
            dest.pop((r.name, r.dest_type), None)
            for k in [k for k, m in msgs.items() if (m.destination, m.dest_type) == r]:
                del msgs[k]
        elif isinstance(r, DurableAdd):
            durs[r.sub_id] = r
        elif isinstance(r, DurableRemove):
            durs.pop(r.sub_id, None)
            for k, m in list(msgs.items()):
                m.interests.pop(r.sub_id, None)
                if not m.interests:
                    del msgs[k]
        elif isinstance(r, MsgAdd):
            if r.interests:
                m = StoredMessage(
                    r.key, r.destination, r.dest_type, r.raw, dict.fromkeys(r.interests, 0)
                )
                msgs[r.key] = m
            else:
                msgs.pop(r.key, None)
        elif isinstance(r, MsgDelivered):
            m = msgs.get(r.key)
            if m is not None and r.interest in m.interests:
                m.interests[r.interest] = r.count
        elif isinstance(r, MsgSettle):
            m = msgs.get(r.key)
            if m is not None and r.interest in m.interests:
                del m.interests[r.interest]
                if not m.interests:
                    del msgs[r.key]
        elif isinstance(r, TxnState):
            t = txns.get(r.txn_id)
            if t is None:
                txns[r.txn_id] = StoredTransaction(r.txn_id, r.state, r.info)
            else:
                t.state, t.info = r.state, r.info
        elif isinstance(r, TxnSend | TxnAck):
            t = txns.setdefault(r.txn_id, StoredTransaction(r.txn_id, 0, {}))
            (t.sends if isinstance(r, TxnSend) else t.acks).append(r)
        elif isinstance(r, TxnRemove):
            txns.pop(r.txn_id, None)
    return RecoveredState(
        list(dest.values()), list(durs.values()), list(msgs.values()), list(txns.values())
    )
