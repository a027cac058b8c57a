"""STOMP 1.0, 1.1 and 1.2 frames, sans-IO: bytes in, :class:`Frame` objects out, and back.

A frame is a command line, header lines ``name:value``, an empty line, a body and a
NUL byte.  What differs by version (https://stomp.github.io):

- header escaping: none in 1.0; ``\\n`` ``\\c`` ``\\\\`` in 1.1; 1.2 adds ``\\r``.
  CONNECT (STOMP) and CONNECTED are never escaped (the version is not agreed yet);
- spaces round a header's name and value: trimmed in 1.0 only (1.1, 1.2: "MUST never
  trim"), a CONNECT's when it offers 1.0 alone;
- line ends: 1.2 allows CRLF.  The reader takes CRLF in every version (a client that
  sends it gains nothing from a refusal), the writer writes LF;
- a repeated header: the first occurrence counts (1.2 says so; 1.0/1.1 say nothing).

The body runs to the first NUL, or for ``content-length`` bytes, then a NUL.  Between
frames a peer may send end-of-lines: 1.1's heart-beats, counted in ``heartbeats``.
Limits (frame size, header count, header line length) are the caller's; bad input
raises :class:`StompError` (a :class:`ProtocolError`) and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import ProtocolError
from .properties import CONNECTION_CACHE, remember

__all__ = [
    "CLIENT_COMMANDS",
    "SERVER_COMMANDS",
    "VERSIONS",
    "Frame",
    "FrameReader",
    "StompError",
    "encode_frame",
    "escape",
    "parse_heart_beat",
    "unescape",
]

VERSIONS = ("1.0", "1.1", "1.2")
CLIENT_COMMANDS = frozenset(
    {
        "CONNECT",
        "STOMP",
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "ACK",
        "NACK",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "DISCONNECT",
    }
)
SERVER_COMMANDS = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
# STOMP is CONNECT by another name (1.2: "handled in the same manner"), unescaped too.
_UNESCAPED = frozenset({"CONNECT", "STOMP", "CONNECTED"})
# The end of a frame's headers: an empty line, LF or CRLF either side.
_EMPTY_LINE = re.compile(rb"\r?\n\r?\n")

DEFAULT_MAX_FRAME = 70 * 1024 * 1024
DEFAULT_MAX_HEADERS = 1000
DEFAULT_MAX_HEADER_LINE = 64 * 1024


class StompError(ProtocolError):
    """A STOMP frame the codec cannot read."""


class Frame:
    """One STOMP frame: the command, its headers in order (first occurrence wins on
    look-up) and the body bytes."""

    __slots__ = ("command", "headers", "body", "_map")

    def __init__(
        self, command: str, headers: list[tuple[str, str]] | None = None, body: bytes = b""
    ) -> None:
        self.command = command
        self.headers = headers if headers is not None else []
        self.body = body
        self._map: dict[str, str] | None = None

    def get(self, name: str, default: str | None = None) -> str | None:
        m = self._map
        if m is None:
            m = {}
            for k, v in self.headers:
                m.setdefault(k, v)
            self._map = m
        return m.get(name, default)

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Frame)
            and other.command == self.command
            and other.headers == self.headers
            and other.body == self.body
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Frame {self.command} {self.headers!r} body={len(self.body)}>"


_ESC_11 = {"n": "\n", "c": ":", "\\": "\\"}
_ESC_12 = {**_ESC_11, "r": "\r"}


def parse_heart_beat(value: str | None) -> tuple[int, int]:
    """A CONNECT's ``heart-beat`` header: (cx, cy) in milliseconds, (0, 0) when absent;
    ProtocolError when it is not two non-negative numbers."""
    if not value:
        return 0, 0
    a, _, b = value.partition(",")
    try:
        cx, cy = int(a.strip()), int(b.strip())
    except ValueError:
        raise ProtocolError(f"bad heart-beat header {value!r}") from None
    if cx < 0 or cy < 0:
        raise ProtocolError(f"bad heart-beat header {value!r}")
    return cx, cy


def unescape(text: str, version: str) -> str:
    """A header name or value as sent, its escapes resolved (StompError for one the
    version does not define, as 1.1 and 1.2 say)."""
    if version == "1.0" or "\\" not in text:
        return text
    table = _ESC_12 if version == "1.2" else _ESC_11
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        j = text.find("\\", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        if j + 1 >= n:
            raise StompError("header ends in a lone backslash")
        c = text[j + 1]
        rep = table.get(c)
        if rep is None:
            raise StompError(f"undefined escape \\{c} in a STOMP {version} header")
        out.append(rep)
        i = j + 2
    return "".join(out)


def escape(text: str, version: str) -> str:
    """A header name or value made safe to write in ``version``."""
    if version == "1.0":
        # Nothing to escape with: a line end or colon would break the frame.
        if "\n" not in text and "\r" not in text:
            return text
        return text.replace("\n", " ").replace("\r", " ")
    if "\\" not in text and "\n" not in text and ":" not in text and "\r" not in text:
        return text
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")
    if version == "1.2":
        return text.replace("\r", "\\r")
    return text.replace("\r", " ")


def encode_frame(
    command: str,
    headers: Iterable[tuple[str, str]] = (),
    body: bytes = b"",
    version: str = "1.2",
    *,
    content_length: bool = True,
) -> bytes:
    """One frame's bytes; ``content-length`` is added when ``content_length`` (and the
    body is not empty), unless the headers already have it."""
    lines = [command]
    have_length = False
    plain = command in _UNESCAPED
    for k, v in headers:
        if k == "content-length":
            have_length = True
        if plain:
            lines.append(f"{k}:{v}")
        else:
            lines.append(f"{escape(k, version)}:{escape(v, version)}")
    if content_length and body and not have_length:
        lines.append(f"content-length:{len(body)}")
    lines.append("")
    lines.append("")
    return "\n".join(lines).encode("utf-8") + body + b"\x00"


class FrameReader:
    """Reads frames from a byte stream fed in pieces.

    ``version`` decides the header escaping (set it once CONNECT has agreed one).
    ``max_frame``: the most bytes a frame may have (headers and body);
    ``max_headers``: the most header lines; ``max_header_line``: the longest line."""

    __slots__ = (
        "version",
        "max_frame",
        "max_headers",
        "max_header_line",
        "heartbeats",
        "_buf",
        "_head",
        "_head_len",
        "_body_len",
        "_scanned",
        "_known",
        "_hold_after_connect",
    )

    def __init__(
        self,
        version: str = "1.0",
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        max_headers: int = DEFAULT_MAX_HEADERS,
        max_header_line: int = DEFAULT_MAX_HEADER_LINE,
        hold_after_connect: bool = False,
    ) -> None:
        self.version = version
        # A server's reader: the frames a client sends with its CONNECT (one write of
        # CONNECT and SUBSCRIBE, say) are read in the version CONNECT agrees, not in the
        # 1.0 of the reader before it; so feed() returns at the first CONNECT or STOMP
        # and leaves the rest buffered until the next feed (the caller, having set
        # ``version``, calls ``feed(b"")``).  Once only: a second CONNECT is refused.
        self._hold_after_connect = hold_after_connect
        self.max_frame = max_frame
        self.max_headers = max_headers
        self.max_header_line = max_header_line
        self.heartbeats = 0  # end-of-lines read between frames
        self._buf = bytearray()
        # The frame being read: its head, once whole, and how long its body is (-1: to NUL).
        self._head: tuple[str, list[tuple[str, str]]] | None = None
        self._head_len = 0
        self._body_len = -1
        self._scanned = 0
        # SEND heads read -> (the version they were read in, the head, the body length).
        self._known: dict[bytes, tuple[str, tuple[str, list[tuple[str, str]]], int]] = {}

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        """The frames ``data`` completes (StompError on bad input: the stream is lost)."""
        buf = self._buf
        buf += data
        frames: list[Frame] = []
        # Frames are read at ``pos`` and the bytes before it dropped once, on return: a
        # read of many frames moves the rest of the buffer once, not once a frame.
        pos = 0
        # The frame being read, in locals (written back once, in ``finally``).
        head, head_len, body_len = self._head, self._head_len, self._body_len
        max_frame = self.max_frame
        hold = self._hold_after_connect
        try:
            while True:
                if head is None:
                    # Heart-beats (and the EOLs 1.x allows after a frame's NUL).
                    n = len(buf)
                    while pos < n and buf[pos] in (10, 13):
                        if buf[pos] == 10:
                            self.heartbeats += 1
                        pos += 1
                    if pos == n:
                        return frames
                    # The empty line: LF LF found with memchr's speed when no CR comes
                    # before it; else (CRLF, or not yet read) the pattern says.
                    at = buf.find(b"\n\n", pos)
                    if at >= 0 and buf.find(b"\r", pos, at) < 0:
                        head_end, head_len = at - pos, at + 2 - pos
                    else:
                        m = _EMPTY_LINE.search(buf, pos)
                        if m is None:
                            del buf[:pos]
                            pos = 0
                            self._check_partial_head(buf)
                            return frames
                        head_end, head_len = m.start() - pos, m.end() - pos
                    if head_len > max_frame:
                        raise StompError(f"frame headers exceed {max_frame} bytes")
                    raw_head = bytes(buf[pos : pos + head_end])
                    known = self._known.get(raw_head)
                    if known is not None and known[0] == self.version:
                        _, head, body_len = known
                    else:
                        head, body_len = self._read_head(raw_head)
                    if body_len >= 0 and head_len + body_len + 1 > max_frame:
                        raise StompError(
                            f"frame of {head_len + body_len + 1} bytes exceeds "
                            f"the limit of {max_frame}"
                        )
                start = pos + head_len
                if body_len >= 0:
                    end = start + body_len
                    if len(buf) <= end:
                        return frames
                    if buf[end] != 0:
                        raise StompError("frame body is not followed by NUL (content-length wrong)")
                else:
                    end = buf.find(b"\x00", max(start, pos + self._scanned))
                    if end < 0:
                        # Not again over the same bytes: a large body comes in many reads.
                        self._scanned = len(buf) - pos
                        if len(buf) - pos > max_frame:
                            raise StompError(f"frame exceeds the limit of {max_frame} bytes")
                        return frames
                    if end + 1 - pos > max_frame:
                        raise StompError(f"frame exceeds the limit of {max_frame} bytes")
                    self._scanned = 0
                frames.append(Frame(head[0], head[1], bytes(buf[start:end])))
                pos = end + 1
                if hold and head[0] in _UNESCAPED:
                    self._hold_after_connect = False
                    head = None
                    return frames
                head = None
        finally:
            self._head, self._head_len, self._body_len = head, head_len, body_len
            if pos:
                del buf[:pos]

    def _read_head(self, raw: bytes) -> tuple[tuple[str, list[tuple[str, str]]], int]:
        """The head of the frame being read, and its body's length (-1: to the NUL)."""
        head = self._parse_head(raw)
        cl = None
        for k, v in head[1]:
            if k == "content-length":
                cl = v
                break
        body_len = -1
        if cl is not None:
            try:
                body_len = int(cl)
            except ValueError:
                raise StompError(f"bad content-length {cl!r}") from None
            if body_len < 0:
                raise StompError(f"bad content-length {cl!r}")
        # A producer's SENDs repeat their head (but for a receipt, which is new each
        # time): kept by its bytes, a repeat is not decoded, split and unescaped again.
        # Its frames share the header list, which nothing changes.
        if raw.startswith(b"SEND\n") and b"\nreceipt:" not in raw:
            # Per reader (a connection), so few: ever new heads (a counter, a time)
            # empty it now and then.
            remember(self._known, raw, (self.version, head, body_len), CONNECTION_CACHE)
        return head, body_len

    def _check_partial_head(self, buf: bytearray) -> None:
        if len(buf) > self.max_frame:
            raise StompError(f"frame headers exceed {self.max_frame} bytes")
        # A NUL before the head's end: a frame without the empty line.
        if b"\x00" in buf:
            raise StompError("frame ends (NUL) before the end of its headers")
        last = buf.rfind(b"\n")
        if len(buf) - last - 1 > self.max_header_line:
            raise StompError(f"header line longer than {self.max_header_line} bytes")
        if buf.count(b"\n") > self.max_headers + 1:
            raise StompError(f"more than {self.max_headers} headers")

    def _parse_head(self, head: bytes) -> tuple[str, list[tuple[str, str]]]:
        if b"\x00" in head:
            raise StompError("NUL in a frame's command or headers")
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StompError(f"headers are not UTF-8: {exc}") from None
        lines = text.split("\n")
        if "\r" in text:
            lines = [line.removesuffix("\r") for line in lines]
        command = lines[0]
        if not command:
            raise StompError("frame without a command")
        if command not in CLIENT_COMMANDS and command not in SERVER_COMMANDS:
            raise StompError(f"unknown command {command[:40]!r}")
        if len(lines) - 1 > self.max_headers:
            raise StompError(f"more than {self.max_headers} headers")
        if command in _UNESCAPED:
            # Never unescaped; trimmed only in a 1.0 peer's frame (1.1 and 1.2: "MUST
            # never trim or pad headers with spaces", a passcode's included), which
            # the frame itself says: the versions it offers (CONNECTED: agrees).
            version = "1.0"
            trim = not _speaks_11(lines)
        else:
            version = self.version
            trim = version == "1.0"
        headers: list[tuple[str, str]] = []
        long_lines = len(text) > self.max_header_line
        for line in lines[1:]:
            if long_lines and len(line) > self.max_header_line:
                raise StompError(f"header line longer than {self.max_header_line} bytes")
            name, colon, value = line.partition(":")
            if not colon:
                raise StompError(f"header without a colon: {line[:60]!r}")
            if trim:
                # 1.0 clients write "name: value"; the 1.0 spec is silent on spaces.
                name, value = name.strip(), value.strip()
            elif version != "1.0" and "\\" in line:  # unescape() where there is an escape
                name, value = unescape(name, version), unescape(value, version)
            if not name:
                raise StompError("header with an empty name")
            headers.append((name, value))
        return command, headers


def _speaks_11(lines: list[str]) -> bool:
    """Whether a CONNECT (or STOMP) offers, or a CONNECTED agrees, STOMP 1.1 or later:
    its ``accept-version`` (``version``) names one (the first such header counts)."""
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip()
        if name == "accept-version" or name == "version":
            return any(v.strip() in ("1.1", "1.2") for v in value.split(","))
    return False
