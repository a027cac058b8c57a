"""The message hot path: SEND, flow control, ACKNOWLEDGE, REDELIVER, browsing.

Nothing here allocates per message beyond the reply bytes: replies go straight into the
driver's batch (``write``) and no effects are produced.
"""

from __future__ import annotations

import logging
import struct
import time

from broker.core.errors import RouterError, remote_failure
from broker.core.message import Message
from broker.core.monitoring import destination_map
from broker.core.session import Session
from broker.protocol.admin_types import ADMIN_QUEUE, ADMIN_QUEUES, BRIDGE_QUEUE_PREFIX
from broker.protocol.dest_metrics import encode_dest_metrics_map
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_ACK_TYPE,
    JMQ_BYTES,
    JMQ_CAN_CREATE,
    JMQ_COMMENT,
    JMQ_CONSUMER_ID,
    JMQ_DEAD_REASON,
    JMQ_DESTINATION,
    JMQ_MAX_MSG_BYTES,
    JMQ_METRICS,
    JMQ_PRODUCER_ID,
    JMQ_RBUFFER_SIZE,
    JMQ_REMOTE_CONSUMER_IDS,
    JMQ_SELECTOR,
    JMQ_SET_REDELIVERED,
    JMQ_SIZE,
    JMQ_STATUS,
)
from broker.protocol.packet import OFF_CONSUMER_ID, OversizedPacket, Packet, build_packet
from broker.protocol.properties import as_int, optional_str
from broker.protocol.types import (
    CURRENT_PACKET_VERSION,
    DEST_QUEUE,
    DEST_TOPIC,
    FLAG_A,
    FLAG_C,
    FLAG_F,
    FLAG_L,
    FLAG_Q,
    HEADER_SIZE,
    AckMode,
    AckType,
    PacketType,
    Status,
    packet_type_name,
)

from .access import AccessRules
from .resources import compile_or_400, credit_bytes
from .states import CLOSED

log = logging.getLogger("broker.connection")

_I64 = struct.Struct(">q")
_ACK_BLOCK = struct.Struct(">q32s")
_ONE_ACK_SIZE = HEADER_SIZE + _ACK_BLOCK.size


def _reply_template(ptype: int, status: int) -> bytes:
    return build_packet(ptype, props={JMQ_STATUS: JInt(status)}, timestamp=0)


# The commonest replies are fixed bytes; only the correlation id changes.
SEND_REPLY_OK = _reply_template(PacketType.SEND_REPLY, Status.OK)
_ACK_REPLY_OK = _reply_template(PacketType.ACKNOWLEDGE_REPLY, Status.OK)


def _with_cid(template: bytes, consumer_id: int) -> bytearray:
    buf = bytearray(template)
    _I64.pack_into(buf, OFF_CONSUMER_ID, consumer_id)
    return buf


