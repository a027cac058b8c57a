"""Local and XA transaction requests: read the request, answer the seed's statuses and
keep the I-flag (resent) rules.  The transaction state machine itself is the router's;
lifetimes become :class:`~broker.engine.effects.TransactionTimer` effects."""

from __future__ import annotations

import logging

from broker.core.errors import RouterError
from broker.core.ids import made_by_another_run_before
from broker.core.transaction_record import Transaction
from broker.protocol.javaser import encode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_AUTO_ROLLBACK,
    JMQ_CREATE_TIME,
    JMQ_LIFETIME,
    JMQ_NEXT_TRANSACTION_ID,
    JMQ_NO_OP,
    JMQ_PREPARE_STATE_FAILED,
    JMQ_QUANTITY,
    JMQ_REDELIVER,
    JMQ_SESSION_LESS,
    JMQ_SET_REDELIVERED,
    JMQ_START_NEXT_TRANSACTION,
    JMQ_TRANSACTION_ID,
    JMQ_XA_FLAGS,
    JMQ_XA_ONE_PHASE,
    JMQ_XID,
)
from broker.protocol.packet import Packet
from broker.protocol.types import FLAG_A, FLAG_I, Status, TransactionState, XAFlag
from broker.protocol.xid import Xid, XidError, encode_xids

from .base import EngineBase
from .effects import TransactionTimer

log = logging.getLogger("broker.connection")


def _txn_id(pkt: Packet) -> int:
    tid = pkt.properties.get(JMQ_TRANSACTION_ID)
    if tid is None:
        return 0
    if isinstance(tid, bool) or not isinstance(tid, int):
        raise RouterError(Status.BAD_REQUEST, f"bad JMQTransactionID {tid!r}")
    return int(tid)


def _txn_xid(pkt: Packet) -> Xid | None:
    """The Xid in the body (None without a body, or for the null Xid)."""
    if not pkt.body_size:
        return None
    try:
        xid = Xid.decode(pkt.body)
    except XidError as exc:
        raise RouterError(Status.BAD_REQUEST, f"bad Xid in the body: {exc}") from None
    return None if xid.is_null else xid


# The state an END with these flags leaves a transaction in (else COMPLETE).
_ENDED_STATE: dict[int, TransactionState] = {
    XAFlag.TMSUSPEND: TransactionState.INCOMPLETE,
    XAFlag.TMFAIL: TransactionState.FAILED,
}


def _txn_int(pkt: Packet, name: str) -> int | None:
    value = pkt.properties.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RouterError(Status.BAD_REQUEST, f"bad {name} {value!r}")
    return int(value)


