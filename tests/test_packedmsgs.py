"""The file store's packed table of live messages (broker/store/packedmsgs.py) against a
plain dict: the same lookups, the same order, through rebuilds and record compaction.
(The file store's own tests, tests/test_filestore.py, run it under every record kind.)"""

from __future__ import annotations

import random

import pytest

from broker.store.packedmsgs import Msg, PackedMsgs

pytestmark = pytest.mark.fast


def _key(n: int) -> bytes:
    """A key of a source of its own."""
    return n.to_bytes(4, "big") * 8


def _skey(n: int, source: int) -> bytes:
    """A key as a producer makes them: timestamp, source (address and port), sequence;
    consecutive numbers may share a timestamp."""
    return (n // 3).to_bytes(8, "big") + bytes([source]) * 20 + n.to_bytes(4, "big")


def _loc(m: Msg) -> tuple[int, int, int]:
    return m.seg, m.off, m.size


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_match_a_dict(seed: int) -> None:
    rng = random.Random(seed)
    t = PackedMsgs()
    model: dict[bytes, tuple[int, int, int, str, int, tuple]] = {}  # in first-add order
    nxt = 0
    for _ in range(6000):
        x = rng.random()
        if x < 0.45 or not model:
            # New messages; sometimes a key that is not 32 bytes, or several interests.
            x = rng.random()
            if x < 0.02:
                key = b"odd-%d" % nxt
            elif x < 0.5:
                key = _key(nxt)
            else:
                key = _skey(nxt, rng.randrange(3))
            nxt += 1
            dest = rng.choice(["q1", "q2"])
            loc = (rng.randrange(1, 50), rng.randrange(1 << 20), rng.randrange(40, 2000))
            if rng.random() < 0.9:
                assert t.add(key, *loc, dest, 1, "")
                model[key] = (*loc, dest, 1, ("", 0, -1))
            else:
                ints = ["a", 0, -1, "b", 0, -1]
                t.put(key, Msg(*loc, dest, 2, ints))
                model[key] = (*loc, dest, 2, tuple(ints))
            assert not t.add(key, 1, 2, 3, dest, 1, "")  # there already: nothing changes
        else:
            key = rng.choice(list(model))
            y = rng.random()
            if y < 0.4:
                del t[key]
                del model[key]
            elif y < 0.7:
                taken = t.take(key, "")
                seg, _off, size, dest, dtype, ints = model[key]
                if key in t.full or ints[0] != "":
                    assert taken is None
                else:
                    assert taken == (seg, size, dest, dtype)
                    del model[key]
            else:  # touched: unpacked for good, changes kept
                m = t.get(key)
                assert m is not None and _loc(m) == model[key][:3]
                m.off += 1
                seg, off, size, dest, dtype, ints = model[key]
                model[key] = (seg, off + 1, size, dest, dtype, ints)
        assert len(t) == len(model)
    assert [k for k, _ in t.items()] == list(model)
    for k, m in t.items():
        seg, off, size, dest, dtype, ints = model[k]
        assert (_loc(m), m.dest, m.dtype, tuple(m.ints)) == ((seg, off, size), dest, dtype, ints)
        assert t.where(k) == (seg, off, size) and k in t
    assert t.where(_key(nxt)) is None and _key(nxt) not in t and t.get(_key(nxt)) is None


def test_a_drained_table_lets_its_records_go() -> None:
    """Messages settled in order (a queue drained) leave dead records; the rebuild that
    new messages bring (once the hash table is 2/3 full, settled slots included) drops
    them, renumbering the unpacked ones, and the order stays."""
    t = PackedMsgs()
    for i in range(20_000):
        t.add(_key(i), 1, i * 100, 100, "q", 1, "")
    assert (len(t.recs) + (len(t.slots) + len(t.hs)) * 4) / len(t) < 64  # bytes each
    t.get(_key(19_000))  # one unpacked
    for i in range(19_000):
        assert t.take(_key(i), "") == (1, 100, "q", 1)
    for i in range(20_000, 23_000):
        t.add(_key(i), 2, i, 100, "q", 1, "")
    assert t.n < 5_000 and len(t.slots) < 16_384  # the dead records went
    assert [k for k, _ in t.items()] == [_key(i) for i in range(19_000, 23_000)]
    assert t.where(_key(19_000)) == (1, 1_900_000, 100) and t.where(_key(5)) is None


def test_key_sources_are_counted_and_given_up() -> None:
    """A record holds its key's source as a number: one per live source, given up with
    its last record and used again; when every number is taken, a message of a new
    source is kept whole (a Msg), and found."""
    t = PackedMsgs()
    for i in range(300):
        assert t.add(_skey(i, i % 3), 1, i, 100, "q", 1, "")
    assert sorted(t.mid_ids) == [bytes([s]) * 20 for s in range(3)] and not t.full
    assert (len(t.recs) + (len(t.slots) + len(t.hs)) * 4) / len(t) < 48  # bytes each
    for i in range(0, 300, 3):  # all of source 0
        assert t.take(_skey(i, 0), "") == (1, 100, "q", 1)
    assert sorted(t.mid_ids) == [bytes([s]) * 20 for s in (1, 2)] and t.mid_free == [0]
    assert t.where(_skey(0, 0)) is None and t.where(_skey(1, 1)) == (1, 1, 100)
    assert t.add(_skey(1000, 9), 2, 0, 50, "q", 1, "")
    assert t.mid_ids[bytes([9]) * 20] == 0  # the number given up, used again
    m = t.get(_skey(4, 1))  # unpacked: the source counts one record less
    assert m is not None and t.mid_live[t.mid_ids[bytes([1]) * 20]] == 99
    keys = [k for k, _ in t.items()]
    assert keys == [_skey(i, i % 3) for i in range(300) if i % 3] + [_skey(1000, 9)]
    full = PackedMsgs()
    for i in range(0x10000):
        full._mid(i.to_bytes(20, "big"))
        full.mid_live[i] = 1
    assert full.add(_skey(5, 7), 3, 4, 5, "q", 1, "") and _skey(5, 7) in full.full
    assert full.where(_skey(5, 7)) == (3, 4, 5) and full.take(_skey(5, 7), "") is None
