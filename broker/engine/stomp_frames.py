"""The STOMP engine's frame rules: SEND, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, BEGIN, COMMIT,
ABORT and DISCONNECT, each turned into the JMQ requests it means (stomp_base.py)."""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

from broker.core.errors import RouterError
from broker.protocol.errors import ProtocolError
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_ACK_MODE,
    JMQ_CLIENT_ID,
    JMQ_CONSUMER_ID,
    JMQ_DEST_TYPE,
    JMQ_DESTINATION,
    JMQ_DURABLE_NAME,
    JMQ_NO_LOCAL,
    JMQ_REASON,
    JMQ_REDELIVER,
    JMQ_REDELIVER_ALL,
    JMQ_SELECTOR,
    JMQ_SESSION_ID,
    JMQ_SET_REDELIVERED,
    JMQ_SIZE,
    JMQ_STATUS,
    JMQ_TRANSACTION_ID,
)
from broker.protocol.packet import VH_TRANSACTIONID, Packet
from broker.protocol.properties import CONNECTION_CACHE, remember
from broker.protocol.stomp import Frame
from broker.protocol.sysmsgid import IP_ZERO, ip_field
from broker.protocol.types import DEST_TEMP, DEST_TOPIC, FLAG_A, AckMode, PacketType, Status

from .states import READY
from .stomp_base import SEND_OK_HEAD, SEND_OK_REST, Reply, StompEngineBase, Subscription
from .stomp_mapping import MappingError, SendShape, StompDest, parse_destination
from .stomp_states import CLOSED

log = logging.getLogger("broker.stomp")

_ACK_BLOCK = struct.Struct(">q32s")
_I64 = struct.Struct(">q")
_ACK_MODES = {
    "auto": AckMode.NO_ACKNOWLEDGE,
    "client": AckMode.CLIENT_ACKNOWLEDGE,
    "client-individual": AckMode.CLIENT_ACKNOWLEDGE,
}


