"""What the API's views share: the answer of an operation that changes something
(:func:`done`) and the schema of a 64-bit ID."""

from __future__ import annotations

from rest_framework.response import Response

from .. import serializers as s

DONE = s.DoneSerializer


def done(text: str) -> Response:
    return Response({"detail": text})


ID_SCHEMA = {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**63 - 1}
