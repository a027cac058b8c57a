"""XA transactions for the Python client (``javax.transaction.xa.XAResource``-shaped).

::

    from openmq_client.xa import Xid, create_xa_session
    sess, xa = await create_xa_session(conn)
    xid = Xid(4660, b"global-1", b"branch-1")
    await xa.start(xid)                      # START_TRANSACTION JMQXAFlags=TMNOFLAGS + Xid
    await (await sess.create_producer(Queue("q"))).send(TextMessage("x"))
    await xa.end(xid)                        # END_TRANSACTION TMSUCCESS
    await xa.prepare(xid)                    # PREPARE_TRANSACTION
    await xa.commit(xid)                     # COMMIT_TRANSACTION (two-phase)
    in_doubt = await xa.recover()            # RECOVER_TRANSACTION TMSTARTRSCAN

Messages sent and acknowledged on the XA session between ``start`` and ``end`` belong
to the transaction.  Failures raise :class:`XAException` carrying the broker's status
and the JTA error code it maps to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.javaser import decode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_AUTO_ROLLBACK,
    JMQ_LIFETIME,
    JMQ_QUANTITY,
    JMQ_REASON,
    JMQ_REDELIVER,
    JMQ_SESSION_ID,
    JMQ_SESSION_LESS,
    JMQ_STATUS,
    JMQ_TRANSACTION_ID,
    JMQ_XA_FLAGS,
    JMQ_XA_ONE_PHASE,
)
from broker.protocol.types import PacketType, Status, XAFlag
from broker.protocol.xid import Xid, XidError

from .errors import JMSException
from .session import Session

if TYPE_CHECKING:
    from broker.protocol.packet import Packet

    from .connection import Connection

TMNOFLAGS = XAFlag.TMNOFLAGS
TMJOIN = XAFlag.TMJOIN
TMRESUME = XAFlag.TMRESUME
TMSUCCESS = XAFlag.TMSUCCESS
TMSUSPEND = XAFlag.TMSUSPEND
TMFAIL = XAFlag.TMFAIL
TMONEPHASE = XAFlag.TMONEPHASE
TMSTARTRSCAN = XAFlag.TMSTARTRSCAN
TMENDRSCAN = XAFlag.TMENDRSCAN

XA_OK = 0
# JTA XAException error codes.
XA_RBTIMEOUT = 106
XAER_RMERR = -3
XAER_NOTA = -4
XAER_INVAL = -5
XAER_PROTO = -6
XAER_DUPID = -8

_CODES = {
    Status.NOT_FOUND: XAER_NOTA,
    Status.GONE: XAER_NOTA,
    Status.PRECONDITION_FAILED: XAER_PROTO,
    Status.CONFLICT: XAER_DUPID,
    Status.BAD_REQUEST: XAER_INVAL,
    Status.TIMEOUT: XA_RBTIMEOUT,
}
_ANY = tuple(range(100, 600))


class XAException(JMSException):
    """An XA operation the broker refused; ``error_code`` is the JTA code."""

    def __init__(self, message: str, status: int | None, reason: str | None) -> None:
        super().__init__(message, status, reason)
        self.error_code = _CODES.get(status, XAER_RMERR)  # type: ignore[call-overload]


def _check(reply: Packet, what: str, ok: tuple[int, ...] = (Status.OK,)) -> int:
    status = int(reply.properties.get(JMQ_STATUS, 0))  # type: ignore[call-overload]
    if status not in ok:
        reason = reply.properties.get(JMQ_REASON)
        try:
            name = Status(status).name
        except ValueError:
            name = "UNKNOWN"
        text = f"{what} failed: {status} {name}" + (f" ({reason})" if reason else "")
        raise XAException(text, status, reason)  # type: ignore[arg-type]
    return status


class XAResource:
    """The XA operations of one connection; ``session`` (an XA session) is the one whose
    sends and acknowledgements join the transaction started with :meth:`start`."""

    def __init__(self, connection: Connection, session: Session | None = None) -> None:
        self.connection = connection
        self.session = session
        # Xid -> JMQTransactionID the broker gave it (sent along, it is faster).
        self.transaction_ids: dict[Xid, int] = {}

    def _props(self, xid: Xid, flags: int | None = None) -> dict[str, object]:
        props: dict[str, object] = {}
        tid = self.transaction_ids.get(xid)
        if tid:
            props[JMQ_TRANSACTION_ID] = JLong(tid)
        if flags is not None:
            props[JMQ_XA_FLAGS] = JInt(int(flags))
        return props

    async def _call(
        self,
        ptype: int,
        props: dict[str, object],
        body: bytes,
        ok: tuple[int, ...] = (Status.OK,),
    ) -> Packet:
        reply = await self.connection._request(ptype, props, body, ok=_ANY)
        _check(reply, PacketType(ptype).name, ok)
        return reply

    async def start(
        self,
        xid: Xid,
        flags: int = TMNOFLAGS,
        *,
        session_less: bool | None = None,
        lifetime: int | None = None,
        auto_rollback: int | None = None,
    ) -> int:
        """xa_start: TMNOFLAGS (new), TMJOIN or TMRESUME.  Returns JMQTransactionID."""
        props: dict[str, object] = {JMQ_XA_FLAGS: JInt(int(flags))}
        if self.session is not None:
            props[JMQ_SESSION_ID] = JLong(self.session.session_id)
        if session_less is not None:
            props[JMQ_SESSION_LESS] = bool(session_less)
        if lifetime is not None:
            props[JMQ_LIFETIME] = JLong(lifetime)
        if auto_rollback is not None:
            props[JMQ_AUTO_ROLLBACK] = JInt(auto_rollback)
        reply = await self._call(
            PacketType.START_TRANSACTION, props, xid.encode(), ok=(Status.OK, Status.NOT_MODIFIED)
        )
        tid = int(reply.properties.get(JMQ_TRANSACTION_ID, 0))  # type: ignore[call-overload]
        self.transaction_ids[xid] = tid
        if self.session is not None:
            self.session._transaction_id = tid
        return tid

    async def end(self, xid: Xid, flags: int = TMSUCCESS) -> None:
        """xa_end: TMSUCCESS, TMSUSPEND or TMFAIL."""
        await self._call(
            PacketType.END_TRANSACTION,
            self._props(xid, flags),
            xid.encode(),
            ok=(Status.OK, Status.NOT_MODIFIED),
        )
        if self.session is not None and self.session._transaction_id == self.transaction_ids.get(
            xid
        ):
            # The session no longer works in it (closing it must not roll it back).
            self.session._transaction_id = 0

    async def prepare(self, xid: Xid, *, one_phase: bool = False) -> int:
        """xa_prepare; returns XA_OK."""
        props = self._props(xid)
        if one_phase:
            props[JMQ_XA_ONE_PHASE] = True
        await self._call(
            PacketType.PREPARE_TRANSACTION, props, xid.encode(), ok=(Status.OK, Status.NOT_MODIFIED)
        )
        return XA_OK

    async def commit(self, xid: Xid, one_phase: bool = False) -> None:
        """xa_commit: two-phase (after prepare) or one-phase (TMONEPHASE)."""
        props = self._props(xid, TMONEPHASE if one_phase else TMNOFLAGS)
        if one_phase:
            props[JMQ_XA_ONE_PHASE] = True
        await self._call(PacketType.COMMIT_TRANSACTION, props, xid.encode())
        self._finished(xid)

    async def rollback(self, xid: Xid) -> None:
        """xa_rollback; the consumed messages come back (JMQRedeliver)."""
        props = self._props(xid)
        props[JMQ_REDELIVER] = True
        await self._call(PacketType.ROLLBACK_TRANSACTION, props, xid.encode())
        self._finished(xid)

    async def recover(self, flags: int = TMSTARTRSCAN | TMENDRSCAN) -> list[Xid]:
        """xa_recover: the Xids of the broker's PREPARED transactions (on TMSTARTRSCAN)."""
        reply = await self._call(
            PacketType.RECOVER_TRANSACTION, {JMQ_XA_FLAGS: JInt(int(flags))}, b""
        )
        n = reply.properties.get(JMQ_QUANTITY)
        try:
            return Xid.decode_list(reply.body, None if n is None else int(n))  # type: ignore[call-overload]
        except XidError as exc:
            raise XAException(f"bad RECOVER_TRANSACTION_REPLY: {exc}", None, None) from exc

    async def verify(self, xid: Xid | None = None, transaction_id: int = 0) -> dict[str, object]:
        """VERIFY_TRANSACTION: the broker's view (``State`` numbered from 1: 2 STARTED ...
        6 PREPARED ... 9 TIMEDOUT); XAException (404) if it does not know it."""
        tid = transaction_id or (self.transaction_ids.get(xid, 0) if xid is not None else 0)
        reply = await self._call(
            PacketType.VERIFY_TRANSACTION,
            {JMQ_TRANSACTION_ID: JLong(tid)},
            xid.encode() if xid is not None else b"",
        )
        return decode_hashtable(reply.body) if reply.body else {}

    def _finished(self, xid: Xid) -> None:
        tid = self.transaction_ids.pop(xid, None)
        s = self.session
        if s is not None and tid is not None and s._transaction_id in (tid, 0):
            s._transaction_id = 0
            s._unacked = []


