"""Another broker's transactions on messages homed here (OpenMQ's two-phase remote ack).

When a transacted session on another broker commits messages this broker sent it, that
broker (the transaction's home) asks in two steps, each a G_MESSAGE_ACK with the A bit and
``transactionID``: ``T``=ACK_TXN_PREPARE names every message of the transaction (they
must then be held: neither redelivered nor removed), then ``T``=ACK_ACKNOWLEDGED names one
of them (the whole transaction commits and its messages go).  ``T``=ACK_TXN_ROLLEDBACK
(``C``=0) after a prepare gives them back.  A rollback before any prepare sends nothing
here: the consumer's broker redelivers its own copies while its consumer lives.

Here a prepared remote transaction is a :class:`~broker.core.transaction.Transaction`
in the router's transaction table, PREPARED, holding the entries (taken out of the
remote consumer's in-flight table) and marked with its home broker and id
(``Transaction.remote``).  Its persistent messages' acknowledgements and its state go to
the message store before the prepare is answered, like a local PREPARED transaction, so
a restart between prepare and commit finds the messages held (recovery), neither lost nor
delivered again.  Whenever a link to its home broker comes up (after such a restart, or
after a link dropped between prepare and commit), this broker asks that broker what became
of it (G_TRANSACTION_INQUIRY); the answer, or a G_TRANSACTION_INFO the home broker sends
of its own accord, commits or rolls it back.  A home broker that no longer knows it gets
it rolled back: its messages come again, marked redelivered, rather than being lost.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.core.errors import RouterError, now_ms
from broker.core.transaction import Transaction
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong
from broker.protocol.types import TransactionState

from .state import ClusterState

if TYPE_CHECKING:
    from broker.core.message import Entry

    from .link import BrokerLink
    from .remote import RemoteConsumer

log = logging.getLogger("broker.cluster")

# What a G_MESSAGE_ACK_REPLY repeats of the acknowledgement it answers (OpenMQ's reply
# carries these and the acknowledgement's payload back).
ACK_REPLY_ECHO = frozenset(
    {"X", "T", "C", "messageBrokerSession", "messageStoreSession", "transactionID", "ackackAsync"}
)


def home_of(link: BrokerLink) -> str:
    """How a remote transaction names its home broker (kept in the store across restarts)."""
    addr = link.address
    return f"{addr.host}:{addr.port}" if addr is not None else "?"


class RemoteTxnRules(ClusterState):
    """The remote-transaction part of :class:`~broker.cluster.service.ClusterService`
    (a mixin)."""

    def ack_reply(
        self,
        link: BrokerLink,
        pkt: gp.GPacket,
        status: int = 200,
        reason: str | None = None,
        missing: list[tuple[bytes, gp.ConsumerUID]] | None = None,
    ) -> None:
        """G_MESSAGE_ACK_REPLY, if the acknowledgement asked for one (the A bit)."""
        if not pkt.wants_reply or link.closed:
            return
        props = {k: v for k, v in pkt.props.items() if k in ACK_REPLY_ECHO}
        props["S"] = status
        if reason is not None:
            props["reason"] = reason
        payload = pkt.payload
        if missing:
            props["notfound"] = len(missing)
            w = gp.BodyWriter()
            for key, uid in missing:
                w.raw(key)
                uid.write(w)
            payload = w.bytes()
        link.send(gp.GPacket(gp.G_MESSAGE_ACK_REPLY, props, payload))

    def remote_txn(self, home: str, tid: int) -> Transaction | None:
        for txn in self.router.txns.all_transactions():
            if txn.remote == (home, tid):
                return txn
        return None

    def txn_ack(
        self,
        link: BrokerLink,
        pkt: gp.GPacket,
        ack_type: int,
        tid: int,
        items: list[tuple[bytes, gp.ConsumerUID]],
    ) -> None:
        """A G_MESSAGE_ACK with a ``transactionID``: prepare, commit or roll back."""
        home = home_of(link)
        if ack_type == gp.ACK_TXN_PREPARE:
            self._prepare(link, pkt, home, tid, items)
            return
        txn = self.remote_txn(home, tid)
        if ack_type == gp.ACK_TXN_ROLLEDBACK:
            if txn is None:
                log.info("remote transaction %s of %s rolled back: nothing held here", tid, home)
            else:
                self._rollback(txn, keep_with_consumer=True)
            self.ack_reply(link, pkt)
            return
        if ack_type != gp.ACK_ACKNOWLEDGED:
            self.ack_reply(link, pkt, 400, f"ack type {ack_type} with a transaction")
            return
        if txn is None:
            self.ack_reply(link, pkt, 404, f"committing remote transaction {tid}: not found")
            return
        self._commit(txn)
        self._reply_when_stored(link, pkt)

    def _reply_when_stored(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """The reply goes once what the store was given is on disk: the home broker takes
        it as the promise that this broker will do as it was told, even after a crash."""
        store = self.router.store
        if store is None:
            self.ack_reply(link, pkt)
        else:
            store.after_durable(lambda: self.ack_reply(link, pkt))

    def _prepare(
        self,
        link: BrokerLink,
        pkt: gp.GPacket,
        home: str,
        tid: int,
        items: list[tuple[bytes, gp.ConsumerUID]],
    ) -> None:
        found: list[tuple[RemoteConsumer, bytes, Entry]] = []
        missing: list[tuple[bytes, gp.ConsumerUID]] = []
        for key, uid in items:
            rc = self._remote_for(link, uid.consumer_id)
            entry = rc.inflight.get(key) if rc is not None else None
            if rc is None or entry is None or any(f[2] is entry for f in found):
                missing.append((key, uid))
            else:
                found.append((rc, key, entry))
        if missing or self.remote_txn(home, tid) is not None:
            # As OpenMQ: nothing is held, and the home broker is told which are gone
            # (redelivered elsewhere meanwhile); it rolls the transaction back.
            why = "not delivered to that consumer (maybe rerouted)" if missing else "again"
            log.warning(
                "remote transaction %s of %s not prepared: %d message(s) %s",
                tid,
                home,
                len(missing),
                why,
            )
            self.ack_reply(link, pkt, 404, f"remote transaction {tid}: {why}", missing)
            return
        txn = Transaction(self.router.uids.next(), None, session_less=True)
        txn.remote = (home, tid)
        for rc, key, entry in found:
            del rc.inflight[key]
            txn.entries[(rc.id, key)] = entry
        self.router.txns.adopt_transaction(txn)
        try:
            self.router.txns.prepare(txn)
        except RouterError as exc:  # pragma: no cover - a fresh STARTED one always prepares
            self.ack_reply(link, pkt, exc.status, exc.reason)
            return
        self._reply_when_stored(link, pkt)
        t = now_ms()
        for rc in {id(rc): rc for rc, _k, _e in found}.values():
            rc.queue.dispatch(t)  # their window has room again

    def _commit(self, txn: Transaction) -> None:
        self.router.txns.commit(txn, None)

    def _rollback(self, txn: Transaction, keep_with_consumer: bool) -> None:
        """Give the held messages back: to the remote consumer that has them, while it is
        still attached (its broker redelivers them to its client, as OpenMQ's home broker
        leaves them), else to their queues, marked redelivered."""
        if keep_with_consumer:
            live = {id(rc): rc for rc in self.remotes.values() if not rc.closed}
            for k, entry in list(txn.entries.items()):
                rc = entry.consumer
                if rc is not None and id(rc) in live:
                    live[id(rc)].inflight[entry.msg.key] = entry
                    del txn.entries[k]
        self.router.txns.rollback(txn)

    # -- in doubt: the link went between prepare and commit ----------------------------

    def inquire_remote_txns(self, link: BrokerLink) -> None:
        """A link to a broker is up: ask it about each of its transactions prepared here."""
        home = home_of(link)
        for txn in self.router.txns.all_transactions():
            if txn.remote is not None and txn.remote[0] == home:
                if txn.state == TransactionState.PREPARED:
                    log.info(
                        "remote transaction %s of %s prepared here: asking its home broker",
                        txn.remote[1],
                        home,
                    )
                    link.send(
                        gp.GPacket(
                            gp.G_TRANSACTION_INQUIRY,
                            {"transactionID": JLong(txn.remote[1])},
                            flags=gp.A_BIT,
                        )
                    )

    def transaction_info(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """G_TRANSACTION_INFO: what became of a transaction of the sending broker (an
        answer to our inquiry, or told of its own accord once the link is back)."""
        tid = pkt.props.get("transactionID")
        state = pkt.props.get("transactionState")
        if not isinstance(tid, int) or not isinstance(state, int):
            raise gp.GPacketError("G_TRANSACTION_INFO without transactionID or transactionState")
        home = home_of(link)
        txn = self.remote_txn(home, int(tid))
        if txn is None or txn.state != TransactionState.PREPARED:
            return
        if state == TransactionState.COMMITTED:
            log.info("remote transaction %s of %s: committed by its home broker", tid, home)
            self._commit(txn)
        elif state in (TransactionState.PREPARED, TransactionState.COMPLETE):
            # Its home broker has not decided yet: it tells when it does (or we ask again
            # at the next link up).
            log.info("remote transaction %s of %s: still undecided at its home", tid, home)
        else:
            log.info(
                "remote transaction %s of %s: %s at its home broker, rolled back here",
                tid,
                home,
                _state_name(state),
            )
            self._rollback(txn, keep_with_consumer=False)

    def transaction_inquiry(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """G_TRANSACTION_INQUIRY: this broker never asks another to prepare (it commits its
        consumers' remote acknowledgements after the local commit), so no transaction of
        its own is in doubt anywhere: the answer is that it does not know it."""
        tid = pkt.props.get("transactionID")
        if not isinstance(tid, int):
            raise gp.GPacketError("G_TRANSACTION_INQUIRY without transactionID")
        props: dict[str, object] = {
            "transactionID": JLong(int(tid)),
            "transactionState": int(TransactionState.NULL),
        }
        if "X" in pkt.props:
            props["X"] = pkt.props["X"]
        link.send(gp.GPacket(gp.G_TRANSACTION_INFO, props))

    if TYPE_CHECKING:  # provided by DeliveryRules

        def _remote_for(self, link: BrokerLink, consumer_id: int) -> RemoteConsumer | None: ...


def _state_name(state: int) -> str:
    try:
        return TransactionState(state).name
    except ValueError:
        return f"state {state}"


__all__ = ["ACK_REPLY_ECHO", "RemoteTxnRules", "home_of"]
