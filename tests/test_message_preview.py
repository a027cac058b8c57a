"""The portal's body preview names Java types, not the Python wrappers (JInt(1) was shown)."""

import pytest

from broker.admintools.actions.messages import preview_body
from broker.protocol.javaser import encode_map_body, encode_stream_body
from broker.protocol.jtypes import JByte, JChar, JFloat, JInt, JLong, JShort

pytestmark = pytest.mark.fast


def test_map_preview_shows_java_types() -> None:
    body = encode_map_body(
        {
            "i": JInt(1),
            "l": JLong(2**40),
            "s": JShort(-3),
            "b": JByte(4),
            "f": JFloat(0.5),
            "d": 2.25,
            "t": True,
            "c": JChar("x"),
            "name": "eu",
            "raw": b"\x0a\xff",
        }
    )
    lines = set(preview_body("map", body).splitlines())
    assert lines == {
        "i = 1 (int)",
        f"l = {2**40} (long)",
        "s = -3 (short)",
        "b = 4 (byte)",
        "f = 0.5 (float)",
        "d = 2.25 (double)",
        "t = True (boolean)",
        "c = 'x' (char)",
        "name = 'eu'",
        "raw = 0a ff (byte[])",
    }


def test_stream_preview_shows_java_types() -> None:
    body = encode_stream_body([JInt(7), "a", False])
    assert preview_body("stream", body).splitlines() == ["7 (int)", "'a'", "False (boolean)"]
