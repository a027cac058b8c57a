"""Paging (broker/core/paging.py) on a real in-process router: message bodies that wait
past the threshold leave memory (to the swap area, or nowhere when the file store can
give them back) and come back for delivery in the same order, priority order and
selection as from memory; the swap area's files go with their messages; a body that
cannot be read back is reported and skipped, never delivered as something else."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path

import pytest

from broker.core import queries, runs
from broker.core.errors import now_ms
from broker.core.message import BODIES, Entry, Message
from broker.core.packed import (
    PACKED,
    SHORT,
    fits_short,
    pack_entry,
    pack_short,
    pack_stored_head,
    unpack_entry,
)
from broker.core.paging import Pager
from broker.core.reports import ReportGenerator
from broker.core.router import MessageRouter
from broker.core.selector import compile_selector
from broker.protocol.packet import VH_DELIVERY_TIME, build_packet, parse_packet, stored_head
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TOPIC,
    FLAG_F,
    FLAG_P,
    FLAG_Q,
    AckMode,
    PacketType,
)
from broker.server.broker import Broker
from broker.server.paging import Paging
from broker.store.base import RecoveredState
from broker.store.filestore import FileStore
from broker.store.swap import SwapArea

from .routerkit import Conn, body_of, dmq_bodies, pending, send, session
from .test_engine import _login, _sent
from .test_engine import broker as broker  # noqa: F401  (the fixture)

pytestmark = pytest.mark.fast

BODY = 2000


def _body(i: int) -> bytes:
    return i.to_bytes(4, "big") * (BODY // 4)


def _number(body: bytes) -> int:
    return int.from_bytes(body[:4], "big")


def _consume(r: MessageRouter, sess, name: str, dest_type: int = DEST_QUEUE, **kw):
    cons = r.add_consumer(sess, name, dest_type, **kw)
    cons.queue.dispatch(now_ms())  # as the engine does once it has replied
    return cons


def _paging_router(tmp_path: Path, threshold: int = 0) -> tuple[MessageRouter, Pager, SwapArea]:
    swap = SwapArea(tmp_path / "swap", segment_size=64 * 1024)
    swap.open()
    r = MessageRouter()
    pager = Pager(threshold, swap=swap, store=None, readahead=8)
    r.attach_pager(pager)
    return r, pager, swap


def _stored_router(
    path: Path, queue: str, *, lazy: bool = False
) -> tuple[MessageRouter, FileStore, RecoveredState]:
    """A router on a started file store at ``path`` (on the running loop) with ``queue``
    made; ``lazy``: the store loads heads only (the state is returned for ``recover``)."""
    store = FileStore(path, sync=False)
    store.lazy_bodies = lazy
    state = store.load()
    store.start(asyncio.get_running_loop())
    r = MessageRouter()
    r.attach_store(store)
    if not lazy:
        r.create_destination(queue, DEST_QUEUE, None)
    return r, store, state


def test_a_waiting_backlog_leaves_memory_and_drains_in_order(tmp_path: Path) -> None:
    r, pager, swap = _paging_router(tmp_path)
    gc.collect()
    before, out_before = BODIES.bytes, BODIES.out
    conn = Conn(1)
    send(r, conn, "q", *(_body(i) for i in range(100)))
    q = r.queues["q"]
    assert q.msg_count == 100
    # Every body is in the swap area; memory holds none of them.
    assert all(not e.msg.resident for e in q.dq)
    assert BODIES.bytes - before < BODY
    assert swap.files() > 1 and pager.stats.paged_out == 100
    # Counted out of memory, as an administrator's figures say.
    assert BODIES.out - out_before == 100
    assert queries.paged_out(q) == (100, sum(e.msg.size for e in q.dq))
    # Whatever reads one (a browser, an administrator) gets the bytes, memory keeps none.
    assert [_number(b) for b in pending(r, "q")] == list(range(100))
    assert BODIES.bytes - before < BODY
    sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
    _consume(r, sess, "q", DEST_QUEUE)
    assert [_number(b) for b in conn.bodies()] == list(range(100))
    del q
    gc.collect()
    # Consumed: their swap space went with them (the last segment is kept for appends).
    assert r.queues["q"].msg_count == 0 and swap.live_bytes == 0 and swap.files() <= 1
    assert BODIES.bytes - before < BODY
    assert BODIES.out == out_before


def test_priority_order_and_selectors_are_as_from_memory(tmp_path: Path) -> None:
    expected: dict[str, list[int]] = {}
    for paged in (False, True):
        r, _pager, _swap = _paging_router(tmp_path / str(paged), threshold=0 if paged else 1 << 40)
        conn = Conn(1)
        for i in range(60):
            send(r, conn, "q", _body(i), priority=i % 10, props={"n": i, "m": i % 3})
        assert all(e.msg.resident != paged for e in r.queues["q"].dq)
        sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
        _consume(r, sess, "q", DEST_QUEUE, selector=compile_selector("m = 0"))
        picked = [_number(b) for b in conn.bodies()]
        conn.sent.clear()
        _consume(r, sess, "q", DEST_QUEUE)
        rest = [_number(b) for b in conn.bodies()]
        got = {"picked": picked, "rest": rest}
        if not paged:
            expected = got
            assert picked == sorted(
                (i for i in range(60) if i % 3 == 0), key=lambda i: (-(i % 10), i)
            )
        else:
            assert got == expected


def test_a_durable_subscriptions_backlog_pages_and_comes_back(tmp_path: Path) -> None:
    r, _pager, _swap = _paging_router(tmp_path)
    conn = Conn(1, client_id="c1")
    sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
    cons = _consume(r, sess, "t", DEST_TOPIC, durable_name="d1")
    r.remove_consumer(cons, None)
    send(r, conn, "t", *(_body(i) for i in range(40)), topic=True)
    (sub,) = r.topics["t"].subscriptions
    assert all(not e.msg.resident for e in sub.queue)
    _consume(r, sess, "t", DEST_TOPIC, durable_name="d1")
    assert [_number(b) for b in conn.bodies()] == list(range(40))


def test_a_body_that_cannot_be_read_back_is_reported_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r, pager, swap = _paging_router(tmp_path)
    conn = Conn(1)
    send(r, conn, "q", *(_body(i) for i in range(5)))
    # Damage the third body's bytes in its swap file.
    victim = list(r.queues["q"].dq)[2].msg
    seg, off = victim.pos >> 40, victim.pos & ((1 << 40) - 1)
    path = swap.directory / f"{seg:010d}.swp"
    data = bytearray(path.read_bytes())
    data[off + 20] ^= 0xFF
    path.write_bytes(bytes(data))
    del victim
    sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
    _consume(r, sess, "q", DEST_QUEUE)
    assert [_number(b) for b in conn.bodies()] == [0, 1, 3, 4]
    assert pager.stats.lost == 1 and r.queues["q"].msg_count == 0
    assert "cannot be read back" in caplog.text


def test_under_the_threshold_nothing_is_paged(tmp_path: Path) -> None:
    r, pager, swap = _paging_router(tmp_path, threshold=1 << 40)
    send(r, Conn(1), "q", *(_body(i) for i in range(10)))
    assert all(e.msg.resident for e in r.queues["q"].dq)
    assert pager.stats.paged_out == 0 and swap.files() == 0
    assert queries.paged_out(r.queues["q"]) == (0, 0)


def test_stored_messages_are_read_back_from_the_file_store(tmp_path: Path) -> None:
    """Persistent messages of a queue: once the store has written them, only their keys
    stay; a consumer gets them read back by the pager's reader thread, in order; a
    compaction that moved them in the meantime changes nothing."""

    async def go() -> None:
        store = FileStore(tmp_path / "fs", sync=False, segment_size=256 * 1024)
        store.load()
        store.start(asyncio.get_running_loop())
        swap = SwapArea(tmp_path / "swap")
        swap.open()
        r = MessageRouter()
        r.attach_store(store)
        pager = Pager(0, swap=swap, store=store, readahead=16)
        r.attach_pager(pager)
        r.create_destination("pq", DEST_QUEUE, None)
        conn = Conn(1)
        send(r, conn, "pq", *(_body(i) for i in range(200)), persistent=True)
        q = r.queues["pq"]
        for _ in range(200):
            await asyncio.sleep(0.01)
            if not any(e.msg.resident for e in q.dq):
                break
        assert not any(e.msg.resident for e in q.dq)
        assert swap.files() == 0  # nothing went to the swap area: the store has them
        store.compact()
        assert body_of(next(iter(q.dq)).msg) == _body(0)
        sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
        _consume(r, sess, "pq", DEST_QUEUE)
        for _ in range(500):
            if len(conn.sent) == 200:
                break
            await asyncio.sleep(0.01)
        assert [_number(b) for b in conn.bodies()] == list(range(200))
        assert pager.stats.read_back >= 200 - 16
        pager.close()
        store.close()

    asyncio.run(go())


def test_the_swap_area_starts_empty_and_checks_what_it_reads(tmp_path: Path) -> None:
    swap = SwapArea(tmp_path, segment_size=100)
    (tmp_path / "0000000007.swp").write_bytes(b"left by a run that was killed")
    assert swap.open() == 1
    a = swap.put(b"a" * 60)
    b = swap.put(b"b" * 60)  # does not fit: a new segment
    assert swap.files() == 2 and a >> 40 != b >> 40
    assert swap.read(a, 60) == b"a" * 60 and swap.read(b, 60) == b"b" * 60
    assert swap.read(a, 59) is None  # the wrong size is refused, not cut
    swap.release(a, 60)
    assert swap.files() == 1
    swap.close()
    assert not list(tmp_path.glob("*.swp"))


def test_a_restart_loads_the_index_not_the_bodies(tmp_path: Path) -> None:
    """With ``lazy_bodies`` the file store gives back each message's head and length
    only; the router recovers them paged out and the pager reads them for delivery."""

    async def fill() -> None:
        r, store, _ = _stored_router(tmp_path / "fs", "rq")
        send(r, Conn(1), "rq", *(_body(i) for i in range(50)), persistent=True, priority=4)
        send(r, Conn(1), "rq", _body(99), persistent=True, priority=9)
        store.close()

    asyncio.run(fill())

    async def restart() -> None:
        r, store, state = _stored_router(tmp_path / "fs", "rq", lazy=True)
        assert all(m.raw is None and m.head and m.size > BODY for m in state.messages)
        gc.collect()  # (BODIES is process-wide: earlier tests' garbage must not go now)
        before = BODIES.bytes
        pager = Pager(1 << 40, swap=None, store=store, readahead=8)
        r.attach_pager(pager)
        r.recover(state)
        q = r.queues["rq"]
        assert q.msg_count == 51 and not any(e.msg.resident for e in q.dq)
        assert BODIES.bytes == before
        conn = Conn(1)
        _consume(r, session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE), "rq")
        for _ in range(500):
            if len(conn.sent) == 51:
                break
            await asyncio.sleep(0.01)
        assert [_number(b) for b in conn.bodies()] == [99, *range(50)]
        pager.close()
        store.close()

    asyncio.run(restart())


def test_delayed_messages_wait_paged_out_and_arrive_whole(tmp_path: Path) -> None:
    r, pager, _swap = _paging_router(tmp_path)
    due = now_ms() + 60_000
    for i in range(5):
        raw = build_packet(
            PacketType.BYTES_MESSAGE,
            body=_body(i),
            flags=FLAG_Q,
            fields={1: "dq", VH_DELIVERY_TIME: due},
            sequence=i + 1,
            timestamp=now_ms(),
        )
        r.route(Message(parse_packet(raw), "dq", 0), None, DEST_QUEUE)
    assert len(r.delayed) == 5 and not any(m.resident for _, _, m, _ in r.delayed)
    conn = Conn(1)
    _consume(r, session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE), "dq")
    r.release_due(due + 1)
    assert [_number(b) for b in conn.bodies()] == list(range(5))
    assert pager.stats.paged_out == 5


def test_a_stored_body_damaged_after_start_is_reported_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A record that loaded fine and was damaged on disk afterwards: its message is
    reported and skipped when read back, the others are delivered."""

    async def go() -> None:
        r, store, _ = _stored_router(tmp_path / "fs", "cq")
        send(r, Conn(1), "cq", *(_body(i) for i in range(6)), persistent=True)
        store.close()
        r, store, state = _stored_router(tmp_path / "fs", "cq", lazy=True)
        pager = Pager(1 << 40, swap=None, store=store, readahead=2)
        r.attach_pager(pager)
        r.recover(state)
        (seg,) = (tmp_path / "fs").glob("*.seg")
        data = bytearray(seg.read_bytes())
        at = data.find(_body(3)[:BODY])
        data[at + 100] ^= 0xFF
        seg.write_bytes(bytes(data))
        conn = Conn(1)
        _consume(r, session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE), "cq")
        for _ in range(500):
            if r.queues["cq"].msg_count == 0:
                break
            await asyncio.sleep(0.01)
        assert [_number(b) for b in conn.bodies()] == [0, 1, 2, 4, 5]
        assert pager.stats.lost == 1
        pager.close()
        store.close()

    asyncio.run(go())
    assert "does not read back intact" in caplog.text and "is skipped" in caplog.text


