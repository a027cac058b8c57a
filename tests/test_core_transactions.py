"""Transactions (broker/core/transaction_rules.py) on a real in-process router: a local
transaction holds its sends until COMMIT, which routes them in order, and its
acknowledgements, which ROLLBACK returns to their queues flagged redelivered; who may
finish a transaction, and the XA states (START / END / PREPARE / COMMIT) with the
statuses OpenMQ's broker answers (404, 409, 410, 412, 403, 408)."""

from __future__ import annotations

import pytest

from broker.core.errors import RouterError
from broker.core.router import MessageRouter
from broker.protocol.types import DEST_QUEUE, Status, TransactionState, XAFlag
from broker.protocol.xid import Xid

from .routerkit import Conn, Delivery, msg, pending, send, session

pytestmark = pytest.mark.fast


def _status(fn, *args, **kw) -> int:
    with pytest.raises(RouterError) as refused:
        fn(*args, **kw)
    return refused.value.status


def test_sends_are_held_until_commit_and_then_routed_in_order() -> None:
    r = MessageRouter()
    conn = Conn(1)
    sess = session(r, conn, ack_mode=0)  # SESSION_TRANSACTED
    txn = r.txns.start_transaction(sess)
    for n in (1, 2, 3):
        r.txns.transacted_send(txn, msg("q", n), DEST_QUEUE, conn)
    assert pending(r, "q") == [] and r.queues["q"].msg_count == 0
    r.txns.commit(txn, conn)
    assert pending(r, "q") == [b"\x01", b"\x02", b"\x03"]
    assert txn.state == TransactionState.COMMITTED and txn.id not in r.txns.transactions


def test_rollback_forgets_the_held_sends() -> None:
    r = MessageRouter()
    conn = Conn(1)
    sess = session(r, conn, ack_mode=0)
    txn = r.txns.start_transaction(sess)
    r.txns.transacted_send(txn, msg("q", 1), DEST_QUEUE, conn)
    r.txns.rollback(txn)
    assert pending(r, "q") == [] and r.totals.count == 0
    assert txn.state == TransactionState.ROLLEDBACK


def test_a_too_large_transacted_send_is_refused_at_once() -> None:
    r = MessageRouter()
    conn = Conn(1)
    txn = r.txns.start_transaction(session(r, conn, ack_mode=0))
    r.ensure_destination("q", DEST_QUEUE, None).attributes["maxBytesPerMsg"] = 1
    assert _status(r.txns.transacted_send, txn, msg("q", 1), DEST_QUEUE, conn) == (
        Status.ENTITY_TOO_LARGE
    )
    assert txn.sends == []


def _consumed_in_txn(r: MessageRouter, n: int = 2):
    conn = Conn(1)
    sess = session(r, conn, ack_mode=0)
    cons = r.add_consumer(sess, "q", DEST_QUEUE)
    send(r, conn, "q", *range(1, n + 1))
    txn = r.txns.start_transaction(sess)
    r.txns.transacted_ack(txn, sess, list(sess.unacked))
    return conn, sess, cons, txn


def test_acknowledgements_are_applied_by_commit() -> None:
    r = MessageRouter()
    conn, sess, _cons, txn = _consumed_in_txn(r)
    q = r.queues["q"]
    assert sess.unacked == {} and q.msg_count == 2  # held, not yet settled
    r.txns.commit(txn, conn)
    assert q.msg_count == 0 and r.totals.count == 0 and q.stats.acked == 2
    assert conn.bodies() == [b"\x01", b"\x02"]  # nothing redelivered


@pytest.mark.parametrize("flagged", [True, False])
def test_rollback_returns_the_acknowledged_messages_redelivered(flagged: bool) -> None:
    r = MessageRouter()
    conn, sess, cons, txn = _consumed_in_txn(r)
    r.txns.rollback(txn, set_redelivered=flagged)
    assert conn.deliveries()[2:] == [
        Delivery(cons.id, b"\x01", flagged),
        Delivery(cons.id, b"\x02", flagged),
    ]
    q = r.queues["q"]
    assert q.msg_count == 2 and q.stats.rolledback == 2 and len(sess.unacked) == 2


