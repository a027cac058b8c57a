"""Paging: message bodies leave memory when it runs short, and come back ahead of delivery.

When the bytes of message bodies held in memory (:data:`~broker.core.message.BODIES`)
pass the paging threshold (``imq.swap.threshold`` percent of the memory budget), a
message that has to wait in a delivery queue (nobody can take it now) keeps only what
routing and ordering need: its header fields, its place in the queue and, when a
selector may ask, its property values.  Its bytes go:

- for a message whose every copy is in the message store (a persistent message of a
  queue or of durable subscriptions), nowhere: they are read back from the store by key
  (``Store.read_bodies``), once the store has written them;
- for any other message, and for every message when the store cannot read bodies back
  (the database store), to the swap area (broker/store/swap.py): not synced, emptied at
  start, so a non-persistent message is lost by a restart exactly as before.

Reading back: when a queue's next message to deliver is paged out, dispatch stops and
asks :meth:`Pager.fetch`, which reads the next ``readahead`` paged-out messages of that
queue, in delivery order, on the pager's reader thread; when they are in, the queue is
dispatched again, and, while memory stays below the threshold with it, the next window
is read behind it (a window is at most a quarter of the threshold).  A message read back
is delivered from memory and let go again once sent, since it can always be read again.
Everything else that needs a paged-out message's bytes (a browser, the DMQ, an
administrator's listing) reads them for that use only (``Message.raw``).

The pager owns its state (what waits for the store, which queues are being read) and is
reached by the delivery queues it is given to, and by the broker for its figures.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sized
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from . import errors
from .message import _DC_SLOT, BODIES, Entry, Message

if TYPE_CHECKING:
    from broker.store.base import Store
    from broker.store.swap import SwapArea

    from .runs import Run

log = logging.getLogger("broker.paging")


class PagedQueue(Protocol):
    """What the pager asks of a delivery queue (dispatch.DeliveryQueue), whose messages
    it reads back."""

    @property
    def active(self) -> bool: ...

    @property
    def count(self) -> int:
        """Entries pending."""
        ...

    @property
    def consumers(self) -> Sized: ...

    def __iter__(self) -> Iterator[Entry]:
        """The pending entries, in delivery order."""
        ...

    def head(self) -> Iterator[Entry]:
        """The pending entries from the next one to deliver."""
        ...

    def remove_where(
        self, pred: Callable[[Entry], bool], packed: Callable[[Run], bool] | None = None
    ) -> list[Entry]: ...

    def dispatch(self, now_ms: int) -> None: ...


@dataclass
class PagingStats:
    """What the pager did since the broker started."""

    paged_out: int = 0
    paged_out_bytes: int = 0
    read_back: int = 0
    read_back_bytes: int = 0
    lost: int = 0


class Pager:
    """Pages message bodies out past ``threshold`` bytes and reads them back."""

    # Seconds before a queue whose read-back failed (not a damaged body) tries again; a
    # test sets it shorter.
    read_retry: float = 1.0

    def __init__(
        self,
        threshold: int,
        *,
        swap: SwapArea | None,
        store: Store | None,
        readahead: int = 256,
        readahead_bytes: int = 4 << 20,
        depth: int = 0,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.threshold = threshold
        self.swap = swap
        self.store = store if store is not None and store.reads_bodies else None
        self.readahead = max(1, readahead)
        self.readahead_bytes = max(1, readahead_bytes)
        # How many entries of one priority a delivery queue keeps as objects before it
        # packs the rest (runs.py): eight read-ahead windows, and at least 2,048.
        self.depth = depth or max(2048, 8 * self.readahead)
        self.stats = PagingStats()
        # Messages waiting for the store to have written them before they let go.
        self._awaiting: list[Message] = []
        self._sealing = False
        self._reading: set[PagedQueue] = set()
        self._reader: ThreadPoolExecutor | None = None
        self._swap_error: str | None = None
        self._now = now_ms or errors.now_ms

    # -- paging out (event loop) --------------------------------------------------------

    @property
    def window_bytes(self) -> int:
        """The most bytes one read-back window brings in: ``readahead_bytes``, and no
        more than a quarter of the threshold (the window being delivered and the one
        read behind it then stay well under it)."""
        return max(min(self.readahead_bytes, self.threshold // 4), 1)

    def over(self) -> bool:
        """Are more message bytes in memory than the threshold?"""
        return BODIES.bytes > self.threshold

    def waiting(self, msg: Message, selective: bool = False) -> None:
        """``msg`` waits (in a queue, for its delivery time, for its transaction's
        COMMIT): while memory is over the threshold, its bytes go.  ``selective``: a
        selector will look at it, so its property values stay (decoded now)."""
        if BODIES.bytes <= self.threshold:
            return
        if selective and msg._selector_values is None and msg._raw is not None:
            msg.selector_values()
        self.let_go(msg)

    def let_go(self, msg: Message) -> None:
        """Let ``msg``'s bytes go, whatever the memory (``waiting`` once over the
        threshold; a delivery queue for one far behind others, runs.py): to nowhere when
        they can be read again, else once the store has written them, else to the swap
        area."""
        if msg.src is not None:  # read back before: it can be read again
            msg.drop_body()
            return
        if msg._raw is None:
            return
        if msg.stored and self.store is not None:
            self._awaiting.append(msg)
            if not self._sealing:
                self._sealing = True
                self._call_soon(self._seal)
            return
        swap = self.swap
        if swap is None:
            return
        raw = msg._raw
        try:
            pos = swap.put(raw)
        except OSError as exc:
            reason = f"{swap.directory}: {exc.strerror or exc}"
            if reason != self._swap_error:
                self._swap_error = reason
                log.error("cannot page messages out to the swap area %s: kept in memory", reason)
            return
        self._swap_error = None
        msg.page_out(self, pos)
        self.stats.paged_out += 1
        self.stats.paged_out_bytes += msg.size

    def _call_soon(self, fn: Callable[[], None]) -> None:
        try:
            asyncio.get_running_loop().call_soon(fn)
        except RuntimeError:  # no loop (in-process tests): now
            fn()

    def _seal(self) -> None:
        # End of the loop turn: every message waiting here had its MsgAdd submitted
        # before now, so the store's next "durable" covers them all.
        self._sealing = False
        batch, self._awaiting = self._awaiting, []
        store = self.store
        if batch and store is not None:
            store.after_durable(lambda: self._stored(batch))

    def _stored(self, batch: list[Message]) -> None:
        stats = self.stats
        for msg in batch:
            if msg.src is None and msg._raw is not None:
                msg.page_out(self, -1)
                stats.paged_out += 1
                stats.paged_out_bytes += msg.size

    def done_with(self, msg: Message) -> None:
        """``msg`` was just sent to a consumer (or looked at by selectors and left): its
        bytes go again (they can be read again; kept, a consumer's unacknowledged
        window of read-back messages would fill memory past the threshold)."""
        if msg.src is not None:
            msg.drop_body()

    def page_out_recovered(self, queues: Iterable[PagedQueue]) -> int:
        """After recovery from a store that loaded bodies: while memory is over the
        threshold, the messages behind each queue's first read-ahead window let their
        bytes go (to nowhere when the store gives them back, else to the swap area).
        Returns how many did."""
        n = 0
        stats = self.stats
        for dq in queues:
            for i, e in enumerate(dq):
                if not self.over():
                    return n
                m = e.msg
                if i < self.readahead or m._raw is None:
                    continue
                if m.stored and self.store is not None:
                    m.page_out(self, -1)
                    stats.paged_out += 1
                    stats.paged_out_bytes += m.size
                else:
                    self.let_go(m)
                n += not m.resident
        return n

    # -- reading back -----------------------------------------------------------------

    def read_back(self, msg: Message) -> bytes | None:
        """``msg``'s bytes, read now on this thread (a caller that needs them once)."""
        body = self._read([msg])[0]
        if body is not None:
            self.stats.read_back += 1
            self.stats.read_back_bytes += msg.size
        return body

    def retain(self, pos: int) -> None:
        """One more holder of the body at ``pos`` in the swap area (see BodySource)."""
        if pos >= 0 and self.swap is not None:
            self.swap.retain(pos)

    def released(self, pos: int, size: int) -> None:
        """A holder of the body at ``pos`` in the swap area is gone (see BodySource)."""
        if pos >= 0 and self.swap is not None:
            self.swap.release(pos, size + _DC_SLOT)

    def _read(self, msgs: list[Message]) -> list[bytes | None]:
        """Bodies of ``msgs`` (any thread): from the store by key, or from the swap area."""
        out: list[bytes | None] = [None] * len(msgs)
        keys, where = [], []
        swap = self.swap
        for i, m in enumerate(msgs):
            if m.pos >= 0:
                if swap is not None:
                    out[i] = swap.read(m.pos, m.size + _DC_SLOT)
            else:
                keys.append(m.store_key)
                where.append(i)
        if keys and self.store is not None:
            for i, body in zip(where, self.store.read_bodies(keys), strict=True):
                out[i] = body
        return out

    def fetch(
        self,
        dq: PagedQueue,
        first: Message | None = None,
        following: Iterable[Entry] | None = None,
    ) -> bool:
        """``dq``'s next message is paged out (or ``first``, which a selector scan
        reached, with the entries ``following`` it): read the next window of ``dq`` back
        from there.  True while a read for ``dq`` is under way (its dispatch waits for
        it); False when nothing is paged out there (or there is no event loop: the
        caller reads synchronously)."""
        if dq in self._reading:
            return True
        msgs = self._window(dq.head() if first is None else following or (), first)
        if not msgs:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="pager-read")
        self._reading.add(dq)
        fut = loop.run_in_executor(self._reader, self._read, msgs)
        fut.add_done_callback(lambda f: self._arrived(dq, msgs, f))
        return True

    def _window(self, entries: Iterable[Entry], first: Message | None) -> list[Message]:
        msgs: list[Message] = []
        nbytes = 0
        limit = 4 * self.readahead  # entries looked at: resident ones are passed over
        if first is not None:
            msgs.append(first)
            nbytes += first.size
        for n, e in enumerate(entries):
            m = e.msg
            if m._raw is None:
                msgs.append(m)
                nbytes += m.size
                if len(msgs) >= self.readahead or nbytes >= self.window_bytes:
                    break
            if n >= limit:
                break
        return msgs

    def _arrived(
        self, dq: PagedQueue, msgs: list[Message], fut: asyncio.Future[list[bytes | None]]
    ) -> None:
        self._reading.discard(dq)
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            # The source failed (a database that went away, an I/O error), not a body
            # found damaged: nothing is given up on; the queue tries again (read_retry).
            log.error(
                "reading paged-out messages back failed (tried again in %g s): %s",
                self.read_retry,
                exc,
            )
            asyncio.get_running_loop().call_later(self.read_retry, self._retry, dq)
            return
        bodies: list[bytes | None] = fut.result()
        lost: set[int] = set()
        stats = self.stats
        for m, body in zip(msgs, bodies, strict=True):
            if body is None:
                if m._raw is None:
                    lost.add(id(m))
                continue
            m.page_in(body)
            stats.read_back += 1
            stats.read_back_bytes += m.size
        if lost:
            # Packed entries were not read: only objects can be the lost ones.
            for entry in dq.remove_where(lambda e: id(e.msg) in lost, lambda run: False):
                self.lose(entry)
        if not dq.active:
            return
        dq.dispatch(self._now())
        # Read the next window behind it while memory allows.
        if (
            dq.count
            and dq.consumers
            and dq not in self._reading
            and BODIES.bytes + self.window_bytes <= self.threshold
        ):
            self.fetch(dq)

    def _retry(self, dq: PagedQueue) -> None:
        if dq.active:
            dq.dispatch(self._now())

    def lose(self, entry: Entry) -> None:
        """A pending entry whose bytes cannot be read back: reported and skipped (it is
        settled, so it cannot block its queue or come back at every start)."""
        self.stats.lost += 1
        log.error(
            "message %s on %s is skipped: its paged-out bytes cannot be read back",
            entry.msg.message_id,
            entry.owner.name,
        )
        entry.owner.account_out(entry)

    # -- figures and life -------------------------------------------------------------

    def close(self) -> None:
        if self._reader is not None:
            self._reader.shutdown(wait=True, cancel_futures=True)
            self._reader = None
        self._awaiting = []