def test_a_selector_consumer_on_a_paged_backlog_reads_it_off_the_loop(tmp_path: Path) -> None:
    """With an event loop, the selector scan waits for the reader thread (no read on the
    loop) and gets what it would get from memory, in priority order; bodies it looked
    at and left are let go again."""

    async def go() -> None:
        r, pager, _swap = _paging_router(tmp_path)
        conn = Conn(1)
        for i in range(60):
            send(r, conn, "sq", _body(i), priority=i % 10, props={"n": i, "m": i % 3})
        sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
        _consume(r, sess, "sq", selector=compile_selector("m = 0"))
        for _ in range(500):
            if len(conn.sent) == 20:
                break
            await asyncio.sleep(0.01)
        picked = [_number(b) for b in conn.bodies()]
        assert picked == sorted((i for i in range(60) if i % 3 == 0), key=lambda i: (-(i % 10), i))
        # The 40 it left wait paged out again (only what selectors ask stays in memory).
        assert not any(e.msg.resident for e in r.queues["sq"].dq)
        assert pager.stats.read_back >= 20
        pager.close()

    asyncio.run(go())


def test_draining_a_paged_backlog_keeps_memory_under_the_threshold(tmp_path: Path) -> None:
    """A consumer with a prefetch window drains a stored backlog: each read-back window
    starts at the queue's head and what is delivered lets go, so the bodies in memory
    never pass the paging threshold (the head's window and the one behind it fit)."""

    async def go() -> None:
        r, store, _ = _stored_router(tmp_path / "fs", "wq")
        base = BODIES.bytes
        threshold = base + 100 * BODY
        pager = Pager(threshold, swap=None, store=store, readahead=64)
        r.attach_pager(pager)
        conn = Conn(1)
        for i in range(1000):
            send(r, conn, "wq", _body(i), persistent=True)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if pager.stats.paged_out >= 890:
                break
        sess = session(r, conn, ack_mode=AckMode.DUPS_OK_ACKNOWLEDGE)
        cons = _consume(r, sess, "wq", prefetch=200)
        peak = 0
        for _ in range(2000):
            if not r.queues["wq"].msg_count:
                break
            await asyncio.sleep(0.002)
            peak = max(peak, BODIES.bytes)
            r.acks.acknowledge(sess, list(sess.unacked)[:50])
            cons.resume(200)
            cons.queue.dispatch(now_ms())
        assert [_number(b) for b in conn.bodies()] == list(range(1000))
        assert peak <= threshold + 2 * BODY, (peak - base, threshold - base)
        pager.close()
        store.close()

    asyncio.run(go())


