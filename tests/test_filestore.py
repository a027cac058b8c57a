"""The file store: the store contract, torn tails, corruption, group commit, compaction.

Why one module (about 1,100 lines): these tests share the helpers that write sessions,
cut and corrupt segment files and replay them.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
    Store,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)
from broker.store.filestore import (
    CHECKPOINT,
    HEADER_SIZE,
    MAGIC,
    FileStore,
    decode,
    encode,
    frame,
    measure_fsync_rate,
    measure_sync_rate,
)
from tests.memdir import memory_dir
from tests.store_contract import QUEUE, TOPIC, Opened, StoreContract, key, qmsg, replay

pytestmark = pytest.mark.fast

SEEDS = int(os.environ.get("FILESTORE_SEEDS", "8"))  # more for a longer randomized run


# In memory where the machine can (tests/memdir.py): thousands of directory fsyncs here
# (every segment's entry, tiny segments) took 10 ms each on a disk others write to.  The
# crash tests (tests/test_filestore_crash.py) and the benchmarks use a real disk.
@pytest.fixture
def tmp_path() -> Iterator[Path]:
    with memory_dir("imq-filestore-") as where:
        yield where


class TestFileStoreContract(StoreContract):
    @pytest.fixture
    def store_factory(self, tmp_path: Path):
        def make(*, sync: bool = True) -> FileStore:
            return FileStore(tmp_path / "filestore", sync=sync)

        return make


class TestFileStoreContractInline(StoreContract):
    """The contract again with batches written on the loop when the writer is idle."""

    @pytest.fixture
    def store_factory(self, tmp_path: Path):
        def make(*, sync: bool = True) -> FileStore:
            return FileStore(tmp_path / "filestore", sync=sync, inline=True)

        return make


class TestFileStoreContractThreadOnly(StoreContract):
    """...and with every batch written by the writer thread."""

    @pytest.fixture
    def store_factory(self, tmp_path: Path):
        def make(*, sync: bool = True) -> FileStore:
            return FileStore(tmp_path / "filestore", sync=sync, inline=False)

        return make


class TestFileStoreContractSmallSegments(StoreContract):
    """The contract again with tiny segments: records spread over many files."""

    @pytest.fixture
    def store_factory(self, tmp_path: Path):
        def make(*, sync: bool = True) -> FileStore:
            return FileStore(tmp_path / "filestore", sync=sync, segment_size=300)

        return make


# -- helpers ----------------------------------------------------------------------------


def canon(state):
    """A RecoveredState as plain comparable data (order of messages/txns kept)."""
    return (
        [(d.name, d.dest_type, d.attributes) for d in state.destinations],
        state.durables,
        [(m.key, m.destination, m.dest_type, m.raw, m.interests) for m in state.messages],
        [(t.txn_id, t.state, t.info, t.sends, t.acks) for t in state.transactions],
    )


def random_records(rng: random.Random, n: int, live: dict) -> list[Record]:
    """Plausible broker traffic: messages come and mostly go, dests/durables/txns churn."""
    out: list[Record] = []
    for _ in range(n):
        x = rng.random()
        if x < 0.35:
            k = key(live.setdefault("next", 0))
            live["next"] += 1
            if rng.random() < 0.03:  # the same key again (replaces it), or with no interests
                k = key(rng.randrange(live["next"]))
                if rng.random() < 0.3:
                    out.append(MsgAdd(k, "q0", QUEUE, b"again", ()))
                    continue
            if rng.random() < 0.7:
                out.append(
                    MsgAdd(
                        k, f"q{rng.randrange(3)}", QUEUE, rng.randbytes(rng.randrange(60)), ("",)
                    )
                )
            else:
                ints = tuple(rng.sample(["d1", "d2", "d3"], rng.randrange(1, 4)))
                out.append(MsgAdd(k, "t1", TOPIC, rng.randbytes(20), ints))
        elif x < 0.65 and live.get("next"):
            # Mostly recent messages (a queue being consumed), sometimes any.
            low = max(0, live["next"] - 40) if rng.random() < 0.8 else 0
            k = key(rng.randrange(low, live["next"]))
            out.append(MsgSettle(k, rng.choice(["", "", "d1", "d2", "d3"])))
        elif x < 0.75 and live.get("next"):
            k = key(rng.randrange(live["next"]))
            out.append(MsgDelivered(k, rng.choice(["", "d1", "d2"]), rng.randrange(1, 5)))
        elif x < 0.80:
            out.append(DestAdd(f"q{rng.randrange(3)}", QUEUE, {"v": rng.randrange(100)}))
        elif x < 0.81:
            out.append(DestRemove(f"q{rng.randrange(3)}", QUEUE))
        elif x < 0.84:
            d = rng.choice(["d1", "d2", "d3"])
            out.append(DurableAdd(d, "c", d, "t1", None, rng.random() < 0.5, None))
        elif x < 0.85:
            out.append(DurableRemove(rng.choice(["d1", "d2", "d3"])))
        elif x < 0.90:
            out.append(TxnState(rng.randrange(5), rng.randrange(8), {"n": rng.randrange(9)}))
        elif x < 0.94:
            out.append(
                TxnSend(
                    rng.randrange(5),
                    key(10**6 + rng.randrange(10**6)),
                    "q0",
                    QUEUE,
                    rng.randbytes(30),
                )
            )
        elif x < 0.97:
            out.append(TxnAck(rng.randrange(5), key(rng.randrange(live.get("next", 1) or 1)), ""))
        else:
            out.append(TxnRemove(rng.randrange(5)))
    return out


@pytest.mark.parametrize("mode", ["delete-only", "compact"])
@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_traffic_matches_the_reference_model(tmp_path: Path, seed: int, mode: str) -> None:
    """Deleting dead segments and rewriting never change what loads (vs. ``replay``)."""
    rng = random.Random(seed)
    directory = tmp_path / "fs"
    written: list[Record] = []
    live: dict = {}
    for session in range(4):
        store = FileStore(
            directory,
            sync=rng.random() < 0.5,
            segment_size=rng.choice([200, 700, 3000]),
            compact_threshold=10**12 if mode == "delete-only" else rng.choice([500, 5000]),
        )
        s = Opened(store)
        assert s.state.repairs == []
        assert canon(s.state) == canon(replay(written)), session
        for _ in range(rng.randrange(3, 8)):
            turns = [
                random_records(rng, rng.randrange(1, 60), live) for _ in range(rng.randrange(1, 4))
            ]
            s.write_turns(turns)
            for t in turns:
                written.extend(t)
            if mode == "compact" and rng.random() < 0.2:
                store.compact()
        s.close()
        assert store.failed is None
    final = FileStore(directory, sync=False)
    state = final.load()
    final.close()
    assert state.repairs == []
    assert canon(state) == canon(replay(written))


@pytest.mark.parametrize("seed", range(max(1, SEEDS // 2)))
def test_every_intermediate_state_of_reclaiming_loads_right(tmp_path: Path, seed: int) -> None:
    """A crash between any two steps of deleting/rewriting loads the same state.

    The writer is driven directly (no thread); each time housekeeping makes a step
    durable (a directory fsync), a copy of the directory is loaded and compared.
    """
    rng = random.Random(seed)
    directory = tmp_path / "fs"
    store = FileStore(directory, sync=True, segment_size=400, compact_threshold=10**12)
    store.load()
    written: list[Record] = []
    live: dict = {}
    checks = 0
    checking = False
    real_fsync_dir = store.files.fsync_dir

    def fsync_dir_and_check() -> None:
        nonlocal checks
        real_fsync_dir()
        if checking:
            copy = tmp_path / f"copy{checks}"
            shutil.copytree(directory, copy)
            other = FileStore(copy, sync=False)
            state = other.load()
            other.close()
            assert canon(state) == canon(replay(written))
            checks += 1

    store.files.fsync_dir = fsync_dir_and_check  # type: ignore[method-assign]
    for step in range(60):
        batch = random_records(rng, rng.randrange(1, 40), live)
        written.extend(batch)
        store._write_batch(batch)
        checking = True
        if step % 10 == 9:
            store._compact_now()
        else:
            store.compactor.delete_dead_segments()
        checking = False
    store.close()
    assert checks >= 10


# -- helpers for the file-level tests -----------------------------------------------------


def seg_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.seg"))


def frames_of(path: Path) -> list[tuple[int, int]]:
    """(offset, size) of each framed record in a segment file (assumed intact)."""
    data = path.read_bytes()
    out, pos = [], len(MAGIC)
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "little")
        out.append((pos, HEADER_SIZE + length))
        pos += HEADER_SIZE + length
    return out


def write_session(directory: Path, *turns: list[Record], **kw) -> FileStore:
    """Open a store, write each group as its own batch, close it; returns the store."""
    store = FileStore(directory, **{"sync": True, **kw})
    s = Opened(store)
    for group in turns:
        s.write(*group)
    s.close()
    return store


def load(directory: Path, **kw) -> tuple[FileStore, object]:
    store = FileStore(directory, **{"sync": True, **kw})
    return store, store.load()


def keys(state) -> list[bytes]:
    return [m.key for m in state.messages]


# -- encoding ---------------------------------------------------------------------------


def test_every_record_encodes_and_decodes_exactly() -> None:
    records = [
        DestAdd("q", 1, {"a": [1, 2], "b": {"c": None}, "bin": b"\x00\x01", "t": True}),
        DestAdd("", 0, {}),
        DestRemove("q ✓", 2),
        DurableAdd("id", None, "n", "t", None, False, None),
        DurableAdd("id", "cid", "", "t", "a > 1", True, "sh"),
        DurableRemove("id"),
        MsgAdd(key(1), "q", 1, b"", ("",)),
        MsgAdd(b"", "t", 2, bytes(range(256)), ("a", "b", "ü")),
        MsgDelivered(key(1), "", 2**40),
        MsgSettle(key(1), "x"),
        TxnState(-(2**63), 2**31, {"xid": "ff", "n": 1.25}),
        TxnSend(2**63 - 1, key(2), "q", 1, b"\xff" * 10),
        TxnAck(1, key(3), ""),
        TxnRemove(0),
    ]
    for rec in records:
        payload = encode(rec)
        back = decode(payload, 0, len(payload))
        assert back == rec and type(back) is type(rec)
        assert [type(a) for a in back] == [type(a) for a in rec]
    assert decode(encode(CHECKPOINT), 0, len(encode(CHECKPOINT))) is CHECKPOINT
    fr = frame(encode(records[0]))
    assert int.from_bytes(fr[:4], "little") == len(fr) - HEADER_SIZE


# Frames as the store wrote them before its codec was built from the table of record
# kinds (broker/store/filecodec.py): existing stores must keep loading, byte for byte.
OLD_KEY = (1).to_bytes(32, "big")
OLD_FRAMES = [
    (
        DestAdd(
            name="q",
            dest_type=1,
            attributes={"a": [1, 2], "b": {"c": None}, "bin": b"\x00\x01", "t": True},
        ),
        bytes.fromhex(
            "4d000000c45fe2af01010000007101000000000000003b0000007b2261223a5b312c325d2c22"
            "62223a7b2263223a6e756c6c7d2c2262696e223a7b22246279746573223a224141453d227d2c"
            "2274223a747275657d"
        ),
    ),
    (
        DestRemove(name="q ✓", dest_type=2),
        bytes.fromhex("120000003c3dc1fc02050000007120e29c930200000000000000"),
    ),
    (
        DurableAdd(
            sub_id="id",
            client_id=None,
            name="n",
            topic="t",
            selector=None,
            no_local=False,
            share=None,
        ),
        bytes.fromhex(
            "1e000000baec35e103020000006964ffffffff010000006e0100000074ffffffff00ffffffff"
        ),
    ),
    (
        DurableAdd(
            sub_id="id",
            client_id="cid",
            name="",
            topic="t",
            selector="a > 1",
            no_local=True,
            share="sh",
        ),
        bytes.fromhex(
            "270000001f565d6203020000006964030000006369640000000001000000740500000061203e"
            "203101020000007368"
        ),
    ),
    (
        DurableRemove(sub_id="id"),
        bytes.fromhex("07000000c92f0bda04020000006964"),
    ),
    (
        MsgAdd(
            key=OLD_KEY,
            destination="q",
            dest_type=1,
            raw=b"hello",
            interests=("",),
        ),
        bytes.fromhex(
            "41000000b51568c8052000000000000000000000000000000000000000000000000000000000"
            "00000000000001010000007101000000000000000100000000000500000068656c6c6f"
        ),
    ),
    (
        MsgAdd(key=b"k", destination="t", dest_type=2, raw=b"\x00\xff", interests=("a", "b", "ü")),
        bytes.fromhex(
            "2b0000009922ee1a05010000006b010000007402000000000000000300010000006101000000"
            "6202000000c3bc0200000000ff"
        ),
    ),
    (
        MsgDelivered(
            key=OLD_KEY,
            interest="",
            count=1099511627776,
        ),
        bytes.fromhex(
            "310000002bdf0ac0062000000000000000000000000000000000000000000000000000000000"
            "00000000000001000000000000000000010000"
        ),
    ),
    (
        MsgSettle(
            key=OLD_KEY,
            interest="x",
        ),
        bytes.fromhex(
            "2a000000d8c92128072000000000000000000000000000000000000000000000000000000000"
            "000000000000010100000078"
        ),
    ),
    (
        TxnState(txn_id=-9223372036854775808, state=5, info={"xid": "ff", "n": 1.25}),
        bytes.fromhex(
            "2a00000006b6c32e0800000000000000800500000000000000150000007b22786964223a2266"
            "66222c226e223a312e32357d"
        ),
    ),
    (
        TxnSend(
            txn_id=9223372036854775807, key=b"k2", destination="q", dest_type=1, raw=b"\xff\xff\xff"
        ),
        bytes.fromhex(
            "23000000c55aeca009ffffffffffffff7f020000006b320100000071010000000000000003000000ffffff"
        ),
    ),
    (
        TxnAck(txn_id=1, key=b"k3", interest=""),
        bytes.fromhex("13000000088908c80a0100000000000000020000006b3300000000"),
    ),
    (
        TxnRemove(txn_id=0),
        bytes.fromhex("09000000738a5c640b0000000000000000"),
    ),
]


@pytest.mark.parametrize(("record", "old_frame"), OLD_FRAMES, ids=lambda v: type(v).__name__)
def test_frames_written_by_earlier_versions_still_decode(record: Record, old_frame: bytes) -> None:
    assert decode(old_frame, HEADER_SIZE, len(old_frame)) == record
    assert frame(encode(record)) == old_frame


def test_a_store_of_earlier_frames_loads(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    d.mkdir()
    (d / "0000000001.seg").write_bytes(MAGIC + b"".join(f for _, f in OLD_FRAMES))
    store = FileStore(d, sync=False)
    state = store.load()
    store.close()
    assert not state.repairs
    # The settle is for another interest, the TxnRemove for a transaction never opened.
    assert {m.key: m.interests for m in state.messages} == {
        OLD_KEY: {"": 2**40},
        b"k": {"a": 0, "b": 0, "ü": 0},
    }
    assert [d.name for d in state.destinations] == ["q"]
    assert state.durables == []
    assert {t.txn_id: (t.state, t.sends, t.acks) for t in state.transactions} == {
        -(2**63): (5, [], []),
        2**63 - 1: (0, [TxnSend(2**63 - 1, b"k2", "q", 1, b"\xff" * 3)], []),
        1: (0, [], [TxnAck(1, b"k3", "")]),
    }


def test_segments_roll_at_the_size_limit(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    write_session(d, *[[qmsg(i)] for i in range(50)], segment_size=500)
    files = seg_files(d)
    assert len(files) > 5
    assert all(f.read_bytes().startswith(MAGIC) for f in files)
    assert all(f.stat().st_size < 500 + 100 for f in files)
    _, state = load(d)
    assert keys(state) == [key(i) for i in range(50)]


# -- torn tails and corruption ----------------------------------------------------------


def _three_messages(d: Path) -> Path:
    write_session(d, [qmsg(1), qmsg(2)], [qmsg(3, raw=b"x" * 200)])
    [seg] = seg_files(d)
    return seg


@pytest.mark.parametrize("damage", ["garbage", "half-record", "flipped-byte", "partial-header"])
def test_torn_tail_is_truncated_and_appends_continue(tmp_path: Path, damage: str) -> None:
    d = tmp_path / "fs"
    seg = _three_messages(d)
    data = bytearray(seg.read_bytes())
    last_off, last_size = frames_of(seg)[-1]
    if damage == "garbage":
        data += os.urandom(37)
        good, expect_keys = len(data) - 37, [key(1), key(2), key(3)]
    elif damage == "half-record":
        data = data[: last_off + last_size // 2]
        good, expect_keys = last_off, [key(1), key(2)]
    elif damage == "flipped-byte":
        data[last_off + last_size - 5] ^= 0x40  # inside the payload: the crc catches it
        good, expect_keys = last_off, [key(1), key(2)]
    else:
        data += b"\x10\x00\x00"  # 3 bytes of the next header
        good, expect_keys = len(data) - 3, [key(1), key(2), key(3)]
    seg.write_bytes(bytes(data))
    store, state = load(d)
    store.close()
    assert keys(state) == expect_keys
    assert len(state.repairs) == 1
    assert (
        f"truncated {len(data) - good} bytes of a torn record at the end of segment {seg.name}"
        in (state.repairs[0])
    )
    assert seg.stat().st_size == good
    # Appending continues in the same file, and everything loads cleanly afterwards.
    write_session(d, [qmsg(4), MsgSettle(key(1), "")])
    assert seg_files(d) == [seg]
    _, state = load(d)
    assert state.repairs == []
    assert keys(state) == expect_keys[1:] + [key(4)]


def test_torn_header_of_a_new_segment(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    write_session(d, [qmsg(1)])
    torn = d / "0000000002.seg"
    torn.write_bytes(MAGIC[:3])  # crashed while writing the first bytes of a new segment
    store, state = load(d)
    store.close()
    assert keys(state) == [key(1)]
    assert "torn header" in state.repairs[0]
    write_session(d, [qmsg(2)])
    _, state = load(d)
    assert (keys(state), state.repairs) == ([key(1), key(2)], [])


def test_corruption_in_an_older_segment_is_skipped_and_reported(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    write_session(d, *[[qmsg(i, raw=b"p" * 40)] for i in range(30)], segment_size=300)
    files = seg_files(d)
    assert len(files) >= 4
    victim = files[1]
    in_victim = len(frames_of(victim))
    off, size = frames_of(victim)[0]
    data = bytearray(victim.read_bytes())
    data[off + size - 3] ^= 0xFF
    victim.write_bytes(bytes(data))
    before = victim.stat().st_size
    store, state = load(d)
    store.close()
    lost = set(range(len(frames_of(files[0])), len(frames_of(files[0])) + in_victim))
    assert keys(state) == [key(i) for i in range(30) if i not in lost]
    [line] = state.repairs
    assert f"corrupt record in segment {victim.name} at offset {off}" in line
    assert "skipped the remaining" in line
    assert victim.stat().st_size == before  # damage is kept, not truncated away


def test_corruption_inside_the_last_segment_is_not_taken_for_a_torn_tail(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    seg = _three_messages(d)
    off, size = frames_of(seg)[0]
    data = bytearray(seg.read_bytes())
    data[off + size - 1] ^= 1  # the first record; good ones follow it
    seg.write_bytes(bytes(data))
    store, state = load(d)
    store.close()
    assert keys(state) == []  # the rest of that segment is skipped...
    assert "corrupt record" in state.repairs[0]
    assert seg.stat().st_size == len(data)  # ...but not destroyed
    # New records go to a new segment, never after the damaged one; the damaged one,
    # once nothing in it is needed, is set aside rather than deleted.
    write_session(d, [qmsg(9)])
    assert [f.name for f in seg_files(d)] == ["0000000002.seg"]
    assert (d / (seg.name + ".damaged")).read_bytes() == bytes(data)
    _, state = load(d)
    assert (keys(state), state.repairs) == ([key(9)], [])


def test_foreign_file_with_segment_name_is_skipped(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    write_session(d, [qmsg(1)])
    (d / "0000000002.seg").write_bytes(b"not a segment at all")
    store, state = load(d)
    store.close()
    assert keys(state) == [key(1)]
    assert "does not start with the store header" in state.repairs[0]


# -- group commit -----------------------------------------------------------------------


def test_group_commit_shares_fsyncs(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "fs", sync=True)
    s = Opened(store)
    base = store.fsyncs
    s.write_turns([qmsg(i) for i in range(j, j + 10)] for j in range(0, 1000, 10))
    s.close()
    assert store.records_written == 1000
    assert 1 <= store.fsyncs - base < 1000
    assert store.batches < 1000


def test_group_commit_few_turns(tmp_path: Path) -> None:
    """1,000 records over 4 loop turns: a handful of fsyncs, not 1,000."""
    store = FileStore(tmp_path / "fs", sync=True)
    s = Opened(store)
    s.write_turns([[qmsg(i) for i in range(j, j + 250)] for j in range(0, 1000, 250)])
    s.close()
    assert 1 <= store.fsyncs <= 4 + 2  # per batch, plus the directory when a segment starts


def test_records_nobody_waits_for_ride_with_the_next_sync(tmp_path: Path) -> None:
    """With sync, turns of settles (no after_durable) are held back and share the next
    batch someone waits for; alone they go within defer_delay."""
    store = FileStore(tmp_path / "fs", sync=True)
    s = Opened(store)
    s.write(*[qmsg(i) for i in range(10)])
    before = store.batches

    async def go() -> None:
        for i in range(5):  # five turns of acknowledgements
            store.submit([MsgSettle(key(i), "")])
            await asyncio.sleep(0)
        assert store.batches == before  # held back
        done = s.loop.create_future()
        store.submit([qmsg(20)])
        store.after_durable(lambda: done.set_result(store.records_written))
        await asyncio.wait_for(done, 10)
        assert store.batches == before + 1  # one write, one sync for all six turns
        store.submit([MsgSettle(key(5), "")])
        await asyncio.sleep(store.defer_delay * 5)
        assert store.batches == before + 2  # nobody waited: it went anyway

    s.loop.run_until_complete(go())
    s.close()
    _, state = load(tmp_path / "fs")
    assert keys(state) == [key(i) for i in range(6, 10)] + [key(20)]


def test_inline_writes_for_a_lone_waiter_and_the_thread_for_many(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "fs", sync=True, inline=True)
    # The waiter rule only: on a busy disk five syncs over inline_max_sync in a row would
    # move the writes to the thread as well (test_slow_syncs_move_the_writes_off_the_loop).
    store.inline_max_sync = 60.0
    s = Opened(store)

    async def turns(n: int, per_turn: int) -> None:
        for t in range(n):
            futs = []
            for j in range(per_turn):
                fut = s.loop.create_future()
                store.submit([qmsg(1000 * per_turn + 10 * t + j)])
                store.after_durable(lambda f=fut: f.set_result(None))
                futs.append(fut)
            await asyncio.wait_for(asyncio.gather(*futs), 10)

    s.loop.run_until_complete(turns(20, 1))
    assert store.inline_batches >= 19  # one producer: written on the loop
    inline = store.inline_batches
    s.loop.run_until_complete(turns(20, 8))
    assert store.inline_batches - inline <= 5  # eight at a time: the writer thread syncs
    s.close()
    _, state = load(tmp_path / "fs")
    assert len(state.messages) == 20 + 160


@contextmanager
def _slow_datasync(store: FileStore) -> Iterator[None]:
    """Every data sync of ``store`` 5 ms slower (a busy disk), until the block ends."""
    real = store.files.datasync

    def slow(fd: int) -> None:
        time.sleep(0.005)
        real(fd)

    store.files.datasync = slow  # type: ignore[method-assign]
    try:
        yield
    finally:
        store.files.datasync = real  # type: ignore[method-assign]


def test_slow_syncs_move_the_writes_off_the_loop(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "fs", sync=True, inline=True)
    s = Opened(store)
    with _slow_datasync(store):
        for i in range(12):
            s.write(qmsg(i))
    # The first inline_slow of them were written on the loop, then the thread took over.
    assert store.inline_batches <= Store.inline_slow + 1
    time.sleep(store.inline_backoff)
    inline = store.inline_batches
    s.write(qmsg(100))
    assert store.inline_batches == inline + 1  # fast again: back on the loop
    s.close()


def test_large_batches_do_not_judge_the_disk(tmp_path: Path) -> None:
    """A batch of more than inline_judged_max records may take longer than inline_max_sync
    to encode whatever the disk does (a consumer's acknowledgements after a backlog): it
    does not count as a slow sync.  Before, five in a row sent every lone producer's
    writes through the writer thread for a second (two thread switches each)."""
    # No zero-filling ahead: its jobs hold the files in the writer thread now and then,
    # which sends a batch there whatever the rule says.
    store = FileStore(tmp_path / "fs", sync=True, inline=True, preallocate=False)
    s = Opened(store)
    big = store.inline_judged_max + 1
    with _slow_datasync(store):
        for i in range(2 * Store.inline_slow):
            s.write(*[qmsg(1000 * i + j) for j in range(big)])
    inline = store.inline_batches
    s.write(qmsg(1))
    assert store.inline_batches == inline + 1  # still on the loop: no back-off began
    s.close()


def test_no_data_fsync_without_sync(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "fs", sync=False)
    s = Opened(store)
    s.write_turns([[qmsg(i) for i in range(j, j + 100)] for j in range(0, 1000, 100)])
    s.close()
    assert store.fsyncs <= 1  # only the directory, when the segment was created


def test_measure_fsync_rate(tmp_path: Path) -> None:
    rate = measure_fsync_rate(tmp_path, seconds=0.05)
    assert rate > 0
    assert list(tmp_path.iterdir()) == []
    rate = measure_sync_rate(tmp_path, seconds=0.05)
    assert rate > 0
    assert list(tmp_path.iterdir()) == []


# -- preallocated segments (sync on) ----------------------------------------------------


def test_sync_preallocates_and_closed_segments_are_trimmed(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    store = FileStore(d, sync=True, segment_size=64 * 1024)
    assert store.preallocate and not FileStore(d, sync=False).preallocate
    s = Opened(store)
    s.write(*[qmsg(i, raw=b"p" * 1000) for i in range(10)])
    [seg] = seg_files(d)
    (num, size, live) = store.segments()[0]
    assert live == 10
    assert seg.stat().st_size == 64 * 1024 > size  # zeros ahead of the records
    assert set(seg.read_bytes()[size:]) == {0}
    s.write_turns([[qmsg(i, raw=b"p" * 1000)] for i in range(10, 200)])  # rolls
    files = seg_files(d)
    assert len(files) > 2
    logical = {n: sz for n, sz, _ in store.segments()}
    for f in files[:-1]:  # closed segments: no zeros left
        assert f.stat().st_size == logical[int(f.name[:-4])]
    s.close()
    assert all(f.stat().st_size == logical[int(f.name[:-4])] for f in seg_files(d))
    _, state = load(d)
    assert keys(state) == [key(i) for i in range(200)]
    assert state.repairs == []


def _snapshot(src: Path, dst: Path) -> Path:
    """The directory as a crash of the broker process would leave it (the page cache
    survives a SIGKILL): a copy taken while the store is open."""
    shutil.copytree(src, dst)
    return dst


def test_kill_with_a_preallocated_tail_loses_nothing(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    store = FileStore(d, sync=True)
    s = Opened(store)
    s.write_turns([[qmsg(i)] for i in range(20)])
    s.write(MsgSettle(key(3), ""))
    crashed = _snapshot(d, tmp_path / "crashed")
    s.close()
    [seg] = seg_files(crashed)
    assert seg.stat().st_size >= 1 << 20  # the zeros are there, as after a kill
    # Restart on the crashed copy: all of it, no repair (zeros are not damage), and
    # appends go on in the same preallocated segment, right after the last record.
    store2 = FileStore(crashed, sync=True)
    s2 = Opened(store2)
    assert keys(s2.state) == [key(i) for i in range(20) if i != 3]
    assert s2.state.repairs == []
    s2.write(qmsg(100), MsgSettle(key(0), ""))
    again = _snapshot(crashed, tmp_path / "again")
    s2.close()
    assert seg_files(crashed) == [crashed / seg.name]
    for where in (again, crashed):
        _, state = load(where)
        assert keys(state) == [key(i) for i in range(1, 20) if i != 3] + [key(100)]
        assert state.repairs == []


@pytest.mark.parametrize("damage", ["half-record", "stray-block", "zero-header"])
def test_torn_tail_of_a_preallocated_segment(tmp_path: Path, damage: str) -> None:
    """After a power loss the unsynced end of a batch may be partly on disk: a cut
    record, or a later block of it past a zeroed gap.  It is cut off (nothing of it was
    confirmed) and can never come back when new records reach that offset."""
    d = tmp_path / "fs"
    store = FileStore(d, sync=True)
    s = Opened(store)
    s.write_turns([[qmsg(i)] for i in range(5)])
    crashed = _snapshot(d, tmp_path / "crashed")
    s.close()
    [seg] = seg_files(crashed)
    end = store.segments()[0][1]  # the logical end: all confirmed records are before it
    data = bytearray(seg.read_bytes())
    extra = frame(encode(qmsg(7)))
    if damage == "half-record":
        data[end : end + len(extra) // 2] = extra[: len(extra) // 2]
        expect_repair = "torn record"
    elif damage == "stray-block":
        # The batch's first block never made it; a later one, with a whole record, did.
        data[end + 4096 : end + 4096 + len(extra)] = extra
        expect_repair = "torn record"
    else:
        data[:] = bytes(len(data))  # a new segment whose header never reached the disk
        end, expect_repair = 0, ""
    seg.write_bytes(bytes(data))
    store2, state = load(crashed)
    store2.close()
    assert keys(state) == ([key(i) for i in range(5)] if end else [])
    if expect_repair:
        [line] = state.repairs
        assert expect_repair in line and seg.name in line
    else:
        assert state.repairs == []
    # New records go right where the good ones end; the stray bytes stay gone.
    s3 = Opened(FileStore(crashed, sync=True))
    s3.write_turns([[qmsg(i, raw=b"n" * 600)] for i in range(10, 30)])
    s3.close()
    _, state = load(crashed)
    assert state.repairs == []
    assert key(7) not in keys(state)
    assert keys(state)[-20:] == [key(i) for i in range(10, 30)]


# -- reclaiming space -------------------------------------------------------------------


def test_fully_settled_segments_are_deleted(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    store = FileStore(d, sync=False, segment_size=2000, compact_threshold=10**12)
    s = Opened(store)
    s.write(DestAdd("q1", QUEUE, {}))
    for j in range(0, 400, 20):  # produce and consume: every message settled soon after
        s.write_turns([[qmsg(i, raw=b"m" * 60) for i in range(j, j + 20)]])
        s.write_turns([[MsgSettle(key(i), "") for i in range(j, j + 20) if i > 1]])
    store.flush()
    assert store.segments_deleted > 5
    assert store.compactions == 0
    # The first segment holds the DestAdd and two live messages: it stays (and so do the
    # few after it that hold settles of its other messages); most others went.
    remaining = [n for n, _, _ in store.segments()]
    assert remaining[0] == 1
    assert len(remaining) < (remaining[-1] - 1) / 2
    s.close()
    _, state = load(d)
    assert keys(state) == [key(0), key(1)]
    assert [x.name for x in state.destinations] == ["q1"]


def test_compaction_reclaims_space(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    store = FileStore(d, sync=False, segment_size=64 * 1024, compact_threshold=10**12)
    s = Opened(store)
    n = 20_000
    s.write(
        DestAdd("q1", QUEUE, {"maxNumMsgs": 100}),
        DurableAdd("d1", "c", "n", "t1", None, False, None),
    )
    s.write_turns(
        [[qmsg(i, raw=b"%05d" % i * 10) for i in range(j, j + 1000)] for j in range(0, n, 1000)]
    )
    survivors = [i for i in range(n) if i % 20 == 7]  # 5% live, spread over every segment
    s.write_turns(
        [
            [MsgSettle(key(i), "") for i in range(j, j + 1000) if i % 20 != 7]
            + [MsgDelivered(key(i), "", 2) for i in range(j, j + 1000) if i % 40 == 7]
            for j in range(0, n, 1000)
        ]
    )
    s.write(TxnState(5, 1, {"xid": "aa"}), TxnSend(5, key(n + 1), "q1", QUEUE, b"held"))
    store.flush()
    before_files = seg_files(d)
    before = store.disk_usage()
    assert len(before_files) > 20
    assert store.segments_deleted == 0  # every segment still holds a live message

    store.compact()
    after_files = seg_files(d)
    assert store.compactions == 1
    assert not set(after_files) & set(before_files)  # every old segment is gone
    assert len(after_files) == 1
    assert store.disk_usage() < before * 0.1
    # Delivery goes on after the compaction.
    s.write(qmsg(n + 2), MsgSettle(key(survivors[0]), ""))
    s.close()

    _, state = load(d)
    assert state.repairs == []
    expect = survivors[1:] + [n + 2]
    assert keys(state) == [key(i) for i in expect]
    assert [m.interests[""] for m in state.messages] == [2 if i % 40 == 7 else 0 for i in expect]
    assert [m.raw for m in state.messages[:-1]] == [b"%05d" % i * 10 for i in survivors[1:]]
    assert state.destinations == [DestAdd("q1", QUEUE, {"maxNumMsgs": 100})]
    assert [x.sub_id for x in state.durables] == ["d1"]
    [txn] = state.transactions
    assert (txn.txn_id, txn.state, txn.info, [x.raw for x in txn.sends]) == (
        5,
        1,
        {"xid": "aa"},
        [b"held"],
    )


def test_compaction_keeps_open_interests_of_topic_messages(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    store = FileStore(d, sync=True, segment_size=1000)
    s = Opened(store)
    s.write(MsgAdd(key(1), "t1", TOPIC, b"x", ("a", "b", "c")), MsgDelivered(key(1), "c", 3))
    s.write(MsgSettle(key(1), "b"))
    store.compact()
    s.close()
    _, state = load(d)
    assert [(m.key, m.interests) for m in state.messages] == [(key(1), {"a": 0, "c": 3})]


def test_automatic_compaction(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    store = FileStore(d, sync=False, segment_size=4096, compact_threshold=16 * 1024)
    s = Opened(store)
    # A few long-lived messages keep every segment alive; the rest is consumed.
    for j in range(0, 3000, 100):
        s.write(*[qmsg(i, raw=b"r" * 50) for i in range(j, j + 100)])
        s.write(*[MsgSettle(key(i), "") for i in range(j, j + 100) if i % 50])
    store.flush()
    assert store.compactions >= 1
    assert store.disk_usage() < 3000 * 60 * 0.5
    s.close()
    _, state = load(d)
    assert keys(state) == [key(i) for i in range(0, 3000, 50)]


# -- crashes during compaction ----------------------------------------------------------


def _state_for_crash_tests(d: Path) -> tuple[FileStore, list[Record]]:
    records: list[Record] = [DestAdd("q1", QUEUE, {"v": 1})]
    records += [qmsg(i, raw=b"c" * 30) for i in range(200)]
    records += [MsgSettle(key(i), "") for i in range(200) if i % 10]
    records += [MsgDelivered(key(10), "", 4), TxnState(1, 2, {}), TxnAck(1, key(20), "")]
    store = FileStore(d, sync=True, segment_size=1024, compact_threshold=10**12)
    s = Opened(store)
    s.write_turns([records[i : i + 50] for i in range(0, len(records), 50)])
    s.close()
    return store, records


@pytest.mark.parametrize("leftover", ["all-old", "last-old", "first-old"])
def test_crash_after_the_rename_before_old_segments_were_deleted(
    tmp_path: Path, leftover: str
) -> None:
    d = tmp_path / "fs"
    _, records = _state_for_crash_tests(d)
    saved = tmp_path / "saved"
    shutil.copytree(d, saved)
    old = seg_files(saved)
    store = FileStore(d, sync=True, segment_size=1024)
    store.load()
    store.compact()
    store.close()
    [new] = seg_files(d)
    # The crash: some or all old segments are still there next to the new one.
    keep = {"all-old": old, "last-old": old[-1:], "first-old": old[:1]}[leftover]
    for f in keep:
        shutil.copy(f, d / f.name)
    store, state = load(d)
    store.close()
    assert canon(state) == canon(replay(records))
    assert "superseded by compacted segment" in state.repairs[0]
    assert seg_files(d) == [new]


def test_crash_before_the_rename_leaves_a_temp_file(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    _, records = _state_for_crash_tests(d)
    # A complete rewrite that was not renamed yet, and a half-written one.
    saved = tmp_path / "saved"
    shutil.copytree(d, saved)
    store = FileStore(d, sync=True)
    store.load()
    store.compact()
    store.close()
    [new] = seg_files(d)
    os.replace(new, d / (new.name + ".tmp"))
    for f in seg_files(saved):
        shutil.copy(f, d / f.name)
    (d / "0000009999.seg.tmp").write_bytes((d / (new.name + ".tmp")).read_bytes()[:100])
    store, state = load(d)
    store.close()
    assert canon(state) == canon(replay(records))
    assert sum("did not finish" in r for r in state.repairs) == 2
    assert not list(d.glob("*.tmp"))


def test_compaction_when_a_live_record_no_longer_reads_back(tmp_path: Path) -> None:
    """A damaged live record aborts the rewrite; the store keeps working on the old files."""
    d = tmp_path / "fs"
    store = FileStore(d, sync=True, segment_size=400)
    s = Opened(store)
    s.write_turns([[qmsg(i, raw=b"z" * 40)] for i in range(10)])
    first = seg_files(d)[0]
    data = bytearray(first.read_bytes())
    data[-2] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(OSError):
        store.compact()
    assert not list(d.glob("*.tmp"))
    s.write(qmsg(99))
    s.close()
    assert store.failed is None
    _, state = load(d)
    assert key(99) in keys(state)


# -- reset and lifecycle ------------------------------------------------------------------


def test_reset_empties_the_directory(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    write_session(d, [qmsg(1)], [qmsg(2)], segment_size=100)
    (d / "0000000050.seg.tmp").write_bytes(b"x")
    store = FileStore(d, sync=True)
    store.reset()
    assert list(d.iterdir()) == []
    state = store.load()
    assert state.messages == []
    store.close()


def test_write_without_load_builds_the_index_first(tmp_path: Path) -> None:
    d = tmp_path / "fs"
    write_session(d, [qmsg(1)])
    store = FileStore(d, sync=True)
    store._write_batch([MsgSettle(key(1), ""), qmsg(2)])  # as if started without load()
    store.close()
    _, state = load(d)
    assert keys(state) == [key(2)]


def test_load_of_many_small_records_is_linear(tmp_path: Path) -> None:
    """100k records (the full 1M is in the report's benchmark) load with the right state."""
    d = tmp_path / "fs"
    store = FileStore(d, sync=False)
    store.load()
    for j in range(0, 50_000, 5000):
        store._write_batch([qmsg(i, raw=b"") for i in range(j, j + 5000)])
        store._write_batch([MsgSettle(key(i), "") for i in range(j, j + 5000) if i % 100])
    store.close()
    store, state = load(d)
    store.close()
    assert keys(state) == [key(i) for i in range(0, 50_000, 100)]
