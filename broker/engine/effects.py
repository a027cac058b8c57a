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
