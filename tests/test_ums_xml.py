"""UMS XML messaging (SOAP 1.1, SOAP with attachments) over real HTTP, hostile XML,
MessageTransformer's BytesMessage layout (with a JMS program on the stock Java client and
Debian's SAAJ), and interop with the stock OpenMQ C client (tests/interop's probe,
send-props/recv-props)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
import xml.etree.ElementTree as ET
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path

import pytest
import requests

from broker.protocol.javaser import encode_hashtable
from broker.protocol.jtypes import JByte, JFloat, JInt, JLong, JShort
from broker.stock_paths import JAVA_CLIENT
from portal.ums import soap, transformer
from tests.jvmflags import JAVAC

from .interop.conftest import ProbeResult, c_build_dir, c_probe  # noqa: F401
from .ums_stack import jms_receive

SOAP = "http://schemas.xmlsoap.org/soap/envelope/"
UMS = "https://mq.java.net/ums"
E = f"{{{SOAP}}}"
U = f"{{{UMS}}}"


def q() -> str:
    return f"umsx_{uuid.uuid4().hex[:10]}"


def envelope(service: dict[str, str], body: str = "", props: str = "") -> str:
    """A request as the seed describes it: namespace-qualified Service attributes."""
    attrs = "".join(f' ums:{k}="{v}"' for k, v in service.items())
    jp = f"<ums:JMSProperty>{props}</ums:JMSProperty>" if props else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<SOAP-ENV:Envelope xmlns:SOAP-ENV="{SOAP}" xmlns:ums="{UMS}">'
        f'<SOAP-ENV:Header><ums:MessageHeader ums:id="1.0" ums:version="1.1">'
        f"<ums:Service{attrs}/></ums:MessageHeader>{jp}</SOAP-ENV:Header>"
        f"<SOAP-ENV:Body>{body}</SOAP-ENV:Body></SOAP-ENV:Envelope>"
    )


def call(stack, data: str | bytes, content_type: str = "text/xml; charset=utf-8"):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return requests.post(
        f"{stack.url}/ums/xml", data=data, headers={"Content-Type": content_type}, timeout=30
    )


def service_of(r: requests.Response | ET.Element) -> dict[str, str]:
    root = ET.fromstring(r.content) if isinstance(r, requests.Response) else r
    svc = root.find(f"{E}Header/{U}MessageHeader/{U}Service")
    assert svc is not None, r.text
    return {k[len(U) :]: v for k, v in svc.attrib.items()}


def fault_of(r: requests.Response) -> tuple[str, str]:
    assert r.status_code == 500, r.text
    assert r.headers["Content-Type"].startswith("text/xml")
    root = ET.fromstring(r.content)
    f = root.find(f"{E}Body/{E}Fault")
    assert f is not None, r.text
    return f.findtext("faultcode") or "", f.findtext("faultstring") or ""


def test_login_send_receive_close(ums_stack):
    dest = q()
    r = call(ums_stack, envelope({"service": "login", "user": "alice", "password": "wonderland"}))
    assert r.status_code == 200, r.text
    s = service_of(r)
    assert s["service"] == "login_reply" and s["status"] == "200" and s["mom"] == "openmq"
    sid = s["sid"]
    body = '<order xmlns="urn:shop"><item>tea</item></order>'
    r = call(
        ums_stack,
        envelope({"service": "send", "sid": sid, "destination": dest, "domain": "queue"}, body),
    )
    s = service_of(r)
    assert (s["service"], s["status"], s["destination"], s["domain"]) == (
        "send_reply",
        "200",
        dest,
        "queue",
    )
    r = call(
        ums_stack,
        envelope({"service": "receive", "sid": sid, "destination": dest, "timeout": "5000"}),
    )
    assert service_of(r)["status"] == "200"
    order = ET.fromstring(r.content).find(f"{E}Body/{{urn:shop}}order")
    assert order is not None and order.findtext("{urn:shop}item") == "tea"
    r = call(
        ums_stack,
        envelope({"service": "receive", "sid": sid, "destination": dest, "timeout": "200"}),
    )
    assert r.status_code == 200 and service_of(r)["status"] == "404"
    r = call(ums_stack, envelope({"service": "close", "sid": sid}))
    assert service_of(r)["service"] == "close_reply"


def test_transacted_xml(ums_stack):
    dest = q()
    sid = service_of(call(ums_stack, envelope({"service": "login", "transacted": "true"})))["sid"]
    call(ums_stack, envelope({"service": "send", "sid": sid, "destination": dest}, "a"))
    assert (
        service_of(call(ums_stack, envelope({"service": "rollback", "sid": sid})))["service"]
        == "rollback_reply"
    )
    r = call(ums_stack, envelope({"service": "receive", "destination": dest, "timeout": "300"}))
    assert service_of(r)["status"] == "404"
    call(ums_stack, envelope({"service": "send", "sid": sid, "destination": dest}, "b"))
    assert (
        service_of(call(ums_stack, envelope({"service": "commit", "sid": sid})))["service"]
        == "commit_reply"
    )
    r = call(ums_stack, envelope({"service": "receive", "destination": dest, "timeout": "5000"}))
    assert ET.fromstring(r.content).findtext(f"{E}Body") == "b"
    call(ums_stack, envelope({"service": "close", "sid": sid}))


def test_properties_round_trip(ums_stack):
    dest = q()
    props = (
        '<ums:StringProperty ums:pname="s" ums:pvalue="café"/>'
        '<ums:IntProperty ums:pname="i" ums:pvalue="42"/>'
        '<ums:LongProperty ums:pname="l" ums:pvalue="1234567890123"/>'
        '<ums:BooleanProperty ums:pname="b" ums:pvalue="true"/>'
        '<ums:ShortProperty ums:pname="h" ums:pvalue="-7"/>'
        '<ums:ByteProperty ums:pname="y" ums:pvalue="5"/>'
    )
    r = call(ums_stack, envelope({"service": "send", "destination": dest}, "with props", props))
    assert service_of(r)["status"] == "200", r.text
    r = call(ums_stack, envelope({"service": "receive", "destination": dest, "timeout": "5000"}))
    root = ET.fromstring(r.content)
    got = {
        el.get(f"{U}pname"): (el.tag[len(U) :], el.get(f"{U}pvalue"))
        for el in root.iterfind(f"{E}Header/{U}JMSProperty/*")
    }
    # The broker's own JMSX properties come along, as for any JMS consumer.
    assert got.pop("JMSXDeliveryCount") == ("IntProperty", "1")
    assert got == {
        "s": ("StringProperty", "café"),
        "i": ("IntProperty", "42"),
        "l": ("LongProperty", "1234567890123"),
        "b": ("BooleanProperty", "true"),
        "h": ("ShortProperty", "-7"),
        "y": ("ByteProperty", "5"),
    }


def multipart(
    env: str,
    *attachments: tuple[str, str, bytes],
    boundary: str = "b0undary",
    root_cid: str = "env",
) -> tuple[str, bytes]:
    """A SOAP message with attachments ((Content-ID, Content-Type, data) each), as a SOAP
    with Attachments client sends it."""
    body = (
        f"--{boundary}\r\nContent-Type: text/xml; charset=utf-8\r\n"
        f"Content-ID: <{root_cid}>\r\n\r\n".encode()
        + env.encode()
    )
    for cid, ctype, data in attachments:
        body += (
            f"\r\n--{boundary}\r\nContent-Type: {ctype}\r\n"
            f"Content-Transfer-Encoding: binary\r\nContent-ID: <{cid}>\r\n\r\n".encode()
            + data
        )
    body += f"\r\n--{boundary}--\r\n".encode()
    ctype = f'multipart/related; type="text/xml"; start="<{root_cid}>"; boundary="{boundary}"'
    return ctype, body


def soap_reply(r: requests.Response) -> tuple[ET.Element, list[transformer.Part]]:
    """The envelope and the attachments of a reply (read by the standard library's MIME
    parser, not the gateway's own)."""
    assert r.status_code == 200, r.text
    ctype = r.headers["Content-Type"]
    if not ctype.startswith("multipart/related"):
        return ET.fromstring(r.content), []
    # compat32: header values exactly as the gateway wrote them.
    msg = BytesParser().parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + r.content)
    parts = msg.get_payload()
    start = msg.get_param("start")
    root = next((p for p in parts if start and p["Content-ID"] == start), parts[0])
    atts = [
        transformer.Part([(k, str(v)) for k, v in p.items()], p.get_payload(decode=True) or b"")
        for p in parts
        if p is not root
    ]
    return ET.fromstring(root.get_payload(decode=True)), atts


