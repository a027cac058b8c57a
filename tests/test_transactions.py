"""Transactions against real broker processes, over TCP.

Why one module (about 830 lines): local and XA transactions share the raw-packet helpers
and the broker fixtures.

Local transactions (sends and acknowledgements held until COMMIT), XA (START/END/
PREPARE/COMMIT/ROLLBACK/RECOVER/VERIFY_TRANSACTION with the seed's statuses), in-doubt
transactions outliving their connection, JMQLifetime timeouts, JMQAutoRollback, and the
``imqtxn`` administration command.  Raw packets where the exact status matters; the
Python client (``openmq_client.xa``) for the application-shaped flows.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import sqlite3
import struct
import subprocess
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from broker.protocol.javaser import decode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import Packet, build_packet
from broker.protocol.types import (
    FLAG_A,
    FLAG_I,
    FLAG_Q,
    FLAG_R,
    MESSAGE_TYPES,
    PacketType,
    XAFlag,
    reply_type,
)
from broker.protocol.xid import XID_SIZE, Xid, XidError
from openmq_client import Queue, TextMessage, connect
from openmq_client.xa import (
    TMJOIN,
    TMRESUME,
    TMSUSPEND,
    XA_OK,
    XAER_NOTA,
    XAER_PROTO,
    XAException,
    create_xa_session,
)
from tests.manage_fork import run_manage

from .wire import login

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parent.parent
_seq = itertools.count(1)

TMNOFLAGS = int(XAFlag.TMNOFLAGS)
TMSUCCESS_I = int(XAFlag.TMSUCCESS)
TMFAIL_I = int(XAFlag.TMFAIL)
TMSUSPEND_I = int(XAFlag.TMSUSPEND)
TMRESUME_I = int(XAFlag.TMRESUME)
TMJOIN_I = int(XAFlag.TMJOIN)
TMONEPHASE_I = int(XAFlag.TMONEPHASE)


def qname(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def new_xid() -> Xid:
    return Xid(0x1234, b"gtrid-" + uuid.uuid4().bytes, b"bq-" + uuid.uuid4().bytes[:6])


def run(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def wait_until(cond: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        time.sleep(0.05)


class Raw:
    """One connection speaking raw packets, keeping deliveries apart from replies."""

    def __init__(self, b: Any, user: str = "guest", password: str = "guest", port: int = 0):
        self.peer = login(b.host, port or b.jms_port, user, password)
        self.cids = itertools.count(1000)
        self.deliveries: list[Packet] = []

    # -- plumbing --------------------------------------------------------------------

    def _read(self) -> Packet:
        pkt = self.peer.recv()
        if pkt.type in MESSAGE_TYPES:
            self.deliveries.append(pkt)
        return pkt

    def call(
        self,
        ptype: int,
        status: int | None = 200,
        *,
        body: bytes = b"",
        flags: int = FLAG_A,
        fields: dict | None = None,
        raw: bytes | None = None,
        **props: object,
    ) -> Packet:
        """Send a request and return its reply (asserting its JMQStatus if given)."""
        cid = next(self.cids)
        if raw is None:
            raw = build_packet(
                ptype,
                props=props or None,
                body=body,
                flags=flags,
                consumer_id=cid,
                fields=fields,
                sequence=next(_seq),
            )
        else:
            cid = struct.unpack_from(">q", raw, 64)[0]
        self.peer.send(raw)
        while True:
            pkt = self._read()
            if pkt.type == reply_type(ptype) and pkt.consumer_id == cid:
                break
        if status is not None:
            assert pkt.properties["JMQStatus"] == status, (
                PacketType(ptype).name,
                pkt.properties,
            )
        return pkt

    def wait_deliveries(self, n: int, timeout: float = 10.0) -> list[Packet]:
        self.peer.sock.settimeout(timeout)
        try:
            while len(self.deliveries) < n:
                self._read()
        finally:
            self.peer.sock.settimeout(10)
        got, self.deliveries = self.deliveries[:n], self.deliveries[n:]
        return got

    def nothing_delivered(self, wait: float = 0.5) -> bool:
        self.peer.sock.settimeout(wait)
        try:
            while True:
                self._read()
        except TimeoutError:
            pass
        finally:
            self.peer.sock.settimeout(10)
        return not self.deliveries

    def close(self) -> None:
        self.peer.close()

    # -- requests ----------------------------------------------------------------------

    def session(self, ack_mode: int = 0) -> int:
        reply = self.call(PacketType.CREATE_SESSION, JMQAckMode=JInt(ack_mode))
        return int(reply.properties["JMQSessionID"])

    def producer(self, sid: int, queue: str) -> int:
        reply = self.call(
            PacketType.ADD_PRODUCER,
            JMQDestination=queue,
            JMQDestType=JInt(1),
            JMQSessionID=JLong(sid),
        )
        return int(reply.properties["JMQProducerID"])

    def consumer(self, sid: int, queue: str) -> int:
        reply = self.call(
            PacketType.ADD_CONSUMER,
            JMQDestination=queue,
            JMQDestType=JInt(1),
            JMQSessionID=JLong(sid),
            JMQNoLocal=False,
            JMQReconnect=False,
        )
        return int(reply.properties["JMQConsumerID"])

    def start(self) -> None:
        self.peer.send(build_packet(PacketType.START, sequence=next(_seq)))

    def send(self, queue: str, body: bytes, txn: int = 0, status: int = 200) -> Packet:
        fields: dict[int, object] = {1: queue}
        if txn:
            fields[8] = txn
        return self.call(
            PacketType.TEXT_MESSAGE, status, body=body, flags=FLAG_A | FLAG_Q, fields=fields
        )

    def ack(self, cons: int, msgs: list[Packet], txn: int = 0, status: int = 200) -> Packet:
        body = b"".join(struct.pack(">q", cons) + m.sysmsgid for m in msgs)
        return self.call(
            PacketType.ACKNOWLEDGE, status, body=body, fields={8: txn} if txn else None
        )

    def begin(self, sid: int, status: int = 200, **props: object) -> int:
        reply = self.call(PacketType.START_TRANSACTION, status, JMQSessionID=JLong(sid), **props)
        return int(reply.properties.get("JMQTransactionID", 0))

    def xa(
        self, ptype: int, xid: Xid | None, status: int = 200, flags: int = FLAG_A, **props: object
    ) -> Packet:
        return self.call(
            ptype, status, body=xid.encode() if xid is not None else b"", flags=flags, **props
        )

    def xa_begin(self, sid: int, xid: Xid, **props: object) -> int:
        reply = self.xa(
            PacketType.START_TRANSACTION,
            xid,
            JMQXAFlags=JInt(TMNOFLAGS),
            JMQSessionID=JLong(sid),
            **props,
        )
        return int(reply.properties["JMQTransactionID"])

    def verify(self, status: int = 200, xid: Xid | None = None, **props: object) -> dict:
        reply = self.xa(PacketType.VERIFY_TRANSACTION, xid, status, **props)
        return decode_hashtable(reply.body) if reply.body else {}


# -- the Xid codec ---------------------------------------------------------------------


def test_xid_marshalling_and_string_form():
    x = Xid(0x1234, b"\x01\x02gtrid", b"\xab\xcd")
    raw = x.encode()
    assert len(raw) == XID_SIZE == 136
    assert raw[:8] == struct.pack(">ihh", 0x1234, 7, 2)
    assert raw[8:15] == b"\x01\x02gtrid" and raw[15:72] == bytes(57)
    assert raw[72:74] == b"\xab\xcd" and raw[74:] == bytes(62)
    assert Xid.decode(raw) == x
    # Padding never matters; bqual hex then gtrid hex, upper case.
    assert Xid.decode(raw[:20] + b"\xff" * 52 + raw[72:]) == x
    assert str(x) == "ABCD" + b"\x01\x02gtrid".hex().upper()
    null = Xid.null()
    assert null.is_null and str(null) == "NULL_XID" and Xid.decode(null.encode()).is_null
    assert Xid.decode_list(x.encode() + null.encode(), 2) == [x, null]
    with pytest.raises(XidError):
        Xid.decode(raw[:100])
    with pytest.raises(XidError):
        Xid.decode(struct.pack(">ihh", 1, 65, 0) + bytes(128))
    with pytest.raises(XidError):
        Xid(1, bytes(65))
    with pytest.raises(XidError):
        Xid.decode_list(raw + raw, 3)


# -- local transactions ------------------------------------------------------------------


def test_local_commit_and_rollback_of_sends_and_acknowledgements(broker):
    q = qname("txl")
    c = Raw(broker)
    sid = c.session()
    c.producer(sid, q)
    cons = c.consumer(sid, q)
    c.start()
    t1 = c.begin(sid)
    c.send(q, b"m1", t1)
    assert c.nothing_delivered(0.4)  # held until COMMIT
    reply = c.call(PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(t1))
    assert reply.properties["JMQTransactionID"] == t1
    [d] = c.wait_deliveries(1)
    assert d.body == b"m1" and not d.flags & FLAG_R

    # Consumed in a transaction, rolled back with JMQRedeliver and JMQSetRedelivered=false:
    # back at once, without the R flag.
    t2 = c.begin(sid)
    c.ack(cons, [d], t2)
    c.call(
        PacketType.ROLLBACK_TRANSACTION,
        JMQTransactionID=JLong(t2),
        JMQRedeliver=True,
        JMQSetRedelivered=False,
    )
    [d2] = c.wait_deliveries(1)
    assert d2.body == b"m1" and not d2.flags & FLAG_R
    # A plain rollback marks it redelivered.
    t3 = c.begin(sid)
    c.ack(cons, [d2], t3)
    c.call(PacketType.ROLLBACK_TRANSACTION, JMQTransactionID=JLong(t3))
    [d3] = c.wait_deliveries(1)
    assert d3.body == b"m1" and d3.flags & FLAG_R
    # Committed acknowledgement: consumed for good.
    t4 = c.begin(sid)
    c.ack(cons, [d3], t4)
    c.call(PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(t4))
    # A rolled-back send never appears; the next transaction's JMQStartNextTransaction.
    t5 = c.begin(sid)
    c.send(q, b"never", t5)
    reply = c.call(
        PacketType.ROLLBACK_TRANSACTION, JMQTransactionID=JLong(t5), JMQStartNextTransaction=True
    )
    t6 = int(reply.properties["JMQNextTransactionID"])
    c.send(q, b"m2", t6)
    reply = c.call(
        PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(t6), JMQStartNextTransaction=True
    )
    assert reply.properties["JMQNextTransactionID"] > 0
    [d4] = c.wait_deliveries(1)
    assert d4.body == b"m2"
    c.ack(cons, [d4])
    assert c.nothing_delivered(0.4)
    c.close()


def test_local_transaction_statuses(broker):
    q = qname("txs")
    c = Raw(broker)
    sid = c.session()
    c.producer(sid, q)
    t = c.begin(sid)
    assert t > 0
    c.call(PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(t))
    # Finished: a send or an acknowledgement naming it is GONE, a COMMIT NOT_FOUND.
    c.send(q, b"late", t, status=410)
    c.call(PacketType.ACKNOWLEDGE, 410, body=bytes(40), fields={8: t})
    c.call(PacketType.COMMIT_TRANSACTION, 404, JMQTransactionID=JLong(t))
    c.call(PacketType.ROLLBACK_TRANSACTION, 404, JMQTransactionID=JLong(t))
    # ... unless the request is a resend (I flag): then it is done, 200.
    c.call(PacketType.COMMIT_TRANSACTION, 200, flags=FLAG_A | FLAG_I, JMQTransactionID=JLong(t))
    c.call(PacketType.COMMIT_TRANSACTION, 400)  # no id at all
    c.call(PacketType.START_TRANSACTION, 404, JMQSessionID=JLong(424242))
    c.begin(sid, 501, JMQAutoRollback=JInt(3))  # NEVER is not implemented
    c.begin(sid, 400, JMQAutoRollback=JInt(9))

    # A local transaction may be prepared (from STARTED); then it takes no more work.
    t2 = c.begin(sid)
    c.send(q, b"p", t2)
    reply = c.call(PacketType.PREPARE_TRANSACTION, JMQTransactionID=JLong(t2))
    assert reply.properties["JMQTransactionID"] == t2
    c.send(q, b"more", t2, status=412)
    c.call(PacketType.PREPARE_TRANSACTION, 412, JMQTransactionID=JLong(t2))
    c.call(PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(t2))

    # A resent START (same SysMessageID, I flag) does not start a second transaction.
    ts = int(time.time() * 1000)
    seq = next(_seq)

    def start_pkt(flags: int) -> bytes:
        return build_packet(
            PacketType.START_TRANSACTION,
            props={"JMQSessionID": JLong(sid)},
            flags=flags,
            consumer_id=next(c.cids),
            timestamp=ts,
            sequence=seq,
        )

    first = c.call(PacketType.START_TRANSACTION, raw=start_pkt(FLAG_A))
    again = c.call(PacketType.START_TRANSACTION, 304, raw=start_pkt(FLAG_A | FLAG_I))
    assert again.properties["JMQTransactionID"] == first.properties["JMQTransactionID"]

    # Another connection may not use or finish this connection's transaction.
    t3 = c.begin(sid)
    other = Raw(broker)
    other.call(PacketType.COMMIT_TRANSACTION, 403, JMQTransactionID=JLong(t3))
    other.call(PacketType.ROLLBACK_TRANSACTION, 403, JMQTransactionID=JLong(t3))
    osid = other.session()
    other.producer(osid, q)
    other.send(q, b"x", t3, status=403)
    c.call(PacketType.ROLLBACK_TRANSACTION, JMQTransactionID=JLong(t3))
    other.close()
    c.close()


# -- XA ----------------------------------------------------------------------------------


async def _open(b: Any, **kw: Any):
    kw.setdefault("request_timeout", 20)
    return await connect(b.host, b.portmapper_port, **kw)


@run
async def test_xa_two_phase_commit_with_sends_and_acknowledgements(broker):
    q, q2 = Queue(qname("xa2")), Queue(qname("xa2c"))
    conn = await _open(broker)
    sess, xa = await create_xa_session(conn)
    prod = await sess.create_producer(q)
    other = await _open(broker)
    osess = await other.create_session()
    cons = await osess.create_consumer(q)
    await (await osess.create_producer(q2)).send(TextMessage("to consume"), persistent=False)
    await other.start()
    await conn.start()

    xid = new_xid()
    tid = await xa.start(xid)
    assert tid > 0
    await prod.send(TextMessage("one"), persistent=False)
    assert await cons.receive(0.3) is None
    await xa.end(xid)
    assert await xa.prepare(xid) == XA_OK
    assert await cons.receive(0.3) is None  # prepared is not committed
    await xa.commit(xid)
    m = await cons.receive(10)
    assert m is not None and m.text == "one"  # type: ignore[attr-defined]

    # Consumed in an XA transaction: rollback gives it back, commit consumes it.
    xcons = await sess.create_consumer(q2)
    xid2 = new_xid()
    await xa.start(xid2)
    got = await xcons.receive(10)
    assert got is not None and got.text == "to consume"  # type: ignore[attr-defined]
    await xa.end(xid2)
    await xa.rollback(xid2)
    xid3 = new_xid()
    await xa.start(xid3)
    again = await xcons.receive(10)
    assert again is not None and again.redelivered  # type: ignore[attr-defined]
    await xa.end(xid3)
    await xa.prepare(xid3)
    await xa.commit(xid3)
    await conn.close()
    third = await _open(broker)
    tsess = await third.create_session()
    tcons = await tsess.create_consumer(q2)
    await third.start()
    assert await tcons.receive(0.5) is None
    await third.close()
    await other.close()


@run
async def test_xa_one_phase_suspend_resume_and_join(broker):
    q = Queue(qname("xa1"))
    conn = await _open(broker)
    sess, xa = await create_xa_session(conn)
    prod = await sess.create_producer(q)
    rsess = await conn.create_session()
    cons = await rsess.create_consumer(q)
    await conn.start()

    xid = new_xid()
    await xa.start(xid)
    await prod.send(TextMessage("a"), persistent=False)
    await xa.end(xid, TMSUSPEND)
    assert (await xa.verify(xid))["State"] == 4  # INCOMPLETE
    await xa.start(xid, TMRESUME)
    await prod.send(TextMessage("b"), persistent=False)
    await xa.end(xid)
    await xa.start(xid, TMJOIN)
    await prod.send(TextMessage("c"), persistent=False)
    await xa.end(xid)
    assert await cons.receive(0.3) is None
    await xa.commit(xid, one_phase=True)
    texts = [(await cons.receive(10)).text for _ in range(3)]  # type: ignore[union-attr]
    assert texts == ["a", "b", "c"]

    # One-phase straight from STARTED (no END), and a one-phase commit of a prepared
    # transaction is a protocol error.
    xid2 = new_xid()
    await xa.start(xid2)
    await prod.send(TextMessage("d"), persistent=False)
    await xa.commit(xid2, one_phase=True)
    m = await cons.receive(10)
    assert m is not None and m.text == "d"  # type: ignore[attr-defined]
    xid3 = new_xid()
    await xa.start(xid3)
    await xa.end(xid3)
    await xa.prepare(xid3)
    with pytest.raises(XAException) as err:
        await xa.commit(xid3, one_phase=True)
    assert err.value.status == 412 and err.value.error_code == XAER_PROTO
    await xa.rollback(xid3)
    with pytest.raises(XAException) as err:
        await xa.rollback(xid3)
    assert err.value.status == 404 and err.value.error_code == XAER_NOTA
    await conn.close()


def test_xa_state_errors(broker):
    q = qname("xae")
    c = Raw(broker)
    sid = c.session()
    c.producer(sid, q)
    xid = new_xid()
    tid = c.xa_begin(sid, xid)
    c.xa(PacketType.START_TRANSACTION, xid, 409, JMQXAFlags=JInt(TMNOFLAGS))  # Xid in use
    c.xa(PacketType.START_TRANSACTION, new_xid(), 404, JMQXAFlags=JInt(TMJOIN_I))
    c.xa(PacketType.START_TRANSACTION, new_xid(), 404, JMQXAFlags=JInt(TMRESUME_I))
    c.xa(PacketType.START_TRANSACTION, new_xid(), 400, JMQXAFlags=JInt(TMSUCCESS_I))
    c.call(PacketType.START_TRANSACTION, 400, body=b"short", JMQXAFlags=JInt(TMNOFLAGS))
    c.xa(PacketType.COMMIT_TRANSACTION, xid, 412, JMQXAFlags=JInt(TMNOFLAGS))  # not prepared
    c.xa(PacketType.PREPARE_TRANSACTION, xid, 412)  # not ended
    c.xa(PacketType.END_TRANSACTION, xid, JMQXAFlags=JInt(TMSUCCESS_I))
    c.xa(PacketType.END_TRANSACTION, xid, 304, flags=FLAG_A | FLAG_I, JMQXAFlags=JInt(TMSUCCESS_I))
    c.xa(PacketType.END_TRANSACTION, xid, 412, JMQXAFlags=JInt(TMSUCCESS_I))
    c.xa(PacketType.START_TRANSACTION, xid, 412, JMQXAFlags=JInt(TMRESUME_I))  # not suspended
    reply = c.xa(PacketType.PREPARE_TRANSACTION, xid)
    assert reply.properties["JMQTransactionID"] == tid
    c.xa(PacketType.PREPARE_TRANSACTION, xid, 412)  # prepared twice
    c.xa(PacketType.PREPARE_TRANSACTION, xid, 304, flags=FLAG_A | FLAG_I)  # a resend
    c.xa(PacketType.COMMIT_TRANSACTION, xid, 412, JMQXAFlags=JInt(TMONEPHASE_I))
    reply = c.xa(PacketType.COMMIT_TRANSACTION, xid, JMQXAFlags=JInt(TMNOFLAGS))
    assert reply.properties["JMQTransactionID"] == tid
    # Finished: unknown from now on.
    c.xa(PacketType.COMMIT_TRANSACTION, xid, 404, JMQXAFlags=JInt(TMNOFLAGS))
    c.xa(PacketType.ROLLBACK_TRANSACTION, xid, 404)
    c.xa(PacketType.END_TRANSACTION, xid, 404, JMQXAFlags=JInt(TMSUCCESS_I))
    c.xa(PacketType.PREPARE_TRANSACTION, xid, 404)
    c.send(q, b"late", tid, status=410)

    # END TMFAIL: only a rollback is possible; PREPARE says JMQPrepareStateFAILED.
    xf = new_xid()
    c.xa_begin(sid, xf)
    c.xa(PacketType.END_TRANSACTION, xf, JMQXAFlags=JInt(TMFAIL_I))
    reply = c.xa(PacketType.PREPARE_TRANSACTION, xf, 412)
    assert reply.properties["JMQPrepareStateFAILED"] is True
    c.xa(PacketType.COMMIT_TRANSACTION, xf, 412, JMQXAFlags=JInt(TMONEPHASE_I))
    c.xa(PacketType.ROLLBACK_TRANSACTION, xf)

    # Suspended: no work until resumed.  Requests may name it by id alone.
    xs = new_xid()
    ts = c.xa_begin(sid, xs)
    c.send(q, b"s1", ts)
    c.xa(PacketType.END_TRANSACTION, xs, JMQXAFlags=JInt(TMSUSPEND_I))
    c.send(q, b"s2", ts, status=412)
    c.xa(PacketType.START_TRANSACTION, xs, JMQXAFlags=JInt(TMRESUME_I))
    c.send(q, b"s3", ts)
    c.xa(PacketType.END_TRANSACTION, None, JMQXAFlags=JInt(TMSUCCESS_I), JMQTransactionID=JLong(ts))
    c.xa(PacketType.END_TRANSACTION, None, 400, JMQTransactionID=JLong(ts))  # no flags
    c.xa(PacketType.ROLLBACK_TRANSACTION, None, JMQTransactionID=JLong(ts))
    c.close()


def test_recover_lists_prepared_xids_that_survive_their_connection(broker):
    q, q2 = qname("xar"), qname("xarc")
    feeder = Raw(broker)
    fsid = feeder.session(1)
    feeder.producer(fsid, q2)
    feeder.send(q2, b"consumed-in-xa")

    a = Raw(broker)
    sid = a.session()
    a.producer(sid, q)
    acons = a.consumer(sid, q2)
    a.start()
    [c1] = a.wait_deliveries(1)
    x1, x2, x3, x4 = new_xid(), new_xid(), new_xid(), new_xid()
    t1 = a.xa_begin(sid, x1)
    a.send(q, b"p1", t1)
    a.xa(PacketType.END_TRANSACTION, x1, JMQXAFlags=JInt(TMSUCCESS_I))
    a.xa(PacketType.PREPARE_TRANSACTION, x1)
    t2 = a.xa_begin(sid, x2)
    a.send(q, b"p2", t2)
    a.ack(acons, [c1], t2)
    a.xa(PacketType.END_TRANSACTION, x2, JMQXAFlags=JInt(TMSUCCESS_I))
    a.xa(PacketType.PREPARE_TRANSACTION, x2)
    t3 = a.xa_begin(sid, x3)  # ended, not prepared; JMQSessionLess unset: kept
    a.xa(PacketType.END_TRANSACTION, x3, JMQXAFlags=JInt(TMSUCCESS_I))
    a.xa_begin(sid, x4, JMQSessionLess=False)  # rolled back with its connection
    a.close()  # the connection just goes, as a crashed application's would

    b = Raw(broker)
    wait_until(lambda: b.verify(None, x4) == {}, what="x4 rolled back")
    b.verify(404, x4)
    reply = b.call(PacketType.RECOVER_TRANSACTION, JMQXAFlags=JInt(int(XAFlag.TMSTARTRSCAN)))
    listed = Xid.decode_list(reply.body, int(reply.properties["JMQQuantity"]))
    assert x1 in listed and x2 in listed and x3 not in listed and x4 not in listed
    for flags in (TMNOFLAGS, int(XAFlag.TMENDRSCAN)):
        reply = b.call(PacketType.RECOVER_TRANSACTION, JMQXAFlags=JInt(flags))
        assert reply.properties["JMQQuantity"] == 0 and not reply.body
    reply = b.call(PacketType.RECOVER_TRANSACTION, JMQTransactionID=JLong(t1))
    assert reply.properties["JMQQuantity"] == 1 and reply.properties["JMQTransactionID"] == t1
    assert Xid.decode(reply.body) == x1
    b.call(PacketType.RECOVER_TRANSACTION, 404, JMQTransactionID=JLong(t3))
    assert b.verify(xid=x3)["State"] == 5  # COMPLETE, in doubt
    assert b.verify(xid=x1)["State"] == 6  # PREPARED

    # The message acknowledged in the prepared transaction is not redelivered meanwhile.
    bsid = b.session(1)
    bq = b.consumer(bsid, q)
    bq2 = b.consumer(bsid, q2)
    b.start()
    assert b.nothing_delivered(0.5)
    # A transaction manager's recovery: another connection finishes them by Xid.
    b.xa(PacketType.COMMIT_TRANSACTION, x1, JMQXAFlags=JInt(TMNOFLAGS))
    [p1] = b.wait_deliveries(1)
    assert p1.body == b"p1" and p1.consumer_id == bq
    b.xa(PacketType.ROLLBACK_TRANSACTION, x2)
    [back] = b.wait_deliveries(1)
    assert back.body == b"consumed-in-xa" and back.consumer_id == bq2 and back.flags & FLAG_R
    b.ack(bq, [p1])
    b.ack(bq2, [back])
    b.xa(PacketType.ROLLBACK_TRANSACTION, x3)
    assert b.nothing_delivered(0.4)  # p2 never appears
    b.verify(404, x1)
    b.close()
    feeder.close()


def test_verify_transaction_state_table(broker):
    c = Raw(broker)
    sid = c.session()
    before = int(time.time() * 1000)
    t = c.begin(sid, JMQLifetime=JLong(600000))
    table = c.verify(JMQTransactionID=JLong(t))
    assert table["State"] == 2 and type(table["State"]) is JInt  # STARTED (numbered from 1)
    assert table["JMQAutoRollback"] == 1 and type(table["JMQAutoRollback"]) is JInt
    assert table["JMQSessionLess"] is False
    assert table["JMQLifetime"] == 600000 and type(table["JMQLifetime"]) is JLong
    assert before - 5000 <= table["JMQCreateTime"] <= int(time.time() * 1000) + 5000
    assert "JMQXid" not in table
    c.call(PacketType.ROLLBACK_TRANSACTION, JMQTransactionID=JLong(t))
    c.verify(404, JMQTransactionID=JLong(t))

    xid = new_xid()
    tid = c.xa_begin(sid, xid)
    reply = c.xa(PacketType.VERIFY_TRANSACTION, xid)
    assert reply.properties["JMQTransactionID"] == tid
    table = decode_hashtable(reply.body)
    assert table["State"] == 2 and table["JMQXid"] == str(xid)
    assert table["JMQSessionLess"] is True and table["JMQAutoRollback"] == 2  # XA defaults
    assert table["JMQLifetime"] == 0
    c.xa(PacketType.END_TRANSACTION, xid, JMQXAFlags=JInt(TMSUSPEND_I))
    assert c.verify(xid=xid)["State"] == 4  # INCOMPLETE
    c.xa(PacketType.START_TRANSACTION, xid, JMQXAFlags=JInt(TMRESUME_I))
    c.xa(PacketType.END_TRANSACTION, xid, JMQXAFlags=JInt(TMFAIL_I))
    assert c.verify(xid=xid)["State"] == 3  # FAILED
    c.xa(PacketType.ROLLBACK_TRANSACTION, xid)
    c.verify(404, xid=xid)

    x2 = new_xid()
    t2 = c.xa_begin(sid, x2, JMQAutoRollback=JInt(1), JMQSessionLess=False)
    c.xa(PacketType.END_TRANSACTION, x2, JMQXAFlags=JInt(TMSUCCESS_I))
    table = c.verify(JMQTransactionID=JLong(t2))
    assert table["State"] == 5 and table["JMQAutoRollback"] == 1
    assert table["JMQSessionLess"] is False
    c.xa(PacketType.PREPARE_TRANSACTION, x2)
    assert c.verify(JMQTransactionID=JLong(t2))["State"] == 6
    c.xa(PacketType.COMMIT_TRANSACTION, x2, JMQXAFlags=JInt(TMNOFLAGS))
    c.verify(404, JMQTransactionID=JLong(t2))
    c.verify(404, xid=x2)
    c.verify(400)  # names nothing
    c.close()


def test_autorollback_never_is_not_implemented(broker):
    c = Raw(broker)
    sid = c.session()
    c.begin(sid, 501, JMQAutoRollback=JInt(3))
    c.xa(
        PacketType.START_TRANSACTION,
        new_xid(),
        501,
        JMQXAFlags=JInt(TMNOFLAGS),
        JMQSessionID=JLong(sid),
        JMQAutoRollback=JInt(3),
    )
    t = c.begin(sid, JMQAutoRollback=JInt(2))
    assert c.verify(JMQTransactionID=JLong(t))["JMQAutoRollback"] == 2
    c.close()


def test_lifetime_expiry_rolls_back_and_answers_timeout(broker):
    q = qname("txt")
    feeder = Raw(broker)
    fsid = feeder.session(1)
    feeder.producer(fsid, q)
    feeder.send(q, b"held")
    c = Raw(broker)
    sid = c.session()
    c.producer(sid, q)
    cons = c.consumer(sid, q)
    c.start()
    [m] = c.wait_deliveries(1)
    t = c.begin(sid, JMQLifetime=JLong(400))
    c.send(q, b"expired", t)
    c.ack(cons, [m], t)
    # The broker rolls it back by itself: the acknowledged message comes back.
    [again] = c.wait_deliveries(1, timeout=10)
    assert again.body == b"held" and again.flags & FLAG_R
    c.send(q, b"late", t, status=408)
    c.ack(cons, [again], t, status=408)
    assert c.verify(JMQTransactionID=JLong(t))["State"] == 9  # TIMEDOUT
    c.call(PacketType.COMMIT_TRANSACTION, 408, JMQTransactionID=JLong(t))
    c.call(PacketType.ROLLBACK_TRANSACTION, 408, JMQTransactionID=JLong(t))
    c.call(PacketType.ROLLBACK_TRANSACTION, 404, JMQTransactionID=JLong(t))
    c.ack(cons, [again])
    assert c.nothing_delivered(0.4)  # "expired" was never delivered

    # XA: END after the lifetime is over is TIMEOUT too; PREPARED ones do not expire.
    # One wait past the lifetime serves both: the prepared branch first, then the one left
    # active, each twice its lifetime old when checked.
    xp = new_xid()
    c.xa_begin(sid, xp, JMQLifetime=JLong(300))
    c.xa(PacketType.END_TRANSACTION, xp, JMQXAFlags=JInt(TMSUCCESS_I))
    c.xa(PacketType.PREPARE_TRANSACTION, xp)
    xid = new_xid()
    c.xa_begin(sid, xid, JMQLifetime=JLong(300))
    time.sleep(0.6)
    c.xa(PacketType.END_TRANSACTION, xid, 408, JMQXAFlags=JInt(TMSUCCESS_I))
    assert c.verify(xid=xid)["State"] == 9
    assert c.verify(xid=xp)["State"] == 6
    c.xa(PacketType.COMMIT_TRANSACTION, xp, JMQXAFlags=JInt(TMNOFLAGS))
    c.close()
    feeder.close()


# -- administration ---------------------------------------------------------------------


def _manage(b: Any, *args: str) -> subprocess.CompletedProcess:
    return run_manage(list(args), env=b.extra["env"], timeout=120)


def _rows(b: Any) -> dict[int, tuple]:
    url = b.extra["env"]["DATABASE_URL"]
    path = url[len("sqlite:///") :]
    with sqlite3.connect(path, timeout=20) as db:
        cur = db.execute(
            "SELECT txn_id, state, is_xa, in_doubt, xid, user FROM broker_brokertransaction"
            " WHERE broker_instance = ?",
            (b.instance,),
        )
        return {row[0]: row[1:] for row in cur.fetchall()}


def test_admin_connection_may_finish_prepared_transactions_only(broker):
    q = qname("txa")
    owner = Raw(broker)
    sid = owner.session()
    owner.producer(sid, q)
    t = owner.begin(sid)
    owner.send(q, b"by-admin", t)
    admin = Raw(broker, "admin", "admin", port=broker.admin_port)
    admin.call(PacketType.COMMIT_TRANSACTION, 403, JMQTransactionID=JLong(t))  # not prepared
    owner.call(PacketType.PREPARE_TRANSACTION, JMQTransactionID=JLong(t))
    other = Raw(broker)
    other.call(PacketType.COMMIT_TRANSACTION, 403, JMQTransactionID=JLong(t))  # not admin
    admin.call(PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(t))
    osid = other.session(1)
    other.consumer(osid, q)
    other.start()
    [m] = other.wait_deliveries(1)
    assert m.body == b"by-admin"
    for c in (owner, admin, other):
        c.close()


def test_imqtxn_lists_commits_and_rolls_back(broker, tmp_path):
    q = qname("txi")
    a = Raw(broker)
    sid = a.session()
    a.producer(sid, q)
    x1, x2, x3 = new_xid(), new_xid(), new_xid()
    t1 = a.xa_begin(sid, x1)
    a.send(q, b"committed-by-admin", t1)
    a.xa(PacketType.END_TRANSACTION, x1, JMQXAFlags=JInt(TMSUCCESS_I))
    a.xa(PacketType.PREPARE_TRANSACTION, x1)
    t2 = a.xa_begin(sid, x2)
    a.send(q, b"rolled-back-by-admin", t2)
    a.xa(PacketType.END_TRANSACTION, x2, JMQXAFlags=JInt(TMSUCCESS_I))
    a.xa(PacketType.PREPARE_TRANSACTION, x2)
    t3 = a.xa_begin(sid, x3)  # open XA: listed, not in doubt while its connection lives
    tl = a.begin(sid)  # local and STARTED: not an administrator's business
    rows = wait_until(
        lambda: (r := _rows(broker)).get(t1, ("",))[0] == "PREPARED" and t3 in r and r,
        what="rows recorded",
    )
    assert rows[t1] == ("PREPARED", 1, 0, str(x1), "guest")
    assert rows[t3][:3] == ("STARTED", 1, 0)
    assert tl not in rows
    a.xa(PacketType.ROLLBACK_TRANSACTION, x3)
    a.close()
    # The connection's close marks t1 and t2 in doubt and removes t3: wait for all three
    # (one row's change does not mean the others are written).
    rows = wait_until(
        lambda: (
            (r := _rows(broker)).get(t1, (0, 0, 0))[2] == 1
            and r.get(t2, (0, 0, 0))[2] == 1
            and t3 not in r
            and r
        ),
        what="in doubt",
    )
    assert t3 not in rows and rows[t2][0] == "PREPARED" and rows[t2][2] == 1

    out = _manage(broker, "imqtxn", "list", "-name", broker.instance)
    assert out.returncode == 0, out.stderr
    assert str(t1) in out.stdout and str(t2) in out.stdout and str(x1) in out.stdout
    assert "PREPARED" in out.stdout

    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    target = f"{broker.host}:{broker.portmapper_port}"
    common = ["-u", "admin", "-passfile", str(passfile), "-b", target]
    out = _manage(broker, "imqtxn", "commit", "-t", str(t1), *common)
    assert out.returncode == 0, out.stderr
    assert f"Transaction {t1} committed" in out.stdout
    out = _manage(broker, "imqtxn", "rollback", "-t", str(t2), *common)
    assert out.returncode == 0, out.stderr
    out = _manage(broker, "imqtxn", "commit", "-t", str(t2), *common)
    assert out.returncode != 0 and "404" in out.stderr
    bad = tmp_path / "bad"
    bad.write_text("imq.imqcmd.password=wrong\n")
    out = _manage(broker, "imqtxn", "commit", "-t", str(t1), "-passfile", str(bad), "-b", target)
    assert out.returncode != 0

    wait_until(lambda: not ({t1, t2} & set(_rows(broker))), what="rows removed")
    b = Raw(broker)
    bsid = b.session(1)
    b.consumer(bsid, q)
    b.start()
    [m] = b.wait_deliveries(1)
    assert m.body == b"committed-by-admin"
    assert b.nothing_delivered(0.4)
    b.close()
