"""The stock OpenMQ 6.9 C client (libmqcrt) against our broker, a real broker process.

The probe (tests/interop/c/probe.c) connects through the port mapper as any C
application does (all but the checks run, below), runs its checks and prints one line per check; these tests assert on
those lines, and exchange messages with our Python client in both directions.

The checks run goes through a recording relay (tests/interop/relay.py: the probe connects
to its port, skipping the port mapper), and the last test holds what the C client wrote
and the broker answered to the C client's wire quirks (it differs from the Java client's).
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from broker.protocol.packet import (
    HEADER_SIZE,
    VH_DELIVERY_COUNT,
    VH_DELIVERY_TIME,
    VH_PRODUCERID,
    VH_TRANSACTIONID,
)
from broker.protocol.types import FLAG_A, PacketType, reply_type
from openmq_client import (
    BytesMessage,
    DeliveryMode,
    JByte,
    JFloat,
    JInt,
    JLong,
    JShort,
    Message,
    Queue,
    TextMessage,
    connect,
)

from .conftest import CProbe, ProbeResult
from .relay import Recorded, Relay

pytestmark = pytest.mark.timeout(300)

# What probe.c's `checks` mode reports, every one of which must say ok.
CHECKS = [
    "connect_close",
    "queue_text_nonpersistent",
    "queue_text_default_persistent",
    "queue_bytes_persistent",
    "receive_timeout_empty_queue",
    "topic_publish_subscribe",
    "shared_subscription",
    "transacted_session_created",
    "transaction_commit_delivers",
    "transaction_rollback_discards",
    "transacted_receive_rollback_redelivers",
    "client_ack_recover",
    "selector",
    "selector_invalid_refused",
    "large_bytes_1mb",
    "reply_to_temporary_queue",
    "async_consumer",
    "dups_ok_no_properties",
    "expired_not_delivered",
    "delivery_delay",
    "durable_subscriber",
    "shared_durable_subscription",
    "close_connection",
]

# The typed properties the Python and Java senders set, as probe.c's recv-props prints them.
TYPED_PROPS = {
    "prop.pBool": ("bool", "1"),
    "prop.pByte": ("int8", "-5"),
    "prop.pShort": ("int16", "-1234"),
    "prop.pInt": ("int32", "123456789"),
    "prop.pLong": ("int64", "1234567890123"),
    "prop.pFloat": ("float32", "1.5"),
    "prop.pDouble": ("float64", "-2.25"),
    "prop.pString": ("string", "café"),
}

# mqerrors.h: MQ_BROKER_INVALID_LOGIN, what the library reports for the broker's 413
# INVALID_LOGIN (what OpenMQ's broker answers a failed login; was 403, MQ_BROKER_FORBIDDEN).
MQ_BROKER_INVALID_LOGIN = 2309

# The values probe.c's send-props mode sets (and the Python side sends to recv-props).
TEXT = "interop café €"
BYTES_BODY = bytes((i * 7 + 3) & 0xFF for i in range(300))
C_PROPS: dict[str, object] = {
    "pBool": True,
    "pByte": JByte(-5),
    "pShort": JShort(-1234),
    "pInt": JInt(123456789),
    "pLong": JLong(1234567890123),
    "pFloat": JFloat(1.5),
    "pDouble": -2.25,
    "pString": "café",
}


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("auth", ["basic", "digest"])
def test_c_client_auth_types(own_broker: Any, c_probe: CProbe, auth: str) -> None:
    b = own_broker(f"imq.authentication.type={auth}")
    # The good login, then the bad ones several times: the library used to lose the
    # refusal to a race with the socket's EOF now and then (see
    # broker.server.connection.REFUSED_LOGIN_LINGER). The attempts run side by side: each
    # bad one waits out the broker's linger before the refusal ends it.
    attempts = [("guest", "guest")] + [("guest", "wrong"), ("nobody", "guest")] * 2
    with ThreadPoolExecutor(len(attempts)) as pool:
        runs = pool.map(lambda up: c_probe.run(b, "connect", user=up[0], password=up[1]), attempts)
        good, *bads = list(runs)
    assert good.returncode == 0, good.explain()
    assert "status 0" in good.lines and good.checks == {"connect_close": "ok"}, good.explain()
    for bad in bads:
        assert bad.returncode != 0, bad.explain()
        assert f"status {MQ_BROKER_INVALID_LOGIN}" in bad.lines, bad.explain()
    # The broker saw a C client log in and the failures as failures.
    log = b.log_text()
    assert "guest" in log and "nobody" in log, log[-3000:]


def test_c_sends_python_receives(broker: Any, c_probe: CProbe) -> None:
    """Every property type and header the C client sets arrives intact in our client.

    Four queue names of consecutive lengths put the C client's variable header on
    each of its four paddings (0-3 bytes: it pads to a multiple of 4, not 1-4).
    """
    base = unique("c2py")
    queues = [base + "x" * i for i in range(4)]
    for q in queues:
        r = c_probe.run(broker, "send-props", q)
        assert r.checks == {"send_props": "ok"}, r.explain()

    async def receive_all() -> None:
        conn = await connect(broker.host, broker.portmapper_port, request_timeout=20)
        try:
            sess = await conn.create_session()
            await conn.start()
            for q in queues:
                cons = await sess.create_consumer(Queue(q))
                got = [await cons.receive(10) for _ in range(2)]
                assert all(m is not None for m in got), q
                by_corr = {m.correlation_id: m for m in got if m is not None}
                assert set(by_corr) == {"corr-text", "corr-bytes"}
                check_c_text(by_corr["corr-text"], q)
                check_c_bytes(by_corr["corr-bytes"], q)
                await cons.close()
        finally:
            await conn.close()

    asyncio.run(receive_all())


def check_c_props(m: Message) -> None:
    props = m.properties
    for k, v in C_PROPS.items():
        assert props[k] == v, k
        assert type(props[k]) is type(v), (k, type(props[k]))
    assert m.jms_type == "ctype"
    assert not m.redelivered


def check_c_text(m: Message, q: str) -> None:
    assert isinstance(m, TextMessage)
    assert m.text == TEXT
    check_c_props(m)
    # MQSendMessage: the library's defaults, persistent and priority 4, no expiry.
    assert m.delivery_mode == DeliveryMode.PERSISTENT
    assert m.priority == 4
    assert m.expiration == 0
    assert m.destination == Queue(q)


def check_c_bytes(m: Message, q: str) -> None:
    assert isinstance(m, BytesMessage)
    assert m.data == BYTES_BODY
    check_c_props(m)
    assert m.delivery_mode == DeliveryMode.NON_PERSISTENT
    assert m.priority == 6
    # libmqcrt reads the clock once for the expiration and again for the timestamp,
    # so the two may be a few milliseconds apart (CI saw expiration = ts + 59,999).
    assert m.timestamp > 0 and abs(m.expiration - (m.timestamp + 60_000)) <= 50
    assert m.destination == Queue(q)


def parse_recv_props(r: ProbeResult) -> list[dict[str, Any]]:
    """probe recv-props output -> one dict per message (body, header.*, prop.*, replyto)."""
    messages: list[dict[str, Any]] = []
    for line in r.lines:
        if line.startswith("message "):
            messages.append({})
        elif line.startswith("body "):
            kind, _, value = line[5:].partition(" ")
            messages[-1]["body"] = (kind, value)
        elif line.startswith(("header ", "prop ")):
            section, key, typ, *rest = line.split(" ", 3)
            messages[-1][f"{section}.{key}"] = (typ, rest[0] if rest else "")
        elif line.startswith("replyto "):
            _, kind, dest = line.split(" ", 2)
            messages[-1]["replyto"] = (kind, dest)
    return messages


def test_python_sends_c_receives(broker: Any, c_probe: CProbe) -> None:
    """Every property type and header our client sets is what the C client reads."""
    q = unique("py2c")
    reply = unique("py2c_reply")
    sent: dict[str, Message] = {}

    async def send() -> None:
        conn = await connect(broker.host, broker.portmapper_port, request_timeout=20)
        try:
            sess = await conn.create_session()
            prod = await sess.create_producer(Queue(q))
            t = TextMessage(
                TEXT,
                properties=C_PROPS,
                correlation_id="py-text",
                jms_type="ptype",
                reply_to=Queue(reply),
            )
            await prod.send(t, persistent=True, priority=8, ttl_ms=120_000)
            b = BytesMessage(
                BYTES_BODY, properties=C_PROPS, correlation_id="py-bytes", jms_type="ptype"
            )
            await prod.send(b, persistent=False, priority=2)
            sent["py-text"], sent["py-bytes"] = t, b
        finally:
            await conn.close()

    asyncio.run(send())
    r = c_probe.run(broker, "recv-props", q)
    assert r.checks == {"recv_props": "ok"}, r.explain()
    got = {m["header.MQCorrelationID"][1]: m for m in parse_recv_props(r)}
    assert set(got) == {"py-text", "py-bytes"}, r.explain()

    for corr, m in got.items():
        s = sent[corr]
        for k, v in TYPED_PROPS.items():
            assert m.get(k) == v, (corr, k, m.get(k))
        assert m["header.MQType"] == ("string", "ptype")
        assert m["header.MQMessageID"] == ("string", s.message_id)
        assert m["header.MQTimestamp"] == ("int64", str(s.timestamp))
        assert m["header.MQRedelivered"] == ("bool", "0")

    text, data = got["py-text"], got["py-bytes"]
    assert text["body"] == ("text", TEXT)
    assert text["header.MQPersistent"] == ("bool", "1")
    assert text["header.MQPriority"] == ("int8", "8")
    assert text["header.MQExpiration"] == ("int64", str(sent["py-text"].timestamp + 120_000))
    assert text["replyto"] == ("queue", reply)
    assert data["body"] == ("bytes", BYTES_BODY.hex())
    assert data["header.MQPersistent"] == ("bool", "0")
    assert data["header.MQPriority"] == ("int8", "2")
    assert data["header.MQExpiration"] == ("int64", "0")
    assert "replyto" not in data


@dataclass
class ChecksRun:
    """probe.c's `checks` run and what its connections carried (tests/interop/relay.py)."""

    result: ProbeResult
    connections: list[Recorded]