class TransactionRules(EngineBase):
    """START/END/PREPARE/COMMIT/ROLLBACK/RECOVER/VERIFY_TRANSACTION handlers."""

    def _txn_from(self, pkt: Packet, control: bool = True) -> Transaction:
        """The transaction a request names (JMQTransactionID, else the Xid body), checked
        for whether this connection may act on it."""
        tid = _txn_id(pkt)
        xid = _txn_xid(pkt)
        if not tid and xid is None:
            raise RouterError(
                Status.BAD_REQUEST, f"{JMQ_TRANSACTION_ID} (or an Xid body) is missing"
            )
        txn = self.router.txns.find_transaction(tid, xid)
        if control:
            self.router.txns.check_control(txn, self, self.service.type == "ADMIN")
        return txn

    def _txn_reply(
        self, pkt: Packet, txn: Transaction | None, status: int = Status.OK, **extra: object
    ) -> None:
        props: dict[str, object] = {JMQ_TRANSACTION_ID: JLong(txn.id)} if txn else {}
        props.update(extra)
        self.reply(pkt, status, props)

    def _txn_refused(self, pkt: Packet, exc: RouterError, txn: Transaction | None = None) -> None:
        props: dict[str, object] = {}
        if txn is not None:
            props[JMQ_TRANSACTION_ID] = JLong(txn.id)
            if txn.state == TransactionState.FAILED:
                props[JMQ_PREPARE_STATE_FAILED] = True
        if exc.props:
            props.update(exc.props)
        if exc.status == Status.ERROR or exc.status == Status.FORBIDDEN:
            log.warning("%s from %s refused: %s", pkt.type_name, self.peer, exc.reason)
        elif exc.props:
            log.info("%s from %s refused: %s", pkt.type_name, self.peer, exc.reason)
        self.reply(pkt, exc.status, props, reason=exc.reason)

    def _lost_with_failed_broker(self, pkt: Packet) -> int:
        """The JMQTransactionID of an END (TMSUCCESS, no Xid) that names a local transaction
        this broker does not know, from a client that failed over here (HA): one it
        started on the broker that failed, and was still working in.  0 if not that.

        The stock Java client connected to an HA broker lets END_TRANSACTION and
        COMMIT_TRANSACTION wait out a reconnect and sends them to the taker
        (ConnectionImpl.isAllowedToFailover), so a commit() made while its connection
        was failing over ends the old transaction here.  This broker stores a transaction
        only once it is prepared (a prepared one is taken over, and found), so a
        transaction that was not died with its broker: its sends were never stored and
        the messages it consumed come back redelivered.  OpenMQ's broker stores it at
        START and takes it over; here the END is accepted and the PREPARE that follows
        answered 408, which the stock client turns into TransactionRolledBackException
        (ProtocolHandler.prepareHATransaction): the application does the work again."""
        if not self.failed_over_at or _txn_xid(pkt) is not None:
            return 0
        flags = _txn_int(pkt, JMQ_XA_FLAGS) or 0
        tid = _txn_id(pkt)
        if not tid or not flags & XAFlag.TMSUCCESS or self.router.txns.by_id(tid) is not None:
            return 0
        if not made_by_another_run_before(tid, self.router.uids.prefix, self.failed_over_at):
            return 0
        return tid

    def _take_lost(self, pkt: Packet) -> int:
        """The id of the transaction ``pkt`` names if it is one ended here after it died
        with the broker that failed (:meth:`_lost_with_failed_broker`), forgotten now
        (its PREPARE, COMMIT or ROLLBACK is its last word); 0 if not."""
        tid = _txn_id(pkt)
        if not tid or tid not in self.lost_transactions:
            return 0
        self.lost_transactions.discard(tid)
        return tid

    def _lost_refused(self, pkt: Packet) -> bool:
        """PREPARE or COMMIT of a lost transaction (:meth:`_take_lost`): 408, rolled back."""
        tid = self._take_lost(pkt)
        if not tid:
            return False
        exc = RouterError(
            Status.TIMEOUT,
            f"transaction {tid} was rolled back: the broker it was started on failed "
            "before it was prepared (its work had not been stored)",
            {JMQ_TRANSACTION_ID: JLong(tid)},
        )
        log.info("%s from %s refused: %s", pkt.type_name, self.peer, exc.reason)
        self.reply(pkt, exc.status, exc.props, reason=exc.reason)
        return True

    def on_start_transaction(self, pkt: Packet) -> None:
        props = pkt.properties
        resent = bool(pkt.flags & FLAG_I)
        try:
            xid = _txn_xid(pkt)
            flags = _txn_int(pkt, JMQ_XA_FLAGS)
            auto_rollback = _txn_int(pkt, JMQ_AUTO_ROLLBACK)
            lifetime = _txn_int(pkt, JMQ_LIFETIME) or 0
            session_less = props.get(JMQ_SESSION_LESS)
            if session_less is not None and not isinstance(session_less, bool):
                raise RouterError(Status.BAD_REQUEST, f"bad JMQSessionLess {session_less!r}")
            sess = self._session(pkt)
            if sess is None:
                raise RouterError(Status.NOT_FOUND, "unknown JMQSessionID")
            if xid is None:
                if flags:
                    raise RouterError(
                        Status.BAD_REQUEST, f"START with JMQXAFlags {flags:#x} needs an Xid body"
                    )
                if resent:
                    done = self.router.txns.replayed_start(self, pkt.sysmsgid)
                    if done is not None:
                        self._txn_reply(pkt, done, Status.NOT_MODIFIED)
                        return
                txn = self.router.txns.start_transaction(
                    sess,
                    self,
                    auto_rollback=auto_rollback,
                    session_less=session_less,
                    lifetime=lifetime,
                    creator=pkt.sysmsgid,
                    user=self.user,
                )
                new = True
            else:
                flags = flags or 0
                if resent and flags == XAFlag.TMNOFLAGS:
                    done = self.router.txns.by_xid(xid)
                    if done is not None and done.state == TransactionState.STARTED:
                        self._txn_reply(pkt, done, Status.NOT_MODIFIED)
                        return
                txn = self.router.txns.xa_start(
                    self,
                    sess,
                    xid,
                    flags,
                    auto_rollback=auto_rollback,
                    session_less=session_less,
                    lifetime=lifetime,
                    creator=pkt.sysmsgid,
                    user=self.user,
                )
                new = flags == XAFlag.TMNOFLAGS
        except RouterError as exc:
            self._txn_refused(pkt, exc)
            return
        if new and txn.lifetime > 0:
            self._effect(TransactionTimer(txn, txn.lifetime))
        self._txn_reply(pkt, txn)

    def on_end_transaction(self, pkt: Packet) -> None:
        txn = None
        try:
            lost = self._lost_with_failed_broker(pkt)
            if lost:
                self.lost_transactions.add(lost)
                log.info(
                    "END_TRANSACTION from %s: transaction %s died with the broker this "
                    "client failed over from (not prepared): its PREPARE or COMMIT is "
                    "answered rolled back",
                    self.peer,
                    lost,
                )
                self.reply(pkt, Status.OK, {JMQ_TRANSACTION_ID: JLong(lost)})
                return
            txn = self._txn_from(pkt)
            flags = _txn_int(pkt, JMQ_XA_FLAGS)
            if flags is None:
                raise RouterError(Status.BAD_REQUEST, "END_TRANSACTION without JMQXAFlags")
            if pkt.properties.get(JMQ_NO_OP) is True:
                self._txn_reply(pkt, txn)
                return
            if pkt.flags & FLAG_I and txn.state == _ENDED_STATE.get(
                flags, TransactionState.COMPLETE
            ):
                self._txn_reply(pkt, txn, Status.NOT_MODIFIED)
                return
            if not txn.is_xa and flags & XAFlag.TMSUCCESS:
                # The stock Java client connected to an HA broker commits a local
                # transaction in two phases (Transaction.commitHATransaction ->
                # ProtocolHandler.endHATransaction: END with JMQTransactionID and
                # JMQXAFlags=TMSUCCESS, no Xid), then PREPARE and COMMIT: STARTED -> COMPLETE.
                if txn.state not in (TransactionState.STARTED, TransactionState.COMPLETE):
                    raise RouterError(
                        Status.PRECONDITION_FAILED,
                        f"transaction {txn.id} is {txn.state.name}: cannot end it",
                    )
                if txn.state == TransactionState.STARTED:
                    txn.set_state(TransactionState.COMPLETE)
                self._txn_reply(pkt, txn)
                return
            self.router.txns.end_transaction(txn, flags)
        except RouterError as exc:
            self._txn_refused(pkt, exc, txn)
            return
        self._txn_reply(pkt, txn)

    def on_prepare_transaction(self, pkt: Packet) -> None:
        txn = None
        try:
            if self._lost_refused(pkt):
                return
            txn = self._txn_from(pkt)
            if pkt.flags & FLAG_I and txn.state == TransactionState.PREPARED:
                self._txn_reply(pkt, txn, Status.NOT_MODIFIED)
                return
            self.router.txns.prepare(txn, one_phase=pkt.properties.get(JMQ_XA_ONE_PHASE) is True)
        except RouterError as exc:
            self._txn_refused(pkt, exc, txn)
            return
        cluster = self.broker.cluster
        if (
            txn.is_xa
            and cluster is not None
            and cluster.prepare_remote(txn, lambda s, r: self._prepared(pkt, txn, s, r))
        ):
            return  # other brokers prepare their part first
        # "Prepared" is a promise to survive a crash: say it once the store has it.
        self.when_stored(lambda: self._txn_reply(pkt, txn))

    def _prepared(self, pkt: Packet, txn: Transaction, status: int, reason: str | None) -> None:
        """The other brokers holding part of ``txn`` answered its PREPARE (``status``): the
        client hears it once this broker's own record of it is stored too."""
        if status != Status.OK:
            self.router.txns.prepare_failed(txn, reason or f"status {status}")
            exc = RouterError(status, reason or "a broker of the cluster did not prepare")
            self.when_stored(lambda: self._txn_refused(pkt, exc, txn))
            return
        self.when_stored(lambda: self._txn_reply(pkt, txn))

    def _next_transaction(self, pkt: Packet, txn: Transaction, reply: dict[str, object]) -> None:
        """On JMQStartNextTransaction a local transaction's session goes on in a new one."""
        sess = txn.session
        if txn.is_xa or sess is None or not pkt.properties.get(JMQ_START_NEXT_TRANSACTION):
            return
        if sess is not self.implicit_session and self.sessions.get(sess.id) is not sess:
            return
        nxt = self.router.txns.start_transaction(
            sess,
            self,
            auto_rollback=txn.auto_rollback,
            session_less=txn.session_less,
            lifetime=txn.lifetime,
            user=self.user,
        )
        if nxt.lifetime > 0:
            self._effect(TransactionTimer(nxt, nxt.lifetime))
        reply[JMQ_NEXT_TRANSACTION_ID] = JLong(nxt.id)

    def _txn_or_replayed(self, pkt: Packet) -> Transaction | None:
        """The transaction a COMMIT/ROLLBACK names; None when it was a resend (I flag) of
        one already finished, which is answered OK here (it was done)."""
        try:
            return self._txn_from(pkt)
        except RouterError as exc:
            if exc.status == Status.NOT_FOUND and pkt.flags & FLAG_I:
                self.reply(pkt, Status.OK, {JMQ_TRANSACTION_ID: JLong(_txn_id(pkt))})
                return None
            raise

    def on_commit_transaction(self, pkt: Packet) -> None:
        props = pkt.properties
        txn = None
        try:
            if self._lost_refused(pkt):
                return
            txn = self._txn_or_replayed(pkt)
            if txn is None:
                return
            flags = _txn_int(pkt, JMQ_XA_FLAGS) or 0
            self.router.txns.commit(
                txn,
                self,
                one_phase=bool(flags & XAFlag.TMONEPHASE),
                one_phase_hint=props.get(JMQ_XA_ONE_PHASE) is True,
            )
        except RouterError as exc:
            self._txn_refused(pkt, exc, txn)
            return
        reply: dict[str, object] = {JMQ_TRANSACTION_ID: JLong(txn.id)}
        self._next_transaction(pkt, txn, reply)
        if txn.stored:
            self.when_stored(lambda: self.reply(pkt, Status.OK, reply))
        else:
            self.reply(pkt, Status.OK, reply)

    def on_rollback_transaction(self, pkt: Packet) -> None:
        props = pkt.properties
        txn = None
        try:
            lost = self._take_lost(pkt)
            if lost:
                # Died with the broker that failed: nothing of it is here to undo.
                self.reply(pkt, Status.OK, {JMQ_TRANSACTION_ID: JLong(lost)})
                return
            txn = self._txn_or_replayed(pkt)
            if txn is None:
                return
            if txn.state == TransactionState.TIMED_OUT:
                # Already rolled back by the broker: say so once, then forget it.
                self.router.txns.forget_timed_out(txn)
                raise RouterError(
                    Status.TIMEOUT,
                    f"transaction {txn.id} was rolled back by the broker: its lifetime expired",
                )
            self.router.txns.rollback(
                txn,
                redeliver=props.get(JMQ_REDELIVER) is True,
                set_redelivered=props.get(JMQ_SET_REDELIVERED) is not False,
            )
        except RouterError as exc:
            if not pkt.flags & FLAG_A:
                log.info("ROLLBACK_TRANSACTION from %s refused: %s", self.peer, exc.reason)
            self._txn_refused(pkt, exc, txn)
            return
        reply: dict[str, object] = {JMQ_TRANSACTION_ID: JLong(txn.id)}
        self._next_transaction(pkt, txn, reply)
        self.reply(pkt, Status.OK, reply)

    def on_recover_transaction(self, pkt: Packet) -> None:
        """RECOVER_TRANSACTION: with JMQTransactionID, whether that one is PREPARED;
        otherwise every PREPARED Xid on TMSTARTRSCAN and none on other flags."""
        try:
            tid = _txn_id(pkt)
            flags = _txn_int(pkt, JMQ_XA_FLAGS) or 0
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        if tid:
            txn = self.router.txns.by_id(tid)
            if txn is None or txn.state != TransactionState.PREPARED:
                self.reply(
                    pkt,
                    Status.NOT_FOUND,
                    {JMQ_QUANTITY: JInt(0)},
                    reason=f"transaction {tid} is not PREPARED",
                )
                return
            xids = [txn.xid] if txn.xid is not None else []
            extra: dict[str, object] = {JMQ_TRANSACTION_ID: JLong(tid)}
        else:
            xids = self.router.txns.prepared_xids() if flags & XAFlag.TMSTARTRSCAN else []
            extra = {}
        self.reply(pkt, Status.OK, {JMQ_QUANTITY: JInt(len(xids)), **extra}, body=encode_xids(xids))

    def on_verify_transaction(self, pkt: Packet) -> None:
        """VERIFY_TRANSACTION: the transaction's state and attributes as a serialised
        Hashtable (State numbered from 1 as the client protocol does); 404 if unknown."""
        try:
            txn = self._txn_from(pkt, control=False)
        except RouterError as exc:
            self.reply(pkt, exc.status, reason=exc.reason)
            return
        table: dict[str, object] = {
            "State": JInt(int(txn.state) + 1),
            JMQ_AUTO_ROLLBACK: JInt(txn.effective_auto_rollback(self.router.xa_autorollback_all)),
            JMQ_SESSION_LESS: bool(txn.session_less),
            JMQ_LIFETIME: JLong(txn.lifetime),
            JMQ_CREATE_TIME: JLong(txn.created),
        }
        if txn.xid is not None:
            table[JMQ_XID] = str(txn.xid)
        self.reply(
            pkt, Status.OK, {JMQ_TRANSACTION_ID: JLong(txn.id)}, body=encode_hashtable(table)
        )