ATT_PNG = bytes(range(256)) * 3
ATT_TXT = "héllo\r\n--b0undary\r\nnot a boundary".encode()


def test_attachments_round_trip(ums_stack):
    """Several attachments, each with its own Content-ID and Content-Type, and the Body
    and the rest of the Header come back as sent; JMS sees a BytesMessage in
    MessageTransformer's layout."""
    dest = q()
    body = '<o:order xmlns:o="urn:shop"><o:item>tea</o:item></o:order>'
    env = envelope({"service": "send", "destination": dest}, body).replace(
        "<SOAP-ENV:Header>", '<SOAP-ENV:Header><t:trace xmlns:t="urn:t">abc</t:trace>'
    )
    ctype, data = multipart(
        env,
        ("att1@shop", "image/png", ATT_PNG),
        ("att2@shop", "text/plain; charset=utf-8", ATT_TXT),
        ("empty", "application/octet-stream", b""),
        boundary="b0undary'x",
        root_cid="root@shop",
    )
    r = call(ums_stack, data, ctype)
    assert service_of(r)["status"] == "200", r.text
    r = call(ums_stack, envelope({"service": "receive", "destination": dest, "timeout": "5000"}))
    assert r.headers["Content-Type"].startswith("multipart/related")
    root, atts = soap_reply(r)
    svc = root.find(f"{E}Header/{U}MessageHeader/{U}Service")
    assert (
        svc is not None
        and svc.get(f"{U}status") == "200"
        and svc.get(f"{U}service") == "receive_reply"
    )
    assert len(root.findall(f"{E}Header/{U}MessageHeader")) == 1
    assert root.findtext(f"{E}Header/{{urn:t}}trace") == "abc"
    assert root.findtext(f"{E}Body/{{urn:shop}}order/{{urn:shop}}item") == "tea"
    got = [(a.content_id, a.content_type, a.body) for a in atts]
    assert got == [
        ("att1@shop", "image/png", ATT_PNG),
        ("att2@shop", "text/plain; charset=utf-8", ATT_TXT),
        ("empty", "application/octet-stream", b""),
    ]
    # The envelope part keeps its Content-ID too.
    assert "<root@shop>" in r.headers["Content-Type"]


