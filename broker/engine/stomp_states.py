"""A STOMP connection's states, the transitions between them, and which frames each
state takes: the shape of states.py for the JMQ engine."""

from __future__ import annotations

from enum import Enum, auto


class StompState(Enum):
    """Where a STOMP connection stands."""

    NEW = auto()  # waiting for CONNECT (or STOMP)
    CONNECTING = auto()  # CONNECT taken, the broker checking the login: frames held
    CONNECTED = auto()  # CONNECTED sent: every client frame is taken
    CLOSED = auto()

    __hash__ = object.__hash__


class StompEvent(Enum):
    CONNECT = auto()
    LOGGED_IN = auto()
    CLOSED = auto()


NEW = StompState.NEW
CONNECTING = StompState.CONNECTING
CONNECTED = StompState.CONNECTED
CLOSED = StompState.CLOSED

TRANSITIONS: dict[tuple[StompState, StompEvent], StompState] = {
    (NEW, StompEvent.CONNECT): CONNECTING,
    (CONNECTING, StompEvent.LOGGED_IN): CONNECTED,
    **{(s, StompEvent.CLOSED): CLOSED for s in StompState if s is not CLOSED},
}


class InvalidStompTransition(RuntimeError):
    """A transition the table does not have: a bug in the engine, never the client's."""


def next_state(state: StompState, event: StompEvent) -> StompState:
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise InvalidStompTransition(f"{event.name} in state {state.name}") from None


class FrameRule(Enum):
    HANDLE = auto()
    HOLD = auto()  # kept until the login is answered
    NOT_CONNECTED = auto()  # ERROR, close
    ALREADY_CONNECTED = auto()  # ERROR, close
    IGNORE = auto()


_CONNECTS = ("CONNECT", "STOMP")

# Per state: the rule of the listed commands, and of every other one.
FRAME_RULES: dict[StompState, tuple[dict[str, FrameRule], FrameRule]] = {
    NEW: ({c: FrameRule.HANDLE for c in _CONNECTS}, FrameRule.NOT_CONNECTED),
    CONNECTING: ({}, FrameRule.HOLD),
    CONNECTED: ({c: FrameRule.ALREADY_CONNECTED for c in _CONNECTS}, FrameRule.HANDLE),
    CLOSED: ({}, FrameRule.IGNORE),
}
