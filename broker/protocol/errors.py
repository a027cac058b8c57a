"""The one error type the protocol codecs raise for bytes they cannot decode.

Every decoder in :mod:`broker.protocol` raises a subclass of :class:`ProtocolError`
for bad input and nothing else, so the connection handler can tell "the peer sent
garbage" (answer 400 or close) from "the broker has a bug" (500 with a traceback)
by type alone.  It is a ``ValueError`` so callers that already treat bad values as
``ValueError`` keep working.
"""

from __future__ import annotations

__all__ = ["ProtocolError"]


class ProtocolError(ValueError):
    """Bytes from a peer that are not what the protocol allows."""
