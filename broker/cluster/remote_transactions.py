"""Another broker's transactions on messages homed here (OpenMQ's two-phase remote ack).

When a transacted session on another broker commits messages this broker sent it, that
broker (the transaction's home) asks in two steps, each a G_MESSAGE_ACK with the A bit and
``transactionID``: ``T``=ACK_TXN_PREPARE names every message of the transaction (they
must then be held: neither redelivered nor removed), then ``T``=ACK_ACKNOWLEDGED names one
of them (the whole transaction commits and its messages go).  ``T``=ACK_TXN_ROLLEDBACK
(``C``=0) after a prepare gives them back.  A rollback before any prepare sends nothing
here: the consumer's broker redelivers its own copies while its consumer lives.

Here a prepared remote transaction is a :class:`~broker.core.transaction_record.Transaction`
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

This broker does the same as the consumer's broker, for its XA transactions (as OpenMQ's
brokers do at an XA prepare): the PREPARE of a transaction holding messages homed on
other brokers sends each of those brokers one G_MESSAGE_ACK T=ACK_TXN_PREPARE naming its
messages, and the client hears "prepared" only once every one answered 200 (a refusal, a
lost link or no answer within :data:`PREPARE_TIMEOUT` leaves the transaction FAILED and
the client is refused: it rolls back).  The commit then sends T=ACK_ACKNOWLEDGED with the
same ``transactionID`` instead of the plain acknowledgements, a rollback T=ACK_TXN_ROLLEDBACK.
A home broker unreachable then is told with G_TRANSACTION_INFO when its link is up, and
one that asks (G_TRANSACTION_INQUIRY) is answered with the transaction's real state.
Local transactions commit their remote acknowledgements in one step after the local
commit, as before.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.core.errors import RouterError, now_ms
from broker.core.transaction_record import Transaction
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong
from broker.protocol.types import Status, TransactionState

from .handlers import Handlers
from .remote_delivery import InboundOrigin

if TYPE_CHECKING:
    from broker.core.message import Entry
    from broker.core.router import MessageRouter

    from .link_driver import BrokerLink
    from .peers import Peers
    from .remote_delivery import RemoteConsumer, RemoteConsumers

log = logging.getLogger("broker.cluster")

# What a G_MESSAGE_ACK_REPLY repeats of the acknowledgement it answers (OpenMQ's reply
# carries these and the acknowledgement's payload back).
ACK_REPLY_ECHO = frozenset(
    {"X", "T", "C", "messageBrokerSession", "messageStoreSession", "transactionID", "ackackAsync"}
)

# Seconds an XA PREPARE waits for the home brokers of its messages to answer theirs.
PREPARE_TIMEOUT = 60.0
# Outcomes remembered for home brokers that ask about a transaction after it finished.
_OUTCOMES_KEPT = 10000
# The X of this broker's two-phase acknowledgements (their replies repeat it).
_ack_xids = itertools.count(1)


class _PrepareRound:
    """One XA PREPARE waiting for its home brokers (X of each ack -> the home asked)."""

    __slots__ = ("txn", "done", "waiting", "timer", "finished")

    def __init__(self, txn: Transaction, done: Callable[[int, str | None], None]) -> None:
        self.txn = txn
        self.done = done
        self.waiting: dict[int, tuple[str, BrokerLink]] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.finished = False


@dataclass(frozen=True)
class _TwoPhase:
    """What an XA transaction of this broker asked its home brokers to prepare: the
    messages by home, and the id() of the entries it holds meanwhile."""

    items: dict[str, list[tuple[bytes, gp.ConsumerUID]]]
    held: frozenset[int]


def ack_payload(items: list[tuple[bytes, gp.ConsumerUID]]) -> bytes:
    """A G_MESSAGE_ACK's (or its reply's) payload: each SysMessageID and ConsumerUID."""
    w = gp.BodyWriter()
    for key, uid in items:
        w.raw(key)
        uid.write(w)
    return w.bytes()


def home_of(link: BrokerLink) -> str:
    """How a remote transaction names its home broker (kept in the store across restarts)."""
    addr = link.address
    return f"{addr.host}:{addr.port}" if addr is not None else "?"


def ack_props(
    address: dict[str, object], link: BrokerLink, ack_type: int, count: int
) -> dict[str, object]:
    """A G_MESSAGE_ACK's properties to ``link``'s broker, from this broker's
    ``address`` (Peers.address_props): OpenMQ's refuses an ack that does not name the
    session of the broker that sent the messages, and reads the acknowledging broker's
    address."""
    props: dict[str, object] = {**address, "T": ack_type, "C": count}
    peer = link.peer_info
    if peer is not None:
        props["messageBrokerSession"] = JLong(peer.session_uid)
    return props


def ack_reply(
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
        payload = ack_payload(missing)
    link.send(gp.GPacket(gp.G_MESSAGE_ACK_REPLY, props, payload))


class RemoteTransactions:
    """Two-phase acknowledgements both ways: other brokers' transactions on messages
    homed here, and this broker's XA transactions on messages homed elsewhere (a part
    of :class:`~broker.cluster.service.ClusterService`)."""

    def __init__(self, router: MessageRouter, peers: Peers, consumers: RemoteConsumers) -> None:
        self.router = router
        self.peers = peers
        # The peers' consumers attached here: what a prepare names is in their hands.
        self.consumers = consumers
        # This broker's XA transactions on messages homed on other brokers: prepares
        # waiting for the home brokers' replies (by the acks' X), what each transaction
        # holds of each home, outcomes a home has not heard yet (home -> transaction ->
        # state), the outcomes told (for inquiries after the fact), and the entries
        # those transactions hold.
        self._prepares: dict[int, _PrepareRound] = {}
        self._two_phase: dict[int, _TwoPhase] = {}
        self._owed: dict[str, dict[int, int]] = {}
        self._outcomes: dict[int, int] = {}
        self._held: set[int] = set()  # id() of the entries

    def handlers(self) -> Handlers:
        return {
            gp.G_TRANSACTION_INFO: self.transaction_info,
            gp.G_TRANSACTION_INQUIRY: self.transaction_inquiry,
            gp.G_MESSAGE_ACK_REPLY: self.message_ack_reply,
        }

    def hook(self) -> None:
        """XA prepares and outcomes of transactions on messages homed elsewhere go
        through this part."""
        self.router.observers.add_transaction_observer(self)

    def link_up(self, link: BrokerLink) -> None:
        self.inquire_remote_txns(link)
        self.tell_owed(link)

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
            ack_reply(link, pkt)
            return
        if ack_type != gp.ACK_ACKNOWLEDGED:
            ack_reply(link, pkt, 400, f"ack type {ack_type} with a transaction")
            return
        if txn is None:
            ack_reply(link, pkt, 404, f"committing remote transaction {tid}: not found")
            return
        self._commit(txn)
        self._reply_when_stored(link, pkt)

    def _reply_when_stored(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """The reply goes once what the store was given is on disk: the home broker takes
        it as the promise that this broker will do as it was told, even after a crash."""
        store = self.router.store
        if store is None:
            ack_reply(link, pkt)
        else:
            store.after_durable(lambda: ack_reply(link, pkt))

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
            rc = self.consumers.remote_for(link, uid.consumer_id)
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
            ack_reply(link, pkt, 404, f"remote transaction {tid}: {why}", missing)
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
            ack_reply(link, pkt, exc.status, exc.reason)
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
            live = {id(rc): rc for rc in self.consumers.remotes.values() if not rc.closed}
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
        """G_TRANSACTION_INQUIRY: a home broker holding messages of one of this broker's
        XA transactions prepared asks what became of it: PREPARED while undecided, its
        outcome once finished (remembered), else unknown (the home rolls its part back)."""
        tid = pkt.props.get("transactionID")
        if not isinstance(tid, int):
            raise gp.GPacketError("G_TRANSACTION_INQUIRY without transactionID")
        tid = int(tid)
        state = self._outcomes.get(tid)
        txn = self.router.txns.by_id(tid)
        if state is None and txn is not None and txn.remote is None:
            # Not prepared (FAILED, or never asked to prepare): it can only roll back.
            prepared = txn.state == TransactionState.PREPARED
            state = int(TransactionState.PREPARED if prepared else TransactionState.ROLLEDBACK)
        if state is None:
            state = int(TransactionState.NULL)
        owed = self._owed.get(home_of(link))
        if owed is not None and state != TransactionState.PREPARED:
            owed.pop(tid, None)
        log.info("broker %s asked about transaction %s: %s", link.address, tid, _state_name(state))
        self._send_info(link, tid, state, pkt.props.get("X"))

    # -- this broker's XA transactions on messages homed elsewhere ------------------------

    def _send_info(self, link: BrokerLink, tid: int, state: int, xid: object = None) -> None:
        # As the transaction's owner (OpenMQ marks it so, with the owner's address).
        props: dict[str, object] = {
            "transactionID": JLong(tid),
            "transactionState": state,
            "owner": True,
            **self.peers.address_props(),
        }
        if xid is not None:
            props["X"] = xid
        link.send(gp.GPacket(gp.G_TRANSACTION_INFO, props))

    def _link_to_home(self, home: str) -> BrokerLink | None:
        for link in self.peers.links.values():
            if not link.closed and home_of(link) == home:
                return link
        return None

    def held_two_phase(self, entry: Entry) -> bool:
        """Whether ``entry`` is in a transaction its home broker prepared: its home hears
        the transaction's outcome, not a plain acknowledgement."""
        return id(entry) in self._held

    def _two_phase_ack(
        self,
        link: BrokerLink,
        ack_type: int,
        tid: int,
        items: list[tuple[bytes, gp.ConsumerUID]],
    ) -> int:
        """One G_MESSAGE_ACK of a transaction, as OpenMQ's brokers send it; returns its X."""
        x = next(_ack_xids)
        props = ack_props(self.peers.address_props(), link, ack_type, len(items))
        props.update(transactionID=JLong(tid), X=JLong(x))
        link.send(gp.GPacket(gp.G_MESSAGE_ACK, props, ack_payload(items), flags=gp.A_BIT))
        return x

    def prepare_remote(self, txn: Transaction, done: Callable[[int, str | None], None]) -> bool:
        """The engine's XA PREPARE asks this (through the service, the engine's
        ClusterPort): ask the home broker of each message ``txn``
        consumed from another broker to prepare them; ``done(status, reason)`` once all
        answered.  False (nothing asked) when every message is homed here."""
        homes: dict[str, tuple[BrokerLink, list[tuple[bytes, gp.ConsumerUID]]]] = {}
        held: list[Entry] = []
        for entry in txn.entries.values():
            origin = entry.owner
            if isinstance(origin, InboundOrigin):
                slot = homes.setdefault(home_of(origin.peer), (origin.peer, []))
                slot[1].append((entry.msg.key, origin._ack_uid(entry)))
                held.append(entry)
        if not homes:
            return False
        txn.remote_homes = tuple(sorted(homes))
        self.router.txns.restate(txn)  # a restart must still know whom to tell
        held_ids = frozenset(id(e) for e in held)
        self._two_phase[txn.id] = _TwoPhase(
            {h: items for h, (_link, items) in homes.items()}, held_ids
        )
        self._held |= held_ids
        rnd = _PrepareRound(txn, done)
        for home, (link, items) in homes.items():
            if link.closed:
                self._finish_prepare(rnd, Status.ERROR, f"broker {home} is not linked")
                return True
            x = self._two_phase_ack(link, gp.ACK_TXN_PREPARE, txn.id, items)
            rnd.waiting[x] = (home, link)
            self._prepares[x] = rnd
        loop = self.peers.loop or asyncio.get_running_loop()
        rnd.timer = loop.call_later(PREPARE_TIMEOUT, self._prepare_timed_out, rnd)
        return True

    def _prepare_timed_out(self, rnd: _PrepareRound) -> None:
        homes = ", ".join(sorted({home for home, _link in rnd.waiting.values()}))
        self._finish_prepare(
            rnd, Status.ERROR, f"broker {homes} did not answer within {PREPARE_TIMEOUT:g} s"
        )

    def _finish_prepare(self, rnd: _PrepareRound, status: int, reason: str | None) -> None:
        if rnd.finished:
            return
        rnd.finished = True
        if rnd.timer is not None:
            rnd.timer.cancel()
        for x in rnd.waiting:
            self._prepares.pop(x, None)
        if reason is not None:
            reason = f"messages of transaction {rnd.txn.id} homed on another broker: {reason}"
        rnd.done(status, reason)

    def message_ack_reply(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """G_MESSAGE_ACK_REPLY to one of this broker's two-phase acknowledgements."""
        x = pkt.props.get("X")
        status = pkt.props.get("S")
        if not isinstance(x, int):
            return
        rnd = self._prepares.pop(x, None)
        if rnd is None:
            if status != 200 and pkt.props.get("T") in (gp.ACK_ACKNOWLEDGED, gp.ACK_TXN_ROLLEDBACK):
                log.warning(
                    "broker %s refused the outcome of transaction %s: %s %s",
                    link.address,
                    pkt.props.get("transactionID"),
                    status,
                    pkt.props.get("reason"),
                )
            return
        home, _link = rnd.waiting.pop(x)
        if status != 200:
            why = pkt.props.get("reason")
            self._finish_prepare(rnd, Status.ERROR, f"broker {home} refused: {status} {why}")
        elif not rnd.waiting:
            self._finish_prepare(rnd, Status.OK, None)

    def prepares_link_down(self, link: BrokerLink) -> None:
        """A link went: the prepares waiting for its broker fail."""
        for rnd in {id(r): r for r in self._prepares.values()}.values():
            if any(w is link for _home, w in rnd.waiting.values()):
                self._finish_prepare(rnd, Status.ERROR, f"link to broker {home_of(link)} lost")

    def transaction_changed(self, txn: Transaction) -> None:
        """A transaction observer (core/observers.py): one of this broker's transactions that other brokers
        prepared committed or rolled back; tell them (now, or when their link is up)."""
        if txn.state == TransactionState.COMMITTED:
            outcome = TransactionState.COMMITTED
        elif txn.state in (TransactionState.ROLLEDBACK, TransactionState.TIMED_OUT):
            outcome = TransactionState.ROLLEDBACK
        else:
            return
        record = self._two_phase.pop(txn.id, None)
        if record is None and not txn.remote_homes:
            return
        items = None
        if record is not None:
            # (A rollback has emptied txn.entries by now: the record knows what it held.)
            items = record.items
            self._held -= record.held
        self._outcomes[txn.id] = int(outcome)
        if len(self._outcomes) > _OUTCOMES_KEPT:
            del self._outcomes[next(iter(self._outcomes))]
        for home in txn.remote_homes:
            link = self._link_to_home(home)
            mine = items.get(home) if items is not None else None
            if link is None:
                log.info(
                    "transaction %s %s: broker %s is told when its link is up",
                    txn.id,
                    outcome.name,
                    home,
                )
                self._owed.setdefault(home, {})[txn.id] = int(outcome)
            elif mine is None:  # restarted since the prepare: the messages are not known
                self._send_info(link, txn.id, int(outcome))
            elif outcome == TransactionState.COMMITTED:
                self._two_phase_ack(link, gp.ACK_ACKNOWLEDGED, txn.id, mine)
            else:
                self._two_phase_ack(link, gp.ACK_TXN_ROLLEDBACK, txn.id, [])

    def tell_owed(self, link: BrokerLink) -> None:
        """A link is up: the outcomes its broker has not heard yet."""
        for tid, state in self._owed.pop(home_of(link), {}).items():
            self._send_info(link, tid, state)


def _state_name(state: int) -> str:
    try:
        return TransactionState(state).name
    except ValueError:
        return f"state {state}"


__all__ = [
    "ACK_REPLY_ECHO",
    "RemoteTransactions",
    "ack_payload",
    "ack_props",
    "ack_reply",
    "home_of",
]
