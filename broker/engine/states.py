"""The connection's states, the transitions between them, and which packets each allows.

The shape of h11's state machine: a state is an Enum member, a transition is a row of
:data:`TRANSITIONS` (state, event) -> next state, and :data:`PACKET_RULES` says, per
state, what happens to a packet type.  Nothing else in the engine assigns a state.
"""

from __future__ import annotations

from enum import Enum, auto

from broker.protocol.types import PacketType


class ConnState(Enum):
    """Where a connection stands in the handshake."""

    NEW = auto()  # connected, waiting for HELLO
    AUTHENTICATING = auto()  # HELLO answered, AUTHENTICATE_REQUEST sent
    VERIFYING = auto()  # credentials being checked (or a refusal delayed): input held
    REFUSED = auto()  # login refused: input ignored until the client or a timer closes
    READY = auto()  # authenticated: every packet type the broker handles is accepted
    CLOSED = auto()

    # Every packet tests the state against the sets below; Enum's own __hash__ is a
    # Python-level hash of the name, identity is the same answer for singletons in C.
    __hash__ = object.__hash__


class ConnEvent(Enum):
    """What moves a connection from one state to the next."""

    HELLO_ACCEPTED = auto()
    CREDENTIALS_HELD = auto()  # a repository look-up or a delayed refusal is pending
    AUTHENTICATED = auto()
    LOGIN_REFUSED = auto()
    CLOSED = auto()


NEW = ConnState.NEW
AUTHENTICATING = ConnState.AUTHENTICATING
VERIFYING = ConnState.VERIFYING
REFUSED = ConnState.REFUSED
READY = ConnState.READY
CLOSED = ConnState.CLOSED

TRANSITIONS: dict[tuple[ConnState, ConnEvent], ConnState] = {
    (NEW, ConnEvent.HELLO_ACCEPTED): AUTHENTICATING,
    (AUTHENTICATING, ConnEvent.CREDENTIALS_HELD): VERIFYING,
    (AUTHENTICATING, ConnEvent.LOGIN_REFUSED): REFUSED,
    (VERIFYING, ConnEvent.CREDENTIALS_HELD): VERIFYING,
    (VERIFYING, ConnEvent.AUTHENTICATED): READY,
    (VERIFYING, ConnEvent.LOGIN_REFUSED): REFUSED,
    **{(s, ConnEvent.CLOSED): CLOSED for s in ConnState if s is not CLOSED},
}

# States whose packets are not dispatched: held for later, or dropped.
HOLDS_INPUT = frozenset({VERIFYING})
IGNORES_INPUT = frozenset({REFUSED, CLOSED})
# States the authentication deadline (imq.authentication.client.response.timeout) covers.
BEFORE_LOGIN = frozenset({NEW, AUTHENTICATING, VERIFYING, REFUSED})


class InvalidTransition(RuntimeError):
    """A transition the table does not have: a bug in the engine, never the client's."""


def next_state(state: ConnState, event: ConnEvent) -> ConnState:
    """The state ``event`` leads to from ``state``."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise InvalidTransition(f"{event.name} in state {state.name}") from None


class Rule(Enum):
    """What a packet type does in a state."""

    HANDLE = auto()  # dispatch to its handler
    NOT_AUTHENTICATED = auto()  # ERROR reply, then GOODBYE and close
    REPEATED_HELLO = auto()  # ERROR reply, the connection carries on
    OUT_OF_SEQUENCE = auto()  # ERROR reply, then GOODBYE and close


_LIVENESS: dict[int, Rule] = {
    PacketType.PING: Rule.HANDLE,
    PacketType.PING_REPLY: Rule.HANDLE,
    PacketType.GOODBYE: Rule.HANDLE,
}

# Per state: the rule of each listed packet type, and the rule of every other one.
PACKET_RULES: dict[ConnState, tuple[dict[int, Rule], Rule]] = {
    NEW: (
        {
            PacketType.HELLO: Rule.HANDLE,
            PacketType.AUTHENTICATE: Rule.OUT_OF_SEQUENCE,
            **_LIVENESS,
        },
        Rule.NOT_AUTHENTICATED,
    ),
    AUTHENTICATING: (
        {
            PacketType.HELLO: Rule.REPEATED_HELLO,
            PacketType.AUTHENTICATE: Rule.HANDLE,
            **_LIVENESS,
        },
        Rule.NOT_AUTHENTICATED,
    ),
    READY: (
        {PacketType.HELLO: Rule.REPEATED_HELLO, PacketType.AUTHENTICATE: Rule.OUT_OF_SEQUENCE},
        Rule.HANDLE,
    ),
}
