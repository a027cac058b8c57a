"""The file store's in-memory index of live things, and how each record changes it.

An index (no message bytes: each live message's segment, offset and frame size) tracks,
per segment, how many records in it the current state still needs (``holds``: live
messages, latest destination/durable adds, settles and delivery counts of live messages,
open transaction records) and which older segments it must outlive (``refs``: a settle
or remove record is needed as long as the record it cancels is on disk).  ``apply``
mirrors the replay rules: recovery (:mod:`broker.store.filerecovery`) builds an index by
applying every record on disk, the writer (:mod:`broker.store.filewriter`) applies each
record it appended, and a rewrite (:mod:`broker.store.filecompact`) applies what it
copies to a fresh index.  What the holds and refs allow to be deleted is decided in
:mod:`broker.store.filecompact`.  No lock of its own: it is changed only under the base
store's ``_io`` lock (and read without it as :mod:`broker.store.packedmsgs` says).
"""

from __future__ import annotations

from .base import (
    DestAdd,
    DestRemove,
    DurableAdd,
    DurableRemove,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)
from .filecodec import Checkpoint
from .filesegs import Seg
from .packedmsgs import Msg as _Msg
from .packedmsgs import PackedMsgs


class Txn:
    """An open transaction's records: where each is, and the segments holding them."""

    __slots__ = ("txn_id", "state", "info", "state_seg", "first_seg", "sends", "acks", "segs")

    def __init__(self, txn_id: int, first_seg: int) -> None:
        self.txn_id = txn_id
        self.first_seg = first_seg  # held while open: fixes the recovered order
        self.state = 0
        self.info: dict = {}
        self.state_seg = -1
        self.sends: list[list] = []  # [segment, offset, frame size, TxnSend while loading]
        self.acks: list[tuple[int, TxnAck]] = []
        self.segs: set[int] = set()  # every segment holding a record of this transaction


