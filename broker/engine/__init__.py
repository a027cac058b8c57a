"""The sans-IO connection engine: one client connection's protocol rules, without I/O.

Packets (or bytes, through the engine's ``PacketReader``) go in; what the broker says
back comes out.  The engine drives the router (broker/core) synchronously and knows
nothing of sockets, event loops or threads:

- bytes for the peer are queued in the engine's write batch and ``engine.wake()`` is
  called once when the batch goes from empty to pending; the driver takes the batch with
  ``data_to_send()`` (as h11's connection does; ``flush_pending`` says whether ``wake``
  was called since);
- everything else the driver must do is an *effect* (effects.py): ``Close`` the
  transport, ``RunBlocking`` (the user repository look-up, in a thread pool today),
  ``StartTimer`` / ``CancelTimer`` (login deadline, delayed refusal, refusal linger) and
  ``TransactionTimer`` (a transaction's JMQLifetime).  The entry points
  (``start``, ``receive_data``, ``receive_packets``, the callbacks handed out in effects)
  return them, a shared empty tuple when there are none; effects raised while someone
  else called the engine (the router delivering, the broker closing, the admin service)
  wait for the driver's ``take_effects()`` after ``wake``.

Layout:

- states.py               ConnState / ConnEvent, the transition table, per-state packet rules
- effects.py              the effects and ``NO_EFFECTS``
- engine.py               ConnectionEngine: input, dispatch, output, closing, the router's Link
- handshake.py            HELLO, AUTHENTICATE (basic/digest, LDAP bind), login throttle, PING
- resources.py            sessions, destinations, producers, consumers, access checks
- messages.py             SEND, producer/connection flow control, ACKNOWLEDGE, REDELIVER, browse
- transaction_requests.py local and XA transaction requests

Drivers:

- TCP/TLS: ``broker.server.connection.ClientConnection`` (an asyncio Protocol over
  ``broker.driver.EngineDriver``) feeds ``receive_data``, writes ``data_to_send()`` once
  per loop turn, runs effects with the loop's timers
  and the broker's executor.
- A UMS (HTTP) session would keep one engine per UMS session id: build the JMQ packets
  its HTTP calls mean with ``broker.protocol.packet.build_packet`` and pass them to
  ``receive_packets`` (HELLO and AUTHENTICATE first, as a client would), read replies
  and deliveries back out of ``data_to_send()`` (``PacketReader`` decodes them) to
  answer the HTTP request, and run the same effects; ``wake`` tells it a long-poll can return.
- A cluster link would drive one engine per remote broker's client-facing traffic the
  same way (its GPacket decoder turning remote sends and acks into JMQ packets), or use
  the rule modules' handlers on the packets it forwards; ``data_to_send()`` carries the
  deliveries to encode into GPackets.
"""

from .base import HANDLERS, Host
from .effects import (
    NO_EFFECTS,
    CancelTimer,
    Close,
    Effect,
    Effects,
    RunBlocking,
    StartTimer,
    TransactionTimer,
)
from .engine import ConnectionEngine
from .states import ConnEvent, ConnState, InvalidTransition

__all__ = [
    "HANDLERS",
    "NO_EFFECTS",
    "CancelTimer",
    "Close",
    "ConnEvent",
    "ConnState",
    "ConnectionEngine",
    "Effect",
    "Effects",
    "Host",
    "InvalidTransition",
    "RunBlocking",
    "StartTimer",
    "TransactionTimer",
]
