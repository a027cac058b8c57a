"""Transaction handling, local and XA: the rules behind START ... COMMIT / ROLLBACK.

A :class:`~broker.core.transaction_record.Transaction` (transaction_record.py) is one transaction and
the work it holds; this module is what the router does with them: start / join / resume,
the checks on who may work in and finish one, END / PREPARE / COMMIT / ROLLBACK with
their state rules, the message store records that make a commit atomic and a PREPARED
transaction survive a crash, lifetimes (JMQLifetime) and what happens when a session or
connection closes.  Local transactions belong to a session; XA ones are also known by
their Xid and may be finished from another connection (a transaction manager's
recovery).  Every refusal is a RouterError with the status the reply carries.

The tables (``transactions``, ``xids``) are this part's; every change of state is told
to the router's transaction observers (broker/core/observers.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.protocol.names import JMQ_AUTO_ROLLBACK
from broker.protocol.types import DEST_TOPIC, Status, TransactionState, XAFlag
from broker.store.base import TxnAck, TxnRemove, TxnSend, TxnState

from .errors import RouterError, now_ms, remote_failure
from .transaction_record import Transaction

if TYPE_CHECKING:
    from broker.protocol.xid import Xid

    from .acks import Acknowledgements
    from .context import CoreContext, Routing
    from .message import Message
    from .session import Link, Session

log = logging.getLogger("broker.router")


class TransactionManager:
    """The transaction rules of one router."""

    # How long a transaction the broker timed out stays known (answering 408).
    TIMED_OUT_RETENTION_MS = 10 * 60 * 1000

    def __init__(self, ctx: CoreContext, acks: Acknowledgements, routing: Routing) -> None:
        self.ctx = ctx
        self.acks = acks
        # The façade (the router): a committed message is routed as any other.
        self.routing = routing
        # Every transaction by JMQTransactionID, and the XA ones by Xid.
        self.transactions: dict[int, Transaction] = {}
        self.xids: dict[Xid, Transaction] = {}

    def _txn_changed(self, txn: Transaction) -> None:
        self.ctx.observers.transaction_changed(txn)

    @staticmethod
    def _check_auto_rollback(value: int | None) -> None:
        if value is None or value in (1, 2):
            return
        if value == 3:
            raise RouterError(
                Status.NOT_IMPLEMENTED, f"{JMQ_AUTO_ROLLBACK} NEVER is not supported by this broker"
            )
        raise RouterError(Status.BAD_REQUEST, f"bad JMQAutoRollback {value}")

    def _new_transaction(
        self,
        sess: Session | None,
        link: Link | None,
        xid: Xid | None,
        auto_rollback: int | None,
        session_less: bool | None,
        lifetime: int,
        creator: bytes,
        user: str | None,
    ) -> Transaction:
        self._check_auto_rollback(auto_rollback)
        if lifetime < 0:
            raise RouterError(Status.BAD_REQUEST, f"bad JMQLifetime {lifetime}")
        txn = Transaction(
            self.ctx.uids.next(),
            sess,
            xid=xid,
            link=link,
            auto_rollback=auto_rollback,
            # Unset: XA transactions are not rolled back when their session or
            # connection closes, other transactions are.
            session_less=(xid is not None) if session_less is None else session_less,
            lifetime=lifetime,
            creator=creator,
            connection_id=link.id if link is not None else 0,
            client_id=link.client_id if link is not None else None,
            user=user,
        )
        txn.on_change = self._txn_changed
        self.transactions[txn.id] = txn
        if xid is not None:
            self.xids[xid] = txn
        txn.changed()
        return txn

    def start_transaction(
        self,
        sess: Session,
        link: Link | None = None,
        *,
        auto_rollback: int | None = None,
        session_less: bool | None = None,
        lifetime: int = 0,
        creator: bytes = b"",
        user: str | None = None,
    ) -> Transaction:
        """START_TRANSACTION of a local transaction on ``sess``."""
        return self._new_transaction(
            sess,
            link if link is not None else sess.link,
            None,
            auto_rollback,
            session_less,
            lifetime,
            creator,
            user,
        )

    def adopt_transaction(self, txn: Transaction) -> Transaction:
        """Take in a transaction rebuilt from the message store at start (no connection
        owns it: it is in doubt until a transaction manager or an administrator finishes
        it).  Its held acknowledgements are entries already taken out of their queues."""
        txn.link = None
        txn.on_change = self._txn_changed
        self.transactions[txn.id] = txn
        if txn.xid is not None:
            self.xids[txn.xid] = txn
        txn.changed()
        return txn

    def replayed_start(self, link: Link, creator: bytes) -> Transaction | None:
        """The transaction a resent START (I flag) already made, if it is still STARTED."""
        if not creator:
            return None
        for t in self.transactions.values():
            if t.creator == creator and t.link is link and t.state == TransactionState.STARTED:
                return t
        return None

    def xa_start(
        self,
        link: Link,
        sess: Session | None,
        xid: Xid,
        flags: int,
        *,
        auto_rollback: int | None = None,
        session_less: bool | None = None,
        lifetime: int = 0,
        creator: bytes = b"",
        user: str | None = None,
    ) -> Transaction:
        """START_TRANSACTION with an Xid: TMNOFLAGS begins a new transaction (409 if the
        Xid is in use), TMJOIN / TMRESUME associate an existing one with ``link``."""
        existing = self.xids.get(xid)
        if existing is not None:
            self._expire_if_due(existing)
        if flags == XAFlag.TMNOFLAGS:
            if existing is not None:
                raise RouterError(
                    Status.CONFLICT, f"Xid {xid} is in use by transaction {existing.id}"
                )
            return self._new_transaction(
                sess, link, xid, auto_rollback, session_less, lifetime, creator, user
            )
        if flags not in (XAFlag.TMJOIN, XAFlag.TMRESUME):
            raise RouterError(Status.BAD_REQUEST, f"START with JMQXAFlags {flags:#x}")
        if existing is None:
            raise RouterError(Status.NOT_FOUND, f"unknown Xid {xid}")
        txn = existing
        self._not_timed_out(txn)
        if flags == XAFlag.TMJOIN:
            allowed = (TransactionState.STARTED, TransactionState.COMPLETE)
        else:
            allowed = (TransactionState.INCOMPLETE, TransactionState.STARTED)
        if txn.state not in allowed:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"transaction {txn.id} is {txn.state.name}: cannot "
                f"{'join' if flags == XAFlag.TMJOIN else 'resume'} it",
            )
        txn.link = link
        if sess is not None:
            txn.session = sess
        txn.set_state(TransactionState.STARTED)
        return txn

    def all_transactions(self) -> list[Transaction]:
        """Every transaction held (any state, in doubt ones included), oldest first."""
        return list(self.transactions.values())

    def by_id(self, txn_id: int) -> Transaction | None:
        """The transaction with this JMQTransactionID, or None (no expiry check)."""
        return self.transactions.get(txn_id)

    def by_xid(self, xid: Xid) -> Transaction | None:
        """The XA transaction with this Xid, or None (no expiry check)."""
        return self.xids.get(xid)

    def held_sends(self) -> dict[tuple[str, bool], list[int]]:
        """[count, bytes] of the messages sent in transactions not yet COMMITTED, by
        (destination name, is a topic)."""
        held: dict[tuple[str, bool], list[int]] = {}
        for txn in self.transactions.values():
            if txn.state == TransactionState.COMMITTED:
                continue
            for msg, dtype in txn.sends:
                row = held.setdefault((msg.destination, bool(dtype & DEST_TOPIC)), [0, 0])
                row[0] += 1
                row[1] += msg.size
        return held

    def find_transaction(self, txn_id: int, xid: Xid | None = None) -> Transaction:
        """The transaction a request names by JMQTransactionID or (XA) by its Xid; 404 if
        unknown.  A transaction past its lifetime is rolled back first."""
        txn = self.transactions.get(txn_id) if txn_id else None
        if txn is None and xid is not None:
            txn = self.xids.get(xid)
        if txn is None:
            what = f"transaction {txn_id}" if txn_id else f"Xid {xid}"
            raise RouterError(Status.NOT_FOUND, f"unknown {what}")
        self._expire_if_due(txn)
        return txn

    def check_control(self, txn: Transaction, link: Link | None, admin: bool = False) -> None:
        """May ``link`` end/prepare/commit/roll back ``txn``?  Its own connection may; so
        may anyone once it has none (in doubt: what a transaction manager's recovery
        does), an ADMIN-service connection when it is PREPARED, and, for an XA
        transaction no connection is working in (not STARTED), any connection naming it
        (JTA lets a transaction manager finish a branch through another resource of the
        same broker).  403 otherwise."""
        owner = txn.link
        if owner is None or owner is link:
            return
        if admin and txn.state == TransactionState.PREPARED:
            return
        if txn.is_xa and txn.state != TransactionState.STARTED:
            return
        raise RouterError(
            Status.FORBIDDEN, f"transaction {txn.id} belongs to connection {owner.id}"
        )

    def transaction(self, txn_id: int, link: Link) -> Transaction:
        """The transaction a message or an acknowledgement names: 410 if it does not
        exist (any more), 408 if its lifetime expired, 403 if it is another connection's
        (local transactions), 412 if it does not take work now (not STARTED)."""
        txn = self.transactions.get(txn_id)
        if txn is None:
            raise RouterError(Status.GONE, f"transaction {txn_id} does not exist")
        self._expire_if_due(txn)
        self._not_timed_out(txn)
        if txn.link is not link and not txn.is_xa:
            raise RouterError(
                Status.FORBIDDEN, f"transaction {txn_id} belongs to another connection"
            )
        return txn

    @staticmethod
    def _not_timed_out(txn: Transaction) -> None:
        if txn.state == TransactionState.TIMED_OUT:
            raise RouterError(
                Status.TIMEOUT,
                f"transaction {txn.id} was rolled back by the broker: its lifetime "
                f"of {txn.lifetime} ms expired",
            )

    def transacted_send(self, txn: Transaction, msg: Message, dest_type: int, link: Link) -> None:
        """Check the message now (so SEND_REPLY tells the truth) and hold it until COMMIT."""
        txn.check_open()
        check = self.ctx.observers.put_check
        if check is not None:
            check.check_put(msg)
        dest = self.ctx.lookup(msg.destination, dest_type)
        if dest is None:
            dest = self.routing.ensure_destination(msg.destination, dest_type, link)
        s = self.ctx.settings
        per_msg = dest.limit("maxBytesPerMsg")
        if (s.max_message_size >= 0 and msg.size > s.max_message_size) or (
            per_msg >= 0 and msg.size > per_msg
        ):
            raise RouterError(Status.ENTITY_TOO_LARGE, f"message of {msg.size} bytes is too large")
        txn.sends.append((msg, dest_type))
        pager = self.ctx.pager
        if pager is not None:
            pager.waiting(msg)

    def transacted_ack(
        self, txn: Transaction, sess: Session, blocks: list[tuple[int, bytes]]
    ) -> None:
        """Hold acknowledgements until COMMIT.  The entries leave the session's unacked
        table now, so closing the consumer or the session does not redeliver them while
        the transaction may still commit."""
        txn.check_open()
        unacked = sess.unacked
        for key in blocks:
            entry = unacked.pop(key, None)
            if entry is None:
                continue
            txn.acks.append((sess, key))
            txn.entries[key] = entry

    def end_transaction(self, txn: Transaction, flags: int) -> None:
        """END_TRANSACTION (XA): TMSUCCESS -> COMPLETE, TMSUSPEND -> INCOMPLETE,
        TMFAIL -> FAILED."""
        if not txn.is_xa:
            raise RouterError(Status.BAD_REQUEST, f"transaction {txn.id} is not an XA one")
        self._not_timed_out(txn)
        st = txn.state
        allowed: tuple[TransactionState, ...]
        if flags & XAFlag.TMSUSPEND:
            allowed, nxt = (TransactionState.STARTED,), TransactionState.INCOMPLETE
        elif flags & XAFlag.TMFAIL:
            allowed = (
                TransactionState.STARTED,
                TransactionState.INCOMPLETE,
                TransactionState.FAILED,
            )
            nxt = TransactionState.FAILED
        elif flags & (XAFlag.TMSUCCESS | XAFlag.TMONEPHASE):
            allowed = (TransactionState.STARTED, TransactionState.INCOMPLETE)
            nxt = TransactionState.COMPLETE
        else:
            raise RouterError(Status.BAD_REQUEST, f"END with JMQXAFlags {flags:#x}")
        if st not in allowed:
            raise RouterError(
                Status.PRECONDITION_FAILED, f"transaction {txn.id} is {st.name}: cannot end it"
            )
        txn.set_state(nxt)

    def prepare(self, txn: Transaction, one_phase: bool = False) -> None:
        """PREPARE_TRANSACTION: an XA transaction from COMPLETE (after END TMSUCCESS), a
        local one from STARTED too.  A PREPARED transaction no longer expires."""
        self._not_timed_out(txn)
        ok = (
            (TransactionState.COMPLETE,)
            if txn.is_xa
            else (TransactionState.STARTED, TransactionState.COMPLETE)
        )
        if txn.state not in ok:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"transaction {txn.id} is {txn.state.name}: cannot prepare it",
            )
        txn.cancel_timer()
        txn.one_phase_prepare = one_phase
        txn.set_state(TransactionState.PREPARED)
        # A prepared transaction must survive a crash: its work and state go to the store.
        self._store_transaction(txn, TransactionState.PREPARED, always=True)

    def restate(self, txn: Transaction) -> None:
        """Write a stored transaction's state and description again (they changed)."""
        if txn.stored:
            self._store_transaction(txn, txn.state)

    def prepare_failed(self, txn: Transaction, reason: str) -> None:
        """Another broker could not prepare its part of ``txn`` (the cluster's prepare_remote): FAILED,
        as OpenMQ leaves it; only a rollback finishes it now (and a restart rolls it back)."""
        if txn.state != TransactionState.PREPARED:
            return
        # The refusal the client gets says why (logged there, once).
        log.debug("transaction %s not prepared: %s", txn.id, reason)
        txn.set_state(TransactionState.FAILED)
        self._store_transaction(txn, TransactionState.FAILED, always=True)

    def commit(
        self,
        txn: Transaction,
        link: Link | None,
        one_phase: bool = False,
        one_phase_hint: bool = False,
    ) -> None:
        """COMMIT: route the held messages in order, then apply the held acknowledgements.

        Local transactions commit from STARTED (or PREPARED).  XA: two-phase only from
        PREPARED; one-phase (TMONEPHASE) from COMPLETE or STARTED; ``one_phase_hint``
        (JMQXAOnePhase without TMONEPHASE: a one-phase commit the client ran as prepare +
        commit) from any of the three.
        """
        self._not_timed_out(txn)
        st = txn.state
        if not txn.is_xa:
            ok: tuple[TransactionState, ...] = (
                TransactionState.STARTED,
                TransactionState.PREPARED,
            )
        elif one_phase:
            ok = (TransactionState.COMPLETE, TransactionState.STARTED)
        elif one_phase_hint:
            ok = (TransactionState.COMPLETE, TransactionState.STARTED, TransactionState.PREPARED)
        else:
            ok = (TransactionState.PREPARED,)
        if st not in ok:
            hint = (
                " (a two-phase commit needs PREPARE first)" if txn.is_xa and not one_phase else ""
            )
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"transaction {txn.id} is {st.name}: cannot commit it{hint}",
            )
        if not txn.is_xa and st == TransactionState.STARTED:
            self._check_homes(txn)
        txn.cancel_timer()
        self._forget_transaction(txn)
        # One COMMITTED record makes the commit atomic in the store: after a crash the
        # held work is applied from the transaction's records if it was not yet.
        self._store_transaction(txn, TransactionState.COMMITTED)
        store = self.ctx.store
        if txn.stored and txn.sends and store is not None:
            # Consumers see the messages only once the COMMITTED record is in the store:
            # a crash before that takes the whole commit back (nothing was promised
            # yet), and must not leave consumers holding part of it (crash soak,
            # bench/crash_soak.py).  The commit's reply waits for the same write.
            sends = txn.sends
            store.after_durable(lambda: self._route_committed(txn.id, sends, link))
        else:
            self._route_committed(None, txn.sends, link)
        settle = self.acks.settle
        for entry in txn.entries.values():
            settle(entry)
        if txn.stored and not txn.sends and store is not None:
            store.submit((TxnRemove(txn.id),))
        txn.set_state(TransactionState.COMMITTED)

    def _route_committed(
        self, txn_id: int | None, sends: list[tuple[Message, int]], link: Link | None
    ) -> None:
        """Route a committed transaction's messages, in order; then, for a stored one
        (``txn_id``), forget its records (after the messages' own, so a crash in between
        finds the commit to complete)."""
        for msg, dest_type in sends:
            try:
                self.routing.route(msg, link, dest_type)
            except RouterError as exc:
                # Limits may have filled since the send was checked; the rest still commit.
                log.warning("committed message to %s dropped: %s", msg.destination, exc.reason)
        store = self.ctx.store
        if txn_id is not None and store is not None:
            store.submit((TxnRemove(txn_id),))

    def rollback(
        self, txn: Transaction, redeliver: bool = False, set_redelivered: bool = True
    ) -> None:
        """ROLLBACK (from any state that is not final): forget the held sends; the
        messages acknowledged in the transaction go back to their queues, marked
        redelivered unless JMQSetRedelivered is false.  (``redeliver``, JMQRedeliver, is
        accepted for the protocol's sake: the consumed messages always come back, which
        is what both the REDELIVER-then-ROLLBACK order of the JMS clients and the
        resource adapter's JMQRedeliver ask for.)"""
        if txn.is_final:
            raise RouterError(
                Status.PRECONDITION_FAILED, f"transaction {txn.id} is already {txn.state.name}"
            )
        txn.cancel_timer()
        self._forget_transaction(txn)
        if txn.state != TransactionState.TIMED_OUT:
            self._undo(txn, set_redelivered)
        store = self.ctx.store
        if txn.stored and store is not None:
            store.submit((TxnRemove(txn.id),))
        txn.set_state(TransactionState.ROLLEDBACK)

    def _store_transaction(
        self, txn: Transaction, state: TransactionState, always: bool = False
    ) -> None:
        """Write a transaction's persistent sends and stored acknowledgements and its
        state; skipped when nothing in it is durable (unless ``always``)."""
        store = self.ctx.store
        if store is None:
            return
        if txn.stored:
            store.submit((TxnState(txn.id, int(state), txn.info()),))
            return
        records: list = [
            TxnSend(txn.id, m.store_key, m.destination, dt, m.raw)
            for m, dt in txn.sends
            if m.persistent
        ]
        records += [
            TxnAck(txn.id, e.msg.store_key, e.interest)
            for e in txn.entries.values()
            if e.interest is not None
        ]
        if not records and not always:
            return
        records.append(TxnState(txn.id, int(state), txn.info()))
        store.submit(records)
        txn.stored = True

    def _check_homes(self, txn: Transaction) -> None:
        """A local transaction that acknowledged messages whose home broker has gone
        cannot commit them: its work is rolled back (the transaction stays open, empty)
        and the commit refused with GONE and JMQRemote, as OpenMQ's broker refuses it
        (the stock Java client makes its consumers again and throws
        TransactionRolledBackException C4109).  The home delivers those messages again."""
        gone = [key[0] for key, e in txn.entries.items() if e.home_gone]
        if not gone:
            return
        self._undo(txn, True)
        txn.sends.clear()
        txn.acks.clear()
        raise RouterError(
            Status.GONE,
            f"transaction {txn.id} rolled back: it acknowledged {len(gone)} message(s) "
            "of a broker that has left the cluster",
            remote_failure(gone),
        )

    def _undo(self, txn: Transaction, set_redelivered: bool) -> None:
        entries = list(txn.entries.values())
        txn.entries = {}
        for e in entries:
            e.owner.stats.rolledback += 1
        if entries:
            sess = txn.session
            self.acks.return_unacked(sess, entries, redelivered=set_redelivered)

    def _forget_transaction(self, txn: Transaction) -> None:
        self.transactions.pop(txn.id, None)
        if txn.xid is not None and self.xids.get(txn.xid) is txn:
            del self.xids[txn.xid]

    def forget_timed_out(self, txn: Transaction) -> None:
        """A timed-out transaction's owner has been told (408): forget it."""
        if txn.state == TransactionState.TIMED_OUT:
            self._forget_transaction(txn)

    def _expire_if_due(self, txn: Transaction, now: int | None = None) -> bool:
        if txn.lifetime <= 0:
            return False
        now = now_ms() if now is None else now
        if not txn.is_expired(now):
            return False
        log.warning(
            "transaction %s%s rolled back: its lifetime of %d ms expired",
            txn.id,
            f" (Xid {txn.xid})" if txn.xid is not None else "",
            txn.lifetime,
        )
        txn.cancel_timer()
        self._undo(txn, True)
        txn.sends = []
        txn.acks = []
        txn.timed_out_at = now
        txn.set_state(TransactionState.TIMED_OUT)
        return True

    def expire_transaction(self, txn_id: int) -> int | None:
        """The lifetime timer of ``txn_id`` fired: roll it back if it is due.  Returns the
        ms still to wait when the timer fired early (None otherwise)."""
        self._purge_timed_out()
        txn = self.transactions.get(txn_id)
        if txn is None or txn.is_final:
            return None
        now = now_ms()
        if self._expire_if_due(txn, now):
            if txn.link is None:
                self._forget_transaction(txn)  # nobody left to tell
            return None
        exp = txn.expires_at
        if exp and txn.state not in (TransactionState.PREPARED, TransactionState.TIMED_OUT):
            return max(exp - now, 1)
        return None

    def expire_transactions(self, now: int | None = None) -> int:
        """Roll back every transaction past its lifetime; returns how many."""
        now = now_ms() if now is None else now
        n = sum(1 for t in list(self.transactions.values()) if self._expire_if_due(t, now))
        self._purge_timed_out(now)
        return n

    def _purge_timed_out(self, now: int | None = None) -> None:
        now = now_ms() if now is None else now
        limit = now - self.TIMED_OUT_RETENTION_MS
        for t in [
            t
            for t in self.transactions.values()
            if t.state == TransactionState.TIMED_OUT and (t.link is None or t.timed_out_at < limit)
        ]:
            self._forget_transaction(t)

    def prepared_xids(self) -> list[Xid]:
        """RECOVER_TRANSACTION: the Xids of every PREPARED XA transaction."""
        return [
            t.xid
            for t in self.transactions.values()
            if t.xid is not None and t.state == TransactionState.PREPARED
        ]

    def rollback_session(self, sess: Session) -> None:
        """A session closes: its transactions roll back, except PREPARED ones and
        JMQSessionLess ones (XA by default), which stay without it."""
        for txn in [t for t in self.transactions.values() if t.session is sess]:
            if txn.state == TransactionState.TIMED_OUT:
                self._forget_transaction(txn)
            elif txn.state == TransactionState.PREPARED or txn.session_less:
                txn.session = None
            else:
                self.rollback(txn)

    def release_transactions(self, link: Link) -> None:
        """A connection closes: the transactions associated with it roll back, except
        PREPARED ones and JMQSessionLess ones (XA by default), which live on in doubt
        until a transaction manager or an administrator finishes them."""
        for txn in [t for t in self.transactions.values() if t.link is link]:
            if txn.state == TransactionState.TIMED_OUT:
                self._forget_transaction(txn)
            elif txn.state == TransactionState.PREPARED or txn.session_less:
                txn.link = None
                txn.session = None
                log.info(
                    "transaction %s (%s) kept after its connection closed", txn.id, txn.state.name
                )
                txn.changed()
            else:
                self.rollback(txn)


__all__ = ["TransactionManager"]
