"""A daemon thread fed through a bounded queue, for work the event loop hands off.

The loop's side never blocks: :meth:`QueueThread.offer` drops the item (and counts it)
when the queue is full, because a stuck database or disk must not stall message traffic.
"""

from __future__ import annotations

import queue
import threading

STOP = object()


class QueueThread:
    """Subclasses implement ``_run``, taking items from ``self._queue`` until :data:`STOP`;
    they set their own attributes before calling ``QueueThread.__init__`` (which starts
    the thread)."""

    def __init__(self, name: str, max_queue: int) -> None:
        self.dropped = 0
        self._queue: queue.Queue[object] = queue.Queue(max_queue)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def offer(self, item: object) -> None:
        """Queue ``item`` for the thread, or drop it when the queue is full."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 3.0) -> None:
        """Let the thread finish what is queued (it gets :data:`STOP` last) and stop."""
        if self._thread.is_alive():
            try:
                self._queue.put(STOP, timeout=timeout)
            except queue.Full:
                return
            self._thread.join(timeout)

    def _run(self) -> None:
        raise NotImplementedError