def test_transformer_layout_for_jms(ums_stack):
    """What a JMS consumer gets from an XML send: a BytesMessage whose body is
    int32 + serialised Hashtable (the MIME headers) + int32 + the SOAP stream, and the
    properties of ums:JMSProperty; the Service element (with its password) is not in it."""
    from openmq_client import BytesMessage

    dest = q()
    env = envelope(
        {"service": "send", "destination": dest, "user": "guest", "password": "guest"},
        "<p:x xmlns:p='urn:p'>1</p:x>",
        '<ums:StringProperty ums:pname="k" ums:pvalue="v"/>',
    )
    for ctype, data in (
        ("text/xml; charset=utf-8", env.encode()),
        multipart(env, ("a", "application/octet-stream", b"\x00\x01"), ("b", "text/plain", b"t")),
    ):
        assert service_of(call(ums_stack, data, ctype))["status"] == "200"
    plain, multi = jms_receive(ums_stack.broker, dest, 2)
    for m in (plain, multi):
        assert isinstance(m, BytesMessage) and m.properties["k"] == "v"
        n = int.from_bytes(m.data[:4], "big")
        headers, content = transformer.decode_layout(m.data)
        assert m.data[4 : 4 + n] == encode_hashtable(headers)
        assert int.from_bytes(m.data[4 + n : 8 + n], "big") == len(content)
        assert b"guest" not in m.data and b"MessageHeader" not in m.data
        assert b"JMSProperty" not in m.data
    headers, content = transformer.decode_layout(plain.data)
    assert headers == {"Content-Type": "text/xml; charset=utf-8"}
    assert ET.fromstring(content).findtext(f"{E}Body/{{urn:p}}x") == "1"
    headers, content = transformer.decode_layout(multi.data)
    assert headers["Content-Type"].startswith('multipart/related; type="text/xml"; boundary=')
    msg = transformer.decode(multi.data)
    assert [(a.content_id, a.payload()) for a in msg.attachments] == [
        ("a", b"\x00\x01"),
        ("b", b"t"),
    ]


