"""Recovery at start: the router rebuilt from what the message store replays.

Destinations, durable subscriptions, the messages each still owes (copies that had been
delivered come back marked redelivered) and the transactions the store holds: a commit
the crash interrupted is finished, a PREPARED one stays in doubt (or is rolled back when
imq.transaction.autorollback says so), anything else is dropped.  Auto-created
destinations come back only if they still hold messages or durable subscriptions, as
OpenMQ does.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from broker.protocol.packet import parse_packet
from broker.protocol.types import DEST_TOPIC, DMQ_NAME, TransactionState
from broker.protocol.xid import Xid
from broker.store.base import (
    QUEUE_INTEREST,
    DestRemove,
    MsgSettle,
    RecoveredState,
    StoredMessage,
    StoredTransaction,
    TxnRemove,
)

from .destination import DEST_AUTO, Destination, QueueDestination, Subscription, TopicDestination
from .errors import now_ms
from .message import Entry, Message
from .reports import no_report_info, note_no_report_options
from .selector import compile_selector
from .subscriptions import Subscriptions
from .transaction_record import Transaction

if TYPE_CHECKING:
    from broker.store.base import Store

    from .paging import Pager
    from .transaction_rules import TransactionManager


class Recovering(Protocol):
    """What recovery rebuilds: the router (:class:`~broker.core.router.MessageRouter`),
    as far as recovery reads and changes it."""

    queues: dict[str, QueueDestination]
    topics: dict[str, TopicDestination]
    dmq: QueueDestination
    txns: TransactionManager
    xa_autorollback_all: bool

    @property
    def store(self) -> Store | None: ...

    @property
    def pager(self) -> Pager | None: ...

    def lookup(self, name: str, dest_type: int) -> Destination | None: ...

    def restore_destination(
        self, name: str, dest_type: int, auto: bool, attributes: dict | None
    ) -> Destination: ...

    def forget(self, entry: Entry) -> None: ...


log = logging.getLogger("broker.router")


def recover(router: Recovering, state: RecoveredState, *, takeover: bool = False) -> dict[str, int]:
    """Rebuild ``router`` from ``state``; returns counts for the log.

    ``takeover``: ``state`` is another broker's, taken over in an HA cluster, added to a
    running router: destinations and durable subscriptions it has already are kept, and
    every message comes back marked redelivered, since the failed broker may have
    delivered it without its delivery count reaching the store."""
    store = router.store
    held = state.message_destinations
    if held is None:
        held = {(m.destination, m.dest_type) for m in state.messages}
    wanted: set[tuple[str, bool]] = {(name, bool(dtype & DEST_TOPIC)) for name, dtype in held}
    wanted |= {(d.topic, True) for d in state.durables}
    for d in state.destinations:
        is_topic = bool(d.dest_type & DEST_TOPIC)
        auto = bool(d.dest_type & DEST_AUTO)
        if d.name == DMQ_NAME:
            if not takeover:
                router.dmq.attributes.update(d.attributes)
            continue
        if takeover and router.lookup(d.name, d.dest_type):
            continue
        if auto and (d.name, is_topic) not in wanted:
            if store is not None:
                store.submit((DestRemove(d.name, d.dest_type & ~DEST_AUTO),))
            continue
        router.restore_destination(d.name, d.dest_type & ~DEST_AUTO, auto, d.attributes)
    for dur in state.durables:
        topic = router.topics.get(dur.topic) or router.restore_destination(
            dur.topic, DEST_TOPIC, True, None
        )
        assert isinstance(topic, TopicDestination)  # a DEST_TOPIC destination is one
        if takeover and Subscriptions.durable_by_id(topic, dur.sub_id) is not None:
            continue
        sub = Subscription(
            topic,
            compile_selector(dur.selector) if dur.selector else None,
            dur.no_local,
            0,
            (dur.client_id, dur.name),
            share=dur.share,
        )
        topic.add_subscription(sub, record=False)
    t = now_ms()
    n = 0
    pager = router.pager
    for sm in state.messages:
        is_topic = bool(sm.dest_type & DEST_TOPIC)
        known = (router.topics if is_topic else router.queues).get(sm.destination)
        dest: Destination = (
            known
            if known is not None
            else router.restore_destination(sm.destination, sm.dest_type, True, None)
        )
        head = sm.head
        # Loaded without its body (Store.lazy_bodies, set only by a broker that pages):
        # far back in its queue, it is packed from its head; else a Message the pager
        # reads the body of back from the store.
        lazy = sm.raw is None
        report = no_report_info(head) if lazy and head is not None else None
        msg: Message | None = None
        for interest, count in sm.interests.items():
            if interest == QUEUE_INTEREST and isinstance(dest, QueueDestination):
                q = dest.dq
            else:
                durable = Subscriptions.durable_by_id(dest, interest)
                if durable is None:
                    if store is not None:
                        store.submit((MsgSettle(sm.key, interest),))
                    continue
                q = durable.queue
            redelivered = count > 0 or takeover
            if lazy and pager is not None and head is not None:
                size = q.put_packed(
                    dest,
                    interest,
                    sm.destination,
                    sm.key,
                    head,
                    sm.size,
                    count,
                    redelivered,
                    report,
                )
                if size >= 0:
                    dest.account_in(1, size)
                    dest.msgs_in -= 1  # recovered, not newly received
                    dest.msg_bytes_in -= size
                    n += 1
                    continue
            if msg is None:
                msg = _recovered_message(router, sm)
            entry = Entry(msg, dest, q, interest)
            entry.count = count
            entry.redelivered = redelivered
            dest.account_in(1, msg.size)
            dest.msgs_in -= 1  # recovered, not newly received
            dest.msg_bytes_in -= msg.size
            q.put(entry)
            n += 1
    txns = 0
    for st in state.transactions:
        txns += _recover_transaction(router, st)
    for queue in router.queues.values():
        queue.dq.dispatch(t)
    if takeover:
        # Into a running router: a durable subscription this broker had already (the
        # failed broker's copy of it went, its messages came here) may have its consumer
        # attached now, and nothing else would start their delivery.
        for topic in router.topics.values():
            for q in topic.delivery_queues():
                q.dispatch(t)
    return {
        "destinations": len(router.queues) + len(router.topics),
        "durables": len(state.durables),
        "messages": n,
        "transactions": txns,
    }


def _recovered_message(router: Recovering, sm: StoredMessage) -> Message:
    if sm.raw is None:
        assert sm.head is not None and router.pager is not None
        msg = Message.paged(sm.head, sm.size, sm.destination, router.pager, sm.key)
        note_no_report_options(msg, sm.head)
    else:
        msg = Message(parse_packet(sm.raw), sm.destination, 0)
        msg.store_key = sm.key
    msg.stored = True  # every copy that outlives a restart is a stored one
    return msg


def _take_stored(router: Recovering, key: bytes, interest: str) -> Entry | None:
    """Take a recovered entry out of its queue (a transaction holds it)."""
    for table in (router.queues, router.topics):
        for dest in table.values():
            for q in dest.delivery_queues():
                found = q.remove_where(
                    lambda e: e.msg.store_key == key and e.interest == interest,
                    lambda run: run.interest == interest and run.may_have_store_key(key),
                )
                if found:
                    return found[0]
    return None


def _recover_transaction(router: Recovering, st: StoredTransaction) -> int:
    """Finish a commit the crash interrupted; keep a PREPARED one in doubt (or roll it
    back when imq.transaction.autorollback says so); drop anything else."""
    store = router.store
    assert store is not None
    state = TransactionState(st.state)
    t = now_ms()
    if state == TransactionState.COMMITTED:
        for send in st.sends:
            dest = router.lookup(send.destination, send.dest_type) or router.restore_destination(
                send.destination, send.dest_type, True, None
            )
            if isinstance(dest, QueueDestination) and any(
                e.msg.store_key == send.key for e in dest.dq
            ):
                continue  # its MsgAdd made it to the store before the crash
            msg = Message(parse_packet(send.raw), send.destination, 0)
            msg.store_key = send.key
            dest.publish(msg, t)
        for ack in st.acks:
            entry = _take_stored(router, ack.key, ack.interest)
            if entry is not None:
                router.forget(entry)
        store.submit((TxnRemove(st.txn_id),))
        log.info("transaction %s: its commit was completed after restart", st.txn_id)
        return 1
    if state == TransactionState.PREPARED and not router.xa_autorollback_all:
        info = st.info
        xid = Xid.decode(bytes.fromhex(info["xid"])) if info.get("xid") else None
        txn = Transaction(st.txn_id, None, state=TransactionState.PREPARED, xid=xid)
        txn.auto_rollback = info.get("auto_rollback")
        txn.session_less = bool(info.get("session_less"))
        txn.created = info.get("created") or t
        txn.client_id = info.get("client_id")
        txn.user = info.get("user")
        remote = info.get("remote")
        if remote:
            # Another broker's: it is asked what became of it when its link is up.
            txn.remote = (str(remote[0]), int(remote[1]))
        txn.remote_homes = tuple(str(h) for h in info.get("remote_homes") or ())
        txn.stored = True
        for send in st.sends:
            msg = Message(parse_packet(send.raw), send.destination, 0)
            msg.store_key = send.key
            txn.sends.append((msg, send.dest_type))
        for ack in st.acks:
            entry = _take_stored(router, ack.key, ack.interest)
            if entry is not None:
                txn.entries[(0, entry.msg.key)] = entry
        router.txns.adopt_transaction(txn)
        log.warning(
            "transaction %s (%s) is PREPARED and in doubt after restart",
            st.txn_id,
            xid or (f"remote {txn.remote[1]} of {txn.remote[0]}" if txn.remote else "local"),
        )
        return 1
    store.submit((TxnRemove(st.txn_id),))
    log.info("transaction %s (%s) rolled back at restart", st.txn_id, state.name)
    return 0


__all__ = ["recover"]