def test_closing_the_consumer_does_not_redeliver_what_a_transaction_holds() -> None:
    r = MessageRouter()
    conn, sess, cons, txn = _consumed_in_txn(r)
    r.remove_consumer(cons, None, redeliver_all=True)
    assert pending(r, "q") == []  # the transaction may still commit them
    r.txns.commit(txn, conn)
    assert r.queues["q"].msg_count == 0


def test_closing_the_session_rolls_its_local_transaction_back() -> None:
    r = MessageRouter()
    conn, sess, _cons, txn = _consumed_in_txn(r)
    r.txns.transacted_send(txn, msg("other", 9), DEST_QUEUE, conn)
    r.destroy_session(sess)
    assert txn.state == TransactionState.ROLLEDBACK
    assert pending(r, "q") == [b"\x01", b"\x02"] and pending(r, "other") == []
    assert [e.redelivered for e in r.queues["q"].dq] == [True, True]


def test_a_finished_transaction_cannot_be_finished_again() -> None:
    r = MessageRouter()
    conn = Conn(1)
    sess = session(r, conn, ack_mode=0)
    txn = r.txns.start_transaction(sess)
    r.txns.commit(txn, conn)
    assert _status(r.txns.commit, txn, conn) == Status.PRECONDITION_FAILED
    assert _status(r.txns.rollback, txn) == Status.PRECONDITION_FAILED
    assert _status(r.txns.transacted_send, txn, msg("q", 1), DEST_QUEUE, conn) == (
        Status.PRECONDITION_FAILED
    )
    assert "q" not in r.queues  # the refused send made nothing


def test_unknown_and_foreign_transactions_are_refused() -> None:
    r = MessageRouter()
    mine, theirs = Conn(1), Conn(2)
    txn = r.txns.start_transaction(session(r, mine, ack_mode=0))
    assert _status(r.txns.find_transaction, 12345) == Status.NOT_FOUND
    assert _status(r.txns.transaction, 12345, mine) == Status.GONE
    # Another connection may not send in, or finish, a local transaction of mine.
    assert _status(r.txns.transaction, txn.id, theirs) == Status.FORBIDDEN
    assert _status(r.txns.check_control, txn, theirs) == Status.FORBIDDEN
    assert r.txns.transaction(txn.id, mine) is txn
    r.txns.check_control(txn, mine)  # its own connection may


def test_a_transaction_past_its_lifetime_is_rolled_back_and_answers_timeout() -> None:
    r = MessageRouter()
    conn, sess, cons, txn = _consumed_in_txn(r)
    txn.lifetime = 1000
    assert r.txns.expire_transactions(now=txn.created + 999) == 0
    assert r.txns.expire_transactions(now=txn.created + 1000) == 1
    assert txn.state == TransactionState.TIMED_OUT
    assert conn.deliveries()[2:] == [
        Delivery(cons.id, b"\x01", True),
        Delivery(cons.id, b"\x02", True),
    ]
    assert _status(r.txns.transaction, txn.id, conn) == Status.TIMEOUT
    assert _status(r.txns.commit, txn, conn) == Status.TIMEOUT


XID = Xid(1, b"global", b"branch")


def test_xa_two_phase_commit_follows_the_state_rules() -> None:
    r = MessageRouter()
    conn = Conn(1)
    sess = session(r, conn, ack_mode=0)
    txn = r.txns.xa_start(conn, sess, XID, XAFlag.TMNOFLAGS)
    assert _status(r.txns.xa_start, conn, sess, XID, XAFlag.TMNOFLAGS) == Status.CONFLICT
    r.txns.transacted_send(txn, msg("q", 1), DEST_QUEUE, conn)
    assert _status(r.txns.prepare, txn) == Status.PRECONDITION_FAILED  # END first
    r.txns.end_transaction(txn, XAFlag.TMSUCCESS)
    assert txn.state == TransactionState.COMPLETE
    assert _status(r.txns.commit, txn, conn) == Status.PRECONDITION_FAILED  # PREPARE first
    r.txns.prepare(txn)
    assert r.txns.prepared_xids() == [XID]
    r.txns.commit(txn, conn)
    assert pending(r, "q") == [b"\x01"] and r.txns.prepared_xids() == [] and XID not in r.txns.xids