def test_transformer_units():
    """The layout and the envelope edits without a broker: what is and is not a
    transformed message, odd MIME, other encodings."""
    env = envelope({"service": "send", "destination": "d"}, "<b>1</b>")
    req = soap.parse_request("text/xml", env.encode())
    data = req.jms_body()
    # Anything else a BytesMessage may hold is not taken for the layout.
    for other in (b"", b"\x00" * 8, data[:-1], data + b"x", b"\xac\xed\x00\x05" + data[4:],
                  data[:4] + b"\x00" * (len(data) - 4), os.urandom(64)):  # fmt: skip
        with pytest.raises(transformer.LayoutError):
            transformer.decode(other)
    assert soap.transformed(b"\x00\x00\x00\x00\x00\x00\x00\x00", {}) is None
    # A layout whose content is no SOAP envelope is answered as an attachment.
    junk = transformer.encode(transformer.SoapMime(b"<not-soap/>"))
    ctype, body = soap.reply({"service": "receive_reply"}, data=junk)
    assert ctype.startswith("multipart/related") and junk in body
    # A stored message whose Content-ID holds a CR (written by some JMS program) is not
    # echoed into the reply's Content-Type.
    cr = transformer.SoapMime(
        req.message.envelope, [("Content-Type", "text/xml"), ("Content-ID", "<x\ry>")],
        [transformer.Part([("Content-Type", "text/plain")], b"t")],
    )  # fmt: skip
    ctype, body = soap.reply({"service": "receive_reply"}, data=transformer.encode(cr))
    assert "\r" not in ctype and ctype.startswith("multipart/related")
    assert transformer.parse_mime(ctype, body).attachments[0].content_id == "attachment-1"
    # The reply's MessageHeader goes into a Header that is empty, self-closing or absent.
    for head in ("<S:Header/>", "<S:Header></S:Header>", ""):
        mime = transformer.SoapMime(
            f'<S:Envelope xmlns:S="{SOAP}">{head}<S:Body>x</S:Body></S:Envelope>'.encode()
        )
        ctype, body = soap.reply({"service": "receive_reply"}, data=transformer.encode(mime))
        root = ET.fromstring(body)
        assert root.find(f"{E}Header/{U}MessageHeader/{U}Service") is not None, body
        assert root.findtext(f"{E}Body") == "x" and ctype.startswith("text/xml")
    # An ISO-8859-1 envelope is stored as UTF-8, the same text.
    latin = env.replace('encoding="UTF-8"', 'encoding="ISO-8859-1"').replace("<b>1</b>", "<b>é</b>")
    req = soap.parse_request("text/xml", latin.encode("latin-1"))
    assert ET.fromstring(req.message.envelope).findtext(f"{E}Body/b") == "é"
    # A multipart whose start names no part, or without its boundary: a Client fault.
    for ctype, body in (
        ('multipart/related; start="<nope>"; boundary="b"', b"--b\r\n\r\n<x/>\r\n--b--"),
        ('multipart/related; boundary="b"', b"no boundary here"),
        ("multipart/related", b"--b\r\n\r\n<x/>\r\n--b--"),
        ("multipart/mixed; boundary=b", b"--b\r\n\r\n<x/>\r\n--b--"),
        (
            "multipart/related; boundary=b",
            b"--b\r\nContent-ID: <a\rb>\r\n\r\n" + env.encode() + b"\r\n--b--",
        ),
    ):
        with pytest.raises(soap.SoapFault) as exc:
            soap.parse_request(ctype, body)
        assert exc.value.code == "Client", exc.value.reason


