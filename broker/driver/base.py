"""One base for the asyncio drivers: write the engine's batch, carry out its effects."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from broker.engine.effects import CancelTimer, Close, Effect, Effects, StartTimer


class DrivenEngine(Protocol):
    """What a driver asks of its engine: the write batch and the queued effects."""

    def data_to_send(self) -> Sequence[bytes | bytearray]: ...

    def take_effects(self) -> Effects: ...


class EngineDriver(asyncio.Protocol):
    """An ``asyncio.Protocol`` driving one sans-IO engine.

    The subclass makes ``self.engine``, gives the engine ``wake`` (which schedules
    :meth:`flush`), feeds it the transport's callbacks and passes what the engine's
    entry points return to :meth:`run`.  :meth:`flush` writes everything queued in one
    ``writelines`` and then runs the effects left for it; ``Close``, ``StartTimer`` and
    ``CancelTimer`` are carried out here, any other effect goes to :meth:`run_effect`.
    """

    engine: DrivenEngine

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the transport runs on (the running one before ``connection_made``)."""
        return self._loop or asyncio.get_running_loop()

    def flush(self) -> None:
        """Write the engine's batch, then run the effects it queued meanwhile."""
        e = self.engine
        out = e.data_to_send()
        if out:
            t = self.transport
            if t is not None and not t.is_closing():
                self.write_batch(t, out)
                self.wrote(out)
        effects = e.take_effects()
        if effects:
            self.run(effects)

    def write_batch(self, t: asyncio.Transport, out: Sequence[bytes | bytearray]) -> None:
        """Put the engine's batch on the wire (a WebSocket driver frames it first)."""
        t.writelines(out)

    def close_transport(self) -> None:
        """The engine ends the connection (a WebSocket driver says goodbye first)."""
        if self.transport is not None:
            self.transport.close()

    def wrote(self, out: Sequence[bytes | bytearray]) -> None:
        """Called after ``out`` was handed to the transport (counters, a link's clock)."""

    def run(self, effects: Effects) -> None:
        """Carry out what the engine asked for, in order."""
        for eff in effects:
            kind = type(eff)
            if kind is Close:
                self.flush()
                self.close_transport()
            elif kind is StartTimer:
                self._start_timer(eff)  # type: ignore[arg-type]
            elif kind is CancelTimer:
                handle = self._timers.pop(eff.name, None)  # type: ignore[union-attr]
                if handle is not None:
                    handle.cancel()
            else:
                self.run_effect(eff)

    def run_effect(self, eff: Effect) -> None:
        """An effect this driver's engine has beyond the shared ones (none by default)."""

    def cancel_timers(self) -> None:
        """The transport is gone: no timer of this connection fires any more."""
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def _start_timer(self, eff: StartTimer) -> None:
        old = self._timers.pop(eff.name, None)
        if old is not None:
            old.cancel()
        name, callback = eff.name, eff.callback

        def fire() -> None:
            self._timers.pop(name, None)
            self.run(callback())

        self._timers[name] = self.loop.call_later(eff.delay, fire)
