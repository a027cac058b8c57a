"""SOAP 1.1 envelopes of the XML messaging service: requests in, replies and faults out.

Requests are parsed with defusedxml: a DTD, an entity declaration or an external
reference is refused before anything is expanded or fetched.  A request is a SOAP 1.1
envelope whose ``SOAP-ENV:Header`` holds ``ums:MessageHeader`` with one ``ums:Service``
(namespace ``https://mq.java.net/ums``; attributes sid, destination, domain, service,
user, password, timeout, transacted); JMS properties travel in an ``ums:JMSProperty``
header element (``ums:StringProperty ums:pname=.. ums:pvalue=..`` and Int, Long, Short,
Byte, Boolean -- OpenMQ's -- plus Float and Double).  Attachments come as
multipart/related (SOAP Messages with Attachments), as many as the sender likes.

What a send stores is the SOAP message itself, without those two UMS header elements,
in ``MessageTransformer``'s BytesMessage layout (:mod:`.transformer`); a receive of such
a message gives it back with the reply's ``ums:MessageHeader`` in its Header.  The
envelope is edited as bytes (spans found with expat), so everything else in it -- the
Body, prefixes, attachments and their Content-IDs -- stays as the sender wrote it.
"""

from __future__ import annotations

import codecs
import logging
import re
import secrets
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.parsers import expat
from xml.sax.saxutils import escape, quoteattr

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as safe_fromstring

from broker.protocol.jtypes import JByte, JFloat, JInt, JLong, JShort

from . import transformer
from .transformer import LayoutError, SoapMime

log = logging.getLogger("portal.ums")

SOAP_ENV = "http://schemas.xmlsoap.org/soap/envelope/"
UMS_NS = "https://mq.java.net/ums"
SERVICES = ("login", "send", "receive", "commit", "rollback", "close")
ATTRIBUTES = (
    "sid",
    "destination",
    "domain",
    "service",
    "user",
    "password",
    "timeout",
    "transacted",
)

_E = f"{{{SOAP_ENV}}}"
_U = f"{{{UMS_NS}}}"


