"""A SOAP message in a JMS BytesMessage, in ``com.sun.messaging.xml.MessageTransformer``'s layout.

OpenMQ's ``MessageTransformer.SOAPMessageIntoJMSMessage`` fills a BytesMessage with
``writeInt``/``writeBytes``: a big-endian int32 *n*, then *n* bytes of a
``java.util.Hashtable`` (String to String, ``ObjectOutputStream``) holding the SOAP
message's MIME headers (``Content-Type`` among them); then an int32 *m* and *m* bytes of
what ``SOAPMessage.writeTo`` writes: the envelope alone (``text/xml``), or with
attachments a ``multipart/related`` body (SOAP Messages with Attachments) whose root part
is the envelope and whose other parts each keep their own Content-Type and Content-ID.
``SOAPMessageFromJMSMessage`` reads the same back into ``MessageFactory.createMessage``.

Sans-IO: bytes in, bytes out.  Anything that is not such a message raises
:class:`LayoutError` (a ``ValueError``) with the reason.
"""

from __future__ import annotations

import base64
import binascii
import quopri
import re
import secrets
import struct
from dataclasses import dataclass, field
from email.message import Message as _HeaderValue

from broker.protocol.javaser import JavaSerializationError, decode_hashtable, encode_hashtable

XML_TYPE = "text/xml; charset=utf-8"
_INT = struct.Struct(">i")
_BLANK = re.compile(rb"\r?\n\r?\n")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class LayoutError(ValueError):
    """Not a SOAP message (MIME) or not MessageTransformer's layout."""


def _param_parser(value: str) -> _HeaderValue:
    # email.message parses MIME parameters (quoting, RFC 2231) as the spec has them.
    m = _HeaderValue()
    m["Content-Type"] = value
    return m


def media_type(value: str | None) -> str:
    """``type/subtype`` of a Content-Type value, lower case."""
    return _param_parser(value or "text/plain").get_content_type()


def param(value: str | None, name: str) -> str | None:
    """One parameter of a Content-Type value (unquoted), or None."""
    got = _param_parser(value or "text/plain").get_param(name)
    if got is None or isinstance(got, tuple):
        return None if got is None else str(got[2])
    return str(got)


@dataclass
class Part:
    """One MIME part: its headers as written and its body as on the wire (still in its
    Content-Transfer-Encoding), so that it goes on unchanged."""

    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        low = name.lower()
        for k, v in self.headers:
            if k.lower() == low:
                return v
        return None

    @property
    def content_type(self) -> str:
        return self.header("Content-Type") or "text/plain"

    @property
    def content_id(self) -> str | None:
        """The Content-ID without its angle brackets."""
        cid = self.header("Content-ID")
        return cid.strip().strip("<>").strip() or None if cid else None

    def payload(self) -> bytes:
        """The body with its Content-Transfer-Encoding undone."""
        cte = (self.header("Content-Transfer-Encoding") or "binary").strip().lower()
        if cte == "base64":
            try:
                return base64.b64decode(re.sub(rb"\s+", b"", self.body), validate=True)
            except binascii.Error as exc:
                raise LayoutError(f"a base64 part is not base64: {exc}") from exc
        if cte == "quoted-printable":
            return quopri.decodestring(self.body)
        if cte in ("binary", "8bit", "7bit"):
            return self.body
        raise LayoutError(f"unknown Content-Transfer-Encoding {cte!r}")


@dataclass
class SoapMime:
    """A SOAP message: the envelope (XML bytes), the root part's MIME headers and the
    attachments in their order."""

    envelope: bytes
    root_headers: list[tuple[str, str]] = field(
        default_factory=lambda: [("Content-Type", XML_TYPE)]
    )
    attachments: list[Part] = field(default_factory=list)

    def root(self) -> Part:
        return Part(self.root_headers, self.envelope)


def _headers(block: bytes) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for raw in re.split(rb"\r?\n", block):
        if not raw:
            continue
        line = raw.decode("latin-1")
        if _CONTROL.search(line):
            # A CR or NUL in a Content-ID would end up in a reply's Content-Type header.
            raise LayoutError(f"a control character in the MIME header line {line[:80]!r}")
        if line[0] in " \t" and out:  # a folded header goes on
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or " " in name.strip():
            raise LayoutError(f"malformed MIME header line {line[:80]!r}")
        out.append((name.strip(), value.strip()))
    return out


def _part(raw: bytes) -> Part:
    if raw.startswith(b"\r\n") or raw.startswith(b"\n"):  # no headers at all
        return Part([], raw[2:] if raw.startswith(b"\r\n") else raw[1:])
    m = _BLANK.search(raw)
    if m is None:
        raise LayoutError("a MIME part has no blank line after its headers")
    return Part(_headers(raw[: m.start()]), raw[m.end() :])


