"""The STOMP codec (broker/protocol/stomp.py) fed bytes: frames of each version,
escaping, bodies by content-length and by NUL, heart-beats, CRLF, limits."""

from __future__ import annotations

import pytest

from broker.protocol.errors import ProtocolError
from broker.protocol.stomp import Frame, FrameReader, StompError, encode_frame, escape, unescape

pytestmark = pytest.mark.fast


def read(data: bytes, version: str = "1.2", **limits: int) -> list[Frame]:
    return FrameReader(version, **limits).feed(data)


def test_connect_frame_unescaped_in_any_version():
    (f,) = read(b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:a\\cb\nlogin:guest\n\n\x00")
    assert f.command == "CONNECT"
    # CONNECT is never escaped: the backslash stays.
    assert f.get("host") == "a\\cb"
    assert f.get("accept-version") == "1.0,1.1,1.2"


def test_a_servers_reader_stops_after_connect_until_the_version_is_set():
    # What a client writes with its CONNECT is read in the version CONNECT agrees.
    r = FrameReader("1.0", hold_after_connect=True)
    data = b"CONNECT\naccept-version:1.2\n\n\x00\nSEND\ndestination:/queue/a\nx:a\\cb\n\nhi\x00"
    (f,) = r.feed(data)
    assert f.command == "CONNECT" and r.buffered > 0
    r.version = "1.2"
    (s,) = r.feed(b"")
    assert (s.command, s.get("x"), s.body) == ("SEND", "a:b", b"hi")
    # Once only: later frames (a second CONNECT among them) are all read at once.
    got = r.feed(b"CONNECT\n\n\x00SEND\ndestination:/queue/a\n\nx\x00")
    assert [g.command for g in got] == ["CONNECT", "SEND"]


def test_connect_trimmed_only_when_it_offers_1_0_alone():
    # STOMP 1.1 and 1.2 "MUST never trim or pad headers with spaces": a 1.1+ CONNECT's
    # values (a passcode ending in a space) are kept as written; a 1.0 CONNECT's trimmed.
    (f,) = read(b"CONNECT\naccept-version:1.0,1.2\nlogin:guest\npasscode: p w \n\n\x00")
    assert (f.get("login"), f.get("passcode")) == ("guest", " p w ")
    (f,) = read(b"CONNECT\nlogin: guest\npasscode: p w \n\n\x00", "1.0")
    assert (f.get("login"), f.get("passcode")) == ("guest", "p w")
    (f,) = read(b"CONNECTED\nversion:1.2\nsession: s \n\n\x00")
    assert f.get("session") == " s "
    # STOMP is CONNECT by another name: never unescaped, trimmed as CONNECT is.
    (f,) = read(b"STOMP\naccept-version:1.2\nhost:a\\cb\npasscode: p \n\n\x00")
    assert (f.get("host"), f.get("passcode")) == ("a\\cb", " p ")


def test_send_with_content_length_holds_nul_bytes():
    body = b"a\x00b\x00\xff"
    data = b"SEND\ndestination:/queue/a\ncontent-length:5\n\n" + body + b"\x00"
    (f,) = read(data)
    assert f.body == body
    assert f.get("destination") == "/queue/a"


def test_send_without_content_length_runs_to_nul():
    (f,) = read(b"SEND\ndestination:/queue/a\n\nhello world\x00")
    assert f.body == b"hello world"


def test_split_at_every_position_gives_the_same_frames():
    stream = (
        b"\n"
        + encode_frame("SEND", [("destination", "/queue/a"), ("x", "a:b\nc\\d")], b"one\x00two")
        + b"\r\n\n"
        + b"SEND\r\ndestination:/topic/b\r\n\r\nplain\x00"
        + b"\n\n"
    )
    whole = read(stream)
    assert [f.body for f in whole] == [b"one\x00two", b"plain"]
    assert whole[0].get("x") == "a:b\nc\\d"
    for cut in range(1, len(stream)):
        r = FrameReader("1.2")
        got = r.feed(stream[:cut]) + r.feed(stream[cut:])
        assert got == whole, cut


def test_heartbeats_are_counted_not_frames():
    r = FrameReader("1.1")
    assert r.feed(b"\n\r\n\n") == []
    assert r.heartbeats == 3


@pytest.mark.parametrize(
    ("version", "raw", "value"),
    [
        ("1.0", "a\\nb\\c", "a\\nb\\c"),
        ("1.1", "a\\nb\\c\\\\", "a\nb:\\"),
        ("1.2", "a\\r\\n", "a\r\n"),
    ],
)
def test_unescape_per_version(version, raw, value):
    assert unescape(raw, version) == value
    (f,) = read(f"MESSAGE\nk:{raw}\n\n\x00".encode(), version)
    assert f.get("k") == value


def test_1_1_has_no_carriage_return_escape():
    with pytest.raises(StompError, match="undefined escape"):
        unescape("a\\r", "1.1")


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_escape_round_trip(version):
    text = "x:y\nz\\w"
    assert unescape(escape(text, version), version) == text


def test_1_0_header_spaces_trimmed_and_first_occurrence_wins():
    (f,) = read(b"SEND\ndestination: /queue/a \nfoo:1\nfoo:2\n\n\x00", "1.0")
    assert f.get("destination") == "/queue/a"
    assert f.get("foo") == "1"
    assert f.headers == [("destination", "/queue/a"), ("foo", "1"), ("foo", "2")]


def test_encode_adds_content_length_and_decodes_back():
    data = encode_frame("MESSAGE", [("destination", "/queue/a")], b"\x00\x01", "1.1")
    assert b"content-length:2\n" in data
    (f,) = read(data, "1.1")
    assert f.body == b"\x00\x01"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"BOGUS\n\n\x00", "unknown command"),
        (b"SEND\nnocolon\n\n\x00", "without a colon"),
        (b"SEND\n:v\n\n\x00", "empty name"),
        (b"SEND\ncontent-length:x\n\n\x00", "bad content-length"),
        (b"SEND\ncontent-length:-1\n\n\x00", "bad content-length"),
        (b"SEND\ncontent-length:1\n\nab\x00", "not followed by NUL"),
        (b"SEND\nk:v\x00\n\n", "NUL"),
        (b"SEND\nk:v\x00", "NUL"),
        (b"SEND\nk:\xff\n\n\x00", "not UTF-8"),
        (b"SEND\nk:a\\x\n\n\x00", "undefined escape"),
    ],
)
def test_bad_frames(data, reason):
    with pytest.raises(StompError, match=reason):
        read(data)