def test_faults(ums_stack):
    code, why = fault_of(call(ums_stack, "<not-closed"))
    assert code == "SOAP-ENV:Client" and "malformed" in why
    code, why = fault_of(call(ums_stack, envelope({"service": "fly"})))
    assert code == "SOAP-ENV:Client" and "unknown service" in why
    code, why = fault_of(call(ums_stack, envelope({"destination": "x"})))
    assert "required" in why
    code, why = fault_of(
        call(ums_stack, envelope({"service": "receive", "destination": "x", "timeout": "soon"}))
    )
    assert "xsd:long" in why
    code, _ = fault_of(
        call(ums_stack, envelope({"service": "send", "destination": "x", "domain": "galaxy"}))
    )
    assert code == "SOAP-ENV:Client"
    wrong_ns = envelope({"service": "login"}).replace(
        SOAP, "http://www.w3.org/2003/05/soap-envelope"
    )
    code, _ = fault_of(call(ums_stack, wrong_ns))
    assert code == "SOAP-ENV:VersionMismatch"
    no_header = f'<e:Envelope xmlns:e="{SOAP}"><e:Body/></e:Envelope>'
    code, why = fault_of(call(ums_stack, no_header))
    assert "Header" in why
    code, why = fault_of(
        call(ums_stack, envelope({"service": "login", "password": "nope", "user": "alice"}))
    )
    assert code == "SOAP-ENV:Client" and "authentication failed" in why
    code, why = fault_of(
        call(ums_stack, envelope({"service": "send", "destination": "secret"}, "x"))
    )
    assert "not authorized" in why
    r = requests.get(f"{ums_stack.url}/ums/xml", timeout=30)
    fault_of(r)


def test_hostile_xml(ums_stack):
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
        '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
        f'<SOAP-ENV:Envelope xmlns:SOAP-ENV="{SOAP}"><SOAP-ENV:Body>&lol3;</SOAP-ENV:Body></SOAP-ENV:Envelope>'
    )
    code, why = fault_of(call(ums_stack, laughs))
    assert code == "SOAP-ENV:Client" and "refused XML" in why
    external = (
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        f'<SOAP-ENV:Envelope xmlns:SOAP-ENV="{SOAP}"><SOAP-ENV:Body>&xxe;</SOAP-ENV:Body></SOAP-ENV:Envelope>'
    )
    code, why = fault_of(call(ums_stack, external))
    assert "refused XML" in why and "root:" not in why
    # The gateway keeps serving.
    r = call(ums_stack, envelope({"service": "send", "destination": q()}, "still here"))
    assert service_of(r)["status"] == "200"


C_TEXT = "interop café €"
C_BYTES = bytes((i * 7 + 3) & 0xFF for i in range(300))


def test_c_client_to_ums(ums_stack, c_probe):  # noqa: F811
    """The stock C client sends a text and a bytes message with properties; UMS gets both."""
    dest = q()
    r = c_probe.run(ums_stack.broker, "send-props", dest)
    assert r.checks == {"send_props": "ok"}, r.explain()
    got = {}
    for _ in range(2):
        resp = call(
            ums_stack, envelope({"service": "receive", "destination": dest, "timeout": "10000"})
        )
        assert resp.status_code == 200, resp.text
        if resp.headers["Content-Type"].startswith("multipart/related"):
            msg = BytesParser(policy=HTTP).parsebytes(
                f"Content-Type: {resp.headers['Content-Type']}\r\n\r\n".encode() + resp.content
            )
            env_part, att = list(msg.iter_parts())
            root = ET.fromstring(env_part.get_payload(decode=True))
            got["bytes"] = (att.get_payload(decode=True), root)
        else:
            root = ET.fromstring(resp.content)
            got["text"] = (root.findtext(f"{E}Body"), root)
            assert got["text"][0], resp.text
    assert got["text"][0] == C_TEXT
    assert got["bytes"][0] == C_BYTES
    for _, root in got.values():
        props = {
            el.get(f"{U}pname"): (el.tag[len(U) :], el.get(f"{U}pvalue"))
            for el in root.iterfind(f"{E}Header/{U}JMSProperty/*")
        }
        assert props["pString"] == ("StringProperty", "café")
        assert props["pInt"] == ("IntProperty", "123456789")
        assert props["pLong"] == ("LongProperty", "1234567890123")
        assert props["pShort"] == ("ShortProperty", "-1234")
        assert props["pByte"] == ("ByteProperty", "-5")
        assert props["pBool"] == ("BooleanProperty", "true")
        assert props["pFloat"] == ("FloatProperty", "1.5")
        assert props["pDouble"] == ("DoubleProperty", "-2.25")


