"""A delivery queue: pending entries in priority order and the consumers they go to.

A queue destination has one; each topic subscription has its own.  ``dispatch`` is
called whenever something changes that may let a message move (a new message, a
consumer added, credit restored, a connection started) and moves as many as it can.

What a queue delivers to is a :class:`DeliveryTarget`: a client's consumer
(broker/core/session.py) or a consumer on another broker behind a cluster link
(broker/cluster/remote_delivery.py).  What a delivered message belongs to is an
:class:`EntryOwner` (a destination here, or the cluster's ``InboundOrigin`` for a copy
another broker delivered), and where it goes back to is an :class:`EntryQueue` (a
:class:`DeliveryQueue`, or again the ``InboundOrigin``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from broker.protocol.packet import OFF_SYSMSGID, stored_head

from .dmq import EXPIRED

# The roles an entry meets are message.py's (so the data model's modules need not
# import each other); the layers above name them from here too.
from .message import BODIES, DeliveryTarget, Entry, EntryOwner, MessageLost
from .runs import Deep, Run

if TYPE_CHECKING:
    from .paging import Pager


def next_ready(targets: Sequence[DeliveryTarget], start: int) -> int:
    """Round-robin: the index of the first ready target from ``start`` on (wrapping
    round), or -1 when none is ready.  The caller starts the next choice after it."""
    n = len(targets)
    for i in range(n):
        j = (start + i) % n
        if targets[j].ready():
            return j
    return -1


class DeliveryQueue:
    """Pending entries by priority (9 first, FIFO within a priority) plus round-robin consumers."""

    __slots__ = (
        "buckets",
        "count",
        "bytes",
        "consumers",
        "_rr",
        "on_drop",
        "active",
        "selective",
        "paused",
        "pager",
        "deep",
    )

    def __init__(self, on_drop: Callable[[Entry, str], object] | None = None) -> None:
        self.buckets: list[deque[Entry]] = [deque() for _ in range(10)]
        self.count = 0
        self.bytes = 0
        self.consumers: list[DeliveryTarget] = []
        self._rr = 0
        # Called for entries the queue gives up on (expired) so the owner can account.
        self.on_drop = on_drop
        # False once the owner (a non-durable subscription, a destroyed destination) is gone.
        self.active = True
        # Whether any consumer has a selector (then dispatch must look at each message).
        self.selective = False
        # Set while an admin has paused the destination's consumers (PAUSE dst): entries
        # wait and nothing is dispatched until RESUME.
        self.paused = False
        # Where bodies of entries that wait go when memory runs short (None: nowhere).
        self.pager: Pager | None = None
        # Per priority, the packed part behind a deep bucket (broker/core/runs.py).
        self.deep: list[Deep | None] | None = None

    # -- content ------------------------------------------------------------

    def put(self, entry: Entry) -> None:
        msg = entry.msg
        p = msg.priority
        if not 0 <= p <= 9:
            p = 4
        self.count += 1
        self.bytes += msg.size
        pager = self.pager
        if pager is None:
            self.buckets[p].append(entry)
            return
        deep = self.deep[p] if self.deep is not None else None
        if deep is None:
            bucket = self.buckets[p]
            if (
                len(bucket) < pager.depth
                or self.selective
                or (msg._raw is not None and not pager.over())
            ):
                bucket.append(entry)
                pager.waiting(msg, self.selective)
                return
            deep = self._deepen(p)
        # Behind at least ``depth`` others: its body goes now, and it is packed later.
        deep.tail.append(entry)
        if self.selective:
            pager.waiting(msg, True)
            return
        pager.let_go(msg)
        if len(deep.tail) >= deep.retry:
            deep.pack(pager)

    def put_packed(
        self,
        owner: EntryOwner,
        interest: str | None,
        destination: str,
        store_key: bytes,
        head: bytes,
        size: int,
        count: int,
        redelivered: bool,
        report: object,
    ) -> int:
        """A message recovered without its body (its stored ``head`` and length) that
        ``put`` would pack at once, behind ``depth`` others: written straight into a run,
        no Message or Entry made (a restart recovers millions).  Its size, or -1 when
        it must come as an entry (nothing done)."""
        pager = self.pager
        if pager is None or self.selective:
            return -1
        stored = stored_head(head)
        if stored is None:
            return -1
        p = stored[0][11]
        if not 0 <= p <= 9:
            p = 4
        deep = self.deep[p] if self.deep is not None else None
        if deep is None:
            if len(self.buckets[p]) < pager.depth:
                return -1
            deep = self._deepen(p)
        elif deep.tail:
            return -1  # (behind entries: packed in their turn)
        # A short record unless delayed (its timestamp is its key's: the same bytes).
        short = None if stored[2] else stored[0][11]
        source = head[OFF_SYSMSGID + 8 : OFF_SYSMSGID + 28]
        run = deep.run_for(pager, owner, interest, destination, short, source)
        msize = run.add_head(store_key, head, stored, size, count, redelivered, report)
        self.count += 1
        self.bytes += msize
        return msize

    def _deepen(self, p: int) -> Deep:
        if self.deep is None:
            self.deep = [None] * 10
        deep = self.deep[p] = Deep()
        return deep

    def _refill(self, p: int) -> None:
        """Priority ``p``'s bucket is empty: it takes what is packed next."""
        if self.deep is not None and self.deep[p] is not None:
            self._unpack_next(p)

    def _unpack_next(self, p: int) -> Iterable[Entry]:
        """Move priority ``p``'s next packed part to the end of its bucket: its first run
        unpacked, or, with no run left, its tail (the priority is then all objects
        again).  Returns the entries moved."""
        assert self.deep is not None
        deep = self.deep[p]
        assert deep is not None
        moved: Iterable[Entry]
        if deep.runs:
            moved = deep.runs.popleft().unpack(self)
        else:
            moved, deep.tail = deep.tail, deque()
        self.buckets[p].extend(moved)
        if not deep.runs and not deep.tail:
            self.deep[p] = None
            if not any(self.deep):
                self.deep = None
        return moved

    def _flatten(self) -> None:
        """Unpack every run (a selector scan looks at each entry's properties)."""
        if self.deep is None:
            return
        for p, deep in enumerate(self.deep):
            if deep is not None:
                bucket = self.buckets[p]
                for run in deep.runs:
                    bucket.extend(run.unpack(self))
                bucket.extend(deep.tail)
        self.deep = None

    def offer(self, entry: Entry, now_ms: int) -> None:
        """A new entry: straight to the next ready consumer when nothing is pending
        before it (a consumer that keeps up: the usual case), else queued and
        dispatched.  The same order and round-robin as ``put`` then ``dispatch``."""
        if self.count or self.paused or self.selective or not self.consumers:
            self.put(entry)
            self.dispatch(now_ms)
            return
        consumers = self.consumers
        c: DeliveryTarget | None
        if len(consumers) == 1:
            # One consumer (a subscription's, or a queue's only one): no round to go.
            c = consumers[0] if consumers[0].ready() else None
        else:
            c = self._next_ready()
        if c is None:
            self.put(entry)
        elif entry.msg.expiration and entry.msg.is_expired(now_ms):
            if self.on_drop:
                self.on_drop(entry, EXPIRED)
        else:
            c.deliver(entry)

    def put_back(self, entries: Iterable[Entry]) -> None:
        """Return entries to the head of their priority, keeping their relative order."""
        for entry in reversed(list(entries)):
            p = entry.msg.priority
            self.buckets[p if 0 <= p <= 9 else 4].appendleft(entry)
            self.count += 1
            self.bytes += entry.msg.size

    def __iter__(self) -> Iterator[Entry]:
        """Every pending entry in delivery order (packed ones unpacked for a look)."""
        deeps = self.deep
        for p in range(9, -1, -1):
            yield from self.buckets[p]
            deep = deeps[p] if deeps is not None else None
            if deep is not None:
                yield from deep.unpacked(self)

    def head(self) -> Iterator[Entry]:
        """The pending entries in delivery order, for the pager to read ahead in: a
        priority's packed entries are unpacked behind its bucket as it gets to them (so
        reading ahead goes on across runs; the caller stops after a window)."""
        for p in range(9, -1, -1):
            yield from self.buckets[p]
            while self.deep is not None and self.deep[p] is not None:
                yield from self._unpack_next(p)

    def _objects(self) -> Iterator[Entry]:
        """Every pending entry held as an object (buckets and tails), in no order."""
        for bucket in self.buckets:
            yield from bucket
        for deep in self.deep or ():
            if deep is not None:
                yield from deep.tail

    def _runs(self) -> Iterator[Run]:
        for deep in self.deep or ():
            if deep is not None:
                yield from deep.runs

    def find(self, wanted: set[bytes]) -> Iterator[Entry]:
        """The pending entries whose keys are in ``wanted``, in no order (packed ones
        unpacked for a look, only those)."""
        for e in self._objects():
            if e.msg.key in wanted:
                yield e
        for run in self._runs():
            yield from run.find(wanted, self)

    def paged_out(self) -> tuple[int, int]:
        """(count, bytes) of the pending entries whose bodies are out of memory."""
        n = size = 0
        # With no message's body out of memory anywhere, no entry held as an object has
        # its body out: a monitoring poll of a backlog then looks at none of them.
        if BODIES.out:
            for e in self._objects():
                if e.msg._raw is None:
                    n += 1
                    size += e.msg.size
        for run in self._runs():
            n += run.n
            size += run.nbytes
        return n, size

    def remove_where(
        self, pred: Callable[[Entry], bool], packed: Callable[[Run], bool] | None = None
    ) -> list[Entry]:
        """Take out every pending entry matching ``pred``; ``packed`` says which runs
        may hold one (default: all, each entry unpacked to be asked)."""
        removed: list[Entry] = []
        for i, bucket in enumerate(self.buckets):
            if bucket:
                self.buckets[i] = self._filter(bucket, pred, removed)
            deep = self.deep[i] if self.deep is not None else None
            if deep is None:
                continue
            runs: deque[Run] = deque()
            for run in deep.runs:
                if packed is not None and not packed(run):
                    runs.append(run)
                    continue
                kept, taken = run.split(pred, self)
                removed += taken
                if kept is not None:
                    runs.append(kept)
            deep.runs = runs
            deep.tail = self._filter(deep.tail, pred, removed)
        for e in removed:
            self.count -= 1
            self.bytes -= e.msg.size
        for i in range(10):
            if self.deep is None:
                break
            if not self.buckets[i]:
                self._refill(i)
        return removed

    @staticmethod
    def _filter(
        entries: deque[Entry], pred: Callable[[Entry], bool], removed: list[Entry]
    ) -> deque[Entry]:
        keep: deque[Entry] = deque()
        for e in entries:
            (removed if pred(e) else keep).append(e)
        return keep

    def take_expired(self, now_ms: int) -> list[Entry]:
        """Take out the pending entries whose expiration has passed."""
        return self.remove_where(
            lambda e: 0 < e.msg.expiration <= now_ms,
            lambda run: 0 < run.min_exp <= now_ms,
        )

    def clear(self) -> list[Entry]:
        return self.remove_where(lambda e: True)

    # -- consumers ----------------------------------------------------------

    def add_consumer(self, consumer: DeliveryTarget) -> None:
        self.consumers.append(consumer)
        self.selective = any(c.selector is not None for c in self.consumers)

    def remove_consumer(self, consumer: DeliveryTarget) -> None:
        try:
            self.consumers.remove(consumer)
        except ValueError:
            pass
        self.selective = any(c.selector is not None for c in self.consumers)

    def _next_ready(self) -> DeliveryTarget | None:
        """Round-robin: the first ready consumer after the one that got the last
        message (which it becomes), or None when none is ready."""
        consumers = self.consumers
        j = next_ready(consumers, self._rr)
        if j < 0:
            return None
        self._rr = (j + 1) % len(consumers)
        return consumers[j]

    def take_head(self, priority: int) -> Entry:
        """Take out the oldest pending entry of ``priority`` (there must be one)."""
        bucket = self.buckets[priority]
        e = bucket.popleft()
        self.count -= 1
        self.bytes -= e.msg.size
        if not bucket and self.deep is not None:
            self._refill(priority)
        return e

    def pop_next(self) -> Entry | None:
        """Take out the entry that would be delivered next (None when none is pending)."""
        for p in range(9, -1, -1):
            bucket = self.buckets[p]
            if bucket:
                e = bucket.popleft()
                self.count -= 1
                self.bytes -= e.msg.size
                if not bucket and self.deep is not None:
                    self._refill(p)
                return e
        return None

    def dispatch(self, now_ms: int) -> None:
        """Deliver as many pending entries as ready consumers will take."""
        if not self.count or not self.consumers or self.paused:
            return
        if self.selective:
            self._dispatch_selective(now_ms)
            return
        pager = self.pager
        while self.count:
            rr = self._rr
            c = self._next_ready()
            if c is None:
                return
            entry = self.pop_next()
            assert entry is not None
            msg = entry.msg
            if msg.expiration and msg.is_expired(now_ms):
                if self.on_drop:
                    self.on_drop(entry, EXPIRED)
                continue
            if msg._raw is None and pager is not None:
                self._unpop(entry)  # the window read back starts with it
                if pager.fetch(self):
                    # Its bytes are being read back: it and the rest wait for them.
                    self._rr = rr
                    return
                self.pop_next()  # no reader to wait for: read it here
                if not self._read_now(entry):
                    continue
            c.deliver(entry)
            if msg.src is not None and pager is not None:
                pager.done_with(msg)

    def _dispatch_selective(self, now_ms: int) -> None:
        # Messages a consumer's selector refuses stay queued for the others.
        self._flatten()
        pager = self.pager
        consumers = self.consumers
        n = len(consumers)
        for pi in range(9, -1, -1):
            bucket = self.buckets[pi]
            if not bucket:
                continue
            keep: deque[Entry] = deque()
            while bucket:
                if not any(c.ready() for c in consumers):
                    keep.extend(bucket)
                    bucket.clear()
                    break
                entry = bucket.popleft()
                msg = entry.msg
                if msg.expiration and msg.is_expired(now_ms):
                    self.count -= 1
                    self.bytes -= msg.size
                    if self.on_drop:
                        self.on_drop(entry, EXPIRED)
                    continue
                if msg._selector_values is None and msg._raw is None:
                    if pager is not None and self._stop_for_read(pager, entry, keep, bucket, pi):
                        return
                    try:
                        msg.selector_values()
                    except MessageLost:
                        self.count -= 1
                        self.bytes -= msg.size
                        if pager is not None:
                            pager.lose(entry)
                        continue
                target = None
                for i in range(n):
                    c = consumers[(self._rr + i) % n]
                    if c.ready() and (
                        c.selector is None or c.selector.matches(msg.selector_values())
                    ):
                        target = c
                        self._rr = (self._rr + i + 1) % n
                        break
                if target is None:
                    keep.append(entry)
                    if msg.src is not None and pager is not None:
                        pager.done_with(msg)  # what a selector asks is kept apart
                    continue
                if (
                    msg._raw is None
                    and pager is not None
                    and self._stop_for_read(pager, entry, keep, bucket, pi)
                ):
                    return
                self.count -= 1
                self.bytes -= msg.size
                if msg._raw is None and not self._read_now(entry):
                    continue
                target.deliver(entry)
                if msg.src is not None and pager is not None:
                    pager.done_with(msg)
            self.buckets[pi] = keep

    def _stop_for_read(
        self, pager: Pager, entry: Entry, keep: deque[Entry], rest: deque[Entry], priority: int
    ) -> bool:
        """A selector scan reached ``entry`` (taken out of its bucket), paged out: when
        the pager reads it back with what follows, the bucket of ``priority`` is made
        whole again (``keep``, it, ``rest``) and True says the scan stops; it starts
        again once they are in."""
        if not pager.fetch(self, entry.msg, self._after(rest, priority)):
            return False
        keep.append(entry)
        keep.extend(rest)
        rest.clear()
        self.buckets[priority] = keep
        return True

    def _after(self, rest: deque[Entry], priority: int) -> Iterator[Entry]:
        """The entries a selector scan has still to look at: the rest of the bucket of
        ``priority`` it is in, then the lower priorities'."""
        yield from rest
        for pi in range(priority - 1, -1, -1):
            yield from self.buckets[pi]

    def _unpop(self, entry: Entry) -> None:
        """Put back the entry ``pop_next`` just took."""
        p = entry.msg.priority
        self.buckets[p if 0 <= p <= 9 else 4].appendleft(entry)
        self.count += 1
        self.bytes += entry.msg.size

    def _read_now(self, entry: Entry) -> bool:
        """Read a paged-out entry's bytes back on this thread (no reader to wait for);
        False when they cannot be: the entry is then skipped (taken out, reported)."""
        msg = entry.msg
        try:
            msg.page_in(msg.raw)
        except MessageLost:
            if self.pager is not None:
                self.pager.lose(entry)
            return False
        return True
