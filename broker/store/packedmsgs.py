"""The file store's table of live messages, packed: about 45 bytes each, not 250.

The file store's index (``fileindex.Index``) knows, for each live message, where its
MsgAdd frame is and which interests are still open.  A backlog is mostly messages added
with one interest and not touched since; a ``Msg`` object and a dict entry for each
cost some 250 bytes (250 MB for a million waiting messages, more than the memory a
paging broker is meant to use).  :class:`PackedMsgs` keeps each of those as one
fixed-size 28-byte record in a bytearray (the key's timestamp and sequence, segment,
offset, frame size, a number for its destination, type and interest and one for the
key's source) found through an open-addressing hash table of record numbers (an
``array('I')``).

A key (a SysMessageID) is a timestamp, a source (the producer's IP address and port: 20
bytes) and a sequence number.  Few sources are live at once, so a record holds its
key's source as a number into ``mids``, counted, and given up once no record uses it.

A message that is touched (a delivery count, a partial settle, added again, several
interests, or a key that is not 32 bytes) becomes a :class:`Msg` object in ``full``;
its record stays, marked, so the records' order is still the order messages were first
added (the order recovery gives them back); ``fkeys`` holds its key.

Readers on other threads (``FileStore.holds``, ``read_bodies``) look up without the
lock, as they did in the dict: a message goes into ``full`` before its slot is given
up, a rebuild makes new arrays and swaps them in with one assignment, and the reader of
a body checks the frame it reads.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator

KEY = 32  # bytes of a message key (a SysMessageID)
_MID = slice(8, 28)  # a key's source: between its timestamp and its sequence number
# The key's timestamp and sequence number, segment, offset, frame size, group, source.
REC = struct.Struct("<12sIIIHH")
W = REC.size
_GRP = W - 4  # the group's offset in a record
_SRC = W - 2  # the source's
_LOC = struct.Struct("<IIIHH")  # a record after its key
_NO_MID = bytes(25)  # matches no key's source (see add)
_MAX_MIDS = 0x10000
DEAD = 0  # group of a record whose message is gone
FULL = 0xFFFF  # group of a record whose message is a Msg in ``full``
_FULL = FULL.to_bytes(2, "little")
_DEAD = DEAD.to_bytes(2, "little")
_MAX_GROUPS = FULL - 1
EMPTY = 0  # a hash slot never used
TOMB = 0xFFFFFFFF  # a hash slot whose record went
NOT = 0x80000000  # the hash kept for a record that is not packed (a key's: below)
_U32_MAX = 0xFFFFFFFF


class Msg:
    """A live message: where its MsgAdd frame is, and its open interests.

    ``ints`` is flat ``[interest, delivery count, segment of the latest MsgDelivered or
    -1, ...]`` (a shared tuple while it is one untouched interest); ``extra`` lists the
    segments holding its partial settles; ``first`` is the segment of the first MsgAdd
    if the message was added again since (-1 if not).  ``pos``: its record number in a
    :class:`PackedMsgs` (-1 when not in one).
    """

    __slots__ = ("seg", "off", "size", "dest", "dtype", "ints", "extra", "first", "raw", "pos")

    def __init__(
        self, seg: int, off: int, size: int, dest: str, dtype: int, ints: tuple | list
    ) -> None:
        self.seg = seg
        self.off = off
        self.size = size
        self.dest = dest
        self.dtype = dtype
        self.ints = ints
        self.extra: list[int] | None = None
        self.first = -1
        self.raw: object = None
        self.pos = -1


class PackedMsgs:
    """Live messages by key, in the order they were first added (see the module)."""

    def __init__(self) -> None:
        self.recs = bytearray()  # W bytes per record, in order
        self.n = 0  # records, dead ones included
        self.live = 0
        self.full: dict[bytes, Msg] = {}
        self.fkeys: dict[int, bytes] = {}  # record number -> key, of each one in ``full``
        # Key sources: number -> 20 bytes (b"" when free), back, and live records of each.
        self.mids: list[bytes] = []
        self.mid_ids: dict[bytes, int] = {}
        self.mid_live: list[int] = []
        self.mid_free: list[int] = []
        self._lm = _NO_MID  # the source of the latest add, and its number
        self._lp = 0
        # group -> (destination, type, the shared ints of one untouched interest)
        self.groups: list[tuple[str, int, tuple]] = [("", 0, ())]
        self.group_ids: dict[tuple[str, int, str], int] = {}
        # The group of the latest add: interest, destination, type, number.
        self._li: str | None = None
        self._ld: str | None = None
        self._lt = 0
        self._lg = 0
        self.slots = array("I", bytes(4 * 8))  # record number + 1, EMPTY or TOMB
        # Per record: the low 31 bits of its key's hash, or NOT when it is not packed
        # (settled, or a Msg in ``full``): what a rebuild places it by.
        self.hs = array("I")
        self.used = 0  # slots not EMPTY
        self.limit = 5  # ``used`` that calls for a rebuild (2/3 of the slots)
        # What a reader on another thread takes at once (replaced by a rebuild).
        self._t: tuple[array, bytearray] = (self.slots, self.recs)

    def __len__(self) -> int:
        return self.live

    def __contains__(self, key: bytes) -> bool:
        return self.where(key) is not None

    # -- lookups ---------------------------------------------------------------------

    def _lookup(self, key: bytes) -> tuple[int, int]:
        """(slot, record number) of ``key``'s packed record, or (-1, -1)."""
        p = self.mid_ids.get(key[_MID])
        if p is None:
            return -1, -1
        k12 = key[:8] + key[28:]
        slots, recs = self.slots, self.recs
        mask = len(slots) - 1
        i = hash(key) & mask
        while True:
            v = slots[i]
            if v == EMPTY:
                return -1, -1
            if v != TOMB:
                o = (v - 1) * W
                if recs.startswith(k12, o) and recs[o + _SRC] | recs[o + _SRC + 1] << 8 == p:
                    return i, v - 1
            i = (i + 1) & mask

    def where(self, key: bytes) -> tuple[int, int, int] | None:
        """(segment, offset, frame size) of ``key``'s MsgAdd, or None.  Safe on another
        thread than the writer's (nothing is changed)."""
        m = self.full.get(key)
        if m is not None:
            return m.seg, m.off, m.size
        slots, recs = self._t
        p = self.mid_ids.get(key[_MID])
        if p is not None:
            k12 = key[:8] + key[28:]
            mask = len(slots) - 1
            i = hash(key) & mask
            while True:
                v = slots[i]
                if v == EMPTY:
                    break
                if v != TOMB:
                    o = (v - 1) * W
                    rec = recs[o : o + W]  # one copy: consistent under the GIL
                    if rec[:12] == k12:
                        seg, off, size, g, src = _LOC.unpack_from(rec, 12)
                        if src == p:
                            if g != DEAD and g != FULL:
                                return seg, off, size
                            break
                i = (i + 1) & mask
        m = self.full.get(key)  # moved there meanwhile
        return None if m is None else (m.seg, m.off, m.size)

    def get(self, key: bytes) -> Msg | None:
        """The message stored under ``key``, as a Msg the caller may change (a packed
        one is unpacked into ``full`` for good)."""
        m = self.full.get(key)
        if m is not None:
            return m
        s, r = self._lookup(key)
        if r < 0:
            return None
        _k, seg, off, size, g, src = REC.unpack_from(self.recs, r * W)
        dest, dtype, ints = self.groups[g]
        m = Msg(seg, off, size, dest, dtype, ints)
        m.pos = r
        self.fkeys[r] = key
        self.full[key] = m  # before the slot goes: see where()
        o = r * W
        self.recs[o + _GRP : o + _SRC] = _FULL
        self.hs[r] = NOT
        self.slots[s] = TOMB
        self._unref(src)
        return m

    def _key(self, rec: bytes | bytearray, o: int, src: int) -> bytes:
        """The key of the packed record at ``o`` whose source is ``src``."""
        return bytes(rec[o : o + 8]) + self.mids[src] + bytes(rec[o + 8 : o + 12])

    def items(self) -> Iterator[tuple[bytes, Msg]]:
        """(key, message) of each live one in order.  A packed one comes as a copy:
        the caller may drop it (``del``), not keep changes to it.  Deleting while
        iterating is allowed, adding is not."""
        full, fkeys, groups = self.full, self.fkeys, self.groups
        for r in range(self.n):
            o = r * W
            recs = self.recs
            g = recs[o + _GRP] | recs[o + _GRP + 1] << 8
            if g == DEAD:
                continue
            if g == FULL:
                key = fkeys[r]
                yield key, full[key]
            else:
                _k, seg, off, size, _g, src = REC.unpack_from(recs, o)
                dest, dtype, ints = groups[g]
                yield self._key(recs, o, src), Msg(seg, off, size, dest, dtype, ints)

    def locations(self) -> Iterator[tuple[bytes, int, int, int, str, int, tuple | list]]:
        """(key, segment, offset, frame size, destination, type, ints) of each live
        message in order: ``items`` without making objects (recovery reads them all)."""
        full, fkeys, groups, mids = self.full, self.fkeys, self.groups, self.mids
        # (iter_unpack holds the bytearray: nothing may add while this runs.)
        for r, (k12, seg, off, size, g, src) in enumerate(REC.iter_unpack(self.recs)):
            if g == DEAD:
                continue
            if g == FULL:
                key = fkeys[r]
                m = full[key]
                yield key, m.seg, m.off, m.size, m.dest, m.dtype, m.ints
            else:
                dest, dtype, ints = groups[g]
                yield k12[:8] + mids[src] + k12[8:], seg, off, size, dest, dtype, ints

    # -- changes (the writer's thread) -----------------------------------------------

    def add(
        self, key: bytes, seg: int, off: int, size: int, dest: str, dtype: int, interest: str
    ) -> bool:
        """A message with one open, never delivered interest, packed, unless ``key`` is
        in the table already: then False and nothing changed."""
        # On the hot path of every persistent send: kept to few Python-level steps.
        full = self.full
        if full and key in full:
            return False
        if len(key) != KEY:
            self.put(key, Msg(seg, off, size, dest, dtype, (interest, 0, -1)))
            return True
        r = self.n
        if self.used >= self.limit or not r & 1023 and r - self.live > self.live + 1024:
            self._rebuild()  # (records of settled messages: at most as many as live ones)
            r = self.n
        if key.startswith(self._lm, 8):
            p = self._lp  # (most messages come from where the one before came)
        else:
            p = self._mid(key[_MID])
        k12 = key[:8] + key[28:]
        slots, recs = self.slots, self.recs
        mask = len(slots) - 1
        h = hash(key)
        i = h & mask
        v = slots[i]
        if v:
            free = -1
            while v:
                if v == TOMB:
                    if free < 0:
                        free = i
                else:
                    o = (v - 1) * W
                    if recs.startswith(k12, o) and recs[o + _SRC] | recs[o + _SRC + 1] << 8 == p:
                        return False
                i = (i + 1) & mask
                v = slots[i]
            if free >= 0:
                i = free  # a settled message's slot: ``used`` stays
                v = TOMB
        if interest is self._li and dest is self._ld and dtype == self._lt:
            g = self._lg  # (most messages go where the one before went)
        else:
            g = self._group(dest, dtype, interest)
        if g < 0 or p < 0:
            if p >= 0 and not self.mid_live[p]:  # (made for this key alone)
                self.mid_live[p] = 1
                self._unref(p)
            self.put(key, Msg(seg, off, size, dest, dtype, (interest, 0, -1)))
            return True
        try:
            recs += REC.pack(k12, seg, off, size, g, p)
        except struct.error:  # a location past 32 bits
            self.put(key, Msg(seg, off, size, dest, dtype, (interest, 0, -1)))
            return True
        self.mid_live[p] += 1
        self.hs.append(h & 0x7FFFFFFF)
        self.n = r + 1
        self.live += 1
        if not v:
            self.used += 1
        slots[i] = r + 1
        return True

    def _group(self, dest: str, dtype: int, interest: str) -> int:
        """The group number of (destination, type, interest), or -1 when there are too
        many groups to number."""
        gk = (dest, dtype, interest)
        g = self.group_ids.get(gk)
        if g is None:
            if len(self.groups) > _MAX_GROUPS:
                return -1
            g = len(self.groups)
            self.groups.append((dest, dtype, (interest, 0, -1)))
            self.group_ids[gk] = g
        self._li, self._ld, self._lt, self._lg = interest, dest, dtype, g
        return g

    def _mid(self, mid: bytes) -> int:
        """The number of the key source ``mid`` (made if new; its records uncounted),
        or -1 when every number is taken."""
        p = self.mid_ids.get(mid)
        if p is None:
            if self.mid_free:
                p = self.mid_free.pop()
                self.mids[p] = mid
            elif len(self.mids) < _MAX_MIDS:
                p = len(self.mids)
                self.mids.append(mid)
                self.mid_live.append(0)
            else:
                return -1
            self.mid_ids[mid] = p
        self._lm, self._lp = mid, p
        return p

    def _unref(self, p: int) -> None:
        """A packed record of source ``p`` went: the source goes with the last."""
        n = self.mid_live[p] - 1
        self.mid_live[p] = n
        if not n:
            del self.mid_ids[self.mids[p]]
            self.mids[p] = b""
            self.mid_free.append(p)
            if p == self._lp:
                self._lm = _NO_MID

    def take(self, key: bytes, interest: str) -> tuple[int, int, str, int] | None:
        """Remove the packed message ``key`` if its one interest is ``interest``:
        (segment, frame size, destination, type); else None and nothing changed."""
        if key.startswith(self._lm, 8):
            p = self._lp
        else:
            q = self.mid_ids.get(key[_MID])
            if q is None:
                return None
            p = q
        k12 = key[:8] + key[28:]
        slots, recs = self.slots, self.recs
        mask = len(slots) - 1
        i = hash(key) & mask
        v = slots[i]
        while v:
            if v != TOMB:
                o = (v - 1) * W
                if recs.startswith(k12, o) and recs[o + _SRC] | recs[o + _SRC + 1] << 8 == p:
                    break
            i = (i + 1) & mask
            v = slots[i]
        else:
            return None
        seg, _off, size, g, _src = _LOC.unpack_from(recs, o + 12)
        dest, dtype, ints = self.groups[g]
        if ints[0] != interest:
            return None
        recs[o + _GRP : o + _SRC] = _DEAD
        self.hs[v - 1] = NOT
        slots[i] = TOMB
        self.live -= 1
        self._unref(p)
        return seg, size, dest, dtype

    def put(self, key: bytes, m: Msg) -> None:
        """A new message (``key`` not in the table) kept as the Msg ``m``."""
        if self.used >= self.limit or self.n - self.live > self.live + 1024:
            self._rebuild()
        r = self.n
        self.fkeys[r] = key
        self.recs += REC.pack(b"", 0, 0, 0, FULL, 0)
        self.hs.append(NOT)
        self.n += 1
        self.live += 1
        m.pos = r
        self.full[key] = m

    def __delitem__(self, key: bytes) -> None:
        m = self.full.get(key)
        if m is not None:
            o = m.pos * W
            self.recs[o + _GRP : o + _SRC] = _DEAD
            del self.fkeys[m.pos]
            del self.full[key]
        else:
            s, r = self._lookup(key)
            if r < 0:
                raise KeyError(key)
            o = r * W
            self.recs[o + _GRP : o + _SRC] = _DEAD
            self.hs[r] = NOT
            self.slots[s] = TOMB
            self._unref(self.recs[o + _SRC] | self.recs[o + _SRC + 1] << 8)
        self.live -= 1

    def _rebuild(self) -> None:
        """A new hash table (and, when most records are dead, new records without
        them), for about twice the live messages."""
        recs, hs = self.recs, self.hs
        cap = 8
        while cap < 2 * (self.live + 1):
            cap *= 2
        slots = array("I", bytes(4 * cap))
        mask = cap - 1
        used = 0
        if self.n - self.live > self.live // 2:  # many dead: copy the live records
            new = bytearray()
            hs2 = array("I")
            fkeys: dict[int, bytes] = {}
            full = self.full
            r2 = 0
            for r, h in enumerate(hs):
                o = r * W
                if h == NOT:  # dead, or a Msg in ``full``
                    if recs[o + _GRP] | recs[o + _GRP + 1] << 8 != FULL:
                        continue
                    key = fkeys[r2] = self.fkeys[r]
                    full[key].pos = r2
                else:
                    i = h & mask
                    while slots[i]:
                        i = (i + 1) & mask
                    slots[i] = r2 + 1
                    used += 1
                new += recs[o : o + W]
                hs2.append(h)
                r2 += 1
            recs, hs = new, hs2
            self.fkeys = fkeys
            self.n = r2
        else:
            # (Each record's hash is kept: the table is rebuilt without a key object.)
            for r, h in enumerate(hs, 1):
                if h < NOT:
                    i = h & mask
                    while slots[i]:
                        i = (i + 1) & mask
                    slots[i] = r
            used = self.live - len(self.full)
        self.recs = recs
        self.hs = hs
        self.slots = slots
        self.used = used
        self.limit = 2 * cap // 3
        self._t = (slots, recs)
