"""The STOMP <-> JMQ message mapping (broker/engine/stomp_mapping.py), packet by packet."""

from __future__ import annotations

import pytest

from broker.engine.stomp_mapping import (
    MappingError,
    message_frame_headers,
    message_packet,
    parse_destination,
    stomp_name,
)
from broker.protocol.jtypes import JInt
from broker.protocol.packet import Packet, build_packet
from broker.protocol.types import DEST_QUEUE, DEST_TEMP, DEST_TOPIC, FLAG_P, FLAG_Q, PacketType

pytestmark = pytest.mark.fast


def test_destinations():
    assert (parse_destination("/queue/a.b", 1).name, parse_destination("/queue/a.b", 1).dtype) == (
        "a.b",
        DEST_QUEUE,
    )
    assert parse_destination("/topic/t", 1).dtype == DEST_TOPIC
    tmp = parse_destination("/temp-queue/r", 7)
    assert tmp.dtype == DEST_QUEUE | DEST_TEMP and tmp.name.startswith("temporary_destination://")
    # Our own temporary queue keeps its short name; another connection's, its full one.
    assert stomp_name(tmp.name, None, True, 7) == "/temp-queue/r"
    assert stomp_name(tmp.name, None, True, 8) == "/temp-queue/" + tmp.name
    assert parse_destination(stomp_name(tmp.name, None, True, 8), 8).name == tmp.name
    for bad in (None, "", "/queue/", "queue/a", "/exchange/x"):
        with pytest.raises(MappingError):
            parse_destination(bad, 1)


def test_content_length_makes_a_bytes_message():
    d = parse_destination("/queue/a", 1)
    text = Packet(message_packet([("destination", "/queue/a")], b"hi", d, None, 0, 1, 1))
    assert text.type == PacketType.TEXT_MESSAGE
    assert text.flags & FLAG_P and text.flags & FLAG_Q and text.priority == 4
    data = Packet(
        message_packet(
            [("content-length", "2"), ("persistent", "false"), ("x-y", "z")],
            b"hi",
            d,
            None,
            0,
            1,
            1,
        )
    )
    assert data.type == PacketType.BYTES_MESSAGE and not data.flags & FLAG_P
    assert data.properties == {"x-y": "z"}
    with pytest.raises(MappingError, match="UTF-8"):
        message_packet([], b"\xff", d, None, 0, 1, 1)


def test_typed_properties_as_java_writes_them():
    pkt = Packet(
        build_packet(
            PacketType.TEXT_MESSAGE,
            props={"n": JInt(5), "b": True, "f": 1.5, "JMQInternal": 1},
            body=b"x",
            fields={1: "q"},
        )
    )
    headers, body = message_frame_headers(pkt, "s", "/queue/q", None, 1)
    h = dict(headers)
    assert (h["n"], h["b"], h["f"]) == ("5", "true", "1.5")
    assert "JMQInternal" not in h and body == b"x"