def split_multipart(body: bytes, boundary: str) -> list[Part]:
    """The parts of a multipart body (RFC 2046), each byte for byte as written."""
    if not boundary or len(boundary) > 200:
        raise LayoutError("multipart without a usable boundary parameter")
    delim = b"--" + boundary.encode("latin-1")
    if body.startswith(delim):
        pos = 0
    else:
        at = body.find(b"\n" + delim)
        if at < 0:
            raise LayoutError("the multipart body does not contain its boundary")
        pos = at + 1
    parts: list[Part] = []
    while True:
        pos += len(delim)
        if body[pos : pos + 2] == b"--":
            break
        eol = body.find(b"\n", pos)
        if eol < 0:
            raise LayoutError("the multipart body ends inside a boundary line")
        if body[pos:eol].strip(b" \t\r"):
            # "--boundaryX": a longer line that only starts with the delimiter.
            raise LayoutError("a boundary line has trailing characters")
        start = eol + 1
        nxt = body.find(b"\n" + delim, start - 1)
        if nxt < 0:
            raise LayoutError("the multipart body has no closing boundary")
        end = nxt - 1 if nxt > 0 and body[nxt - 1 : nxt] == b"\r" else nxt
        parts.append(_part(body[start:end]) if end > start else Part([], b""))
        pos = nxt + 1
    if not parts:
        raise LayoutError("a multipart body without parts")
    return parts


def parse_mime(content_type: str, body: bytes) -> SoapMime:
    """A SOAP message from its Content-Type and body: the envelope alone, or
    multipart/related with the envelope as the ``start`` part (the first by default)."""
    if media_type(content_type) != "multipart/related":
        if media_type(content_type).startswith("multipart/"):
            raise LayoutError(
                f"a SOAP message with attachments is multipart/related, not {content_type!r}"
            )
        return SoapMime(body, [("Content-Type", content_type or XML_TYPE)])
    parts = split_multipart(body, param(content_type, "boundary") or "")
    start = param(content_type, "start")
    root = parts[0]
    if start:
        wanted = start.strip().strip("<>").strip()
        found = [p for p in parts if p.content_id == wanted]
        if not found:
            raise LayoutError(f"no part has the start parameter's Content-ID <{wanted}>")
        root = found[0]
    others = [p for p in parts if p is not root]
    headers = [
        (k, v)
        for k, v in root.headers
        if k.lower() not in ("content-transfer-encoding", "content-length")
    ]
    if root.header("Content-Type") is None:
        headers.insert(0, ("Content-Type", XML_TYPE))
    return SoapMime(root.payload(), headers, others)


def _write_part(p: Part) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in p.headers)
    return head.encode("latin-1") + b"\r\n" + p.body


def write_mime(msg: SoapMime) -> tuple[str, bytes]:
    """(Content-Type, body) of the message as ``SOAPMessage.writeTo`` has it."""
    root = msg.root()
    if not msg.attachments:
        return root.content_type, msg.envelope
    parts = [root, *msg.attachments]
    while True:
        boundary = "----=_Part_ums_" + secrets.token_hex(12)
        if not any(boundary.encode() in p.body for p in parts):
            break
    out = bytearray()
    for p in parts:
        out += b"--" + boundary.encode() + b"\r\n" + _write_part(p) + b"\r\n"
    out += b"--" + boundary.encode() + b"--\r\n"
    ctype = f'multipart/related; type="text/xml"; boundary="{boundary}"'
    if root.content_id:
        ctype += f'; start="<{root.content_id}>"'
    return ctype, bytes(out)


def encode(msg: SoapMime) -> bytes:
    """The BytesMessage body ``SOAPMessageIntoJMSMessage`` would write for ``msg``."""
    ctype, content = write_mime(msg)
    try:
        headers = encode_hashtable({"Content-Type": ctype})
    except JavaSerializationError as exc:  # a header the Java side could not read either
        raise LayoutError(f"the MIME headers cannot be serialised: {exc}") from exc
    return _INT.pack(len(headers)) + headers + _INT.pack(len(content)) + content


def decode_layout(data: bytes) -> tuple[dict[str, str], bytes]:
    """(MIME headers, content) of a BytesMessage body in the layout; LayoutError if it is not."""
    if len(data) < 8:
        raise LayoutError("too short for MessageTransformer's layout")
    (n,) = _INT.unpack_from(data, 0)
    if n < 4 or 4 + n + 4 > len(data):
        raise LayoutError("the MIME headers' length does not fit the message")
    (m,) = _INT.unpack_from(data, 4 + n)
    if m < 0 or 8 + n + m != len(data):
        raise LayoutError("the SOAP part's length does not fit the message")
    try:
        table = decode_hashtable(data[4 : 4 + n])
    except JavaSerializationError as exc:
        raise LayoutError(f"the MIME headers are not a java.util.Hashtable: {exc}") from exc
    headers = {k: v for k, v in table.items() if isinstance(v, str)}
    if len(headers) != len(table):
        raise LayoutError("a MIME header value is not a String")
    return headers, data[8 + n :]


def soap_of(headers: dict[str, str], content: bytes) -> SoapMime:
    """The SOAP message of the layout's two halves."""
    ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), None)
    if not ctype:
        raise LayoutError("the MIME headers have no Content-Type")
    return parse_mime(ctype, content)


def decode(data: bytes) -> SoapMime:
    """The SOAP message in a BytesMessage body written by ``SOAPMessageIntoJMSMessage``."""
    return soap_of(*decode_layout(data))