def test_ums_to_c_client(ums_stack, c_probe):  # noqa: F811
    """UMS sends a text body and an attachment with properties; the stock C client
    receives BytesMessages in MessageTransformer's layout with them."""
    dest = q()
    props = (
        '<ums:StringProperty ums:pname="pString" ums:pvalue="café"/>'
        '<ums:IntProperty ums:pname="pInt" ums:pvalue="123456789"/>'
        '<ums:LongProperty ums:pname="pLong" ums:pvalue="1234567890123"/>'
        '<ums:BooleanProperty ums:pname="pBool" ums:pvalue="true"/>'
        '<ums:ShortProperty ums:pname="pShort" ums:pvalue="-1234"/>'
        '<ums:ByteProperty ums:pname="pByte" ums:pvalue="-5"/>'
    )
    r = call(ums_stack, envelope({"service": "send", "destination": dest}, C_TEXT, props))
    assert service_of(r)["status"] == "200", r.text
    ctype, body = multipart(
        envelope({"service": "send", "destination": dest}, "", props),
        ("c-bytes", "application/octet-stream", C_BYTES),
    )
    assert service_of(call(ums_stack, body, ctype))["status"] == "200"
    out = c_probe.run(ums_stack.broker, "recv-props", dest)
    assert out.checks == {"recv_props": "ok"}, out.explain()
    from .interop.test_cclient import parse_recv_props

    msgs = parse_recv_props(out)
    assert [m["body"][0] for m in msgs] == ["bytes", "bytes"]
    text_msg, att_msg = (transformer.decode(bytes.fromhex(m["body"][1])) for m in msgs)
    assert ET.fromstring(text_msg.envelope).findtext(f"{E}Body") == C_TEXT
    assert text_msg.attachments == []
    assert [(a.content_id, a.payload()) for a in att_msg.attachments] == [("c-bytes", C_BYTES)]
    for m in msgs:
        assert m["prop.pString"] == ("string", "café")
        assert m["prop.pInt"] == ("int32", "123456789")
        assert m["prop.pLong"] == ("int64", "1234567890123")
        assert m["prop.pBool"] == ("bool", "1")
        assert m["prop.pShort"] == ("int16", "-1234")
        assert m["prop.pByte"] == ("int8", "-5")


def test_python_types_map(ums_stack):
    """The jtypes the SOAP property elements become (what a JMS client sees)."""
    dest = q()
    props = (
        '<ums:IntProperty ums:pname="i" ums:pvalue="1"/><ums:LongProperty ums:pname="l" ums:pvalue="2"/>'
        '<ums:ShortProperty ums:pname="h" ums:pvalue="3"/><ums:ByteProperty ums:pname="y" ums:pvalue="4"/>'
        '<ums:FloatProperty ums:pname="f" ums:pvalue="0.5"/>'
    )
    call(ums_stack, envelope({"service": "send", "destination": dest}, "typed", props))
    (m,) = jms_receive(ums_stack.broker, dest)
    assert m is not None
    assert ET.fromstring(transformer.decode(m.data).envelope).findtext(f"{E}Body") == "typed"
    p = m.properties
    assert type(p["i"]) is JInt and type(p["l"]) is JLong
    assert type(p["h"]) is JShort and type(p["y"]) is JByte and type(p["f"]) is JFloat


# -- a JMS program on the stock Java client with a real SAAJ ----------------------------

# Debian's SAAJ reference implementation (libsaaj-ri-java; `make install-dev` installs it):
# the JDK has had no javax.xml.soap since 11, and the stock client ships none.
SAAJ = [
    Path("/usr/share/java") / j
    for j in ("saaj-impl.jar", "javax.xml.soap-api.jar", "mimepull.jar", "stax-ex.jar",
              "javax.activation.jar")
]  # fmt: skip
JAVA_CP = [JAVA_CLIENT / "imq.jar", JAVA_CLIENT / "jakarta.jms-api-3.1.0.jar", *SAAJ]