def test_xa_one_phase_commit_from_complete() -> None:
    r = MessageRouter()
    conn = Conn(1)
    txn = r.txns.xa_start(conn, session(r, conn, ack_mode=0), XID, XAFlag.TMNOFLAGS)
    r.txns.transacted_send(txn, msg("q", 1), DEST_QUEUE, conn)
    r.txns.end_transaction(txn, XAFlag.TMSUCCESS)
    r.txns.commit(txn, conn, one_phase=True)
    assert pending(r, "q") == [b"\x01"]


def test_xa_suspend_resume_and_join() -> None:
    r = MessageRouter()
    conn = Conn(1)
    sess = session(r, conn, ack_mode=0)
    txn = r.txns.xa_start(conn, sess, XID, XAFlag.TMNOFLAGS)
    r.txns.end_transaction(txn, XAFlag.TMSUSPEND)
    assert txn.state == TransactionState.INCOMPLETE
    assert _status(r.txns.xa_start, conn, sess, XID, XAFlag.TMJOIN) == Status.PRECONDITION_FAILED
    assert r.txns.xa_start(conn, sess, XID, XAFlag.TMRESUME) is txn
    assert txn.state == TransactionState.STARTED
    unknown = Xid(2, b"nobody")
    assert _status(r.txns.xa_start, conn, sess, unknown, XAFlag.TMRESUME) == Status.NOT_FOUND
    assert _status(r.txns.end_transaction, r.txns.start_transaction(sess), XAFlag.TMSUCCESS) == (
        Status.BAD_REQUEST  # a local transaction has no END
    )


def test_a_prepared_xa_transaction_outlives_its_connection_and_is_finished_elsewhere() -> None:
    r = MessageRouter()
    conn, recovery = Conn(1), Conn(2)
    sess = session(r, conn, ack_mode=0)
    cons = r.add_consumer(sess, "q", DEST_QUEUE)
    send(r, conn, "q", 1)
    txn = r.txns.xa_start(conn, sess, XID, XAFlag.TMNOFLAGS)
    r.txns.transacted_ack(txn, sess, list(sess.unacked))
    r.txns.transacted_send(txn, msg("out", 2), DEST_QUEUE, conn)
    r.txns.end_transaction(txn, XAFlag.TMSUCCESS)
    r.txns.prepare(txn)
    r.remove_consumer(cons, None, redeliver_all=True)
    r.connection_closed(conn, [sess])
    assert txn.state == TransactionState.PREPARED and txn.in_doubt
    assert pending(r, "q") == [] and r.queues["q"].msg_count == 1  # still held
    # A transaction manager's recovery, on another connection, finds and commits it.
    assert r.txns.prepared_xids() == [XID]
    found = r.txns.find_transaction(0, XID)
    r.txns.check_control(found, recovery)
    r.txns.commit(found, recovery)
    assert r.queues["q"].msg_count == 0 and pending(r, "out") == [b"\x02"]


def test_a_local_transaction_goes_with_its_connection() -> None:
    r = MessageRouter()
    conn = Conn(1)
    sess = session(r, conn, ack_mode=0)
    txn = r.txns.start_transaction(sess)
    r.txns.transacted_send(txn, msg("q", 1), DEST_QUEUE, conn)
    r.connection_closed(conn, [sess])
    assert txn.state == TransactionState.ROLLEDBACK and r.txns.transactions == {}
    assert pending(r, "q") == []