class StompFrameRules(StompEngineBase):
    """The client frames after CONNECT."""

    __slots__ = ()

    def _status_reply(self, f: Frame, what: str, then: Callable[[], None] | None = None) -> Reply:
        def answered(pkt: Packet) -> None:
            status = pkt.properties.get(JMQ_STATUS)
            if status == Status.OK:
                if then is not None:
                    then()
                self._receipt(f)
            else:
                reason = pkt.properties.get(JMQ_REASON) or f"status {status}"
                log.info("STOMP connection %s: %s refused: %s", self.id, what, reason)
                self._error(f"{what} refused: {reason}", f)

        return answered

    def _dest(self, text: str | None) -> StompDest:
        """The destination a header names, parsed once per connection and name."""
        dests = self._dests
        d = dests.get(text) if text else None
        if d is None:
            d = parse_destination(text, self.id)
            if len(dests) >= 64:
                dests.clear()  # a connection that sends to ever new names
            dests[d.stomp] = d
        return d

    def _ensure_temp(self, dest: StompDest) -> None:
        if dest.dtype & DEST_TEMP and dest.name not in self._temps:
            own = f"stomp/{self.id}/"
            if own not in dest.name:
                return  # another connection's: it exists or it does not
            self._temps.add(dest.name)
            self._request(
                PacketType.CREATE_DESTINATION,
                {JMQ_DESTINATION: dest.name, JMQ_DEST_TYPE: JInt(dest.dtype)},
                lambda _pkt: None,
            )

    def _session(self, ack_mode: int) -> int:
        sid = self._sessions.get(ack_mode)
        if sid is None:

            def made(pkt: Packet) -> None:
                got = pkt.properties.get(JMQ_SESSION_ID)
                if isinstance(got, int):
                    self._sessions[ack_mode] = int(got)

            self._request(PacketType.CREATE_SESSION, {JMQ_ACK_MODE: JInt(ack_mode)}, made)
            sid = self._sessions.get(ack_mode)
            if sid is None:
                raise MappingError("could not create a session")
        return sid

    def on_send(self, f: Frame) -> None:
        # A producer's SENDs mostly carry the same headers: their shape is found by the
        # header list itself (a hit: no header read, parsed or encoded again).
        shape = self._shapes.get(tuple(f.headers))
        rid = None
        if shape is None:
            shape, rid = self._send_shape(f)
        txn = 0
        tname = shape.transaction
        if tname is not None:
            txn = self._txns.get(tname, 0)
            if not txn:
                raise MappingError(f"SEND in transaction {tname!r}, which is not begun")
        dest, reply_to = shape.dest, shape.reply_to
        if dest.dtype & DEST_TEMP:
            self._ensure_temp(dest)
        if reply_to is not None:
            self._ensure_temp(reply_to)
        self._next_cid = cid = self._next_cid + 1  # _cid(), inline: once a SEND
        msg = shape.message(
            f.body, txn, self.id, self.id, self._ip or self._origin_ip(), cid, FLAG_A
        )
        inner = self.inner
        if inner.state is not READY:
            # Not taking messages (closing): the JMQ engine's own answer to the packet.
            self._waiting[cid] = f
            self._feed(msg.raw)
            return
        # Straight to the router (StompLink.take_message): no packet fed to the JMQ
        # engine and decoded there, no SEND_REPLY made and read back here.
        try:
            inner.take_message(msg, txn)
        except RouterError as exc:
            self._send_refused(f, exc.status, exc.reason)
            return
        except Exception as exc:
            # A bug in the broker, not the client's frame (as the JMQ engine answers it).
            log.exception("STOMP connection %s: error handling a SEND", self.id)
            self._send_refused(f, Status.ERROR, f"internal error: {exc}")
            return
        if msg.persistent and not txn:
            # "Stored" (the receipt) only once the record is written, synced with sync
            # on; a DISCONNECT's receipt waits for it (on_disconnect: _waiting).
            self._waiting[cid] = f
            inner.when_stored(lambda: self._send_done(cid, _ok_reply(cid)))
        elif rid is not None:
            self.send("RECEIPT", [("receipt-id", rid)])  # _receipt(f), known
        inner.broker.check_memory()

    def _send_shape(self, f: Frame) -> tuple[SendShape, str | None]:
        """The shape of a SEND not found by its headers, and its receipt: kept under its
        headers but the receipt (which a client makes new for each SEND), so the next
        SEND with the same headers finds it, by its receipt-less headers at worst."""
        rid = f.get("receipt")
        headers = f.headers
        if rid is not None:
            headers = [h for h in headers if h[0] != "receipt"]
        key = tuple(headers)
        shapes = self._shapes
        shape = shapes.get(key) if rid is not None else None
        if shape is None:
            rt = f.get("reply-to")
            shape = SendShape(
                headers, self._dest(f.get("destination")), self._dest(rt) if rt else None
            )
            # Per connection, so few: a producer of ever new headers (a counter, a time)
            # empties it now and then.
            remember(shapes, key, shape, CONNECTION_CACHE)
        return shape, rid

    def _origin_ip(self) -> bytes:
        """The client's address for its messages' IDs, as a JMQ client puts its own there
        (zero when the peer is unknown, e.g. in tests that feed frames)."""
        ip = self._ip
        if ip is None:
            try:
                ip = ip_field(self.peer.rpartition(":")[0])
            except ValueError:
                ip = IP_ZERO
            self._ip = ip
        return ip

    def on_subscribe(self, f: Frame) -> None:
        dest = parse_destination(f.get("destination"), self.id)
        sid = f.get("id")
        if sid is None:
            if self.version != "1.0":
                raise MappingError("SUBSCRIBE without an id header")
            sid = "/subscription-to/" + dest.stomp  # as the stock bridge names it
        if sid in self.subs:
            raise MappingError(f"subscription {sid!r} exists already on this connection")
        ack = f.get("ack", "auto") or "auto"
        mode = _ACK_MODES.get(ack)
        if mode is None:
            raise MappingError(f"ack:{ack} is not auto, client or client-individual")
        durable = f.get("durable-subscriber-name") or f.get("persistent-subscription-name")
        if durable and not dest.dtype & DEST_TOPIC:
            durable = None  # a queue's subscription is durable anyway (the stock bridge too)
        sub = Subscription(sid, dest, ack, durable)
        self._ensure_temp(dest)
        props: dict[str, object] = {
            JMQ_DESTINATION: dest.name,
            JMQ_DEST_TYPE: JInt(dest.dtype),
            JMQ_SESSION_ID: JLong(self._session(mode)),
            JMQ_SIZE: JInt(self.settings.prefetch),
        }
        selector = f.get("selector")
        if selector:
            props[JMQ_SELECTOR] = selector
        if durable:
            props[JMQ_DURABLE_NAME] = durable
        if (f.get("no-local") or "").lower() == "true":
            props[JMQ_NO_LOCAL] = True
        self.subs[sid] = sub

        def added(pkt: Packet) -> None:
            p = pkt.properties
            cons = p.get(JMQ_CONSUMER_ID)
            if p.get(JMQ_STATUS) != Status.OK or not isinstance(cons, int):
                self.subs.pop(sid, None)
                reason = p.get(JMQ_REASON) or f"status {p.get(JMQ_STATUS)}"
                log.info("STOMP connection %s: SUBSCRIBE %s refused: %s", self.id, sid, reason)
                self._error(f"SUBSCRIBE to {dest.stomp} refused: {reason}", f)
                self.release_held()
                return
            sub.cid = int(cons)
            self._by_cid[sub.cid] = sub
            self._receipt(f)
            self.release_held()

        # The engine answers ADD_CONSUMER, then delivers what waits at once (render):
        # those frames are held until the receipt is written, so they come after it.
        self._adding, self._held = sub, []
        self._request(PacketType.ADD_CONSUMER, props, added)

    def on_unsubscribe(self, f: Frame) -> None:
        sid = f.get("id")
        durable = f.get("durable-subscriber-name") or f.get("persistent-subscription-name")
        sub = self.subs.get(sid) if sid is not None else None
        if sub is None and sid is None and self.version == "1.0":
            d = f.get("destination")
            sub = next((s for s in self.subs.values() if s.dest.stomp == d), None)
        if sub is None and not durable:
            raise MappingError(f"no subscription {sid!r} on this connection")
        if sub is not None:
            del self.subs[sub.id]
            self._by_cid.pop(sub.cid, None)
            if sub.cid:
                # Its unacked messages go back to be delivered again.
                self._request(
                    PacketType.DELETE_CONSUMER,
                    {JMQ_CONSUMER_ID: JLong(sub.cid), JMQ_REDELIVER_ALL: True},
                    (lambda _p: None) if durable else self._status_reply(f, "UNSUBSCRIBE"),
                )
        if durable:
            props: dict[str, object] = {JMQ_DURABLE_NAME: durable}
            if self.inner.client_id:
                props[JMQ_CLIENT_ID] = self.inner.client_id
            self._request(
                PacketType.DELETE_CONSUMER, props, self._status_reply(f, f"UNSUBSCRIBE {durable}")
            )

    def _acked(self, f: Frame) -> tuple[Subscription, list[tuple[str, bytes]]]:
        """The subscription and messages an ACK or NACK names (cumulative for client)."""
        if self.version == "1.2":
            ack_id = f.get("id")
            if ack_id is None:
                raise MappingError(f"{f.command} without an id header")
            sub_cid, _, msg_id = ack_id.partition(":")
            sub = self._by_cid.get(int(sub_cid)) if sub_cid.isdigit() else None
        else:
            msg_id = f.get("message-id") or ""
            if not msg_id:
                raise MappingError(f"{f.command} without a message-id header")
            sname = f.get("subscription")
            if sname is not None:
                sub = self.subs.get(sname)
            else:
                sub = next((s for s in self.subs.values() if msg_id in s.unacked), None)
        if sub is None or msg_id not in sub.unacked:
            # 1.2 names the message by the MESSAGE's ack header: said back as it came.
            what = f"id {f.get('id')!r}" if self.version == "1.2" else f"message {msg_id!r}"
            raise MappingError(f"{f.command} of {what}, which names no message waiting for one")
        if sub.ack == "client":
            taken = []
            for mid, key in sub.unacked.items():
                taken.append((mid, key))
                if mid == msg_id:
                    break
        else:
            taken = [(msg_id, sub.unacked[msg_id])]
        for mid, _ in taken:
            del sub.unacked[mid]
        return sub, taken

    def on_ack(self, f: Frame) -> None:
        tname = f.get("transaction")
        if tname is None:
            sub, taken = self._acked(f)
            self._ack_now(f, sub, taken)
            return
        # Refused before the messages are taken (_acked): they stay the client's to ack.
        txn = self._txns.get(tname)
        if not txn:
            raise MappingError(f"ACK in transaction {tname!r}, which is not begun")
        sub, taken = self._acked(f)
        body = b"".join(_ACK_BLOCK.pack(sub.cid, key) for _, key in taken)
        self._request(
            PacketType.ACKNOWLEDGE,
            None,
            self._status_reply(f, "ACK"),
            body=body,
            fields={VH_TRANSACTIONID: txn},
        )

    def _ack_now(self, f: Frame, sub: Subscription, taken: list[tuple[str, bytes]]) -> None:
        """An ACK outside a transaction, straight to the router's acknowledgements (what
        the JMQ engine's ACKNOWLEDGE does for it, without a packet each way)."""
        sess = self.inner.consumer_sessions.get(sub.cid)
        store = self.router.store
        mark = store.submitted if store is not None else 0
        found = 0
        if sess is not None:
            cid = sub.cid
            found = self.router.acks.acknowledge(sess, [(cid, key) for _, key in taken])
        if found != len(taken):
            reason = f"{len(taken) - found} message(s) not delivered and unacknowledged here"
            log.info("STOMP connection %s: ACK refused: %s", self.id, reason)
            self._error(f"ACK refused: {reason}", f)
        elif f.get("receipt") is not None:
            if store is not None and store.submitted != mark:
                # Persistent messages were settled: the receipt waits until that is
                # written (synced with sync on), as the JMQ engine's reply does.
                self.inner.when_stored(lambda: self._receipt(f))
            else:
                self._receipt(f)

    def on_nack(self, f: Frame) -> None:
        if self.version == "1.0":
            raise ProtocolError("NACK is not a STOMP 1.0 frame")
        tname = f.get("transaction")
        if tname is not None and not self._txns.get(tname):
            raise MappingError(f"NACK in transaction {tname!r}, which is not begun")
        sub, taken = self._acked(f)
        if tname is not None:
            # Part of the transaction (as an ACK can be): done when it commits.
            nacks = self._txn_nacks
            if nacks is None:
                nacks = self._txn_nacks = {}
            nacks.setdefault(tname, []).append((sub, taken))
        else:
            self._redeliver(sub, taken)
        self._receipt(f)

    def _redeliver(self, sub: Subscription, taken: list[tuple[str, bytes]]) -> None:
        """NACKed messages back to the destination, marked redelivered (and counted
        towards the DMQ)."""
        body = b"".join(_ACK_BLOCK.pack(sub.cid, key) for _, key in taken)
        self._request(PacketType.REDELIVER, {JMQ_SET_REDELIVERED: True}, body=body)

    def _nacks_undone(self, nacks: list[tuple[Subscription, list[tuple[str, bytes]]]]) -> None:
        """A transaction's NACKs undone (ABORT, a COMMIT refused): the messages wait
        for the client's ACK or NACK again, in the order they were delivered in."""
        for sub, taken in nacks:
            if self.subs.get(sub.id) is not sub:
                continue  # unsubscribed since: its messages went back then
            for mid, key in reversed(taken):
                sub.unacked[mid] = key
                sub.unacked.move_to_end(mid, last=False)

    def on_begin(self, f: Frame) -> None:
        name = f.get("transaction")
        if not name:
            raise MappingError("BEGIN without a transaction header")
        if name in self._txns:
            raise MappingError(f"transaction {name!r} is already begun")

        def started(pkt: Packet) -> None:
            p = pkt.properties
            tid = p.get(JMQ_TRANSACTION_ID)
            if p.get(JMQ_STATUS) != Status.OK or not isinstance(tid, int):
                self._error(f"BEGIN {name} refused: {p.get(JMQ_REASON)}", f)
                return
            self._txns[name] = int(tid)
            self._receipt(f)

        self._request(
            PacketType.START_TRANSACTION,
            {JMQ_SESSION_ID: JLong(self._session(AckMode.NONE))},
            started,
        )

    def _end(self, f: Frame, ptype: int, what: str) -> None:
        name = f.get("transaction") or ""
        tid = self._txns.pop(name, None)
        if tid is None:
            raise MappingError(f"{what} of transaction {name!r}, which is not begun")
        props: dict[str, object] = {JMQ_TRANSACTION_ID: JLong(tid)}
        nacks = self._txn_nacks.pop(name, None) if self._txn_nacks else None
        if ptype == PacketType.ROLLBACK_TRANSACTION:
            # What was acked in it comes again, marked redelivered; what was NACKed in
            # it is the client's again.
            props[JMQ_REDELIVER] = True
            if nacks:
                self._nacks_undone(nacks)
            self._request(ptype, props, self._status_reply(f, f"{what} {name}"))
            return
        if not nacks:
            self._request(ptype, props, self._status_reply(f, f"{what} {name}"))
            return
        reply = self._status_reply(f, f"{what} {name}")

        def committed(pkt: Packet) -> None:
            reply(pkt)  # the receipt, then the messages the NACKs give back
            if pkt.properties.get(JMQ_STATUS) == Status.OK:
                for sub, taken in nacks:
                    # Unsubscribed since: its unacked messages went back with it.
                    if self.subs.get(sub.id) is sub:
                        self._redeliver(sub, taken)
            else:
                self._nacks_undone(nacks)

        self._request(ptype, props, committed)

    def on_commit(self, f: Frame) -> None:
        self._end(f, PacketType.COMMIT_TRANSACTION, "COMMIT")

    def on_abort(self, f: Frame) -> None:
        self._end(f, PacketType.ROLLBACK_TRANSACTION, "ABORT")

    def on_disconnect(self, f: Frame) -> None:
        # Everything before it has been answered (the JMQ engine answers in order, a
        # persistent send once stored): the receipt waits for those still outstanding.
        if self._waiting:
            self._disconnect = f
            self._waiting_done(lambda: self._disconnected(f))
            return
        self._disconnected(f)

    def _waiting_done(self, then: Callable[[], None]) -> None:
        pending = dict(self._waiting)
        left = set(pending)

        for cid, cb in pending.items():

            def wrapped(pkt: Packet, cid: int = cid, cb: Reply | Frame = cb) -> None:
                self._answered(cb, pkt)
                left.discard(cid)
                if not left:
                    then()

            self._waiting[cid] = wrapped

    def _disconnected(self, f: Frame) -> None:
        if self.state is CLOSED:
            return
        self._receipt(f)
        self._close("DISCONNECT from the client")


def _ok_reply(cid: int) -> bytes:
    """The SEND_REPLY OK the JMQ engine would have written for SEND ``cid``."""
    return b"".join((SEND_OK_HEAD, _I64.pack(cid), SEND_OK_REST))