def test_limits():
    with pytest.raises(StompError, match="exceeds"):
        read(b"SEND\n\n" + b"x" * 100 + b"\x00", max_frame=50)
    with pytest.raises(StompError, match="exceeds"):
        read(b"SEND\n\n" + b"x" * 100, max_frame=50)
    with pytest.raises(StompError, match="exceeds"):
        read(b"SEND\ncontent-length:100\n\n", max_frame=50)
    with pytest.raises(StompError, match="more than 2 headers"):
        read(b"SEND\na:1\nb:2\nc:3\n\n\x00", max_headers=2)
    with pytest.raises(StompError, match="longer than"):
        read(b"SEND\na:" + b"y" * 40, max_header_line=20)
    assert issubclass(StompError, ProtocolError)


def test_a_repeated_send_head_reads_the_same_in_each_version():
    # FrameReader keeps a SEND's head by its bytes: a repeat (or one that differs in
    # a byte, a body length, a receipt) must read as a fresh reader reads it, and a head
    # read in one version is read again in the next (the escapes differ).
    heads = [
        b"SEND\ndestination:/queue/a\nk:a\\cb\ncontent-length:2\n\n",
        b"SEND\ndestination:/queue/a\nk:a\\cb\ncontent-length:2\n\n",
        b"SEND\ndestination:/queue/a\nk:a\\cb\ncontent-length:3\n\n",
        b"SEND\ndestination:/queue/a\nk:a\\cb\ncontent-length:2\nreceipt:1\n\n",
        b"SEND\ndestination:/queue/a\nk:a\\cb\ncontent-length:2\nreceipt:2\n\n",
        b"SEND\r\ndestination:/queue/a\r\nk:a\\cb\r\ncontent-length:2\r\n\r\n",
        b"SEND\ndestination:/queue/a\nk:a\\cb\n\n",
    ]
    reader = FrameReader("1.0")
    for version in ("1.0", "1.2", "1.1", "1.2", "1.0"):
        reader.version = version
        for head in heads:
            body = b"xy" if b"content-length" in head else b"xyz"
            body += b"z" if b"length:3" in head else b""
            data = head + body + b"\x00"
            (f,) = reader.feed(data)
            assert f == read(data, version)[0], (version, head)
            assert f.get("k") == ("a\\cb" if version == "1.0" else "a:b")
            assert f.body == body
    # Bounded however many heads a producer makes.
    for i in range(100):
        reader.feed(b"SEND\ndestination:/queue/a\nn:%d\n\nx\x00" % i)
    assert 0 < len(reader._known) <= 32