class Index:
    """The live state plus per-segment holds/refs; ``apply`` mirrors the replay rules."""

    def __init__(self, keep_raw: bool = False) -> None:
        # Loading: keep the records of open transactions for RecoveredState (messages
        # are read again from their segments when recovery asks: _Recovered).
        self.keep_raw = keep_raw
        self.segs: dict[int, Seg] = {}
        # Destinations/durables: [latest add, its segment, segment of the first add].  The
        # first add is held too: it fixes the position in the recovered order.
        self.dests: dict[tuple[str, int], list] = {}
        self.dest_segs: dict[tuple[str, int], set[int]] = {}
        self.durs: dict[str, list] = {}
        self.dur_segs: dict[str, set[int]] = {}
        # Live messages, in the order they were first added (the recovered order).
        self.msgs = PackedMsgs()
        self.txns: dict[int, Txn] = {}
        self.dest_live: dict[tuple[str, int], int] = {}  # live messages per destination
        self.interest_live: dict[str, int] = {}  # live messages per open interest
        self.live_bytes = 0
        self.disk_bytes = 0
        self.zeroed = False  # some segment's holds dropped to 0: time to look for dead ones
        # The segment being appended to: its holds dropping to 0 is no news (it cannot
        # go while it is current; when it is closed, that is looked at).
        self.current = -1
        self._apply = {
            DestAdd: self._dest_add,
            DestRemove: self._dest_remove,
            DurableAdd: self._durable_add,
            DurableRemove: self._durable_remove,
            MsgAdd: self._msg_add,
            MsgDelivered: self._msg_delivered,
            MsgSettle: self._msg_settle,
            TxnState: self._txn_state,
            TxnSend: self._txn_send,
            TxnAck: self._txn_ack,
            TxnRemove: self._txn_remove,
            Checkpoint: self._checkpoint,
        }

    def apply(self, rec: Record | Checkpoint, seg: Seg, off: int, size: int) -> None:
        fn = self._apply.get(type(rec))
        if fn is None:
            fn = next(f for t, f in self._apply.items() if isinstance(rec, t))
        fn(rec, seg, off, size)

    def _release(self, num: int, nbytes: int = 0) -> None:
        s = self.segs.get(num)
        if s is None:
            return
        s.holds -= 1
        if nbytes:
            s.live_bytes -= nbytes
            self.live_bytes -= nbytes
        if s.holds == 0 and num != self.current:
            self.zeroed = True

    def _hold(self, num: int) -> None:
        s = self.segs.get(num)
        if s is not None:
            s.holds += 1

    def _checkpoint(self, rec: Checkpoint, seg: Seg, off: int, size: int) -> None:
        seg.checkpoint = True

    # destinations and durables

    def _add(self, table: dict, k: object, r: Record, seg: Seg) -> None:
        entry = table.get(k)
        if entry is None:
            table[k] = [r, seg.num, seg.num]
            seg.holds += 2  # as the latest add and as the first one
        else:
            self._release(entry[1])  # superseded
            entry[0] = r
            entry[1] = seg.num
            seg.holds += 1

    def _remove(self, table: dict, k: object) -> None:
        entry = table.pop(k, None)
        if entry is not None:
            self._release(entry[1])
            self._release(entry[2])

    def _dest_add(self, r: DestAdd, seg: Seg, off: int, size: int) -> None:
        k = (r.name, r.dest_type)
        self._add(self.dests, k, r, seg)
        self.dest_segs.setdefault(k, set()).add(seg.num)

    def _dest_remove(self, r: DestRemove, seg: Seg, off: int, size: int) -> None:
        k = (r.name, r.dest_type)
        self._remove(self.dests, k)
        # Needed as long as an add it cancels is on disk.
        seg.refs.update(self.dest_segs.pop(k, ()))
        if self.dest_live.get(k):
            for key, m in self.msgs.items():  # (deleting while iterating is allowed)
                if m.dtype == r.dest_type and m.dest == r.name:
                    seg.refs.add(m.seg)
                    self._drop(m)
                    del self.msgs[key]
        seg.refs.discard(seg.num)

    def _durable_add(self, r: DurableAdd, seg: Seg, off: int, size: int) -> None:
        self._add(self.durs, r.sub_id, r, seg)
        self.dur_segs.setdefault(r.sub_id, set()).add(seg.num)

    def _durable_remove(self, r: DurableRemove, seg: Seg, off: int, size: int) -> None:
        self._remove(self.durs, r.sub_id)
        seg.refs.update(self.dur_segs.pop(r.sub_id, ()))
        if self.interest_live.get(r.sub_id):
            interest = r.sub_id
            for key, m in self.msgs.items():  # (deleting while iterating is allowed)
                ints = m.ints
                for j in range(0, len(ints), 3):
                    if ints[j] == interest:
                        self._settle_at(key, m, j, seg)
                        break
        seg.refs.discard(seg.num)

    # messages

    def _drop(self, m: _Msg) -> None:
        """Release everything a message holds (it is dead or being replaced)."""
        s = self.segs.get(m.seg)
        if s is not None:
            s.holds -= 1
            s.live_msgs -= 1
            s.live_bytes -= m.size
            if s.holds == 0 and s.num != self.current:
                self.zeroed = True
        self.live_bytes -= m.size
        k = (m.dest, m.dtype)
        self.dest_live[k] -= 1
        ints = m.ints
        il = self.interest_live
        for j in range(0, len(ints), 3):
            il[ints[j]] -= 1
            if ints[j + 2] >= 0:
                self._release(ints[j + 2])
        if m.extra:
            for num in m.extra:
                self._release(num)
        if m.first >= 0:
            self._release(m.first)

    def _msg_add(self, r: MsgAdd, seg: Seg, off: int, size: int) -> None:
        msgs = self.msgs
        key = r.key
        interests = r.interests
        il = self.interest_live
        if len(interests) == 1:
            i = interests[0]
            dest = r.destination
            dtype = r.dest_type
            if msgs.add(key, seg.num, off, size, dest, dtype, i):
                # A new queue message, never delivered: kept packed (the common case,
                # on the hot path of every persistent send).
                il[i] = il.get(i, 0) + 1
                seg.holds += 1
                seg.live_msgs += 1
                seg.live_bytes += size
                self.live_bytes += size
                k = (dest, dtype)
                dl = self.dest_live
                dl[k] = dl.get(k, 0) + 1
                return
        m = msgs.get(key)
        if m is None:
            if not interests:
                return
            ints: list = []
            for i in dict.fromkeys(interests):
                ints += (i, 0, -1)
                il[i] = il.get(i, 0) + 1
            msgs.put(key, _Msg(seg.num, off, size, r.destination, r.dest_type, ints))
        else:  # re-added: replaces the old one, keeping its place
            seg.refs.add(m.seg)
            seg.refs.discard(seg.num)
            first = m.first if m.first >= 0 else m.seg
            self._drop(m)
            if not interests:
                del msgs[key]
                return
            self._hold(first)
            m.first = first
            m.seg = seg.num
            m.off = off
            m.size = size
            m.dest = r.destination
            m.dtype = r.dest_type
            ints = []
            for i in dict.fromkeys(interests):
                ints += (i, 0, -1)
                il[i] = il.get(i, 0) + 1
            m.ints = ints
            m.extra = None
        seg.holds += 1
        seg.live_msgs += 1
        seg.live_bytes += size
        self.live_bytes += size
        k = (r.destination, r.dest_type)
        self.dest_live[k] = self.dest_live.get(k, 0) + 1

    def _msg_delivered(self, r: MsgDelivered, seg: Seg, off: int, size: int) -> None:
        m = self.msgs.get(r.key)
        if m is None:
            return
        ints = m.ints
        for j in range(0, len(ints), 3):
            if ints[j] == r.interest:
                if type(ints) is tuple:
                    ints = m.ints = list(ints)
                ints[j + 1] = r.count
                if ints[j + 2] >= 0:  # superseded
                    self._release(ints[j + 2])
                ints[j + 2] = seg.num
                seg.holds += 1
                return

    def _msg_settle(self, r: MsgSettle, seg: Seg, off: int, size: int) -> None:
        packed = self.msgs.take(r.key, r.interest)
        if packed is not None:  # its one interest, never delivered: the common case
            num, fsize, dest, dtype = packed
            if num != seg.num:
                seg.refs.add(num)  # the settle must outlive the MsgAdd it cancels
            s = self.segs.get(num)
            if s is not None:
                s.holds -= 1
                s.live_msgs -= 1
                s.live_bytes -= fsize
                if s.holds == 0 and num != self.current:
                    self.zeroed = True
            self.live_bytes -= fsize
            self.dest_live[(dest, dtype)] -= 1
            self.interest_live[r.interest] -= 1
            return
        m = self.msgs.get(r.key)
        if m is None:
            return
        ints = m.ints
        for j in range(0, len(ints), 3):
            if ints[j] == r.interest:
                self._settle_at(r.key, m, j, seg)
                return

    def _settle_at(self, key: bytes, m: _Msg, j: int, seg: Seg) -> None:
        """Settle ``m.ints[j]`` by a record in ``seg``."""
        ints = m.ints
        if type(ints) is tuple:
            ints = m.ints = list(ints)
        self.interest_live[ints[j]] -= 1
        if ints[j + 2] >= 0:
            self._release(ints[j + 2])
        del ints[j : j + 3]
        if m.seg != seg.num:
            seg.refs.add(m.seg)  # the settle must outlive the MsgAdd it cancels
        if ints:
            if m.extra is None:
                m.extra = [seg.num]
            else:
                m.extra.append(seg.num)
            seg.holds += 1
        else:
            self._drop(m)
            del self.msgs[key]

    # transactions

    def _txn(self, txn_id: int, seg: Seg) -> Txn:
        t = self.txns.get(txn_id)
        if t is None:
            t = self.txns[txn_id] = Txn(txn_id, seg.num)
            seg.holds += 1
        return t

    def _txn_state(self, r: TxnState, seg: Seg, off: int, size: int) -> None:
        t = self._txn(r.txn_id, seg)
        if t.state_seg >= 0:
            self._release(t.state_seg)
        t.state = r.state
        t.info = r.info
        t.state_seg = seg.num
        seg.holds += 1
        t.segs.add(seg.num)

    def _txn_send(self, r: TxnSend, seg: Seg, off: int, size: int) -> None:
        t = self._txn(r.txn_id, seg)
        t.sends.append([seg.num, off, size, r if self.keep_raw else None])
        seg.holds += 1
        seg.live_bytes += size
        self.live_bytes += size
        t.segs.add(seg.num)

    def _txn_ack(self, r: TxnAck, seg: Seg, off: int, size: int) -> None:
        t = self._txn(r.txn_id, seg)
        t.acks.append((seg.num, r))
        seg.holds += 1
        t.segs.add(seg.num)

    def _txn_remove(self, r: TxnRemove, seg: Seg, off: int, size: int) -> None:
        t = self.txns.pop(r.txn_id, None)
        if t is None:
            return
        if t.state_seg >= 0:
            self._release(t.state_seg)
        self._release(t.first_seg)
        for num, _off, fsize, _rec in t.sends:
            self._release(num, fsize)
        for num, _ack in t.acks:
            self._release(num)
        seg.refs.update(t.segs)
        seg.refs.discard(seg.num)