def _checks_through_relay(broker: Any, c_probe: CProbe) -> ChecksRun:
    relay = Relay(broker.host, broker.jms_port)
    try:
        r = c_probe.run(
            broker, "checks", uuid.uuid4().hex[:10], env={"PROBE_SERVICE_PORT": str(relay.port)}
        )
    finally:
        relay.close()
    return ChecksRun(r, relay.connections)


@pytest.fixture(scope="module", autouse=True)
def checks_started(broker: Any, c_probe: CProbe) -> Iterator[Future[ChecksRun]]:
    """One run of every self-contained check against the shared broker, through a
    recording relay, started when the module's first test starts: most of the run is the
    checks' waits (a delivery delay, receives that must time out), which the other tests
    of the module use meanwhile.  The wire test below reads what the relay recorded."""
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(_checks_through_relay, broker, c_probe)


@pytest.fixture(scope="module")
def checks_run(checks_started: Future[ChecksRun]) -> ProbeResult:
    return checks_started.result(timeout=300).result


@pytest.mark.parametrize("check", CHECKS)
def test_c_client_check(checks_run: ProbeResult, check: str) -> None:
    got = checks_run.checks
    assert check in got, f"the probe did not report {check}\n{checks_run.explain()}"
    assert got[check] == "ok", f"{check}: {got[check]}\n{checks_run.explain()}"


