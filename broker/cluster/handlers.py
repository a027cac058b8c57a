"""The cluster service's packet table: each part registers what it handles.

A part of the service (peers.py, delivery.py, changes.py, remote_transactions.py, locks.py) owns
its state and gives :class:`~broker.cluster.service.ClusterService` a
``{GPacket type: handler}`` table of the packets that are its business; the service
joins the tables into one and looks every packet of an up link up in it, as
:mod:`.linkengine` looks a link packet up in ``LINK_RULES``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.protocol import gpacket as gp

if TYPE_CHECKING:
    from .link_driver import BrokerLink

# What a part does with a packet from an up link (a ProtocolError drops the link).
Handler = Callable[["BrokerLink", gp.GPacket], None]
Handlers = dict[int, Handler]


def ignore(_link: BrokerLink, _pkt: gp.GPacket) -> None:
    """A reply that only says the peer did as asked."""


def join(*tables: Handlers) -> Handlers:
    """The parts' tables as one; a type two parts claim is a mistake in the assembly."""
    out: Handlers = {}
    for table in tables:
        for t, handler in table.items():
            if t in out:
                raise ValueError(f"GPacket type {t} is handled by two parts of the service")
            out[t] = handler
    return out


__all__ = ["Handler", "Handlers", "ignore", "join"]
