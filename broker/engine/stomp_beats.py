"""STOMP 1.1 and 1.2 heart-beats, once agreed (stomp_base.py's ``_logged_in`` starts the
timers): an end-of-line to the client when the broker has written nothing, and a client
that promised beats and has gone silent dropped."""

from __future__ import annotations

import time
from typing import Protocol

from .effects import Effect, Effects, StartTimer
from .stomp_states import CONNECTED, StompState


class _Beating(Protocol):
    """What the callbacks use of the engine (stomp_base.StompEngineBase)."""

    state: StompState
    hb_out: int
    hb_in: int
    last_read: float
    _wrote: bool

    def write(self, data: bytes) -> None: ...
    def _effect(self, eff: Effect) -> None: ...
    def take_effects(self) -> Effects: ...
    def _fatal(self, reason: str, frame: None) -> None: ...
    def _beat_out(self) -> Effects: ...
    def _check_in(self) -> Effects: ...


class StompHeartBeats:
    """The heart-beat timers' callbacks, a base of :class:`StompEngineBase`."""

    __slots__ = ()

    def _beat_out(self: _Beating) -> Effects:
        # Every half interval: an end-of-line when nothing was written since the last
        # look, so the longest silence is one interval ("MUST send new data at least
        # every <n> milliseconds"), wherever in a half the last frame went out; once an
        # interval, a frame written just after a look left two without data.
        if self.state is CONNECTED:
            if self._wrote:
                self._wrote = False
            else:
                # Counted as written (write() says so): the next look, half an
                # interval on, writes none, so an idle connection beats once an interval.
                self.write(b"\n")
            self._effect(StartTimer("stomp-hb-out", self.hb_out / 2000, self._beat_out))
        return self.take_effects()

    def _check_in(self: _Beating) -> Effects:
        if self.state is CONNECTED:
            silent = (time.monotonic() - self.last_read) * 1000
            # Dropped once silent for 1.5 intervals, checked every quarter: within twice.
            if silent > self.hb_in * 1.5:
                self._fatal(
                    f"no heart-beat or frame for {silent / 1000:.1f} s "
                    f"(the client promised one every {self.hb_in / 1000:g} s)",
                    None,
                )
            else:
                self._effect(StartTimer("stomp-hb-in", self.hb_in / 4000, self._check_in))
        return self.take_effects()
