"""Every message type, property type and header between the stock Java, C and Python clients.

tests/interop/java/Types.java sends Text, Bytes, Map, Stream, Object and plain messages
with every property type and header set, and receives and checks what the others send;
probe.c (send-props / recv-props) and our Python client are the other ends. The same
values are spelled out on each side.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from openmq_client import (
    BytesMessage,
    DeliveryMode,
    JByte,
    JChar,
    JFloat,
    JInt,
    JLong,
    JShort,
    MapMessage,
    Message,
    ObjectMessage,
    Queue,
    StreamMessage,
    TextMessage,
    Topic,
    connect,
)

from .conftest import CProbe, ProbeResult
from .test_cclient import BYTES_BODY, C_PROPS, TEXT, TYPED_PROPS, parse_recv_props

pytestmark = pytest.mark.timeout(300)

# Types.java's MapMessage entries, and in this order its StreamMessage items.
FIELDS: dict[str, object] = {
    "b": True,
    "y": JByte(-5),
    "s": JShort(-1234),
    "c": JChar("é"),
    "i": JInt(123456789),
    "l": JLong(1234567890123),
    "f": JFloat(1.5),
    "d": -2.25,
    "t": "café",
    "a": bytes([1, 2, 3, 0xFF]),
}
OBJECT = {"k": 7, "s": "café"}

# What Types.java's "send" sets: correlation ID -> (class, delivery mode, priority,
# expiry, reply-to as probe.c prints it, queue suffix).
JAVA_SENT: dict[str, tuple[type[Message], int, int, bool, tuple[str, str] | None, str]] = {
    "java-text": (TextMessage, DeliveryMode.PERSISTENT, 7, True, ("queue", "_reply"), "_a"),
    "java-bytes": (BytesMessage, DeliveryMode.NON_PERSISTENT, 2, False, ("topic", "_rtopic"), "_a"),
    "java-map": (MapMessage, DeliveryMode.PERSISTENT, 4, False, None, "_b"),
    "java-stream": (StreamMessage, DeliveryMode.NON_PERSISTENT, 9, False, None, "_b"),
    "java-object": (ObjectMessage, DeliveryMode.PERSISTENT, 0, False, None, "_b"),
    "java-message": (Message, DeliveryMode.PERSISTENT, 5, False, None, "_c"),
}
# What probe.c prints of the bodies. The C API has no Map, Stream or Object messages: the
# library drops them on arrival ("The JMS message type is not supported", 1804) with either
# broker, so the C client reads only PREFIX_a and PREFIX_c; a plain Message is MQ_MESSAGE (3).
C_BODY = {
    "java-text": ("text", TEXT),
    "java-bytes": ("bytes", BYTES_BODY.hex()),
    "java-message": ("type", "3"),
}
# Messages per queue suffix.
COUNTS = {"_a": 2, "_b": 3, "_c": 1}


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def ok_checks(r: ProbeResult) -> None:
    bad = {k: v for k, v in r.checks.items() if v != "ok"}
    assert r.checks and not bad and r.returncode == 0, f"{bad}\n{r.explain()}"


def infos(r: ProbeResult, name: str) -> list[str]:
    return [line[len(name) + 6 :] for line in r.lines if line.startswith(f"info {name} ")]


def sent_info(r: ProbeResult) -> dict[str, tuple[str, int, int]]:
    """ "info sent CORR ID TS EXP DELIVERYTIME" -> {corr: (id, ts, exp)}."""
    out = {}
    for line in infos(r, "sent"):
        corr, mid, ts, exp, _ = line.split(" ")
        out[corr] = (mid, int(ts), int(exp))
    return out


def got_info(r: ProbeResult) -> dict[str, dict[str, str]]:
    """ "info got CORR k=v ..." -> {corr: {k: v}}."""
    out = {}
    for line in infos(r, "got"):
        corr, *pairs = line.split(" ")
        out[corr] = dict(p.split("=", 1) for p in pairs)
    return out


def test_java_sends_c_and_python_receive(
    interop_broker: Any, java_programs: Any, c_probe: CProbe
) -> None:
    """Java sends all six types; C (text and bytes bodies, headers, properties of all) and
    Python (everything) read what Java set."""
    to_c, to_py = unique("j2c"), unique("j2py")
    r = java_programs.run("Types", interop_broker, "send", to_c, to_py)
    ok_checks(r)
    # Two sends, the second's values win; the checks below use each run's own.
    sent_lines = infos(r, "sent")
    assert len(sent_lines) == 12, r.explain()
    sent_c = sent_info(ProbeResult(0, "\n".join("info sent " + s for s in sent_lines[:6]), ""))
    sent_py = sent_info(ProbeResult(0, "\n".join("info sent " + s for s in sent_lines[6:]), ""))

    seen = {}
    for suffix in ("_a", "_c"):
        c = c_probe.run(interop_broker, "recv-props", to_c + suffix, str(COUNTS[suffix]))
        assert c.checks == {"recv_props": "ok"}, c.explain()
        for m in parse_recv_props(c):
            seen[m["header.MQCorrelationID"][1]] = (suffix, m)
    assert set(seen) == set(C_BODY), seen
    for corr, (suffix, m) in seen.items():
        _, mode, prio, expires, reply, want_suffix = JAVA_SENT[corr]
        mid, ts, exp = sent_c[corr]
        assert suffix == want_suffix, corr
        assert m["body"] == C_BODY[corr], (corr, m["body"])
        for k, v in TYPED_PROPS.items():
            assert m.get(k) == v, (corr, k, m.get(k))
        assert m["header.MQType"] == ("string", "jtype"), corr
        assert m["header.MQMessageID"] == ("string", mid), corr
        assert m["header.MQTimestamp"] == ("int64", str(ts)), corr
        assert m["header.MQPersistent"] == ("bool", "1" if mode == 2 else "0"), corr
        assert m["header.MQPriority"] == ("int8", str(prio)), corr
        assert m["header.MQExpiration"] == ("int64", str(exp)), corr
        # The Java client, too, reads the clock apart for the expiration and the timestamp.
        assert (abs(exp - ts - 120_000) <= 50) if expires else exp == 0, corr
        assert m["header.MQRedelivered"] == ("bool", "0"), corr
        want_reply = None if reply is None else (reply[0], to_c + reply[1])
        assert m.get("replyto") == want_reply, corr

    async def receive() -> dict[str, Message]:
        got: dict[str, Message] = {}
        conn = await connect(
            interop_broker.host, interop_broker.portmapper_port, request_timeout=20
        )
        try:
            sess = await conn.create_session()
            await conn.start()
            for suffix, n in COUNTS.items():
                cons = await sess.create_consumer(Queue(to_py + suffix))
                for _ in range(n):
                    m = await cons.receive(15)
                    assert m is not None, suffix
                    got[m.correlation_id or ""] = m
                    # Bodies decode while the message is at hand.
                    assert m.body is not None or type(m) in (ObjectMessage, Message)
                await cons.close()
        finally:
            await conn.close()
        return got

    got = asyncio.run(receive())
    assert set(got) == set(JAVA_SENT)
    for corr, m in got.items():
        cls, mode, prio, expires, reply, suffix = JAVA_SENT[corr]
        mid, ts, exp = sent_py[corr]
        assert type(m) is cls, (corr, type(m))
        for k, v in C_PROPS.items():
            assert m.properties[k] == v and type(m.properties[k]) is type(v), (corr, k)
        assert m.jms_type == "jtype" and m.message_id == mid and m.timestamp == ts, corr
        assert m.delivery_mode == mode and m.priority == prio and m.expiration == exp, corr
        assert not m.redelivered and m.delivery_count == 1, corr
        assert m.destination == Queue(to_py + suffix), corr
        want_reply = {
            None: None,
            ("queue", "_reply"): Queue(to_py + "_reply"),
            ("topic", "_rtopic"): Topic(to_py + "_rtopic"),
        }[reply]
        assert m.reply_to == want_reply, corr
    assert got["java-text"].text == TEXT  # type: ignore[attr-defined]
    assert got["java-bytes"].data == BYTES_BODY  # type: ignore[attr-defined]
    map_body = got["java-map"].map  # type: ignore[attr-defined]
    assert map_body == FIELDS
    assert {k: type(v) for k, v in map_body.items()} == {k: type(v) for k, v in FIELDS.items()}
    stream = got["java-stream"].values  # type: ignore[attr-defined]
    assert stream == list(FIELDS.values())
    assert [type(v) for v in stream] == [type(v) for v in FIELDS.values()]
    assert got["java-object"].get_object() == OBJECT  # type: ignore[attr-defined]


def test_c_and_python_send_java_receives(
    interop_broker: Any, java_programs: Any, c_probe: CProbe
) -> None:
    """C's text and bytes messages and Python's six types, as Java reads them."""
    from_c, from_py = unique("c2j"), unique("py2j")
    c = c_probe.run(interop_broker, "send-props", from_c)
    assert c.checks == {"send_props": "ok"}, c.explain()

    reply = Queue(from_py + "_reply")
    sent: dict[str, Message] = {}

    async def send() -> None:
        conn = await connect(
            interop_broker.host, interop_broker.portmapper_port, request_timeout=20
        )
        try:
            sess = await conn.create_session()
            prod = await sess.create_producer(Queue(from_py))

            def hdr(corr: str) -> dict[str, Any]:
                return {"properties": C_PROPS, "correlation_id": corr, "jms_type": "ptype"}

            msgs: list[tuple[Message, dict[str, Any]]] = [
                (
                    TextMessage(TEXT, reply_to=reply, **hdr("py-text")),
                    {"persistent": True, "priority": 8, "ttl_ms": 120_000},
                ),
                (
                    BytesMessage(BYTES_BODY, reply_to=Topic(from_py + "_t"), **hdr("py-bytes")),
                    {"persistent": False, "priority": 2},
                ),
                (MapMessage(FIELDS, **hdr("py-map")), {"priority": 6}),
                (StreamMessage(list(FIELDS.values()), **hdr("py-stream")), {"priority": 5}),
                (ObjectMessage.from_value(OBJECT, **hdr("py-object")), {"priority": 4}),
                (Message(**hdr("py-message")), {"priority": 3}),
            ]
            for m, kw in msgs:
                await prod.send(m, **kw)
                sent[m.correlation_id or ""] = m
        finally:
            await conn.close()

    asyncio.run(send())

    j = java_programs.run("Types", interop_broker, "recv", from_c, "2")
    ok_checks(j)
    got = got_info(j)
    assert set(got) == {"corr-text", "corr-bytes"}, j.explain()
    text, data = got["corr-text"], got["corr-bytes"]
    assert (text["class"], text["mode"], text["prio"], text["exp"]) == ("Text", "2", "4", "0")
    assert (data["class"], data["mode"], data["prio"]) == ("Bytes", "1", "6")
    # libmqcrt reads the clock twice (see test_cclient.check_c_bytes).
    assert abs(int(data["exp"]) - int(data["ts"]) - 60_000) <= 50, data
    for g in got.values():
        assert (g["type"], g["replyto"], g["redelivered"], g["dest"], g["count"]) == (
            "ctype",
            "none",
            "false",
            from_c,
            "1",
        ), g

    j = java_programs.run("Types", interop_broker, "recv", from_py, "6")
    ok_checks(j)
    got = got_info(j)
    classes = {
        "py-text": "Text",
        "py-bytes": "Bytes",
        "py-map": "Map",
        "py-stream": "Stream",
        "py-object": "Object",
        "py-message": "Message",
    }
    assert set(got) == set(classes), j.explain()
    for corr, g in got.items():
        s = sent[corr]
        assert g["class"] == classes[corr], g
        assert g["id"] == s.message_id and g["ts"] == str(s.timestamp), g
        assert g["mode"] == str(s.delivery_mode) and g["prio"] == str(s.priority), g
        assert g["exp"] == str(s.expiration), g
        assert (g["type"], g["redelivered"], g["dest"], g["count"]) == (
            "ptype",
            "false",
            from_py,
            "1",
        ), g
    assert abs(int(got["py-text"]["exp"]) - sent["py-text"].timestamp - 120_000) <= 50
    assert got["py-text"]["replyto"] == f"queue:{from_py}_reply"
    assert got["py-bytes"]["replyto"] == f"topic:{from_py}_t"
    assert got["py-map"]["replyto"] == "none"