def run_java(tmp_path: Path, broker, *args: str) -> ProbeResult:
    """Compile tests/ums_java/UmsSoap.java and run it once; fail naming what is missing."""
    missing = [t for t in ("javac", "java") if shutil.which(t) is None]
    missing += [str(j) for j in JAVA_CP if not j.is_file()]
    if missing:
        pytest.fail(
            "the UMS/SAAJ Java check cannot run; missing: " + ", ".join(missing)
            + " (a JDK 17, the stock OpenMQ Java client, Debian's libsaaj-ri-java: "
            "`make install-dev` installs the Debian packages)",
            pytrace=False,
        )  # fmt: skip
    cp = os.pathsep.join(str(j) for j in JAVA_CP)
    src = Path(__file__).resolve().parent / "ums_java" / "UmsSoap.java"
    c = subprocess.run(
        [*JAVAC, "-encoding", "UTF-8", "-cp", cp, "-d", str(tmp_path), str(src)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert c.returncode == 0, c.stderr
    p = subprocess.run(
        ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
         os.pathsep.join((str(tmp_path), cp)), "UmsSoap", broker.host,
         str(broker.portmapper_port), *args],
        capture_output=True, timeout=240, check=False,
    )  # fmt: skip
    return ProbeResult(
        p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    )


def test_java_saaj_both_ways(ums_stack, tmp_path):
    """UMS -> JMS: a SOAP message sent through the gateway (Body, two attachments, JMS
    properties) is read by a Java program on the stock client exactly as
    MessageTransformer.SOAPMessageFromJMSMessage reads it, into a real SAAJ SOAPMessage.
    JMS -> UMS: the program makes BytesMessages as SOAPMessageIntoJMSMessage does from SAAJ
    messages (MIME headers as SAAJ sets them); a UMS receive gives each SOAP message back."""
    to_java, from_java = q(), q()
    env = envelope(
        {"service": "send", "destination": to_java},
        '<o:order xmlns:o="urn:shop"><o:item>tea</o:item></o:order>',
        '<ums:IntProperty ums:pname="pInt" ums:pvalue="7"/>'
        '<ums:StringProperty ums:pname="pString" ums:pvalue="café"/>',
    )
    ctype, data = multipart(
        env,
        ("att1", "application/octet-stream", bytes(range(256))),
        ("att2", "text/plain; charset=utf-8", "héllo from UMS".encode()),
    )
    assert service_of(call(ums_stack, data, ctype))["status"] == "200"

    out = run_java(tmp_path, ums_stack.broker, to_java, from_java)
    checks = out.checks
    assert checks == {
        name: "ok"
        for name in (
            "ums_send_is_a_bytes_message", "ums_send_properties",
            "ums_send_read_as_transformer_layout", "ums_send_body_intact",
            "ums_send_header_without_ums_elements", "ums_send_attachments",
            "java_send_in_transformer_layout", "java_send_without_attachment", "hashtable_bytes",
        )
    }, out.explain()  # fmt: skip
    # Java's ObjectOutputStream and ours write the same MIME-header Hashtable.
    info = next(line.split()[2] for line in out.lines if line.startswith("info hashtable "))
    assert bytes.fromhex(info) == encode_hashtable(
        {"Content-Type": 'multipart/related; type="text/xml"; boundary="b"'}
    )

    r = call(
        ums_stack, envelope({"service": "receive", "destination": from_java, "timeout": "5000"})
    )
    root, atts = soap_reply(r)
    assert service_of(root)["status"] == "200"
    note = root.find(f"{E}Body/{{urn:note}}note")
    assert note is not None and note.findtext("{urn:note}text") == "from java €"
    assert [(a.content_id, a.content_type, a.body) for a in atts] == [
        ("java-img", "image/png", bytes(range(256))),
        ("java-txt", "text/plain", b"plain words"),
    ]
    props = {
        el.get(f"{U}pname"): el.get(f"{U}pvalue")
        for el in root.iterfind(f"{E}Header/{U}JMSProperty/*")
    }
    assert props["origin"] == "java"
    r = call(
        ums_stack, envelope({"service": "receive", "destination": from_java, "timeout": "5000"})
    )
    assert r.headers["Content-Type"].startswith("text/xml")
    root, atts = soap_reply(r)
    assert root.findtext(f"{E}Body/{{urn:note}}ping") == "2" and atts == []
    assert service_of(root)["service"] == "receive_reply"
