"""UMS XML messaging (SOAP 1.1, SOAP with attachments) over real HTTP, hostile XML, and
interop with the stock OpenMQ C client (tests/interop's probe, send-props/recv-props)."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from email.parser import BytesParser
from email.policy import HTTP

import requests

from broker.protocol.jtypes import JByte, JFloat, JInt, JLong, JShort

from .interop.conftest import c_build_dir, c_probe  # noqa: F401
from .ums_stack import ums_stack_fixture  # noqa: F401

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


def service_of(r: requests.Response) -> dict[str, str]:
    root = ET.fromstring(r.content)
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


def multipart(env: str, data: bytes, boundary: str = "b0undary") -> tuple[str, bytes]:
    body = (
        f"--{boundary}\r\nContent-Type: text/xml; charset=utf-8\r\nContent-ID: <env>\r\n\r\n".encode()
        + env.encode()
        + f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n"
        "Content-Transfer-Encoding: binary\r\nContent-ID: <att1>\r\n\r\n".encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return f'multipart/related; type="text/xml"; start="<env>"; boundary="{boundary}"', body


def test_attachment_is_a_bytes_message(ums_stack):
    dest = q()
    data = bytes(range(256)) * 3
    ctype, body = multipart(envelope({"service": "send", "destination": dest}), data)
    r = call(ums_stack, body, ctype)
    assert service_of(r)["status"] == "200", r.text
    r = call(ums_stack, envelope({"service": "receive", "destination": dest, "timeout": "5000"}))
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("multipart/related")
    msg = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {r.headers['Content-Type']}\r\n\r\n".encode() + r.content
    )
    parts = list(msg.iter_parts())
    assert len(parts) == 2
    env = ET.fromstring(parts[0].get_payload(decode=True))
    svc = env.find(f"{E}Header/{U}MessageHeader/{U}Service")
    assert svc is not None and svc.get(f"{U}status") == "200"
    assert parts[1].get_payload(decode=True) == data


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
    """UMS sends a text and an attachment with properties; the stock C client receives a
    TextMessage and a BytesMessage with them."""
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
    ctype, body = multipart(envelope({"service": "send", "destination": dest}, "", props), C_BYTES)
    assert service_of(call(ums_stack, body, ctype))["status"] == "200"
    out = c_probe.run(ums_stack.broker, "recv-props", dest)
    assert out.checks == {"recv_props": "ok"}, out.explain()
    from .interop.test_cclient import parse_recv_props

    msgs = parse_recv_props(out)
    assert msgs[0]["body"] == ("text", C_TEXT)
    assert msgs[1]["body"] == ("bytes", C_BYTES.hex())
    for m in msgs:
        assert m["prop.pString"] == ("string", "café")
        assert m["prop.pInt"] == ("int32", "123456789")
        assert m["prop.pLong"] == ("int64", "1234567890123")
        assert m["prop.pBool"] == ("bool", "1")
        assert m["prop.pShort"] == ("int16", "-1234")
        assert m["prop.pByte"] == ("int8", "-5")


def test_python_types_map(ums_stack):
    """The jtypes the SOAP property elements become (what a JMS client sees)."""
    import asyncio

    from broker.client import Queue, connect

    dest = q()
    props = (
        '<ums:IntProperty ums:pname="i" ums:pvalue="1"/><ums:LongProperty ums:pname="l" ums:pvalue="2"/>'
        '<ums:ShortProperty ums:pname="h" ums:pvalue="3"/><ums:ByteProperty ums:pname="y" ums:pvalue="4"/>'
        '<ums:FloatProperty ums:pname="f" ums:pvalue="0.5"/>'
    )
    call(ums_stack, envelope({"service": "send", "destination": dest}, "typed", props))
    b = ums_stack.broker

    async def get():
        conn = await connect(b.host, b.portmapper_port)
        try:
            sess = await conn.create_session()
            cons = await sess.create_consumer(Queue(dest))
            await conn.start()
            return await cons.receive(10)
        finally:
            await conn.close()

    m = asyncio.run(get())
    assert m is not None and m.text == "typed"
    p = m.properties
    assert type(p["i"]) is JInt and type(p["l"]) is JLong
    assert type(p["h"]) is JShort and type(p["y"]) is JByte and type(p["f"]) is JFloat