async def create_xa_session(connection: Connection) -> tuple[Session, XAResource]:
    """A session whose work belongs to whatever transaction its XAResource started (a
    transacted session without a local transaction of its own)."""
    connection._check_open()
    reply = await connection._request(PacketType.CREATE_SESSION)
    sid = reply.properties.get(JMQ_SESSION_ID)
    session = Session(connection, -1 if sid is None else int(sid), 0, True)  # type: ignore[call-overload]
    connection._sessions.append(session)
    return session, XAResource(connection, session)


async def commit_transaction(connection: Connection, txn_id: int, xid: Xid | None = None) -> None:
    """COMMIT_TRANSACTION of any transaction by id (with its Xid for an XA one, which
    must then be PREPARED): what ``imqtxn commit`` sends over an ADMIN connection."""
    props: dict[str, object] = {JMQ_TRANSACTION_ID: JLong(txn_id)}
    if xid is not None:
        props[JMQ_XA_FLAGS] = JInt(int(TMNOFLAGS))
    reply = await connection._request(
        PacketType.COMMIT_TRANSACTION, props, xid.encode() if xid else b"", ok=_ANY
    )
    _check(reply, "COMMIT_TRANSACTION")


async def rollback_transaction(connection: Connection, txn_id: int, xid: Xid | None = None) -> None:
    """ROLLBACK_TRANSACTION of any transaction by id (``imqtxn rollback``)."""
    props: dict[str, object] = {JMQ_TRANSACTION_ID: JLong(txn_id), JMQ_REDELIVER: True}
    reply = await connection._request(
        PacketType.ROLLBACK_TRANSACTION, props, xid.encode() if xid else b"", ok=_ANY
    )
    _check(reply, "ROLLBACK_TRANSACTION")


__all__ = [
    "TMENDRSCAN",
    "TMFAIL",
    "TMJOIN",
    "TMNOFLAGS",
    "TMONEPHASE",
    "TMRESUME",
    "TMSTARTRSCAN",
    "TMSUCCESS",
    "TMSUSPEND",
    "XAException",
    "XAResource",
    "XA_OK",
    "Xid",
    "commit_transaction",
    "create_xa_session",
    "rollback_transaction",
]
