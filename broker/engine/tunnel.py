"""One HTTP tunnel connection's reliable stream, sans-IO (the broker's end of what the
stock client's ``HttpTunnelConnection`` speaks).

Both directions carry sequenced packets (DATA, CONN_OPTION and CONN_CLOSE each take a
sequence number, starting at 0) that the other end acknowledges with ACK packets: the
ACK's sequence is the last one received in order, its window the number of packets the
receiver still has room for.  The sender keeps unacknowledged packets, sends only inside
the peer's window, retransmits the oldest one when its timer runs out (the timeout
doubles each time, and follows the measured round trip otherwise) and at once after
three duplicate ACKs.

The driver (``broker/server/tunnel.py``) feeds packets from push requests to
:meth:`TunnelConnection.receive`, hands the JMQ bytes from :meth:`take_inbox` to the
connection engine, writes the engine's output with :meth:`send`, and answers pull
requests with :meth:`take_pull`.  Time is passed in (``now``, seconds), never read.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from broker.protocol.httptunnel import (
    MAX_DATA,
    SEQ_MOD,
    ConnOption,
    TunnelPacket,
    TunnelType,
    decode_option,
    encode_option,
)

__all__ = [
    "FAST_RETRANSMIT_ACKS",
    "INITIAL_RTO",
    "MAX_RTO",
    "MIN_RTO",
    "RX_WINDOW",
    "TunnelConnection",
]

log = logging.getLogger("broker.tunnel")

# The client's own constants (HttpTunnelDefaults): a receive window of 64 packets, a
# first retransmission after 15 s, the measured timeout kept between 1 s and 3 min,
# fast retransmission on the third duplicate acknowledgement.
RX_WINDOW = 64
INITIAL_TX_WINDOW = 16
INITIAL_RTO = 15.0
MIN_RTO = 1.0
MAX_RTO = 180.0
FAST_RETRANSMIT_ACKS = 3
# With no pull period the servlet's rule: a connection with no request for 60 s is dead.
DEFAULT_IDLE = 60.0
_SEQUENCED = (TunnelType.DATA, TunnelType.CONN_CLOSE, TunnelType.CONN_OPTION)


def _dist(a: int, b: int) -> int:
    """How far ``b`` is ahead of ``a`` in sequence space (0 .. 2**32-1)."""
    return (b - a) % SEQ_MOD


@dataclass(slots=True)
class _Sent:
    packet: TunnelPacket
    sent_at: float
    retransmitted: bool = False


class TunnelConnection:
    """The broker's end of one tunnel connection."""

    def __init__(
        self,
        conn_id: int,
        now: float,
        *,
        pull_period: int = -1,
        connection_timeout: int = 300,
    ) -> None:
        self.conn_id = conn_id
        self.pull_period = pull_period
        self.connection_timeout = connection_timeout
        # -- receiving (client -> broker)
        self.next_recv = 0
        self._out_of_order: dict[int, TunnelPacket] = {}
        self._inbox: list[bytes] = []
        self._inbox_packets = 0
        self.reading_paused = False
        self._advertised = RX_WINDOW
        self.peer_closed = False  # the client's CONN_CLOSE arrived (in order)
        # -- sending (broker -> client)
        self.next_send = 0
        self.last_ack = SEQ_MOD - 1  # "-1": nothing acknowledged yet
        self.tx_window = INITIAL_TX_WINDOW
        self._unsent = bytearray()
        self._queued: deque[TunnelPacket] = deque()  # sequenced, not yet sent
        self._inflight: deque[_Sent] = deque()
        self._resend: list[TunnelPacket] = []
        self._control: list[TunnelPacket] = []  # ACKs (the latest only), CONN_INIT_ACK
        self._ack_due = False
        self._dup_acks = 0
        self.rto = INITIAL_RTO
        self._measured_rto = INITIAL_RTO
        self.retransmits = 0
        self.close_seq: int | None = None
        self._closing = False  # CONN_CLOSE to be queued once the data is out
        self.close_acked = False
        # -- liveness
        self.requests = 0  # HTTP requests of this connection in progress
        self.last_request = now
        self.bytes_in = 0
        self.bytes_out = 0
        self._control.append(TunnelPacket(TunnelType.CONN_INIT_ACK, conn_id))
        # The broker's side sets the connection's options first (HTTPProtocol.accept):
        # the pull period only when not the client's default (-1), the timeout always.
        if pull_period != -1:
            self._queue_sequenced(
                TunnelType.CONN_OPTION, encode_option(ConnOption.PULL_PERIOD, pull_period)
            )
        self._queue_sequenced(
            TunnelType.CONN_OPTION,
            encode_option(ConnOption.CONNECTION_TIMEOUT, connection_timeout),
        )

    # -- receiving -------------------------------------------------------------------

    def receive(self, pkt: TunnelPacket, now: float) -> None:
        """A packet the client pushed.  ACKs move the send window; sequenced packets are
        stored in order (out-of-order ones inside the window wait for the gap), and
        acknowledged; anything else is ignored."""
        ptype = pkt.type
        if ptype == TunnelType.ACK:
            self._on_ack(pkt, now)
            return
        if ptype not in _SEQUENCED:
            log.debug("tunnel connection %s: packet type %s ignored", self.conn_id, ptype)
            return
        if self.peer_closed:
            self._ack_due = True
            return
        ahead = _dist(self.next_recv, pkt.seq)
        if ahead < self._window():
            self._out_of_order[pkt.seq] = pkt
            while self.next_recv in self._out_of_order:
                self._accept(self._out_of_order.pop(self.next_recv))
                self.next_recv = (self.next_recv + 1) % SEQ_MOD
                if self.peer_closed:
                    self._out_of_order.clear()
                    break
        # In order, a duplicate, or beyond the window: the ACK says where we are.
        self._ack_due = True

    def _accept(self, pkt: TunnelPacket) -> None:
        if pkt.type == TunnelType.DATA:
            if pkt.body:
                self._inbox.append(pkt.body)
                self._inbox_packets += 1
                self.bytes_in += len(pkt.body)
        elif pkt.type == TunnelType.CONN_CLOSE:
            self.peer_closed = True
            # The client stops reading once it has sent its close: nothing more to send.
            self._unsent.clear()
            self._queued.clear()
            self._inflight.clear()
            self._resend.clear()
        elif pkt.type == TunnelType.CONN_OPTION:
            try:
                option, value = decode_option(pkt.body)
            except ValueError:
                return
            if option == ConnOption.PULL_PERIOD:
                self.pull_period = value

    def _window(self) -> int:
        held = self._inbox_packets if self.reading_paused else 0
        return max(RX_WINDOW - held - len(self._out_of_order), 0)

    def take_inbox(self) -> bytes:
        """The JMQ bytes received in order since the last call (nothing while reading
        is paused); a window that had closed is reopened with an ACK."""
        if self.reading_paused or not self._inbox:
            return b""
        data = b"".join(self._inbox)
        self._inbox.clear()
        self._inbox_packets = 0
        if self._advertised < RX_WINDOW // 2:
            self._ack_due = True
        return data

    # -- sending ---------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """The JMQ bytes for the client (the engine's output)."""
        if self._closing or self.peer_closed or not data:
            return
        self._unsent += data

    def close(self) -> None:
        """The engine closed: CONN_CLOSE follows the data still to send."""
        if self._closing or self.peer_closed:
            return
        self._closing = True
        self._packetize()
        self._queue_sequenced(TunnelType.CONN_CLOSE, b"")

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def finished(self) -> bool:
        """Nothing more to do: our CONN_CLOSE was acknowledged, or the client closed and
        has been told so."""
        if self.close_acked:
            return True
        return self.peer_closed and not self._ack_due and not self._control

    @property
    def unacked_bytes(self) -> int:
        """Output not yet acknowledged (for the engine's write back-pressure)."""
        queued = sum(len(p.body) for p in self._queued)
        flying = sum(len(s.packet.body) for s in self._inflight)
        return len(self._unsent) + queued + flying

    def _queue_sequenced(self, ptype: TunnelType, body: bytes) -> int:
        seq = self.next_send
        self.next_send = (seq + 1) % SEQ_MOD
        self._queued.append(TunnelPacket(ptype, self.conn_id, seq, 0, body))
        if ptype == TunnelType.CONN_CLOSE:
            self.close_seq = seq
        return seq

    def _packetize(self) -> None:
        buf = self._unsent
        if not buf:
            return
        view = memoryview(buf)
        for pos in range(0, len(buf), MAX_DATA):
            self._queue_sequenced(TunnelType.DATA, bytes(view[pos : pos + MAX_DATA]))
        view.release()
        buf.clear()

    def has_output(self) -> bool:
        """Whether a pull would carry something now."""
        if self._control or self._ack_due or self._resend:
            return True
        if self._unsent and not self._closing:
            self._packetize()
        return bool(self._queued) and self._in_window(self._queued[0].seq)

    def _in_window(self, seq: int) -> bool:
        return _dist((self.last_ack + 1) % SEQ_MOD, seq) < self.tx_window

    def take_pull(self, now: float, budget: int) -> list[TunnelPacket]:
        """The packets for one pull response, about ``budget`` bytes at most (at least
        one packet when there is any).  CONN_INIT_ACK goes alone: the client reads only
        the first packet of the response that ends its connect."""
        out: list[TunnelPacket] = []
        if self._control and self._control[0].type == TunnelType.CONN_INIT_ACK:
            return [self._control.pop(0)]
        size = 0
        out.extend(self._control)
        self._control.clear()
        for p in self._resend:
            out.append(p)
            size += 24 + len(p.body)
        self._resend.clear()
        if self._unsent and not self._closing:
            self._packetize()
        q = self._queued
        while q and self._in_window(q[0].seq) and (not out or size < budget):
            p = q.popleft()
            self._inflight.append(_Sent(p, now))
            if p.type == TunnelType.DATA:
                self.bytes_out += len(p.body)
            out.append(p)
            size += 24 + len(p.body)
        if self._ack_due:
            self._ack_due = False
            win = self._window()
            self._advertised = win
            out.append(
                TunnelPacket(TunnelType.ACK, self.conn_id, (self.next_recv - 1) % SEQ_MOD, win)
            )
        return out

    def _on_ack(self, pkt: TunnelPacket, now: float) -> None:
        seq = pkt.seq
        if self.close_seq is not None and seq == self.close_seq:
            self.close_acked = True
        fl = self._inflight
        if fl:
            first = fl[0].packet.seq
            span = _dist(first, seq)
            if span < len(fl):
                for _ in range(span + 1):
                    sent = fl.popleft()
                    if not sent.retransmitted and sent.packet.seq == seq:
                        self._update_rto(now - sent.sent_at)
                self._dup_acks = 0
                self.rto = self._measured_rto
            elif seq == (first - 1) % SEQ_MOD:
                self._dup_acks += 1
                if self._dup_acks == FAST_RETRANSMIT_ACKS:
                    self._retransmit_first(now)
        self.last_ack = seq
        self.tx_window = max(pkt.winsize, 0)

    def _update_rto(self, rtt: float) -> None:
        # RFC 793's smoothed round trip (alpha 7/8), twice it as the timeout.
        srtt = (self._measured_rto / 2) * 7 / 8 + rtt / 8
        self._measured_rto = max(srtt * 2, MIN_RTO)

    def _retransmit_first(self, now: float) -> None:
        first = self._inflight[0]
        first.retransmitted = True
        first.sent_at = now
        self.retransmits += 1
        if first.packet not in self._resend:
            self._resend.append(first.packet)

    def tick(self, now: float) -> bool:
        """The retransmission timer: True when the oldest unacknowledged packet is due
        again; then every unacknowledged packet is in the next pull.  (The client resends
        only the oldest; but a pull answer carries many packets, and when it is lost they
        are all lost: one at a time, each would wait a timeout of its own.  The client
        takes repeats it already has as duplicates.)"""
        if not self._inflight:
            return False
        first = self._inflight[0]
        if now - first.sent_at < self.rto:
            return False
        if first.retransmitted:
            self.rto = min(self.rto * 2, MAX_RTO)
        self.retransmits += 1
        resend = self._resend
        for sent in self._inflight:
            sent.retransmitted = True
            sent.sent_at = now
            if sent.packet not in resend:
                resend.append(sent.packet)
        return True

    # -- liveness --------------------------------------------------------------------

    def request_started(self, now: float) -> None:
        self.requests += 1
        self.last_request = now

    def request_ended(self, now: float) -> None:
        self.requests = max(self.requests - 1, 0)
        self.last_request = now

    @property
    def idle_limit(self) -> float:
        """Seconds without any request after which the client is taken for gone: the
        connection timeout, and at least five pull periods for a polling client."""
        limit = float(self.connection_timeout) if self.connection_timeout > 0 else DEFAULT_IDLE
        if self.pull_period > 0:
            limit = max(limit, 5.0 * self.pull_period)
        return limit

    def expired(self, now: float) -> bool:
        """No request in progress and none for longer than :attr:`idle_limit`."""
        return self.requests == 0 and now - self.last_request > self.idle_limit
