"""Runs: the deep part of a delivery queue's backlog, packed.

Paging (paging.py) takes a waiting message's body out of memory, but its Message and
Entry objects stay, about 450 bytes each: a million waiting messages would still hold
some 450 MB.  So once a priority of a delivery queue holds ``depth`` entries while
messages are paged out, what arrives next at that priority goes to its :class:`Deep`
part: a tail of entries whose bodies are let go at once, packed ``RUN`` at a time into
:class:`Run` records of :data:`~broker.core.packed.SHORT` size (39 bytes each) when
their messages are paged out to the store and not delayed, of
:data:`~broker.core.packed.PACKED` size (91 bytes) otherwise.

A priority's order is its bucket (entries, delivered from), then its runs, then its
tail.  When the bucket is empty, the first run is unpacked into it (and the pager reads
the bodies back, as for any paged-out entry), or, with no run left, the tail becomes the
bucket.  Anything that looks at every waiting entry (browsing, an administrator's
listing, purge, expiry) gets packed entries unpacked for it, one at a time.

Only entries whose message is paged out are packed (``packed.packable``).  A record of
a message in the swap area holds a reference to its body there (SwapArea.retain), as
the message does: the body goes when the last of them goes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from broker.protocol.packet import OFF_SYSMSGID

from .message import Entry, Message
from .packed import (
    PACKED,
    SHORT,
    Shape,
    fits_short,
    pack_entry,
    pack_short,
    pack_stored_head,
    packable,
    unpack_entry,
)

if TYPE_CHECKING:
    from .message import BodySource, EntryOwner, EntryQueue

# Entries per run.  The newest RUN entries of a tail stay objects: a persistent message
# lets its body go only once the store has written it, so the newest are not packable yet.
RUN = 1024
# Origin connections, and key sources, a short run names (its records hold a 1-byte
# index into each).
_ORIGINS = 255


class Run:
    """Up to ``RUN`` consecutive entries of one delivery queue, packed."""

    __slots__ = (
        "recs",
        "n",
        "nbytes",
        "min_exp",
        "store_keys",
        "src",
        "owner",
        "interest",
        "destination",
        "report",
        "short",
        "size",
    )

    def __init__(
        self,
        src: BodySource,
        owner: EntryOwner,
        interest: str | None,
        destination: str,
        short: Shape | None = None,
    ) -> None:
        # (priority, origin connections, key sources) of a run of SHORT records; None:
        # PACKED ones.
        self.short = short
        self.size = PACKED.size if short is None else SHORT.size
        # Made whole at once: grown record by record, a run's buffer would be copied
        # about RUN times over and leave holes in the heap between message bodies.
        self.recs = bytearray(RUN * self.size)
        self.n = 0
        self.nbytes = 0
        self.min_exp = 0  # the earliest expiration in it (0: none expires)
        self.store_keys: dict[int, bytes] | None = None  # the store keys that are not keys
        self.src = src
        self.owner = owner
        self.interest = interest
        self.destination = destination
        # What the report generator read from the messages (reports.py): the one object
        # most share ("asks for no report"), kept once; without it, each acknowledgement
        # of an unpacked message would read its body back to find out.
        self.report: object = None

    @classmethod
    def for_entry(cls, src: BodySource, entry: Entry) -> Run:
        """A new run that ``entry`` can join: a short one when it fits one."""
        m = entry.msg
        short: Shape | None = (m.priority, [], []) if fits_short(m) else None
        return cls(src, entry.owner, entry.interest, m.destination, short)

    def holds(self, entry: Entry) -> bool:
        """Can ``entry`` join this run (same owner, store interest and destination; for
        a short run, a short record of its priority, and one origin and one key source
        more at most)?"""
        m = entry.msg
        if not (
            (self.n + 1) * self.size <= len(self.recs)
            and entry.owner is self.owner
            and entry.interest == self.interest
            and m.destination == self.destination
        ):
            return False
        short = self.short
        return short is None or (
            fits_short(m)
            and m.priority == short[0]
            and (len(short[1]) < _ORIGINS or m.origin_connection in short[1])
            and (len(short[2]) < _ORIGINS or m.key[8:28] in short[2])
        )

    def add(self, entry: Entry) -> None:
        m = entry.msg
        if m.store_key != m.key:
            if self.store_keys is None:
                self.store_keys = {}
            self.store_keys[self.n] = m.store_key
        if self.report is None and m.report_info is not None:
            self.report = m.report_info
        short = self.short
        if short is None:
            pack_entry(entry, self.recs, self.n * PACKED.size, self.report)
        else:
            pack_short(
                entry,
                self.recs,
                self.n * SHORT.size,
                self.report,
                _index(short[1], m.origin_connection),
                _index(short[2], m.key[8:28]),
            )
        self.n += 1
        self.nbytes += m.size
        exp = m.expiration
        if exp and (not self.min_exp or exp < self.min_exp):
            self.min_exp = exp

    def add_head(
        self,
        store_key: bytes,
        head: bytes,
        stored: tuple[tuple, int, int],
        size: int,
        count: int,
        redelivered: bool,
        report: object,
    ) -> int:
        """A recovered message without its body, packed from its head (``stored``:
        what ``stored_head`` read from it) with no Message or Entry made; its size."""
        n = self.n
        if head.startswith(store_key, OFF_SYSMSGID):
            key = store_key
        else:  # a DMQ copy: stored under a key of its own
            key = head[OFF_SYSMSGID : OFF_SYSMSGID + 32]
            if self.store_keys is None:
                self.store_keys = {}
            self.store_keys[n] = store_key
        if report is not None and self.report is None:
            self.report = report
        fields, dc_offset, delivery_time = stored
        msize = pack_stored_head(
            self.recs,
            n * self.size,
            key,
            fields,
            dc_offset,
            delivery_time,
            size,
            count,
            redelivered,
            report is not None and report is self.report,
            -1 if self.short is None else _index(self.short[2], key[8:28]),
        )
        self.n = n + 1
        self.nbytes += msize
        exp = fields[4]
        if exp and (not self.min_exp or exp < self.min_exp):
            self.min_exp = exp
        return msize

    def entry(self, i: int, queue: EntryQueue, src: BodySource | None = None) -> Entry:
        """Record ``i`` unpacked (the run still owns it: see ``unpack``/``split``)."""
        keys = self.store_keys
        return unpack_entry(
            self.recs,
            i * self.size,
            keys.get(i) if keys is not None else None,
            self.destination,
            self.src if src is None else src,
            self.owner,
            queue,
            self.interest,
            self.report,
            self.short,
        )

    def unpack(self, queue: EntryQueue) -> list[Entry]:
        """Every entry, in order; the run is empty after (the entries own their messages)."""
        out = [self.entry(i, queue) for i in range(self.n)]
        self._forget()
        return out

    def split(
        self, pred: Callable[[Entry], bool], queue: EntryQueue
    ) -> tuple[Run | None, list[Entry]]:
        """(the run of the entries ``pred`` leaves, or None when none; those it takes).
        This run is empty after."""
        kept: Run | None = None
        taken: list[Entry] = []
        for i in range(self.n):
            e = self.entry(i, queue)
            if pred(e):
                taken.append(e)
            else:
                if kept is None:
                    short = self.short
                    if short is not None:
                        short = (short[0], [], [])
                    kept = Run(self.src, self.owner, self.interest, self.destination, short)
                kept.add(e)
        self._forget()
        if kept is not None:
            del kept.recs[kept.n * kept.size :]  # it takes no more (split runs are rare)
        return kept, taken

    def peek(self, queue: EntryQueue) -> Iterator[Entry]:
        """Each entry unpacked for a look (a browser, a listing): the run keeps it, so
        the copy reads its bytes but never frees their swap space."""
        borrowed = _Borrowed(self.src)
        for i in range(self.n):
            yield self.entry(i, queue, borrowed)

    def has_key(self, prefix: bytes) -> bool:
        """Does a record's key start with ``prefix`` (a whole key, or its first bytes)?
        (A search of the packed bytes: nothing is unpacked.)"""
        recs, size = self.recs, self.size
        end = self.n * size
        short = self.short is not None
        head = prefix[:8] if short else prefix  # (a short record starts with 8 of them)
        i = recs.find(head, 0, end)
        while i >= 0:
            if i % size == 0 and (not short or self.key_at(i).startswith(prefix)):
                return True
            i = recs.find(head, i + 1, end)
        return False

    def key_at(self, off: int) -> bytes:
        """The key of the record at ``off``."""
        recs = self.recs
        if self.short is None:
            return bytes(recs[off : off + 32])
        sources = self.short[2]
        return (
            bytes(recs[off : off + 8])
            + sources[recs[off + SHORT.size - 1]]
            + recs[off + 8 : off + 12]
        )

    def may_have_store_key(self, key: bytes) -> bool:
        """Might a record be stored under ``key``?  (Its key is ``key``, or its store
        key is: a DMQ copy's.)  A pre-filter: the entry is then asked exactly."""
        keys = self.store_keys
        return (keys is not None and key in keys.values()) or self.has_key(key)

    def find(self, wanted: set[bytes], queue: EntryQueue) -> Iterator[Entry]:
        """The entries whose keys are in ``wanted``, unpacked for a look."""
        size = self.size
        borrowed: _Borrowed | None = None
        for i in range(self.n):
            if self.key_at(i * size) in wanted:
                if borrowed is None:
                    borrowed = _Borrowed(self.src)
                yield self.entry(i, queue, borrowed)

    def _forget(self) -> None:
        self.recs = bytearray()
        self.n = 0
        self.nbytes = 0
        self.store_keys = None

    def __del__(self) -> None:
        # Dropped with entries still packed (a queue that went away without being
        # cleared): their swap space is freed here, as their messages would have.
        if self.n and self.short is None:  # (a short record is never in the swap area)
            src = self.src
            for i in range(self.n):
                rec = PACKED.unpack_from(self.recs, i * PACKED.size)
                pos, size = rec[11], rec[6]
                if pos >= 0:
                    src.released(pos, size)


class _Borrowed:
    """A run's body source as seen by an entry unpacked for a look: it reads, the run
    frees."""

    __slots__ = ("src",)

    def __init__(self, src: BodySource) -> None:
        self.src = src

    def read_back(self, msg: Message) -> bytes | None:
        return self.src.read_back(msg)

    def retain(self, pos: int) -> None:
        self.src.retain(pos)

    def released(self, pos: int, size: int) -> None:
        pass


class Deep:
    """The part of one priority of a delivery queue behind its bucket: runs, then a tail."""

    __slots__ = ("runs", "tail", "retry")

    def __init__(self) -> None:
        self.runs: deque[Run] = deque()
        self.tail: deque[Entry] = deque()
        self.retry = 2 * RUN  # the tail length at which packing is tried next

    def pack(self, src: BodySource) -> None:
        """Pack the tail's oldest entries (all but the newest ``RUN``) while they can be."""
        tail = self.tail
        runs = self.runs
        run = runs[-1] if runs else None
        while len(tail) > RUN:
            e = tail[0]
            if not packable(e, src):
                break
            if run is None or not run.holds(e):
                run = Run.for_entry(src, e)
                runs.append(run)
            run.add(tail.popleft())
        # Not packable yet (waiting for the store): tried again a little later.
        self.retry = len(tail) + RUN // 4 if len(tail) > RUN else 2 * RUN

    def run_for(
        self,
        src: BodySource,
        owner: EntryOwner,
        interest: str | None,
        destination: str,
        priority: int | None,
        source: bytes = b"",
    ) -> Run:
        """The run a recovered record of (owner, interest, destination) is added to at
        the end: the last one, or a new one when that is full or another's.
        ``priority``: the record can be a short one of that priority (origin 0, key
        source ``source``); None: it must be a PACKED one."""
        runs = self.runs
        run = runs[-1] if runs else None
        if (
            run is None
            or (run.n + 1) * run.size > len(run.recs)
            or run.owner is not owner
            or run.interest != interest
            or run.destination != destination
            or (
                run.short is not None
                and (
                    priority != run.short[0]
                    or run.short[1] != [0]
                    or (len(run.short[2]) >= _ORIGINS and source not in run.short[2])
                )
            )
        ):
            short: Shape | None = None if priority is None else (priority, [0], [])
            run = Run(src, owner, interest, destination, short)
            runs.append(run)
        return run

    def unpacked(self, queue: EntryQueue) -> Iterator[Entry]:
        """Every entry in order, packed ones unpacked for a look."""
        for run in self.runs:
            yield from run.peek(queue)
        yield from self.tail


def _index(items: list, item: object) -> int:
    """``item``'s place in ``items`` (a run's few origins or sources), added if new."""
    if items and items[-1] == item:
        return len(items) - 1
    try:
        return items.index(item)
    except ValueError:
        items.append(item)
        return len(items) - 1