def test_producers_are_held_while_the_disk_is_short_and_resume_when_it_has_room(
    broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker's free-space watch: below imq.swap.minFreeSpace, a client's
    connection flow count is 0 (HELLO_REPLY and after its allowance: it waits), logged
    once; with room again (here: the setting lifted at run time) it gets RESUME_FLOW at
    once, logged once."""
    caplog.set_level(logging.INFO, logger="broker")
    swap = SwapArea(tmp_path / "swap")
    swap.open()
    pager = Pager(1 << 40, swap=swap, store=None)
    broker.config.set("imq.swap.minFreeSpace", "1000000m")
    broker.paging = Paging(pager, swap, None, broker.config, broker.memory.budget)
    broker.check_disk()
    broker.check_disk()
    assert broker.memory.count == 0 and caplog.text.count("producers are held") == 1
    e = _login(broker)
    # The last message of its allowance (F): no RESUME_FLOW while held.
    e.receive_data(
        build_packet(PacketType.TEXT_MESSAGE, body=b"x", flags=FLAG_Q | FLAG_F, fields={1: "hq"})
    )
    assert not [p for p in _sent(e) if p.type == PacketType.RESUME_FLOW]
    # An administrator lifts it (imqcmd update bkr -o imq.swap.minFreeSpace=-1).
    broker.config.set("imq.swap.minFreeSpace", "-1")
    broker.apply_properties({"imq.swap.minFreeSpace"})
    broker.check_disk()
    (resume,) = [p for p in _sent(e) if p.type == PacketType.RESUME_FLOW]
    assert resume.properties["JMQSize"] == broker.memory.count > 0
    assert caplog.text.count("producers resume") == 1


def test_a_message_recovered_from_its_head_is_the_message_it_was() -> None:
    """Message.paged reads a stored packet's head without a Packet (stored_head); every
    field the router uses equals what Message() reads from the whole packet."""
    raw = build_packet(
        PacketType.TEXT_MESSAGE,
        body=b"b" * 300,
        props={"n": 7, "JMSXGroupID": "g"},
        flags=FLAG_Q | FLAG_P,
        fields={1: "hq", 3: "corr-1", VH_DELIVERY_TIME: 1_900_000_000_000},
        priority=7,
        sequence=11,
        timestamp=1_800_000_000_000,
        expiration=1_950_000_000_000,
    )
    whole = Message(parse_packet(raw), "hq", 0)
    stored = whole.raw  # with its DELIVERY_COUNT slot, as the store holds it
    head = stored[: len(stored) - 300]
    assert stored_head(head) is not None
    paged = Message.paged(head, len(stored), "hq", None, whole.store_key)  # type: ignore[arg-type]
    fields = (
        "dc_offset", "type", "base_flags", "priority", "expiration", "timestamp", "key",
        "is_queue", "persistent", "size", "delivery_time",
    )  # fmt: skip
    assert {f: getattr(paged, f) for f in fields} == {f: getattr(whole, f) for f in fields}
    assert not paged.resident and paged.delivery_time == 1_900_000_000_000


def test_a_record_packed_from_a_head_is_the_packed_entry() -> None:
    """pack_stored_head (recovery, no objects) writes the record pack_entry writes for
    the entry of Message.paged, redelivered or not, with its run's report or not."""
    raw = build_packet(
        PacketType.TEXT_MESSAGE,
        body=b"b" * 300,
        props={"n": 7},
        flags=FLAG_Q | FLAG_P,
        fields={1: "hq", VH_DELIVERY_TIME: 1_900_000_000_000},
        priority=7,
        sequence=11,
        timestamp=1_800_000_000_000,
        expiration=1_950_000_000_000,
    )
    stored = Message(parse_packet(raw), "hq", 0).raw
    head = stored[: len(stored) - 300]
    fast = stored_head(head)
    assert fast is not None
    report = object()
    for count, with_report in ((0, False), (3, True)):
        m = Message.paged(head, len(stored), "hq", None, head[20:52])  # type: ignore[arg-type]
        m.report_info = report if with_report else None
        e = Entry(m, None, None, "")  # type: ignore[arg-type]
        e.count, e.redelivered = count, count > 0
        want, got = bytearray(PACKED.size), bytearray(PACKED.size)
        pack_entry(e, want, 0, report)
        size = pack_stored_head(got, 0, m.key, *fast, len(stored), count, count > 0, with_report)
        assert got == want and size == m.size


def test_a_short_record_holds_what_the_packed_one_does() -> None:
    """A message paged out to the store and not delayed packs into a SHORT record (its
    timestamp its key's, its priority and origin its run's) that unpacks to the entry the PACKED record gives;
    pack_stored_head writes the same short record from the head alone."""
    raw = build_packet(
        PacketType.TEXT_MESSAGE,
        body=b"s" * 200,
        props={"n": 3},
        flags=FLAG_Q | FLAG_P,
        fields={1: "sq"},
        priority=6,
        sequence=12,
        timestamp=1_800_000_000_000,
        expiration=1_950_000_000_000,
    )
    stored = Message(parse_packet(raw), "sq", 0).raw
    head = stored[: len(stored) - 200]
    fast = stored_head(head)
    assert fast is not None and fast[2] == 0
    fields = (
        "key priority type base_flags stored is_queue persistent size dc_offset pos"
        " expiration timestamp delivery_time origin_connection store_key"
    ).split()
    for count in (0, 2):
        m = Message.paged(head, len(stored), "sq", None, head[20:52])  # type: ignore[arg-type]
        m.origin_connection = 77
        assert fits_short(m)
        e = Entry(m, None, None, "")  # type: ignore[arg-type]
        e.count, e.redelivered = count, count > 0
        wide, short = bytearray(PACKED.size), bytearray(SHORT.size)
        pack_entry(e, wide, 0)
        pack_short(e, short, 0, None, 1, 1)
        args = (None, "sq", None, None, None, "")
        a = unpack_entry(wide, 0, *args)  # type: ignore[arg-type]
        shape = (6, [5, 77], [b"x" * 20, m.key[8:28]])
        b = unpack_entry(short, 0, *args, None, shape)  # type: ignore[arg-type]
        assert [getattr(b.msg, f) for f in fields] == [getattr(a.msg, f) for f in fields]
        assert (b.count, b.redelivered) == (a.count, a.redelivered) == (count, count > 0)
        m.origin_connection = 0
        pack_short(e, short, 0, None, 0, 1)
        got = bytearray(SHORT.size)
        size = pack_stored_head(got, 0, m.key, *fast, len(stored), count, count > 0, False, 1)
        assert got == short and size == m.size
    # Delayed, or in the swap area: a PACKED record.
    m = Message.paged(head, len(stored), "sq", None, head[20:52])  # type: ignore[arg-type]
    m.delivery_time = 1_900_000_000_000
    assert not fits_short(m)
    m.delivery_time, m.pos = 0, 4096
    assert not fits_short(m)
    m.pos, m.timestamp = -1, m.timestamp + 1  # (the short record takes the key's)
    assert not fits_short(m)


def test_a_deep_stored_backlog_from_many_producers_keeps_each_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three producers' persistent messages interleaved in one queue pack into short
    runs that name their origin connections; each comes back with its own (what noLocal
    and reports read), in order."""
    monkeypatch.setattr(runs, "RUN", 40)

    async def go() -> None:
        r, store, _state = _stored_router(tmp_path / "fs", "oq")
        pager = Pager(0, swap=None, store=store, readahead=8, depth=20)
        r.attach_pager(pager)
        conn = Conn(1)
        for i in range(600):
            send(r, conn, "oq", _body(i), persistent=True, origin=100 + i % 3)
            if i % 50 == 0:
                await asyncio.sleep(0.01)  # the store writes, the pager lets go
        await asyncio.sleep(0.1)
        dq = r.queues["oq"].dq
        assert _objects(dq) < 600 // 2
        packed = [run for d in dq.deep or () if d is not None for run in d.runs]
        shorts = [run.short for run in packed]
        assert shorts and all(sh is not None and sh[0] == 4 and len(sh[2]) == 1 for sh in shorts)
        assert all(sh is not None and sorted(sh[1]) == [100, 101, 102] for sh in shorts)
        listed = [e.msg for e in dq]
        assert [(_number(body_of(m)), m.origin_connection) for m in listed] == [
            (i, 100 + i % 3) for i in range(600)
        ]
        # Found by key and removed by id where they are packed (the keys are rebuilt
        # from the records' timestamps, sequences and the runs' sources).
        q = r.queues["oq"]
        keys = [listed[i].key for i in (550, 301, 7)]
        assert [m.key for m in r.find_messages(q, keys)] == keys
        victim = listed[400].message_id
        del listed
        assert r.delete_message(q, victim) == 1 and r.delete_message(q, victim) == 0
        _consume(r, session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE), "oq", DEST_QUEUE)
        for _ in range(500):
            if len(conn.sent) == 599:
                break
            await asyncio.sleep(0.01)
        assert [_number(b) for b in conn.bodies()] == [i for i in range(600) if i != 400]
        pager.close()
        store.close()

    asyncio.run(go())


def test_a_restart_packs_a_deep_backlog_without_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovered without bodies behind ``depth`` entries of their priority, messages go
    straight into runs (no Message or Entry each); they drain in priority order, whole,
    and the destination counts them as before."""
    monkeypatch.setattr(runs, "RUN", 16)

    async def fill() -> None:
        r, store, _ = _stored_router(tmp_path / "fs", "rq")
        send(r, Conn(1), "rq", *(_body(i) for i in range(60)), persistent=True, priority=4)
        send(r, Conn(1), "rq", *(_body(i) for i in range(100, 130)), persistent=True, priority=9)
        store.close()

    asyncio.run(fill())

    async def restart() -> None:
        r, store, state = _stored_router(tmp_path / "fs", "rq", lazy=True)
        pager = Pager(1 << 40, swap=None, store=store, readahead=8, depth=10)
        r.attach_pager(pager)
        assert r.recover(state)["messages"] == 90
        q = r.queues["rq"]
        assert q.msg_count == 90 and q.dq.count == 90
        assert _objects(q.dq) == 20  # the first ``depth`` of each priority
        assert q.dq.deep is not None and sum(len(d.runs) for d in q.dq.deep if d) == 6
        conn = Conn(1)
        _consume(r, session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE), "rq")
        for _ in range(1000):
            if len(conn.sent) == 90:
                break
            await asyncio.sleep(0.01)
        assert [_number(b) for b in conn.bodies()] == [*range(100, 130), *range(60)]
        assert all(b == _body(_number(b)) for b in conn.bodies())
        pager.close()
        store.close()

    asyncio.run(restart())


