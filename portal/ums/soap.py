"""SOAP 1.1 envelopes of the XML messaging service: requests in, replies and faults out.

Requests are parsed with defusedxml: a DTD, an entity declaration or an external
reference is refused before anything is expanded or fetched.  A request is a SOAP 1.1
envelope whose ``SOAP-ENV:Header`` holds ``ums:MessageHeader`` with one ``ums:Service``
(namespace ``https://mq.java.net/ums``; attributes sid, destination, domain, service,
user, password, timeout, transacted); JMS properties travel in an ``ums:JMSProperty``
header element (``ums:StringProperty ums:pname=.. ums:pvalue=..`` and Int, Long, Short,
Byte, Boolean -- OpenMQ's -- plus Float and Double).  Binary data comes as a SOAP
attachment (multipart/related, SOAP Messages with Attachments).
"""

from __future__ import annotations

import secrets
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from xml.sax.saxutils import escape, quoteattr

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as safe_fromstring

from broker.protocol.jtypes import JByte, JFloat, JInt, JLong, JShort

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
    """What a request asks for: the Service attributes, the body, properties, attachments."""

    service: dict[str, str]
    text: str | None = None
    properties: dict[str, object] = field(default_factory=dict)
    attachments: list[Attachment] = field(default_factory=list)


def _parse_xml(data: bytes) -> ET.Element:
    try:
        return safe_fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise SoapFault("Client", f"refused XML: {type(exc).__name__} ({exc})") from exc
    except ET.ParseError as exc:
        raise SoapFault("Client", f"malformed XML: {exc}") from exc


def _split_multipart(content_type: str, body: bytes) -> tuple[bytes, list[Attachment]]:
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    msg = BytesParser(policy=HTTP).parsebytes(head + body)
    if not msg.is_multipart():
        raise SoapFault("Client", "multipart/related request without parts")
    parts = list(msg.iter_parts())
    if not parts:
        raise SoapFault("Client", "multipart/related request without parts")
    start = msg.get_param("start")
    root = parts[0]
    if start:
        for p in parts:
            if p.get("Content-ID", "").strip() == str(start).strip():
                root = p
                break
    envelope = root.get_payload(decode=True) or b""
    attachments = [
        Attachment(
            p.get_content_type(),
            p.get_payload(decode=True) or b"",
            (p.get("Content-ID") or "").strip("<> ") or None,
        )
        for p in parts
        if p is not root
    ]
    return envelope, attachments


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
        return name, conv(int(value))  # type: ignore[operator]
    except (ValueError, OverflowError) as exc:
        raise SoapFault("Client", f"bad value for {kind} {name}: {value!r}") from exc


def _inner_xml(body: ET.Element) -> str | None:
    children = list(body)
    if not children:
        text = (body.text or "").strip()
        return body.text if text else None
    return "".join(ET.tostring(c, encoding="unicode") for c in children).strip()


def parse_request(content_type: str, data: bytes) -> SoapRequest:
    """The request of one POST to /xml; SoapFault for anything that is not one."""
    attachments: list[Attachment] = []
    if content_type.lower().startswith("multipart/"):
        data, attachments = _split_multipart(content_type, data)
    root = _parse_xml(data)
    if root.tag != _E + "Envelope":
        if root.tag.endswith("}Envelope") or root.tag == "Envelope":
            raise SoapFault("VersionMismatch", "not a SOAP 1.1 envelope namespace")
        raise SoapFault("Client", "the request is not a SOAP envelope")
    header = root.find(_E + "Header")
    body = root.find(_E + "Body")
    if header is None or body is None:
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
    return SoapRequest(service, _inner_xml(body), props, attachments)


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


def envelope(
    service: dict[str, str],
    *,
    text: str | None = None,
    properties: dict[str, object] | None = None,
) -> str:
    """A reply envelope: ``ums:Service`` with the reply's attributes, the text in the Body."""
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
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<SOAP-ENV:Envelope xmlns:SOAP-ENV="{SOAP_ENV}">'
        "<SOAP-ENV:Header>"
        f'<ums:MessageHeader xmlns:ums="{UMS_NS}" ums:id="1.0" ums:version="1.1">'
        f"<ums:Service{attrs}/></ums:MessageHeader>{props}"
        "</SOAP-ENV:Header>"
        f"<SOAP-ENV:Body>{_body_xml(text)}</SOAP-ENV:Body>"
        "</SOAP-ENV:Envelope>"
    )


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
