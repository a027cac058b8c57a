"""What the engine asks its driver to do: everything that needs a loop, a thread or a socket.

Bytes to send are not effects: the engine queues them in its write batch (the driver
takes it with ``data_to_send()``) and calls ``wake`` once per batch.  Effects are the
rarer rest, returned by the engine's entry points (or left for the driver's next
``take_effects`` when the engine was called by someone else: the router, the broker, the
admin service).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Returned when there is nothing to do: the message hot path allocates no list.
NO_EFFECTS: tuple = ()

Effects = Sequence["Effect"]


@dataclass(slots=True)
class Close:
    """Send what the write batch holds, then close the transport (the engine is already
    CLOSED)."""

    reason: str


@dataclass(slots=True)
class RunBlocking:
    """Call ``fn(*args)`` off the loop (a user repository look-up: database, file or
    directory), then hand the outcome to ``done(result, error)`` and run its effects."""

    fn: Callable[..., Any]
    args: tuple
    done: Callable[[Any, BaseException | None], Effects]


@dataclass(slots=True)
class StartTimer:
    """Call ``callback()`` (and run its effects) after ``delay`` seconds; a timer of the
    same name is replaced."""

    name: str
    delay: float
    callback: Callable[[], Effects]


@dataclass(slots=True)
class CancelTimer:
    name: str


@dataclass(slots=True)
class TransactionTimer:
    """Roll the transaction back when its JMQLifetime (ms) is over: the driver keeps the
    handle on ``txn.timer`` and asks ``router.txns.expire_transaction`` when it fires."""

    txn: Any
    delay_ms: int


Effect = Close | RunBlocking | StartTimer | CancelTimer | TransactionTimer


class Outbox:
    """An engine's side of the driver contract: the write batch (bytes, handed over by
    :meth:`data_to_send` for one ``writelines``), whether ``wake`` was called since the
    driver last looked (:attr:`flush_pending`), and the queued effects
    (:meth:`take_effects`).  The client, STOMP and cluster-link engines share it."""

    __slots__ = ("_out", "_pending", "_effects")

    def __init__(self) -> None:
        self._out: list[bytes | bytearray] = []
        self._pending = False
        self._effects: list[Effect] = []

    def data_to_send(self) -> list[bytes | bytearray]:
        """The bytes queued since the last call, oldest first, for one ``writelines``;
        clears :attr:`flush_pending` (the driver calls it, then :meth:`take_effects`)."""
        self._pending = False
        out = self._out
        if out:
            self._out = []
        return out

    @property
    def flush_pending(self) -> bool:
        """Bytes or effects queued since the driver last took them (``wake`` was called)."""
        return self._pending

    def take_effects(self) -> Effects:
        """The effects queued since the last call (also those of out-of-band calls)."""
        effects = self._effects
        if not effects:
            return NO_EFFECTS
        self._effects = []
        return effects