# -- deep backlogs: entries packed into runs (broker/core/runs.py) ---------------------


def _deep_router(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, depth: int = 32, run: int = 50
) -> tuple[MessageRouter, Pager, SwapArea]:
    """A paging router whose queues pack entries behind ``depth`` in runs of ``run``."""
    monkeypatch.setattr(runs, "RUN", run)
    swap = SwapArea(tmp_path / "swap", segment_size=256 * 1024)
    swap.open()
    r = MessageRouter()
    pager = Pager(0, swap=swap, store=None, readahead=8, depth=depth)
    r.attach_pager(pager)
    return r, pager, swap


def _objects(dq) -> int:
    """Entries of ``dq`` held as objects (not packed)."""
    n = sum(len(b) for b in dq.buckets)
    for deep in dq.deep or ():
        if deep is not None:
            n += len(deep.tail)
    return n


def test_a_deep_backlog_is_packed_and_drains_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r, pager, swap = _deep_router(tmp_path, monkeypatch)
    conn = Conn(1)
    send(r, conn, "q", *(_body(i) for i in range(1000)))
    dq = r.queues["q"].dq
    assert dq.count == 1000 and r.queues["q"].msg_count == 1000
    # Beyond the bucket (32) and the tail's newest run (50), all of it is packed.
    assert _objects(dq) < 32 + 2 * 50
    assert dq.paged_out() == (1000, sum(e.msg.size for e in dq))
    # A browser sees every one, in order; looking frees nothing.
    assert [_number(b) for b in pending(r, "q")] == list(range(1000))
    gc.collect()
    live = swap.live_bytes
    assert live > 1000 * BODY
    sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
    _consume(r, sess, "q", DEST_QUEUE)
    assert [_number(b) for b in conn.bodies()] == list(range(1000))
    assert dq.count == 0 and dq.deep is None
    gc.collect()
    assert swap.live_bytes == 0 and swap.files() <= 1
    assert pager.stats.lost == 0