class SoapFault(Exception):
    """A request the gateway answers with a SOAP Fault (``faultcode`` Client or Server,
    or VersionMismatch); ``status`` is the UMS status shown in the fault's detail."""

    def __init__(self, code: str, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.status = status


@dataclass
class Attachment:
    content_type: str
    data: bytes
    content_id: str | None = None


@dataclass
class SoapRequest:
    """What a request asks for: the Service attributes, JMS properties and the SOAP
    message to send (its envelope without the UMS header elements, its attachments)."""

    service: dict[str, str]
    message: SoapMime
    properties: dict[str, object] = field(default_factory=dict)

    def jms_body(self) -> bytes:
        """The BytesMessage body: MessageTransformer's layout of the message."""
        try:
            return transformer.encode(self.message)
        except LayoutError as exc:
            raise SoapFault("Client", str(exc)) from exc


def _parse_xml(data: bytes) -> ET.Element:
    try:
        return safe_fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise SoapFault("Client", f"refused XML: {type(exc).__name__} ({exc})") from exc
    except ET.ParseError as exc:
        raise SoapFault("Client", f"malformed XML: {exc}") from exc


_PROP_TYPES = {
    "StringProperty": str,
    "IntProperty": JInt,
    "LongProperty": JLong,
    "ShortProperty": JShort,
    "ByteProperty": JByte,
    "BooleanProperty": bool,
    "FloatProperty": JFloat,
    "DoubleProperty": float,
}


def _attr(el: ET.Element, name: str) -> str | None:
    """An attribute, namespace-qualified as the seed says, or (leniently) unqualified."""
    value = el.get(_U + name)
    return el.get(name) if value is None else value


def _property(el: ET.Element) -> tuple[str, object]:
    kind = el.tag[len(_U) :] if el.tag.startswith(_U) else el.tag
    conv = _PROP_TYPES.get(kind)
    name, value = _attr(el, "pname"), _attr(el, "pvalue")
    if conv is None or not name or value is None:
        raise SoapFault("Client", f"bad JMS property element {kind}")
    try:
        if conv is bool:
            if value not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return name, value in ("true", "1")
        if conv is str:
            return name, value
        if conv in (float, JFloat):
            return name, conv(float(value))
        return name, conv(int(value))
    except (ValueError, OverflowError) as exc:
        raise SoapFault("Client", f"bad value for {kind} {name}: {value!r}") from exc


def _envelope_of(mime: SoapMime) -> tuple[bytes, ET.Element]:
    """The envelope as UTF-8 (the root part's Content-Type follows) and its parsed tree,
    checked to be a SOAP 1.1 envelope with a Body."""
    data = mime.envelope = _as_utf8(mime.envelope)
    # What the envelope now is, whatever charset the sender named (expat goes by the
    # document's own declaration, and so does the stored copy).
    mime.root_headers = [
        ("Content-Type", transformer.XML_TYPE) if k.lower() == "content-type" else (k, v)
        for k, v in mime.root_headers
    ]
    root = _parse_xml(data)
    if root.tag != _E + "Envelope":
        if root.tag.endswith("}Envelope") or root.tag == "Envelope":
            raise SoapFault("VersionMismatch", "not a SOAP 1.1 envelope namespace")
        raise SoapFault("Client", "the request is not a SOAP envelope")
    if root.find(_E + "Body") is None:
        raise SoapFault("Client", "a SOAP Header and Body are required")
    return data, root


def parse_request(content_type: str, data: bytes) -> SoapRequest:
    """The request of one POST to /xml; SoapFault for anything that is not one."""
    try:
        mime = transformer.parse_mime(content_type, data)
    except LayoutError as exc:
        raise SoapFault("Client", f"malformed SOAP message: {exc}") from exc
    data, root = _envelope_of(mime)
    header = root.find(_E + "Header")
    if header is None:
        raise SoapFault("Client", "a SOAP Header and Body are required")
    mh = header.find(_U + "MessageHeader")
    if mh is None:
        raise SoapFault("Client", "ums:MessageHeader must be a child of the SOAP Header")
    svc = mh.find(_U + "Service")
    if svc is None:
        raise SoapFault("Client", "ums:Service must be a child of ums:MessageHeader")
    service: dict[str, str] = {}
    for name in ATTRIBUTES:
        value = _attr(svc, name)
        if value is not None:
            service[name] = value
    _validate(service)
    props: dict[str, object] = {}
    jp = header.find(_U + "JMSProperty")
    if jp is not None:
        for el in jp:
            k, v = _property(el)
            props[k] = v
    # The Service element (sid, user, password) and the properties (now JMS properties)
    # are the gateway's business, not part of the message sent: OpenMQ's gateway removes
    # the MessageHeader too before it transforms the message.
    mime.envelope = _edit_header(data, "")
    return SoapRequest(service, mime, props)


# -- the envelope as bytes ---------------------------------------------------------------

_XML_DECL = re.compile(rb"<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")
_UMS_HEADERS = frozenset({f"{UMS_NS} MessageHeader", f"{UMS_NS} JMSProperty"})


def _as_utf8(data: bytes) -> bytes:
    """The document itself when it is UTF-8 (or ASCII), else re-encoded as UTF-8 with a
    declaration that says so: the edits below write UTF-8."""
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        encoding = "utf-32"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        m = _XML_DECL.match(data)
        encoding = m.group(1).decode("ascii") if m else "utf-8"
    try:
        if codecs.lookup(encoding).name in ("utf-8", "ascii"):
            return data
        text = data.decode(encoding)
    except LookupError as exc:
        raise SoapFault("Client", f"unknown XML encoding {encoding!r}") from exc
    except UnicodeDecodeError as exc:
        raise SoapFault("Client", f"the envelope is not {encoding}: {exc}") from exc
    text = re.sub(r"^\ufeff?<\?xml[^>]*\?>", "", text)
    return b'<?xml version="1.0" encoding="UTF-8"?>' + text.encode("utf-8")


def _tag_end(data: bytes, at: int) -> int:
    """The index just after the tag that starts at ``at`` (quoted ``>`` skipped)."""
    quote = 0
    for i in range(at + 1, len(data)):
        c = data[i]
        if quote:
            if c == quote:
                quote = 0
        elif c in (0x22, 0x27):
            quote = c
        elif c == 0x3E:
            return i + 1
    raise SoapFault("Client", "malformed XML: a tag is not closed")


def _qname(data: bytes, at: int) -> str:
    m = re.match(rb"<([^\s/>]+)", data[at:])
    return m.group(1).decode("utf-8") if m else ""


class _Done(Exception):
    """Stops the scan once the Header is behind it."""


def _edit_header(data: bytes, fragment: str) -> bytes:
    """The envelope without the UMS elements directly in its Header, with ``fragment``
    (XML) at the start of the Header; a Header is made when there is none and
    ``fragment`` is not empty.  ``data`` is a well-formed UTF-8 SOAP 1.1 envelope."""
    envelope: tuple[int, str] | None = None  # end of its start tag, its qualified name
    header: tuple[int, int, bool, str] | None = None  # start, end of start tag, empty?, name
    cuts: list[tuple[int, int]] = []
    stack: list[tuple[str, int | None]] = []  # (name, start of an element to cut)

    def start(name: str, _attrs: object) -> None:
        nonlocal envelope, header
        depth = len(stack)
        cut = None
        if depth == 1 and name != f"{SOAP_ENV} Header":
            raise _Done  # the Body: the Header (if any) is behind us
        if depth <= 2:
            at = p.CurrentByteIndex
            end = _tag_end(data, at)
            empty = data[end - 2 : end] == b"/>"
            if depth == 0:
                envelope = (end, _qname(data, at))
            elif depth == 1:
                header = (at, end, empty, _qname(data, at))
            elif stack[1][0] == f"{SOAP_ENV} Header" and name in _UMS_HEADERS:
                if empty:
                    cuts.append((at, end))
                else:
                    cut = at
        stack.append((name, cut))

    def end(_name: str) -> None:
        name, cut = stack.pop()
        if cut is not None:
            cuts.append((cut, _tag_end(data, p.CurrentByteIndex)))
        if len(stack) == 1 and name == f"{SOAP_ENV} Header":
            raise _Done

    p = expat.ParserCreate(namespace_separator=" ")
    p.StartElementHandler = start
    p.EndElementHandler = end
    try:
        p.Parse(data, True)
    except _Done:
        pass  # the rest was checked when the envelope was parsed
    except expat.ExpatError as exc:
        raise SoapFault("Client", f"malformed XML: {exc}") from exc
    edits = [(a, b, b"") for a, b in cuts]
    frag = fragment.encode("utf-8")
    if frag and header is not None:
        at, tag_end, empty, name = header
        if empty:
            edits.append((at, tag_end, f"<{name}>".encode() + frag + f"</{name}>".encode()))
        else:
            edits.append((tag_end, tag_end, frag))
    elif frag and envelope is not None:
        tag_end, name = envelope
        prefix = name.rpartition(":")[0]
        h = f"{prefix}:Header" if prefix else "Header"
        edits.append((tag_end, tag_end, f"<{h}>".encode() + frag + f"</{h}>".encode()))
    out = bytearray(data)
    # From the end, so earlier offsets hold; at one offset the cut before the insertion.
    for a, b, text in sorted(edits, key=lambda e: (e[0], not e[2]), reverse=True):
        out[a:b] = text
    return bytes(out)


def _validate(service: dict[str, str]) -> None:
    """The Service element's schema (message.xsd's types)."""
    name = service.get("service")
    if name is None:
        raise SoapFault("Client", "ums:Service has no service attribute (required)")
    if name not in SERVICES:
        raise SoapFault("Client", f"unknown service {name!r}")
    for key in ("sid", "destination", "user", "password"):
        if key in service and not service[key]:
            raise SoapFault("Client", f"attribute {key} must not be empty")
    if service.get("domain", "queue") not in ("queue", "topic"):
        raise SoapFault("Client", f"domain must be queue or topic, not {service['domain']!r}")
    if "timeout" in service:
        try:
            int(service["timeout"])
        except ValueError as exc:
            raise SoapFault(
                "Client", f"timeout is not an xsd:long: {service['timeout']!r}"
            ) from exc
    if service.get("transacted", "false") not in ("true", "false", "1", "0"):
        raise SoapFault("Client", f"transacted is not an xsd:boolean: {service['transacted']!r}")


# -- replies ---------------------------------------------------------------------------


def _property_xml(name: str, value: object) -> str | None:
    if isinstance(value, bool):
        kind, text = "BooleanProperty", "true" if value else "false"
    elif isinstance(value, JByte):
        kind, text = "ByteProperty", str(int(value))
    elif isinstance(value, JShort):
        kind, text = "ShortProperty", str(int(value))
    elif isinstance(value, JInt):
        kind, text = "IntProperty", str(int(value))
    elif isinstance(value, int):
        kind, text = "LongProperty", str(int(value))
    elif isinstance(value, JFloat):
        kind, text = "FloatProperty", repr(float(value))
    elif isinstance(value, float):
        kind, text = "DoubleProperty", repr(value)
    elif isinstance(value, str):
        kind, text = "StringProperty", value
    else:
        return None
    return f"<ums:{kind} ums:pname={quoteattr(name)} ums:pvalue={quoteattr(text)}/>"


def _body_xml(text: str | None) -> str:
    if not text:
        return ""
    stripped = text.lstrip()
    if stripped.startswith("<"):
        # Well-formed XML goes in as XML (what a SOAP client sent comes back the same);
        # anything else, or anything hostile, as character data.
        try:
            safe_fromstring(stripped.encode("utf-8"), forbid_dtd=True)
        except (DefusedXmlException, ET.ParseError):
            return escape(text)
        if stripped.startswith("<?xml"):
            stripped = stripped[stripped.index("?>") + 2 :].lstrip()
        return stripped
    return escape(text)


def _ums_header(service: dict[str, str], properties: dict[str, object] | None) -> str:
    """The reply's ``ums:MessageHeader`` (and ``ums:JMSProperty``), for a SOAP Header."""
    attrs = "".join(f" ums:{k}={quoteattr(v)}" for k, v in service.items())
    props = ""
    if properties:
        items = [_property_xml(k, v) for k, v in properties.items()]
        props = (
            f'<ums:JMSProperty xmlns:ums="{UMS_NS}">'
            + "".join(i for i in items if i)
            + "</ums:JMSProperty>"
        )
    return (
        f'<ums:MessageHeader xmlns:ums="{UMS_NS}" ums:id="1.0" ums:version="1.1">'
        f"<ums:Service{attrs}/></ums:MessageHeader>{props}"
    )


def envelope(
    service: dict[str, str],
    *,
    text: str | None = None,
    properties: dict[str, object] | None = None,
) -> str:
    """A reply envelope: ``ums:Service`` with the reply's attributes, the text in the Body."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<SOAP-ENV:Envelope xmlns:SOAP-ENV="{SOAP_ENV}">'
        f"<SOAP-ENV:Header>{_ums_header(service, properties)}</SOAP-ENV:Header>"
        f"<SOAP-ENV:Body>{_body_xml(text)}</SOAP-ENV:Body>"
        "</SOAP-ENV:Envelope>"
    )


def transformed(
    data: bytes, service: dict[str, str], properties: dict[str, object] | None = None
) -> tuple[str, bytes] | None:
    """(Content-Type, body) of the SOAP message a BytesMessage in MessageTransformer's
    layout holds, with the reply's MessageHeader in its Header; None when ``data`` is not
    in that layout (or holds no SOAP 1.1 envelope)."""
    try:
        headers, content = transformer.decode_layout(data)
    except LayoutError:
        return None  # any other BytesMessage: not bad input, simply not a SOAP message
    try:
        mime = transformer.soap_of(headers, content)
        env, _ = _envelope_of(mime)
        mime.envelope = _edit_header(env, _ums_header(service, properties))
    except (LayoutError, SoapFault) as exc:
        log.warning(
            "UMS receive from %s: a message in MessageTransformer's layout holds no usable "
            "SOAP 1.1 message (%s); it is answered as an attachment",
            service.get("destination"),
            exc.reason if isinstance(exc, SoapFault) else exc,
        )
        return None
    return transformer.write_mime(mime)


def reply(
    service: dict[str, str],
    *,
    text: str | None = None,
    data: bytes | None = None,
    properties: dict[str, object] | None = None,
) -> tuple[str, bytes]:
    """(Content-Type, body) of a reply: a message sent through /xml (or by a JMS program
    with MessageTransformer) as the SOAP message it was; any other BytesMessage as one
    attachment; text (a TextMessage, or nothing) in the Body."""
    if data is not None:
        out = transformed(data, service, properties)
        if out is not None:
            return out
        env = envelope(service, properties=properties)
        return multipart(env, Attachment("application/octet-stream", data))
    xml = envelope(service, text=text, properties=properties)
    return "text/xml;charset=UTF-8", xml.encode("utf-8")


def fault(code: str, reason: str, status: int) -> str:
    """A SOAP 1.1 Fault (sent with HTTP 500, as SOAP 1.1 section 6.2 prescribes)."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<SOAP-ENV:Envelope xmlns:SOAP-ENV="{SOAP_ENV}"><SOAP-ENV:Body><SOAP-ENV:Fault>'
        f"<faultcode>SOAP-ENV:{code}</faultcode><faultstring>{escape(reason)}</faultstring>"
        f'<detail><ums:status xmlns:ums="{UMS_NS}">{status}</ums:status></detail>'
        "</SOAP-ENV:Fault></SOAP-ENV:Body></SOAP-ENV:Envelope>"
    )


def multipart(envelope_xml: str, attachment: Attachment) -> tuple[str, bytes]:
    """(Content-Type, body) of a SOAP message with one attachment."""
    boundary = "----=_ums_" + secrets.token_hex(12)
    cid = attachment.content_id or "attachment-1"
    parts = [
        f"--{boundary}\r\nContent-Type: text/xml; charset=UTF-8\r\n"
        "Content-ID: <envelope>\r\n\r\n".encode(),
        envelope_xml.encode("utf-8"),
        f"\r\n--{boundary}\r\nContent-Type: {attachment.content_type}\r\n"
        f"Content-Transfer-Encoding: binary\r\nContent-ID: <{cid}>\r\n\r\n".encode(),
        attachment.data,
        f"\r\n--{boundary}--\r\n".encode(),
    ]
    ctype = f'multipart/related; type="text/xml"; start="<envelope>"; boundary="{boundary}"'
    return ctype, b"".join(parts)
