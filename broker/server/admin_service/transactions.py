"""Admin requests about transactions (OpenMQ's GetTransactionsHandler,
RollbackCommitHandler): GET_TRANSACTIONS, COMMIT_TRANSACTION (of a PREPARED one) and
ROLLBACK_TRANSACTION."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.core import queries
from broker.engine.base import EngineBase
from broker.protocol.javaser import encode_vector
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import JMQ_QUANTITY, JMQ_TRANSACTION_ID
from broker.protocol.types import Status, TransactionState

from .common import AdminError, Result, log, long_prop

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


# GetTransactionsHandler's transaction types.
TXN_LOCAL = 0


def get_transactions(conn: ConnectionEngine, props: dict) -> Result:
    """GET_TRANSACTIONS: a Hashtable per transaction (GetTransactionsHandler's keys),
    JMQQuantity = how many."""
    router = conn.router
    wanted = long_prop(props, JMQ_TRANSACTION_ID)
    if wanted is not None:
        txn = queries.transaction_by_id(router, wanted)
        if txn is None:
            raise AdminError(Status.NOT_FOUND, f"no transaction {wanted}")
        txns = [txn]
    else:
        txns = queries.transactions(router)
    rows = []
    for txn in txns:
        row: dict[str, object] = {"type": JInt(TXN_LOCAL)}
        if txn.xid is not None:
            row["xid"] = str(txn.xid)
        row["txnid"] = str(txn.id)
        if txn.user:
            row["user"] = txn.user
        if txn.client_id:
            row["clientid"] = txn.client_id
        row["timestamp"] = JLong(txn.created)
        # A transaction of a client connection (a remote one's link is the cluster's).
        link = txn.link
        row["connection"] = (
            (f"{link.user or ''}@{link.peer}" if isinstance(link, EngineBase) else "@")
            if link
            else ""
        )
        row["nmsgs"] = JInt(len(txn.sends))
        row["nacks"] = JInt(txn.held_ack_count)
        row["state"] = JInt(int(txn.state))
        if txn.connection_id:
            row["connectionid"] = JLong(txn.connection_id)
        row["homebroker"] = ""
        row["allbrokers"] = ""
        row["pendingbrokers"] = ""
        rows.append(row)
    return {JMQ_QUANTITY: JInt(len(rows))}, encode_vector(rows)


def _transaction(conn: ConnectionEngine, props: dict):
    tid = long_prop(props, JMQ_TRANSACTION_ID, required=True)
    assert tid is not None  # required
    txn = queries.transaction_by_id(conn.router, tid)
    if txn is None:
        raise AdminError(Status.NOT_FOUND, f"no transaction {tid}")
    return txn


def commit_transaction(conn: ConnectionEngine, props: dict):
    """COMMIT_TRANSACTION of a PREPARED transaction (in doubt, or anyone's); the reply
    waits until the store has the commit."""
    txn = _transaction(conn, props)
    if txn.state != TransactionState.PREPARED:
        raise AdminError(
            Status.PRECONDITION_FAILED,
            f"transaction {txn.id} is {txn.state.name}, not PREPARED: it cannot be "
            "committed by an administrator",
        )
    conn.router.txns.commit(txn, None)
    log.info("transaction %s committed by the administrator %s", txn.id, conn.user)
    broker = conn.broker
    loop = asyncio.get_running_loop()
    stored: asyncio.Future = loop.create_future()
    broker.when_stored(lambda: stored.done() or stored.set_result(None))

    async def wait() -> Result:
        await stored
        return {}, b""

    return wait()


def rollback_transaction(conn: ConnectionEngine, props: dict) -> Result:
    """ROLLBACK_TRANSACTION of a transaction between STARTED and PREPARED; a local one
    only once PREPARED (its client still works in it otherwise)."""
    txn = _transaction(conn, props)
    state = txn.state
    if not TransactionState.STARTED <= state <= TransactionState.PREPARED:
        raise AdminError(
            Status.PRECONDITION_FAILED,
            f"transaction {txn.id} is {state.name}: it cannot be rolled back",
        )
    if txn.xid is None and state != TransactionState.PREPARED:
        raise AdminError(
            Status.PRECONDITION_FAILED,
            f"rollback of non-XA transaction {txn.id} in state {state.name} is not "
            "supported (only PREPARED ones)",
        )
    conn.router.txns.rollback(txn)
    log.info("transaction %s rolled back by the administrator %s", txn.id, conn.user)
    return {}, b""
