"""A minimal HTTP/1.1 request reader and response writer, sans-IO, for the tunnel
services (``httpjms``, ``httpsjms``): what the stock client's ``HttpURLConnection``
sends (GET, and POST with a Content-Length body, on kept-alive connections).

Chunked request bodies are refused (the stock client never sends them); every decoding
error raises :class:`ProtocolError`, whose ``status`` is the HTTP status to answer.

Not h11 (installed as uvicorn's dependency): reading and answering a tunnel request
costs 7-9 CPU us here against 111-117 us through ``h11.Connection``, and every JMQ
packet through the tunnel is a request of its own (bench/http1_reader.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ProtocolError

__all__ = ["HttpError", "HttpRequest", "RequestReader", "response"]

MAX_HEAD = 16 * 1024

REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


class HttpError(ProtocolError):
    """A request that cannot be read; ``status`` is what to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class HttpRequest:
    """One request: method, path, query string, lower-cased headers, body."""

    method: str
    path: str
    query: str
    version: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def keep_alive(self) -> bool:
        conn = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn


class RequestReader:
    """Cuts a byte stream into requests.  After an error the stream is unusable (the
    caller answers and closes)."""

    def __init__(self, max_body: int) -> None:
        self.max_body = max_body
        self._buf = bytearray()
        self._head: HttpRequest | None = None
        self._need = 0

    def feed(self, data: bytes) -> list[HttpRequest]:
        self._buf += data
        out: list[HttpRequest] = []
        while True:
            if self._head is None:
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self._buf) > MAX_HEAD:
                        raise HttpError(431, f"request head longer than {MAX_HEAD} bytes")
                    return out
                if end > MAX_HEAD:
                    raise HttpError(431, f"request head longer than {MAX_HEAD} bytes")
                head = bytes(self._buf[:end])
                del self._buf[: end + 4]
                self._head, self._need = self._parse_head(head)
            if len(self._buf) < self._need:
                return out
            req = self._head
            req.body = bytes(self._buf[: self._need])
            del self._buf[: self._need]
            self._head, self._need = None, 0
            out.append(req)

    def _parse_head(self, head: bytes) -> tuple[HttpRequest, int]:
        try:
            text = head.decode("latin-1")
        except UnicodeDecodeError as exc:  # latin-1 decodes anything; kept for clarity
            raise HttpError(400, f"unreadable request head: {exc}") from None
        lines = text.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise HttpError(400, f"bad request line {lines[0][:80]!r}")
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise HttpError(400, f"bad header line {line[:80]!r}")
            headers[name.lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise HttpError(411, "chunked request bodies are not accepted; send Content-Length")
        length_text = headers.get("content-length", "0") or "0"
        # ASCII digits only: str.isdigit() also takes "²" (latin-1 0xB2), which int() refuses.
        if not (length_text.isascii() and length_text.isdigit()):
            raise HttpError(400, f"bad Content-Length {length_text[:40]!r}")
        length = int(length_text)
        if length > self.max_body:
            raise HttpError(413, f"request body of {length} bytes (at most {self.max_body})")
        path, _, query = target.partition("?")
        return HttpRequest(method.upper(), path, query, version, headers), length


def response(
    status: int,
    body: bytes = b"",
    content_type: str = "application/octet-stream",
    keep_alive: bool = True,
) -> bytes:
    """A whole response with Content-Length (no chunking)."""
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-cache\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode("latin-1") + body