def test_a_deep_backlog_keeps_priority_order_and_selectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(deep: bool) -> tuple[list[int], list[int]]:
        if deep:
            r, _pager, _swap = _deep_router(tmp_path / "deep", monkeypatch, depth=10, run=20)
        else:
            r = MessageRouter()
        conn = Conn(1)
        for i in range(1500):
            send(r, conn, "q", _body(i), priority=(i * 7) % 10, props={"m": i % 3})
        if deep:
            assert _objects(r.queues["q"].dq) < 1500 // 2
        sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
        # A selector consumer first (its scan unpacks the runs), then everyone.
        cons = _consume(r, sess, "q", DEST_QUEUE, selector=compile_selector("m = 1"))
        picked = [_number(b) for b in conn.bodies()]
        r.remove_consumer(cons, None)
        conn.sent.clear()
        _consume(r, sess, "q", DEST_QUEUE)
        return picked, [_number(b) for b in conn.bodies()]

    from_memory = run(False)
    assert run(True) == from_memory
    assert len(from_memory[0]) == 500 and len(from_memory[1]) == 1000


def test_packed_entries_expire_and_are_removed_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r, _pager, swap = _deep_router(tmp_path, monkeypatch)
    conn = Conn(1)
    soon = now_ms() + 60_000
    for i in range(400):
        send(r, conn, "q", _body(i), expiration=soon if i % 4 == 0 else 0)
    q = r.queues["q"]
    assert any(d is not None and d.runs for d in q.dq.deep or ())
    # Found by key (a browser's batch) and by id (an administrator) where they are packed.
    listed = [e.msg for e in q.dq]
    keys = [listed[i].key for i in (350, 101, 7)]
    assert [m.key for m in r.find_messages(q, keys)] == keys
    victim = listed[301].message_id
    del listed
    assert r.delete_message(q, victim) == 1
    assert r.delete_message(q, victim) == 0
    # Expired ones go to the DMQ whole, read back from the swap area.
    assert r.limits.reclaim_expired_report(soon + 1) == [("q", False, 100, 0)]
    assert q.msg_count == 299
    assert [_number(b) for b in dmq_bodies(r)] == list(range(0, 400, 4))
    r.purge(r.dmq)
    sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
    _consume(r, sess, "q", DEST_QUEUE)
    expected = [i for i in range(400) if i % 4 and i != 301]
    assert [_number(b) for b in conn.bodies()] == expected
    gc.collect()
    assert swap.live_bytes == 0


