"""The STOMP engine: one STOMP connection's rules, without I/O, over a JMQ engine.

OpenMQ's STOMP bridge is a JMS client inside the broker; here a STOMP connection is a
:class:`ConnectionEngine` (the JMQ rules: login against the user repository, access
control, sessions, consumers, transactions, flow control, limits) that the STOMP engine
drives with the JMQ packets each frame means, reading what that engine answers (replies,
deliveries, GOODBYE) and writing STOMP frames for them.  So the same users, groups, ACL
rules, destinations, limits, DMQ and transactions hold for both protocols, and the
connection is listed (``imqcmd list cxn``) as any other.  The hot frames skip the packet
round trip but not the rules: a SEND's message is made as the JMQ engine would make it
of the packet and routed through :meth:`StompLink.take_message` (access, limits,
transactions, as ``on_message``), an ACK outside a transaction goes to the router's
acknowledgements, and a delivery is rendered from the router's message.

Layout:

- stomp_states.py   StompState / StompEvent, the transition table, per-state frame rules
- stomp_base.py     state, input, output, the JMQ engine underneath, CONNECT, deliveries
- stomp_beats.py    heart-beats once agreed (a base of stomp_base's class)
- stomp_frames.py   SEND, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, BEGIN, COMMIT, ABORT, DISCONNECT
- stomp_mapping.py  STOMP frames <-> JMQ message packets, as OpenMQ's bridge maps them
- stomp_link.py     the JMQ engine underneath, whose deliveries the router hands over as
                    messages, made into MESSAGE frames here (no JMQ packet each way)

Bytes come in through ``receive_data``; frames for the client go to the write batch
the driver takes with ``data_to_send()`` (``wake`` called once per batch); effects
(the JMQ engine's, and the heart-beat timers) are returned or left for ``take_effects``, as in engine.py.
The driver (broker/server/stomp.py) calls ``pump`` before it writes and ``after_write``
after, which is where a subscription gets its next delivery credit: a subscriber that
does not read stops its deliveries once the transport pauses writing.
"""

from __future__ import annotations

from .stomp_base import FRAME_HANDLERS, StompSettings, Subscription
from .stomp_frames import StompFrameRules


class StompEngine(StompFrameRules):
    """The broker's side of one STOMP connection, without I/O."""

    __slots__ = ()


FRAME_HANDLERS.update(
    {
        "CONNECT": StompEngine.on_connect,
        "STOMP": StompEngine.on_connect,
        "SEND": StompEngine.on_send,
        "SUBSCRIBE": StompEngine.on_subscribe,
        "UNSUBSCRIBE": StompEngine.on_unsubscribe,
        "ACK": StompEngine.on_ack,
        "NACK": StompEngine.on_nack,
        "BEGIN": StompEngine.on_begin,
        "COMMIT": StompEngine.on_commit,
        "ABORT": StompEngine.on_abort,
        "DISCONNECT": StompEngine.on_disconnect,
    }
)

__all__ = ["StompEngine", "StompSettings", "Subscription"]
