"""One cluster link's protocol, sans-IO: the handshake, then GPackets both ways.

The shape of :mod:`broker.engine` for client connections: bytes in
(:meth:`LinkEngine.receive_data`), bytes out (:meth:`LinkEngine.data_to_send`, the
batch the driver writes once per loop turn after ``wake``), and the rest as effects
from ``broker/engine/effects.py``
(``StartTimer``/``CancelTimer`` for the handshake deadline, ``Close``).  States move only
through :data:`TRANSITIONS`; :data:`LINK_RULES` and :data:`GPACKET_RULES` say, per state,
what a packet does.  The driver is :class:`broker.cluster.link_driver.BrokerLink`; the cluster
service is reached only through the callbacks a :class:`LinkHost` gives.

The handshake (docs/developers/protocol.md, "Cluster links"): each side sends LINK_INIT
and BROKER_INFO as legacy link packets as soon as it is connected, checks the other's
identity, cluster version and match properties (``LinkHost.check_peer``), answers its
BROKER_INFO with a G_BROKER_INFO_REPLY (46), and the link is up once the peer's reply
to its own BROKER_INFO is in.  On the wire from the peer that is always LINK_INIT,
BROKER_INFO, then the reply:

    NEW --LINK_INIT--> INIT --BROKER_INFO (reply sent)--> INFO_EXCHANGED --reply 200--> UP
    UP --GOODBYE (either side)--> LEAVING;  any state --close--> CLOSED

Anything wrong -- bytes that are not packets, a wrong version, a truncated packet, a
packet out of its place, a GPacket type OpenMQ does not define, a body the service
cannot decode (its handler raises a ProtocolError), a peer that never finishes the
handshake, a peer claiming an identity it cannot have -- drops this link with one WARNING
naming the reason (the ``Close`` effect); the broker goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto

from broker.engine.effects import (
    NO_EFFECTS,
    CancelTimer,
    Close,
    Effect,
    Effects,
    Outbox,
    StartTimer,
)
from broker.engine.states import InvalidTransition
from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo
from broker.protocol.errors import ProtocolError

log = logging.getLogger("broker.cluster")

# The default of imq.cluster.handshake.timeout (a link's own is LinkEngine's argument).
HANDSHAKE_TIMEOUT = 10.0
_HANDSHAKE_TIMER = "handshake"


class LinkRefused(Exception):
    """The peer may not link to this broker; the message says why."""


class LinkState(Enum):
    """Where a link stands."""

    NEW = auto()  # connected, our LINK_INIT and BROKER_INFO sent
    INIT = auto()  # the peer's LINK_INIT accepted
    INFO_EXCHANGED = auto()  # the peer's BROKER_INFO answered; waiting for its reply
    UP = auto()  # GPackets flow
    LEAVING = auto()  # GOODBYE said or heard: what is queued still goes out
    CLOSED = auto()

    __hash__ = object.__hash__  # see broker.engine.states.ConnState


class LinkEvent(Enum):
    PEER_INIT = auto()
    PEER_INFO = auto()
    REPLY_OK = auto()
    GOODBYE = auto()
    CLOSED = auto()


NEW, INIT, INFO_EXCHANGED, UP, LEAVING, CLOSED = (
    LinkState.NEW,
    LinkState.INIT,
    LinkState.INFO_EXCHANGED,
    LinkState.UP,
    LinkState.LEAVING,
    LinkState.CLOSED,
)

TRANSITIONS: dict[tuple[LinkState, LinkEvent], LinkState] = {
    (NEW, LinkEvent.PEER_INIT): INIT,
    (INIT, LinkEvent.PEER_INFO): INFO_EXCHANGED,
    (INFO_EXCHANGED, LinkEvent.REPLY_OK): UP,
    (UP, LinkEvent.GOODBYE): LEAVING,
    (LEAVING, LinkEvent.GOODBYE): LEAVING,
    **{(s, LinkEvent.CLOSED): CLOSED for s in LinkState if s is not CLOSED},
}


def next_state(state: LinkState, event: LinkEvent) -> LinkState:
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise InvalidTransition(f"{event.name} in state {state.name}") from None


class Rule(Enum):
    """What a packet does in a state."""

    HANDLE = auto()  # the state's handler
    IGNORE = auto()  # heard (the keep-alive), nothing more
    REFUSE = auto()  # out of place: the link is dropped


_PEER_INIT, _PEER_INFO, _REPLY, _PACKET = "init", "info", "reply", "packet"

# Link packets (the handshake's legacy framing) by state: (rule, handler, why refused).
LINK_RULES: dict[LinkState, dict[int, tuple[Rule, str]]] = {
    NEW: {
        gp.LINK_INIT: (Rule.HANDLE, _PEER_INIT),
        gp.LINK_BROKER_INFO: (Rule.REFUSE, "BROKER_INFO before LINK_INIT"),
    },
    INIT: {
        gp.LINK_INIT: (Rule.REFUSE, "second LINK_INIT on one link"),
        gp.LINK_BROKER_INFO: (Rule.HANDLE, _PEER_INFO),
    },
    INFO_EXCHANGED: {
        gp.LINK_INIT: (Rule.REFUSE, "second LINK_INIT on one link"),
        gp.LINK_BROKER_INFO: (Rule.REFUSE, "second BROKER_INFO on one link"),
    },
    UP: {
        gp.LINK_INIT: (Rule.REFUSE, "second LINK_INIT on one link"),
        gp.LINK_BROKER_INFO: (Rule.REFUSE, "second BROKER_INFO on one link"),
        gp.LINK_PING: (Rule.IGNORE, "pre-raptor keep-alive: hearing it is enough"),
    },
}
LINK_RULES[LEAVING] = LINK_RULES[UP]

# GPackets by state: the default rule, and exceptions by packet type.
GPACKET_RULES: dict[LinkState, tuple[tuple[Rule, str], dict[int, tuple[Rule, str]]]] = {
    NEW: ((Rule.REFUSE, "before the handshake was complete"), {}),
    INIT: ((Rule.REFUSE, "before the handshake was complete"), {}),
    INFO_EXCHANGED: (
        (Rule.REFUSE, "before the handshake was complete"),
        {gp.G_BROKER_INFO_REPLY: (Rule.HANDLE, _REPLY)},
    ),
    UP: ((Rule.HANDLE, _PACKET), {}),
    LEAVING: ((Rule.HANDLE, _PACKET), {}),
}


@dataclass
class LinkHost:
    """What the engine needs from the cluster service (callbacks bound to one link)."""

    init_body: Callable[[], bytes]  # this broker's LINK_INIT body
    info_body: Callable[[], bytes]  # this broker's BROKER_INFO body (a BrokerInfo stream)
    check_peer: Callable[[gp.LinkInit], None]  # raises LinkRefused
    up: Callable[[], None]
    packet: Callable[[gp.GPacket], None]  # a GPacket once the link is up
    closed: Callable[[], None]


def _noop() -> None:
    pass


class LinkEngine(Outbox):
    """One link's state, input and output (see the module docstring)."""

    def __init__(
        self,
        host: LinkHost,
        *,
        expected: tuple[str, int] | None = None,
        expected_instance: str | None = None,
        wake: Callable[[], None] = _noop,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.host = host
        self.handshake_timeout = handshake_timeout
        # Set when this side dialled: the address (and instance) it meant to reach.
        self.expected = expected
        self.expected_instance = expected_instance
        self.wake = wake
        self.state = NEW
        self.reader = gp.GPacketReader()
        self.peer: gp.LinkInit | None = None
        self.peer_info: BrokerInfo | None = None
        self.reason: str | None = None
        # Whether the reason it closed was logged already (drop() logs it).
        self.logged = False
        self.remote_addr = "?"
        self._left = False
        # The peer asked this broker to stop sending it messages (G_STOP_MESSAGE_FLOW).
        self.flow_stopped = False
        self.last_heard = time.monotonic()
        self.last_sent = time.monotonic()  # the driver's, when it writes
        Outbox.__init__(self)  # the write batch and effects the driver takes

    # -- the driver's entry points ---------------------------------------------------

    def start(self) -> Effects:
        """Connected: say who we are, and start the handshake deadline."""
        self.write(gp.encode_link(gp.LinkPacket(gp.LINK_INIT, self.host.init_body())))
        self.write(gp.encode_link(gp.LinkPacket(gp.LINK_BROKER_INFO, self.host.info_body())))
        self._effect(StartTimer(_HANDSHAKE_TIMER, self.handshake_timeout, self._handshake_timeout))
        return self.take_effects()

    def receive_data(self, data: bytes) -> Effects:
        """Bytes from the peer; GPackets of an up link go to the host as they decode."""
        if self.state is CLOSED:
            return NO_EFFECTS
        self.last_heard = time.monotonic()
        try:
            for pkt in self.reader.feed(data):
                if self.state is CLOSED:
                    break
                if isinstance(pkt, gp.LinkPacket):
                    self._link_packet(pkt)
                else:
                    self._gpacket(pkt)
        except (ProtocolError, LinkRefused) as exc:
            self.drop(str(exc))
        return self.take_effects()

    def connection_lost(self, exc: Exception | None) -> None:
        """The transport is gone (after a drop, a GOODBYE, or the peer's doing)."""
        was = self.state
        if was is not CLOSED:
            self.state = next_state(was, LinkEvent.CLOSED)
            if self.reason is None:
                if was is LEAVING:
                    self.reason = "left the cluster (GOODBYE)"
                elif self.reader.pending:
                    self.reason = f"connection lost in the middle of a packet ({exc or 'EOF'})"
                else:
                    self.reason = f"connection lost ({exc or 'closed by peer'})"
        self.host.closed()

    # -- what the service does with a link -------------------------------------------

    @property
    def up(self) -> bool:
        return self.state is UP or self.state is LEAVING

    @property
    def closed(self) -> bool:
        return self.state is CLOSED

    @property
    def goodbye(self) -> bool:
        """Whether GOODBYE was said or heard: the peer leaves, it did not crash."""
        return self._left

    def write(self, data: bytes) -> None:
        """Queue bytes (nothing once closed); the driver writes the batch once per turn."""
        if self.state is CLOSED:
            return
        self._out.append(data)
        if not self._pending:
            self._pending = True
            self.wake()

    def send(self, pkt: gp.GPacket) -> None:
        self.write(gp.encode(pkt))

    def heard_goodbye(self) -> None:
        """The peer said GOODBYE: it is leaving, not crashing."""
        if self.state is UP or self.state is LEAVING:
            self.state = next_state(self.state, LinkEvent.GOODBYE)
            self._left = True

    def leave(self, props: dict[str, object] | None = None) -> None:
        """Say GOODBYE (``props``: the sender's address, as OpenMQ sends them) and close
        once it has gone: a clean leave, not a crash, for the peer."""
        if self.state is UP or self.state is LEAVING:
            self.state = next_state(self.state, LinkEvent.GOODBYE)
            self._left = True
            # OpenMQ asks for a G_GOODBYE_REPLY (A bit); the close does not wait for it.
            self.send(gp.GPacket(gp.G_GOODBYE, dict(props or {}), b"", flags=gp.A_BIT))
        self.close()

    def close(self) -> None:
        """Close after what is queued has gone (shutdown); the state follows when the
        transport reports it lost."""
        self._effect(Close("closed by this broker"))

    def drop(self, reason: str) -> None:
        """Close the link now, logging ``reason`` once."""
        if self.state is CLOSED:
            return
        self.reason = reason
        self.logged = True
        log.warning("cluster link %s dropped: %s", self.describe(), reason)
        self.state = next_state(self.state, LinkEvent.CLOSED)
        self._effect(Close(reason))

    def describe(self) -> str:
        if self.peer is not None:
            return f"{self.peer.address} ({self.remote_addr})"
        if self.expected is not None:
            return f"to {self.expected[0]}:{self.expected[1]} ({self.remote_addr})"
        return f"from {self.remote_addr}"

    @property
    def address(self) -> gp.BrokerAddress | None:
        return self.peer.address if self.peer is not None else None

    # -- input -----------------------------------------------------------------------

    def _link_packet(self, pkt: gp.LinkPacket) -> None:
        rule, what = LINK_RULES.get(self.state, {}).get(
            pkt.type, (Rule.REFUSE, f"unexpected link packet type {pkt.type}")
        )
        if rule is Rule.REFUSE:
            raise LinkRefused(what)
        if rule is Rule.IGNORE:
            return
        if what == _PEER_INIT:
            try:
                init = gp.LinkInit.decode(pkt.body)
            except ProtocolError as exc:
                raise LinkRefused(f"bad LINK_INIT: {exc}") from None
            self.host.check_peer(init)
            self.peer = init
            self.state = next_state(self.state, LinkEvent.PEER_INIT)
        else:  # _PEER_INFO
            assert self.peer is not None
            try:
                info = BrokerInfo.decode(pkt.body)
            except ProtocolError as exc:
                raise LinkRefused(f"BROKER_INFO body does not deserialise: {exc}") from None
            if (info.instance, info.port) != (self.peer.instance, self.peer.port):
                raise LinkRefused(
                    f"BROKER_INFO names {info.instance}@{info.host}:{info.port}, "
                    f"LINK_INIT {self.peer.address}"
                )
            self.peer_info = info
            self.state = next_state(self.state, LinkEvent.PEER_INFO)
            # OpenMQ answers with status 0 and its own BrokerInfo as the payload.
            self.send(gp.GPacket(gp.G_BROKER_INFO_REPLY, {"S": 0}, self.host.info_body()))

    def _gpacket(self, pkt: gp.GPacket) -> None:
        default, exceptions = GPACKET_RULES[self.state]
        rule, what = exceptions.get(pkt.type, default)
        if rule is Rule.REFUSE:
            raise LinkRefused(f"{pkt.name} {what}")
        if what == _PACKET:
            if pkt.type not in gp.KNOWN_TYPES:
                # Not OpenMQ's protocol: whatever follows cannot be trusted either.
                raise LinkRefused(f"unknown GPacket type {pkt.type}")
            self.host.packet(pkt)
            return
        status = pkt.props.get("S")  # _REPLY
        # OpenMQ's brokers answer 0; ours before the stock encoding said 200.
        if status not in (0, 200):
            shown = int(status) if isinstance(status, int) else repr(status)
            raise LinkRefused(f"peer refused the link (status {shown}, {pkt.props.get('reason')})")
        self.state = next_state(self.state, LinkEvent.REPLY_OK)
        self._effect(CancelTimer(_HANDSHAKE_TIMER))
        self.host.up()

    def _handshake_timeout(self) -> Effects:
        if not self.up and self.state is not CLOSED:
            self.drop(f"no complete handshake within {self.handshake_timeout:g} s")
        return self.take_effects()

    def _effect(self, effect: Effect) -> None:
        self._effects.append(effect)
        if not self._pending:
            self._pending = True
            self.wake()


__all__ = [
    "GPACKET_RULES",
    "HANDSHAKE_TIMEOUT",
    "LINK_RULES",
    "TRANSITIONS",
    "InvalidTransition",
    "LinkEngine",
    "LinkEvent",
    "LinkHost",
    "LinkRefused",
    "LinkState",
    "next_state",
]