def test_c_client_reports_only_known_checks(checks_run: ProbeResult) -> None:
    # A check the list above does not know would otherwise go unasserted.
    assert set(checks_run.checks) == set(CHECKS), checks_run.explain()
    assert checks_run.returncode == 0, checks_run.explain()


FIRST_CORRELATION_ID = -(2**63) + 1  # 0x8000000000000001 as the signed field
# Statuses other than 200 the checks bring about: a destination created again (409, which
# clients take as success) and the invalid-selector check (400).
ALLOWED = {PacketType.CREATE_DESTINATION: {200, 409}, PacketType.ADD_CONSUMER: {200, 400}}


def test_c_client_wire_through_relay(checks_started: Future[ChecksRun]) -> None:
    """What the C client wrote in the checks run, and the broker's answers, against the
    C client's wire quirks (third_party/openmq/vectors/cclient/README.md): a variable
    header on every packet (property offset 76 when it has no fields, padding 0-3 bytes),
    correlation IDs from 0x8000000000000001, HELLO with JMQSize, START_TRANSACTION as
    soon as a transacted session exists."""
    run = checks_started.result(timeout=300)
    r = run.result
    assert r.checks == dict.fromkeys(CHECKS, "ok"), r.explain()
    # connect_close, the main connection and the durable subscriber's (with a client ID).
    assert len(run.connections) == 3, r.explain()

    saw_transaction = False
    paddings: set[int] = set()
    for rec in run.connections:
        sent, answers = rec.client_packets(), rec.broker_packets()
        hello = sent[0]
        assert hello.type == PacketType.HELLO
        assert hello.prop_offset == 76  # the empty variable header: terminator + padding
        assert "JMQSize" in hello.properties and "JMQReconnectable" not in hello.properties
        for p in sent:
            assert p.prop_offset >= 76 and p.prop_offset % 4 == 0, p
            pad = padding(p.raw, p.prop_offset)
            assert 0 <= pad <= 3, (PacketType(p.type).name, pad)
            paddings.add(pad)
        # Correlation IDs count up from 0x8000000000000001 (START carries 0, without A).
        requests = [p for p in sent if p.flags & FLAG_A]
        assert requests[0].consumer_id == FIRST_CORRELATION_ID
        ids = [p.consumer_id for p in requests]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        # The broker answers every request with its reply, echoing its correlation ID.
        replies = {(p.type, p.consumer_id): p for p in answers}
        for req in requests:
            reply = replies.get((reply_type(req.type), req.consumer_id))
            assert reply is not None, f"no reply to {PacketType(req.type).name} {req.consumer_id}"
            status = reply.properties["JMQStatus"]
            assert status in ALLOWED.get(req.type, {200}), (PacketType(req.type).name, status)
            if req.type == PacketType.START_TRANSACTION:
                saw_transaction = True
                assert isinstance(reply.properties["JMQTransactionID"], int)
    assert saw_transaction
    # The broker read variable headers with every padding the C client writes, 0 included
    # (the Java client's is 1-4).
    assert paddings == {0, 1, 2, 3}


def padding(raw: bytes, end: int) -> int:
    """Bytes between the variable header's terminator and the property table."""
    pos = HEADER_SIZE
    while True:
        (tag,) = struct.unpack_from(">h", raw, pos)
        if tag == 0:
            return end - (pos + 2)
        (length,) = struct.unpack_from(">H", raw, pos + 2)
        if tag in (VH_TRANSACTIONID, VH_PRODUCERID, VH_DELIVERY_TIME):
            length = 8
        elif tag == VH_DELIVERY_COUNT:
            length = 4
        pos += 4 + length
