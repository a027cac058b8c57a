"""The file store's packed table of live messages (broker/store/packedmsgs.py) against a
plain dict: the same lookups, the same order, through rebuilds and record compaction.
(The file store's own tests, tests/test_filestore.py, run it under every record kind.)"""

from __future__ import annotations

import random

import pytest

from broker.store.packedmsgs import Msg, PackedMsgs

pytestmark = pytest.mark.fast


def _key(n: int) -> bytes:
    return n.to_bytes(4, "big") * 8


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
            key = _key(nxt) if rng.random() > 0.02 else b"odd-%d" % nxt
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