class MessageRules(AccessRules):
    """Message, flow-control, acknowledgement and browsing handlers."""

    # -- messages --------------------------------------------------------------------

    def _bridge(self, name: str) -> bool:
        """Whether ``name`` is the bridge service's command queue."""
        bs = self.broker.bridge_service
        return bs is not None and bs.queue == name

    def on_message(self, pkt: Packet) -> None:
        if pkt.prop_size:
            # Checked on arrival, so a bad table is the sender's 400 and never fails
            # later in a selector, the DMQ or an admin listing.
            pkt.properties  # noqa: B018
        self.msgs_in += 1
        m = self.metrics
        m.messages_in += 1
        m.message_bytes_in += pkt.size
        flags = pkt.flags
        try:
            name = pkt.fields.get(1)
            if not isinstance(name, str) or not name:
                raise RouterError(Status.BAD_REQUEST, "message has no destination")
            if flags & FLAG_Q and (
                name in ADMIN_QUEUES
                or (name.startswith(BRIDGE_QUEUE_PREFIX) and self._bridge(name))
            ):
                if self.service.type == "ADMIN" and self.admin:
                    # Admin requests are not stored: answered on the JMSReplyTo queue
                    # (admin.md; imqbridgemgr's: server/admin_service/bridge.py).
                    if flags & FLAG_A:
                        self.write(_with_cid(SEND_REPLY_OK, pkt.consumer_id))
                    self.admin(self, pkt)
                    if flags & (FLAG_C | FLAG_F):
                        self._flow_after_send(pkt.producer_id, flags)
                    return
                if name != ADMIN_QUEUE:
                    # Nothing would ever read it (ADMIN_QUEUE: the access rules answer).
                    raise RouterError(Status.FORBIDDEN, f"{name} is only for ADMIN services")
            msg = Message(pkt, name, self.id)
            dest_type = DEST_QUEUE if flags & FLAG_Q else DEST_TOPIC
            if not self._send_allowed(pkt, name, dest_type):
                self._flow_after_send(pkt.producer_id, flags)
                return
            txn_id = pkt.transaction_id
            if txn_id:
                txn = self.router.txns.transaction(txn_id, self)
                self.router.txns.transacted_send(txn, msg, dest_type, self)
            else:
                self.router.route(msg, self, dest_type)
        except RouterError as exc:
            if flags & FLAG_A:
                self.reply(pkt, exc.status, reason=exc.reason)
            else:
                log.info(
                    "message to %s from %s refused: %s", pkt.fields.get(1), self.peer, exc.reason
                )
            self._flow_after_send(pkt.producer_id, flags)
            return
        if flags & FLAG_A:
            reply = _with_cid(SEND_REPLY_OK, pkt.consumer_id)
            if msg.persistent and not txn_id:
                # With sync on, "stored" is said only once the record is on disk.
                self.when_stored(lambda: self.write(reply))
            else:
                self.write(reply)
        self.broker.check_memory()
        if flags & (FLAG_C | FLAG_F):
            self._flow_after_send(pkt.producer_id, flags)

    # -- flow control ------------------------------------------------------------------

    def on_oversized_message(self, pkt: OversizedPacket) -> None:
        """A message over the frame limit, read past unseen: refused with ENTITY_TOO_LARGE
        as OpenMQ's broker does (the stock client reports C4095), and, like any refused
        message, it still answers the producer's flow control: the client that marked it
        as the last of its credit waits for RESUME_FLOW before its next send."""
        reason = f"message of {pkt.size} bytes exceeds imq.message.max_size"
        log.warning("refused a %s from %s: %s", packet_type_name(pkt.type), self.peer, pkt.reason)
        self._reply_error(pkt.type, pkt.flags, pkt.consumer_id, Status.ENTITY_TOO_LARGE, reason)
        self._flow_after_send(pkt.producer_id, pkt.flags)

    def _flow_after_send(self, producer_id: int, flags: int) -> None:
        # The client stops after a C (producer) or F (connection) flagged message until
        # we resume it; without this answer its send() blocks forever.
        if flags & FLAG_C:
            # Its next credit, or none yet: RESUME_FLOW follows when the destination
            # has drained (limits.producer_credit).
            self.resume_producer(producer_id)
        if flags & FLAG_F:
            count = self.broker.memory.count
            if count == 0:
                # Red memory state: this client waits until memory recovers.
                self.broker.flow_waiting.add(self)
            else:
                self.resume_connection_flow(count)

    def resume_connection_flow(self, count: int) -> None:
        """RESUME_FLOW for the whole connection (no producer or consumer id): the memory
        state's count, bytes and the message size limit, as OpenMQ's broker sends it."""
        if self.state is not CLOSED:
            b = self.broker
            props = {
                JMQ_SIZE: JInt(count),
                JMQ_BYTES: JLong(b.memory.bytes),
                JMQ_MAX_MSG_BYTES: JLong(b.router.settings.max_message_size),
            }
            self.write(build_packet(PacketType.RESUME_FLOW, props=props))

    def resume_producer(self, pid: int) -> None:
        """RESUME_FLOW for one producer with its next credit, unless flow control holds
        it (then the destination resumes it when there is room)."""
        if self.state is CLOSED:
            return
        prod = self.router.producer(pid)
        if prod is None:
            size = nbytes = -1
        else:
            size = self.router.limits.producer_credit(prod, self)
            if size == 0:
                return
            nbytes = credit_bytes(prod.destination, size)
        self.write(
            build_packet(
                PacketType.RESUME_FLOW,
                props={
                    JMQ_PRODUCER_ID: JLong(pid),
                    JMQ_SIZE: JInt(size),
                    JMQ_BYTES: JLong(nbytes),
                },
            )
        )

    def pause_producer(self, pid: int) -> None:
        """RESUME_FLOW with JMQSize 0 for one producer: an administrator paused its
        destination; it sends nothing more until resume_producer gives it a credit."""
        if self.state is not CLOSED:
            props = {JMQ_PRODUCER_ID: JLong(pid), JMQ_SIZE: JInt(0), JMQ_BYTES: JLong(0)}
            self.write(build_packet(PacketType.RESUME_FLOW, props=props))

    def on_resume_flow(self, pkt: Packet) -> None:
        # JMQSize as OpenMQ's broker reads it (FlowHandler), not as the seed words it:
        # 0 lifts the limit (the seed: "don't send any message"), and for the whole
        # connection -1 or none keeps the limit it had.  JMQBytes is not read, by OpenMQ
        # either: flow towards the client is counted in messages only.
        props = pkt.properties
        size = props.get(JMQ_SIZE, props.get(JMQ_RBUFFER_SIZE))
        cid = props.get(JMQ_CONSUMER_ID)
        if cid is not None:
            cons = self.router.consumer(as_int(cid))
            if cons is not None and cons.link is self:
                if isinstance(size, int):
                    cons.resume(-1 if size == 0 else int(size))
                else:
                    cons.resume(None)
                cons.queue.dispatch(int(time.time() * 1000))
            return
        if isinstance(size, int) and size > 0:
            self.flow_limit = int(size)
        elif size == 0:
            self.flow_limit = -1
        self.flow_left = self.flow_limit
        self.flow_paused = False
        self.router.redispatch(self.all_sessions())

    def on_flow_paused(self, pkt: Packet) -> None:
        """FLOW_PAUSED: the client has stopped sending until it gets a RESUME_FLOW (the
        stock clients never send it).  Answered as OpenMQ's broker answers it, like a
        message with the F bit: RESUME_FLOW now, or when memory leaves the red state.
        Its JMQSize (the bytes the client means to send) is not needed for that."""
        count = self.broker.memory.count
        if count == 0:
            self.broker.flow_waiting.add(self)
        else:
            self.resume_connection_flow(count)

    # -- acknowledgements -----------------------------------------------------------

    def _ack_blocks(self, pkt: Packet) -> dict[Session, list[tuple[int, bytes]]] | None:
        body = pkt.body
        if not body or len(body) % 40:
            return None
        by_session: dict[Session, list[tuple[int, bytes]]] = {}
        cs = self.consumer_sessions
        for off in range(0, len(body), 40):
            cid, key = _ACK_BLOCK.unpack_from(body, off)
            sess = cs.get(cid)
            if sess is not None:
                by_session.setdefault(sess, []).append((cid, key))
        return by_session

    def on_acknowledge(self, pkt: Packet) -> None:
        if (
            pkt.size == _ONE_ACK_SIZE
            and pkt.prop_offset == HEADER_SIZE
            and pkt.version == CURRENT_PACKET_VERSION
        ):
            # One block, no variable header (so no transaction) and no properties: an
            # AUTO_ACKNOWLEDGE consumer's one message, whose client waits for the reply.
            # No body copy, no grouping by session (a dict and a list per acknowledgement).
            # The reply leaves when data_received returns, whatever the order here.
            cid, key = _ACK_BLOCK.unpack_from(pkt.raw, HEADER_SIZE)
            sess = self.consumer_sessions.get(cid)
            if sess is not None and sess.ack_mode != AckMode.NO_ACKNOWLEDGE:
                store = self.router.store
                mark = store.submitted if store is not None else 0
                home: list[int] = []
                found = self.router.acks.acknowledge(sess, ((cid, key),), home_gone=home)
                if pkt.flags & FLAG_A:
                    if found:
                        self._ack_reply(
                            pkt.consumer_id, store is not None and store.submitted != mark
                        )
                    else:
                        self._ack_failed(pkt, 1, home)
                return
        groups = self._ack_blocks(pkt)
        if groups is None:
            self.reply(
                pkt,
                Status.BAD_REQUEST,
                reason=f"acknowledge body of {pkt.body_size} bytes is not n x 40",
            )
            return
        ack_type = dead_reason = 0
        comment = None
        if pkt.prop_size:
            props = pkt.properties
            ack_type = as_int(props.get(JMQ_ACK_TYPE, 0))
            dead_reason = as_int(props.get(JMQ_DEAD_REASON, 0))
            comment = optional_str(props.get(JMQ_COMMENT))
        txn = None
        store = self.router.store
        mark = store.submitted if store is not None else 0
        if pkt.transaction_id:
            try:
                txn = self.router.txns.transaction(pkt.transaction_id, self)
            except RouterError as exc:
                self.reply(pkt, exc.status, reason=exc.reason)
                return
        found = 0
        gone: list[int] = []
        for sess, blocks in groups.items():
            if not sess.acknowledges and txn is None:
                self.reply(
                    pkt, Status.NOT_ALLOWED, reason="acknowledgement on a NO_ACKNOWLEDGE session"
                )
                return
            if txn is not None:
                try:
                    self.router.txns.transacted_ack(txn, sess, blocks)
                except RouterError as exc:
                    self.reply(pkt, exc.status, reason=exc.reason)
                    return
                found += len(blocks)
                continue
            found += self.router.acks.acknowledge(
                sess, blocks, ack_type, dead_reason, comment, home_gone=gone
            )
            if ack_type in (AckType.UNDELIVERABLE, AckType.DEAD):
                log.info(
                    "%d message(s) given up by the client (JMQAckType %s) removed",
                    len(blocks),
                    ack_type,
                )
        if pkt.flags & FLAG_A:
            asked = pkt.body_size // 40
            if found == asked:
                self._ack_reply(pkt.consumer_id, store is not None and store.submitted != mark)
            else:
                self._ack_failed(pkt, asked - found, gone, sum(map(len, groups.values())))

    def _ack_failed(
        self, pkt: Packet, missing: int, gone: list[int], known: int | None = None
    ) -> None:
        """An acknowledgement that named messages it could not acknowledge, answered as
        OpenMQ's broker answers it: GONE with JMQRemote when their home broker went away
        (the stock Java client throws C4110 and, for AUTO, makes its consumers again),
        NOT_FOUND for a consumer this connection never had, CONFLICT for a message not
        delivered and unacknowledged here (acknowledged already, put back, or delivered
        by a broker that has since failed over)."""
        if gone:
            reason = f"{len(gone)} message(s) of a remote broker that is gone"
            props = remote_failure(gone)
            log.info(
                "acknowledgement not done: %s (consumers %s)",
                reason,
                props[JMQ_REMOTE_CONSUMER_IDS],
            )
            self.reply(pkt, Status.GONE, props, reason=reason)
        elif known is not None and known < pkt.body_size // 40:
            reason = "acknowledgement names a consumer this connection does not have"
            log.info("%s", reason)
            self.reply(pkt, Status.NOT_FOUND, reason=reason)
        else:
            reason = f"{missing} message(s) not delivered and unacknowledged here"
            log.info("acknowledgement not done: %s", reason)
            self.reply(pkt, Status.CONFLICT, reason=reason)

    def _ack_reply(self, consumer_id: int, wait: bool) -> None:
        reply = _with_cid(_ACK_REPLY_OK, consumer_id)
        if wait:
            # Persistent messages were settled: the reply waits until that, and
            # their delivery counts, are written (synced with sync on; the database
            # store always commits), so an acknowledgement the client was told of
            # survives a SIGKILL (was: the message could come back after one, and
            # without the redelivered flag when its delivery count was not stored).
            self.when_stored(lambda: self.write(reply))
        else:
            self.write(reply)

    def on_redeliver(self, pkt: Packet) -> None:
        groups = self._ack_blocks(pkt)
        if groups is None:
            self.reply(pkt, Status.BAD_REQUEST, reason="redeliver body is not n x 40")
            return
        set_r = bool(pkt.properties.get(JMQ_SET_REDELIVERED, False))
        for sess, blocks in groups.items():
            self.router.acks.redeliver(sess, blocks, set_r)
        self.reply(pkt, Status.OK)

    # -- browsing --------------------------------------------------------------------

    def on_browse(self, pkt: Packet) -> None:
        props = pkt.properties
        try:
            name = props.get(JMQ_DESTINATION)
            if not isinstance(name, str):
                raise RouterError(Status.BAD_REQUEST, f"{JMQ_DESTINATION} is missing")
            selector = compile_or_400(props.get(JMQ_SELECTOR))
            self._require(name, DEST_QUEUE, "browse")
            if props.get(JMQ_METRICS) is True:
                self._browse_metrics(pkt, name)
                return
            bid, keys = self.router.browse(name, DEST_QUEUE, selector)
        except RouterError as exc:
            extra = None
            if exc.status == Status.NOT_FOUND:
                extra = {JMQ_CAN_CREATE: bool(self.router.settings.autocreate_queue)}
            self.reply(pkt, exc.status, extra, reason=exc.reason)
            return
        self.browsers[bid] = name
        self.reply(pkt, Status.OK, {JMQ_CONSUMER_ID: JLong(bid)}, body=b"".join(keys))

    def _browse_metrics(self, pkt: Packet, name: str) -> None:
        """A BROWSE with JMQMetrics=true: the queue's counters instead of its messages, as
        OpenMQ's broker answers it (no stock client asks): a serialised
        ``DestMetricsCounters`` body, ``JMQMetrics`` true and a fresh ``JMQConsumerID``
        that names no browser."""
        dest = self.router.lookup(name, DEST_QUEUE)
        if dest is None:
            raise RouterError(Status.NOT_FOUND, f"destination {name} not found")
        body = encode_dest_metrics_map(destination_map(dest), int(time.time() * 1000))
        props = {JMQ_CONSUMER_ID: JLong(self.router.uids.next()), JMQ_METRICS: True}
        self.reply(pkt, Status.OK, props, body=body)

    def on_deliver(self, pkt: Packet) -> None:
        bid = pkt.properties.get(JMQ_CONSUMER_ID)
        body = pkt.body
        if bid is None or len(body) % 32:
            self.reply(pkt, Status.BAD_REQUEST, reason="DELIVER needs JMQConsumerID and n x 32")
            return
        browser = self.router.browser(as_int(bid))
        if browser is None or as_int(bid) not in self.browsers:
            self.reply(pkt, Status.NOT_FOUND, reason=f"no browser {bid}")
            return
        keys = [body[i : i + 32] for i in range(0, len(body), 32)]
        msgs = self.router.find_messages(browser[0], keys)
        for i, msg in enumerate(msgs):
            extra = FLAG_L if i == len(msgs) - 1 else 0
            self.write(msg.encode_delivery(as_int(bid), False, 1, extra))
        if msgs:
            self.reply(pkt, Status.OK)
        else:
            self.reply(pkt, Status.NOT_FOUND, reason="none of the messages exist any more")