def test_a_purged_or_dropped_deep_backlog_frees_its_swap_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r, _pager, swap = _deep_router(tmp_path, monkeypatch)
    send(r, Conn(1), "q", *(_body(i) for i in range(500)))
    assert r.purge(r.queues["q"]) == 500
    gc.collect()
    assert swap.live_bytes == 0
    # A queue dropped with its runs still packed: the runs free what they hold.
    send(r, Conn(1), "q", *(_body(i) for i in range(500)))
    dq = r.queues["q"].dq
    assert any(d is not None and d.runs for d in dq.deep or ())
    dq.deep = None
    gc.collect()
    left = sum(len(b) for b in dq.buckets)
    assert 0 < swap.live_bytes <= left * (BODY + 200)


def test_a_deep_stored_backlog_packs_after_the_store_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Persistent messages, queue and durable subscription: packed once written, read
    back from the file store, drained in order; nothing goes to the swap area."""
    monkeypatch.setattr(runs, "RUN", 40)

    async def go() -> None:
        r, store, _state = _stored_router(tmp_path / "fs", "pq")
        swap = SwapArea(tmp_path / "swap")
        swap.open()
        pager = Pager(0, swap=swap, store=store, readahead=8, depth=20)
        r.attach_pager(pager)
        conn = Conn(1, client_id="c1")
        sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
        cons = _consume(r, sess, "t", DEST_TOPIC, durable_name="d1")
        r.remove_consumer(cons, None)
        for i in range(600):
            send(r, conn, "pq", _body(i), persistent=True)
            send(r, conn, "t", _body(i), persistent=True, topic=True)
            if i % 50 == 0:
                await asyncio.sleep(0.01)  # the store writes, the pager lets go
        await asyncio.sleep(0.1)
        (sub,) = r.topics["t"].subscriptions
        for dq in (r.queues["pq"].dq, sub.queue):
            assert _objects(dq) < 600 // 2
        assert swap.files() == 0
        for name, dtype, kw in (("pq", DEST_QUEUE, {}), ("t", DEST_TOPIC, {"durable_name": "d1"})):
            conn.sent.clear()
            _consume(r, sess, name, dtype, **kw)
            for _ in range(500):
                if len(conn.sent) == 600:
                    break
                await asyncio.sleep(0.01)
            assert [_number(b) for b in conn.bodies()] == list(range(600))
        pager.close()
        store.close()

    asyncio.run(go())


def test_a_deep_topic_backlog_shared_by_two_durables_is_packed_and_freed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Non-persistent messages of two inactive durable subscriptions: both share each
    body in the swap area; both pack their backlogs, each drains whole and in order, and
    the swap space goes only once both have."""
    r, pager, swap = _deep_router(tmp_path, monkeypatch)
    conn = Conn(1, client_id="c1")
    sess = session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE)
    for name in ("d1", "d2"):
        r.remove_consumer(_consume(r, sess, "t", DEST_TOPIC, durable_name=name), None)
    send(r, conn, "t", *(_body(i) for i in range(600)), topic=True)
    subs = r.topics["t"].subscriptions
    assert len(subs) == 2 and all(_objects(s.queue) < 300 for s in subs)
    gc.collect()
    assert swap.live_bytes >= 600 * BODY
    for name in ("d1", "d2"):
        conn.sent.clear()
        cons = _consume(r, sess, "t", DEST_TOPIC, durable_name=name)
        assert [_number(b) for b in conn.bodies()] == list(range(600))
        r.remove_consumer(cons, None)
        gc.collect()
        if name == "d1":  # the other subscription still holds every body
            assert swap.live_bytes >= 600 * BODY
    assert swap.live_bytes == 0 and swap.files() <= 1 and pager.stats.lost == 0


