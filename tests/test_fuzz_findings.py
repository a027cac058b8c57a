"""What ``bench/fuzz.py`` found, each pinned down by the input's meaning (the input itself
is replayed from tests/fuzz_corpus/ by tests/test_fuzz_targets.py)."""

from __future__ import annotations

import logging

import pytest

from broker.protocol.errors import ProtocolError
from broker.protocol.http1 import HttpError, RequestReader
from broker.protocol.jtypes import JFloat, JInt
from broker.protocol.properties import NotAnInteger, as_int
from broker.protocol.types import DEST_QUEUE, PacketType, Status
from broker.server.broker import Broker
from portal.ums.http import read_simple_body
from portal.ums.services import UmsError, build_request
from tests.test_engine import _login, _request, _sent, _status, broker  # noqa: F401 - fixture

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    "value", ["", "12x", b"", float("nan"), float("inf"), JFloat(float("inf"))]
)
def test_a_number_property_that_is_not_a_number_is_bad_input(value: object) -> None:
    with pytest.raises(NotAnInteger) as caught:
        as_int(value)
    # Bad input by type (the engine answers 400), and still int()'s error for callers
    # that catch TypeError or ValueError.
    assert isinstance(caught.value, ProtocolError)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)
    assert as_int("42") == 42 and as_int(JInt(7)) == 7


def test_a_session_id_that_is_not_a_number_gets_400_not_an_internal_error(
    broker: Broker,  # noqa: F811 - the engine tests' fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the jmq-engine target: ADD_PRODUCER whose JMQSessionID was an empty
    String was answered 500 "internal error" with a traceback in the log."""
    e = _login(broker)
    with caplog.at_level(logging.WARNING):
        e.receive_data(
            _request(
                PacketType.ADD_PRODUCER,
                cid=21,
                JMQDestination="q",
                JMQDestType=JInt(DEST_QUEUE),
                JMQSessionID="",
            )
        )
    reply, goodbye = _sent(e)
    assert (reply.type, _status(reply), reply.consumer_id) == (
        PacketType.ADD_PRODUCER_REPLY,
        Status.BAD_REQUEST,
        21,
    )
    assert "is not an integer" in str(reply.properties["JMQReason"])
    assert goodbye.type == PacketType.GOODBYE
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("malformed ADD_PRODUCER" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("length", [b"\xb24", b"\xb9", b"\xb3\xb3"])
def test_a_content_length_of_superscript_digits_is_400(length: bytes) -> None:
    """Found by the tunnel-http target: "²" (latin-1 0xB2) passes str.isdigit() and then
    int() raised ValueError, which the tunnel service does not take for bad input."""
    with pytest.raises(HttpError) as caught:
        RequestReader(max_body=100).feed(
            b"POST /imqTunnel?Type=push HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\n"
        )
    assert caught.value.status == 400
    assert "bad Content-Length" in str(caught.value)


def test_a_simple_send_whose_charset_cannot_be_looked_up_is_400() -> None:
    """Found by the ums target: a charset name with a NUL in it made bytes.decode raise
    ValueError (not LookupError), which /simple answered 500 "internal error"."""
    req = build_request({"service": "send", "destination": "q1"})
    with pytest.raises(UmsError) as caught:
        read_simple_body(req, "text/plain; charset=utf-8\x00x", b"hello")
    assert caught.value.status == 400
    assert "not text in its charset" in caught.value.reason
    read_simple_body(req, "text/plain; charset=latin-1", b"caf\xe9")
    assert req.text == "café"