def test_acknowledging_unpacked_messages_reads_nothing_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the report generator learnt on arrival (no report asked) survives packing:
    acknowledging a drained deep backlog reads no body back (each is read once, to be
    delivered), whereas a lost note would read every one again on its acknowledgement."""
    r, pager, _swap = _deep_router(tmp_path, monkeypatch)
    r.events.add(ReportGenerator(r, schedule=lambda fn: None))
    conn = Conn(1)
    send(r, conn, "q", *(_body(i) for i in range(600)))
    sess = session(r, conn, ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    cons = _consume(r, sess, "q", DEST_QUEUE)
    assert [_number(b) for b in conn.bodies()] == list(range(600))
    assert pager.stats.read_back == 600
    assert r.acks.acknowledge(sess, list(sess.unacked)) == 600
    assert r.queues["q"].msg_count == 0 and cons.id
    assert pager.stats.read_back == 600


def test_a_failing_read_is_tried_again_and_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The store failing to read (a database gone for a moment, an I/O error) is not a
    damaged body: nothing is given up on, the read is tried again, every message comes."""

    async def go() -> None:
        r, store, _state = _stored_router(tmp_path / "fs", "pq")
        pager = Pager(0, swap=None, store=store, readahead=8)
        assert pager.read_retry == 1.0  # the broker's: a second
        pager.read_retry = 0.2  # two failures: 0.4 s waited, not 2
        r.attach_pager(pager)
        conn = Conn(1)
        send(r, conn, "pq", *(_body(i) for i in range(30)), persistent=True)
        for _ in range(200):
            await asyncio.sleep(0.01)
            if not any(e.msg.resident for e in r.queues["pq"].dq):
                break
        real = store.read_bodies
        failures = [2]

        def flaky(keys: list[bytes]) -> list[bytes | None]:
            if failures[0]:
                failures[0] -= 1
                raise OSError(5, "Input/output error")
            return real(keys)

        store.read_bodies = flaky  # type: ignore[method-assign]
        _consume(r, session(r, conn, ack_mode=AckMode.NO_ACKNOWLEDGE), "pq")
        for _ in range(600):
            if len(conn.sent) == 30:
                break
            await asyncio.sleep(0.01)
        assert [_number(b) for b in conn.bodies()] == list(range(30))
        assert pager.stats.lost == 0 and failures == [0]
        assert "tried again in 0.2 s" in caplog.text
        pager.close()
        store.close()

    asyncio.run(go())
